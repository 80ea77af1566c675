//! Gapless series over HTTP: `POST /api/gapless/{tag}/issue` with the caller's idempotency key.
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use leaf_api::gapless::{IssueRequest, IssuedNumber};
use leaf_api::routes;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{IdCaller, JsonBody, TagParam};
use super::openapi::GaplessIssueErrors;
use crate::access::IdAsk;
use crate::service::{ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(gapless_issue))
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
