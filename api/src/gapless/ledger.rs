//! A gapless series' ledger on the wire: a page ([`LedgerPage`]) of entries ([`LedgerEntry`],
//! each with its settlement) after a cursor, the query that asks for it, and the chain links
//! as hex.
use serde::{Deserialize, Serialize};

use super::numbers::{NumberState, VoidCause};

/// How a reserved number was settled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Settlement {
    /// `confirmed` or `voided`.
    pub state: NumberState,
    /// Why it was voided (absent for a confirmation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<VoidCause>,
    /// The void's reason: the caller's, or `expired` / `period closed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who settled it (the leader node for an expiry or a period's close).
    pub actor: crate::audit::Actor,
    /// Leader time of the settlement, Unix milliseconds.
    pub at_ms: i64,
    /// The settlement's place in its period's event sequence.
    pub seq: u64,
    /// The settlement's link of its period's hash chain.
    pub hash: String,
}

/// Most numbers one ledger page holds.
pub const MAX_LEDGER_PAGE: u32 = 10_000;

/// `GET /admin/tags/{tag}/ledger`: a page of a series' numbers in issue order ((period,
/// number) order), those of one `period` if given (a value that is no period matches none),
/// after the cursor `after_period` / `after_number` (the previous page's `next`; without
/// `after_number`, after the whole period; without `after_period`, period 0), at most `limit`
/// (default and most 10,000).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct LedgerQuery {
    /// Only this period (0, `yyyy`, `yyyyMM` or `yyyyMMdd`).
    #[cfg_attr(feature = "openapi", param(minimum = 0, maximum = 99991231))]
    pub period: Option<u32>,
    /// The cursor's period: numbers after this period's `after_number` (after the whole
    /// period without it).
    #[cfg_attr(feature = "openapi", param(minimum = 0, maximum = 99991231))]
    pub after_period: Option<u32>,
    /// The cursor's number within `after_period` (period 0 without it).
    #[cfg_attr(feature = "openapi", param(minimum = 0, maximum = 9223372036854775807_u64))]
    pub after_number: Option<u64>,
    /// Most numbers on the page (default and most: 10000).
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 10000))]
    pub limit: Option<u32>,
    /// Only numbers in this state (`reserved`: the open reservations).
    pub state: Option<NumberState>,
}

/// Where the next page starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LedgerCursor {
    pub after_period: u32,
    pub after_number: u64,
}

/// The largest period a ledger query names: `yyyyMMdd` of 9999-12-31.
pub const MAX_PERIOD: u32 = 99_991_231;

/// One number of a series' ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LedgerEntry {
    pub period: u32,
    pub number: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<String>,
    pub key: String,
    /// The state now.
    pub state: NumberState,
    /// Who asked for it.
    pub actor: crate::audit::Actor,
    /// Leader time of the issue or reservation, Unix milliseconds.
    pub at_ms: i64,
    /// A reserved number's deadline (absent for a number issued final at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
    /// The or reservation's place in its period's event sequence (1, 2, …).
    pub seq: u64,
    /// The or reservation's link of its period's hash chain: SHA-256, lowercase hex.
    pub hash: String,
    /// How a reservation was settled, once it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled: Option<Settlement>,
}

/// A chain link as lowercase hex.
pub fn hash_hex(hash: &[u8; 32]) -> String {
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// A chain link from lowercase hex (64 digits).
pub fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.as_bytes().chunks(2).enumerate() {
        out[i] = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

/// A page of a series' ledger, with the series' size, its open reservations and the digest of
/// its chains' heads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LedgerPage {
    pub tag: String,
    /// Numbers the series holds, every period it keeps.
    pub numbers: u64,
    /// Numbers reserved and not yet settled, every period.
    pub open_reservations: u64,
    /// The latest period retention dropped, if any: the ledger holds the periods after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned_through: Option<u32>,
    /// The digest of every kept period's chain head (`leaf ledger verify` recomputes it; 64
    /// zeros before the first number).
    pub head: String,
    pub entries: Vec<LedgerEntry>,
    /// The next page's cursor; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<LedgerCursor>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_round_trip_as_hex() {
        let h: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        assert_eq!(parse_hash(&hash_hex(&h)), Some(h));
        assert_eq!(hash_hex(&[0; 32]), "0".repeat(64));
        for bad in ["", "00", &"g".repeat(64), &"A".repeat(64), &"0".repeat(63), &"0".repeat(65)] {
            assert_eq!(parse_hash(bad), None, "{bad}");
        }
    }
}
