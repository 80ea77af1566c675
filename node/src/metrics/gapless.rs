//! Gapless series' metrics: `leaf_gapless_issues{outcome}` (issued: a new number; replayed: a
//! key's number again; refused: an error answered) and `leaf_gapless_issue_seconds`, the time
//! from the request to its committed answer, on the node that took the request (reservations
//! count as issues); `leaf_gapless_settlements{outcome}` (confirmed, voided by a caller,
//! expired, period_closed: by the leader); and the gauges `leaf_gapless_open_reservations` and
//! `leaf_gapless_overdue_reservations` (past their deadline, not yet voided), as this node's
//! state holds them; and `leaf_gapless_series_fill_ratio{tag}`, the numbers each of the
//! [`FULLEST_SERIES`] fullest series holds over its `max_numbers` (a bounded set of labels
//! however many series there are).
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::labels::{OutcomeLabels, TagLabels};

/// How many series `leaf_gapless_series_fill_ratio` shows: the fullest.
pub const FULLEST_SERIES: usize = 10;

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

/// How a reservation was settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    Confirmed,
    Voided,
    Expired,
    PeriodClosed,
}

impl Settlement {
    const ALL: [Settlement; 4] =
        [Settlement::Confirmed, Settlement::Voided, Settlement::Expired, Settlement::PeriodClosed];

    fn label(self) -> &'static str {
        match self {
            Settlement::Confirmed => "confirmed",
            Settlement::Voided => "voided",
            Settlement::Expired => "expired",
            Settlement::PeriodClosed => "period_closed",
        }
    }
}

/// The gapless counters, the latency histogram and the reservation gauges (cheap to clone:
/// shared series).
#[derive(Clone)]
pub struct GaplessMetrics {
    issues: Family<OutcomeLabels, Counter>,
    seconds: Histogram,
    settlements: Family<OutcomeLabels, Counter>,
    open: Gauge,
    overdue: Gauge,
    fill: Family<TagLabels, Gauge<f64, AtomicU64>>,
}

impl Default for GaplessMetrics {
    fn default() -> Self {
        GaplessMetrics {
            issues: Family::default(),
            seconds: Histogram::new(exponential_buckets(0.0002, 2.0, 16)),
            settlements: Family::default(),
            open: Gauge::default(),
            overdue: Gauge::default(),
            fill: Family::default(),
        }
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
        for s in Settlement::ALL {
            let _ = self.settlements.get_or_create(&OutcomeLabels { outcome: s.label() });
        }
        registry.register(
            "gapless_settlements",
            "Reservations settled through this node (confirmed, voided by a caller; expired and period_closed by \
             the leader)",
            self.settlements.clone(),
        );
        registry.register(
            "gapless_open_reservations",
            "Gapless numbers reserved and not yet confirmed or voided, every series",
            self.open.clone(),
        );
        registry.register(
            "gapless_overdue_reservations",
            "Open reservations past their deadline (or of a period closed under on_period_close void) that the \
             leader has not voided yet",
            self.overdue.clone(),
        );
        registry.register(
            "gapless_series_fill_ratio",
            "Numbers a gapless series holds over its max_numbers, for the 10 fullest series: at 1 its issues are \
             refused (raise max_numbers, or let retain_periods drop old periods)",
            self.fill.clone(),
        );
    }

    /// Sets the fill of the fullest series: (tag, numbers held, max_numbers); the others'
    /// series go.
    pub fn series_fill(&self, fullest: &[(String, u64, u64)]) {
        self.fill.clear();
        for (tag, held, max) in fullest.iter().take(FULLEST_SERIES) {
            let ratio = *held as f64 / (*max).max(1) as f64;
            self.fill.get_or_create(&TagLabels { tag: tag.clone() }).set(ratio);
        }
    }

    /// Counts a reservation settled as `how`.
    pub fn settled(&self, how: Settlement) {
        self.settlements.get_or_create(&OutcomeLabels { outcome: how.label() }).inc();
    }

    /// Sets the reservation gauges.
    pub fn reservations(&self, open: u64, overdue: u64) {
        self.open.set(open.min(i64::MAX as u64) as i64);
        self.overdue.set(overdue.min(i64::MAX as u64) as i64);
    }

    /// Counts an issue that ended as `outcome` after `took`.
    pub fn observe(&self, outcome: IssueOutcome, took: Duration) {
        self.issues.get_or_create(&OutcomeLabels { outcome: outcome.label() }).inc();
        if outcome != IssueOutcome::Refused {
            self.seconds.observe(took.as_secs_f64());
        }
    }
}
