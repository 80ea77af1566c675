//! Validation shared by every layer: tag names, batch counts, steps and starting values.

/// Longest accepted tag, in bytes (Leaf's `biz_tag varchar(128)`).
pub const MAX_TAG_LEN: usize = 128;

/// Most IDs one gRPC request may ask for as a list (`GetSegmentIdList`, one `int64` each, under
/// gRPC's 4 MiB message limit). HTTP text takes [`MAX_RANGE_BATCH`]: it is written as it is sent.
pub const MAX_BATCH: u32 = 100_000;

/// Most IDs one request may ask for over HTTP (as text or `?format=ranges`) and as gRPC ranges:
/// the server holds a few runs whatever the count, and sizes the segment it waits for to it.
pub const MAX_RANGE_BATCH: u32 = 1_000_000;

/// Largest step a tag may store or a segment may span (one billion). Far above any sensible
/// segment (Leaf caps its dynamic step at one million) yet small enough that a tag cannot be
/// exhausted by a handful of typos.
pub const MAX_STEP: i64 = 1_000_000_000;

/// Longest tag description, in bytes of UTF-8: 1,024 ASCII characters, fewer of other scripts
/// (341 CJK characters). Bytes, not characters, because the replicated state bounds its size in
/// bytes; the API, the import and raft-store's apply all check this one limit.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

/// Most tags one batch request (`POST /admin/tags:batch`, gRPC `CreateTags`) creates; the
/// node commits them in as few Raft entries as their size allows.
pub const MAX_TAGS_PER_REQUEST: usize = 10_000;

/// Most entries one page of a tag listing holds (`GET /admin/tags`, `/db`, `/cache` with
/// `?limit=`), and the page size when none is asked for. A page with this many entries may
/// have more after it: ask again with `?after=` its last tag.
pub const MAX_LIST_PAGE: u32 = 50_000;

/// Why a tag name, count or step was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    #[error("tag must not be empty")]
    EmptyTag,
    #[error("tag is {0} bytes long; the limit is {MAX_TAG_LEN}")]
    TagTooLong(usize),
    #[error("tag contains {0:?}; allowed are A-Z a-z 0-9 _ . : -")]
    TagChar(char),
    #[error("count must be an integer from 1 to {max}, got {raw:?}")]
    Count { raw: String, max: u32 },
    #[error("step must be from 1 to {MAX_STEP}, got {0}")]
    Step(i64),
    #[error("max_id must be from 0 to 9223372036854775807, got {0}")]
    MaxId(i64),
    #[error("description is {0} bytes long in UTF-8; the limit is {MAX_DESCRIPTION_BYTES} bytes")]
    DescriptionTooLong(usize),
}

/// The bytes a tag may hold, `[A-Za-z0-9_.:-]`, as a table.
const TAG_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric() || c == b'_' || c == b'.' || c == b':' || c == b'-';
        b += 1;
    }
    table
};

/// Checks a tag name: 1–128 bytes of `[A-Za-z0-9_.:-]`.
pub fn validate_tag(tag: &str) -> Result<(), ValidationError> {
    if tag.is_empty() {
        return Err(ValidationError::EmptyTag);
    }
    if tag.len() > MAX_TAG_LEN {
        return Err(ValidationError::TagTooLong(tag.len()));
    }
    // Bytes first (every allowed character is ASCII): the per-ID path validates each tag.
    if tag.bytes().all(|b| TAG_BYTES[usize::from(b)]) {
        return Ok(());
    }
    match tag.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'))) {
        Some(c) => Err(ValidationError::TagChar(c)),
        None => Ok(()),
    }
}

/// Parses the `count` query parameter: a decimal integer from 1 to `max` ([`MAX_BATCH`] for
/// text, [`MAX_RANGE_BATCH`] for ranges).
pub fn parse_count(raw: &str, max: u32) -> Result<u32, ValidationError> {
    match raw.parse::<u32>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(ValidationError::Count { raw: raw.chars().take(32).collect(), max }),
    }
}

