//! Snapshots and log purges by what the log holds, beside openraft's own by entry count.
//!
//! openraft builds a snapshot every `raft.snapshot_every` entries and keeps
//! `raft.keep_logs_after_snapshot` entries behind it. A batch of tags is one entry of up to
//! 5,000 tags, so a million tags are 200 entries: no snapshot is due, nothing is purged, and
//! a new node replays the whole batch log (62.6 s, with its RSS at 966 MB, measured) instead of
//! receiving a snapshot. This task weighs the applied entries ([`LogWeights`]: a batch counts
//! each tag) and, once a second:
//! - triggers a snapshot when the log since the last one weighs `snapshot_every` and at least
//!   half the tags the state holds (a growing state is snapshotted as it grows by half, so
//!   snapshot builds cost a bounded multiple of the final one);
//! - purges the log behind the snapshot down to `keep_logs_after_snapshot` worth of weight.
//!
//! With ordinary entries (weight 1) both rules are openraft's own, so nothing changes.
use std::time::Duration;

use leaf_raft_store::LogWeights;
use tokio::sync::watch;

use super::RaftNode;

/// How often the weights are looked at.
const TICK: Duration = Duration::from_secs(1);
/// How long a triggered build may run before a heavy log triggers another.
const REASK: Duration = Duration::from_secs(60);

/// Whether a snapshot is due: the log since the last one weighs `since`, the state holds `tags`.
fn snapshot_due(since: u64, every: u64, tags: u64) -> bool {
    since >= every.max(tags / 2)
}

/// Through which index to purge, if further than `purged`: the log behind the snapshot at
/// `snapshot` keeps `keep` worth of weight.
fn purge_to(weights: &LogWeights, snapshot: u64, purged: u64, keep: u64) -> Option<u64> {
    weights.purge_point(snapshot, keep).filter(|p| *p > purged)
}

impl RaftNode {
    /// Runs the snapshot and purge decisions above until `shutdown` says so.
    pub async fn compact_by_weight(self, every: u64, keep: u64, mut shutdown: watch::Receiver<bool>) {
        let weights = self.sm.log_weights();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // What was last asked of openraft, so that a build or purge under way is not asked
        // for again every tick: the snapshot index a build was triggered from (and when), and
        // the index a purge was asked through.
        let mut built_from: Option<(u64, tokio::time::Instant)> = None;
        let mut purge_asked = 0;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
            let m = self.raft.metrics().borrow().clone();
            if m.running_state.is_err() {
                return;
            }
            let snapshot = m.snapshot.map_or(0, |l| l.index);
            let purged = m.purged.map_or(0, |l| l.index);
            weights.forget_through(purged);
            let since = weights.since(snapshot);
            // A build triggered from this snapshot may still run: ask again only after a while.
            let building = built_from.is_some_and(|(from, at)| from == snapshot && at.elapsed() < REASK);
            if !building && snapshot_due(since, every, self.state.tag_count() as u64) {
                tracing::info!(weight = since, snapshot, "the log since the last snapshot is heavy: building one");
                if self.raft.trigger().snapshot().await.is_err() {
                    return;
                }
                built_from = Some((snapshot, tokio::time::Instant::now()));
            }
            if let Some(p) = purge_to(&weights, snapshot, purged.max(purge_asked), keep) {
                tracing::info!(through = p, snapshot, "purging the log behind the snapshot by weight");
                if self.raft.trigger().purge_log(p).await.is_err() {
                    return;
                }
                purge_asked = p;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_come_by_weight_and_as_the_state_grows_by_half() {
        assert!(!snapshot_due(9_999, 10_000, 0));
        assert!(snapshot_due(10_000, 10_000, 0));
        // A million tags: due after half a million more, not after every 10,000.
        assert!(!snapshot_due(10_000, 10_000, 1_000_000));
        assert!(snapshot_due(500_000, 10_000, 1_000_000));
    }
}
