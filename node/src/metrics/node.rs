//! The gauges a scrape reads from the node's state at that moment ([`NodeFacts`]): quorum
//! contact, replication lag per follower (on the leader), membership, tags per profile, tokens
//! and audit records, the snowflake worker (serving, worker ID, lease, high-water mark ahead of
//! the clock), peer clock offsets and the build. Series that do not apply are left out (no
//! replication lag on a follower, no snowflake series when it is disabled, no offset for a peer
//! that did not answer), so alert rules see absence, not a made-up zero.
use std::sync::{Arc, Mutex};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;

/// The snowflake worker as a scrape sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SnowflakeFacts {
    pub serving: bool,
    /// `-1` when the node holds none.
    pub worker_id: i64,
    pub lease_remaining_seconds: Option<f64>,
    /// The durable time high-water mark minus this node's clock.
    pub high_water_ahead_seconds: Option<f64>,
}

/// What the node gauges show; set at each scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFacts {
    /// Seconds since this node last confirmed a quorum behind its leader; `None`: unknown
    /// (shown as `+Inf`: no leader known, or never confirmed).
    pub quorum_contact_age_seconds: Option<f64>,
    /// `(follower, entries behind)`, on the leader only.
    pub replication_lag: Vec<(u64, u64)>,
    pub voters: u64,
    pub learners: u64,
    /// `(profile, tags)` for every profile.
    pub tags_by_profile: Vec<(&'static str, u64)>,
    pub tokens: u64,
    pub audit_records: u64,
    /// `None` when snowflake mode is disabled.
    pub snowflake: Option<SnowflakeFacts>,
    /// Size of `snowflake.worker_ids`.
    pub worker_ids: u64,
    /// `(peer, its clock minus this node's in seconds)` for the peers that answered the last
    /// round of [`crate::clock_watch`].
    pub peer_clock_offsets: Vec<(u64, f64)>,
    /// The state's restore generation (0: never restored).
    pub restore_generation: u32,
    /// Unix seconds of this node's last scheduled backup (or the newest file in `backup.dir`
    /// at start); `None`: none known (the series is left out).
    pub backup_last_success_seconds: Option<f64>,
    pub backup_last_bytes: u64,
    pub backup_last_duration_seconds: f64,
    pub backup_failures: u64,
}

/// Encodes the last [`NodeFacts`] set with [`NodeGauges::set`].
#[derive(Debug, Clone, Default)]
pub struct NodeGauges(Arc<Mutex<NodeFacts>>);

impl NodeGauges {
    pub fn set(&self, facts: NodeFacts) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = facts;
    }
}

fn gauge<T: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: T,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(v);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

/// A gauge family with one label: a series per `(value, number)` (just the family's help and
/// type when there is none).
fn labelled<T: EncodeGaugeValue + Copy>(
    encoder: &mut DescriptorEncoder,
    (name, help, label): (&str, &str, &str),
    series: &[(String, T)],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, prometheus_client::metrics::MetricType::Gauge)?;
    for (value, v) in series {
        let labels = [(label, value.as_str())];
        ConstGauge::new(*v).encode(family.encode_family(&labels)?)?;
    }
    Ok(())
}

