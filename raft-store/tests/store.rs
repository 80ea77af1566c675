//! Integration tests of the sled Raft store: openraft's storage suite, snapshots, and a crash
//! test that `kill -9`s a child process writing through the store; [`snapshot_install`]
//! replays a follower's snapshot install with crashes, [`checkpoint_prop`] property-tests the
//! checkpoints.
use std::io::{BufRead, BufReader, Write};
use std::process::{Command as Proc, Stdio};
use std::time::{Duration, Instant};

use leaf_raft_store::types::{Entry, LogId, StorageError, Vote};
use leaf_raft_store::{open, Applied, Command, LogStore, Op, StateMachineStore, StoreOptions, TypeConfig};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, EntryPayload, RaftLogReader, RaftSnapshotBuilder};
use rand::{Rng, SeedableRng};
use tempfile::TempDir;

/// Opens the store in `dir` once sled has let go of it: a dropped sled instance releases its
/// file lock from its own background thread, so reopening at once can still find the lock held
/// (seen in CI: "could not acquire lock ... WouldBlock"). Waits up to 10 s, as the node does.
fn reopen(dir: &std::path::Path) -> (LogStore, StateMachineStore) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match open(dir, &StoreOptions::default()) {
            Err(e) if e.to_string().contains("could not acquire lock") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other.expect("reopen store"),
        }
    }
}

struct SledBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for SledBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), StorageError> {
        let dir = TempDir::new().expect("tempdir");
        let (log, sm) = open(dir.path(), &StoreOptions::default()).expect("open store");
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(SledBuilder).unwrap();
}

fn entry(term: u64, index: u64, op: Op) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Command { at_ms: 1_700_000_000_000 + index as i64, op }),
    }
}

fn alloc_op(step: i64) -> Op {
    Op::AllocateSegment { tag: "t".into(), step, node_id: 1 }
}

fn create_op() -> Op {
    Op::CreateTag { tag: "t".into(), step: 10, start_max_id: 1, description: String::new() }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

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
        let (_log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
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
        let register = |i, node_id| entry(1, i, Op::RegisterWorker { node_id, lease_ms: 10_000 });
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
        let entries = vec![
            entry(1, 1, create_op()),
            entry(1, 2, alloc_op(10)),
            entry(1, 3, other_node),
            entry(1, 4, unknown_tag),
        ];
        sm.apply(entries).await.unwrap();
        let dump = sm.journal().dump(None, None).unwrap();
        assert_eq!((dump.complete_from_index, dump.complete_through_index), (0, 4));
        let got: Vec<(u64, u64, i64, i64, i64)> =
            dump.records.iter().map(|(i, r)| (*i, r.node_id, r.start, r.end, r.at_ms)).collect();
        assert_eq!(got, vec![(2, 1, 1, 11, 1_700_000_000_002), (3, 2, 11, 16, 1_700_000_000_003)]);
        let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        drop((_log, sm));

        let (_log, sm) = reopen(dir.path());
        let dump = sm.journal().dump(Some("t"), Some(2)).unwrap();
        assert_eq!((dump.records.len(), dump.complete_through_index), (1, 4), "journal survives reopen");

        // A node that catches up from the snapshot has no record of those allocations.
        let other = TempDir::new().unwrap();
        let (_l2, mut sm2) = open(other.path(), &StoreOptions::default()).unwrap();
        sm2.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
        sm2.apply(vec![entry(1, 5, alloc_op(10))]).await.unwrap();
        let dump = sm2.journal().dump(None, None).unwrap();
        assert_eq!((dump.complete_from_index, dump.complete_through_index), (5, 5));
        assert_eq!(dump.records.iter().map(|(i, r)| (*i, r.start)).collect::<Vec<_>>(), vec![(5, 16)]);
    });
}

