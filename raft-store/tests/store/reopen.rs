//! What a reopened store holds, and what a store that installed a snapshot holds: the state,
//! the workers, the allocation journal, the checkpoints and the log without holes.
use leaf_raft_store::types::{Entry, LogId};
use leaf_raft_store::{open, Applied, Op, SegmentAsk, StoreOptions};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader, RaftSnapshotBuilder};
use tempfile::TempDir;

use crate::support::{alloc_op, blank, commit, create_op, entry, reopen, rt};

#[test]
fn snapshot_survives_reopen_and_installs_elsewhere() {
    rt().block_on(async {
        let dir = TempDir::new().unwrap();
        let (_log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        let mut entries = vec![entry(1, 1, create_op())];
        entries.extend((2..=50).map(|i| entry(1, i, alloc_op(10))));
        let results = sm.apply(entries).await.unwrap();
        assert_eq!(results.len(), 50);
        assert!(matches!(results[49], Ok(Applied::Segment(a)) if a.start == 481 && a.end == 491));
        let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(50));
        drop(sm);
        drop(_log);

        // Reopen: the state and the snapshot are both there.
        let (_log, mut sm) = reopen(dir.path());
        assert_eq!(sm.reader().tag("t").unwrap().max_id, 491);
        let current = sm.get_current_snapshot().await.unwrap().expect("snapshot kept");
        assert_eq!(current.meta, snap.meta);

        // Install it on a fresh store: same state, same applied log ID.
        let other = TempDir::new().unwrap();
        let (_l2, mut sm2) = open(other.path(), &StoreOptions::default()).unwrap();
        sm2.install_snapshot(&current.meta, current.snapshot).await.unwrap();
        assert_eq!(sm2.reader().tag("t").unwrap().max_id, 491);
        assert_eq!(sm2.applied_state().await.unwrap().0, snap.meta.last_log_id);
        // The next allocation continues after the snapshot, never inside it.
        let r = sm2.apply(vec![entry(1, 51, alloc_op(10))]).await.unwrap();
        assert!(matches!(r[0], Ok(Applied::Segment(a)) if a.start == 491));
    });
}

#[test]
fn workers_survive_reopen_and_snapshots() {
    rt().block_on(async {
        let dir = TempDir::new().unwrap();
        let (_log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        let nodes = std::collections::BTreeMap::from([
            (1, openraft::BasicNode::new("a:1")),
            (2, openraft::BasicNode::new("b:1")),
        ]);
        let membership = openraft::Membership::new(vec![[1, 2].into()], nodes);
        let first = Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), 1),
            payload: EntryPayload::Membership(membership),
        };
        let register = |i, node_id| entry(1, i, Op::RegisterWorker { node_id, lease_ms: 10_000, within: None });
        let renew = entry(1, 4, Op::RenewWorker { node_id: 2, worker_id: 0, high_water_ms: 42, lease_ms: 10_000 });
        let r = sm.apply(vec![first, register(2, 2), register(3, 1), renew]).await.unwrap();
        assert!(matches!(r[3], Ok(Applied::Worker(g)) if g.worker_id == 0 && g.not_before_ms == 42), "{r:?}");
        let before = sm.reader().workers();
        assert_eq!(before.iter().map(|(id, w)| (*id, w.node_id)).collect::<Vec<_>>(), vec![(0, 2), (1, 1)]);
        let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        drop((_log, sm));
        let (_log, sm) = reopen(dir.path());
        assert_eq!(sm.reader().workers(), before);
        let other = TempDir::new().unwrap();
        let (_l2, mut sm2) = open(other.path(), &StoreOptions::default()).unwrap();
        sm2.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
        assert_eq!(sm2.reader().workers(), before);
        // Current members came with the snapshot: node 1 re-registers and keeps its ID.
        let r = sm2.apply(vec![register(5, 1)]).await.unwrap();
        assert!(matches!(r[0], Ok(Applied::Worker(g)) if g.worker_id == 1), "{r:?}");
    });
}

