//! A global tier's regions (`/admin/regions*`, [`crate::service::regions`]) and homes
//! (`/admin/homes*`, [`crate::service::homes`]): a region's leader joins, takes blocks, claims
//! homes, renews its lease and lets go of tags that moved away (the `regions` right); an
//! operator lists and retires regions, lists homes and moves one (the `cluster` right).
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use leaf_api::regions::{
    BlockGrant, BlockRequest, HomeInfo, HomeLease, HomeList, JoinRegionRequest, MoveHomeRequest, RegionInfo,
    RegionList, ReleaseHomeRequest,
};
use leaf_api::routes;
use leaf_api::types::ListQuery;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiQuery, Caller, JsonBody, RawParam, RawParamPair};
use super::openapi::{
    BlockErrors, ClaimHomeErrors, HomesErrors, JoinRegionErrors, LeaseErrors, ListRegionsErrors, MoveHomeErrors,
    ReleaseHomeErrors, RetireRegionErrors,
};
use crate::service::{ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(list_regions, join_region))
        .routes(routes!(retire_region))
        .routes(routes!(grant_block))
        .routes(routes!(claim_home))
        .routes(routes!(release_home))
        .routes(routes!(renew_lease))
        .routes(routes!(list_homes))
        .routes(routes!(move_home))
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

/// Claims the tag's home for the region: the first region to claim a monotonic tag or a
/// gapless series is where it is served. A later claim answers the home as it is.
#[utoipa::path(post, path = routes::ADMIN_REGION_HOME, tag = "regions", operation_id = "claim_home",
    security(("admin_token" = [])),
    params(
        ("name" = String, Path, description = "The region's name.", max_length = 32, pattern = r"^[a-z][a-z0-9\-]*$", example = "eu-west"),
        ("tag" = String, Path, description = "The tag.", min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders-seq"),
    ),
    responses((status = 200, description = "The tag's home.", body = HomeInfo), ClaimHomeErrors))]
pub async fn claim_home(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    RawParamPair(name, tag): RawParamPair,
) -> Result<Json<HomeInfo>, ApiError> {
    Ok(Json(app.claim_home(name, tag, &who).await?))
}

/// The region let go of the tag, whose home moved away in `epoch`: the new home need not wait
/// for the old one's lease to run out. Any other release changes nothing.
#[utoipa::path(post, path = routes::ADMIN_REGION_HOME_RELEASE, tag = "regions", operation_id = "release_home",
    security(("admin_token" = [])),
    params(
        ("name" = String, Path, description = "The region's name.", max_length = 32, pattern = r"^[a-z][a-z0-9\-]*$", example = "eu-west"),
        ("tag" = String, Path, description = "The tag.", min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders-seq"),
    ),
    request_body = ReleaseHomeRequest,
    responses((status = 200, description = "The tag's home.", body = HomeInfo), ReleaseHomeErrors))]
pub async fn release_home(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    RawParamPair(name, tag): RawParamPair,
    JsonBody(body): JsonBody<ReleaseHomeRequest>,
) -> Result<Json<HomeInfo>, ApiError> {
    Ok(Json(app.release_home(name, tag, body, &who).await?))
}

/// Renews the region's lease of its homes for 10 s: its leader serves a homed tag only while
/// the lease it measured runs. Answers the tags homed there and those moving away from there.
#[utoipa::path(post, path = routes::ADMIN_REGION_LEASE, tag = "regions", operation_id = "renew_lease",
    security(("admin_token" = [])),
    params(("name" = String, Path, description = "The region's name.", max_length = 32, pattern = r"^[a-z][a-z0-9\-]*$", example = "eu-west")),
    responses((status = 200, description = "The lease.", body = HomeLease), LeaseErrors))]
pub async fn renew_lease(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    raw: RawParam,
) -> Result<Json<HomeLease>, ApiError> {
    Ok(Json(app.renew_lease(raw.0, &who).await?))
}

/// Homed tags' homes, in name order: a page, as `GET /admin/tags` pages.
#[utoipa::path(get, path = routes::ADMIN_HOMES, tag = "regions", operation_id = "list_homes",
    security(("admin_token" = [])),
    params(ListQuery),
    responses((status = 200, description = "The homes.", body = HomeList), HomesErrors))]
pub async fn list_homes(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<HomeList>, ApiError> {
    Ok(Json(app.homes(q, &who)?))
}

/// Moves a monotonic tag's home to another region (audited). The epoch rises; the new home
/// serves once the old one let go of the tag or its lease ran out, above every ID the old
/// home handed out. A gapless series never moves.
#[utoipa::path(post, path = routes::ADMIN_HOME_MOVE, tag = "regions", operation_id = "move_home",
    security(("admin_token" = [])),
    params(("tag" = String, Path, description = "The tag.", min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders-seq")),
    request_body = MoveHomeRequest,
    responses((status = 200, description = "The tag's new home.", body = HomeInfo), MoveHomeErrors))]
pub async fn move_home(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    raw: RawParam,
    JsonBody(body): JsonBody<MoveHomeRequest>,
) -> Result<Json<HomeInfo>, ApiError> {
    Ok(Json(app.move_home(raw.0, body, &who).await?))
}
