//! The dashboard's data (`GET /admin/dashboard`, the `/ui` page): the cluster as this node has
//! applied it, and each member's health as it answers over the internal RPC
//! ([`PATH_NODE_HEALTH`], concurrently, [`PROBE_TIMEOUT`] each); an answer is checked (it must
//! come from the member asked, within the timeout, with a sane clock) before it is shown.
use std::collections::HashMap;
use std::time::Duration;

use leaf_api::dashboard::{Dashboard, NodeView, TagView, Totals, MAX_DASHBOARD_TAGS};
use leaf_api::types::Health;
use serde::{Deserialize, Serialize};

use super::tags::tag_info;
use super::App;
use crate::access::Principal;
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

impl App {
    /// Everything the built-in dashboard shows: the cluster, every member's health as it
    /// answered just now (with its round trip and clock offset), the tags with this node's
    /// buffers and served counts, its totals and its recent error answers. A scoped `monitor`
    /// token sees the tags its patterns match, no obfuscated tag, and no recent errors (their
    /// messages name other tenants' tags); the totals are over what it sees. With a `prefix`,
    /// only the tags that start with it (the page's search).
    pub async fn dashboard(&self, viewer: &Principal, prefix: &str) -> Dashboard {
        let root = matches!(viewer, Principal::Root(_));
        let health = self.health();
        let cluster = self.raft.cluster_status(health.clone());
        let probes = cluster.members.iter().map(|m| {
            let own = health.clone();
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
                if m.node_id == self.raft.node_id() {
                    (view.health, view.rtt_ms, view.clock_offset_ms) = (Some(own), Some(0), Some(0));
                    return view;
                }
                match self.probe(m.node_id, &m.addr).await {
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
        let records = self.raft.state().tags_page(prefix, None, usize::MAX, |tag, r| {
            r.archived_ms.is_none()
                && (root
                    || (viewer.sees_tag(tag)
                        && !matches!(r.profile, leaf_raft_store::profile::StoredProfile::Obfuscated { .. })))
        });
        let tags_total = records.len();
        let caches: HashMap<String, leaf_api::types::CacheEntry> =
            self.cache().into_iter().map(|e| (e.tag.clone(), e)).collect();
        let mut tags: Vec<TagView> = records
            .into_iter()
            .map(|(tag, record)| {
                // From the tag's handle, not /metrics: an obfuscated tag has no public series.
                // Peeked, not loaded: a tag this node never served stays cold.
                let served = self.tags.peek(&tag).map_or(0, |h| h.served());
                let cache = caches.get(&tag).cloned();
                TagView { info: tag_info(tag, record), cache, served }
            })
            .collect();
        // Over every tag the viewer sees, whatever the search (unloaded tags served nothing
        // here): the page's rate chart must not jump when the search changes.
        let segment_ids = self
            .tags
            .loaded()
            .iter()
            .filter(|h| root || (viewer.sees_tag(h.tag()) && !matches!(h.serve(), crate::tags::ServeAs::Obfuscated(_))))
            .map(|h| h.served())
            .sum();
        tags.sort_by(|a, b| b.served.cmp(&a.served).then_with(|| a.info.tag.cmp(&b.info.tag)));
        tags.truncate(MAX_DASHBOARD_TAGS);
        Dashboard {
            node_id: self.raft.node_id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            now_ms: self.clock.now_ms(),
            uptime_secs: self.started.elapsed().as_secs(),
            cluster,
            nodes,
            tags,
            tags_total,
            totals: Totals {
                segment_ids,
                snowflake_ids: self.metrics.snowflake_served_total(),
                errors: self.metrics.errors_total(),
            },
            recent_errors: if root { self.recent_errors.newest_first() } else { Vec::new() },
        }
    }

    /// Asks member `node_id` at `addr` for its health; the answer with its clock sample, or why
    /// it cannot be shown.
    async fn probe(&self, node_id: u64, addr: &str) -> Result<(NodeProbe, clock_check::Sample), String> {
        let before = self.clock.now_ms();
        let probe: NodeProbe = self
            .raft
            .call_peer(node_id, addr, PATH_NODE_HEALTH, &(), PROBE_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let after = self.clock.now_ms();
        if probe.health.node_id != node_id {
            return Err(format!("{addr} answered as node {}, not {node_id}", probe.health.node_id));
        }
        let sample = clock_check::sample(before, probe.now_ms, after, PROBE_TIMEOUT)?;
        Ok((probe, sample))
    }
}
