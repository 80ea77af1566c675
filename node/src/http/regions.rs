//! A global tier's regions (`/admin/regions*`, [`crate::service::regions`]): a region's leader
//! joins and takes blocks (the `regions` right), an operator lists and retires regions (the
//! `cluster` right).
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use leaf_api::regions::{BlockGrant, BlockRequest, JoinRegionRequest, RegionInfo, RegionList};
use leaf_api::routes;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{Caller, JsonBody, RawParam, RawParamPair};
use super::openapi::{BlockErrors, JoinRegionErrors, ListRegionsErrors, RetireRegionErrors};
use crate::service::{ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(list_regions, join_region))
        .routes(routes!(retire_region))
        .routes(routes!(grant_block))
}

/// Every region this global tier registered, retired ones too, by name.
#[utoipa::path(get, path = routes::ADMIN_REGIONS, tag = "regions", operation_id = "list_regions",
    security(("admin_token" = [])),
    responses((status = 200, description = "Every region, by name.", body = RegionList), ListRegionsErrors))]
pub async fn list_regions(State(app): State<Arc<App>>, Caller(who): Caller) -> Result<Json<RegionList>, ApiError> {
    Ok(Json(app.regions(&who)?))
}

/// Registers a region with this global tier: an ID and a run of snowflake worker IDs that are
/// its alone, for good. A region that joined before gets its record again.
#[utoipa::path(post, path = routes::ADMIN_REGIONS, tag = "regions", operation_id = "join_region",
    security(("admin_token" = [])),
    request_body = JoinRegionRequest,
    responses((status = 200, description = "The region's record.", body = RegionInfo), JoinRegionErrors))]
pub async fn join_region(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<JoinRegionRequest>,
) -> Result<Json<RegionInfo>, ApiError> {
    Ok(Json(app.join_region(body, &who).await?))
}

/// Retires a region: it gets no block any more, and its name, ID and worker IDs are never
/// given to another region.
#[utoipa::path(post, path = routes::ADMIN_REGION_RETIRE, tag = "regions", operation_id = "retire_region",
    security(("admin_token" = [])),
    params(("name" = String, Path, description = "The region's name.", max_length = 32, pattern = r"^[a-z][a-z0-9\-]*$", example = "eu-west")),
    responses((status = 200, description = "The region's record, retired.", body = RegionInfo), RetireRegionErrors))]
pub async fn retire_region(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    raw: RawParam,
) -> Result<Json<RegionInfo>, ApiError> {
    Ok(Json(app.retire_region(raw.0, &who).await?))
}

/// A block of a tag's IDs for the region: an allocation of the tag's counter on this global
/// tier, so no two blocks overlap. A repeat grants another block (the first is a gap).
#[utoipa::path(post, path = routes::ADMIN_REGION_BLOCKS, tag = "regions", operation_id = "grant_block",
    security(("admin_token" = [])),
    params(
        ("name" = String, Path, description = "The region's name.", max_length = 32, pattern = r"^[a-z][a-z0-9\-]*$", example = "eu-west"),
        ("tag" = String, Path, description = "The tag.", min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders"),
    ),
    request_body = BlockRequest,
    responses((status = 200, description = "The block: IDs `[start, end)`.", body = BlockGrant), BlockErrors))]
pub async fn grant_block(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    RawParamPair(name, tag): RawParamPair,
    JsonBody(body): JsonBody<BlockRequest>,
) -> Result<Json<BlockGrant>, ApiError> {
    Ok(Json(app.grant_block(name, tag, body, &who).await?))
}
