//! sled's files rewritten at open once they hold mostly what sled no longer uses.
//!
//! sled 0.34.7 keeps its `db` file at the largest size it ever reached and leaves blob files
//! behind (measured after a million tags: 161.5 MB of `db` and 21.8 MB of blobs for 80.7 kB of
//! records; three reopens changed nothing). The state machine's tree holds only the changes
//! since its base snapshot (`state_machine/base.rs`), so what sled holds stays small; an open
//! that finds sled's files above [`StoreOptions::compact_above`](crate::StoreOptions) bytes and
//! above [`GARBAGE_RATIO`] times the records its trees hold copies every tree into a new
//! directory and switches to it:
//!
//! 1. `sled-<n>.part/`: a new database, every tree copied, synced (sled's flush, `fdatasync`
//!    of its files, the directory) and closed (sled's ID generator starts again: a snapshot
//!    file's name holds its log index and such an ID, and a name met again is the snapshot of
//!    the same log index, so of the same committed state);
//! 2. renamed `sled-<n>/`, the store's directory synced;
//! 3. the file `current` (written as `current.tmp`, synced, renamed, the directory synced) names
//!    it;
//! 4. the old files removed: an earlier `sled-<m>/`, or sled's files in the store's directory
//!    itself (where releases before this one, and this one until its first rewrite, keep them),
//!    whose `db` becomes an empty directory: an earlier release opening the store fails then,
//!    instead of starting on an empty database.
//!
//! A crash before 3 leaves the old files current, and the next open removes the new ones; after
//! 3, the new ones, and the next open removes the old. The `log-end` file and the snapshot
//! files stay where they are, in the store's directory.
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::durable::{sync_dir, Disk, LOG_FILE};
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

/// The ending of a directory being written.
const PART: &str = ".part";

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

/// Whether sled's files of `files` bytes, holding `records` bytes of keys and values, are worth
/// a rewrite.
pub fn due(files: u64, records: u64, compact_above: u64) -> bool {
    files > compact_above && files > records.saturating_mul(GARBAGE_RATIO)
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

/// Rewrites `db`, whose files are in `old` (the store's directory `dir` or a `sled-<m>` in it),
/// into a new directory and makes it current (steps 1 to 4 above); returns that directory. An
/// error comes only before the new directory is current (a full disk, say): the old files stay
/// current, and what was written of the new ones is removed. The caller closes `db`.
pub fn rewrite(dir: &Path, old: &Path, db: &sled::Db) -> Result<PathBuf, CompactError> {
    let n = old.file_name().and_then(|n| number_of(&n.to_string_lossy())).map_or(1, |n| n + 1);
    let name = format!("{PREFIX}{n}");
    let part = dir.join(format!("{name}{PART}"));
    let switched = switch(dir, &name, &part, db);
    if switched.is_err() {
        // Best effort: the next open removes it too.
        let _ = fs::remove_dir_all(&part);
        let _ = fs::remove_dir_all(dir.join(&name));
        let _ = fs::remove_file(dir.join(format!("{CURRENT}.tmp")));
    }
    switched?;
    // The new files are current: the old ones go now, or at the next open; not before the
    // name is durable (a power cut could take it back, and the old files would be current).
    match sync_dir(dir).map_err(CompactError::from).and_then(|()| prepare(dir).map(drop)) {
        Ok(()) => {}
        Err(e) => tracing::warn!(error = %e, "sled's old files stay until the next open"),
    }
    Ok(dir.join(name))
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
                target.apply_batch(std::mem::take(&mut batch))?;
                n = 0;
            }
        }
        target.apply_batch(batch)?;
    }
    Ok(())
}

/// Steps 1 to 3: the new database in `part`, renamed `name`, and `current` naming it.
fn switch(dir: &Path, name: &str, part: &Path, db: &sled::Db) -> Result<(), CompactError> {
    if part.exists() {
        fs::remove_dir_all(part)?;
    }
    {
        let new = sled::Config::new().path(part).open()?;
        copy_trees(db, &new)?;
        let new = Disk::open(new, part)?;
        new.sync_now()?;
    }
    fs::rename(part, dir.join(name))?;
    sync_dir(dir)?;
    let tmp = dir.join(format!("{CURRENT}.tmp"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(format!("{name}\n").as_bytes())?;
    f.sync_all()?;
    // The switch: nothing after it may fail the rewrite (the caller would remove what
    // `current` names).
    fs::rename(&tmp, dir.join(CURRENT))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rewrite that fails before the switch (here the new directory's name is taken, as a
    /// full disk or any I/O error would stop it) leaves the old files current and untouched,
    /// and removes what it wrote.
    #[test]
    fn a_failed_rewrite_leaves_the_old_files_current() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        let tree = db.open_tree("t").unwrap();
        for i in 0..3_000u32 {
            tree.insert(i.to_be_bytes(), vec![7u8; 100]).unwrap();
        }
        db.flush().unwrap();
        let obstacle = dir.path().join("sled-1");
        fs::create_dir_all(obstacle.join("in-the-way")).unwrap();
        let e = rewrite(dir.path(), dir.path(), &db).expect_err("the rename onto a full directory should fail");
        assert!(matches!(e, CompactError::Io(_)), "{e}");
        assert!(!dir.path().join(CURRENT).exists() && !dir.path().join("sled-1.part").exists());
        assert_eq!(prepare(dir.path()).unwrap(), dir.path());
        assert_eq!(tree.len(), 3_000);
        assert!(dir.path().join(LOG_FILE).is_file(), "the old files were touched");
        // The same rewrite, unobstructed, copies every pair.
        let new = rewrite(dir.path(), dir.path(), &db).unwrap();
        drop((tree, db));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let copy = loop {
            match sled::open(&new) {
                Err(e) if e.to_string().contains("could not acquire lock") && std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(20))
                }
                other => break other.unwrap(),
            }
        };
        assert_eq!(copy.open_tree("t").unwrap().len(), 3_000);
    }
}
