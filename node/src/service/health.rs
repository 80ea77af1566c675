//! What the node says about itself: readiness (`/health`, gRPC health), Leaf's `/cache` view of
//! this node's buffers, and the facts the node gauges show at each metrics scrape.
use std::sync::atomic::Ordering;

use leaf_api::profile::Profile;
use leaf_api::types::{CacheEntry, Health, MemberRole, SnowflakeHealth, SnowflakeState};

use super::App;
use crate::access::Principal;
use crate::clock::Clock;
use crate::metrics::{Format, NodeFacts, SnowflakeFacts};

/// Which readiness a caller asks about.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Readiness {
    /// Segment mode and snowflake mode.
    #[default]
    All,
    /// Segment mode only.
    Segment,
    /// Snowflake mode only.
    Snowflake,
}

/// Whether `h` is ready in the sense of `which`.
pub fn is_ready(h: &Health, which: Readiness) -> bool {
    match which {
        Readiness::All => h.ready,
        Readiness::Segment => h.segment_ready,
        Readiness::Snowflake => snowflake_ready(&h.snowflake),
    }
}

/// Snowflake readiness: serving, or disabled by configuration (nothing to wait for).
pub fn snowflake_ready(h: &SnowflakeHealth) -> bool {
    matches!(h.state, SnowflakeState::Serving | SnowflakeState::Disabled)
}

impl App {
    /// This node's readiness in both modes, with the reason when it is not ready.
    pub fn health(&self) -> Health {
        let s = self.raft.status();
        let not_ready = match &s.not_ready {
            Some(why) => Some(why.to_string()),
            None if !self.bootstrapped.load(Ordering::Acquire) => Some("creating bootstrap tags".to_string()),
            None => None,
        };
        let mut snowflake = self.snowflake.health();
        snowflake.forecast = Some(self.forecasts.snowflake(self.clock.now_ms()));
        let segment_ready = not_ready.is_none();
        let reason = not_ready.or_else(|| {
            (!snowflake_ready(&snowflake)).then(|| {
                format!("snowflake {}: {}", snowflake.state, snowflake.reason.as_deref().unwrap_or("not serving yet"))
            })
        });
        Health {
            ready: segment_ready && snowflake_ready(&snowflake),
            segment_ready,
            node_id: s.node_id,
            leader_id: s.leader_id,
            term: s.term,
            last_applied_index: s.last_applied_index,
            quorum_ack_age_ms: s.quorum_ack_age_ms,
            reason,
            snowflake,
            restore_generation: self.raft.state().with_state(|s| s.lineage.generation),
        }
    }

    /// This node's per-tag buffers, each with the tag's exhaustion forecast (the admin view).
    pub fn cache(&self) -> Vec<CacheEntry> {
        self.cache_of(|_| true)
    }

    /// A page of Leaf's `/cache`, in tag order, as `viewer` may read it (none: a public
    /// endpoint): [`App::cache`] without obfuscated tags, whose segment positions would count their IDs, and only the
    /// tags a scoped viewer's patterns match.
    pub fn public_cache(&self, viewer: Option<&Principal>, page: &super::validate::Page) -> Vec<CacheEntry> {
        let loaded = self.tags.loaded();
        let mut shown: Vec<_> = loaded
            .iter()
            .filter(|h| {
                page.admits(h.tag())
                    && !matches!(h.serve(), crate::tags::ServeAs::Obfuscated(_))
                    && viewer.is_none_or(|p| p.sees_tag(h.tag()))
            })
            .collect();
        // `loaded` is in tag order already.
        shown.truncate(page.limit);
        shown.into_iter().map(|h| self.cache_entry(h)).collect()
    }

    /// One loaded tag's buffers and forecast.
    fn cache_entry(&self, h: &crate::tags::TagHandle) -> CacheEntry {
        let mut e = h.inspect();
        e.forecast = self.forecasts.tag(&e.tag);
        e
    }

    fn cache_of(&self, shown: impl Fn(&crate::tags::TagHandle) -> bool) -> Vec<CacheEntry> {
        let loaded = self.tags.loaded();
        loaded.iter().filter(|h| shown(h)).map(|h| self.cache_entry(h)).collect()
    }

    /// The metrics exposition in `format`, with the gauges set for this scrape, as `viewer`
    /// may read it: a scoped token sees the series of its tags and its own token only
    /// ([`crate::metrics::scope`]).
    pub fn render_metrics(&self, format: Format, viewer: Option<&Principal>) -> String {
        let sf = self.forecasts.snowflake(self.clock.now_ms());
        self.metrics.set_snowflake_forecast(sf.epoch_years_left, sf.free_worker_ids);
        let status = self.raft.status();
        let facts = self.node_facts(&status);
        let text = self.metrics.render(&status, self.raft.state().tag_count(), facts, format);
        match viewer {
            Some(p @ Principal::Token { id, .. }) => {
                crate::metrics::scope::scoped(&text, |t| p.sees_tag(t), &id.to_string())
            }
            _ => text,
        }
    }

    /// What the node gauges show at this scrape (see [`crate::metrics::node`]).
    fn node_facts(&self, status: &crate::raft::RaftStatus) -> NodeFacts {
        let cluster = self.raft.cluster_status(self.health());
        let me = self.raft.node_id();
        let replication_lag = match (&cluster.replication, status.is_leader) {
            (Some(r), true) => r.iter().filter(|v| v.node_id != me).map(|v| (v.node_id, v.lag)).collect(),
            _ => Vec::new(),
        };
        let voters = cluster.members.iter().filter(|m| m.role == MemberRole::Voter).count() as u64;
        let learners = cluster.members.len() as u64 - voters;
        let state = self.raft.state();
        let (by_profile, audit_records) = state.with_state(|s| {
            let mut n = [0u64; Profile::ALL.len()];
            for r in s.tags.values() {
                n[r.profile().kind() as usize] += 1;
            }
            (n, s.audit.records.len() as u64)
        });
        let tags_by_profile = Profile::ALL.into_iter().map(|p| (p.as_str(), by_profile[p as usize])).collect();
        let h = &cluster.health.snowflake;
        let now_ms = self.clock.now_ms();
        let snowflake = (h.state != SnowflakeState::Disabled).then(|| SnowflakeFacts {
            serving: h.state == SnowflakeState::Serving,
            worker_id: h.worker_id.map_or(-1, i64::from),
            lease_remaining_seconds: h.lease_remaining_ms.map(|ms| ms as f64 / 1000.0),
            high_water_ahead_seconds: h.high_water_ms.map(|hw| hw.saturating_sub(now_ms) as f64 / 1000.0),
        });
        let backup = self.last_backup();
        NodeFacts {
            restore_generation: cluster.health.restore_generation,
            backup_last_success_seconds: backup.success_at,
            backup_last_bytes: backup.bytes,
            backup_last_duration_seconds: backup.seconds,
            backup_failures: backup.failures,
            quorum_contact_age_seconds: status.quorum_ack_age_ms.map(|ms| ms as f64 / 1000.0),
            replication_lag,
            voters,
            learners,
            tags_by_profile,
            tokens: state.tokens().len() as u64,
            audit_records,
            snowflake,
            worker_ids: self.config.snowflake.worker_ids.count() as u64,
            peer_clock_offsets: self.peer_clocks.offsets().iter().map(|(id, ms)| (*id, *ms as f64 / 1000.0)).collect(),
        }
    }
}
