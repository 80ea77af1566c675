//! Scoped tokens (`/admin/tokens*`: the admin token or an admin certificate only, checked by
//! [`super::auth`]) and the audit trail (`GET /admin/audit`: the `cluster` right).
//!
//! A token's secret is drawn here from the OS's random source, shown once in the answer, and
//! proposed only as its SHA-256: the Raft log, snapshots and backups never hold it.
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use leaf_api::audit::{AuditFilter, AuditKind, AuditPage, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE};
use leaf_api::routes;
use leaf_api::tag::validate_tag;
use leaf_api::tokens::{
    format_bearer, rights_set, validate_name, validate_scope, CreateTokenRequest, IssuedToken, RotateTokenRequest,
    TokenError, TokenId, TokenInfo, MAX_GRACE_MS,
};
use leaf_api::ErrorCode;
use leaf_raft_store::{NewToken, TokenRecord};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{ApiQuery, Caller, JsonBody, RawParam};
use super::openapi::{AuditErrors, CreateTokenErrors, ListTokensErrors, RotateTokenErrors, TokenErrors};
use super::App;
use crate::access::{hash_secret, new_secret};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(list_tokens, create_token))
        .routes(routes!(show_token, revoke_token))
        .routes(routes!(rotate_token))
        .routes(routes!(audit))
}

fn bad(e: TokenError) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, e.to_string())
}

/// A token as the API shows it (never its secret or hash).
pub fn token_info(id: TokenId, r: TokenRecord) -> TokenInfo {
    TokenInfo {
        id,
        name: r.name,
        rights: r.rights.into_iter().collect(),
        tags: r.tags,
        quota: r.quota,
        created_ms: r.created_ms,
        created_by: r.created_by,
        rotated_ms: r.rotated_ms,
        previous_secret_until_ms: r.previous.map(|(_, until)| until),
    }
}

/// The `{id}` of a token route.
fn token_id(RawParam(raw): RawParam) -> Result<TokenId, ApiError> {
    raw.parse().map_err(bad)
}

fn not_found(id: TokenId) -> ApiError {
    ApiError::new(ErrorCode::TokenNotFound, format!("no token with ID {id}"))
}

/// Every token (their secrets are never shown again).
#[utoipa::path(get, path = routes::ADMIN_TOKENS, tag = "tokens", operation_id = "list_tokens",
    security(("admin_token" = [])),
    responses((status = 200, description = "Every token, by ID.", body = Vec<TokenInfo>), ListTokensErrors))]
pub async fn list_tokens(State(app): State<Arc<App>>) -> Json<Vec<TokenInfo>> {
    let tokens = app.raft.state().tokens();
    Json(tokens.iter().map(|(id, r)| token_info(TokenId(*id), r.clone())).collect())
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
    validate_name(&body.name).map_err(bad)?;
    let rights = rights_set(&body.rights).map_err(bad)?;
    validate_scope(&rights, &body.tags).map_err(bad)?;
    if let Some(q) = &body.quota {
        q.validate().map_err(bad)?;
    }
    let (id, secret) = new_secret()?;
    let token =
        NewToken { id, name: body.name, rights, tags: body.tags, quota: body.quota, secret_hash: hash_secret(&secret) };
    let (id, record) = app.raft.create_token(token, who.actor()).await?;
    tracing::info!(token = %id, name = %record.name, "created a scoped token");
    let issued = IssuedToken { token: token_info(id, record), bearer: format_bearer(id, &secret) };
    Ok((StatusCode::CREATED, Json(issued)))
}

/// One token.
#[utoipa::path(get, path = routes::ADMIN_TOKEN, tag = "tokens", operation_id = "show_token",
    security(("admin_token" = [])),
    params(("id" = String, Path, description = "The token's ID.", pattern = "^[0-9a-f]{16}$", example = "3f9c2a7d10b4e655")),
    responses((status = 200, description = "The token.", body = TokenInfo), TokenErrors))]
pub async fn show_token(State(app): State<Arc<App>>, raw: RawParam) -> Result<Json<TokenInfo>, ApiError> {
    let id = token_id(raw)?;
    let record = app.raft.state().tokens().get(&id.0).cloned().ok_or_else(|| not_found(id))?;
    Ok(Json(token_info(id, record)))
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
    let id = token_id(raw)?;
    let (id, record) = app.raft.revoke_token(id, who.actor()).await?;
    tracing::info!(token = %id, name = %record.name, "revoked a scoped token");
    Ok(Json(token_info(id, record)))
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
    let id = token_id(raw)?;
    let grace_ms = body.grace_ms.unwrap_or(0);
    if !(0..=MAX_GRACE_MS).contains(&grace_ms) {
        return Err(bad(TokenError::Grace(grace_ms)));
    }
    let (_, secret) = new_secret()?;
    let (id, record) = app.raft.rotate_token(id, hash_secret(&secret), grace_ms, who.actor()).await?;
    tracing::info!(token = %id, name = %record.name, grace_ms, "rotated a scoped token");
    Ok(Json(IssuedToken { token: token_info(id, record), bearer: format_bearer(id, &secret) }))
}

/// The query of `GET /admin/audit`, as given.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    kind: Option<String>,
    tag: Option<String>,
    token: Option<String>,
    since_ms: Option<i64>,
    until_ms: Option<i64>,
    after_seq: Option<i64>,
    limit: Option<u32>,
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
    let invalid = |m: String| ApiError::new(ErrorCode::InvalidRequest, m);
    let kind = q.kind.as_deref().map(str::parse::<AuditKind>).transpose().map_err(invalid)?;
    if let Some(t) = &q.tag {
        validate_tag(t).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
    }
    let token = q.token.as_deref().map(str::parse::<TokenId>).transpose().map_err(bad)?;
    let limit = q.limit.unwrap_or(DEFAULT_AUDIT_PAGE);
    if !(1..=MAX_AUDIT_PAGE).contains(&limit) {
        return Err(invalid(format!("limit must be from 1 to {MAX_AUDIT_PAGE}, got {limit}")));
    }
    let after_seq = u64::try_from(q.after_seq.unwrap_or(0))
        .map_err(|_| invalid(format!("after_seq must not be negative, got {}", q.after_seq.unwrap_or(0))))?;
    let filter = AuditFilter { kind, tag: q.tag, token, since_ms: q.since_ms, until_ms: q.until_ms };
    Ok(Json(app.raft.state().audit_page(&filter, after_seq, limit as usize)))
}
