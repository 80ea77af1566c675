//! sled's files rewritten once they hold mostly what sled no longer uses, at open and while the
//! node runs (after a snapshot build, and after the log is purged).
//!
//! sled 0.34.7 keeps its `db` file at the largest size it ever reached and leaves blob files
//! behind (measured after a million tags: 161.5 MB of `db` and 21.8 MB of blobs for 80.7 kB of
//! records; three reopens changed nothing). The state machine's tree holds only the changes
//! since its base snapshot (`state_machine/base.rs`), so what sled holds stays small. When
//! sled's files are above [`StoreOptions::compact_above`](crate::StoreOptions) bytes or a quarter
//! of the snapshot file (whichever is less), and above [`GARBAGE_RATIO`] times the records its trees
//! hold (see [`due`]; checked at open, after each snapshot build and after each purge of the
//! log), [`rewrite_if_due`] copies every tree into a new directory and switches to it, while
//! the stores go on writing (how, in [`Disk`](crate::Disk)):
//!
//! 1. `sled-<n>/`: a new database, every tree copied while writes go on, then the keys they
//!    wrote meanwhile, a round at a time; synced (sled's flush, `fdatasync` of its files, the
//!    directory and the store's directory);
//! 2. with writes held off: the keys written since the last round copied and synced;
//! 3. the file `current` (written as `current.tmp`, synced, renamed, the directory synced)
//!    names it, and the stores switch to it; writes go on there;
//! 4. the old files removed: an earlier `sled-<m>/`, or sled's files in the store's directory
//!    itself (where releases before this one, and this one until its first rewrite, keep them),
//!    whose `db` becomes an empty directory: an earlier release opening the store fails then,
//!    instead of starting on an empty database.
//!
//! A crash before 3 leaves the old files current, holding every write acknowledged (each was
//! synced there), and the next open removes the new ones; after 3, the new ones, and the next
//! open removes the old. No write is acknowledged between the rename and the directory's sync.
//! sled's ID generator starts again in the new database: a snapshot file's name holds its log
//! index and such an ID, and a name met again is the snapshot of the same log index, so of the
//! same committed state. The `log-end` file and the snapshot files stay where they are, in the
//! store's directory.
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::disk::{Disk, Touched};
use crate::durable::{sync_dir, Synced, LOG_FILE};
use crate::failpoint::failpoint;
use crate::verify::Damage;

/// The file naming the directory of sled's files, in the store's directory.
pub const CURRENT: &str = "current";

/// A rewrite is due once sled's files are more than this many times its records. A new
/// database holds records in about four times their size (a million tags' 47.7 MB of records
/// imported into 195 MB), so a lower ratio rewrites for little: after a million tags created
/// faster than snapshots were built, 23.6 MB of records in 199 MB of files took 5.8 s to
/// rewrite, for a directory as large.
pub const GARBAGE_RATIO: u64 = 16;

/// The prefix of the directories of sled's files.
const PREFIX: &str = "sled-";

/// The files sled keeps in its directory, besides `db`: its config, blobs, and its own
/// snapshots (`snap.<hex>`).
fn is_sled_file(name: &str) -> bool {
    name == "conf" || name == crate::durable::BLOB_DIR || name.starts_with("snap.")
}

/// Why a rewrite failed.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error("rewriting sled's files: {0}")]
    Io(#[from] io::Error),
    #[error("rewriting sled's files: {0}")]
    Sled(#[from] sled::Error),
    #[error(transparent)]
    Damaged(Damage),
}

/// The directory of sled's files in the store `dir`: the one `current` names, or `dir` itself.
/// Removes what an interrupted or finished rewrite left behind first.
pub fn prepare(dir: &Path) -> Result<PathBuf, CompactError> {
    let pointer = dir.join(CURRENT);
    let current = match fs::read(&pointer) {
        Ok(bytes) => {
            let damaged = |why: &str| {
                CompactError::Damaged(Damage::File { file: pointer.clone(), offset: 0, why: why.to_owned() })
            };
            let name = std::str::from_utf8(&bytes).map_err(|_| damaged("not text"))?.trim_end_matches('\n');
            if number_of(name).is_none() || !dir.join(name).join(LOG_FILE).is_file() {
                return Err(damaged(&format!("{name:?} names no directory of sled's files")));
            }
            Some(name.to_owned())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e.into()),
    };
    let mut changed = false;
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let stale_dir = name.starts_with(PREFIX) && Some(&name) != current.as_ref();
        let stale_legacy = current.is_some() && (is_sled_file(&name) || (name == LOG_FILE && !entry.path().is_dir()));
        if stale_dir || stale_legacy || name == format!("{CURRENT}.tmp") {
            remove(&entry.path())?;
            changed = true;
        }
    }
    if current.is_some() && !dir.join(LOG_FILE).is_dir() {
        fs::create_dir(dir.join(LOG_FILE))?;
        changed = true;
    }
    if changed {
        sync_dir(dir)?;
    }
    Ok(current.map_or_else(|| dir.to_owned(), |name| dir.join(name)))
}