impl Collector for NodeGauges {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let f = self.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
        gauge(
            &mut e,
            "raft_quorum_contact_age_seconds",
            "Seconds since this node last confirmed that a quorum follows its leader (the leader: its last quorum \
             acknowledgement; a follower: the leader's, as probed); +Inf when unknown (no leader, or never confirmed)",
            f.quorum_contact_age_seconds.unwrap_or(f64::INFINITY),
        )?;
        let lag: Vec<(String, i64)> = f
            .replication_lag
            .iter()
            .map(|(id, lag)| (id.to_string(), i64::try_from(*lag).unwrap_or(i64::MAX)))
            .collect();
        labelled(
            &mut e,
            (
                "raft_replication_lag_entries",
                "Log entries each other member is behind the leader's last entry (on the leader only)",
                "follower",
            ),
            &lag,
        )?;
        let members = [("voter".to_string(), f.voters as i64), ("learner".to_string(), f.learners as i64)];
        labelled(&mut e, ("raft_members", "Members of the current membership, by role", "role"), &members)?;
        let profiles: Vec<(String, i64)> = f.tags_by_profile.iter().map(|(p, n)| (p.to_string(), *n as i64)).collect();
        labelled(&mut e, ("tags_by_profile", "Tags in the replicated state, by profile", "profile"), &profiles)?;
        gauge(&mut e, "tokens", "Scoped tokens in the replicated state", f.tokens as i64)?;
        gauge(
            &mut e,
            "restore_generation",
            "How many times the cluster's state was restored from a backup (leaf restore); 0: never",
            i64::from(f.restore_generation),
        )?;
        if let Some(at) = f.backup_last_success_seconds {
            gauge(
                &mut e,
                "backup_last_success_timestamp_seconds",
                "Unix time of the last scheduled backup this node wrote (or the newest in backup.dir at start)",
                at,
            )?;
            gauge(&mut e, "backup_last_bytes", "Size of that backup file", f.backup_last_bytes as i64)?;
            gauge(&mut e, "backup_last_duration_seconds", "How long that backup took", f.backup_last_duration_seconds)?;
        }
        gauge(
            &mut e,
            "backup_failures",
            "Scheduled backups that failed on this node since it started",
            f.backup_failures as i64,
        )?;
        gauge(&mut e, "audit_records", "Records the audit trail holds (bounded by [audit])", f.audit_records as i64)?;
        gauge(
            &mut e,
            "snowflake_worker_ids",
            "Worker IDs of snowflake.worker_ids (the range's size)",
            f.worker_ids as i64,
        )?;
        if let Some(s) = &f.snowflake {
            let serving = i64::from(s.serving);
            gauge(
                &mut e,
                "snowflake_serving",
                "1 when this node issues snowflake IDs (absent when disabled)",
                serving,
            )?;
            gauge(
                &mut e,
                "snowflake_worker_id",
                "This node's snowflake worker ID, -1 when it holds none",
                s.worker_id,
            )?;
            if let Some(v) = s.lease_remaining_seconds {
                gauge(&mut e, "snowflake_lease_remaining_seconds", "Time left on this node's worker-ID lease", v)?;
            }
            if let Some(v) = s.high_water_ahead_seconds {
                gauge(
                    &mut e,
                    "snowflake_high_water_ahead_seconds",
                    "The durable time high-water mark minus this node's clock: how far IDs may run ahead of the clock",
                    v,
                )?;
            }
        }
        let offsets: Vec<(String, f64)> = f.peer_clock_offsets.iter().map(|(id, s)| (id.to_string(), *s)).collect();
        labelled(
            &mut e,
            (
                "peer_clock_offset_seconds",
                "Each peer's clock minus this node's, corrected by half the round trip, measured every 15 s (absent for \
                 a peer that did not answer)",
                "peer",
            ),
            &offsets,
        )?;
        labelled(
            &mut e,
            ("build_info", "The release of this node (always 1)", "version"),
            &[(env!("CARGO_PKG_VERSION").to_string(), 1i64)],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(g: &NodeGauges) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.sub_registry_with_prefix("leaf").register_collector(Box::new(g.clone()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        crate::metrics::exposition::spell_infinities(text)
    }

    #[test]
    fn series_that_do_not_apply_are_absent() {
        let g = NodeGauges::default();
        let text = render(&g);
        assert!(text.contains("leaf_raft_quorum_contact_age_seconds +Inf"), "{text}");
        for absent in [
            "leaf_raft_replication_lag_entries{",
            "leaf_snowflake_serving",
            "leaf_peer_clock_offset_seconds{",
            "leaf_backup_last_success_timestamp_seconds",
        ] {
            assert!(!text.contains(absent), "{absent}: {text}");
        }
        g.set(NodeFacts {
            quorum_contact_age_seconds: Some(0.25),
            replication_lag: vec![(2, 0), (3, 17)],
            voters: 3,
            learners: 1,
            tags_by_profile: vec![("segment", 4), ("daily", 1)],
            tokens: 2,
            audit_records: 9,
            snowflake: Some(SnowflakeFacts {
                serving: true,
                worker_id: 5,
                lease_remaining_seconds: Some(59.5),
                high_water_ahead_seconds: Some(2.75),
            }),
            worker_ids: 1024,
            peer_clock_offsets: vec![(2, -0.004)],
            restore_generation: 2,
            backup_last_success_seconds: Some(1_800_000_000.5),
            backup_last_bytes: 4096,
            backup_last_duration_seconds: 0.5,
            backup_failures: 1,
        });
        let text = render(&g);
        for line in [
            "leaf_raft_quorum_contact_age_seconds 0.25",
            "leaf_raft_replication_lag_entries{follower=\"3\"} 17",
            "leaf_raft_members{role=\"learner\"} 1",
            "leaf_tags_by_profile{profile=\"daily\"} 1",
            "leaf_tokens 2",
            "leaf_audit_records 9",
            "leaf_snowflake_serving 1",
            "leaf_snowflake_worker_id 5",
            "leaf_snowflake_lease_remaining_seconds 59.5",
            "leaf_snowflake_high_water_ahead_seconds 2.75",
            "leaf_snowflake_worker_ids 1024",
            "leaf_peer_clock_offset_seconds{peer=\"2\"} -0.004",
            "leaf_restore_generation 2",
            "leaf_backup_last_success_timestamp_seconds 1800000000.5",
            "leaf_backup_last_bytes 4096",
            "leaf_backup_failures 1",
            &format!("leaf_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION")),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }
}
