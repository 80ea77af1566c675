//! The dashboard's data (`GET /admin/dashboard`, the `/ui` page): the cluster as this node has
//! applied it, and each member's health as it answers over the internal RPC
//! ([`PATH_NODE_HEALTH`], concurrently, [`PROBE_TIMEOUT`] each); an answer is checked (it must
//! come from the member asked, within the timeout, with a sane clock) before it is shown.
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use leaf_api::dashboard::{
    BlockView, Dashboard, NodeView, RegionHere, RegionView, TagView, Totals, MAX_DASHBOARD_TAGS,
};
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
        let (tags, tags_total) = self.dashboard_tags(viewer, prefix);
        // Over every tag the viewer sees, whatever the search (unloaded tags served nothing
        // here): the page's rate chart must not jump when the search changes.
        let segment_ids = self
            .tags
            .loaded()
            .iter()
            .filter(|h| root || (viewer.sees_tag(h.tag()) && !matches!(h.serve(), crate::tags::ServeAs::Obfuscated(_))))
            .map(|h| h.served())
            .sum();
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
            region: self.dashboard_region(viewer),
        }
    }

    /// What this cluster holds of regions, for `viewer` (a scoped one sees the blocks and homes
    /// of the tags its patterns match, none of an obfuscated tag); `None` on a cluster that is
    /// neither a global tier nor a region.
    fn dashboard_region(&self, viewer: &Principal) -> Option<RegionView> {
        let root = matches!(viewer, Principal::Root(_));
        let (here, registry, mut blocks, homes, homes_total) = self.raft.state().with_state(|s| {
            let r = &s.regions;
            if r.here.is_none() && r.registry.is_empty() && r.homes.is_empty() {
                return None;
            }
            let shown = |tag: &str| {
                root || (viewer.sees_tag(tag)
                    && s.tags.get(tag).is_some_and(|t| {
                        !matches!(t.profile(), leaf_raft_store::profile::StoredProfile::Obfuscated { .. })
                    }))
            };
            let here = r.here.as_ref().map(|i| RegionHere {
                name: i.name.clone(),
                id: i.id,
                first_worker: i.first_worker,
                last_worker: i.last_worker,
            });
            let registry: Vec<_> =
                r.registry.iter().map(|(name, rec)| super::regions::region_info(name.clone(), rec.clone())).collect();
            let blocks: Vec<(String, i64, usize)> = r
                .blocks
                .iter()
                .filter(|(tag, _)| shown(tag))
                .map(|(tag, b)| {
                    let max_id = s.tags.get(tag.as_str()).map_or(b.end, |t| t.max_id);
                    (tag.clone(), b.remaining(max_id), b.queued.len())
                })
                .collect();
            let mut homes_total = 0;
            let mut homes = Vec::new();
            for (tag, home) in r.homes.iter().filter(|(tag, _)| shown(tag)) {
                homes_total += 1;
                if homes.len() < MAX_DASHBOARD_TAGS {
                    homes.push(super::homes::home_info(tag.clone(), home.clone()));
                }
            }
            Some((here, registry, blocks, homes, homes_total))
        })?;
        let blocks_total = blocks.len();
        let runway = |tag: &str, left: i64| {
            let rate = self.forecasts.tag(tag).and_then(|f| f.rate_per_sec).filter(|r| *r > 0.0)?;
            Some(left as f64 / rate)
        };
        let mut views: Vec<BlockView> = blocks
            .drain(..)
            .map(|(tag, remaining, queued)| BlockView { runway_secs: runway(&tag, remaining), tag, remaining, queued })
            .collect();
        // Shortest runway first; tags without a rate after, by name (the map's order).
        views.sort_by(|a, b| match (a.runway_secs, b.runway_secs) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.tag.cmp(&b.tag),
        });
        views.truncate(MAX_DASHBOARD_TAGS);
        Some(RegionView { here, registry, blocks: views, blocks_total, homes, homes_total })
    }

    /// The tags the dashboard lists for `viewer` under `prefix`, busiest first then by name,
    /// at most [`MAX_DASHBOARD_TAGS`], and how many it sees in all. Its cost follows the
    /// tags this node holds loaded and the page, not the tag count: the busy ones come from
    /// the loaded handles, the rest (served nothing here) from the state in name order, and
    /// the total is counted without copying a record. Archived tags are not listed.
    fn dashboard_tags(&self, viewer: &Principal, prefix: &str) -> (Vec<TagView>, usize) {
        let root = matches!(viewer, Principal::Root(_));
        let shown = |tag: &str, r: &leaf_raft_store::TagRecord| {
            r.archived_ms().is_none()
                && (root
                    || (viewer.sees_tag(tag)
                        && !matches!(r.profile(), leaf_raft_store::profile::StoredProfile::Obfuscated { .. })))
        };
        let state = self.raft.state();
        let busy: Vec<_> =
            self.tags.loaded().into_iter().filter(|h| h.tag().starts_with(prefix) && h.served() > 0).collect();
        let (mut picked, total) = state.with_state(|s| {
            let picked: Vec<(u64, String, leaf_raft_store::TagRecord)> = busy
                .iter()
                .filter_map(|h| {
                    s.tags
                        .get(h.tag())
                        .filter(|r| shown(h.tag(), r))
                        .map(|r| (h.served(), h.tag().to_string(), r.clone()))
                })
                .collect();
            let total = s
                .tags
                .range::<str, _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded))
                .take_while(|(t, _)| t.starts_with(prefix))
                .filter(|(t, r)| shown(t, r))
                .count();
            (picked, total)
        });
        picked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        picked.truncate(MAX_DASHBOARD_TAGS);
        let listed: HashSet<String> = picked.iter().map(|(_, t, _)| t.clone()).collect();
        let idle = MAX_DASHBOARD_TAGS - picked.len();
        let rest = state.tags_page(prefix, None, idle, |t, r| shown(t, r) && !listed.contains(t));
        let caches: HashMap<String, leaf_api::types::CacheEntry> =
            self.cache().into_iter().map(|e| (e.tag.clone(), e)).collect();
        let tags = picked
            .into_iter()
            .chain(rest.into_iter().map(|(tag, record)| (0, tag, record)))
            .map(|(served, tag, record)| {
                // Peeked, not loaded: a tag this node never served stays cold. From the
                // handle, not /metrics: an obfuscated tag has no public series.
                let served = if served > 0 { served } else { self.tags.peek(&tag).map_or(0, |h| h.served()) };
                let cache = caches.get(&tag).cloned();
                TagView { info: tag_info(tag, record), cache, served }
            })
            .collect();
        (tags, total)
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
