//! Scoped tokens (`/admin/tokens*`: the admin token or an admin certificate only, checked by
//! [`super::auth`]) and the audit trail (`GET /admin/audit`: the `cluster` right).
//!
//! A token's secret is drawn here from the OS's random source, shown once in the answer, and
//! proposed only as its SHA-256: the Raft log, snapshots and backups never hold it.
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use leaf_api::audit::{AuditKind, AuditPage};
use leaf_api::routes;
use leaf_api::tokens::{CreateTokenRequest, IssuedToken, RotateTokenRequest, TokenInfo};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiQuery, Caller, JsonBody, RawParam};
use super::openapi::{AuditErrors, CreateTokenErrors, ListTokensErrors, RotateTokenErrors, TokenErrors};
use crate::service::tokens::{token_id, AuditQuery};
use crate::service::{ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(list_tokens, create_token))
        .routes(routes!(show_token, revoke_token))
        .routes(routes!(rotate_token))
        .routes(routes!(audit))
}

/// Every token (their secrets are never shown again).
#[utoipa::path(get, path = routes::ADMIN_TOKENS, tag = "tokens", operation_id = "list_tokens",
    security(("admin_token" = [])),
    responses((status = 200, description = "Every token, by ID.", body = Vec<TokenInfo>), ListTokensErrors))]
pub async fn list_tokens(State(app): State<Arc<App>>) -> Json<Vec<TokenInfo>> {
    Json(app.list_tokens())
}

/// Creates a scoped token; the answer holds its bearer, the only time it is shown.
#[utoipa::path(post, path = routes::ADMIN_TOKENS, tag = "tokens", operation_id = "create_token",
    security(("admin_token" = [])),
    request_body = CreateTokenRequest,
    responses((status = 201, description = "Created: store the bearer now.", body = IssuedToken), CreateTokenErrors))]
pub async fn create_token(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CreateTokenRequest>,
) -> Result<(StatusCode, Json<IssuedToken>), ApiError> {
    Ok((StatusCode::CREATED, Json(app.create_token(body, &who).await?)))
}

/// One token.
#[utoipa::path(get, path = routes::ADMIN_TOKEN, tag = "tokens", operation_id = "show_token",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The token's ID.", pattern = "^[0-9a-f]{16}$", example = "3f9c2a7d10b4e655")),
    responses((status = 200, description = "The token.", body = TokenInfo), TokenErrors))]
pub async fn show_token(State(app): State<Arc<App>>, raw: RawParam) -> Result<Json<TokenInfo>, ApiError> {
    Ok(Json(app.show_token(token_id(&raw.0)?)?))
}

/// Revokes a token: every node refuses it once it has applied the revocation.
#[utoipa::path(delete, path = routes::ADMIN_TOKEN, tag = "tokens", operation_id = "revoke_token",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The token's ID.", pattern = "^[0-9a-f]{16}$", example = "3f9c2a7d10b4e655")),
    responses((status = 200, description = "The token as it was.", body = TokenInfo), TokenErrors))]
pub async fn revoke_token(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    raw: RawParam,
) -> Result<Json<TokenInfo>, ApiError> {
    Ok(Json(app.revoke_token(token_id(&raw.0)?, &who).await?))
}

/// Gives a token a new secret; the old one keeps working for `grace_ms` (0: refused as soon as
/// a node applied the rotation).
#[utoipa::path(post, path = routes::ADMIN_TOKEN_ROTATE, tag = "tokens", operation_id = "rotate_token",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The token's ID.", pattern = "^[0-9a-f]{16}$", example = "3f9c2a7d10b4e655")),
    request_body = RotateTokenRequest,
    responses((status = 200, description = "Rotated: store the new bearer now.", body = IssuedToken), RotateTokenErrors))]
pub async fn rotate_token(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    raw: RawParam,
    JsonBody(body): JsonBody<RotateTokenRequest>,
) -> Result<Json<IssuedToken>, ApiError> {
    Ok(Json(app.rotate_token(token_id(&raw.0)?, body, &who).await?))
}

/// The audit trail: admin changes (tags, tokens, membership) with who made them and the
/// leader's time, oldest first, as this node has applied them.
#[utoipa::path(get, path = routes::ADMIN_AUDIT, tag = "tokens", operation_id = "audit",
    security(("admin_token" = [])),
    params(
        ("kind" = Option<AuditKind>, Query, description = "Only this kind of change."),
        ("tag" = Option<String>, Query, description = "Only changes of this tag.", min_length = 1, max_length = 128,
            pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders"),
        ("token" = Option<String>, Query, description = "Only changes made by or to this token.",
            pattern = "^[0-9a-f]{16}$", example = "3f9c2a7d10b4e655"),
        ("since_ms" = Option<i64>, Query, description = "Leader time at or after (Unix ms)."),
        ("until_ms" = Option<i64>, Query, description = "Leader time before (Unix ms)."),
        ("after_seq" = Option<i64>, Query, description = "Records after this one (the previous page's \
            `next_after_seq`).", minimum = 0),
        ("limit" = Option<u32>, Query, description = "Most records (default 100).", minimum = 1, maximum = 1000),
    ),
    responses((status = 200, description = "A page of the trail.", body = AuditPage), AuditErrors))]
pub async fn audit(
    State(app): State<Arc<App>>,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> Result<Json<AuditPage>, ApiError> {
    Ok(Json(app.audit(q)?))
}
