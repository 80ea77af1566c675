//! `[fault]`: fault injection, for chaos tests only.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Fault injection (chaos tests only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FaultConfig {
    /// Exposes `POST /admin/fault/clock` (admin-authenticated) to skew this node's clock at
    /// runtime; logged loudly at start. Also `--enable-fault-injection`. Default `false`.
    pub enabled: bool,
    /// Skew of this node's clock from the start, in ms, positive for ahead (needs `enabled`).
    /// Within a year either way; default `0`.
    pub clock_offset_ms: i64,
}

impl FaultConfig {
    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if self.clock_offset_ms != 0 && !self.enabled {
            errs.push("fault.clock_offset_ms needs fault.enabled (--enable-fault-injection)".to_string());
        }
        if self.clock_offset_ms.unsigned_abs() > 365 * 24 * 3_600_000 {
            errs.push("fault.clock_offset_ms must be within a year".to_string());
        }
    }
}
