//! Gapless series: numbers that are consecutive within a series, each issued exactly once per
//! idempotency key (invoices, receipts, credit notes). The wire types and the rules every layer
//! shares: a series' policy ([`SeriesPolicy`]: when it restarts at 1, in which zone, and how a
//! number is displayed), idempotency keys, and what an issue answers.
//!
//! A series is a tag of profile `gapless`. Its numbers run 1, 2, 3, … within a *period*: the
//! whole life of the tag ([`Reset::Never`], period 0), or the calendar day, month or year in
//! the tag's zone at the leader's time of the issue (period `yyyyMMdd`, `yyyyMM` or `yyyy`). A
//! period never goes back: a leader whose clock is behind keeps numbering in the latest one.
//!
//! Layout:
//! - this file: a series' options and policy ([`SeriesPolicy`]: reset, zone, display format,
//!   period close, retention), periods, idempotency keys;
//! - [`limits`]: a series' cap of numbers and each caller's rate of new numbers;
//! - [`numbers`]: the requests (issue, reserve, confirm, void) and what they answer;
//! - [`ledger`]: a ledger page, its query, its entries and their chain links.
pub mod ledger;
pub mod limits;
pub mod numbers;

pub use self::ledger::*;
pub use self::limits::*;
pub use self::numbers::*;

use serde::{Deserialize, Serialize};

use crate::profile::{format_utc_offset, parse_utc_offset, ProfileError, MAX_UTC_OFFSET_MINUTES};

/// Longest idempotency key, in bytes.
pub const MAX_KEY_BYTES: usize = 128;
/// Longest display format, in bytes.
pub const MAX_FORMAT_BYTES: usize = 64;
/// Most digits a `{seq:0N}` pads to.
pub const MAX_PAD: usize = 19;

/// When a series restarts at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Reset {
    /// One series for the life of the tag (period 0).
    #[default]
    Never,
    /// Each calendar day in the tag's zone (period `yyyyMMdd`).
    Day,
    /// Each calendar month (period `yyyyMM`).
    Month,
    /// Each calendar year (period `yyyy`).
    Year,
}

impl std::str::FromStr for Reset {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "never" => Ok(Reset::Never),
            "day" => Ok(Reset::Day),
            "month" => Ok(Reset::Month),
            "year" => Ok(Reset::Year),
            _ => Err(format!("{:?} is not one of never, day, month, year", s.chars().take(16).collect::<String>())),
        }
    }
}

/// Options of a gapless tag (`"gapless": {...}` when creating one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct GaplessOptions {
    /// When the series restarts at 1 (`never` when absent).
    #[serde(default)]
    pub reset: Option<Reset>,
    /// The zone whose midnight starts a day, month or year, as `+HH:MM` / `-HH:MM` or `Z`
    /// (`+00:00` when absent). A fixed offset, as for daily tags.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 6, pattern = r"^(Z|[+-]((0[0-9]|1[0-3]):[0-5][0-9]|14:00))$", example = "+01:00")
    )]
    pub utc_offset: Option<String>,
    /// How a number is displayed, e.g. `INV-{yyyy}-{seq:06}`: `{seq}` (or `{seq:0N}`, zero-padded
    /// to N digits) exactly once, and the period's `{yyyy}`, `{yy}`, `{mm}`, `{dd}` as far as the
    /// reset goes (a yearly series has no `{mm}`); other characters are printable ASCII but
    /// braces. At most 64 bytes. No display when absent.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 64, example = "INV-{yyyy}-{seq:06}"))]
    pub format: Option<String>,
    /// What happens to a period's open reservations once the series has moved to the next
    /// period: `wait` (default) for each to be confirmed, voided or to expire; `void` to void
    /// them at once (reason `period_closed`).
    #[serde(default)]
    pub on_period_close: Option<PeriodClose>,
    /// How many periods the ledger keeps, the current one included: an older period is
    /// dropped (with its keys) once it has no open reservation. Absent: every period is kept,
    /// up to the cluster's cap of numbers. Only for a series that resets.
    #[serde(default, deserialize_with = "crate::json_int::opt_u32")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100000, example = 10))]
    pub retain_periods: Option<u32>,
    /// Most numbers the series keeps, every kept period and state together (100,000 when
    /// absent; at most 1,000,000, the cluster's whole ledger): an issue past it is refused.
    #[serde(default, deserialize_with = "crate::json_int::opt_u64", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000000, example = 100000))]
    pub max_numbers: Option<u64>,
    /// Most new numbers one caller (a token, or an address without one) takes a second from
    /// the series on one node, with a burst of as many (100 when absent).
    #[serde(default, deserialize_with = "crate::json_int::opt_u32", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000000, example = 100))]
    pub issues_per_sec: Option<u32>,
}

