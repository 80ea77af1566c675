//! The public HTTP routes, declared once: the node's router, its OpenAPI document, the typed
//! client and the CLI all use these templates (axum's `{param}` syntax), never a path literal.
//!
//! Internal node-to-node routes (bincode, authenticated by the cluster secret) are not public
//! API; they live with the node's Raft network code.

/// `GET`: one segment ID (decimal text), or `?count=N` IDs separated by `\n`.
pub const SEGMENT_GET: &str = "/api/segment/get/{tag}";
/// `GET`: one snowflake ID (decimal text), or `?count=N` IDs separated by `\n`.
pub const SNOWFLAKE_GET: &str = "/api/snowflake/get/{key}";
/// `GET`: a snowflake ID's timestamp, worker ID and sequence.
pub const SNOWFLAKE_DECODE: &str = "/api/snowflake/decode/{id}";
/// `GET ?snowflakeId=N`: the same, at Leaf's monitor path.
pub const LEAF_DECODE: &str = "/decodeSnowflakeId";

/// `POST` with an idempotency key: the next number of a gapless series (the same number
/// again for a key it has seen).
pub const GAPLESS_ISSUE: &str = "/api/gapless/{tag}/issue";
/// `POST` with an idempotency key: the next number of a gapless series, reserved until a
/// deadline (the same number again for a key it has seen).
pub const GAPLESS_RESERVE: &str = "/api/gapless/{tag}/reserve";
/// `POST` with the key: a reserved number made final.
pub const GAPLESS_CONFIRM: &str = "/api/gapless/{tag}/confirm";
/// `POST` with the key and a reason: a reserved number voided, keeping its place.
pub const GAPLESS_VOID: &str = "/api/gapless/{tag}/void";

/// `GET`: readiness (200 ready, 503 not), `?mode=segment|snowflake|all`.
pub const HEALTH: &str = "/health";
/// `GET`: Prometheus text 0.0.4, or OpenMetrics 1.0 when `Accept` prefers it.
pub const METRICS: &str = "/metrics";
/// `GET`: this node's per-tag buffers (Leaf's `/cache`).
pub const CACHE: &str = "/cache";
/// `GET`: the tags as stored (Leaf's `/db`).
pub const DB: &str = "/db";
/// `GET`: this document's machine-readable form (OpenAPI 3.1).
pub const OPENAPI: &str = "/openapi.json";
/// `GET`: the built-in dashboard (HTML; its data comes from [`ADMIN_DASHBOARD`]).
pub const UI: &str = "/ui";
/// `GET`: the dashboard's script and style sheet (`app.js`, `app.css`), embedded in the binary.
pub const UI_ASSET: &str = "/ui/{asset}";

/// `GET` list / `POST` create tags.
pub const ADMIN_TAGS: &str = "/admin/tags";
/// `POST`: create many tags in one request (those that exist are reported, not changed).
pub const ADMIN_TAGS_BATCH: &str = "/admin/tags:batch";
/// `GET` show / `PATCH` update one tag.
pub const ADMIN_TAG: &str = "/admin/tags/{tag}";
/// `POST`: archive a tag (it stays, serving nothing, its name never reused).
pub const ADMIN_TAG_ARCHIVE: &str = "/admin/tags/{tag}/archive";
/// `POST`: bring an archived tag back.
pub const ADMIN_TAG_RESTORE: &str = "/admin/tags/{tag}/restore";
/// `GET`: an obfuscated tag's ID back to its sequence number (admin only: the key never leaves
/// the cluster).
pub const ADMIN_TAG_DECODE: &str = "/admin/tags/{tag}/decode/{id}";
/// `GET`: a page of a gapless series' ledger (`?period=`, `?after_period=`, `?after_number=`,
/// `?limit=`).
pub const ADMIN_TAG_LEDGER: &str = "/admin/tags/{tag}/ledger";
/// `GET`: the journal of committed segments (`?tag=`, `?node=`).
pub const ADMIN_ALLOCATIONS: &str = "/admin/allocations";
/// `POST`: skew this node's clock (only with fault injection enabled).
pub const ADMIN_FAULT_CLOCK: &str = "/admin/fault/clock";
/// `GET` list / `POST` create scoped tokens (admin token or admin certificate only).
pub const ADMIN_TOKENS: &str = "/admin/tokens";
/// `GET` show / `DELETE` revoke one token.
pub const ADMIN_TOKEN: &str = "/admin/tokens/{id}";
/// `POST`: a new secret for a token.
pub const ADMIN_TOKEN_ROTATE: &str = "/admin/tokens/{id}/rotate";
/// `GET` list tag templates (admin token or admin certificate only).
pub const ADMIN_TEMPLATES: &str = "/admin/templates";
/// `PUT` create or replace / `DELETE` one tag template.
pub const ADMIN_TEMPLATE: &str = "/admin/templates/{name}";
/// `GET`: the audit trail of admin changes (`?kind=`, `?tag=`, `?token=`, `?since_ms=`,
/// `?until_ms=`, `?after_seq=`, `?limit=`).
pub const ADMIN_AUDIT: &str = "/admin/audit";
/// `GET`: everything the dashboard shows, as this node sees it (the `cluster` right).
pub const ADMIN_DASHBOARD: &str = "/admin/dashboard";
/// `GET`: a backup of the whole replicated state as of a committed point (root only; the body
/// is the backup file, `application/octet-stream`).
pub const ADMIN_BACKUP: &str = "/admin/backup";

