//! Snapshots and log purges by what the log holds, beside openraft's own by entry count.
//!
//! openraft builds a snapshot every `raft.snapshot_every` entries and keeps
//! `raft.keep_logs_after_snapshot` entries behind it. A batch of tags is one entry of up to
//! 5,000 tags, so a million tags are 200 entries: no snapshot is due, nothing is purged, and
//! a new node replays the whole batch log (62.6 s, with its RSS at 966 MB, measured) instead of
//! receiving a snapshot. This task weighs the applied entries ([`LogWeights`]: a batch counts
//! each tag) and, once a second:
//! - triggers a snapshot when the log since the last one weighs `snapshot_every` and at least
//!   a sixteenth of the tags the state holds (a growing state is snapshotted as it grows by a
//!   sixteenth, so snapshot builds cost a bounded multiple of the final one, and the changes
//!   the state machine's tree holds beside its snapshot stay a bounded part of the state);
//! - triggers one also when nothing was applied for [`QUIET`] and the log since the last
//!   snapshot weighs a tenth of `snapshot_every` and 1/256 of the tags: after a burst of writes
//!   the state machine's tree and the log then shed what the burst left in sled;
//! - purges the log behind the snapshot down to `keep_logs_after_snapshot` worth of weight;
//! - once the purge point moved, asks the store to rewrite sled's files if they now hold
//!   mostly garbage (`leaf_raft_store::compact`; a build asks too).
//!
//! With ordinary entries (weight 1) both rules are openraft's own, so nothing changes.
//!
//! This task is the only one that purges: openraft's own purge after a snapshot is off
//! (`max_in_snapshot_log_to_keep` is `u64::MAX`, `raft/start.rs`). openraft computes that purge
//! point from the last purge *done*, not from the last one asked for, and a leader holds a
//! purge back while a follower's replication still reads the entries. So a purge by weight
//! asked through index p and held back by a stalled follower, then a snapshot finishing, made
//! openraft schedule a purge below p, which it `debug_assert!`s never happens. A leader's Raft
//! core panicked once in `crash_points` (batches of tags, a follower stalled in a checkpoint);
//! its message was not captured, and this is the one path to it found by reading openraft.
//! Where the weights do not reach back far enough (after a snapshot install, or past their
//! bound), the purge falls back to openraft's rule by entry count.
use std::ops::RangeInclusive;
use std::time::Duration;

use leaf_raft_store::log_weight::entry_weight;
use leaf_raft_store::LogWeights;
use tokio::sync::watch;

use super::RaftNode;

/// How often the weights are looked at.
const TICK: Duration = Duration::from_secs(1);
/// How long a triggered build may run before a heavy log triggers another.
const REASK: Duration = Duration::from_secs(60);

/// A snapshot is due once the log since the last one weighs this fraction of the state's tags
/// (and `snapshot_every`). The state machine's tree holds the changes since the last snapshot
/// (`raft-store`'s `state_machine/base.rs`), at about four times their size in sled's files, so
/// this bounds sled's files against the state: a sixteenth keeps a million tags' directory
/// within 1.5 × of its live state (BENCHMARKS.md, issue 51); builds then write about sixteen
/// times the final state while it grows.
const SNAPSHOT_GROWTH: u64 = 16;

/// Whether a snapshot is due: the log since the last one weighs `since`, the state holds `tags`.
fn snapshot_due(since: u64, every: u64, tags: u64) -> bool {
    since >= every.max(tags / SNAPSHOT_GROWTH)
}

/// How long nothing is applied before a lighter log is snapshotted ([`quiet_snapshot_due`]).
const QUIET: Duration = Duration::from_secs(10);

/// Whether a snapshot is due on a quiet node: nothing applied for `quiet`, and the log since the
/// last snapshot weighs a tenth of `every` and 1/256 of the state's `tags`. What a burst of
/// writes left in sled beside the last snapshot (up to a sixteenth of the state, at four times
/// its size in sled's files: a third of a million tags' directory) then goes, and sled's files
/// with it; a trickle of writes never makes the node quiet.
fn quiet_snapshot_due(since: u64, every: u64, tags: u64, quiet: Duration) -> bool {
    quiet >= QUIET && since > 0 && since >= (every / 10).max(tags / (16 * SNAPSHOT_GROWTH))
}

