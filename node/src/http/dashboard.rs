//! `GET /admin/dashboard`: everything the `/ui` page shows, as this node sees it (the
//! `cluster` right). Each member is asked for its own health over the internal RPC
//! ([`PATH_NODE_HEALTH`], concurrently, [`PROBE_TIMEOUT`] each); an answer is checked (it must
//! come from the member asked, within the timeout, with a sane clock) before it is shown.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::Json;
use leaf_api::dashboard::{Dashboard, NodeView, TagView, Totals, MAX_DASHBOARD_TAGS};
use leaf_api::routes;
use leaf_api::types::Health;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::openapi::DashboardErrors;
use super::App;
use crate::clock::Clock;
use crate::raft::network::PATH_NODE_HEALTH;
use crate::snowflake::clock_check;

/// How long one member may take to answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1000);

/// A member's answer to [`PATH_NODE_HEALTH`]: its health and its clock when it answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeProbe {
    pub health: Health,
    pub now_ms: i64,
}

pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(dashboard))
}

/// Everything the built-in dashboard (`/ui`) shows: the cluster as this node has applied it,
/// every member's health as it answered just now (with its round trip and clock offset), the
/// tags with this node's buffers and served counts, its totals and its recent error answers.
#[utoipa::path(get, path = routes::ADMIN_DASHBOARD, tag = "cluster", operation_id = "dashboard",
    security(("admin_token" = [])),
    responses((status = 200, description = "The dashboard's data.", body = Dashboard), DashboardErrors))]
pub async fn dashboard(State(app): State<Arc<App>>) -> Json<Dashboard> {
    let health = app.health();
    let cluster = app.raft.cluster_status(health.clone());
    let probes = cluster.members.iter().map(|m| {
        let app = app.clone();
        let own = health.clone();
        let m = m.clone();
        async move {
            let mut view = NodeView {
                node_id: m.node_id,
                addr: m.addr.clone(),
                role: m.role,
                health: None,
                error: None,
                rtt_ms: None,
                clock_offset_ms: None,
            };
            if m.node_id == app.raft.node_id() {
                (view.health, view.rtt_ms, view.clock_offset_ms) = (Some(own), Some(0), Some(0));
                return view;
            }
            match probe(&app, m.node_id, &m.addr).await {
                Ok((probe, sample)) => {
                    view.health = Some(probe.health);
                    view.rtt_ms = Some(sample.rtt_ms.unsigned_abs());
                    view.clock_offset_ms = Some(sample.offset_ms);
                }
                Err(why) => view.error = Some(why),
            }
            view
        }
    });
    let nodes = futures::future::join_all(probes).await;
    let state = app.raft.state();
    let records = state.tags();
    let tags_total = records.len();
    let caches: HashMap<String, leaf_api::types::CacheEntry> = app
        .tags
        .loaded()
        .iter()
        .map(|h| {
            let mut e = h.inspect();
            e.forecast = app.forecasts.tag(&e.tag);
            (e.tag.clone(), e)
        })
        .collect();
    let mut tags: Vec<TagView> = records
        .into_iter()
        .map(|(tag, record)| {
            let served = app.metrics.ids_served("segment", &tag);
            let cache = caches.get(&tag).cloned();
            TagView { info: super::tag_info(tag, record), cache, served }
        })
        .collect();
    let segment_ids = tags.iter().map(|t| t.served).sum();
    tags.sort_by(|a, b| b.served.cmp(&a.served).then_with(|| a.info.tag.cmp(&b.info.tag)));
    tags.truncate(MAX_DASHBOARD_TAGS);
    Json(Dashboard {
        node_id: app.raft.node_id(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        now_ms: app.clock.now_ms(),
        uptime_secs: app.started.elapsed().as_secs(),
        cluster,
        nodes,
        tags,
        tags_total,
        totals: Totals {
            segment_ids,
            snowflake_ids: app.metrics.snowflake_served_total(),
            errors: app.metrics.errors_total(),
        },
        recent_errors: app.recent_errors.newest_first(),
    })
}

/// Asks member `node_id` at `addr` for its health; the answer with its clock sample, or why
/// it cannot be shown.
async fn probe(app: &App, node_id: u64, addr: &str) -> Result<(NodeProbe, clock_check::Sample), String> {
    let before = app.clock.now_ms();
    let probe: NodeProbe =
        app.raft.call_peer(addr, PATH_NODE_HEALTH, &(), PROBE_TIMEOUT).await.map_err(|e| e.to_string())?;
    let after = app.clock.now_ms();
    if probe.health.node_id != node_id {
        return Err(format!("{addr} answered as node {}, not {node_id}", probe.health.node_id));
    }
    let sample = clock_check::sample(before, probe.now_ms, after, PROBE_TIMEOUT)?;
    Ok((probe, sample))
}