impl GaplessOptions {
    /// The series' limits these options ask for, the defaults where absent, validated.
    pub fn limits(&self) -> Result<SeriesLimits, GaplessError> {
        let l = SeriesLimits::default().with(self.max_numbers, self.issues_per_sec);
        l.validate()?;
        Ok(l)
    }
}

/// What closing a period does to its open reservations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum PeriodClose {
    /// Each stays open until it is confirmed, voided or expires.
    #[default]
    Wait,
    /// The leader voids them (reason `period_closed`) once a number of a later period exists.
    Void,
}

impl std::str::FromStr for PeriodClose {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "wait" => Ok(PeriodClose::Wait),
            "void" => Ok(PeriodClose::Void),
            _ => Err(format!("{:?} is not one of wait, void", s.chars().take(16).collect::<String>())),
        }
    }
}

/// Most periods a series may retain.
pub const MAX_RETAIN_PERIODS: u32 = 100_000;

/// Why gapless options, a key or a display format were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GaplessError {
    #[error(transparent)]
    Offset(#[from] ProfileError),
    #[error("format: {0}")]
    Format(String),
    #[error("an idempotency key is 1 to {MAX_KEY_BYTES} bytes of printable ASCII, got {0}")]
    Key(String),
    #[error("gapless options are only for the gapless profile")]
    OptionsWithoutGapless,
    #[error("a gapless tag starts at 1 and is bounded by its periods: it takes no upper_bound and no max_id")]
    Bound,
    #[error("retain_periods is 1 to {MAX_RETAIN_PERIODS}, for a series that resets (got {0})")]
    Retain(String),
    #[error(
        "a void's reason is 1 to {MAX_REASON_CHARS} characters of text, no control character, not only spaces; got {0}"
    )]
    Reason(String),
    #[error("a reservation is held 1 to {MAX_HOLD_SECONDS} seconds, got {0}")]
    Hold(u64),
    #[error(transparent)]
    Limits(#[from] LimitsError),
    #[error(
        "a settlement secret is {MIN_SECRET_CHARS} to {MAX_SECRET_CHARS} characters of A-Z, a-z, 0-9, '-' and '_', got {0} characters"
    )]
    Secret(usize),
}

/// A gapless series' policy, as the replicated state keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeriesPolicy {
    pub reset: Reset,
    /// Minutes east of UTC of the zone whose midnight starts a period.
    pub utc_offset_minutes: i16,
    /// The display format, validated ([`SeriesPolicy::validate`]).
    pub format: Option<String>,
    pub on_period_close: PeriodClose,
    /// Periods the ledger keeps (all when `None`).
    pub retain_periods: Option<u32>,
}

/// One part of a parsed display format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part<'a> {
    Text(&'a str),
    Year4,
    Year2,
    Month,
    Day,
    Seq { pad: usize },
}

impl SeriesPolicy {
    /// A policy from request options (absent fields take their defaults), validated.
    pub fn from_options(o: &GaplessOptions) -> Result<Self, GaplessError> {
        let utc_offset_minutes = o.utc_offset.as_deref().map(parse_utc_offset).transpose()?.unwrap_or(0);
        let p = SeriesPolicy {
            reset: o.reset.unwrap_or_default(),
            utc_offset_minutes,
            format: o.format.clone(),
            on_period_close: o.on_period_close.unwrap_or_default(),
            retain_periods: o.retain_periods,
        };
        p.validate()?;
        Ok(p)
    }

    /// The options this policy answers with.
    pub fn options(&self) -> GaplessOptions {
        GaplessOptions {
            reset: Some(self.reset),
            utc_offset: Some(format_utc_offset(self.utc_offset_minutes)),
            format: self.format.clone(),
            on_period_close: Some(self.on_period_close),
            retain_periods: self.retain_periods,
            max_numbers: None,
            issues_per_sec: None,
        }
    }

