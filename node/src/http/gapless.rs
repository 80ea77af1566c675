//! Gapless series over HTTP: `POST /api/gapless/{tag}/issue` and `/reserve` with the caller's
//! idempotency key, `/confirm` and `/void` of a reservation, and the series' ledger
//! (`GET /admin/tags/{tag}/ledger`).
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use leaf_api::gapless::{
    ConfirmRequest, IssueRequest, IssuedNumber, LedgerPage, LedgerQuery, ReserveRequest, VoidRequest,
};
use leaf_api::routes;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiQuery, Caller, IdCaller, JsonBody, TagParam};
use super::openapi::{GaplessIssueErrors, GaplessSettleErrors, LedgerErrors};
use crate::access::IdAsk;
use crate::service::gapless::{NumberCaller, NumberRequest};
use crate::service::{ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(gapless_issue))
        .routes(routes!(gapless_reserve))
        .routes(routes!(gapless_confirm))
        .routes(routes!(gapless_void))
        .routes(routes!(gapless_ledger))
}

/// Checks the caller's right to the tag's IDs and runs `req` for `key`.
async fn number(
    app: &App,
    caller: IdCaller,
    tag: &str,
    key: &str,
    req: (NumberRequest, Option<String>),
) -> Result<Json<IssuedNumber>, ApiError> {
    let ask = IdAsk { addr: caller.addr, ids: 1 };
    let who = app.check_ids(caller.authorization.as_ref().map(|v| v.as_bytes()), Some(tag), ask)?;
    Ok(Json(app.gapless_number(tag, key, req, NumberCaller { who, addr: caller.addr }).await?))
}

/// The next number of a gapless series for an idempotency key, final at once and committed
/// through Raft before it is answered; the same key always gets the same number (`replayed`
/// says it is a repeat), so a retry after a timeout or a leader change never consumes a second
/// one.
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
    number(&app, caller, &tag, &body.key, (NumberRequest::Issue, body.secret)).await
}

/// The next number of a gapless series for an idempotency key, reserved until a deadline (the
/// hold, 900 s by default): confirm it or void it before then, or the leader voids it
/// (`expired`). It keeps its place either way. The same key always gets the same number.
#[utoipa::path(post, path = routes::GAPLESS_RESERVE, tag = "ids", operation_id = "gapless_reserve",
    security((), ("admin_token" = [])),
    params(("tag" = String, Path, description = "A tag of profile `gapless`.", min_length = 1, max_length = 128,
        pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices")),
    request_body = ReserveRequest,
    responses((status = 200, description = "The key's number.", body = IssuedNumber), GaplessIssueErrors))]
pub async fn gapless_reserve(
    State(app): State<Arc<App>>,
    caller: IdCaller,
    TagParam(tag): TagParam,
    JsonBody(body): JsonBody<ReserveRequest>,
) -> Result<Json<IssuedNumber>, ApiError> {
    let req = NumberRequest::Reserve { hold_seconds: body.hold_seconds };
    number(&app, caller, &tag, &body.key, (req, body.secret)).await
}

/// Makes the key's reserved number final, before its deadline (a repeat answers it again,
/// `replayed`). 409 `number_conflict` if it was voided or expired.
#[utoipa::path(post, path = routes::GAPLESS_CONFIRM, tag = "ids", operation_id = "gapless_confirm",
    security((), ("admin_token" = [])),
    params(("tag" = String, Path, description = "A tag of profile `gapless`.", min_length = 1, max_length = 128,
        pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices")),
    request_body = ConfirmRequest,
    responses((status = 200, description = "The key's number, confirmed.", body = IssuedNumber), GaplessSettleErrors))]
pub async fn gapless_confirm(
    State(app): State<Arc<App>>,
    caller: IdCaller,
    TagParam(tag): TagParam,
    JsonBody(body): JsonBody<ConfirmRequest>,
) -> Result<Json<IssuedNumber>, ApiError> {
    number(&app, caller, &tag, &body.key, (NumberRequest::Confirm, body.secret)).await
}

/// Voids the key's reserved number with a reason: it keeps its place in the series, with the
/// reason and the caller, and is never issued again (a repeat answers it again, `replayed`).
/// 409 `number_conflict` for a final number.
#[utoipa::path(post, path = routes::GAPLESS_VOID, tag = "ids", operation_id = "gapless_void",
    security((), ("admin_token" = [])),
    params(("tag" = String, Path, description = "A tag of profile `gapless`.", min_length = 1, max_length = 128,
        pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices")),
    request_body = VoidRequest,
    responses((status = 200, description = "The key's number, voided.", body = IssuedNumber), GaplessSettleErrors))]
pub async fn gapless_void(
    State(app): State<Arc<App>>,
    caller: IdCaller,
    TagParam(tag): TagParam,
    JsonBody(body): JsonBody<VoidRequest>,
) -> Result<Json<IssuedNumber>, ApiError> {
    number(&app, caller, &tag, &body.key, (NumberRequest::Void { reason: body.reason }, body.secret)).await
}

/// A page of a gapless series' ledger: every number in issue order with its key, caller, time,
/// state, settlement and hash-chain links; `head` is the digest of the periods' chain heads
/// (`leaf ledger verify` checks an export against it).
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
