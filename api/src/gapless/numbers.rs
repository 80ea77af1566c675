//! Gapless requests and answers: an issue, a reservation, a confirmation and a void of a key's
//! number, the bounds of their fields, and the number as answered ([`IssuedNumber`]).
use serde::{Deserialize, Serialize};

use super::GaplessError;

/// `POST /api/gapless/{tag}/issue`: the next number of the series for `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IssueRequest {
    /// The caller's reference for the document (its idempotency key): the same key always gets
    /// the same number. 1 to 128 bytes of printable ASCII.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, pattern = r"^[ -~]+$", example = "order-2026-000417")
    )]
    pub key: String,
    /// Only for a caller without a token: the settlement secret of the key's number, which
    /// proves the caller is the one that took it. On a first issue or reservation it is the
    /// caller's own choice (the node makes one when absent, and answers it); a repeat, a
    /// confirm and a void must present it. Ignored for a caller with a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 22, max_length = 128, pattern = r"^[A-Za-z0-9_-]+$"))]
    pub secret: Option<String>,
}

/// Shortest settlement secret, in characters (22 base64url characters hold 132 bits).
pub const MIN_SECRET_CHARS: usize = 22;
/// Longest settlement secret, in characters.
pub const MAX_SECRET_CHARS: usize = 128;

/// Checks a settlement secret: [`MIN_SECRET_CHARS`] to [`MAX_SECRET_CHARS`] characters of the
/// base64url alphabet. The error never holds the secret.
pub fn validate_secret(secret: &str) -> Result<(), GaplessError> {
    let ok = (MIN_SECRET_CHARS..=MAX_SECRET_CHARS).contains(&secret.len())
        && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(GaplessError::Secret(secret.chars().count()));
    }
    Ok(())
}

/// Longest reason of a void, in characters (Unicode scalar values, as JSON Schema counts).
pub const MAX_REASON_CHARS: usize = 256;
/// Longest reason of a void, in bytes (UTF-8 takes at most 4 a character).
pub const MAX_REASON_BYTES: usize = 4 * MAX_REASON_CHARS;
/// Longest hold of a reservation: 30 days.
pub const MAX_HOLD_SECONDS: u64 = 30 * 24 * 3600;
/// A reservation's hold when the request gives none: 15 minutes.
pub const DEFAULT_HOLD_SECONDS: u64 = 15 * 60;

/// Checks a void's reason: 1 to [`MAX_REASON_CHARS`] characters of text (a tax authority's
/// wording may not be English), no control character, not only spaces. The OpenAPI pattern
/// of [`VoidRequest::reason`] says the same.
pub fn validate_reason(reason: &str) -> Result<(), GaplessError> {
    let chars = reason.chars().count();
    if chars == 0
        || chars > MAX_REASON_CHARS
        || reason.chars().any(char::is_control)
        || reason.chars().all(|c| c == ' ')
    {
        let shown: String = reason.chars().filter(|c| !c.is_control()).take(32).collect();
        return Err(GaplessError::Reason(format!("{chars} characters: {shown:?}")));
    }
    Ok(())
}

/// Checks a reservation's hold in seconds: 1 to [`MAX_HOLD_SECONDS`].
pub fn validate_hold(seconds: u64) -> Result<(), GaplessError> {
    if seconds == 0 || seconds > MAX_HOLD_SECONDS {
        return Err(GaplessError::Hold(seconds));
    }
    Ok(())
}

/// `POST /api/gapless/{tag}/reserve`: the next number of the series for `key`, held until a
/// deadline for a confirm or a void (the leader voids it, reason `expired`, at the deadline).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReserveRequest {
    /// The caller's reference for the document (its idempotency key), as for an issue.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, pattern = r"^[ -~]+$", example = "order-2026-000417")
    )]
    pub key: String,
    /// Only for a caller without a token: the settlement secret of the key's number, which
    /// proves the caller is the one that took it. On a first issue or reservation it is the
    /// caller's own choice (the node makes one when absent, and answers it); a repeat, a
    /// confirm and a void must present it. Ignored for a caller with a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 22, max_length = 128, pattern = r"^[A-Za-z0-9_-]+$"))]
    pub secret: Option<String>,
    /// Seconds the reservation is held (1 to 2,592,000; 900 when absent).
    #[serde(default, deserialize_with = "crate::json_int::opt_u64")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2592000, example = 900))]
    pub hold_seconds: Option<u64>,
}

/// `POST /api/gapless/{tag}/confirm`: makes the key's reserved number final.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ConfirmRequest {
    /// The key the number was reserved for.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, pattern = r"^[ -~]+$", example = "order-2026-000417")
    )]
    pub key: String,
    /// Only for a caller without a token: the settlement secret of the key's number, which
    /// proves the caller is the one that took it. On a first issue or reservation it is the
    /// caller's own choice (the node makes one when absent, and answers it); a repeat, a
    /// confirm and a void must present it. Ignored for a caller with a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 22, max_length = 128, pattern = r"^[A-Za-z0-9_-]+$"))]
    pub secret: Option<String>,
}

