//! Helpers the store's integration tests share: opening a store again, copying one, a runtime,
//! and the log entries of a tag `t` (its creation, allocations, blanks) committed as a leader
//! does.
use std::time::{Duration, Instant};

use leaf_raft_store::types::{Entry, LogId};
use leaf_raft_store::{open, Command, LogStore, Op, StateMachineStore, StoreOptions};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload};

/// Opens the store in `dir` once sled has let go of it: a dropped sled instance releases its
/// file lock from its own background thread, so reopening at once can still find the lock held
/// (seen in CI: "could not acquire lock ... WouldBlock"). Waits up to 10 s, as the node does.
pub fn reopen(dir: &std::path::Path) -> (LogStore, StateMachineStore) {
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

/// Entry `index` of term `term`, carrying `op` at a time that grows with the index.
pub fn entry(term: u64, index: u64, op: Op) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
        payload: EntryPayload::Normal(Command { at_ms: 1_700_000_000_000 + index as i64, op }),
    }
}

/// Allocates `step` IDs of tag `t` for node 1.
pub fn alloc_op(step: i64) -> Op {
    Op::AllocateSegment { tag: "t".into(), step, node_id: 1 }
}

/// Creates tag `t` (step 10, first ID 1).
pub fn create_op() -> Op {
    Op::create_segment_tag("t".into(), 10, 1, String::new())
}

/// A current-thread tokio runtime for one test.
pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Appends `entries` to the log, marks them committed and applies them, as a one-node leader
/// does with each batch.
pub async fn commit(log: &mut LogStore, sm: &mut StateMachineStore, entries: Vec<Entry>) {
    let last = entries.last().map(|e| e.log_id);
    log.blocking_append(entries.clone()).await.unwrap();
    log.save_committed(last).await.unwrap();
    sm.apply(entries).await.unwrap();
}

/// Appends `entries` to the log (synced), without applying them.
pub async fn append(log: &mut LogStore, entries: Vec<Entry>) {
    log.blocking_append(entries).await.unwrap();
}

/// A blank entry at `index`.
pub fn blank(index: u64) -> Entry {
    Entry { log_id: LogId::new(CommittedLeaderId::new(1, 1), index), payload: EntryPayload::Blank }
}

/// Copies the directory `from` into `to`, recursively (a store, to damage or half-rewrite a copy).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}