    /// Checks the offset and the format (a policy from the log is checked again).
    pub fn validate(&self) -> Result<(), GaplessError> {
        if self.utc_offset_minutes.abs() > MAX_UTC_OFFSET_MINUTES {
            return Err(ProfileError::UtcOffset(self.utc_offset_minutes.to_string()).into());
        }
        if let Some(f) = &self.format {
            self.parts(f)?;
        }
        if let Some(n) = self.retain_periods {
            if n == 0 || n > MAX_RETAIN_PERIODS || self.reset == Reset::Never {
                return Err(GaplessError::Retain(format!("{n} for a series that resets {:?}", self.reset)));
            }
        }
        Ok(())
    }

    fn parts<'a>(&self, format: &'a str) -> Result<Vec<Part<'a>>, GaplessError> {
        let bad = |m: &str| GaplessError::Format(m.to_string());
        if format.is_empty() || format.len() > MAX_FORMAT_BYTES {
            return Err(bad("1 to 64 bytes"));
        }
        let mut parts = Vec::new();
        let mut rest = format;
        while !rest.is_empty() {
            if let Some(inner) = rest.strip_prefix('{') {
                let close = inner.find('}').ok_or_else(|| bad("a `{` without its `}`"))?;
                let (name, after) = (&inner[..close], &inner[close + 1..]);
                let part = match name {
                    "yyyy" => Part::Year4,
                    "yy" => Part::Year2,
                    "mm" => Part::Month,
                    "dd" => Part::Day,
                    "seq" => Part::Seq { pad: 0 },
                    _ => match name
                        .strip_prefix("seq:0")
                        .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
                        .and_then(|n| n.parse::<usize>().ok())
                    {
                        Some(pad) if (1..=MAX_PAD).contains(&pad) => Part::Seq { pad },
                        _ => {
                            return Err(GaplessError::Format(format!(
                                "unknown placeholder {{{}}}: one of {{yyyy}} {{yy}} {{mm}} {{dd}} {{seq}} {{seq:0N}} (N 1 to {MAX_PAD})",
                                name.chars().take(16).collect::<String>()
                            )))
                        }
                    },
                };
                let needs = match part {
                    Part::Year4 | Part::Year2 => Reset::Year,
                    Part::Month => Reset::Month,
                    Part::Day => Reset::Day,
                    _ => Reset::Never,
                };
                if !self.reset_covers(needs) {
                    return Err(GaplessError::Format(format!(
                        "{{{name}}} needs a series that resets at least that often (this one resets {:?})",
                        self.reset
                    )));
                }
                parts.push(part);
                rest = after;
            } else {
                let end = rest.find('{').unwrap_or(rest.len());
                let text = &rest[..end];
                if !text.bytes().all(|b| b.is_ascii_graphic() || b == b' ') || text.contains('}') {
                    return Err(bad("text is printable ASCII without braces"));
                }
                parts.push(Part::Text(text));
                rest = &rest[end..];
            }
        }
        if parts.iter().filter(|p| matches!(p, Part::Seq { .. })).count() != 1 {
            return Err(bad("{seq} must appear exactly once"));
        }
        Ok(parts)
    }

    /// Whether a series of this reset knows the date part `needs` of its period: a daily
    /// series knows its year, month and day; a yearly one only its year.
    fn reset_covers(&self, needs: Reset) -> bool {
        let rank = |r: Reset| match r {
            Reset::Never => 0,
            Reset::Year => 1,
            Reset::Month => 2,
            Reset::Day => 3,
        };
        rank(self.reset) >= rank(needs)
    }

    /// The period in this zone at `unix_ms`: 0, `yyyy`, `yyyyMM` or `yyyyMMdd`; `None` outside
    /// years 1000–9999.
    pub fn period_at(&self, unix_ms: i64) -> Option<u32> {
        let daily = crate::profile::DailyFormat { digits: 1, utc_offset_minutes: self.utc_offset_minutes };
        let day = daily.day_at(unix_ms)?;
        Some(match self.reset {
            Reset::Never => 0,
            Reset::Year => day / 10_000,
            Reset::Month => day / 100,
            Reset::Day => day,
        })
    }

    /// Whether `period` is one this policy can produce (0 for a series that never resets).
    pub fn is_period(&self, period: u32) -> bool {
        match self.reset {
            Reset::Never => period == 0,
            r => period_bounds(r).contains(&period),
        }
    }

    /// The display of `number` in `period`, if the policy has a format.
    pub fn display(&self, period: u32, number: u64) -> Option<String> {
        let format = self.format.as_deref()?;
        let parts = self.parts(format).ok()?;
        // The period's date parts, most significant first.
        let (year, month, day) = match self.reset {
            Reset::Never => (0, 0, 0),
            Reset::Year => (period, 0, 0),
            Reset::Month => (period / 100, period % 100, 0),
            Reset::Day => (period / 10_000, period / 100 % 100, period % 100),
        };
        let mut out = String::with_capacity(format.len() + 20);
        for p in parts {
            match p {
                Part::Text(t) => out.push_str(t),
                Part::Year4 => out.push_str(&format!("{year:04}")),
                Part::Year2 => out.push_str(&format!("{:02}", year % 100)),
                Part::Month => out.push_str(&format!("{month:02}")),
                Part::Day => out.push_str(&format!("{day:02}")),
                Part::Seq { pad } => out.push_str(&format!("{number:0pad$}")),
            }
        }
        Some(out)
    }
}

