//! What one gapless series may take: its cap of numbers, and the rate of new numbers each
//! caller may take from it on one node ([`SeriesLimits`]). Without them one caller could fill
//! the cluster's ledger ([`crate::gapless`]'s cluster cap) and stop every series, and each of
//! its numbers would stay in a regulated series for ever.
use serde::{Deserialize, Serialize};

/// Most numbers a series' cap may be: the cluster's whole ledger.
pub const MAX_SERIES_NUMBERS: u64 = 1_000_000;
/// A series' cap when its policy gives none: a tenth of the cluster's ledger, so that no one
/// series (nor one caller flooding it) fills the ledger for the others.
pub const DEFAULT_SERIES_NUMBERS: u64 = 100_000;
/// Most new numbers a second one caller may take from one series on one node, at most.
pub const MAX_ISSUES_PER_SEC: u32 = 1_000_000;
/// New numbers a second one caller may take from one series on one node when its policy gives
/// no rate (with a burst of as many).
pub const DEFAULT_ISSUES_PER_SEC: u32 = 100;

/// A series' limits, as the replicated state keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SeriesLimits {
    /// Most numbers the series keeps in the ledger, every kept period and state together:
    /// an issue or a reservation past it is refused (409 `tag_exhausted`), never a number
    /// dropped. Retention (`retain_periods`) frees the numbers of the periods it drops.
    pub max_numbers: u64,
    /// Most new numbers (issues and reservations, not repeats) one caller takes a second from
    /// this series on one node, with a burst of as many: a scoped token, the admin token, or
    /// an address for a caller without a token. Past it: 429 with `Retry-After`.
    pub issues_per_sec: u32,
}

impl Default for SeriesLimits {
    fn default() -> Self {
        SeriesLimits { max_numbers: DEFAULT_SERIES_NUMBERS, issues_per_sec: DEFAULT_ISSUES_PER_SEC }
    }
}

/// A limit out of its bounds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    #[error("max_numbers is 1 to {MAX_SERIES_NUMBERS}, got {0}")]
    MaxNumbers(u64),
    #[error("issues_per_sec is 1 to {MAX_ISSUES_PER_SEC}, got {0}")]
    IssuesPerSec(u32),
}

impl SeriesLimits {
    /// These limits with the given ones changed.
    pub fn with(self, max_numbers: Option<u64>, issues_per_sec: Option<u32>) -> SeriesLimits {
        SeriesLimits {
            max_numbers: max_numbers.unwrap_or(self.max_numbers),
            issues_per_sec: issues_per_sec.unwrap_or(self.issues_per_sec),
        }
    }

    /// Checks both bounds (limits from the log are checked again).
    pub fn validate(&self) -> Result<(), LimitsError> {
        if !(1..=MAX_SERIES_NUMBERS).contains(&self.max_numbers) {
            return Err(LimitsError::MaxNumbers(self.max_numbers));
        }
        if !(1..=MAX_ISSUES_PER_SEC).contains(&self.issues_per_sec) {
            return Err(LimitsError::IssuesPerSec(self.issues_per_sec));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_bounded() {
        assert!(SeriesLimits::default().validate().is_ok());
        let d = SeriesLimits::default();
        assert_eq!(d.with(Some(5), None), SeriesLimits { max_numbers: 5, issues_per_sec: DEFAULT_ISSUES_PER_SEC });
        for bad in [d.with(Some(0), None), d.with(Some(MAX_SERIES_NUMBERS + 1), None), d.with(None, Some(0))] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        assert!(d.with(Some(MAX_SERIES_NUMBERS), Some(MAX_ISSUES_PER_SEC)).validate().is_ok());
    }
}
