//! The OpenAPI 3.1 document: the operations come from the handlers' `#[utoipa::path]`
//! declarations (one declaration per route, see [`super::api`]); this module adds the
//! document's info, the admin bearer security scheme, and the error responses of each
//! endpoint: one response per status, whose `code` is constrained to the [`ErrorCode`]s that
//! endpoint can answer, with one example per code.
//!
//! The document is served at `GET /openapi.json` and committed as `docs/openapi.json`; a test
//! checks they are byte-equal. Regenerate the file with
//! `UPDATE_OPENAPI=1 cargo test -p leaf-node --lib openapi`.
//!
//! [`rules`] adds what spans fields (each profile's fields, a token's patterns), so that a
//! request the schemas allow is one the node takes.
use std::collections::BTreeMap;
use std::sync::OnceLock;

use axum::body::Bytes;
use leaf_api::routes::{self, Access, Method};
use leaf_api::types::Health;
use leaf_api::{ErrorBody, ErrorCode};
use utoipa::openapi::example::ExampleBuilder;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::schema::{AllOfBuilder, ObjectBuilder, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr};
use utoipa::{Modify, ToSchema};

use super::error::status_of;

mod rules;

/// The content type of the ID endpoints.
pub const TEXT: &str = "text/plain; charset=utf-8";

/// The document's fixed parts; the paths come from the routers.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "leaf",
        description = "Unique 64-bit IDs (Leaf's segment and snowflake modes) from a Raft cluster. \
            Every failed request answers an `ErrorBody`; its `code` is stable, `leaf_code` is Leaf's \
            result code where one exists. Any endpoint may answer 503 `unavailable` when the node has \
            too many open connections (with `Retry-After: 1`) or a request times out.",
        license(name = "Apache-2.0"),
    ),
    modifiers(&AdminSecurity),
    components(schemas(ErrorBody, ErrorCode, super::monitor::HealthMode, leaf_api::ranges::IdFormat,
        leaf_api::audit::AuditKind)),
    tags(
        (name = "ids", description = "Segment and snowflake IDs (Leaf-compatible)."),
        (name = "monitor", description = "Readiness, metrics, Leaf's monitor pages."),
        (name = "admin", description = "Tags, allocations, fault injection."),
        (name = "tokens", description = "Scoped tokens and the audit trail."),
        (name = "templates", description = "Tag templates: tags made on their first ID request."),
        (name = "regions", description = "A global tier's regions: joins, blocks of a tag's IDs, retirement."),
        (name = "cluster", description = "Cluster status and membership, and the dashboard's data."),
        (name = "ui", description = "The built-in dashboard: a page and its two assets, embedded in the binary."),
    )
)]
pub struct ApiDoc;

/// The `admin_token` bearer scheme of everything under `/admin`.
struct AdminSecurity;

impl Modify for AdminSecurity {
    fn modify(&self, doc: &mut OpenApi) {
        let scheme = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .description(Some(
                "The node's `admin_token`, or a scoped token (`leaf_<id>_<secret>`, from `POST /admin/tokens`) \
                 for the parts of `/admin` its rights cover: `tags` for `/admin/tags*` (on its tag patterns), \
                 `cluster` for membership, allocations, the audit trail, the fault clock and a global tier's \
                 list and retirement of regions, `regions` for a region's join and its blocks (on its tag patterns), \
                 `monitor` for \
                 `/db`, `/cache`, `/cluster/status`, the dashboard's data, and `/health` and `/metrics` where they \
                 are not public (`auth.public_endpoints`; a token sees only its tags there); tokens are managed \
                 with the admin token only. A node configured without an admin token answers admin and monitor \
                 requests without one only on loopback connections (403 `forbidden` elsewhere). The ID routes take \
                 a scoped token with the `ids` right too: optional, required with `auth.require_token_for_ids`. \
                 A credential that is sent is always checked (401 if it is not valid). A scoped token over its \
                 quota gets 429 `rate_limited` with `Retry-After`.",
            ))
            .build();
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme("admin_token", SecurityScheme::Http(scheme));
    }
}

/// `/health`'s 503 body: the health (not ready), or an error (refused connection, timeout).
#[derive(ToSchema)]
#[allow(dead_code)] // only its schema is used
#[serde(untagged)]
pub enum HealthOrError {
    Health(Health),
    Error(ErrorBody),
}