/// The `n` of a directory named `sled-<n>`.
fn number_of(name: &str) -> Option<u64> {
    name.strip_prefix(PREFIX).filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))?.parse().ok()
}

fn remove(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    }
}

/// Bytes of the files sled keeps in `sled_dir`.
pub fn files_bytes(sled_dir: &Path) -> io::Result<u64> {
    let mut total = 0;
    for entry in fs::read_dir(sled_dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == LOG_FILE || is_sled_file(&name) {
            let meta = entry.metadata()?;
            total += if meta.is_dir() {
                fs::read_dir(entry.path())?
                    .map(|e| e.and_then(|e| e.metadata()).map(|m| m.len()))
                    .sum::<io::Result<u64>>()?
            } else {
                meta.len()
            };
        }
    }
    Ok(total)
}

/// The least size of sled's files a rewrite is due at by default, whatever their live state
/// ([`StoreOptions::compact_min`](crate::StoreOptions)).
pub const MIN_FILES: u64 = 1 << 20;

/// The bounds of [`due`]: sled's files are worth a rewrite above `above` bytes or a quarter of
/// the state, whichever is less, but never at `min` bytes or less.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub above: u64,
    pub min: u64,
}

/// Whether sled's files of `files` bytes, holding `records` bytes of keys and values beside a
/// snapshot file of `live` bytes (the state), are worth a rewrite: above the lesser of
/// `bounds.above` and a quarter of the snapshot (at least `bounds.min`), and above
/// [`GARBAGE_RATIO`] times their records. The quarter keeps the data directory within 1.25 ×
/// its snapshot once a snapshot holds the state.
pub fn due(files: u64, records: u64, live: u64, bounds: Bounds) -> bool {
    files > floor(live, bounds) && files > records.saturating_mul(GARBAGE_RATIO)
}

fn floor(live: u64, bounds: Bounds) -> u64 {
    bounds.above.min((live / 4).max(bounds.min))
}

/// Bytes of the largest snapshot file in `snap_dir` (the live state, for [`due`]); 0 without
/// one.
pub fn live_bytes(snap_dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(snap_dir) else { return 0 };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".snap"))
        .filter_map(|e| e.metadata().ok().map(|m| m.len()))
        .max()
        .unwrap_or(0)
}

/// Bytes of keys and values in every tree of `db`.
pub fn records_bytes(db: &sled::Db) -> sled::Result<u64> {
    let mut total = 0u64;
    for name in db.tree_names() {
        for item in db.open_tree(&name)?.iter() {
            let (k, v) = item?;
            total += (k.len() + v.len()) as u64;
        }
    }
    Ok(total)
}

/// What a rewrite did.
#[derive(Debug)]
pub struct Rewritten {
    /// The directory of the new files.
    pub to: PathBuf,
    /// Bytes of the old files, and of the records they held when it began.
    pub files: u64,
    pub records: u64,
    /// Keys written while it copied, copied again: in every round, and in its last (with
    /// writes held off).
    pub noted: usize,
    pub last_round: usize,
    /// How long writes were held off (the last round and the switch).
    pub held_ms: u64,
}

/// Copy rounds while writes go on, before the last one that holds them off.
const ROUNDS: usize = 4;

/// A round with fewer keys than this to copy again is the last.
const FEW_KEYS: usize = 1024;

/// A rewrite that gives up because writes came faster than it copied (see `disk::MAX_NOTED`).
fn too_many() -> CompactError {
    CompactError::Io(io::Error::other(format!(
        "more than {} keys written during one round of the copy",
        crate::disk::MAX_NOTED
    )))
}

