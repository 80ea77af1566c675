//! sled's files rewritten (`leaf_raft_store::compact`): a store that holds mostly garbage
//! reopens from a new directory with the same log, vote and state, or switches to one after a
//! snapshot build while it runs; an earlier release can no longer open it as an empty database,
//! and each crash window of the rewrite leaves a store that opens.
use std::path::Path;

use leaf_raft_store::compact::{self, CURRENT};
use leaf_raft_store::types::LogId;
use leaf_raft_store::{open, LogStore, NewTag, Op, OpenError, StateMachineStore, StoreOptions};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{CommittedLeaderId, RaftLogReader, RaftSnapshotBuilder, Vote};
use tempfile::TempDir;

use crate::support::{alloc_op, commit, copy_dir, create_op, entry, rt};

/// Options that rewrite sled's files above 1 MiB.
fn options() -> StoreOptions {
    StoreOptions { compact_above: 1 << 20, ..StoreOptions::default() }
}

/// Options that never rewrite sled's files.
fn never() -> StoreOptions {
    StoreOptions { compact_above: u64::MAX, compact_min: u64::MAX, ..StoreOptions::default() }
}

/// Opens `dir` with `opts`, waiting for sled to let go of a store dropped just before.
#[allow(clippy::result_large_err)] // the store's own error type; a test helper
fn open_with(dir: &Path, opts: &StoreOptions) -> Result<(LogStore, StateMachineStore), OpenError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match open(dir, opts) {
            Err(e) if e.to_string().contains("could not acquire lock") && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// What a reader of the store sees: the log, the vote, the applied log ID, tag `t` and the
/// number of tags.
fn contents(dir: &Path, opts: &StoreOptions) -> String {
    let (mut log, mut sm) = open_with(dir, opts).expect("open");
    rt().block_on(async {
        let entries = log.get_log_reader().await.try_get_log_entries(0..u64::MAX).await.unwrap();
        let vote = log.read_vote().await.unwrap();
        let applied = sm.applied_state().await.unwrap().0;
        let reader = sm.reader();
        format!("{entries:?}\n{vote:?}\n{applied:?}\n{:?}\n{}", reader.tag("t"), reader.tag_count())
    })
}

/// A closed store whose sled files hold mostly garbage: 20,000 tags created in 4 batches, tag
/// `t` allocated, a snapshot built (the state machine's tree shed into it) and the log purged
/// behind it but for its last entries, a vote saved.
fn garbage_store() -> TempDir {
    let dir = TempDir::new().unwrap();
    rt().block_on(async {
        let (mut log, mut sm) = open(dir.path(), &never()).unwrap();
        fill(&mut log, &mut sm).await;
    });
    dir
}

/// 20,000 tags created in 4 batches, tag `t` allocated, a snapshot built and the log purged
/// behind it but for its last entries, a vote saved.
async fn fill(log: &mut LogStore, sm: &mut StateMachineStore) {
    commit(log, sm, vec![entry(1, 1, create_op())]).await;
    for b in 0..4u64 {
        let tags = (0..5_000).map(|i| NewTag::segment(format!("b{b}-{i:05}"), 10, 1, "some words".into()));
        commit(log, sm, vec![entry(1, 2 + b, Op::CreateTags { tags: tags.collect() })]).await;
    }
    commit(log, sm, (6..=40).map(|i| entry(1, i, alloc_op(10))).collect()).await;
    sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    log.purge(LogId::new(CommittedLeaderId::new(1, 1), 35)).await.unwrap();
    log.save_vote(&Vote::new(1, 1)).await.unwrap();
}

fn sled_bytes(dir: &Path) -> u64 {
    let current = std::fs::read_to_string(dir.join(CURRENT)).map(|n| dir.join(n.trim())).unwrap_or(dir.to_owned());
    compact::files_bytes(&current).unwrap()
}

#[test]
fn a_store_of_mostly_garbage_reopens_rewritten_with_the_same_contents() {
    let dir = garbage_store();
    let before = contents(dir.path(), &never());
    let bytes = sled_bytes(dir.path());
    assert!(!dir.path().join(CURRENT).exists(), "never rewritten yet");
    assert_eq!(contents(dir.path(), &options()), before);
    assert_eq!(std::fs::read_to_string(dir.path().join(CURRENT)).unwrap(), "sled-1\n");
    let after = sled_bytes(dir.path());
    assert!(after * 4 < bytes, "sled's files: {after} bytes after the rewrite, {bytes} before");
    // An earlier release opens sled in the store's directory: it must fail, not start empty.
    assert!(dir.path().join("db").is_dir());
    assert!(sled::open(dir.path()).is_err(), "an earlier release would start on an empty database");
    // Below the ratio now: the next open keeps it.
    assert_eq!(contents(dir.path(), &options()), before);
    assert_eq!(std::fs::read_to_string(dir.path().join(CURRENT)).unwrap(), "sled-1\n");
}

/// A crash between each step of a rewrite, by the files it leaves: each opens with the same
/// contents, and what the rewrite left behind is removed.
#[test]
fn each_crash_window_of_a_rewrite_opens_the_same_store() {
    let dir = garbage_store();
    let before = contents(dir.path(), &never());
    // Before `current` names the new directory: a half-written one, and a pointer not renamed.
    let copy = TempDir::new().unwrap();
    copy_dir(dir.path(), copy.path());
    std::fs::create_dir(copy.path().join("sled-1")).unwrap();
    std::fs::write(copy.path().join("sled-1/db"), b"half").unwrap();
    std::fs::write(copy.path().join("current.tmp"), b"sled-1\n").unwrap();
    assert_eq!(contents(copy.path(), &never()), before);
    assert!(!copy.path().join("sled-1").exists() && !copy.path().join("current.tmp").exists());
    assert!(!copy.path().join(CURRENT).exists());
    // After `current` names it, before the old files are gone: they go at the next open.
    assert_eq!(contents(dir.path(), &options()), before);
    for name in ["conf", "snap.0000000000000001"] {
        std::fs::write(dir.path().join(name), b"old").unwrap();
    }
    std::fs::remove_dir(dir.path().join("db")).unwrap();
    std::fs::write(dir.path().join("db"), b"old").unwrap();
    std::fs::create_dir_all(dir.path().join("blobs")).unwrap();
    assert_eq!(contents(dir.path(), &never()), before);
    for name in ["conf", "snap.0000000000000001", "blobs"] {
        assert!(!dir.path().join(name).exists(), "{name} left behind");
    }
    assert!(dir.path().join("db").is_dir());
    // A `current` that names nothing is damage, named as such.
    std::fs::write(dir.path().join(CURRENT), b"sled-7\n").unwrap();
    let e = open_with(dir.path(), &never()).err().expect("a pointer to nothing was opened");
    assert!(matches!(e, OpenError::Damaged(_)) && e.to_string().contains(CURRENT), "{e}");
}

/// The same entries, votes and builds on two stores, one of which rewrites sled's files after
/// its builds while it runs: both reopen to the same log, vote and state, and the one rewritten
/// holds a fraction of the other's files.
#[test]
fn a_running_store_rewritten_after_its_builds_keeps_everything() {
    let run = |dir: &Path, opts: &StoreOptions| {
        rt().block_on(async {
            let (mut log, mut sm) = open(dir, opts).unwrap();
            fill(&mut log, &mut sm).await;
            commit(&mut log, &mut sm, (41..=60).map(|i| entry(1, i, alloc_op(10))).collect()).await;
            sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
            let rewritten = dir.join(CURRENT).exists();
            // Writes go on in whichever files are current.
            commit(&mut log, &mut sm, (61..=70).map(|i| entry(2, i, alloc_op(10))).collect()).await;
            log.purge(LogId::new(CommittedLeaderId::new(1, 1), 55)).await.unwrap();
            log.save_vote(&Vote::new(2, 1)).await.unwrap();
            rewritten
        })
    };
    let (control, rewritten) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    assert!(!run(control.path(), &never()), "never rewritten");
    assert!(run(rewritten.path(), &options()), "no rewrite while the store ran");
    let (kept, small) = (sled_bytes(control.path()), sled_bytes(rewritten.path()));
    assert!(small * 4 < kept, "sled's files: {small} bytes rewritten, {kept} not");
    let expected = contents(control.path(), &never());
    assert!(expected.contains("Vote") && expected.contains("index: 70"), "{expected}");
    assert_eq!(contents(rewritten.path(), &never()), expected);
}