/// A message like the ones the node writes, for the examples.
fn example_message(code: ErrorCode) -> &'static str {
    use ErrorCode::*;
    match code {
        InvalidTag => "tag contains ' '; allowed are A-Z a-z 0-9 _ . : -",
        InvalidCount => "count must be an integer from 1 to 100000, got \"0\"",
        InvalidRequest => "invalid JSON body: missing field `step` at line 1 column 14",
        PayloadTooLarge => "request body exceeds 65536 bytes",
        Unauthorized => "admin endpoints need 'Authorization: Bearer <admin_token>'",
        Forbidden => "no admin_token is configured, so admin endpoints answer only on loopback connections",
        TagNotFound => "tag \"orders\" does not exist",
        NotFound => "fault injection is disabled (start the node with --enable-fault-injection)",
        MethodNotAllowed => "allowed: GET,HEAD",
        TagExists => "tag \"orders\" already exists",
        TagExhausted => "tag \"orders\" is exhausted: max_id + step would overflow",
        SegmentsNotReady => "no committed segment for tag \"orders\" within 2000 ms",
        NotReady => "cannot confirm whether tag \"orders\" exists: no leader",
        Unavailable => "too many open connections to this node; retry shortly",
        ShuttingDown => "the node is shutting down",
        MemberExists => "node 4 is already a learner at 10.0.0.4:8080",
        NodeIdRetired => "node 4 was removed; node IDs are never reused, pick a new one",
        MemberNotFound => "node 4 is not a member",
        SnowflakeUnavailable => "snowflake is not serving: no worker ID yet",
        ClockMovedBackwards => "the clock moved back 50 ms, more than the 5 ms tolerated",
        WorkerIdsExhausted => "all 1024 worker IDs are held by other nodes",
        RateLimited => "token 3f9c2a7d10b4e655 is over its quota on this node; retry in 1 s",
        TokenNotFound => "no token with ID 3f9c2a7d10b4e655",
        TemplateNotFound => "template \"invoices\" does not exist",
        TemplateConflict => {
            "template \"all\" may make the tags template \"invoices\" makes: no two templates may match one tag"
        }
        WrongProfile => "tag \"orders\" is a segment tag: only a gapless tag issues numbers",
        NumberNotFound => "gapless series \"invoices\" has no number for key \"order-2026-000417\"",
        NumberConflict => {
            "gapless series \"invoices\", key \"order-2026-000417\": number 417 of period 2026 is voided: it cannot \
             be confirmed"
        }
        FeatureNotActive => {
            "a series' limits needs cluster version 2, and the cluster runs version 1: it is activated once every \
             node runs a release that supports it"
        }
        MembershipConflict => "new membership can not be empty",
        TokenExists => "a token named \"orders-service\" exists already",
        RegionConflict => "region \"eu-west\" is retired: it gets nothing more, and its name is never used again",
    }
}

/// One response per status for `codes`: an `ErrorBody` whose `code` is one of that status's
/// codes, with an example of each.
pub fn error_responses(codes: &[ErrorCode]) -> BTreeMap<String, RefOr<Response>> {
    let mut by_status = BTreeMap::<u16, Vec<ErrorCode>>::new();
    for &code in codes {
        by_status.entry(status_of(code).as_u16()).or_default().push(code);
    }
    by_status
        .into_iter()
        .map(|(status, codes)| {
            let names: Vec<String> = codes
                .iter()
                .map(|c| match c.leaf_code() {
                    Some(l) => format!("`{c}` (Leaf {l})"),
                    None => format!("`{c}`"),
                })
                .collect();
            let narrowed = ObjectBuilder::new().property(
                "code",
                ObjectBuilder::new().schema_type(Type::String).enum_values(Some(codes.iter().map(|c| c.as_str()))),
            );
            let schema = AllOfBuilder::new().item(Ref::from_schema_name("ErrorBody")).item(narrowed);
            let examples = codes.iter().map(|&c| {
                let body = serde_json::to_value(ErrorBody::new(c, example_message(c))).unwrap_or_default();
                (c.as_str(), ExampleBuilder::new().value(Some(body)).build())
            });
            let content = ContentBuilder::new().schema(Some(schema)).examples_from_iter(examples).build();
            let response = ResponseBuilder::new()
                .description(format!("`code` is one of: {}.", names.join(", ")))
                .content("application/json", content)
                .build();
            (status.to_string(), RefOr::T(response))
        })
        .collect()
}

