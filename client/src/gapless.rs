//! Gapless series: `client.gapless(tag).issue(key)`, `.reserve(key, hold)`, `.confirm(key)`,
//! `.void(key, reason)`, and the ledger's pages.
//!
//! Each is idempotent by its key (see [`crate::retry`]): the same key always gets the same
//! number, and a reservation is settled once, so a request whose answer was lost is sent
//! again, to any node, and never consumes a second number or settles twice.
//!
//! A number belongs to the caller that took it: its token, or, for a client without a token
//! (where the cluster allows it, `auth.anonymous_gapless`), its settlement secret. This client
//! derives each key's secret from its settlement key
//! ([`crate::ClientBuilder::settlement_key`]) and sends it with every gapless call, so its own
//! retries, confirms and voids are recognised and nobody else's are.
use leaf_api::gapless::{
    ConfirmRequest, IssueRequest, IssuedNumber, LedgerEntry, LedgerPage, LedgerQuery, NumberState, ReserveRequest,
    VoidRequest,
};
use leaf_api::routes;

use crate::client::{Answer, Call, Client};
use crate::error::ClientError;
use crate::retry::Safety;
use crate::Method;

/// One gapless series of a [`Client`].
#[derive(Clone, Copy)]
pub struct Gapless<'a> {
    client: &'a Client,
    tag: &'a str,
    /// A settlement secret given by the caller ([`Gapless::with_secret`]).
    secret: Option<&'a str>,
}

impl std::fmt::Debug for Gapless<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gapless").field("tag", &self.tag).field("secret", &self.secret.map(|_| "(set)")).finish()
    }
}

impl Client {
    /// The gapless series `tag` (a tag of profile `gapless`).
    pub fn gapless<'a>(&'a self, tag: &'a str) -> Gapless<'a> {
        Gapless { client: self, tag, secret: None }
    }
}

