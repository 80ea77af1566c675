//! Gapless series' metrics: `leaf_gapless_issues{outcome}` (issued: a new number; replayed: a
//! key's number again; refused: an error answered) and `leaf_gapless_issue_seconds`, the time
//! from the request to its committed answer, on the node that took the request.
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// How an issue ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueOutcome {
    Issued,
    Replayed,
    Refused,
}

impl IssueOutcome {
    fn label(self) -> &'static str {
        match self {
            IssueOutcome::Issued => "issued",
            IssueOutcome::Replayed => "replayed",
            IssueOutcome::Refused => "refused",
        }
    }
}

/// The gapless counters and the latency histogram (cheap to clone: shared series).
#[derive(Clone)]
pub struct GaplessMetrics {
    issues: Family<OutcomeLabels, Counter>,
    seconds: Histogram,
}

impl Default for GaplessMetrics {
    fn default() -> Self {
        GaplessMetrics { issues: Family::default(), seconds: Histogram::new(exponential_buckets(0.0002, 2.0, 16)) }
    }
}

impl GaplessMetrics {
    /// Registers the series (every outcome from 0).
    pub(super) fn register(&self, registry: &mut Registry) {
        for o in [IssueOutcome::Issued, IssueOutcome::Replayed, IssueOutcome::Refused] {
            let _ = self.issues.get_or_create(&OutcomeLabels { outcome: o.label() });
        }
        registry.register(
            "gapless_issues",
            "Issues of gapless numbers answered by this node, by outcome (issued: a new number; replayed: the \
             number a key had; refused: an error)",
            self.issues.clone(),
        );
        registry.register(
            "gapless_issue_seconds",
            "Time from an issue request to its committed answer on the node that took it",
            self.seconds.clone(),
        );
    }

    /// Counts an issue that ended as `outcome` after `took`.
    pub fn observe(&self, outcome: IssueOutcome, took: Duration) {
        self.issues.get_or_create(&OutcomeLabels { outcome: outcome.label() }).inc();
        if outcome != IssueOutcome::Refused {
            self.seconds.observe(took.as_secs_f64());
        }
    }
}
