//! The public HTTP routes, declared once: the node's router, its OpenAPI document, the typed
//! client and the CLI all use these templates (axum's `{param}` syntax), never a path literal.
//! [`TABLE`] gives each route, per method, its policy ([`Access`]: the right it needs, or
//! public) and whether it takes the per-ID fast path; its template is its metrics label.
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

/// `GET` list (an operator) / `POST` join (a region's leader) the regions of a global tier.
pub const ADMIN_REGIONS: &str = "/admin/regions";
/// `POST`: retire a region: it gets no block any more; its name, ID and worker IDs stay taken.
pub const ADMIN_REGION_RETIRE: &str = "/admin/regions/{name}/retire";
/// `POST`: a block of a tag's IDs for the region (its leader asks ahead of running out).
pub const ADMIN_REGION_BLOCKS: &str = "/admin/regions/{name}/blocks/{tag}";
/// `POST`: a region claims a tag's home (global tier); the first claim makes it the home.
pub const ADMIN_REGION_HOME: &str = "/admin/regions/{name}/homes/{tag}";
/// `POST`: a region lets go of a tag whose home moved away (global tier).
pub const ADMIN_REGION_HOME_RELEASE: &str = "/admin/regions/{name}/homes/{tag}/release";
/// `POST`: a region renews the lease of its homes (global tier).
pub const ADMIN_REGION_LEASE: &str = "/admin/regions/{name}/lease";
/// `GET`: the homes of homed tags (global tier).
pub const ADMIN_HOMES: &str = "/admin/homes";
/// `POST`: an operator moves a tag's home (global tier).
pub const ADMIN_HOME_MOVE: &str = "/admin/homes/{tag}/move";

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

/// An HTTP method a route answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    /// The method's name as HTTP spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    /// The method HTTP names `name`, if a route can answer it.
    pub fn parse(name: &str) -> Option<Method> {
        [Method::Get, Method::Post, Method::Put, Method::Patch, Method::Delete].into_iter().find(|m| m.as_str() == name)
    }
}

/// A monitor view that `auth.public_endpoints` can open to anyone; the others need the
/// `monitor` right (or the root credentials).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum MonitorView {
    /// `GET /health`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// `GET /db`.
    Db,
    /// `GET /cache`.
    Cache,
    /// `GET /cluster/status`.
    ClusterStatus,
}

/// Who may call a route: its policy, declared with it in [`TABLE`]. The node's authorization
/// (before routing), its OpenAPI document's security and its tests read it from there; a path
/// under `/admin` that no row declares needs the root credentials (deny by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anyone, with no credential: the node's own documents and the snowflake decoders, which
    /// hold no secret.
    Anyone,
    /// IDs: anyone within the per-address quota, or a token with the `ids` right for the tag
    /// (`auth.require_token_for_ids` makes the token necessary). The handler checks it, since
    /// it depends on the tag and the count.
    Ids,
    /// A gapless series' numbers: a token with the `ids` right for the tag, or anyone where
    /// `auth.anonymous_gapless` allows it; a reservation is settled only by its reserver. The
    /// handler checks it, since it depends on the tag and the reservation.
    Gapless,
    /// A monitor view: anyone where `auth.public_endpoints` opens it, else the `monitor` right.
    Monitor(MonitorView),
    /// A scoped token with this right (the handler checks the token's tag patterns), or the
    /// root credentials.
    Right(crate::tokens::Right),
    /// Only the root credentials (the admin token, an admin certificate, or loopback on a node
    /// without a token); what the route does, for the refusal ("taking a backup needs…").
    Root(&'static str),
}

impl Access {
    /// Whether a caller must prove who it is before the router (an admin or monitor route).
    pub fn is_checked_before_routing(self) -> bool {
        matches!(self, Access::Monitor(_) | Access::Right(_) | Access::Root(_))
    }
}

/// One public route: method, template, policy, and whether a plain `GET` of it is served ahead
/// of the router (the per-ID fast path). Its metrics label is its template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    pub template: &'static str,
    pub access: Access,
    pub fast: bool,
}

const fn route(method: Method, template: &'static str, access: Access) -> Route {
    Route { method, template, access, fast: false }
}

