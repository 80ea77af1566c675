//! A region's metrics, set by its leader's keeper ([`crate::regions::keeper`]):
//! - `leaf_region_adopted`: 1 once this cluster adopted its region (0 before that, and on a
//!   node of no region);
//! - `leaf_region_runway_seconds{tag}`: how long the IDs left in a tag's blocks last at its
//!   rate, for the [`SHORTEST_RUNWAYS`] tags with the shortest runway among those in use (a
//!   bounded set of labels however many tags there are). Only the leader sets them; a follower
//!   shows none;
//! - `leaf_region_block_grants_total{outcome}`: blocks asked of the global tier (granted: adopted;
//!   failed: the global tier did not answer with one, or its adoption failed).
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::labels::{OutcomeLabels, TagLabels};

/// How many tags `leaf_region_runway_seconds` shows: the shortest runways.
pub const SHORTEST_RUNWAYS: usize = 20;

/// A region's metrics (see the module's docs).
#[derive(Default)]
pub struct RegionMetrics {
    adopted: Gauge,
    runway: Family<TagLabels, Gauge<f64, AtomicU64>>,
    grants: Family<OutcomeLabels, Counter>,
}

impl RegionMetrics {
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "region_adopted",
            "1 once this cluster adopted its region from the global tier ([region])",
            self.adopted.clone(),
        );
        registry.register(
            "region_runway_seconds",
            "How long the IDs left in a tag's blocks last at its rate, for the 20 tags in use with the shortest \
             runway (the leader's view): falling under half of region.block_secs means refills from the global \
             tier fail",
            self.runway.clone(),
        );
        registry.register(
            "region_block_grants",
            "Blocks this region's leader asked the global tier for, by outcome (granted, failed)",
            self.grants.clone(),
        );
        for outcome in ["granted", "failed"] {
            let _ = self.grants.get_or_create(&OutcomeLabels { outcome });
        }
    }

    /// Whether this cluster adopted its region.
    pub fn set_adopted(&self, adopted: bool) {
        self.adopted.set(i64::from(adopted));
    }

    /// Counts a block asked for: granted and adopted, or not.
    pub fn grant(&self, granted: bool) {
        let outcome = if granted { "granted" } else { "failed" };
        self.grants.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Sets the runways (tag, seconds) of the tags in use; only the shortest stay shown.
    pub fn runways(&self, mut runways: Vec<(String, f64)>) {
        runways.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        self.runway.clear();
        for (tag, seconds) in runways.into_iter().take(SHORTEST_RUNWAYS) {
            self.runway.get_or_create(&TagLabels { tag }).set(seconds);
        }
    }

    /// Shows no runway (a follower: only the leader's view counts).
    pub fn clear_runways(&self) {
        self.runway.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_shortest_runways_are_shown() {
        let m = RegionMetrics::default();
        let mut registry = Registry::default();
        m.register(&mut registry);
        m.runways((0..30).map(|i| (format!("t{i:02}"), 100.0 - f64::from(i))).collect());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains("region_runway_seconds{tag=\"t29\"} 71"), "{out}");
        assert!(!out.contains("tag=\"t09\""), "the 10 longest are left out: {out}");
        assert_eq!(out.matches("region_runway_seconds{").count(), SHORTEST_RUNWAYS);
    }
}