/// Checks a step: 1..=[`MAX_STEP`].
pub fn validate_step(step: i64) -> Result<(), ValidationError> {
    if (1..=MAX_STEP).contains(&step) {
        Ok(())
    } else {
        Err(ValidationError::Step(step))
    }
}

/// Checks a starting `max_id`: IDs are non-negative.
pub fn validate_max_id(max_id: i64) -> Result<(), ValidationError> {
    if max_id >= 0 {
        Ok(())
    } else {
        Err(ValidationError::MaxId(max_id))
    }
}

/// Checks a description: at most [`MAX_DESCRIPTION_BYTES`] bytes of UTF-8.
pub fn validate_description(description: &str) -> Result<(), ValidationError> {
    if description.len() <= MAX_DESCRIPTION_BYTES {
        Ok(())
    } else {
        Err(ValidationError::DescriptionTooLong(description.len()))
    }
}

/// The longest prefix of `description` that [`validate_description`] accepts, cut at a
/// character boundary.
pub fn truncate_description(description: &str) -> &str {
    if description.len() <= MAX_DESCRIPTION_BYTES {
        return description;
    }
    let mut end = MAX_DESCRIPTION_BYTES;
    while !description.is_char_boundary(end) {
        end -= 1;
    }
    &description[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags() {
        assert!(validate_tag("leaf-segment-test").is_ok());
        assert!(validate_tag("a.b:c_d-E9").is_ok());
        assert!(validate_tag(&"x".repeat(128)).is_ok());
        assert_eq!(validate_tag(""), Err(ValidationError::EmptyTag));
        assert_eq!(validate_tag(&"x".repeat(129)), Err(ValidationError::TagTooLong(129)));
        assert_eq!(validate_tag("a b"), Err(ValidationError::TagChar(' ')));
        assert_eq!(validate_tag("a/b"), Err(ValidationError::TagChar('/')));
        assert_eq!(validate_tag("é"), Err(ValidationError::TagChar('é')));
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("1", MAX_BATCH), Ok(1));
        assert_eq!(parse_count("100000", MAX_BATCH), Ok(100_000));
        for bad in ["0", "100001", "-1", "", "1.5", "ten", "99999999999999999999"] {
            assert!(parse_count(bad, MAX_BATCH).is_err(), "{bad}");
        }
        assert_eq!(parse_count("1000000", MAX_RANGE_BATCH), Ok(1_000_000));
        let e = parse_count("1000001", MAX_RANGE_BATCH).unwrap_err();
        assert_eq!(e.to_string(), "count must be an integer from 1 to 1000000, got \"1000001\"");
    }

    #[test]
    fn steps_and_max_ids() {
        assert!(validate_step(1).is_ok());
        assert!(validate_step(MAX_STEP).is_ok());
        assert!(validate_step(0).is_err());
        assert!(validate_step(-5).is_err());
        assert!(validate_step(MAX_STEP + 1).is_err());
        assert!(validate_max_id(0).is_ok());
        assert!(validate_max_id(i64::MAX).is_ok());
        assert!(validate_max_id(-1).is_err());
    }

    #[test]
    fn descriptions_are_bounded_in_bytes() {
        assert!(validate_description(&"x".repeat(MAX_DESCRIPTION_BYTES)).is_ok());
        assert_eq!(
            validate_description(&"x".repeat(MAX_DESCRIPTION_BYTES + 1)),
            Err(ValidationError::DescriptionTooLong(1025))
        );
        // 342 three-byte characters: within a 1,024-character limit, beyond the byte limit.
        assert_eq!(validate_description(&"订".repeat(342)), Err(ValidationError::DescriptionTooLong(1026)));
        assert!(validate_description(&"订".repeat(341)).is_ok());
        let long = "订".repeat(600);
        let cut = truncate_description(&long);
        assert_eq!((cut.len(), cut.chars().count()), (1023, 341));
        assert_eq!(truncate_description("short"), "short");
    }
}
