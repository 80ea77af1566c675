//! Per-tag ID profiles: how a tag's IDs are made from its committed counter, and the rules
//! every layer shares (the node's admin API, the Raft state's `apply`, the CLI, the checker).
//!
//! - [`Profile::Segment`]: Leaf's segment mode, trend-increasing (the default).
//! - [`Profile::Monotonic`]: strictly increasing across the cluster, served by the leader.
//! - [`Profile::Obfuscated`]: the counter through a keyed bijection, neither ordered nor
//!   countable.
//! - [`Profile::Daily`]: `yyyyMMdd` then a zero-padded counter that restarts each day
//!   ([`DailyFormat`]).
//! - [`Profile::Gapless`]: numbers 1, 2, 3, … with no gap, one per idempotency key, each
//!   committed before it is answered ([`crate::gapless`]).
//!
//! A tag may also have an upper bound (inclusive): the largest ID it hands out, e.g.
//! 2^53 − 1 ([`JS_SAFE_MAX`]) for IDs that must survive JavaScript.
use serde::{Deserialize, Serialize};

/// The largest integer a JavaScript number holds exactly (2^53 − 1).
pub const JS_SAFE_MAX: i64 = (1 << 53) - 1;
/// Most counter digits of a daily tag: `99991231` followed by 10 digits still fits an `i64`.
pub const MAX_DAILY_DIGITS: u8 = 10;
/// Default counter digits of a daily tag (10^8 − 1 IDs a day).
pub const DEFAULT_DAILY_DIGITS: u8 = 8;
/// Farthest UTC offset accepted, in minutes (±14:00, the widest in use).
pub const MAX_UTC_OFFSET_MINUTES: i16 = 14 * 60;
/// The first counter value of each day.
pub const DAILY_FIRST: i64 = 1;

/// How a tag's IDs are made. Set when the tag is created; never changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Leaf's segment mode: unique, trend-increasing; every node serves from its own buffer.
    #[default]
    Segment,
    /// Strictly increasing across the whole cluster: an ID handed out after another one was
    /// returned is larger. Served by the leader only (followers forward).
    Monotonic,
    /// Unique but neither ordered nor countable: the counter through a keyed bijection of the
    /// tag's ID space. The key never leaves the cluster.
    Obfuscated,
    /// `yyyyMMdd` followed by a zero-padded counter that restarts each day.
    Daily,
    /// A series of numbers with no gap (invoices): each issued once per idempotency key,
    /// committed through Raft before it is answered; not served by the ID endpoints.
    Gapless,
}

impl Profile {
    /// The name used on the wire and in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Segment => "segment",
            Profile::Monotonic => "monotonic",
            Profile::Obfuscated => "obfuscated",
            Profile::Daily => "daily",
            Profile::Gapless => "gapless",
        }
    }

    /// Every profile.
    pub const ALL: [Profile; 5] =
        [Profile::Segment, Profile::Monotonic, Profile::Obfuscated, Profile::Daily, Profile::Gapless];
}

impl std::str::FromStr for Profile {
    type Err = ProfileError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Profile::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| ProfileError::Unknown(s.chars().take(32).collect()))
    }
}

/// Options of a daily tag (`"daily": {...}` when creating one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DailyOptions {
    /// Digits of the counter after the date (1 to 10; 8 when absent).
    #[serde(default, deserialize_with = "crate::json_int::opt_u8")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10, example = 8))]
    pub digits: Option<u8>,
    /// The time zone whose midnight starts a new day, as a UTC offset `+HH:MM` / `-HH:MM`
    /// (or `Z`; `+00:00` when absent). A fixed offset: zones with daylight saving time are
    /// given as their standard offset.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 6, pattern = r"^(Z|[+-]((0[0-9]|1[0-3]):[0-5][0-9]|14:00))$", example = "+08:00")
    )]
    pub utc_offset: Option<String>,
}

