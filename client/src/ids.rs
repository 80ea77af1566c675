//! The ID endpoints: segment and snowflake IDs, single and batch, and decoding.
//!
//! All are idempotent (see [`crate::retry`]): an ID request whose answer was lost wasted those IDs (a
//! gap), and the retry gets new ones; no ID is ever handed out twice.
use leaf_api::ranges::IdRanges;
use leaf_api::routes;
use leaf_api::types::SnowflakeDecoded;

use crate::client::{Answer, Call, Client};
use crate::error::ClientError;

impl Client {
    /// One segment-mode ID of `tag` (`GET /api/segment/get/{tag}`).
    pub async fn segment_id(&self, tag: &str) -> Result<i64, ClientError> {
        let answer = self.execute(Call::taking(routes::fill(routes::SEGMENT_GET, &[tag]), tag)).await?;
        one_id(&answer)
    }

    /// `count` (1–100,000) segment-mode IDs of `tag`, in the order the node handed them out.
    pub async fn segment_ids(&self, tag: &str, count: u32) -> Result<Vec<i64>, ClientError> {
        let path = format!("{}?count={count}", routes::fill(routes::SEGMENT_GET, &[tag]));
        ids(&self.execute(Call::taking(path, tag)).await?, count)
    }

    /// `count` (1–1,000,000) segment-mode IDs of `tag` as ranges (`?format=ranges`): a few
    /// ascending ranges `[start, end)` whatever the count. The answer is checked (well-formed
    /// ranges holding exactly `count` IDs) before it is returned.
    pub async fn segment_ranges(&self, tag: &str, count: u32) -> Result<IdRanges, ClientError> {
        let path = format!("{}?count={count}&format=ranges", routes::fill(routes::SEGMENT_GET, &[tag]));
        ranges(&self.execute(Call::taking(path, tag)).await?, count)
    }

    /// One snowflake ID (`key` is only recorded for auditing).
    pub async fn snowflake_id(&self, key: &str) -> Result<i64, ClientError> {
        let answer = self.execute(Call::get(routes::fill(routes::SNOWFLAKE_GET, &[key]))).await?;
        one_id(&answer)
    }

    /// `count` (1–100,000) snowflake IDs.
    pub async fn snowflake_ids(&self, key: &str, count: u32) -> Result<Vec<i64>, ClientError> {
        let path = format!("{}?count={count}", routes::fill(routes::SNOWFLAKE_GET, &[key]));
        ids(&self.execute(Call::get(path)).await?, count)
    }

    /// `count` (1–1,000,000) snowflake IDs as ranges (about one per millisecond the batch
    /// spans), checked like [`Client::segment_ranges`].
    pub async fn snowflake_ranges(&self, key: &str, count: u32) -> Result<IdRanges, ClientError> {
        let path = format!("{}?count={count}&format=ranges", routes::fill(routes::SNOWFLAKE_GET, &[key]));
        ranges(&self.execute(Call::get(path)).await?, count)
    }

    /// A snowflake ID's timestamp, worker ID and sequence.
    pub async fn decode(&self, id: i64) -> Result<SnowflakeDecoded, ClientError> {
        let path = routes::fill(routes::SNOWFLAKE_DECODE, &[&id.to_string()]);
        self.execute(Call::get(path)).await?.json()
    }
}

/// The body as exactly one decimal ID.
fn one_id(answer: &Answer) -> Result<i64, ClientError> {
    let text = std::str::from_utf8(&answer.body).map_err(|_| answer.decode_error("not UTF-8"))?;
    parse_id(text).ok_or_else(|| answer.decode_error(format!("not an ID: {:?}", truncate(text))))
}

/// The body as exactly `count` decimal IDs, one per line.
fn ids(answer: &Answer, count: u32) -> Result<Vec<i64>, ClientError> {
    let text = std::str::from_utf8(&answer.body).map_err(|_| answer.decode_error("not UTF-8"))?;
    let mut out = Vec::with_capacity(count as usize);
    for line in text.lines() {
        match parse_id(line) {
            Some(id) if out.len() < count as usize => out.push(id),
            Some(_) => return Err(answer.decode_error(format!("more than the {count} IDs asked for"))),
            None => return Err(answer.decode_error(format!("not an ID: {:?}", truncate(line)))),
        }
    }
    if out.len() != count as usize {
        return Err(answer.decode_error(format!("{} IDs, asked for {count}", out.len())));
    }
    Ok(out)
}

/// The body as well-formed ranges holding exactly `count` IDs.
fn ranges(answer: &Answer, count: u32) -> Result<IdRanges, ClientError> {
    let ranges: IdRanges = answer.json()?;
    ranges.validate(count.into()).map_err(|e| answer.decode_error(e.to_string()))?;
    Ok(ranges)
}

/// A non-negative decimal ID.
fn parse_id(s: &str) -> Option<i64> {
    s.trim().parse::<i64>().ok().filter(|id| *id >= 0)
}

fn truncate(s: &str) -> String {
    s.chars().take(40).collect()
}
