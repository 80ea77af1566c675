//! The reservation task: once a second, on every node, the gauges of open and overdue
//! reservations and of the fullest series; on the leader, a void of each reservation past its deadline (reason
//! `expired`) or of a period its series has closed under `on_period_close: void` (reason
//! `period closed`), recorded as the leader node's. The leader's clock decides what is due,
//! and apply checks it again against the entry's stamped time, so a list read just before a
//! leader change is harmless.
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::raft::RaftNode;

/// How often the task looks.
pub const TICK: Duration = Duration::from_secs(1);

/// Runs until `shutdown` says so.
pub async fn run(raft: RaftNode, metrics: Arc<Metrics>, shutdown: watch::Receiver<bool>) {
    let mut tick = crate::ticker::Ticker::new(TICK, shutdown);
    while tick.next().await {
        let now = raft.clock().now_ms();
        let found = raft.state().due_reservations(now, leaf_raft_store::MAX_NUMBER_ASKS);
        metrics.gapless().reservations(found.open, found.overdue);
        metrics.gapless().series_fill(&raft.state().fullest_series(crate::metrics::gapless::FULLEST_SERIES));
        if found.due.is_empty() {
            continue;
        }
        match crate::gapless::lapse(&raft, found.due).await {
            Ok(results) => {
                for r in results.iter().flatten().filter(|r| !r.replayed) {
                    if let Some((cause, _)) = &r.void {
                        metrics.gapless().settled(super::gapless::void_metric(*cause));
                    }
                }
                // The gauges as they are now, not a second later.
                let found = raft.state().due_reservations(now, leaf_raft_store::MAX_NUMBER_ASKS);
                metrics.gapless().reservations(found.open, found.overdue);
            }
            // A leader change or a lost quorum: the next tick tries again, on whoever leads.
            Err(e) => tracing::debug!(error = %e, "voiding due reservations"),
        }
    }
}