/// The allocation journal records every committed allocation with its node, survives reopen,
/// ignores failed allocations, and a store that installs a snapshot marks what it lacks.
#[test]
fn the_allocation_journal_records_committed_allocations_and_marks_snapshot_gaps() {
    rt().block_on(async {
        let dir = TempDir::new().unwrap();
        let (_log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        let other_node = Op::AllocateSegment { tag: "t".into(), step: 5, node_id: 2 };
        let unknown_tag = Op::AllocateSegment { tag: "nope".into(), step: 5, node_id: 2 };
        // A group: each allocation in its place, the refused one (unknown tag) left out.
        let ask = |tag: &str, node_id| SegmentAsk { tag: tag.into(), step: 3, node_id };
        let group = Op::AllocateSegments { asks: vec![ask("t", 3), ask("nope", 1), ask("t", 1)] };
        let entries = vec![
            entry(1, 1, create_op()),
            entry(1, 2, alloc_op(10)),
            entry(1, 3, other_node),
            entry(1, 4, unknown_tag),
            entry(1, 5, group),
        ];
        sm.apply(entries).await.unwrap();
        let dump = sm.journal().dump(None, None).unwrap();
        assert_eq!((dump.complete_from_index, dump.complete_through_index), (0, 5));
        let got: Vec<(u64, u32, u64, i64, i64, i64)> =
            dump.records.iter().map(|(i, r)| (i.index, i.position, r.node_id, r.start, r.end, r.at_ms)).collect();
        let at = |i: i64| 1_700_000_000_000 + i;
        let expected =
            vec![(2, 0, 1, 1, 11, at(2)), (3, 0, 2, 11, 16, at(3)), (5, 0, 3, 16, 19, at(5)), (5, 2, 1, 19, 22, at(5))];
        assert_eq!(got, expected);
        let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        drop((_log, sm));

        let (_log, sm) = reopen(dir.path());
        let dump = sm.journal().dump(Some("t"), Some(2)).unwrap();
        assert_eq!((dump.records.len(), dump.complete_through_index), (1, 5), "journal survives reopen");

        // A node that catches up from the snapshot has no record of those allocations.
        let other = TempDir::new().unwrap();
        let (_l2, mut sm2) = open(other.path(), &StoreOptions::default()).unwrap();
        sm2.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
        sm2.apply(vec![entry(1, 6, alloc_op(10))]).await.unwrap();
        let dump = sm2.journal().dump(None, None).unwrap();
        assert_eq!((dump.complete_from_index, dump.complete_through_index), (6, 6));
        assert_eq!(dump.records.iter().map(|(i, r)| (i.index, r.start)).collect::<Vec<_>>(), vec![(6, 22)]);
    });
}

/// The `sm` tree is a checkpoint written every `CHECKPOINT_EVERY` entries and at each snapshot;
/// a reopened store lags behind it and openraft's start-up re-applies the committed rest from
/// the log, reaching exactly the state it had (no entry lost, none applied twice).
#[test]
fn the_state_machine_checkpoints_and_a_reopened_store_reapplies_the_rest_exactly() {
    use leaf_raft_store::state_machine::CHECKPOINT_EVERY;
    rt().block_on(async {
        let dir = TempDir::new().unwrap();
        let (mut log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        let last = CHECKPOINT_EVERY + 44;
        // Index 0 is where openraft's log starts (the first membership).
        commit(&mut log, &mut sm, vec![blank(0), entry(1, 1, create_op())]).await;
        for i in 2..=last {
            commit(&mut log, &mut sm, vec![entry(1, i, alloc_op(i as i64))]).await;
        }
        let max_id = sm.reader().tag("t").unwrap().max_id;
        assert_eq!(max_id, 1 + (2..=last as i64).sum::<i64>());
        // The first checkpoint comes with the CHECKPOINT_EVERY-th entry (index 0 counts).
        assert_eq!(sm.checkpointed_index().unwrap(), CHECKPOINT_EVERY - 1, "one checkpoint so far");
        drop((log, sm));

        let (mut log, mut sm) = reopen(dir.path());
        assert_eq!(sm.applied_state().await.unwrap().0.map(|l| l.index), Some(CHECKPOINT_EVERY - 1));
        openraft::StorageHelper::new(&mut log, &mut sm).get_initial_state().await.unwrap();
        assert_eq!(sm.applied_state().await.unwrap().0.map(|l| l.index), Some(last));
        assert_eq!(sm.reader().tag("t").unwrap().max_id, max_id, "re-applied to the same state");
        let journal = sm.journal().dump(Some("t"), None).unwrap();
        assert_eq!(journal.records.len() as u64, last - 1, "every allocation journaled once");

        // A snapshot checkpoints the state it holds: the log behind it may go.
        commit(&mut log, &mut sm, vec![entry(1, last + 1, alloc_op(1))]).await;
        let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        assert_eq!(sm.checkpointed_index().unwrap(), last + 1);
        assert_eq!(snap.meta.last_log_id.map(|l| l.index), Some(last + 1));
        // And a clean shutdown's checkpoint leaves nothing to re-apply.
        commit(&mut log, &mut sm, vec![entry(1, last + 2, alloc_op(1))]).await;
        sm.checkpoint().await.unwrap();
        assert_eq!(sm.checkpointed_index().unwrap(), last + 2);
    });
}

/// A batch of tags is checkpointed with its own entry (it changes thousands of keys), not
/// gathered with later batches into one checkpoint that stalls every apply behind it; a
/// reopened store has it without re-applying.
#[test]
fn a_batch_of_many_tags_is_checkpointed_with_its_entry() {
    use leaf_raft_store::state_machine::{CHECKPOINT_EVERY, CHECKPOINT_KEYS};
    use leaf_raft_store::NewTag;
    rt().block_on(async {
        let dir = TempDir::new().unwrap();
        let (mut log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        let small = Op::CreateTags { tags: vec![NewTag::segment("small".into(), 10, 1, String::new())] };
        commit(&mut log, &mut sm, vec![blank(0), entry(1, 1, small)]).await;
        assert_eq!(sm.checkpointed_index().unwrap(), 0, "a small change waits for CHECKPOINT_EVERY entries");
        let tags = (0..CHECKPOINT_KEYS / 2).map(|i| NewTag::segment(format!("b-{i}"), 10, 1, String::new())).collect();
        commit(&mut log, &mut sm, vec![entry(1, 2, Op::CreateTags { tags })]).await;
        const { assert!(2 < CHECKPOINT_EVERY) };
        assert_eq!(sm.checkpointed_index().unwrap(), 2, "tags and their audit records reach CHECKPOINT_KEYS");
        drop((log, sm));
        let (_log, mut sm) = reopen(dir.path());
        assert_eq!(sm.applied_state().await.unwrap().0.map(|l| l.index), Some(2));
        assert_eq!(sm.reader().tag_count(), CHECKPOINT_KEYS / 2 + 1);
    });
}

#[test]
fn purge_and_truncate_leave_no_holes() {
    rt().block_on(async {
        let dir = TempDir::new().unwrap();
        let (mut log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        log.blocking_append((1..=100).map(|i| entry(1, i, alloc_op(1)))).await.unwrap();
        // A snapshot covers the purge (the log store purges no further on disk).
        sm.apply((1..=50).map(|i| entry(1, i, alloc_op(1)))).await.unwrap();
        sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        log.purge(LogId::new(CommittedLeaderId::new(1, 1), 40)).await.unwrap();
        log.truncate(LogId::new(CommittedLeaderId::new(1, 1), 91)).await.unwrap();
        drop((log, sm));
        let (mut log, _sm) = reopen(dir.path());
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(40));
        assert_eq!(state.last_log_id.map(|l| l.index), Some(90));
        let got: Vec<u64> = log.try_get_log_entries(0..1000).await.unwrap().iter().map(|e| e.log_id.index).collect();
        assert_eq!(got, (41..=90).collect::<Vec<_>>());
    });
}
