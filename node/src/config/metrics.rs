//! `[metrics]`: how much of the per-tag detail `/metrics` shows.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The bound on per-tag series ([`crate::metrics::tag_series`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// Tags with their own series: the per-tag counters (`leaf_ids_served_total`,
    /// `leaf_segment_refills_total`, ...) show the tags this node served most, and the forecast
    /// gauges the tags nearest to exhaustion, this many of each; every tag counts in
    /// `leaf_ids_served_by_profile_total`. From 1 to 100000; default `1000`.
    pub max_tag_series: usize,
    /// Whether `/metrics` shows the allocator's heap in use and free
    /// (`leaf_heap_in_use_bytes`, `leaf_heap_free_bytes`), to tell live memory from memory
    /// freed but held. For diagnosis: glibc (the allocator of a dynamic build) counts them by
    /// walking its free lists under its locks, which on a fragmented heap adds about 18 ms to a
    /// scrape and holds up requests' allocations meanwhile; jemalloc (the static build's) reads
    /// its own counters. Default `false`.
    pub heap_stats: bool,
}

/// Default of `metrics.max_tag_series`.
pub const DEFAULT_MAX_TAG_SERIES: usize = 1000;

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig { max_tag_series: DEFAULT_MAX_TAG_SERIES, heap_stats: false }
    }
}

impl MetricsConfig {
    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if !(1..=100_000).contains(&self.max_tag_series) {
            errs.push("metrics.max_tag_series must be from 1 to 100000".to_string());
        }
    }
}