/// The periods of a series that resets at `reset`, as a range (dates grouped by meaning).
#[allow(clippy::inconsistent_digit_grouping)]
fn period_bounds(reset: Reset) -> std::ops::RangeInclusive<u32> {
    match reset {
        Reset::Never => 0..=0,
        Reset::Year => 1000..=9999,
        Reset::Month => 1000_01..=9999_12,
        Reset::Day => 1000_01_01..=9999_12_31,
    }
}

/// Whether `period` is a period of some series: 0, or a `yyyy`, `yyyyMM` or `yyyyMMdd` of the
/// years 1000–9999 (what a peer's answer is checked against, not knowing the policy).
pub fn is_any_period(period: u32) -> bool {
    [Reset::Never, Reset::Year, Reset::Month, Reset::Day].into_iter().any(|r| period_bounds(r).contains(&period))
}

/// Checks an idempotency key: 1 to [`MAX_KEY_BYTES`] bytes of printable ASCII (space included).
pub fn validate_key(key: &str) -> Result<(), GaplessError> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES || !key.bytes().all(|b| b.is_ascii_graphic() || b == b' ') {
        let shown: String = key.chars().take(32).collect();
        return Err(GaplessError::Key(format!("{} bytes: {shown:?}", key.len())));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::inconsistent_digit_grouping)]
mod tests {
    use super::*;

    const NOV28_2026_UTC: i64 = 1_795_824_000_000;

    fn policy(reset: Reset, format: &str) -> SeriesPolicy {
        SeriesPolicy { reset, format: Some(format.into()), ..Default::default() }
    }

    #[test]
    fn formats_render_their_period_and_number() {
        assert_eq!(policy(Reset::Year, "INV-{yyyy}-{seq:06}").display(2026, 417).unwrap(), "INV-2026-000417");
        assert_eq!(policy(Reset::Month, "{yy}{mm}/{seq}").display(2026_11, 9).unwrap(), "2611/9");
        assert_eq!(policy(Reset::Day, "R{yyyy}{mm}{dd}-{seq:03}").display(2026_11_28, 1234).unwrap(), "R20261128-1234");
        assert_eq!(policy(Reset::Never, "CN {seq}").display(0, 7).unwrap(), "CN 7");
        assert_eq!(SeriesPolicy::default().display(0, 7), None);
    }

