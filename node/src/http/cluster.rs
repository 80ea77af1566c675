//! The cluster endpoints: the public status, and membership changes (admin, under
//! `/admin/cluster`, checked by [`super::auth::AuthLayer`]).
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use leaf_api::routes;
use leaf_api::types::{AddLearnerRequest, ClusterStatus, MembershipChange};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{Caller, JsonBody, NodeIdParam};
use super::openapi::{AddLearnerErrors, MonitorErrors, PromoteErrors, RemoveErrors};
use crate::service::{ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(status))
        .routes(routes!(add_learner))
        .routes(routes!(promote))
        .routes(routes!(remove))
}

/// Membership, leader, term, log indexes, replication (on the leader) and this node's health.
#[utoipa::path(get, path = routes::CLUSTER_STATUS, tag = "cluster", operation_id = "cluster_status",
    security(("admin_token" = [])),
    responses((status = 200, description = "The cluster as this node sees it.", body = ClusterStatus), MonitorErrors))]
pub async fn status(State(app): State<Arc<App>>) -> Json<ClusterStatus> {
    Json(app.cluster_status())
}

/// Adds a learner: it receives the log and serves IDs, but does not vote. Idempotent for the
/// same ID and address.
#[utoipa::path(post, path = routes::CLUSTER_LEARNERS, tag = "cluster", operation_id = "add_learner",
    security(("admin_token" = [])),
    request_body = AddLearnerRequest,
    responses((status = 200, description = "The committed membership.", body = MembershipChange), AddLearnerErrors))]
pub async fn add_learner(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<AddLearnerRequest>,
) -> Result<Json<MembershipChange>, ApiError> {
    Ok(Json(app.add_learner(body, &who).await?))
}

/// Makes a learner a voter, once it has nearly the whole log. A voter: no change.
#[utoipa::path(post, path = routes::CLUSTER_PROMOTE, tag = "cluster", operation_id = "promote",
    security(("admin_token" = [])),
    params(("id" = u64, Path, description = "The node ID.", minimum = 1, example = 4)),
    responses((status = 200, description = "The committed membership.", body = MembershipChange), PromoteErrors))]
pub async fn promote(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    NodeIdParam(id): NodeIdParam,
) -> Result<Json<MembershipChange>, ApiError> {
    Ok(Json(app.promote(id, &who).await?))
}

/// Removes a member (voter or learner); its ID is never reused. The last voter cannot be
/// removed (400 `invalid_request`).
#[utoipa::path(delete, path = routes::CLUSTER_NODE, tag = "cluster", operation_id = "remove_member",
    security(("admin_token" = [])),
    params(("id" = u64, Path, description = "The node ID.", minimum = 1, example = 4)),
    responses((status = 200, description = "The committed membership.", body = MembershipChange), RemoveErrors))]
pub async fn remove(
    State(app): State<Arc<App>>,
    Caller(who): Caller,
    NodeIdParam(id): NodeIdParam,
) -> Result<Json<MembershipChange>, ApiError> {
    Ok(Json(app.remove_member(id, &who).await?))
}