/// The log indexes a restart left unweighed: after the `purged` index, up to the first index
/// the weights record (or through the last `applied` one, when they record none). None when
/// that is empty: on a node that applied its log from index 0, or applied nothing.
fn unweighed(purged: Option<u64>, first: Option<u64>, applied: Option<u64>) -> Option<RangeInclusive<u64>> {
    let from = match purged {
        Some(p) => p.checked_add(1)?,
        None => 0,
    };
    let through = match first {
        Some(f) => f.checked_sub(1)?,
        None => applied?,
    };
    (from <= through).then_some(from..=through)
}

/// Through which index to purge, if further than `purged`: the log behind the snapshot at
/// `snapshot` keeps `keep` worth of weight, or, where the weights do not reach back that far,
/// `keep` entries (each weighs at least 1, so that keeps at least as much).
fn purge_to(weights: &LogWeights, snapshot: u64, purged: u64, keep: u64) -> Option<u64> {
    weights.purge_point(snapshot, keep).or_else(|| snapshot.checked_sub(keep)).filter(|p| *p > purged)
}

impl RaftNode {
    /// Runs the snapshot and purge decisions above until `shutdown` says so.
    pub async fn compact_by_weight(self, every: u64, keep: u64, shutdown: watch::Receiver<bool>) {
        let weights = self.sm.log_weights();
        let mut tick = crate::ticker::Ticker::new(TICK, shutdown);
        // What was last asked of openraft, so that a build or purge under way is not asked
        // for again every tick: the snapshot index a build was triggered from (and when), and
        // the index a purge was asked through.
        let mut built_from: Option<(u64, tokio::time::Instant)> = None;
        let mut purge_asked = 0;
        let mut seeded = false;
        // The last applied log ID and when it changed; the purge point a rewrite was asked at.
        let mut applied = (None, tokio::time::Instant::now());
        let mut rewrite_checked = 0;
        while tick.next().await {
            let m = self.raft.metrics().borrow().clone();
            if m.running_state.is_err() {
                return;
            }
            let snapshot = m.snapshot.map_or(0, |l| l.index);
            let purged = m.purged.map_or(0, |l| l.index);
            if m.last_applied != applied.0 {
                applied = (m.last_applied, tokio::time::Instant::now());
            }
            if !seeded {
                // Once, after the start: the log a restart did not re-apply (a batch is
                // checkpointed with its entry) still weighs what it holds.
                let applied = m.last_applied.map(|l| l.index);
                if let Some(range) = unweighed(m.purged.map(|l| l.index), weights.first(), applied) {
                    self.seed_weights(&weights, range).await;
                }
                seeded = true;
            }
            weights.forget_through(purged);
            let since = weights.since(snapshot);
            // A build triggered from this snapshot may still run: ask again only after a while.
            let building = built_from.is_some_and(|(from, at)| from == snapshot && at.elapsed() < REASK);
            let tags = self.state.tag_count() as u64;
            let why = if building {
                None
            } else if snapshot_due(since, every, tags) {
                Some("the log since the last snapshot is heavy")
            } else if quiet_snapshot_due(since, every, tags, applied.1.elapsed()) {
                Some("nothing was applied for a while")
            } else {
                None
            };
            if let Some(why) = why {
                tracing::info!(weight = since, snapshot, why, "building a snapshot");
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
            if purged > rewrite_checked {
                rewrite_checked = purged;
                self.sm.rewrite_if_due().await;
            }
        }
    }
}

impl RaftNode {
    /// Records the weights of the log entries in `range` (a restart's unweighed log, see
    /// [`unweighed`]: below the applied index, so no longer than the log), read a few at a time.
    async fn seed_weights(&self, weights: &LogWeights, range: RangeInclusive<u64>) {
        use openraft::storage::RaftLogReader;
        const CHUNK: u64 = 64;
        let mut log = self.log.clone();
        let mut seeds = Vec::new();
        let (mut next, through) = range.into_inner();
        loop {
            let end = through.min(next.saturating_add(CHUNK - 1));
            match log.try_get_log_entries(next..=end).await {
                Ok(entries) => seeds.extend(entries.iter().map(|e| (e.log_id.index, entry_weight(e)))),
                Err(e) => {
                    tracing::warn!(error = %e, "reading the log's weights; snapshots by weight count from here");
                    return;
                }
            }
            match end.checked_add(1) {
                Some(n) if n <= through => next = n,
                _ => break,
            }
            tokio::task::yield_now().await;
        }
        if !seeds.is_empty() {
            tracing::info!(entries = seeds.len(), "weighed the log this node did not re-apply");
        }
        weights.seed(&seeds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The unweighed log of a restart, and none on a node that applied its log from index 0
    /// (the first build of this seeding wrapped `0 - 1` there and read the log for ever).
    #[test]
    fn a_restart_weighs_the_log_between_the_purge_and_the_first_applied_entry() {
        // Purged through 10, applied from 40 on since the start: 11..=39.
        assert_eq!(unweighed(Some(10), Some(40), Some(50)), Some(11..=39));
        // Nothing purged: from index 0.
        assert_eq!(unweighed(None, Some(5), Some(9)), Some(0..=4));
        // Nothing applied since the start yet: through the applied index.
        assert_eq!(unweighed(Some(10), None, Some(30)), Some(11..=30));
        // A fresh node applied from index 0; a node that applied nothing; nothing between.
        assert_eq!(unweighed(None, Some(0), Some(7)), None);
        assert_eq!(unweighed(None, None, None), None);
        assert_eq!(unweighed(Some(39), Some(40), Some(50)), None);
        assert_eq!(unweighed(Some(u64::MAX), None, Some(u64::MAX)), None);
    }

    /// A quiet node snapshots what is left of a burst, not a trickle, and not a log already
    /// light against the state.
    #[test]
    fn a_quiet_node_snapshots_a_log_worth_it() {
        let (quiet, busy) = (QUIET, QUIET - Duration::from_millis(1));
        // A million tags, 5,000 of them since the snapshot: due once quiet, not before.
        assert!(quiet_snapshot_due(5_000, 10_000, 1_000_000, quiet));
        assert!(!quiet_snapshot_due(5_000, 10_000, 1_000_000, busy));
        // Under 1/256 of the state, or a tenth of `snapshot_every`: not worth one.
        assert!(!quiet_snapshot_due(3_900, 10_000, 1_000_000, quiet));
        assert!(!quiet_snapshot_due(999, 10_000, 100, quiet));
        assert!(quiet_snapshot_due(1_000, 10_000, 100, quiet));
        // Nothing since the snapshot: nothing to build.
        assert!(!quiet_snapshot_due(0, 1, 0, quiet));
    }

    /// With openraft's own purge off, this is the only purge: by weight where the weights
    /// reach, by entry count where they do not, never back to or below what was purged.
    #[test]
    fn the_log_is_purged_by_weight_or_else_by_count_and_only_forward() {
        let w = LogWeights::default();
        // Nothing recorded (a snapshot was installed): `keep` entries stay behind the snapshot.
        assert_eq!(purge_to(&w, 5_000, 0, 1_000), Some(4_000));
        assert_eq!(purge_to(&w, 5_000, 4_000, 1_000), None, "already purged through 4,000");
        assert_eq!(purge_to(&w, 500, 0, 1_000), None, "a log shorter than keep stays whole");
        // Ordinary entries 1..=3000 and then three batches of 1,000 tags: keep 1,000 worth of
        // weight behind a snapshot at 3003, that is the last batch only.
        let entries: Vec<(u64, u64)> = (1..=3_003).map(|i| (i, if i > 3_000 { 1_000 } else { 1 })).collect();
        w.seed(&entries);
        assert_eq!(purge_to(&w, 3_003, 0, 1_000), Some(3_002));
        // The same snapshot at an ordinary entry: 1,000 entries behind it, as openraft's rule.
        assert_eq!(purge_to(&w, 2_500, 0, 1_000), Some(1_500));
        assert_eq!(purge_to(&w, 3_003, 3_002, 1_000), None);
    }

    #[test]
    fn snapshots_come_by_weight_and_as_the_state_grows_by_a_sixteenth() {
        assert!(!snapshot_due(9_999, 10_000, 0));
        assert!(snapshot_due(10_000, 10_000, 0));
        // A million tags: due after 62,500 more, not after every 10,000.
        assert!(!snapshot_due(62_499, 10_000, 1_000_000));
        assert!(snapshot_due(62_500, 10_000, 1_000_000));
    }
}