impl<'a> Gapless<'a> {
    /// These calls with `secret` as the settlement secret of every key (one a node answered
    /// earlier, say) instead of the one this client derives. Sent only without a token.
    pub fn with_secret<'b>(self, secret: &'b str) -> Gapless<'b>
    where
        'a: 'b,
    {
        Gapless { client: self.client, tag: self.tag, secret: Some(secret) }
    }

    /// Without a token, the settlement secret of `key` in this series: the one given to
    /// [`Gapless::with_secret`], or HMAC-SHA256 of the series and the key under the client's
    /// settlement key, as 64 hex digits. The same
    /// client (or one built with the same key) always sends the same secret for a key, so its
    /// retries, confirms and voids prove it took the number, and no one else can.
    fn secret(&self, key: &str) -> Option<String> {
        if self.client.inner.auth.is_some() {
            return None;
        }
        if let Some(s) = self.secret {
            return Some(s.to_string());
        }
        let k = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.client.inner.settlement_key);
        let mut msg = Vec::with_capacity(self.tag.len() + 1 + key.len());
        msg.extend_from_slice(self.tag.as_bytes());
        msg.push(0);
        msg.extend_from_slice(key.as_bytes());
        let tag = ring::hmac::sign(&k, &msg);
        Some(tag.as_ref().iter().map(|b| format!("{b:02x}")).collect())
    }

    /// A POST of `req` to the series' `path`: idempotent (the key keeps a repeat to its
    /// number), and a `tag_not_found` just after this client created the series is retried.
    fn call(&self, path: String, req: &impl serde::Serialize) -> Result<Call, ClientError> {
        Ok(Call { tag: Some(self.tag.to_string()), ..Call::with_json(Method::POST, path, req, Safety::Idempotent)? })
    }

    /// The series' number for `key` (`POST /api/gapless/{tag}/issue`): the next one, or the one
    /// the key has (`replayed`). Checked: the answer is for this tag and key, numbered from 1.
    pub async fn issue(&self, key: &str) -> Result<IssuedNumber, ClientError> {
        let req = IssueRequest { key: key.to_string(), secret: self.secret(key) };
        let path = routes::fill(routes::GAPLESS_ISSUE, &[self.tag]);
        let answer = self.client.execute(self.call(path, &req)?).await?;
        checked(&answer, self.tag, key, None)
    }

    /// The series' number for `key`, reserved for `hold_seconds` (the server's 900 s when
    /// `None`) (`POST /api/gapless/{tag}/reserve`): the next one, or the one the key has.
    /// Confirm or void it before its `deadline_ms`, or the leader voids it.
    pub async fn reserve(&self, key: &str, hold_seconds: Option<u64>) -> Result<IssuedNumber, ClientError> {
        let req = ReserveRequest { key: key.to_string(), hold_seconds, secret: self.secret(key) };
        let path = routes::fill(routes::GAPLESS_RESERVE, &[self.tag]);
        let answer = self.client.execute(self.call(path, &req)?).await?;
        checked(&answer, self.tag, key, None)
    }

    /// Makes the key's reserved number final (`POST /api/gapless/{tag}/confirm`). Checked: the
    /// answer is confirmed (or issued, for a number final from the start).
    pub async fn confirm(&self, key: &str) -> Result<IssuedNumber, ClientError> {
        let req = ConfirmRequest { key: key.to_string(), secret: self.secret(key) };
        let path = routes::fill(routes::GAPLESS_CONFIRM, &[self.tag]);
        let answer = self.client.execute(self.call(path, &req)?).await?;
        checked(&answer, self.tag, key, Some(&[NumberState::Confirmed, NumberState::Issued]))
    }

    /// Voids the key's reserved number for `reason` (`POST /api/gapless/{tag}/void`). Checked:
    /// the answer is voided.
    pub async fn void(&self, key: &str, reason: &str) -> Result<IssuedNumber, ClientError> {
        let req = VoidRequest { key: key.to_string(), reason: reason.to_string(), secret: self.secret(key) };
        let path = routes::fill(routes::GAPLESS_VOID, &[self.tag]);
        let answer = self.client.execute(self.call(path, &req)?).await?;
        checked(&answer, self.tag, key, Some(&[NumberState::Voided]))
    }

    /// One page of the series' ledger (`GET /admin/tags/{tag}/ledger`, see [`LedgerQuery`]).
    pub async fn ledger_page(&self, query: &LedgerQuery) -> Result<LedgerPage, ClientError> {
        let mut q = form_urlencoded::Serializer::new(String::new());
        let fields = [
            ("period", query.period.map(u64::from)),
            ("after_period", query.after_period.map(u64::from)),
            ("after_number", query.after_number),
            ("limit", query.limit.map(u64::from)),
        ];
        for (name, value) in fields {
            if let Some(v) = value {
                q.append_pair(name, &v.to_string());
            }
        }
        if let Some(state) = query.state {
            let state = serde_json::to_value(state).map_err(|e| ClientError::Request(e.to_string()))?;
            q.append_pair("state", state.as_str().unwrap_or_default());
        }
        let q = q.finish();
        let path = routes::fill(routes::ADMIN_TAG_LEDGER, &[self.tag]);
        let path = if q.is_empty() { path } else { format!("{path}?{q}") };
        let answer = self.client.execute(Call::get(path)).await?;
        let page: LedgerPage = answer.json()?;
        if page.tag != self.tag {
            return Err(answer.decode_error(format!("asked for the ledger of {:?}, answered {:?}", self.tag, page.tag)));
        }
        Ok(page)
    }

    /// Every number of the series (of `period` only, if given), page by page, with the head
    /// of the chain as the last page answered it.
    pub async fn ledger(&self, period: Option<u32>) -> Result<(Vec<LedgerEntry>, String), ClientError> {
        let mut query = LedgerQuery { period, ..LedgerQuery::default() };
        let mut out: Vec<LedgerEntry> = Vec::new();
        loop {
            let page = self.ledger_page(&query).await?;
            // Pages must move forward: a node answering the same page again (a bug, or a
            // forged peer) would otherwise keep this loop going for ever.
            let last = out.last().map(|e| (e.period, e.number));
            if page.entries.first().is_some_and(|e| last.is_some_and(|l| (e.period, e.number) <= l)) {
                return Err(ClientError::Request(format!("the ledger of {:?} went backwards between pages", self.tag)));
            }
            let next = page.next.map(|c| (c.after_period, c.after_number));
            if next.is_some() && next != page.entries.last().map(|e| (e.period, e.number)) {
                return Err(ClientError::Request(format!(
                    "the ledger of {:?} answered a cursor off its page",
                    self.tag
                )));
            }
            out.extend(page.entries);
            match next {
                Some((p, n)) => (query.after_period, query.after_number) = (Some(p), Some(n)),
                None => return Ok((out, page.head)),
            }
        }
    }
}

fn checked(answer: &Answer, tag: &str, key: &str, states: Option<&[NumberState]>) -> Result<IssuedNumber, ClientError> {
    let n: IssuedNumber = answer.json()?;
    if n.tag != tag || n.key != key || n.number == 0 {
        return Err(answer.decode_error(format!(
            "asked for tag {tag:?} key {key:?}, answered number {} of tag {:?} key {:?}",
            n.number, n.tag, n.key
        )));
    }
    if states.is_some_and(|s| !s.contains(&n.state)) {
        return Err(answer.decode_error(format!("number {} of key {key:?} answered as {:?}", n.number, n.state)));
    }
    Ok(n)
}