/// Why a profile or its options were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("unknown profile {0:?}: one of segment, monotonic, obfuscated, daily, gapless")]
    Unknown(String),
    #[error("daily digits must be from 1 to {MAX_DAILY_DIGITS}, got {0}")]
    Digits(u8),
    #[error("utc_offset must be Z or +HH:MM / -HH:MM within ±14:00, got {0:?}")]
    UtcOffset(String),
    #[error("daily options are only for the daily profile")]
    OptionsWithoutDaily,
    #[error("upper_bound must be from {min} to {}, got {got}", i64::MAX - 1)]
    UpperBound { got: i64, min: i64 },
    #[error("a daily tag is bounded by its digits: it takes no upper_bound and no max_id")]
    DailyBound,
}

/// Parses a UTC offset (`Z`, `+08:00`, `-05:30`) into minutes east of UTC.
pub fn parse_utc_offset(raw: &str) -> Result<i16, ProfileError> {
    let bad = || ProfileError::UtcOffset(raw.chars().take(16).collect());
    if raw == "Z" {
        return Ok(0);
    }
    let b = raw.as_bytes();
    if b.len() != 6 || b[3] != b':' || !matches!(b[0], b'+' | b'-') {
        return Err(bad());
    }
    let two = |i: usize| -> Option<i16> {
        let (h, l) = (b[i], b[i + 1]);
        (h.is_ascii_digit() && l.is_ascii_digit()).then(|| i16::from(h - b'0') * 10 + i16::from(l - b'0'))
    };
    let (hours, minutes) = (two(1).ok_or_else(bad)?, two(4).ok_or_else(bad)?);
    if minutes >= 60 {
        return Err(bad());
    }
    let total = hours * 60 + minutes;
    if total > MAX_UTC_OFFSET_MINUTES {
        return Err(bad());
    }
    Ok(if b[0] == b'-' { -total } else { total })
}

/// Formats minutes east of UTC as `+HH:MM` / `-HH:MM`.
pub fn format_utc_offset(minutes: i16) -> String {
    let sign = if minutes < 0 { '-' } else { '+' };
    let m = minutes.unsigned_abs();
    format!("{sign}{:02}:{:02}", m / 60, m % 60)
}

/// Checks an upper bound against the tag's first ID: the tag must have at least one ID, and
/// the bound stays below `i64::MAX` (whose exclusive limit is what an unbounded tag has).
pub fn validate_upper_bound(bound: i64, first: i64) -> Result<(), ProfileError> {
    if bound < first.max(0) || bound == i64::MAX {
        return Err(ProfileError::UpperBound { got: bound, min: first.max(0) });
    }
    Ok(())
}

/// The layout of a daily tag's IDs: `day * 10^digits + counter`, where `day` is the date
/// `yyyyMMdd` in the tag's zone and `counter` runs from [`DAILY_FIRST`] to `10^digits − 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DailyFormat {
    /// Counter digits, 1..=[`MAX_DAILY_DIGITS`].
    pub digits: u8,
    /// Minutes east of UTC of the zone whose midnight starts a day.
    pub utc_offset_minutes: i16,
}

impl DailyFormat {
    /// A format from request options (absent fields take their defaults).
    pub fn from_options(o: &DailyOptions) -> Result<Self, ProfileError> {
        let digits = o.digits.unwrap_or(DEFAULT_DAILY_DIGITS);
        let utc_offset_minutes = o.utc_offset.as_deref().map(parse_utc_offset).transpose()?.unwrap_or(0);
        let f = DailyFormat { digits, utc_offset_minutes };
        f.validate()?;
        Ok(f)
    }

    /// The options this format answers with.
    pub fn options(&self) -> DailyOptions {
        DailyOptions { digits: Some(self.digits), utc_offset: Some(format_utc_offset(self.utc_offset_minutes)) }
    }

    /// Checks the digits and the offset (a format from the log is checked again).
    pub fn validate(&self) -> Result<(), ProfileError> {
        if !(1..=MAX_DAILY_DIGITS).contains(&self.digits) {
            return Err(ProfileError::Digits(self.digits));
        }
        if self.utc_offset_minutes.abs() > MAX_UTC_OFFSET_MINUTES {
            return Err(ProfileError::UtcOffset(self.utc_offset_minutes.to_string()));
        }
        Ok(())
    }