const fn fast(template: &'static str) -> Route {
    Route { method: Method::Get, template, access: Access::Ids, fast: true }
}

use crate::tokens::Right::{Cluster, Monitor as MonitorRight, Regions, Tags};
use Access::{Anyone, Gapless, Monitor, Right, Root};
use Method::{Delete, Get, Patch, Post, Put};

/// Every public route, once per method, with its policy. The router (through its OpenAPI
/// operations, which a test compares with this table), the authorization, the latency
/// metric's labels, the fast path and the OpenAPI document's security all read it.
pub const TABLE: &[Route] = &[
    fast(SEGMENT_GET),
    fast(SNOWFLAKE_GET),
    route(Get, SNOWFLAKE_DECODE, Anyone),
    route(Get, LEAF_DECODE, Anyone),
    route(Post, GAPLESS_ISSUE, Gapless),
    route(Post, GAPLESS_RESERVE, Gapless),
    route(Post, GAPLESS_CONFIRM, Gapless),
    route(Post, GAPLESS_VOID, Gapless),
    route(Get, HEALTH, Monitor(MonitorView::Health)),
    route(Get, METRICS, Monitor(MonitorView::Metrics)),
    route(Get, CACHE, Monitor(MonitorView::Cache)),
    route(Get, DB, Monitor(MonitorView::Db)),
    route(Get, CLUSTER_STATUS, Monitor(MonitorView::ClusterStatus)),
    route(Get, OPENAPI, Anyone),
    route(Get, UI, Anyone),
    route(Get, UI_ASSET, Anyone),
    route(Get, ADMIN_TAGS, Right(Tags)),
    route(Post, ADMIN_TAGS, Right(Tags)),
    route(Post, ADMIN_TAGS_BATCH, Right(Tags)),
    route(Get, ADMIN_TAG, Right(Tags)),
    route(Patch, ADMIN_TAG, Right(Tags)),
    route(Post, ADMIN_TAG_ARCHIVE, Right(Tags)),
    route(Post, ADMIN_TAG_RESTORE, Right(Tags)),
    route(Get, ADMIN_TAG_DECODE, Right(Tags)),
    route(Get, ADMIN_TAG_LEDGER, Right(Tags)),
    route(Get, ADMIN_ALLOCATIONS, Right(Cluster)),
    route(Post, ADMIN_FAULT_CLOCK, Right(Cluster)),
    route(Get, ADMIN_AUDIT, Right(Cluster)),
    route(Get, ADMIN_DASHBOARD, Right(MonitorRight)),
    route(Get, ADMIN_REGIONS, Right(Cluster)),
    route(Post, ADMIN_REGIONS, Right(Regions)),
    route(Post, ADMIN_REGION_RETIRE, Right(Cluster)),
    route(Post, ADMIN_REGION_BLOCKS, Right(Regions)),
    route(Post, ADMIN_REGION_HOME, Right(Regions)),
    route(Post, ADMIN_REGION_HOME_RELEASE, Right(Regions)),
    route(Post, ADMIN_REGION_LEASE, Right(Regions)),
    route(Get, ADMIN_HOMES, Right(Cluster)),
    route(Post, ADMIN_HOME_MOVE, Right(Cluster)),
    route(Get, ADMIN_TOKENS, Root(TOKENS)),
    route(Post, ADMIN_TOKENS, Root(TOKENS)),
    route(Get, ADMIN_TOKEN, Root(TOKENS)),
    route(Delete, ADMIN_TOKEN, Root(TOKENS)),
    route(Post, ADMIN_TOKEN_ROTATE, Root(TOKENS)),
    route(Get, ADMIN_TEMPLATES, Root(TEMPLATES)),
    route(Put, ADMIN_TEMPLATE, Root(TEMPLATES)),
    route(Delete, ADMIN_TEMPLATE, Root(TEMPLATES)),
    route(Get, ADMIN_BACKUP, Root("taking a backup")),
    route(Post, CLUSTER_LEARNERS, Right(Cluster)),
    route(Post, CLUSTER_PROMOTE, Right(Cluster)),
    route(Delete, CLUSTER_NODE, Right(Cluster)),
];

const TOKENS: &str = "managing tokens";
const TEMPLATES: &str = "managing tag templates";