    #[test]
    fn bad_formats_are_refused() {
        for (reset, f) in [
            (Reset::Never, "{yyyy}-{seq}"),
            (Reset::Year, "{mm}-{seq}"),
            (Reset::Month, "{dd}-{seq}"),
            (Reset::Year, "{yyyy}"),
            (Reset::Year, "{seq}{seq}"),
            (Reset::Year, "{seq:6}"),
            (Reset::Year, "{seq:020}"),
            (Reset::Year, "{seq:00}"),
            (Reset::Year, "{seq:0+6}"),
            (Reset::Year, "{seq"),
            (Reset::Year, "a}{seq}"),
            (Reset::Year, "é{seq}"),
            (Reset::Year, "{SEQ}"),
            (Reset::Year, ""),
        ] {
            assert!(policy(reset, f).validate().is_err(), "{reset:?} {f:?}");
        }
        assert!(policy(Reset::Year, &format!("{}{{seq}}", "x".repeat(60))).validate().is_err());
        assert!(policy(Reset::Day, "{yyyy}{yy}{mm}{dd}{seq:019}").validate().is_ok());
    }

    #[test]
    fn periods_follow_the_zone() {
        let mut p = policy(Reset::Day, "{seq}");
        assert_eq!(p.period_at(NOV28_2026_UTC), Some(2026_11_28));
        assert_eq!(p.period_at(NOV28_2026_UTC - 1), Some(2026_11_27));
        p.utc_offset_minutes = 60;
        assert_eq!(p.period_at(NOV28_2026_UTC - 1), Some(2026_11_28));
        p.reset = Reset::Month;
        assert_eq!(p.period_at(NOV28_2026_UTC), Some(2026_11));
        p.reset = Reset::Year;
        assert_eq!(p.period_at(NOV28_2026_UTC), Some(2026));
        p.reset = Reset::Never;
        assert_eq!(p.period_at(NOV28_2026_UTC), Some(0));
        assert!(p.is_period(0) && !p.is_period(2026));
        p.reset = Reset::Month;
        assert!(p.is_period(2026_11) && !p.is_period(2026) && !p.is_period(2026_11_28));
        for ok in [0, 2026, 2026_11, 2026_11_28] {
            assert!(is_any_period(ok), "{ok}");
        }
        for bad in [1, 999, 10_000, 2026_13 + 999_900, 99_999_999 + 1, u32::MAX] {
            assert!(!is_any_period(bad), "{bad}");
        }
    }

    #[test]
    fn keys_are_bounded_printable_ascii() {
        assert!(validate_key("order-2026-000417").is_ok());
        assert!(validate_key("a b").is_ok());
        assert!(validate_key(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        for bad in [String::new(), "k".repeat(MAX_KEY_BYTES + 1), "tab\there".into(), "é".into(), "nl\n".into()] {
            assert!(validate_key(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn options_round_trip() {
        let o = GaplessOptions {
            reset: Some(Reset::Year),
            utc_offset: Some("+01:00".into()),
            format: Some("INV-{yyyy}-{seq:06}".into()),
            on_period_close: Some(PeriodClose::Void),
            retain_periods: Some(10),
            max_numbers: None,
            issues_per_sec: None,
        };
        let p = SeriesPolicy::from_options(&o).unwrap();
        assert_eq!(p.utc_offset_minutes, 60);
        assert_eq!(p.options(), o);
        assert_eq!(SeriesPolicy::from_options(&GaplessOptions::default()).unwrap(), SeriesPolicy::default());
        let json: GaplessOptions = serde_json::from_str(r#"{"reset":"month"}"#).unwrap();
        assert_eq!(json.reset, Some(Reset::Month));
        assert!(serde_json::from_str::<GaplessOptions>(r#"{"reset":"week"}"#).is_err());
        assert!(serde_json::from_str::<GaplessOptions>(r#"{"rest":"year"}"#).is_err());
        // Integers in any JSON notation of an integral value, as the schema allows.
        let o: GaplessOptions = serde_json::from_str(r#"{"reset":"year","retain_periods":10.0}"#).unwrap();
        assert_eq!(o.retain_periods, Some(10));
        let r: ReserveRequest = serde_json::from_str(r#"{"key":"k","hold_seconds":3020.0}"#).unwrap();
        assert_eq!(r.hold_seconds, Some(3020));
        // Retention is for a series that resets, 1 to MAX_RETAIN_PERIODS periods.
        for (reset, n) in [(Reset::Never, 1), (Reset::Year, 0), (Reset::Day, MAX_RETAIN_PERIODS + 1)] {
            let o = GaplessOptions { reset: Some(reset), retain_periods: Some(n), ..Default::default() };
            assert!(SeriesPolicy::from_options(&o).is_err(), "{reset:?} {n}");
        }
    }
}
