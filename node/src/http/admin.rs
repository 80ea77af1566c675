//! The admin endpoints (bearer token, or loopback without one; checked by
//! [`super::auth::AuthLayer`]): tags, the allocation journal, and the clock fault.
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use leaf_api::routes;
use leaf_api::types::{
    AllocationJournal, ClockFault, CreateTagRequest, CreateTagsRequest, CreateTagsResponse, ListQuery,
    ObfuscatedDecoded, TagInfo, UpdateTagRequest,
};
use leaf_api::ErrorCode;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiQuery, Caller, JsonBody, TagParam};
use super::openapi::{
    AllocationsErrors, ArchiveTagErrors, CreateTagErrors, CreateTagsErrors, DecodeObfuscatedErrors, FaultErrors,
    ListErrors, ShowTagErrors, UpdateTagErrors,
};
use crate::service::{validate, ApiError, App};

/// The batch routes of this area (their own body limit, `http.max_batch_body_bytes`).
pub fn batch_routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(create_tags))
}

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(list_tags, create_tag))
        .routes(routes!(show_tag, update_tag))
        .routes(routes!(archive_tag))
        .routes(routes!(restore_tag))
        .routes(routes!(decode_obfuscated))
        .routes(routes!(allocations))
        .routes(routes!(fault_clock))
}

/// A page of the tags, as stored, in name order.
#[utoipa::path(get, path = routes::ADMIN_TAGS, tag = "admin", operation_id = "list_tags",
    security(("admin_token" = [])),
    params(ListQuery),
    responses((status = 200, description = "A page of the tags.", body = Vec<TagInfo>), ListErrors))]
pub async fn list_tags(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Vec<TagInfo>>, ApiError> {
    Ok(Json(app.list_tags(&who, &validate::page(q)?)))
}

/// Creates a tag (Leaf's `leaf_alloc` row).
#[utoipa::path(post, path = routes::ADMIN_TAGS, tag = "admin", operation_id = "create_tag",
    security(("admin_token" = [])),
    request_body = CreateTagRequest,
    responses((status = 201, description = "Created.", body = TagInfo), CreateTagErrors))]
pub async fn create_tag(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CreateTagRequest>,
) -> Result<(StatusCode, Json<TagInfo>), ApiError> {
    Ok((StatusCode::CREATED, Json(app.create_tag(body, &who).await?)))
}

/// Creates many tags: those that exist are reported and left as they are, so the same batch
/// may be sent again. Committed in as few Raft entries as the batch's size allows; if one
/// fails, the tags of those before it stay created and the error says how many.
#[utoipa::path(post, path = routes::ADMIN_TAGS_BATCH, tag = "admin", operation_id = "create_tags",
    security(("admin_token" = [])),
    request_body = CreateTagsRequest,
    responses((status = 200, description = "Committed: each tag created or existing.", body = CreateTagsResponse),
        CreateTagsErrors))]
pub async fn create_tags(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CreateTagsRequest>,
) -> Result<Json<CreateTagsResponse>, ApiError> {
    Ok(Json(app.create_tags(body, &who).await?))
}

/// One tag, as stored.
#[utoipa::path(get, path = routes::ADMIN_TAG, tag = "admin", operation_id = "show_tag",
    security(("admin_token" = [])),
    params(("tag" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$",
        example = "leaf-segment-test")),
    responses((status = 200, description = "The tag.", body = TagInfo), ShowTagErrors))]
pub async fn show_tag(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    TagParam(tag): TagParam,
) -> Result<Json<TagInfo>, ApiError> {
    Ok(Json(app.show_tag(tag, &who).await?))
}

/// An obfuscated tag's ID back to the sequence number it was made from (the key never leaves
/// the cluster; this is how an operator reads it).
#[utoipa::path(get, path = routes::ADMIN_TAG_DECODE, tag = "admin", operation_id = "decode_obfuscated",
    security(("admin_token" = [])),
    params(
        ("tag" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "invoices"),
        ("id" = i64, Path, description = "An ID the tag served.", minimum = 0, example = 2499986683200342791_i64),
    ),
    responses((status = 200, description = "The sequence number.", body = ObfuscatedDecoded), DecodeObfuscatedErrors))]
pub async fn decode_obfuscated(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    params: DecodeParams,
) -> Result<Json<ObfuscatedDecoded>, ApiError> {
    let DecodeParams { tag, id } = params;
    Ok(Json(app.decode_obfuscated(tag, id, &who).await?))
}