/// `GET`: membership, leader, term, log indexes, replication, health.
pub const CLUSTER_STATUS: &str = "/cluster/status";
/// `POST`: add a learner.
pub const CLUSTER_LEARNERS: &str = "/admin/cluster/learners";
/// `POST`: make a learner a voter.
pub const CLUSTER_PROMOTE: &str = "/admin/cluster/nodes/{id}/promote";
/// `DELETE`: remove a member.
pub const CLUSTER_NODE: &str = "/admin/cluster/nodes/{id}";

/// Every public route template, for tests that check the router and the OpenAPI document
/// against this table.
pub const ALL: &[&str] = &[
    SEGMENT_GET,
    SNOWFLAKE_GET,
    GAPLESS_ISSUE,
    GAPLESS_RESERVE,
    GAPLESS_CONFIRM,
    GAPLESS_VOID,
    ADMIN_TAG_LEDGER,
    SNOWFLAKE_DECODE,
    LEAF_DECODE,
    HEALTH,
    METRICS,
    CACHE,
    DB,
    OPENAPI,
    UI,
    UI_ASSET,
    ADMIN_TAGS,
    ADMIN_TAGS_BATCH,
    ADMIN_TAG,
    ADMIN_TAG_ARCHIVE,
    ADMIN_TAG_RESTORE,
    ADMIN_TAG_DECODE,
    ADMIN_ALLOCATIONS,
    ADMIN_FAULT_CLOCK,
    ADMIN_TOKENS,
    ADMIN_TOKEN,
    ADMIN_TOKEN_ROTATE,
    ADMIN_TEMPLATES,
    ADMIN_TEMPLATE,
    ADMIN_AUDIT,
    ADMIN_DASHBOARD,
    ADMIN_BACKUP,
    CLUSTER_STATUS,
    CLUSTER_LEARNERS,
    CLUSTER_PROMOTE,
    CLUSTER_NODE,
];

/// Fills a template's `{param}` segments in order, percent-encoding each value as one path
/// segment. Panics in debug builds when the counts differ (a programming error, not input).
pub fn fill(template: &str, values: &[&str]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut values = values.iter();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map(|c| open + c).unwrap_or(rest.len() - 1);
        let v = values.next();
        debug_assert!(v.is_some(), "too few values for {template}");
        encode_segment(v.copied().unwrap_or(""), &mut out);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    debug_assert!(values.next().is_none(), "too many values for {template}");
    out
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
fn encode_segment(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_substitutes_in_order_and_encodes() {
        assert_eq!(fill(SEGMENT_GET, &["orders"]), "/api/segment/get/orders");
        assert_eq!(fill(CLUSTER_PROMOTE, &["4"]), "/admin/cluster/nodes/4/promote");
        assert_eq!(fill(ADMIN_TAG, &["a b/c"]), "/admin/tags/a%20b%2Fc");
        assert_eq!(fill(HEALTH, &[]), "/health");
    }

    #[test]
    fn every_route_is_listed_once_and_starts_with_a_slash() {
        let mut seen = std::collections::BTreeSet::new();
        for r in ALL {
            assert!(r.starts_with('/'), "{r}");
            assert!(seen.insert(*r), "{r} listed twice");
        }
    }
}