/// Rewrites sled's files when [`due`] beside a state of `live` bytes (steps 1 to 4 above),
/// while the stores run (see [`Disk`](crate::Disk)); `None` when not due, or another rewrite
/// runs. An error from before the new files are current (a full disk, say) leaves the old ones
/// current and removes what was written of the new ones; one after (the directory's sync after
/// the rename) leaves the new ones current, and every later sync tries that sync again.
pub fn rewrite_if_due(disk: &Disk, live: u64) -> Result<Option<Rewritten>, CompactError> {
    let Ok(_one) = disk.rewriting() else { return Ok(None) };
    let old = disk.dir();
    let files = files_bytes(&old)?;
    if files <= floor(live, disk.bounds()) {
        return Ok(None);
    }
    let db = disk.db();
    let records = records_bytes(&db)?;
    if !due(files, records, live, disk.bounds()) {
        return Ok(None);
    }
    rewrite_now(disk, &db, &old).map(|last_round| Some(Rewritten { files, records, ..last_round }))
}

/// Rewrites `db`, the current database in `old`, now (the rest of [`rewrite_if_due`]).
fn rewrite_now(disk: &Disk, db: &sled::Db, old: &Path) -> Result<Rewritten, CompactError> {
    let dir = disk.store_dir().to_owned();
    let n = old.file_name().and_then(|n| number_of(&n.to_string_lossy())).map_or(1, |n| n + 1);
    let name = format!("{PREFIX}{n}");
    let (noted, last_round, held_ms) = match rewrite(disk, db, &dir, &name) {
        Ok(counts) => counts,
        Err(e) => {
            disk.untrack();
            // Switched, and only the directory's sync after the rename failed: the new files
            // are current (every later sync tries the directory again), the old ones go at the
            // next open. Nothing of the new may be removed.
            if disk.dir() == dir.join(&name) {
                return Err(e);
            }
            // Best effort: the next open removes them too.
            let _ = fs::remove_dir_all(dir.join(&name));
            let _ = fs::remove_file(dir.join(format!("{CURRENT}.tmp")));
            return Err(e);
        }
    };
    // The old files go now (or at the next open): nothing reads them any more.
    if let Err(e) = prepare(&dir) {
        tracing::warn!(error = %e, "sled's old files stay until the next open");
    }
    Ok(Rewritten { to: dir.join(name), files: 0, records: 0, noted, last_round, held_ms })
}

/// Steps 1 to 3 into `dir/name`, from `db` (the current database) while writes go on; returns
/// the keys copied again in every round, and in the last, and the milliseconds writes were held
/// off.
fn rewrite(disk: &Disk, db: &sled::Db, dir: &Path, name: &str) -> Result<(usize, usize, u64), CompactError> {
    let path = dir.join(name);
    if path.exists() {
        fs::remove_dir_all(&path)?;
    }
    disk.track();
    // Wrapped at once: its last drop, on any error below, keeps sled's batches away (`sled_lock`).
    let new = Synced::open(disk.config(&path).open()?, &path)?;
    copy_trees(db, &new)?;
    let mut noted = 0;
    for _ in 0..ROUNDS {
        let touched = disk.take_touched().ok_or_else(too_many)?;
        noted += touched.len();
        let few = touched.len() < FEW_KEYS;
        copy_keys(db, &new, &touched)?;
        if few {
            break;
        }
    }
    new.sync_now()?;
    // The new directory's entry, before `current` may name it.
    sync_dir(dir)?;
    failpoint!("compact-copied");
    let mut last = 0;
    let held = std::time::Instant::now();
    disk.switch(new, |old, new, touched| {
        let touched = touched.ok_or_else(|| (too_many(), false))?;
        last = touched.len();
        let unrenamed = |e: CompactError| (e, false);
        copy_keys(old, new, &touched).map_err(|e| unrenamed(e.into()))?;
        new.sync_now().map_err(|e| unrenamed(e.into()))?;
        name_current(dir, name).map_err(|e| unrenamed(e.into()))?;
        failpoint!("compact-renamed");
        // The switch: from here the new files are current, whatever fails. The writes that
        // follow are acknowledged once synced in them, so the name must be durable first;
        // until a sync of `dir` succeeds, every sync fails.
        new.sync_dir_first(dir);
        new.sync_now().map_err(|e| (e.into(), true))
    })?;
    // From the request of the write lock: writes that came meanwhile waited that long at most.
    Ok((noted + last, last, held.elapsed().as_millis() as u64))
}