/// Declares a set of error codes as responses for `#[utoipa::path(responses(...))]`.
macro_rules! error_set {
    ($($(#[$doc:meta])* $name:ident: [$($code:ident),* $(,)?];)*) => {$(
        $(#[$doc])*
        pub struct $name;
        impl utoipa::IntoResponses for $name {
            fn responses() -> BTreeMap<String, RefOr<Response>> {
                error_responses(&[$(ErrorCode::$code),*])
            }
        }
    )*};
}

error_set! {
    /// `GET /api/segment/get/{tag}`: `region_conflict` in a region, for a homed tag whose home
    /// is another region.
    SegmentGetErrors: [InvalidTag, InvalidCount, InvalidRequest, Unauthorized, Forbidden, RateLimited, TagNotFound,
        WrongProfile, RegionConflict, TagExhausted, SegmentsNotReady, NotReady, Unavailable, ShuttingDown];
    /// `POST /api/gapless/{tag}/issue`: `region_conflict` as for segment IDs.
    GaplessIssueErrors: [InvalidTag, InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, RateLimited,
        TagNotFound, WrongProfile, RegionConflict, NumberConflict, TagExhausted, NotReady, Unavailable, ShuttingDown];
    /// `POST /api/gapless/{tag}/confirm` and `/void`.
    GaplessSettleErrors: [InvalidTag, InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, RateLimited,
        TagNotFound, NumberNotFound, WrongProfile, NumberConflict, NotReady, Unavailable, ShuttingDown];
    /// `GET /admin/tags/{tag}/ledger`.
    LedgerErrors: [InvalidTag, InvalidRequest, Unauthorized, Forbidden, RateLimited, TagNotFound, WrongProfile,
        NotReady, Unavailable];
    /// `GET /api/snowflake/get/{key}`.
    SnowflakeGetErrors: [InvalidTag, InvalidCount, InvalidRequest, Unauthorized, Forbidden, RateLimited,
        SnowflakeUnavailable, ClockMovedBackwards, WorkerIdsExhausted, Unavailable];
    /// The decoders.
    DecodeErrors: [InvalidRequest, Unavailable];
    /// `/health` (its 503 is declared with the handler: a `Health` or an error): a credential,
    /// optional, is checked when sent.
    HealthErrors: [InvalidRequest, Unauthorized, Forbidden, RateLimited];
    /// Routes that take no credential (the OpenAPI document): only refusal or timeout.
    PublicErrors: [Unavailable];
    /// Monitor pages and the cluster status: the `monitor` right unless configured public.
    MonitorErrors: [Unauthorized, Forbidden, RateLimited, Unavailable];
    /// `GET /admin/tags` (its query: a prefix, a tag to start after, a limit).
    ListErrors: [InvalidTag, InvalidRequest, Unauthorized, Forbidden, RateLimited, Unavailable];
    /// `/db`, `/cache`: monitor pages with a listing's query.
    ListMonitorErrors: [InvalidTag, InvalidRequest, Unauthorized, Forbidden, RateLimited, Unavailable];
    /// `POST /admin/tags`: `wrong_profile` in a region, for a profile it does not serve.
    CreateTagErrors: [InvalidTag, InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, RateLimited, TagExists,
        TagExhausted, WrongProfile, Unavailable];
    /// `POST /admin/tags:batch`: `wrong_profile` as for one tag.
    CreateTagsErrors: [InvalidTag, InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, RateLimited,
        TagExhausted, WrongProfile, Unavailable];
    /// `GET /admin/tags/{tag}`.
    ShowTagErrors: [InvalidTag, Unauthorized, Forbidden, RateLimited, TagNotFound, NotReady, Unavailable];
    /// `GET /admin/tags/{tag}/decode/{id}`.
    DecodeObfuscatedErrors: [InvalidTag, InvalidRequest, Unauthorized, Forbidden, RateLimited, TagNotFound,
        NotFound, WrongProfile, NotReady, Unavailable];
    /// `PATCH /admin/tags/{tag}`.
    UpdateTagErrors: [InvalidTag, InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, RateLimited, TagNotFound,
        WrongProfile, Unavailable];
    /// `POST /admin/tags/{tag}/archive` and `/restore`.
    ArchiveTagErrors: [InvalidTag, Unauthorized, Forbidden, RateLimited, TagNotFound, NotReady, Unavailable];
    /// `GET /admin/allocations`.
    AllocationsErrors: [InvalidTag, InvalidRequest, Unauthorized, Forbidden, RateLimited, Unavailable];
    /// `POST /admin/fault/clock`: `not_found` when fault injection is disabled.
    FaultErrors: [InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, RateLimited, NotFound, Unavailable];
    /// `POST /admin/cluster/learners`.
    AddLearnerErrors: [InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, RateLimited, MemberExists,
        NodeIdRetired, MembershipConflict, Unavailable];
    /// `POST /admin/cluster/nodes/{id}/promote`.
    PromoteErrors: [InvalidRequest, Unauthorized, Forbidden, RateLimited, MemberNotFound, Unavailable];
    /// `DELETE /admin/cluster/nodes/{id}`.
    RemoveErrors: [InvalidRequest, Unauthorized, Forbidden, RateLimited, MemberNotFound, MembershipConflict,
        Unavailable];
    /// `GET /admin/tokens`.
    ListTokensErrors: [Unauthorized, Forbidden, Unavailable];
    /// `POST /admin/tokens`.
    CreateTokenErrors: [InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, TokenExists, Unavailable];
    /// `GET` and `DELETE /admin/tokens/{id}`.
    TokenErrors: [InvalidRequest, Unauthorized, Forbidden, TokenNotFound, Unavailable];
    /// `POST /admin/tokens/{id}/rotate`.
    RotateTokenErrors: [InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, TokenNotFound, Unavailable];
    /// `GET /admin/templates`.
    ListTemplatesErrors: [Unauthorized, Forbidden, Unavailable];
    /// `PUT /admin/templates/{name}`.
    PutTemplateErrors: [InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, TagExhausted, TemplateConflict,
        Unavailable];
    /// `DELETE /admin/templates/{name}`.
    DeleteTemplateErrors: [InvalidRequest, Unauthorized, Forbidden, TemplateNotFound, Unavailable];
    /// `GET /admin/regions`.
    ListRegionsErrors: [Unauthorized, Forbidden, Unavailable];
    /// `POST /admin/regions`: `region_conflict` for a retired region's name, or no worker IDs left.
    JoinRegionErrors: [InvalidRequest, PayloadTooLarge, Unauthorized, Forbidden, RegionConflict, FeatureNotActive,
        Unavailable];
    /// `POST /admin/regions/{name}/retire`.
    RetireRegionErrors: [InvalidRequest, Unauthorized, Forbidden, NotFound, FeatureNotActive, Unavailable];
    /// `POST /admin/regions/{name}/blocks/{tag}`: `not_found` for a region never registered,
    /// `region_conflict` for a retired one, `wrong_profile` for a tag not cut from blocks.
    BlockErrors: [InvalidRequest, InvalidTag, PayloadTooLarge, Unauthorized, Forbidden, NotFound, TagNotFound,
        TagExhausted, WrongProfile, RegionConflict, FeatureNotActive, Unavailable];
    /// `POST /admin/regions/{name}/homes/{tag}`: `not_found` for a region never registered,
    /// `region_conflict` for a retired one or a tag with no home (a plain tag).
    ClaimHomeErrors: [InvalidRequest, InvalidTag, Unauthorized, Forbidden, NotFound, TagNotFound, RegionConflict,
        FeatureNotActive, Unavailable];
    /// `POST /admin/regions/{name}/homes/{tag}/release`: `region_conflict` for a tag with no home.
    ReleaseHomeErrors: [InvalidRequest, InvalidTag, PayloadTooLarge, Unauthorized, Forbidden, RegionConflict,
        FeatureNotActive, Unavailable];
    /// `POST /admin/regions/{name}/lease`.
    LeaseErrors: [InvalidRequest, Unauthorized, Forbidden, NotFound, RegionConflict, FeatureNotActive, Unavailable];
    /// `GET /admin/homes`.
    HomesErrors: [InvalidTag, InvalidRequest, Unauthorized, Forbidden, Unavailable];
    /// `POST /admin/homes/{tag}/move`: `not_found` for a region never registered,
    /// `region_conflict` for a retired one, a tag with no home yet, a gapless series or a move
    /// under way.
    MoveHomeErrors: [InvalidRequest, InvalidTag, PayloadTooLarge, Unauthorized, Forbidden, NotFound, TagNotFound,
        RegionConflict, FeatureNotActive, Unavailable];
    /// `GET /admin/audit`.
    AuditErrors: [InvalidRequest, InvalidTag, Unauthorized, Forbidden, RateLimited, Unavailable];
    /// `GET /admin/backup`.
    BackupErrors: [Unauthorized, Forbidden, RateLimited, Unavailable];
    /// `GET /admin/dashboard`.
    DashboardErrors: [InvalidTag, InvalidRequest, Unauthorized, Forbidden, RateLimited, Unavailable];
    /// `GET /ui/{asset}`: `not_found` for anything but the page's script and style sheet.
    UiAssetErrors: [NotFound, Unavailable];
}

/// The whole document.
/// The document a node configured as `config` serves: [`document`] with each operation's
/// security as that node applies it. A credential is required where the node refuses a call
/// without one: admin routes with an admin token, monitor routes with one unless public
/// (`auth.public_endpoints`), ID routes with `auth.require_token_for_ids`. Elsewhere it is
/// optional (`[{}, {admin_token}]`): not needed, and checked when sent. Pretty JSON with a
/// final newline; `docs/openapi.json` is the one of a node with an admin token and defaults.
pub fn served_json(config: &crate::Config) -> Served {
    let mut doc = document().clone();
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            (Method::Get, &mut item.get),
            (Method::Post, &mut item.post),
            (Method::Put, &mut item.put),
            (Method::Patch, &mut item.patch),
            (Method::Delete, &mut item.delete),
        ];
        for (method, op) in ops {
            let Some(security) = op.as_mut().and_then(|op| op.security.as_mut()) else { continue };
            let row = routes::TABLE.iter().find(|r| r.template == path && r.method == method);
            let token = SecurityRequirement::new("admin_token", Vec::<String>::new());
            *security = match row.map(|r| credential(config, r.access)) {
                Some(Credential::Optional) => vec![SecurityRequirement::default(), token],
                Some(Credential::None) => continue,
                // Deny by default: an operation no row declares (a test keeps there being none).
                Some(Credential::Required) | None => vec![token],
            };
        }
    }
    let mut text = doc.to_pretty_json().unwrap_or_default();
    text.push('\n');
    Served(Bytes::from(text))
}

