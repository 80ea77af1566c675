//! `[segment]`: how segment mode sizes the ranges it hands out and how long a request waits
//! for one.
use leaf_api::tag::MAX_STEP;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Segment-mode behaviour of every tag on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentConfig {
    /// Cap of the dynamic step when it doubles (Leaf's `MAX_STEP`). A tag whose stored step is
    /// larger uses its stored step. From 1 to 1000000000; default `1000000`.
    pub max_step: i64,
    /// How long a request waits for a committed segment when both buffers are empty, before a 503
    /// `segments_not_ready`. From 1 to 60000; default `2000` ms.
    pub wait_timeout_ms: u64,
    /// A refill sooner than this after the previous one doubles the step (Leaf: 15 min). At most
    /// `halve_after_secs`; default `900` s.
    pub double_below_secs: u64,
    /// A refill this long or longer after the previous one halves the step, never below the
    /// stored step (Leaf: 30 min). Default `1800` s.
    pub halve_after_secs: u64,
    /// A loaded tag that has handed out no ID on this node for this long is unloaded: its
    /// buffered IDs are dropped (never handed out: a gap, as after a restart), its actor stops
    /// and its series leave `/metrics`, so memory follows the tags in use, not the tags that
    /// exist. Its next request loads it again (one segment commit). 0 keeps every tag loaded.
    /// At most 2592000 (30 days); default `3600` s.
    pub idle_unload_secs: u64,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig {
            max_step: 1_000_000,
            wait_timeout_ms: 2000,
            double_below_secs: 900,
            halve_after_secs: 1800,
            idle_unload_secs: 3600,
        }
    }
}

impl SegmentConfig {
    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if !(1..=MAX_STEP).contains(&self.max_step) {
            errs.push(format!("segment.max_step must be from 1 to {MAX_STEP}"));
        }
        if !(1..=60_000).contains(&self.wait_timeout_ms) {
            errs.push("segment.wait_timeout_ms must be from 1 to 60000".to_string());
        }
        if self.idle_unload_secs > 2_592_000 {
            errs.push("segment.idle_unload_secs must be at most 2592000 (30 days)".to_string());
        }
        if self.double_below_secs > self.halve_after_secs {
            errs.push("segment.double_below_secs must not exceed segment.halve_after_secs".to_string());
        }
    }
}
