//! A follower's snapshot install in the order openraft 0.9.25 runs it: the engine queues the
//! install for the state machine task and, in the same step, purges the log up to the snapshot
//! and raises `committed` to it; the log store's purge and the next appends and commit points
//! can reach the disk before the state machine has installed anything. Whenever a crash comes,
//! the reopened store must start (openraft's start-up re-applies the committed entries after
//! the state machine's state from the log) and reach the right state.
//!
//! A "crash" here drops the store and reopens it. That is exact for these scenarios: every
//! write they make is flushed at once or never made, and the state machine's in-memory applies
//! after its last checkpoint are never written (no checkpoint is due), as after a `kill -9`.
//! The multi-process test with real crash points is `snapshot_crash` in leaf-cluster-tests.
use std::time::Duration;

use leaf_raft_store::types::{Entry, LogId, Snapshot};
use leaf_raft_store::{open, Command, LogStore, Op, StateMachineStore, StoreOptions};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader, RaftSnapshotBuilder};
use tempfile::TempDir;

use crate::support::{reopen, rt};

/// The follower's own last snapshot (built from its state, which it checkpoints and flushes).
const OWN_SNAP: u64 = 20;
/// What the follower's log holds and its state machine applied (in memory) before the install.
const HELD: u64 = 30;
/// The snapshot the leader sends.
const SNAP: u64 = 60;

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

/// Entry `i` of the cluster's log: a blank first entry, the tag's creation, then allocations of
/// `i` IDs.
fn nth(i: u64) -> Entry {
    let payload = match i {
        0 => EntryPayload::Blank,
        1 => EntryPayload::Normal(Command { at_ms: 1, op: Op::create_segment_tag("t".into(), 10, 1, String::new()) }),
        _ => EntryPayload::Normal(Command {
            at_ms: i as i64,
            op: Op::AllocateSegment { tag: "t".into(), step: i as i64, node_id: 1 },
        }),
    };
    Entry { log_id: log_id(i), payload }
}

fn entries(r: std::ops::RangeInclusive<u64>) -> Vec<Entry> {
    r.map(nth).collect()
}

/// The tag's `max_id` once entries up to `index` are applied.
fn max_id_at(index: u64) -> i64 {
    1 + (2..=index as i64).sum::<i64>()
}

