//! The monitor endpoints: readiness, Prometheus metrics, Leaf's `/cache` and `/db` pages, and
//! this API's OpenAPI document.
use std::sync::Arc;

use axum::extract::State;
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use leaf_api::profile::Profile;
use leaf_api::routes;
use leaf_api::types::{CacheEntry, Health, MemberRole, SnowflakeState, TagInfo};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::ApiQuery;
use super::openapi::{self, HealthErrors, MonitorErrors};
use super::{snowflake_ready, App};
use crate::clock::Clock;
use crate::metrics::{Format, NodeFacts, SnowflakeFacts};

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

/// Prometheus metrics: OpenMetrics 1.0 when the `Accept` header prefers it (as Prometheus
/// does), the text format 0.0.4 otherwise.
#[utoipa::path(get, path = routes::METRICS, tag = "monitor", operation_id = "metrics",
    responses(
        (status = 200, description = "Prometheus text 0.0.4, or OpenMetrics 1.0 when `Accept` prefers \
            `application/openmetrics-text; version=1.0.0`.", body = String,
            content_type = "text/plain; version=0.0.4; charset=utf-8",
            example = "# TYPE leaf_raft_is_leader gauge\nleaf_raft_is_leader 1\n"),
        MonitorErrors,
    ))]
pub async fn metrics(State(app): State<Arc<App>>, headers: HeaderMap) -> Response {
    let format = Format::negotiate(headers.get(ACCEPT).and_then(|v| v.to_str().ok()));
    let sf = app.forecasts.snowflake(app.clock.now_ms());
    app.metrics.set_snowflake_forecast(sf.epoch_years_left, sf.free_worker_ids);
    let status = app.raft.status();
    let facts = node_facts(&app, &status);
    let body = app.metrics.render(&status, app.raft.state().tag_count(), facts, format);
    ([(CONTENT_TYPE, format.content_type())], body).into_response()
}

/// What the node gauges show at this scrape (see [`crate::metrics::node`]).
fn node_facts(app: &App, status: &crate::raft::RaftStatus) -> NodeFacts {
    let cluster = app.raft.cluster_status(app.health());
    let me = app.raft.node_id();
    let replication_lag = match (&cluster.replication, status.is_leader) {
        (Some(r), true) => r.iter().filter(|v| v.node_id != me).map(|v| (v.node_id, v.lag)).collect(),
        _ => Vec::new(),
    };
    let voters = cluster.members.iter().filter(|m| m.role == MemberRole::Voter).count() as u64;
    let learners = cluster.members.len() as u64 - voters;
    let state = app.raft.state();
    let (by_profile, audit_records) = state.with_state(|s| {
        let mut n = [0u64; 4];
        for r in s.tags.values() {
            n[r.profile.kind() as usize] += 1;
        }
        (n, s.audit.records.len() as u64)
    });
    let tags_by_profile = [Profile::Segment, Profile::Monotonic, Profile::Obfuscated, Profile::Daily]
        .into_iter()
        .map(|p| (p.as_str(), by_profile[p as usize]))
        .collect();
    let h = &cluster.health.snowflake;
    let now_ms = app.clock.now_ms();
    let snowflake = (h.state != SnowflakeState::Disabled).then(|| SnowflakeFacts {
        serving: h.state == SnowflakeState::Serving,
        worker_id: h.worker_id.map_or(-1, i64::from),
        lease_remaining_seconds: h.lease_remaining_ms.map(|ms| ms as f64 / 1000.0),
        high_water_ahead_seconds: h.high_water_ms.map(|hw| hw.saturating_sub(now_ms) as f64 / 1000.0),
    });
    NodeFacts {
        quorum_contact_age_seconds: status.quorum_ack_age_ms.map(|ms| ms as f64 / 1000.0),
        replication_lag,
        voters,
        learners,
        tags_by_profile,
        tokens: state.tokens().len() as u64,
        audit_records,
        snowflake,
        worker_ids: app.config.snowflake.worker_ids.count() as u64,
        peer_clock_offsets: app.peer_clocks.offsets().iter().map(|(id, ms)| (*id, *ms as f64 / 1000.0)).collect(),
    }
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