/// Whether a caller of a route needs a credential on a node with `config`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Credential {
    Required,
    Optional,
    None,
}

/// What the route's policy ([`routes::Access`]) asks of a caller on a node with `config`.
fn credential(config: &crate::Config, access: Access) -> Credential {
    let required = |yes: bool| if yes { Credential::Required } else { Credential::Optional };
    let admin_token = config.admin_token().is_some();
    match access {
        Access::Anyone => Credential::None,
        Access::Ids => required(config.auth.require_token_for_ids),
        Access::Gapless => required(config.auth.require_token_for_ids || !config.auth.anonymous_gapless),
        Access::Monitor(view) => required(admin_token && !config.auth.is_public(view)),
        Access::Right(_) | Access::Root(_) => required(admin_token),
    }
}

/// The OpenAPI document a node serves (built once, at the router's start).
#[derive(Clone)]
pub struct Served(pub Bytes);

/// The document, built once.
fn document() -> &'static OpenApi {
    static DOC: OnceLock<OpenApi> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = super::api().into_openapi();
        // After the routes added their schemas.
        rules::add(&mut doc);
        doc
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The router's operations (the document's come from the same `routes!` declarations) are
    /// exactly the route table's rows, so no handler is mounted without a declared policy.
    #[test]
    fn the_operations_are_the_route_table() {
        let doc: serde_json::Value = serde_json::to_value(document()).unwrap();
        let mut mounted = std::collections::BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                let method = Method::parse(&method.to_ascii_uppercase()).expect("a method the table knows");
                mounted.insert((path.clone(), method));
            }
        }
        let declared: std::collections::BTreeSet<_> =
            routes::TABLE.iter().map(|r| (r.template.to_string(), r.method)).collect();
        let undeclared: Vec<_> = mounted.difference(&declared).collect();
        assert!(undeclared.is_empty(), "routes mounted without a row in leaf_api::routes::TABLE: {undeclared:?}");
        let unmounted: Vec<_> = declared.difference(&mounted).collect();
        assert!(unmounted.is_empty(), "rows of leaf_api::routes::TABLE that no handler serves: {unmounted:?}");
    }

    /// Each operation's security in the document served with `config`: `Some(true)` required,
    /// `Some(false)` optional, `None` none.
    fn security(config: &crate::Config) -> Vec<(String, String, Option<bool>, Vec<String>)> {
        let doc: serde_json::Value = serde_json::from_slice(&served_json(config).0).unwrap();
        let mut out = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let statuses = op["responses"].as_object().unwrap().keys().cloned().collect();
                let security = op.get("security").and_then(|s| s.as_array()).map(|reqs| {
                    let optional = reqs.iter().any(|r| r.as_object().is_some_and(|o| o.is_empty()));
                    assert!(reqs.iter().any(|r| r.get("admin_token").is_some()), "{path}");
                    !optional
                });
                out.push((path.clone(), method.clone(), security, statuses));
            }
        }
        out
    }

    fn with_token() -> crate::Config {
        crate::Config { admin_token: Some("t".repeat(32).into()), ..Default::default() }
    }

    /// The row of the table for an operation of the document.
    fn row(path: &str, method: &str) -> &'static routes::Route {
        let method = Method::parse(&method.to_ascii_uppercase()).unwrap();
        routes::TABLE.iter().find(|r| r.template == path && r.method == method).unwrap()
    }

    #[test]
    fn every_operation_documents_its_errors_and_its_credential() {
        let config = with_token();
        for (path, method, security, statuses) in security(&config) {
            assert!(statuses.iter().any(|s| s.starts_with('2')), "{path}: {statuses:?}");
            assert!(statuses.iter().any(|s| *s == "503"), "{path}: no 503 ({statuses:?})");
            let expected = match row(&path, &method).access {
                Access::Anyone => None,
                Access::Ids => Some(false),
                Access::Gapless => Some(!config.auth.anonymous_gapless),
                Access::Monitor(view) => Some(!config.auth.is_public(view)),
                Access::Right(_) | Access::Root(_) => Some(true),
            };
            assert_eq!(security, expected, "{method} {path}: security");
            if security.is_some() {
                assert!(statuses.iter().any(|s| *s == "401") && statuses.iter().any(|s| *s == "403"), "{path}");
            }
        }
    }

    /// Without an admin token a loopback call needs no credential but for gapless series
    /// (`auth.anonymous_gapless` is off by default); with the monitor endpoints closed or
    /// tokens required for IDs, those need one.
    #[test]
    fn the_served_security_follows_the_configuration() {
        for (path, method, security, _) in security(&crate::Config::default()) {
            let gapless = row(&path, &method).access == Access::Gapless;
            assert_eq!(security == Some(true), gapless, "{method} {path}: required without an admin token");
        }
        let mut strict = with_token();
        strict.auth.public_endpoints.clear();
        strict.auth.require_token_for_ids = true;
        for (path, method, security, _) in security(&strict) {
            if row(&path, &method).access != Access::Anyone {
                assert_eq!(security, Some(true), "{method} {path}");
            }
        }
    }

    /// `docs/openapi.json` is what a node with an admin token serves; `UPDATE_OPENAPI=1`
    /// rewrites it.
    #[test]
    fn the_committed_document_is_current() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
        let served = served_json(&with_token()).0;
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(path, &served).expect("write docs/openapi.json");
        }
        let committed = std::fs::read(path).unwrap_or_default();
        assert!(
            committed == served.as_ref(),
            "docs/openapi.json is stale: run `UPDATE_OPENAPI=1 cargo test -p leaf-node --lib openapi`"
        );
    }
}