/// Copies the pairs `touched` names from `from` into `to` (or removes them where `from` has
/// none).
fn copy_keys(from: &sled::Db, to: &sled::Db, touched: &Touched) -> sled::Result<()> {
    let mut trees: Option<(&str, sled::Tree, sled::Tree, sled::Batch, usize)> = None;
    for (name, key) in touched {
        if trees.as_ref().is_none_or(|(n, ..)| n != name) {
            if let Some((_, _, target, batch, _)) = trees.take() {
                crate::sled_lock::batch(|| target.apply_batch(batch))?;
            }
            trees = Some((name, from.open_tree(name)?, to.open_tree(name)?, sled::Batch::default(), 0));
        }
        if let Some((_, source, target, batch, n)) = trees.as_mut() {
            match source.get(key)? {
                Some(v) => batch.insert(key, v),
                None => batch.remove(key),
            }
            *n += 1;
            if *n == COPY_BATCH {
                crate::sled_lock::batch(|| target.apply_batch(std::mem::take(batch)))?;
                *n = 0;
            }
        }
    }
    if let Some((_, _, target, batch, _)) = trees {
        crate::sled_lock::batch(|| target.apply_batch(batch))?;
    }
    Ok(())
}

/// Keys copied per sled batch.
const COPY_BATCH: usize = 1024;

/// Copies every tree of `from` into `to`. Not sled's `export`/`import`: they panic on a read or
/// write error (a full disk), where this returns it.
fn copy_trees(from: &sled::Db, to: &sled::Db) -> sled::Result<()> {
    for name in from.tree_names() {
        let (source, target) = (from.open_tree(&name)?, to.open_tree(&name)?);
        let mut batch = sled::Batch::default();
        let mut n = 0;
        for item in source.iter() {
            let (k, v) = item?;
            batch.insert(k, v);
            n += 1;
            if n == COPY_BATCH {
                crate::sled_lock::batch(|| target.apply_batch(std::mem::take(&mut batch)))?;
                n = 0;
            }
        }
        crate::sled_lock::batch(|| target.apply_batch(batch))?;
    }
    Ok(())
}

