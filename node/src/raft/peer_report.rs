//! How a peer that Raft's calls cannot reach is reported. openraft 0.9 logs every failed call
//! to a peer at ERROR, at every retry (`cli::serve` leaves those lines out): a follower that
//! restarts would page an operator for nothing. Here a peer is reported at WARN once as it
//! becomes unreachable, then at most every [`PEER_REPORT_EVERY`] while it stays so, and at INFO
//! when it answers again. A peer that answers with an error (a Raft error of its own) answered.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leaf_raft_store::types::NodeId;
use openraft::network::RPCTypes;

/// How often a peer that stays unreachable is reported again.
pub const PEER_REPORT_EVERY: Duration = Duration::from_secs(30);

/// The peers' reports, shared by every connection Raft opens to them.
#[derive(Clone, Default)]
pub struct PeerReports(Arc<Mutex<HashMap<NodeId, Failing>>>);

/// A peer's calls failing since `since`.
#[derive(Debug, Clone, Copy)]
struct Failing {
    since: Instant,
    calls: u64,
    reported: Instant,
}

/// What a call's outcome changed, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Report {
    /// Nothing to say.
    Quiet,
    /// The first failure after an answer.
    Unreachable,
    /// Failing still, `calls` failed calls over `for_secs`.
    Still { calls: u64, for_secs: u64 },
    /// An answer after `calls` failed calls over `for_secs`.
    Back { calls: u64, for_secs: u64 },
}

impl PeerReports {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, Failing>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A call to `peer` failed at `now`.
    pub(super) fn failed(&self, peer: NodeId, now: Instant) -> Report {
        let mut failing = self.lock();
        match failing.get_mut(&peer) {
            None => {
                failing.insert(peer, Failing { since: now, calls: 1, reported: now });
                Report::Unreachable
            }
            Some(f) => {
                f.calls += 1;
                if now.saturating_duration_since(f.reported) < PEER_REPORT_EVERY {
                    return Report::Quiet;
                }
                f.reported = now;
                Report::Still { calls: f.calls, for_secs: now.saturating_duration_since(f.since).as_secs() }
            }
        }
    }

    /// `peer` answered at `now`.
    pub(super) fn answered(&self, peer: NodeId, now: Instant) -> Report {
        // Most calls: nothing was failing, and the map is empty.
        let mut failing = self.lock();
        match failing.remove(&peer) {
            None => Report::Quiet,
            Some(f) => Report::Back { calls: f.calls, for_secs: now.saturating_duration_since(f.since).as_secs() },
        }
    }

    /// [`Self::failed`] or [`Self::answered`] for a call of `what` to `peer` at `addr`, logged.
    pub(super) fn note(&self, peer: NodeId, addr: &str, what: RPCTypes, error: Option<&dyn std::fmt::Display>) {
        let now = Instant::now();
        match error {
            Some(error) => match self.failed(peer, now) {
                Report::Unreachable => {
                    tracing::warn!(peer, addr, call = %what, %error, "a Raft peer does not answer")
                }
                Report::Still { calls, for_secs } => {
                    tracing::warn!(peer, addr, call = %what, calls, for_secs, %error, "a Raft peer still does not answer")
                }
                _ => {}
            },
            None => {
                if let Report::Back { calls, for_secs } = self.answered(peer, now) {
                    tracing::info!(peer, addr, failed_calls = calls, for_secs, "a Raft peer answers again");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_peer_is_reported_once_then_every_period_then_back() {
        let reports = PeerReports::default();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert_eq!(reports.answered(2, at(0)), Report::Quiet);
        assert_eq!(reports.failed(2, at(10)), Report::Unreachable);
        // Retries within the period: quiet; another peer is reported on its own.
        for ms in [60, 500, 29_000] {
            assert_eq!(reports.failed(2, at(ms)), Report::Quiet);
        }
        assert_eq!(reports.failed(3, at(29_500)), Report::Unreachable);
        assert_eq!(reports.failed(2, at(30_010)), Report::Still { calls: 5, for_secs: 30 });
        assert_eq!(reports.failed(2, at(30_020)), Report::Quiet);
        assert_eq!(reports.answered(2, at(31_010)), Report::Back { calls: 6, for_secs: 31 });
        // Answered: the next failure is news again.
        assert_eq!(reports.answered(2, at(31_020)), Report::Quiet);
        assert_eq!(reports.failed(2, at(31_030)), Report::Unreachable);
    }
}