/// What an admin path that no route declares needs: the root credentials.
pub const UNDECLARED_ADMIN: Access = Access::Root("an undeclared admin endpoint");

/// The row for `method` at `path` (a concrete path, matched against the templates).
pub fn find(method: Method, path: &str) -> Option<&'static Route> {
    TABLE.iter().find(|r| r.method == method && matches(r.template, path))
}

/// The first row whose template matches `path`, whatever its method.
pub fn find_path(path: &str) -> Option<&'static Route> {
    TABLE.iter().find(|r| matches(r.template, path))
}

/// The policy of a request for `method` at `path`: its row's; for a method the path does not
/// answer, the policy of the path's first row (so the 405 comes after the same check); under
/// `/admin` with no row, [`UNDECLARED_ADMIN`]. `None`: not a public route (internal, or no
/// route at all).
pub fn access(method: Option<Method>, path: &str) -> Option<Access> {
    let row = method.and_then(|m| find(m, path)).or_else(|| find_path(path));
    match row {
        Some(r) => Some(r.access),
        None if path == "/admin" || path.starts_with("/admin/") => Some(UNDECLARED_ADMIN),
        None => None,
    }
}

/// Each route template once, in table order.
pub fn templates() -> impl Iterator<Item = &'static str> {
    TABLE
        .iter()
        .enumerate()
        .filter(|(i, r)| TABLE[..*i].iter().all(|o| o.template != r.template))
        .map(|(_, r)| r.template)
}

/// Whether the concrete `path` matches `template`: equal segments, and one non-empty segment
/// for each `{param}`.
pub fn matches(template: &str, path: &str) -> bool {
    let (mut t, mut p) = (template.split('/'), path.split('/'));
    loop {
        match (t.next(), p.next()) {
            (None, None) => return true,
            (Some(ts), Some(ps)) if ts.starts_with('{') => {
                if ps.is_empty() {
                    return false;
                }
            }
            (Some(ts), Some(ps)) if ts == ps => {}
            _ => return false,
        }
    }
}

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
    fn every_route_is_listed_once_per_method_and_starts_with_a_slash() {
        let mut seen = std::collections::BTreeSet::new();
        for r in TABLE {
            assert!(r.template.starts_with('/'), "{}", r.template);
            assert!(seen.insert((r.template, r.method)), "{} {} listed twice", r.method.as_str(), r.template);
        }
    }

    #[test]
    fn paths_find_their_rows_and_undeclared_admin_paths_need_root() {
        assert_eq!(find(Method::Get, "/api/segment/get/orders").map(|r| r.template), Some(SEGMENT_GET));
        assert_eq!(find(Method::Patch, "/admin/tags/a").map(|r| r.template), Some(ADMIN_TAG));
        assert_eq!(find(Method::Get, "/admin/tags/a/decode/5").map(|r| r.template), Some(ADMIN_TAG_DECODE));
        assert_eq!(find(Method::Post, "/admin/tags/a"), None);
        assert_eq!(access(Some(Method::Post), "/admin/tags/a"), Some(Access::Right(Tags)));
        assert_eq!(access(Some(Method::Get), "/admin/tokens/7"), Some(Access::Root(TOKENS)));
        assert_eq!(access(Some(Method::Get), "/admin/not-a-route"), Some(UNDECLARED_ADMIN));
        assert_eq!(access(None, "/admin"), Some(UNDECLARED_ADMIN));
        assert_eq!(access(Some(Method::Get), "/internal/raft/append"), None);
        assert_eq!(access(Some(Method::Get), "/api/segment/get/"), None);
        for t in templates() {
            let params = vec!["x"; t.matches('{').count()];
            assert_eq!(find_path(&fill(t, &params)).map(|r| r.template), Some(t));
        }
    }

    #[test]
    fn only_the_two_id_routes_take_the_fast_path() {
        let fast: Vec<_> = TABLE.iter().filter(|r| r.fast).map(|r| (r.method, r.template, r.access)).collect();
        assert_eq!(fast, [(Method::Get, SEGMENT_GET, Access::Ids), (Method::Get, SNOWFLAKE_GET, Access::Ids)]);
    }
}
