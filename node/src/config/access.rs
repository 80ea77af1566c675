//! `[auth]` (who may get IDs) and `[audit]` (how long the audit trail keeps records).
use leaf_api::audit::AuditRetention;
use leaf_raft_store::audit::{MAX_AUDIT_AGE_MS, MAX_AUDIT_RECORDS};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Access to the ID endpoints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Refuse ID requests (HTTP and gRPC) without a token: 401 `unauthorized` without one, 403
    /// `forbidden` for a token without the `ids` right on the tag. Off: a request without a token
    /// gets IDs as before, and one with a token is still checked (scope, quota). Default `false`.
    pub require_token_for_ids: bool,
    /// IDs a second that ID requests without a token may take from this node, per client
    /// address (an IPv6 address counts by its /64), counted in IDs: a request for 1,000 costs
    /// 1,000. Over it: 429 `rate_limited` with `Retry-After`. 0 turns the quota off; at most
    /// 1000000000. Default
    /// `10000000`: far above what a client asking for IDs as it needs them takes, it stops one
    /// address from draining a tag's range at a node's full ranges speed.
    pub anonymous_ids_per_sec: u32,
    /// The most IDs such an address may take at once, after a quiet spell. At least 1000000 (a
    /// single request may ask for that many, as ranges). Default `20000000`.
    pub anonymous_burst_ids: u32,
    /// Let callers without a token use gapless series (issue, reserve, confirm, void). Each of
    /// their numbers then belongs to a settlement secret (the caller's own, or one the node
    /// makes and answers), which a repeat, a confirm and a void must present, and their issues
    /// count against each series' `issues_per_sec` per client address. Default `false`:
    /// gapless numbers are permanent records of a regulated series, so who took each should be
    /// on record, and no one on the network should be able to take them.
    pub anonymous_gapless: bool,
    /// The monitor endpoints anyone may read without a credential, from `health`, `metrics`,
    /// `db`, `cache` and `cluster_status`. The others take the admin token, an admin client
    /// certificate or a token with the `monitor` right (which sees only the tags its patterns
    /// match), or, on a node without an admin token, a loopback request. Default
    /// `["health", "metrics"]`, for load balancers and Prometheus; `/metrics` names every tag and
    /// token (obfuscated tags never), so leave it out where names are confidential and give the
    /// scraper a `monitor` token.
    pub public_endpoints: Vec<PublicEndpoint>,
}

/// A monitor endpoint that `auth.public_endpoints` can open to anyone (declared with its route
/// in [`leaf_api::routes::TABLE`]).
pub use leaf_api::routes::MonitorView as PublicEndpoint;

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            require_token_for_ids: false,
            anonymous_ids_per_sec: 10_000_000,
            anonymous_burst_ids: 20_000_000,
            anonymous_gapless: false,
            public_endpoints: vec![PublicEndpoint::Health, PublicEndpoint::Metrics],
        }
    }
}

impl AuthConfig {
    /// Whether anyone may read the monitor endpoint `e` without a credential.
    pub fn is_public(&self, e: PublicEndpoint) -> bool {
        self.public_endpoints.contains(&e)
    }
}

impl AuthConfig {
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        for (i, e) in self.public_endpoints.iter().enumerate() {
            if self.public_endpoints[..i].contains(e) {
                errs.push(format!("auth.public_endpoints lists {e:?} twice"));
            }
        }
        // Above this a bucket's nanoseconds per ID would round to 0: no quota at all, silently.
        const MAX_IDS_PER_SEC: u32 = 1_000_000_000;
        if self.anonymous_ids_per_sec > MAX_IDS_PER_SEC {
            errs.push(format!(
                "auth.anonymous_ids_per_sec must be at most {MAX_IDS_PER_SEC} (0 turns the quota off), not {}",
                self.anonymous_ids_per_sec
            ));
        }
        let largest = leaf_api::tag::MAX_RANGE_BATCH;
        if self.anonymous_ids_per_sec > 0 && self.anonymous_burst_ids < largest {
            errs.push(format!(
                "auth.anonymous_burst_ids must be at least {largest} (one request may ask for that many IDs), not {}",
                self.anonymous_burst_ids
            ));
        }
    }
}

/// The audit trail's retention, stamped by the leader into every admin change it records:
/// the leader's configuration is the one in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// Most records kept of each kind, security records (tokens, membership) and tag records
    /// apart, so tag changes never push a security record out (the oldest of a kind go first).
    /// 1 to 5000; default `5000`.
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
