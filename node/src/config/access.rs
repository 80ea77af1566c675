//! `[auth]` (who may get IDs) and `[audit]` (how long the audit trail keeps records).
use leaf_api::audit::AuditRetention;
use leaf_raft_store::audit::{MAX_AUDIT_AGE_MS, MAX_AUDIT_RECORDS};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Access to the ID endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Refuse ID requests (HTTP and gRPC) without a token: 401 `unauthorized` without one, 403
    /// `forbidden` for a token without the `ids` right on the tag. Off: a request without a token
    /// gets IDs as before, and one with a token is still checked (scope, quota). Default `false`.
    pub require_token_for_ids: bool,
}

impl AuthConfig {
    /// Nothing can be wrong with it today; kept so a new field gets its check here.
    pub(super) fn validate(&self, _errs: &mut [String]) {}
}

/// The audit trail's retention, stamped by the leader into every admin change it records:
/// the leader's configuration is the one in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Most records kept (the oldest go first). 1 to 5000; default `5000`.
    pub max_records: u32,
    /// Records older than this many days (leader time) go. 1 to 3650; default `365`.
    pub max_age_days: u32,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig { max_records: MAX_AUDIT_RECORDS, max_age_days: 365 }
    }
}

impl AuditConfig {
    pub fn retention(&self) -> AuditRetention {
        AuditRetention { max_records: self.max_records, max_age_ms: i64::from(self.max_age_days) * 86_400_000 }
    }

    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if !(1..=MAX_AUDIT_RECORDS).contains(&self.max_records) {
            errs.push(format!("audit.max_records must be from 1 to {MAX_AUDIT_RECORDS}"));
        }
        let max_days = MAX_AUDIT_AGE_MS / 86_400_000;
        if !(1..=max_days).contains(&i64::from(self.max_age_days)) {
            errs.push(format!("audit.max_age_days must be from 1 to {max_days}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_is_checked_and_converted() {
        let mut errs = vec![];
        AuditConfig::default().validate(&mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(AuditConfig::default().retention(), leaf_raft_store::audit::DEFAULT_RETENTION);
        for bad in [
            AuditConfig { max_records: 0, max_age_days: 1 },
            AuditConfig { max_records: MAX_AUDIT_RECORDS + 1, max_age_days: 1 },
            AuditConfig { max_records: 1, max_age_days: 0 },
            AuditConfig { max_records: 1, max_age_days: 3651 },
        ] {
            let mut errs = vec![];
            bad.validate(&mut errs);
            assert_eq!(errs.len(), 1, "{bad:?}");
        }
    }
}
