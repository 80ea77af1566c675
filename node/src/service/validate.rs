//! One function per input rule, each failing with the [`ApiError`] a client gets: the edges
//! call these, so a tag or a count is checked the same way over HTTP, gRPC and the fast path.
use leaf_api::tag::{validate_max_id, validate_step, validate_tag, MAX_BATCH, MAX_RANGE_BATCH};
use leaf_api::ErrorCode;

use super::ApiError;

/// A tag (Leaf's `biz_tag`): 400 `invalid_tag` if it breaks [`validate_tag`]'s rule.
pub fn tag(tag: &str) -> Result<(), ApiError> {
    validate_tag(tag).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))
}

/// A snowflake audit key: validated like a tag (it becomes a metrics label), and named as a key.
pub fn key(key: &str) -> Result<(), ApiError> {
    validate_tag(key).map_err(|e| ApiError::new(ErrorCode::InvalidTag, format!("snowflake key: {e}")))
}

/// A tag's step.
pub fn step(step: i64) -> Result<(), ApiError> {
    validate_step(step).map_err(|e| ApiError::invalid(e.to_string()))
}

/// A tag's first ID.
pub fn max_id(max_id: i64) -> Result<(), ApiError> {
    validate_max_id(max_id).map_err(|e| ApiError::invalid(e.to_string()))
}

/// A tag's description: at most [`leaf_api::tag::MAX_DESCRIPTION_BYTES`] bytes of UTF-8, the
/// limit the replicated state enforces, so what passes here is never refused by apply.
pub fn description(d: &str) -> Result<(), ApiError> {
    leaf_api::tag::validate_description(d).map_err(|e| ApiError::invalid(e.to_string()))
}

/// Node IDs in URLs are OpenAPI `int64`s: at most `i64::MAX`.
pub fn node_id_range(id: u64) -> Result<(), ApiError> {
    if id > i64::MAX as u64 {
        return Err(ApiError::invalid(format!("node ID {id} is above 2^63-1")));
    }
    Ok(())
}

/// A gRPC count: 0 means 1; above `max` is 400 `invalid_count`.
pub fn count_up_to(count: u32, max: u32) -> Result<u32, ApiError> {
    match count {
        0 => Ok(1),
        n if n <= max => Ok(n),
        n => Err(ApiError::new(ErrorCode::InvalidCount, format!("count must be from 1 to {max}, got {n}"))),
    }
}

/// A count of IDs as ranges ([`MAX_RANGE_BATCH`]).
pub fn range_count(count: u32) -> Result<u32, ApiError> {
    count_up_to(count, MAX_RANGE_BATCH)
}

/// A count of IDs one by one ([`MAX_BATCH`]).
pub fn list_count(count: u32) -> Result<u32, ApiError> {
    count_up_to(count, MAX_BATCH)
}

/// The largest clock skew the fault endpoint accepts: a year.
pub const MAX_CLOCK_OFFSET_MS: u64 = 365 * 24 * 3_600_000;

/// A clock fault's offset.
pub fn clock_offset(offset_ms: i64) -> Result<(), ApiError> {
    if offset_ms.unsigned_abs() > MAX_CLOCK_OFFSET_MS {
        return Err(ApiError::invalid("offset_ms must be within a year"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_zero_is_one_and_the_limits_hold() {
        assert_eq!(range_count(0).unwrap(), 1);
        assert_eq!(range_count(1).unwrap(), 1);
        assert_eq!(range_count(MAX_RANGE_BATCH).unwrap(), MAX_RANGE_BATCH);
        assert_eq!(range_count(MAX_RANGE_BATCH + 1).unwrap_err().code, ErrorCode::InvalidCount);
        assert_eq!(list_count(MAX_BATCH + 1).unwrap_err().code, ErrorCode::InvalidCount);
    }

    #[test]
    fn tags_and_keys_are_invalid_tags_and_keys_say_so() {
        assert_eq!(tag("a/b").unwrap_err().code, ErrorCode::InvalidTag);
        assert_eq!(tag("").unwrap_err().code, ErrorCode::InvalidTag);
        assert!(tag("leaf-segment-test").is_ok());
        assert!(key("").unwrap_err().message.starts_with("snowflake key: "));
    }

    #[test]
    fn descriptions_and_offsets_are_bounded() {
        assert!(description(&"é".repeat(512)).is_ok());
        assert_eq!(description(&"é".repeat(513)).unwrap_err().code, ErrorCode::InvalidRequest);
        assert!(clock_offset(-(MAX_CLOCK_OFFSET_MS as i64)).is_ok());
        assert!(clock_offset(MAX_CLOCK_OFFSET_MS as i64 + 1).is_err());
        assert!(node_id_range(i64::MAX as u64).is_ok() && node_id_range(i64::MAX as u64 + 1).is_err());
    }
}

/// A listing's page, checked: the tags starting with `prefix` after `after`, at most `limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub prefix: String,
    pub after: Option<String>,
    pub limit: usize,
}

impl Page {
    /// Whether `tag` belongs on this page's listing (before the limit).
    pub fn admits(&self, tag: &str) -> bool {
        tag.starts_with(&self.prefix) && self.after.as_deref().is_none_or(|a| tag > a)
    }
}

/// A listing's query: `prefix` (the start of a tag, so the tag's characters, up to 128 of them),
/// `after` (a tag), `limit` (1 to [`leaf_api::tag::MAX_LIST_PAGE`], that by default).
pub fn page(q: leaf_api::types::ListQuery) -> Result<Page, ApiError> {
    use leaf_api::tag::MAX_LIST_PAGE;
    let prefix = q.prefix.unwrap_or_default();
    if !prefix.is_empty() {
        validate_tag(&prefix).map_err(|e| ApiError::new(ErrorCode::InvalidTag, format!("prefix: {e}")))?;
    }
    if let Some(a) = &q.after {
        validate_tag(a).map_err(|e| ApiError::new(ErrorCode::InvalidTag, format!("after: {e}")))?;
    }
    let limit = q.limit.unwrap_or(MAX_LIST_PAGE);
    if !(1..=MAX_LIST_PAGE).contains(&limit) {
        return Err(ApiError::invalid(format!("limit must be from 1 to {MAX_LIST_PAGE}, got {limit}")));
    }
    Ok(Page { prefix, after: q.after, limit: limit as usize })
}
