//! Gapless series: `client.gapless(tag).issue(key)`.
//!
//! An issue is idempotent by its key (see [`crate::retry`]): the same key always gets the same
//! number, so a request whose answer was lost is sent again, to any node, and never consumes
//! a second number.
use leaf_api::gapless::{IssueRequest, IssuedNumber};
use leaf_api::routes;

use crate::client::{Answer, Call, Client};
use crate::error::ClientError;
use crate::retry::Safety;
use crate::Method;

/// One gapless series of a [`Client`].
#[derive(Debug, Clone, Copy)]
pub struct Gapless<'a> {
    client: &'a Client,
    tag: &'a str,
}

impl Client {
    /// The gapless series `tag` (a tag of profile `gapless`).
    pub fn gapless<'a>(&'a self, tag: &'a str) -> Gapless<'a> {
        Gapless { client: self, tag }
    }
}

impl Gapless<'_> {
    /// The series' number for `key` (`POST /api/gapless/{tag}/issue`): the next one, or the one
    /// the key has (`replayed`). Checked: the answer is for this tag and key, numbered from 1.
    pub async fn issue(&self, key: &str) -> Result<IssuedNumber, ClientError> {
        let req = IssueRequest { key: key.to_string() };
        let path = routes::fill(routes::GAPLESS_ISSUE, &[self.tag]);
        let answer = self.client.execute(Call::with_json(Method::POST, path, &req, Safety::Idempotent)?).await?;
        checked(&answer, self.tag, key)
    }
}

fn checked(answer: &Answer, tag: &str, key: &str) -> Result<IssuedNumber, ClientError> {
    let n: IssuedNumber = answer.json()?;
    if n.tag != tag || n.key != key || n.number == 0 {
        return Err(answer.decode_error(format!(
            "asked for tag {tag:?} key {key:?}, answered number {} of tag {:?} key {:?}",
            n.number, n.tag, n.key
        )));
    }
    Ok(n)
}
