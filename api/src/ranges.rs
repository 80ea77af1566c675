//! IDs as ranges: a batch answered as a few runs `[start, end)` instead of one decimal line
//! per ID (`?format=ranges` on HTTP, the only form on gRPC). A million IDs cost a few bytes.
use serde::{Deserialize, Serialize};

/// How a batch of IDs is written (`?format=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum IdFormat {
    /// Decimal IDs, one per line, no trailing newline (Leaf's wire form; the default).
    #[default]
    Text,
    /// JSON [`IdRanges`].
    Ranges,
}

impl IdFormat {
    /// The query value (`text`, `ranges`).
    pub fn as_str(self) -> &'static str {
        match self {
            IdFormat::Text => "text",
            IdFormat::Ranges => "ranges",
        }
    }

    /// Parses a query value; `None` for anything but `text` and `ranges`.
    pub fn parse(raw: &str) -> Option<IdFormat> {
        match raw {
            "text" => Some(IdFormat::Text),
            "ranges" => Some(IdFormat::Ranges),
            _ => None,
        }
    }
}

/// A run of consecutive IDs: `start`, `start + 1`, …, `end - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IdRange {
    /// The first ID (inclusive).
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 1001))]
    pub start: i64,
    /// One past the last ID (exclusive); greater than `start`.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, example = 2001))]
    pub end: i64,
}

impl IdRange {
    /// How many IDs the range holds (0 for a malformed one).
    pub fn len(&self) -> u64 {
        if self.end > self.start {
            self.end.abs_diff(self.start)
        } else {
            0
        }
    }

    /// Whether the range holds no ID.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A batch of IDs as ascending, non-overlapping ranges, in the order the node handed them out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IdRanges {
    pub ranges: Vec<IdRange>,
}

/// Why an answer's ranges are not a well-formed batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangesError {
    #[error("range {index} is [{start}, {end}): IDs are non-negative and a range is not empty")]
    Malformed { index: usize, start: i64, end: i64 },
    #[error("range {index} starts at {start}, not above the previous range's end {previous_end}")]
    NotAscending { index: usize, start: i64, previous_end: i64 },
    #[error("the ranges hold {got} IDs, {want} were asked for")]
    Count { got: u64, want: u64 },
}

impl IdRanges {
    /// Appends the run `first..first + count`, merged into the last range when it continues it.
    pub fn push_run(&mut self, first: i64, count: u64) {
        if count == 0 {
            return;
        }
        let end = first.saturating_add_unsigned(count);
        match self.ranges.last_mut() {
            Some(last) if last.end == first => last.end = end,
            _ => self.ranges.push(IdRange { start: first, end }),
        }
    }

    /// How many IDs the ranges hold.
    pub fn count(&self) -> u64 {
        self.ranges.iter().map(IdRange::len).sum()
    }

    /// Every ID, in order.
    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.ranges.iter().flat_map(|r| r.start..r.end)
    }

    /// Checks what a client must before using an answer: non-negative, non-empty ranges in
    /// ascending order without overlap, holding exactly `want` IDs.
    pub fn validate(&self, want: u64) -> Result<(), RangesError> {
        let mut previous_end = None;
        for (index, r) in self.ranges.iter().enumerate() {
            if r.start < 0 || r.end <= r.start {
                return Err(RangesError::Malformed { index, start: r.start, end: r.end });
            }
            if let Some(previous_end) = previous_end {
                if r.start < previous_end {
                    return Err(RangesError::NotAscending { index, start: r.start, previous_end });
                }
            }
            previous_end = Some(r.end);
        }
        let got = self.count();
        if got != want {
            return Err(RangesError::Count { got, want });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: i64, end: i64) -> IdRange {
        IdRange { start, end }
    }

    #[test]
    fn runs_merge_when_they_continue_the_last_range() {
        let mut b = IdRanges::default();
        b.push_run(10, 5);
        b.push_run(15, 2);
        b.push_run(100, 1);
        b.push_run(200, 0);
        assert_eq!(b.ranges, vec![r(10, 17), r(100, 101)]);
        assert_eq!(b.count(), 8);
        assert_eq!(b.ids().collect::<Vec<_>>(), vec![10, 11, 12, 13, 14, 15, 16, 100]);
        assert_eq!(b.validate(8), Ok(()));
    }

    #[test]
    fn validation_refuses_what_a_client_must_not_use() {
        let b = |v: Vec<IdRange>| IdRanges { ranges: v };
        assert_eq!(b(vec![r(1, 3)]).validate(3), Err(RangesError::Count { got: 2, want: 3 }));
        assert!(matches!(b(vec![r(5, 5)]).validate(0), Err(RangesError::Malformed { index: 0, .. })));
        assert!(matches!(b(vec![r(-2, 1)]).validate(3), Err(RangesError::Malformed { .. })));
        assert!(matches!(b(vec![r(1, 5), r(4, 6)]).validate(6), Err(RangesError::NotAscending { index: 1, .. })));
        assert!(matches!(b(vec![r(7, 9), r(1, 3)]).validate(4), Err(RangesError::NotAscending { .. })));
        assert_eq!(b(vec![r(1, 5), r(5, 6)]).validate(5), Ok(()));
        assert_eq!(b(vec![r(i64::MAX - 1, i64::MAX)]).validate(1), Ok(()));
    }

    #[test]
    fn formats_parse_their_query_values_only() {
        for f in [IdFormat::Text, IdFormat::Ranges] {
            assert_eq!(IdFormat::parse(f.as_str()), Some(f));
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{}\"", f.as_str()));
        }
        assert_eq!(IdFormat::parse("Ranges"), None);
        assert_eq!(IdFormat::parse(""), None);
    }
}