/// Appends `entries` to the log, marks them committed and applies them, as a one-node leader
/// does with each batch.
async fn commit(log: &mut LogStore, sm: &mut StateMachineStore, entries: Vec<Entry>) {
    let last = entries.last().map(|e| e.log_id);
    log.blocking_append(entries.clone()).await.unwrap();
    log.save_committed(last).await.unwrap();
    sm.apply(entries).await.unwrap();
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

/// Child side of the crash test: appends entries one batch at a time and prints each
/// acknowledged index (and vote) as soon as the store returns. Runs only when spawned by
/// `acknowledged_writes_survive_kill_9`.
#[test]
fn crash_child_writer() {
    let Ok(dir) = std::env::var("LEAF_CRASH_CHILD_DIR") else { return };
    rt().block_on(async move {
        let (mut log, mut sm) = open(std::path::Path::new(&dir), &StoreOptions::default()).unwrap();
        let mut next = log.get_log_state().await.unwrap().last_log_id.map_or(0, |l| l.index + 1);
        let mut term = log.read_vote().await.unwrap().map_or(1, |v| v.leader_id.term);
        // The parent re-applied everything on disk before this round started.
        assert_eq!(sm.applied_state().await.unwrap().0.map_or(0, |l| l.index + 1), next);
        let out = std::io::stdout();
        loop {
            let batch = 1 + next % 3;
            commit(&mut log, &mut sm, (next..next + batch).map(crash_entry).collect()).await;
            next += batch;
            writeln!(out.lock(), "ack {}", next - 1).unwrap();
            if next % 7 == 0 {
                term += 1;
                log.save_vote(&Vote::new(term, 1)).await.unwrap();
                writeln!(out.lock(), "vote {term}").unwrap();
            }
        }
    });
}

fn blank(index: u64) -> Entry {
    Entry { log_id: LogId::new(CommittedLeaderId::new(1, 1), index), payload: EntryPayload::Blank }
}

/// Entry `i` of the crash test: a blank first entry, the tag's creation, then allocations of
/// `i` IDs.
fn crash_entry(i: u64) -> Entry {
    match i {
        0 => blank(0),
        1 => entry(1, 1, create_op()),
        _ => entry(1, i, alloc_op(i as i64)),
    }
}

/// Log entries, the vote and the state machine survive `kill -9` of a process writing through
/// the store: every acknowledged entry is there without holes, and re-applying from the
/// checkpoint (openraft's start-up, then the leader re-committing its log) reaches exactly the
/// state of every entry applied once.
#[test]
fn acknowledged_writes_survive_kill_9() {
    let seed: u64 = std::env::var("LEAF_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("crash test seed: {seed} (rerun with LEAF_TEST_SEED={seed})");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = TempDir::new().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked_total = 0;
    for round in 0..4 {
        let mut child = Proc::new(&exe)
            .args(["--exact", "crash_child_writer", "--nocapture", "--test-threads=1"])
            .env("LEAF_CRASH_CHILD_DIR", dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let run_for = Duration::from_millis(rng.gen_range(300..900));
        let start = Instant::now();
        let (mut last_ack, mut last_vote) = (0u64, 0u64);
        while start.elapsed() < run_for {
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(line) => parse_line(&line, &mut last_ack, &mut last_vote),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(e) => panic!("child exited early: {e}"),
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Lines printed before the kill were acknowledged before it.
        while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            parse_line(&line, &mut last_ack, &mut last_vote);
        }
        assert!(last_ack > acked_total, "round {round}: the child acknowledged nothing new");
        acked_total = last_ack;

        rt().block_on(async {
            let (mut log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
            let state = log.get_log_state().await.unwrap();
            let last = state.last_log_id.unwrap().index;
            assert!(last >= last_ack, "round {round}: acked up to {last_ack} but only {last} survived");
            let entries = log.try_get_log_entries(0..=last).await.unwrap();
            assert_eq!(entries.len() as u64, last + 1, "round {round}: the log has holes");
            for (i, e) in entries.iter().enumerate().skip(1) {
                assert_eq!(e.log_id.index, i as u64);
                assert!(matches!((&e.payload, &crash_entry(i as u64).payload),
                    (EntryPayload::Normal(c), EntryPayload::Normal(want)) if c.op == want.op));
            }
            let vote = log.read_vote().await.unwrap().map_or(0, |v| v.leader_id.term);
            assert!(vote >= last_vote, "round {round}: vote {last_vote} was acked, {vote} survived");
            let checkpoint = sm.checkpointed_index().unwrap();
            openraft::StorageHelper::new(&mut log, &mut sm).get_initial_state().await.unwrap();
            let applied = sm.applied_state().await.unwrap().0.map_or(0, |l| l.index);
            assert!(applied >= checkpoint && applied <= last, "round {round}: applied {applied}");
            let rest: Vec<Entry> = entries.into_iter().skip(applied as usize + 1).collect();
            sm.apply(rest).await.unwrap();
            let max_id = sm.reader().tag("t").unwrap().max_id;
            assert_eq!(max_id, 1 + (2..=last as i64).sum::<i64>(), "round {round}: state after re-applying");
            sm.checkpoint().await.unwrap();
            println!("round {round}: {last_ack} acknowledged, {last} on disk, checkpoint {checkpoint}, vote {vote}");
        });
    }
}

fn parse_line(line: &str, last_ack: &mut u64, last_vote: &mut u64) {
    if let Some(n) = line.strip_prefix("ack ") {
        *last_ack = n.trim().parse().unwrap();
    } else if let Some(n) = line.strip_prefix("vote ") {
        *last_vote = n.trim().parse().unwrap();
    }
}

#[path = "store/checkpoint_prop.rs"]
mod checkpoint_prop;
#[path = "store/snapshot_install.rs"]
mod snapshot_install;