/// The leader's snapshot at `SNAP`.
async fn leader_snapshot() -> Snapshot {
    let dir = TempDir::new().unwrap();
    let (_log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
    sm.apply(entries(0..=SNAP)).await.unwrap();
    let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert_eq!(snap.meta.last_log_id, Some(log_id(SNAP)));
    snap
}

/// A follower whose log holds entries up to `held` (all committed and applied in memory) and
/// whose last snapshot, and state machine checkpoint, is at `OWN_SNAP`.
async fn follower(held: u64) -> (TempDir, LogStore, StateMachineStore) {
    let dir = TempDir::new().unwrap();
    let (mut log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
    log.blocking_append(entries(0..=held)).await.unwrap();
    log.save_committed(Some(log_id(held))).await.unwrap();
    sm.apply(entries(0..=OWN_SNAP)).await.unwrap();
    sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    sm.apply(entries(OWN_SNAP + 1..=held)).await.unwrap();
    assert_eq!(sm.checkpointed_index().unwrap(), OWN_SNAP);
    (dir, log, sm)
}

/// Reopens the store as a restarted node does and runs openraft's start-up on it; checks that
/// the log starts no later than the state machine, holds every entry after it without a hole,
/// and that the state is the one of the entries applied. Returns the applied index.
async fn restart(dir: &TempDir) -> (LogStore, StateMachineStore, u64) {
    let (mut log, mut sm) = reopen(dir.path());
    let initial = openraft::StorageHelper::new(&mut log, &mut sm).get_initial_state().await;
    initial.unwrap_or_else(|e| panic!("the restarted node cannot start: {e}"));
    let applied = sm.applied_state().await.unwrap().0.map_or(0, |l| l.index);
    let state = log.get_log_state().await.unwrap();
    let purged = state.last_purged_log_id.map(|l| l.index);
    assert!(purged.is_none_or(|p| p <= applied), "log purged to {purged:?} but the state is at {applied}");
    // openraft's own invariant: the snapshot stands in for every purged entry.
    let snap = sm.get_current_snapshot().await.unwrap().and_then(|s| s.meta.last_log_id).map(|l| l.index);
    assert!(purged <= snap, "log purged to {purged:?} beyond the snapshot at {snap:?}");
    let last = state.last_log_id.map_or(0, |l| l.index);
    let after: Vec<u64> =
        log.try_get_log_entries(applied + 1..=last).await.unwrap().iter().map(|e| e.log_id.index).collect();
    assert_eq!(after, (applied + 1..=last).collect::<Vec<_>>(), "the log has a hole after the state");
    assert_eq!(sm.reader().tag("t").map(|t| t.max_id), Some(max_id_at(applied)), "state at {applied}");
    (log, sm, applied)
}

/// The purge of a queued install is at once complete for openraft, but on disk it goes no
/// further than the snapshot on disk; after a crash before the install, the node
/// starts (re-applying its committed entries) and can take the snapshot again. Without the
/// clamp the purge reached the disk, the restart re-applied entries 21..30 from a log purged
/// to 60, and failed.
#[test]
fn a_purge_for_a_queued_install_never_outruns_the_state_machine_on_disk() {
    rt().block_on(async {
        let snap = leader_snapshot().await;
        let (dir, mut log, sm) = follower(HELD).await;
        log.purge(log_id(SNAP)).await.unwrap();
        // openraft sees the purge complete...
        let state = log.get_log_state().await.unwrap();
        assert_eq!((state.last_purged_log_id, state.last_log_id), (Some(log_id(SNAP)), Some(log_id(SNAP))));
        assert!(log.try_get_log_entries(0..100).await.unwrap().is_empty());
        // ...while the disk keeps what the state machine needs.
        assert_eq!(log.durable_purged(), Some(log_id(OWN_SNAP)));
        drop((log, sm)); // crash before the install

        let (mut log, mut sm, applied) = restart(&dir).await;
        assert_eq!(applied, HELD, "re-applied the committed entries after the checkpoint");
        // The leader sends the snapshot again; now it is installed, and the purge completes.
        log.purge(log_id(SNAP)).await.unwrap();
        sm.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
        log.blocking_append(entries(SNAP + 1..=SNAP + 3)).await.unwrap();
        assert_eq!(log.durable_purged(), Some(log_id(SNAP)));
        log.save_committed(Some(log_id(SNAP + 3))).await.unwrap();
        drop((log, sm));
        let (_log, _sm, applied) = restart(&dir).await;
        assert_eq!(applied, SNAP + 3);
    });
}

/// The purge point on disk stays at the snapshot even when the state machine's checkpoint is
/// further (as after a clean shutdown): openraft requires a snapshot for every purged entry
/// (a lagging follower gets it instead of the entries), and refuses to run without one.
#[test]
fn the_durable_purge_point_never_passes_the_snapshot_on_disk() {
    rt().block_on(async {
        let (dir, mut log, sm) = follower(HELD).await;
        sm.checkpoint().await.unwrap();
        assert_eq!(sm.checkpointed_index().unwrap(), HELD);
        log.purge(log_id(SNAP)).await.unwrap();
        assert_eq!(log.durable_purged(), Some(log_id(OWN_SNAP)));
        drop((log, sm));
        let (_log, _sm, applied) = restart(&dir).await;
        assert_eq!(applied, HELD);
    });
}

/// Entries after a purged hole (the follower's log ended before the snapshot) wait for the
/// install: written before it, a crash would leave them behind a hole the state machine does
/// not cover. Once the install is on disk they go in, after the purge completed.
#[test]
fn appends_after_a_purged_hole_wait_for_the_install() {
    rt().block_on(async {
        let snap = leader_snapshot().await;

        // Crash while the append waits: nothing after the hole reached the disk.
        let (dir, mut log, sm) = follower(HELD).await;
        log.purge(log_id(SNAP)).await.unwrap();
        let mut appender = log.clone();
        let append = tokio::spawn(async move { appender.blocking_append(entries(SNAP + 1..=SNAP + 5)).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!append.is_finished(), "entries after the hole were written before the install");
        assert_eq!(log.len() as u64, HELD - OWN_SNAP, "entries after the durable purge point, none after the hole");
        append.abort();
        assert!(append.await.unwrap_err().is_cancelled()); // its store handle is gone with it
        drop((log, sm));
        let (_log, _sm, applied) = restart(&dir).await;
        assert_eq!(applied, HELD);

        // The install lands while the append waits: the append completes the purge and goes on.
        let (dir, mut log, mut sm) = follower(HELD).await;
        log.purge(log_id(SNAP)).await.unwrap();
        let mut appender = log.clone();
        let append = tokio::spawn(async move { appender.blocking_append(entries(SNAP + 1..=SNAP + 5)).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        sm.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), append).await.unwrap().unwrap().unwrap();
        assert_eq!(log.durable_purged(), Some(log_id(SNAP)));
        let held: Vec<u64> = log.try_get_log_entries(0..1000).await.unwrap().iter().map(|e| e.log_id.index).collect();
        assert_eq!(held, (SNAP + 1..=SNAP + 5).collect::<Vec<_>>());
        log.save_committed(Some(log_id(SNAP + 5))).await.unwrap();
        drop((log, sm)); // crash before applying them
        let (_log, _sm, applied) = restart(&dir).await;
        assert_eq!(applied, SNAP + 5, "re-applied after the restored snapshot");
    });
}

/// A follower whose log already holds the snapshot's entries appends at once (no hole), and its
/// commit points beyond the snapshot are stored as they are: the log holds every entry a
/// restart re-applies. A commit point beyond both the state machine and the log is stored lower.
#[test]
fn commit_points_stay_within_what_a_restart_can_reapply() {
    rt().block_on(async {
        // The log holds entries beyond the snapshot.
        let (dir, mut log, sm) = follower(SNAP + 10).await;
        log.purge(log_id(SNAP)).await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), log.blocking_append(entries(SNAP + 11..=SNAP + 15)))
            .await
            .expect("no hole, no wait")
            .unwrap();
        log.save_committed(Some(log_id(SNAP + 15))).await.unwrap();
        assert_eq!(log.read_committed().await.unwrap(), Some(log_id(SNAP + 15)));
        assert_eq!(log.durable_purged(), Some(log_id(OWN_SNAP)));
        drop((log, sm)); // crash before the install
        let (_log, _sm, applied) = restart(&dir).await;
        assert_eq!(applied, SNAP + 15, "re-applied from the checkpoint through the log");

        // The log ends before the snapshot: `committed` at the snapshot is stored as the last
        // entry held.
        let (dir, mut log, sm) = follower(HELD).await;
        log.purge(log_id(SNAP)).await.unwrap();
        log.save_committed(Some(log_id(SNAP))).await.unwrap();
        assert_eq!(log.read_committed().await.unwrap(), Some(log_id(HELD)));
        drop((log, sm));
        let (_log, _sm, applied) = restart(&dir).await;
        assert_eq!(applied, HELD);
    });
}
