//! The monitor endpoints: readiness, Prometheus metrics, Leaf's `/cache` and `/db` pages, and
//! this API's OpenAPI document.
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use leaf_api::routes;
use leaf_api::types::{CacheEntry, Health, ListQuery, TagInfo};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::ApiQuery;
use super::openapi::{self, HealthErrors, ListMonitorErrors, MonitorErrors, PublicErrors};
use crate::access::Principal;
use crate::metrics::Format;
use crate::service::health::{is_ready, Readiness};
use crate::service::{validate, ApiError, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(metrics))
        .routes(routes!(cache))
        .routes(routes!(db))
        .routes(routes!(openapi_json))
}

/// Which readiness `/health` reports in its status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthMode {
    /// Segment mode and snowflake mode.
    #[default]
    All,
    /// Segment mode only.
    Segment,
    /// Snowflake mode only.
    Snowflake,
}

#[derive(Deserialize)]
pub struct HealthQuery {
    #[serde(default)]
    mode: HealthMode,
}

/// Readiness: 200 when the asked-for mode is ready, 503 (with the same body) when not.
#[utoipa::path(get, path = routes::HEALTH, tag = "monitor", operation_id = "health",
    security((), ("admin_token" = [])),
    params(("mode" = Option<HealthMode>, Query, description = "The readiness that sets the status (default all).")),
    responses(
        (status = 200, description = "Ready.", body = Health),
        (status = 503, description = "Not ready (the body says why in `reason`); or, with an `ErrorBody`, \
            `unavailable`: the node refused the connection (too many open) or the request timed out.",
            content((openapi::HealthOrError = "application/json"))),
        HealthErrors,
    ))]
pub async fn health(
    State(app): State<Arc<App>>,
    ApiQuery(q): ApiQuery<HealthQuery>,
) -> Result<(StatusCode, Json<Health>), ApiError> {
    let h = app.health();
    let which = match q.mode {
        HealthMode::All => Readiness::All,
        HealthMode::Segment => Readiness::Segment,
        HealthMode::Snowflake => Readiness::Snowflake,
    };
    let ready = is_ready(&h, which);
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    Ok((status, Json(h)))
}

/// Prometheus metrics: OpenMetrics 1.0 when the `Accept` header prefers it (as Prometheus
/// does), the text format 0.0.4 otherwise.
#[utoipa::path(get, path = routes::METRICS, tag = "monitor", operation_id = "metrics",
    security((), ("admin_token" = [])),
    responses(
        (status = 200, description = "Prometheus text 0.0.4, or OpenMetrics 1.0 when `Accept` prefers \
            `application/openmetrics-text; version=1.0.0`.", body = String,
            content_type = "text/plain; version=0.0.4; charset=utf-8",
            example = "# TYPE leaf_raft_is_leader gauge\nleaf_raft_is_leader 1\n"),
        MonitorErrors,
    ))]
pub async fn metrics(
    State(app): State<Arc<App>>,
    viewer: Option<Extension<Principal>>,
    headers: HeaderMap,
) -> Response {
    let format = Format::negotiate(headers.get(ACCEPT).and_then(|v| v.to_str().ok()));
    let text = app.render_metrics(format, viewer.as_deref());
    ([(CONTENT_TYPE, format.content_type())], text).into_response()
}

/// This node's per-tag buffers (Leaf's `/cache`), each with the tag's exhaustion forecast.
#[utoipa::path(get, path = routes::CACHE, tag = "monitor", operation_id = "cache",
    security(("admin_token" = [])),
    params(ListQuery),
    responses((status = 200, description = "A page of the tags loaded on this node, in name order, but obfuscated ones (their positions would count their IDs).", body = Vec<CacheEntry>), ListMonitorErrors))]
pub async fn cache(
    State(app): State<Arc<App>>,
    viewer: Option<Extension<Principal>>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Vec<CacheEntry>>, ApiError> {
    Ok(Json(app.public_cache(viewer.as_deref(), &validate::page(q)?)))
}

/// The tags as stored in the replicated state (Leaf's `/db`).
#[utoipa::path(get, path = routes::DB, tag = "monitor", operation_id = "db",
    security(("admin_token" = [])),
    params(ListQuery),
    responses((status = 200, description = "A page of the tags in name order, but obfuscated and archived ones (an obfuscated tag's max_id would count its IDs; GET /admin/tags lists both).", body = Vec<TagInfo>), ListMonitorErrors))]
pub async fn db(
    State(app): State<Arc<App>>,
    viewer: Option<Extension<Principal>>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Vec<TagInfo>>, ApiError> {
    Ok(Json(app.public_tags(viewer.as_deref(), &validate::page(q)?)))
}

/// This document (OpenAPI 3.1).
#[utoipa::path(get, path = routes::OPENAPI, tag = "monitor", operation_id = "openapi",
    responses(
        (status = 200, description = "The OpenAPI document of this API.", content_type = "application/json",
            body = Object),
        PublicErrors,
    ))]
pub async fn openapi_json(Extension(doc): Extension<openapi::Served>) -> Response {
    ([(CONTENT_TYPE, "application/json")], doc.0).into_response()
}