/// The `{tag}` and `{id}` of [`decode_obfuscated`]: a valid tag and a non-negative `i64`.
pub struct DecodeParams {
    tag: String,
    id: u64,
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for DecodeParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        let params = axum::extract::RawPathParams::from_request_parts(parts, state).await?;
        let (mut tag, mut id) = (None, None);
        for (name, value) in params.iter() {
            match name {
                "tag" => tag = Some(value.to_string()),
                "id" => id = Some(value.to_string()),
                _ => {}
            }
        }
        let tag = tag.ok_or_else(|| ApiError::new(ErrorCode::InvalidTag, "missing tag"))?;
        validate::tag(&tag)?;
        let raw = id.unwrap_or_default();
        let id = raw.parse::<i64>().ok().and_then(|v| u64::try_from(v).ok()).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!("{:?} is not a non-negative 64-bit ID", raw.chars().take(32).collect::<String>()),
            )
        })?;
        Ok(DecodeParams { tag, id })
    }
}

/// Changes a tag's stored step and/or description.
#[utoipa::path(patch, path = routes::ADMIN_TAG, tag = "admin", operation_id = "update_tag",
    security(("admin_token" = [])),
    params(("tag" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$",
        example = "leaf-segment-test")),
    request_body = UpdateTagRequest,
    responses((status = 200, description = "The tag as updated.", body = TagInfo), UpdateTagErrors))]
pub async fn update_tag(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    TagParam(tag): TagParam,
    JsonBody(body): JsonBody<UpdateTagRequest>,
) -> Result<Json<TagInfo>, ApiError> {
    Ok(Json(app.update_tag(tag, body, &who).await?))
}

/// Archives a tag: no node serves it once it applied the archive, no ID is allocated for it
/// again, and its name is never given to a new tag (`POST .../restore` brings it back).
/// Archiving an archived tag changes nothing.
#[utoipa::path(post, path = routes::ADMIN_TAG_ARCHIVE, tag = "admin", operation_id = "archive_tag",
    security(("admin_token" = [])),
    params(("tag" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$",
        example = "leaf-segment-test")),
    responses((status = 200, description = "The tag as archived.", body = TagInfo), ArchiveTagErrors))]
pub async fn archive_tag(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    TagParam(tag): TagParam,
) -> Result<Json<TagInfo>, ApiError> {
    Ok(Json(app.archive_tag(tag, &who).await?))
}

/// Brings an archived tag back: it serves again from where its counter stopped. Restoring a
/// tag that is not archived changes nothing.
#[utoipa::path(post, path = routes::ADMIN_TAG_RESTORE, tag = "admin", operation_id = "restore_tag",
    security(("admin_token" = [])),
    params(("tag" = String, Path, min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$",
        example = "leaf-segment-test")),
    responses((status = 200, description = "The tag as restored.", body = TagInfo), ArchiveTagErrors))]
pub async fn restore_tag(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    TagParam(tag): TagParam,
) -> Result<Json<TagInfo>, ApiError> {
    Ok(Json(app.restore_tag(tag, &who).await?))
}

#[derive(Deserialize)]
pub struct AllocationsQuery {
    tag: Option<String>,
    node: Option<u64>,
}

/// The journal of committed segments and the node each went to.
#[utoipa::path(get, path = routes::ADMIN_ALLOCATIONS, tag = "admin", operation_id = "allocations",
    security(("admin_token" = [])),
    params(
        ("tag" = Option<String>, Query, description = "Only this tag.", min_length = 1, max_length = 128,
            pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders"),
        ("node" = Option<u64>, Query, description = "Only allocations to this node.", example = 1),
    ),
    responses((status = 200, description = "The journal.", body = AllocationJournal), AllocationsErrors))]
pub async fn allocations(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    ApiQuery(q): ApiQuery<AllocationsQuery>,
) -> Result<Json<AllocationJournal>, ApiError> {
    Ok(Json(app.allocations(q.tag.as_deref(), q.node, &who)?))
}

/// Skews this node's clock (only with fault injection enabled; 404 `not_found` otherwise).
#[utoipa::path(post, path = routes::ADMIN_FAULT_CLOCK, tag = "admin", operation_id = "fault_clock",
    security(("admin_token" = [])),
    request_body = ClockFault,
    responses((status = 200, description = "The offset now in force.", body = ClockFault), FaultErrors))]
pub async fn fault_clock(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    body: Result<JsonBody<ClockFault>, ApiError>,
) -> Result<Json<ClockFault>, ApiError> {
    // Disabled first: a node without fault injection says so whatever the body.
    app.fault_injection()?;
    let JsonBody(body) = body?;
    Ok(Json(app.fault_clock(body, &who)?))
}
