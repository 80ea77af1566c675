//! Gapless series over HTTP: `POST /api/gapless/{tag}/issue` with the caller's idempotency key,
//! and the series' ledger (`GET /admin/tags/{tag}/ledger`).
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use leaf_api::gapless::{IssueRequest, IssuedNumber, LedgerPage, LedgerQuery};
use leaf_api::routes;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiQuery, Caller, IdCaller, JsonBody, TagParam};
use super::openapi::{GaplessIssueErrors, LedgerErrors};
use crate::access::IdAsk;
use crate::service::{ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(gapless_issue)).routes(routes!(gapless_ledger))
}

/// The next number of a gapless series for an idempotency key, committed through Raft before
/// it is answered; the same key always gets the same number (`replayed` says it is a repeat),
/// so a retry after a timeout or a leader change never consumes a second one.
#[utoipa::path(post, path = routes::GAPLESS_ISSUE, tag = "ids", operation_id = "gapless_issue",
    security((), ("admin_token" = [])),
    params(("tag" = String, Path, description = "A tag of profile `gapless`.", min_length = 1, max_length = 128,
        pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices")),
    request_body = IssueRequest,
    responses((status = 200, description = "The key's number.", body = IssuedNumber), GaplessIssueErrors))]
pub async fn gapless_issue(
    State(app): State<Arc<App>>,
    caller: IdCaller,
    TagParam(tag): TagParam,
    JsonBody(body): JsonBody<IssueRequest>,
) -> Result<Json<IssuedNumber>, ApiError> {
    let ask = IdAsk { addr: caller.addr, ids: 1 };
    let who = app.check_ids(caller.authorization.as_ref().map(|v| v.as_bytes()), Some(&tag), ask)?;
    Ok(Json(app.gapless_issue(&tag, &body.key, who).await?))
}

/// A page of a gapless series' ledger: every number in issue order with its key, caller, time
/// and hash-chain link; `head` is the chain's last link (`leaf ledger verify` checks an export
/// against it).
#[utoipa::path(get, path = routes::ADMIN_TAG_LEDGER, tag = "admin", operation_id = "gapless_ledger",
    security(("admin_token" = [])),
    params(("tag" = String, Path, description = "A tag of profile `gapless`.", min_length = 1, max_length = 128,
        pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices"), LedgerQuery),
    responses((status = 200, description = "A page of the ledger.", body = LedgerPage), LedgerErrors))]
pub async fn gapless_ledger(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    TagParam(tag): TagParam,
    ApiQuery(q): ApiQuery<LedgerQuery>,
) -> Result<Json<LedgerPage>, ApiError> {
    Ok(Json(app.gapless_ledger(&tag, q, &who).await?))
}