/// `POST /api/gapless/{tag}/void`: voids the key's reserved number; it keeps its place in the
/// series with the reason and the caller, and is never issued again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct VoidRequest {
    /// The key the number was reserved for.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, pattern = r"^[ -~]+$", example = "order-2026-000417")
    )]
    pub key: String,
    /// Only for a caller without a token: the settlement secret of the key's number, which
    /// proves the caller is the one that took it. On a first issue or reservation it is the
    /// caller's own choice (the node makes one when absent, and answers it); a repeat, a
    /// confirm and a void must present it. Ignored for a caller with a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_length = 22, max_length = 128, pattern = r"^[A-Za-z0-9_-]+$"))]
    pub secret: Option<String>,
    /// Why: 1 to 256 characters of text, no control character (U+0000–U+001F, U+007F–U+009F),
    /// not only spaces.
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 256,
            pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u009f][^\u0000-\u001f\u007f-\u009f]*$",
            example = "customer cancelled"
        )
    )]
    pub reason: String,
}

/// A number's state in the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum NumberState {
    /// Issued and final at once: committed through Raft before it was answered.
    Issued,
    /// Reserved until its deadline: to be confirmed or voided.
    Reserved,
    /// Reserved, then confirmed: final.
    Confirmed,
    /// Reserved, then voided (by the caller, at its deadline, or as its period closed): it
    /// keeps its place in the series and is never issued again.
    Voided,
}

impl NumberState {
    /// Whether the number is settled: issued, confirmed or voided (not reserved).
    pub fn is_final(self) -> bool {
        self != NumberState::Reserved
    }
}

/// Why a number was voided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum VoidCause {
    /// A caller voided it, giving the reason.
    Caller,
    /// Its reservation's deadline passed.
    Expired,
    /// Its period closed with it reserved, under `on_period_close: void`.
    PeriodClosed,
    /// A restore from a backup voided it: the lost cluster may have issued it after the
    /// backup (its key is then empty).
    Lost,
}

/// A number of a gapless series, as an issue answers it.
// Its `Debug` never shows the settlement secret (an application may log answers).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IssuedNumber {
    pub tag: String,
    /// 0 for a series that never resets; else `yyyy`, `yyyyMM` or `yyyyMMdd`.
    pub period: u32,
    /// The number within the period: 1, 2, 3, … with no gap.
    pub number: u64,
    /// The number in the tag's display format, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
    pub key: String,
    /// The number's state now.
    pub state: NumberState,
    /// Leader time of the issue or reservation, Unix milliseconds.
    pub issued_ms: i64,
    /// A reservation's deadline, Unix milliseconds (leader time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
    /// A voided number's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Whether this answer repeats an earlier request of the same key and action (a retry):
    /// nothing changed.
    pub replayed: bool,
    /// To a caller without a token only: the number's settlement secret, which a repeat, a
    /// confirm and a void of the key must present. Keep it like a password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl std::fmt::Debug for IssuedNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedNumber")
            .field("tag", &self.tag)
            .field("period", &self.period)
            .field("number", &self.number)
            .field("display", &self.display)
            .field("key", &self.key)
            .field("state", &self.state)
            .field("issued_ms", &self.issued_ms)
            .field("deadline_ms", &self.deadline_ms)
            .field("reason", &self.reason)
            .field("replayed", &self.replayed)
            .field("secret", &self.secret.as_ref().map(|_| "(set)"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_and_holds_are_bounded() {
        assert!(validate_reason("customer cancelled").is_ok());
        assert!(validate_reason("anulada por el cliente: duplicado").is_ok());
        assert!(validate_reason("取消").is_ok());
        assert!(validate_reason(&"é".repeat(MAX_REASON_CHARS)).is_ok(), "characters, not bytes");
        assert!(validate_reason(" x ").is_ok());
        for bad in [
            String::new(),
            "  ".into(),
            "x".repeat(MAX_REASON_CHARS + 1),
            "a\nb".into(),
            "tab\t".into(),
            "c1\u{85}".into(),
            "del\u{7f}".into(),
        ] {
            assert!(validate_reason(&bad).is_err(), "{bad:?}");
        }
        assert!(validate_hold(1).is_ok() && validate_hold(MAX_HOLD_SECONDS).is_ok());
        assert!(validate_hold(0).is_err() && validate_hold(MAX_HOLD_SECONDS + 1).is_err());
        assert!(!NumberState::Reserved.is_final() && NumberState::Voided.is_final());
    }

    #[test]
    fn an_answers_debug_hides_its_secret() {
        let n = IssuedNumber {
            tag: "inv".into(),
            period: 0,
            number: 1,
            display: None,
            key: "k".into(),
            state: NumberState::Issued,
            issued_ms: 1,
            deadline_ms: None,
            reason: None,
            replayed: false,
            secret: Some("s3cr3t-s3cr3t-s3cr3t-s3cr3t".into()),
        };
        let shown = format!("{n:?}");
        assert!(!shown.contains("s3cr3t") && shown.contains("(set)") && shown.contains("number: 1"), "{shown}");
    }

    #[test]
    fn secrets_are_bounded_base64url_and_never_echoed() {
        assert!(validate_secret(&"a".repeat(MIN_SECRET_CHARS)).is_ok());
        assert!(validate_secret("Zx-_09azAZ-_09azAZ-_09").is_ok());
        for bad in ["a".repeat(MIN_SECRET_CHARS - 1), "a".repeat(MAX_SECRET_CHARS + 1), format!("{}=", "a".repeat(30))]
        {
            let e = validate_secret(&bad).unwrap_err().to_string();
            assert!(!e.contains(&bad), "{e}");
        }
    }
}