    /// `10^digits`: the counter stays below it.
    pub fn counter_limit(&self) -> i64 {
        10i64.pow(u32::from(self.digits.min(MAX_DAILY_DIGITS)))
    }

    /// The day (`yyyyMMdd`) in this zone at `unix_ms`, or `None` outside years 1000–9999.
    pub fn day_at(&self, unix_ms: i64) -> Option<u32> {
        let local_ms = unix_ms.checked_add(i64::from(self.utc_offset_minutes) * 60_000)?;
        let days = local_ms.div_euclid(86_400_000);
        let date = time::Date::from_julian_day(i32::try_from(days.checked_add(UNIX_EPOCH_JULIAN_DAY)?).ok()?).ok()?;
        let year = u32::try_from(date.year()).ok().filter(|y| (1000..=9999).contains(y))?;
        Some(year * 10_000 + u32::from(u8::from(date.month())) * 100 + u32::from(date.day()))
    }

    /// The Unix ms at which the day after `day` starts in this zone (the next day switch).
    pub fn next_midnight_ms(&self, day: u32) -> Option<i64> {
        let month = time::Month::try_from(u8::try_from(day / 100 % 100).ok()?).ok()?;
        let date =
            time::Date::from_calendar_date(i32::try_from(day / 10_000).ok()?, month, u8::try_from(day % 100).ok()?)
                .ok()?
                .next_day()?;
        let days = i64::from(date.to_julian_day()) - UNIX_EPOCH_JULIAN_DAY;
        days.checked_mul(86_400_000)?.checked_sub(i64::from(self.utc_offset_minutes) * 60_000)
    }

    /// The ID of `counter` on `day`; `None` if the counter is outside `0..10^digits`.
    pub fn compose(&self, day: u32, counter: i64) -> Option<i64> {
        if !(0..self.counter_limit()).contains(&counter) {
            return None;
        }
        i64::from(day).checked_mul(self.counter_limit())?.checked_add(counter)
    }

    /// The day and counter of `id`, if it is a well-formed ID of this format (a real date and
    /// a counter from [`DAILY_FIRST`]).
    pub fn split(&self, id: i64) -> Option<(u32, i64)> {
        if id < 0 {
            return None;
        }
        let day = u32::try_from(id / self.counter_limit()).ok()?;
        let counter = id % self.counter_limit();
        let month = time::Month::try_from(u8::try_from(day / 100 % 100).ok()?).ok()?;
        let year = i32::try_from(day / 10_000).ok().filter(|y| (1000..=9999).contains(y))?;
        time::Date::from_calendar_date(year, month, u8::try_from(day % 100).ok()?).ok()?;
        (counter >= DAILY_FIRST).then_some((day, counter))
    }
}

/// The Julian day number of 1970-01-01.
const UNIX_EPOCH_JULIAN_DAY: i64 = 2_440_588;

#[cfg(test)]
// IDs are written `yyyyMMdd_counter`, grouped by meaning rather than by thousands.
#[allow(clippy::inconsistent_digit_grouping)]
mod tests {
    use super::*;

