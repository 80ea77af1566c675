//! Bit rot: a flipped byte in sled's log file, its config file or the snapshot file stops the
//! open with the file and the offset, and a flip the open lets through changed nothing that is
//! read.
use std::path::Path;
use std::time::{Duration, Instant};

use leaf_raft_store::{open, OpenError, StoreOptions};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{RaftLogReader, RaftSnapshotBuilder};
use tempfile::TempDir;

use crate::support::{alloc_op, commit, copy_dir, create_op, entry, reopen, rt};

/// Entries the store under test holds.
const ENTRIES: u64 = 3_000;

/// What a reader of the store sees: every log entry, the tag's record and the applied log ID;
/// then, the store closed, every key and value of every sled tree.
#[allow(clippy::result_large_err)] // the store's own error type; a test helper
fn contents(dir: &Path) -> Result<String, OpenError> {
    let (mut log, mut sm) = match open(dir, &StoreOptions::default()) {
        Ok(s) => s,
        Err(e) if e.to_string().contains("could not acquire lock") => reopen(dir),
        Err(e) => return Err(e),
    };
    let seen = rt().block_on(async {
        let entries = log.get_log_reader().await.try_get_log_entries(0..u64::MAX).await.expect("entries read back");
        let tag = sm.reader().tag("t");
        let applied = sm.applied_state().await.expect("applied state").0;
        format!("{entries:?}\n{tag:?}\n{applied:?}")
    });
    drop((log, sm));
    let deadline = Instant::now() + Duration::from_secs(10);
    let db = loop {
        match sled::open(dir) {
            Err(e) if e.to_string().contains("could not acquire lock") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            other => break other.expect("sled reopens what the store opened"),
        }
    };
    let mut trees = Vec::new();
    for name in db.tree_names() {
        let pairs: Vec<_> = db.open_tree(&name).unwrap().iter().map(|r| r.expect("every tree reads back")).collect();
        trees.push((name, pairs));
    }
    Ok(format!("{seen}\n{trees:?}"))
}

fn flip(path: &Path, offset: u64, len: usize) {
    leaf_raft_store::failpoint::flip_bytes(path, offset, len).unwrap();
}

/// A closed store holding tag `t`'s creation and allocations up to log index `last`, committed
/// 50 entries at a time; with a snapshot at the end if `snapshot`.
fn written_store(last: u64, snapshot: bool) -> TempDir {
    let dir = TempDir::new().unwrap();
    rt().block_on(async {
        let (mut log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        commit(&mut log, &mut sm, vec![entry(1, 1, create_op())]).await;
        for i in (2..=last).step_by(50) {
            let to = (i + 49).min(last);
            commit(&mut log, &mut sm, (i..=to).map(|i| entry(1, i, alloc_op(10))).collect()).await;
        }
        if snapshot {
            sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        }
    });
    dir
}

/// Flips 8 bytes at 48 places spread over sled's log file, each in a fresh copy of the store:
/// every open either refuses, naming `db` and an offset at or before the flip in its segment
/// (sled's, or where its replay stopped, found by `sled_log`), or reads back exactly what was
/// written (the flip hit space sled no longer uses). At least some flips must be refused.
#[test]
fn a_flip_in_the_log_file_is_refused_with_its_offset_or_harms_nothing() {
    let dir = written_store(ENTRIES, false);
    let clean = contents(dir.path()).unwrap();
    let db = dir.path().join("db");
    let len = std::fs::metadata(&db).unwrap().len();
    let (mut refused, mut harmless) = (0, 0);
    for k in 0..48u64 {
        let offset = 4096 + k * (len - 4096 - 8) / 48;
        let copy = TempDir::new().unwrap();
        copy_dir(dir.path(), copy.path());
        flip(&copy.path().join("db"), offset, 8);
        match contents(copy.path()) {
            Ok(c) => {
                assert_eq!(c, clean, "a flip at {offset} was let through and changed what is read");
                harmless += 1;
            }
            Err(OpenError::Damaged(d)) => {
                let text = d.to_string();
                assert!(text.starts_with(&format!("{}:", copy.path().join("db").display())), "{text}");
                // Where sled's replay stopped (a message) or the page it read: at or before
                // the flip, in its segment.
                let at: u64 = text
                    .split(" at offset ")
                    .nth(1)
                    .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("a flip at {offset}: no offset in {text}"));
                assert!(at <= offset + 8 && offset - at.min(offset) < 512 * 1024, "a flip at {offset} placed at {at}");
                refused += 1;
            }
            Err(e) => panic!("a flip at {offset}: not reported as damage: {e}"),
        }
    }
    println!("of 48 flips in a {len}-byte log: {refused} refused, {harmless} in unused space");
    assert!(refused >= 5, "only {refused} of 48 flips refused: is the open reading the store back?");
}

/// A flip anywhere in the current snapshot file stops the open, naming the file and an
/// offset inside it.
#[test]
fn a_flip_in_the_snapshot_file_is_refused_with_its_offset() {
    let dir = written_store(200, true);
    contents(dir.path()).unwrap();
    let snaps = dir.path().join(leaf_raft_store::SNAPSHOT_DIR);
    let file = std::fs::read_dir(&snaps).unwrap().next().unwrap().unwrap().file_name();
    let len = std::fs::metadata(snaps.join(&file)).unwrap().len();
    for offset in [0, len / 3, len / 2, len - 1] {
        let copy = TempDir::new().unwrap();
        copy_dir(dir.path(), copy.path());
        let path = copy.path().join(leaf_raft_store::SNAPSHOT_DIR).join(&file);
        flip(&path, offset, 1);
        let e = contents(copy.path()).expect_err("a damaged snapshot was opened");
        let text = e.to_string();
        assert!(matches!(e, OpenError::Damaged(_)), "{text}");
        let at: u64 = text
            .split(": damaged at offset ")
            .nth(1)
            .and_then(|r| r.split(':').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no offset in {text}"));
        assert!(text.contains(&path.display().to_string()) && at <= len, "{text}");
        assert!(text.contains("replace it from its peers"), "{text}");
    }
}

/// A flip in sled's config file (which sled itself only warns about, then parses) stops the
/// open, naming the file.
#[test]
fn a_flip_in_sleds_config_file_is_refused() {
    let dir = written_store(50, false);
    contents(dir.path()).unwrap();
    let len = std::fs::metadata(dir.path().join("conf")).unwrap().len();
    for offset in [0, len / 2, len - 5, len - 1] {
        let copy = TempDir::new().unwrap();
        copy_dir(dir.path(), copy.path());
        let conf = copy.path().join("conf");
        flip(&conf, offset, 1);
        let e = contents(copy.path()).expect_err("a damaged config file was opened");
        let text = e.to_string();
        assert!(matches!(e, OpenError::Damaged(_)) && text.contains(&conf.display().to_string()), "{text}");
    }
}