/// Step 3: the file `current` names `name`, durably but for `dir`'s sync (the caller's).
fn name_current(dir: &Path, name: &str) -> io::Result<()> {
    let tmp = dir.join(format!("{CURRENT}.tmp"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(format!("{name}\n").as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(CURRENT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::disk;

    /// Due above the lesser of the bound and a quarter of the state (at least 1 MiB), and only
    /// over mostly garbage.
    #[test]
    fn due_above_the_lesser_of_the_bound_and_a_quarter_of_the_state() {
        const MB: u64 = 1 << 20;
        let due = |files, records, live, above| due(files, records, live, Bounds { above, min: MIN_FILES });
        // 24 MiB of files over 100 kB of records beside a 47 MiB snapshot: under the bound,
        // above a quarter of the state.
        assert!(due(24 * MB, 100_000, 47 * MB, 64 * MB));
        assert!(!due(24 * MB, 100_000, 97 * MB, 64 * MB));
        // The same files over 7 MiB of records: a new database would be about as large.
        assert!(!due(24 * MB, 7 * MB, 47 * MB, 64 * MB));
        // A small state: from 1 MiB.
        assert!(!due(MB, 1_000, 0, 64 * MB));
        assert!(due(MB + 1, 1_000, 0, 64 * MB));
        // Above the bound, whatever the state.
        assert!(due(65 * MB, MB, 500 * MB, 64 * MB));
    }

    fn now(disk: &Disk) -> Result<Rewritten, CompactError> {
        rewrite_now(disk, &disk.db(), &disk.dir())
    }

    /// sled's files in `dir`, opened once the last handle on them let go of its lock.
    fn reopen(dir: &Path) -> sled::Db {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match sled::open(dir) {
                Err(e) if e.to_string().contains("could not acquire lock") && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                other => break other.unwrap(),
            }
        }
    }

    /// A rewrite that fails before the switch (here `current` cannot be written, as a full
    /// disk or any I/O error would stop it) leaves the old files current and untouched, and
    /// removes what it wrote; writes go on in the old files.
    #[test]
    fn a_failed_rewrite_leaves_the_old_files_current() {
        let (dir, disk) = disk();
        let tree = disk.tree("t").unwrap();
        for i in 0..3_000u32 {
            tree.insert(i.to_be_bytes(), vec![7u8; 100]).unwrap();
        }
        let obstacle = dir.path().join(format!("{CURRENT}.tmp"));
        fs::create_dir_all(obstacle.join("in-the-way")).unwrap();
        let e = now(&disk).expect_err("writing current.tmp over a directory should fail");
        assert!(matches!(e, CompactError::Io(_)), "{e}");
        assert!(!dir.path().join(CURRENT).exists() && !dir.path().join("sled-1").exists());
        assert_eq!(disk.dir(), dir.path());
        assert!(dir.path().join(LOG_FILE).is_file(), "the old files were touched");
        tree.insert(b"after", b"x".as_slice()).unwrap();
        assert_eq!(tree.len(), 3_001);
        // The same rewrite, unobstructed, copies every pair and the stores go on in it.
        fs::remove_dir_all(&obstacle).unwrap();
        let r = now(&disk).unwrap();
        assert_eq!(r.to, dir.path().join("sled-1"));
        assert_eq!(disk.dir(), r.to);
        assert!(dir.path().join(LOG_FILE).is_dir(), "the old log file should give way to an empty directory");
        tree.insert(b"switched", b"y".as_slice()).unwrap();
        disk.sync_now().unwrap();
        drop((tree, disk));
        assert_eq!(prepare(dir.path()).unwrap(), r.to);
        let copy = reopen(&r.to).open_tree("t").unwrap();
        assert_eq!(copy.len(), 3_002);
        assert!(copy.contains_key(b"switched").unwrap());
    }

    /// Writes that go on while rewrites copy all land in the files that end up current, and an
    /// iterator made before a switch goes on after it, in the new files.
    #[test]
    fn writes_during_rewrites_are_all_kept() {
        use std::collections::BTreeMap;
        use std::sync::atomic::{AtomicBool, Ordering};
        let (dir, disk) = disk();
        let tree = disk.tree("t").unwrap();
        for i in 0..40_000u32 {
            tree.insert(i.to_be_bytes(), i.to_le_bytes().to_vec()).unwrap();
        }
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let writer = std::thread::spawn({
            let (tree, stop) = (tree.clone(), stop.clone());
            move || {
                // What the tree must hold for the keys this thread writes (80,000 and up, and
                // every third existing key, removed).
                let mut model = BTreeMap::new();
                let mut i = 0u32;
                while !stop.load(Ordering::SeqCst) || i < 20_000 {
                    let k = 80_000 + i;
                    tree.insert(k.to_be_bytes(), b"w".as_slice()).unwrap();
                    model.insert(k, true);
                    if i.is_multiple_of(3) && i < 40_000 {
                        let mut batch = crate::Batch::default();
                        batch.remove(&i.to_be_bytes());
                        batch.insert(&(200_000 + i).to_be_bytes(), b"b".as_slice());
                        tree.apply_batch(batch).unwrap();
                        model.insert(i, false);
                        model.insert(200_000 + i, true);
                    }
                    i += 1;
                }
                model
            }
        });
        let mut iter = tree.range(0u32.to_be_bytes()..1_000u32.to_be_bytes());
        let first: Vec<_> = iter.by_ref().take(10).map(|r| r.unwrap().0).collect();
        let (mut rounds, mut noted) = (0, 0);
        for _ in 0..3 {
            let r = now(&disk).unwrap();
            rounds += 1;
            noted += r.noted;
            assert_eq!(disk.dir(), r.to);
        }
        assert!(noted > 0, "no write overlapped a copy: this test would not see one lost");
        // The iterator made before the switches goes on from where it was, in key order.
        let keys: Vec<_> = first.into_iter().chain(iter.map(|r| r.unwrap().0)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]) && keys.len() > 600, "{} keys", keys.len());
        stop.store(true, Ordering::SeqCst);
        let model = writer.join().unwrap();
        let check = |t: &dyn Fn(u32) -> bool| {
            for (k, present) in &model {
                assert_eq!(t(*k), *present, "key {k} after {rounds} rewrites");
            }
        };
        check(&|k| tree.contains_key(k.to_be_bytes()).unwrap());
        disk.sync_now().unwrap();
        let current = disk.dir();
        drop((tree, disk));
        assert_eq!(prepare(dir.path()).unwrap(), current);
        let reopened = reopen(&current).open_tree("t").unwrap();
        check(&|k| reopened.contains_key(k.to_be_bytes()).unwrap());
        assert!(reopened.contains_key(39_998u32.to_be_bytes()).unwrap(), "a key written before is gone");
    }
}