    #[test]
    fn profiles_parse_and_print() {
        for p in Profile::ALL {
            assert_eq!(p.as_str().parse::<Profile>(), Ok(p));
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{}\"", p.as_str()));
        }
        assert!("Segment".parse::<Profile>().is_err());
        assert_eq!(Profile::default(), Profile::Segment);
    }

    #[test]
    fn utc_offsets() {
        assert_eq!(parse_utc_offset("Z"), Ok(0));
        assert_eq!(parse_utc_offset("+08:00"), Ok(480));
        assert_eq!(parse_utc_offset("-05:30"), Ok(-330));
        assert_eq!(parse_utc_offset("+14:00"), Ok(840));
        for bad in ["", "+8:00", "+08:60", "+14:01", "08:00", "+08-00", "+0a:00", "UTC", "+08:000"] {
            assert!(parse_utc_offset(bad).is_err(), "{bad}");
        }
        for m in [-840, -330, 0, 345, 480, 840] {
            assert_eq!(parse_utc_offset(&format_utc_offset(m)), Ok(m));
        }
    }

    #[test]
    fn upper_bounds() {
        assert!(validate_upper_bound(JS_SAFE_MAX, 1).is_ok());
        assert!(validate_upper_bound(1, 1).is_ok());
        assert!(validate_upper_bound(0, 1).is_err());
        assert!(validate_upper_bound(i64::MAX, 1).is_err());
        assert!(validate_upper_bound(-1, 0).is_err());
    }

    fn utc8() -> DailyFormat {
        DailyFormat { digits: 6, utc_offset_minutes: 480 }
    }

    #[test]
    fn days_switch_at_midnight_in_the_zone() {
        // 2026-11-23T15:59:59.999Z is 23:59:59.999 in +08:00; a millisecond later it is the 24th.
        let before = 1_795_449_599_999;
        assert_eq!(utc8().day_at(before), Some(20261123));
        assert_eq!(utc8().day_at(before + 1), Some(20261124));
        let utc = DailyFormat { digits: 6, utc_offset_minutes: 0 };
        assert_eq!(utc.day_at(before + 1), Some(20261123));
        assert_eq!(utc8().next_midnight_ms(20261123), Some(before + 1));
        // Year, month and leap-day boundaries.
        assert_eq!(utc.day_at(0), Some(19700101));
        assert_eq!(utc.next_midnight_ms(20281231).and_then(|ms| utc.day_at(ms)), Some(20290101));
        assert_eq!(utc.next_midnight_ms(20280228).and_then(|ms| utc.day_at(ms)), Some(20280229));
        // Negative offsets: midnight in -05:00 is 05:00 UTC.
        let ny = DailyFormat { digits: 6, utc_offset_minutes: -300 };
        let m = ny.next_midnight_ms(20261122).unwrap();
        assert_eq!((ny.day_at(m - 1), ny.day_at(m)), (Some(20261122), Some(20261123)));
        assert_eq!(m.rem_euclid(86_400_000), 5 * 3_600_000);
        // Out of range years are no day at all.
        assert_eq!(utc.day_at(i64::MAX), None);
        assert_eq!(utc.day_at(-40_000_000_000_000), None);
    }

    #[test]
    fn ids_compose_and_split() {
        let f = utc8();
        assert_eq!(f.compose(20261123, 1), Some(20261123_000001));
        assert_eq!(f.compose(20261123, 999_999), Some(20261123_999999));
        assert_eq!(f.compose(20261123, 1_000_000), None);
        assert_eq!(f.split(20261123_000042), Some((20261123, 42)));
        assert_eq!(f.split(20261123_000000), None, "counters start at 1");
        assert_eq!(f.split(20261332_000001), None, "no 32nd of a 13th month");
        assert_eq!(f.split(20260229_000001), None, "2026 is no leap year");
        assert_eq!(f.split(-1), None);
        let widest = DailyFormat { digits: MAX_DAILY_DIGITS, utc_offset_minutes: 0 };
        assert!(widest.compose(99991231, widest.counter_limit() - 1).is_some());
        assert!(DailyFormat { digits: 11, utc_offset_minutes: 0 }.validate().is_err());
        assert!(DailyFormat { digits: 0, utc_offset_minutes: 0 }.validate().is_err());
    }

    #[test]
    fn options_take_defaults_and_round_trip() {
        let f = DailyFormat::from_options(&DailyOptions { digits: None, utc_offset: None }).unwrap();
        assert_eq!(f, DailyFormat { digits: DEFAULT_DAILY_DIGITS, utc_offset_minutes: 0 });
        let g =
            DailyFormat::from_options(&DailyOptions { digits: Some(4), utc_offset: Some("-03:30".into()) }).unwrap();
        assert_eq!(DailyFormat::from_options(&g.options()), Ok(g));
        assert!(DailyFormat::from_options(&DailyOptions { digits: Some(11), utc_offset: None }).is_err());
    }
}
