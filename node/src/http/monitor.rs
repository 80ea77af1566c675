//! The monitor endpoints: readiness, Prometheus metrics, Leaf's `/cache` and `/db` pages, and
//! this API's OpenAPI document.
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use leaf_api::routes;
use leaf_api::types::{CacheEntry, Health, TagInfo};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::ApiQuery;
use super::openapi::{self, HealthErrors, MonitorErrors};
use super::{snowflake_ready, App};
use crate::clock::Clock;

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
    let ready = match q.mode {
        HealthMode::All => h.ready,
        HealthMode::Segment => h.segment_ready,
        HealthMode::Snowflake => snowflake_ready(&h.snowflake),
    };
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    Ok((status, Json(h)))
}

/// The Prometheus content type of `/metrics`.
const METRICS_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Prometheus metrics (text exposition format 0.0.4).
#[utoipa::path(get, path = routes::METRICS, tag = "monitor", operation_id = "metrics",
    responses(
        (status = 200, description = "Prometheus text.", body = String,
            content_type = "text/plain; version=0.0.4; charset=utf-8",
            example = "# TYPE leaf_raft_is_leader gauge\nleaf_raft_is_leader 1\n"),
        MonitorErrors,
    ))]
pub async fn metrics(State(app): State<Arc<App>>) -> Response {
    let sf = app.forecasts.snowflake(app.clock.now_ms());
    app.metrics.set_snowflake_forecast(sf.epoch_years_left, sf.free_worker_ids);
    let body = app.metrics.render(&app.raft.status(), app.raft.state().tag_count());
    ([(CONTENT_TYPE, METRICS_TYPE)], body).into_response()
}

/// This node's per-tag buffers (Leaf's `/cache`), each with the tag's exhaustion forecast.
#[utoipa::path(get, path = routes::CACHE, tag = "monitor", operation_id = "cache",
    responses((status = 200, description = "The tags loaded on this node.", body = Vec<CacheEntry>), MonitorErrors))]
pub async fn cache(State(app): State<Arc<App>>) -> Json<Vec<CacheEntry>> {
    let loaded = app.tags.loaded();
    let entries = loaded.iter().map(|h| {
        let mut e = h.inspect();
        e.forecast = app.forecasts.tag(&e.tag);
        e
    });
    Json(entries.collect())
}

/// The tags as stored in the replicated state (Leaf's `/db`).
#[utoipa::path(get, path = routes::DB, tag = "monitor", operation_id = "db",
    responses((status = 200, description = "Every tag.", body = Vec<TagInfo>), MonitorErrors))]
pub async fn db(State(app): State<Arc<App>>) -> Json<Vec<TagInfo>> {
    Json(app.tag_list())
}

/// This document (OpenAPI 3.1).
#[utoipa::path(get, path = routes::OPENAPI, tag = "monitor", operation_id = "openapi",
    responses(
        (status = 200, description = "The OpenAPI document of this API.", content_type = "application/json",
            body = Object),
        MonitorErrors,
    ))]
pub async fn openapi_json() -> Response {
    ([(CONTENT_TYPE, "application/json")], openapi::document_json().clone()).into_response()
}
