//! The store's sled database, synced for real.
//!
//! sled 0.34.7's `Db::flush()` writes its log with `sync_file_range` (`pagecache/iobuf.rs`),
//! which flushes neither the disk's cache nor the file's metadata, and writes a value too large
//! for a log segment to a file of its own under `blobs/` with no sync at all; only sled's
//! background thread fsyncs, every `flush_every_ms`. So a flush alone does not survive a power
//! cut. [`Synced::sync_now`] is what every write of the store awaits before it is acknowledged
//! (through [`Disk::sync`](crate::Disk::sync), the swappable handle the stores use):
//! - sled's flush (its buffers written to the file);
//! - `fdatasync` of sled's log file (`db`: its only log, segments included);
//! - `fdatasync` of every blob file not synced yet, then of `blobs/` itself;
//! - `fsync` of the store's directory when its entries changed (sled's own snapshot files
//!   `snap.*`, renamed into place without a sync of the directory).
//!
//! Syncs are grouped: a caller that arrives while a sync runs waits for it to end and then for
//! one more, which covers every caller that came meanwhile (see `Gate`); so N concurrent
//! writers cost about two `fdatasync`s, not N.
//!
//! [`Synced::open`] also syncs what sled made when it created the store (`conf`, `db`, the
//! directories) and [`create_dir_all`] syncs the parent of every directory it makes, so a new
//! store's entries survive a cut too.
//!
//! The choice (sync what sled wrote rather than a Raft log of our own) and its cost are in
//! ARCHITECTURE.md, "Durability".
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::mem::ManuallyDrop;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// sled's log file in the store's directory (sled 0.34.7 `Config::db_path`).
pub(crate) const LOG_FILE: &str = "db";
/// sled's configuration file, written once when it creates the store.
const CONF_FILE: &str = "conf";
/// sled's directory of values too large for a log segment (`Config::blob_path`).
pub(crate) const BLOB_DIR: &str = "blobs";

/// One sled database and the files behind it, synced for real. Derefs to [`sled::Db`]; cheap
/// to clone. The stores reach it through [`Disk`](crate::Disk), which may swap it for a
/// rewritten one (see `compact`).
#[derive(Clone)]
pub struct Synced {
    inner: Arc<Inner>,
}

struct Inner {
    /// The one handle on the database that outlives a call: dropped last, with
    /// [`sled_lock::last_drop`](crate::sled_lock::last_drop) (see `Drop for Inner`).
    db: ManuallyDrop<sled::Db>,
    dir: PathBuf,
    /// sled's log, opened a second time: `fdatasync` syncs the file, whichever descriptor asks.
    log: File,
    /// What a sync found synced: the blob files and the store directory's entries.
    seen: Mutex<Seen>,
    /// Directories every sync syncs first until one succeeds (see [`Synced::sync_dir_first`]).
    first: Mutex<Vec<PathBuf>>,
    gate: Gate,
}

/// Groups concurrent syncs. Each caller takes a ticket after its writes; a sync that starts
/// after a ticket was taken covers it (sled's flush inside it writes out everything written
/// before it starts). One sync runs at a time; callers that arrive meanwhile wait for the
/// next, which one of them runs for all.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    done: Condvar,
}

#[derive(Default)]
struct GateState {
    /// Tickets handed out.
    asked: u64,
    /// Every ticket up to this is synced.
    synced: u64,
    /// A sync is running.
    running: bool,
    /// The last sync that failed: the tickets it covered, and why. (A failed sync stops the
    /// node's Raft; a later caller tries again rather than trusting it.)
    failed: Option<(u64, String)>,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `sync` for this caller's ticket, or waits for a run that covers it.
    fn run(&self, sync: impl Fn() -> sled::Result<()>) -> sled::Result<()> {
        let mut st = self.lock();
        st.asked += 1;
        let ticket = st.asked;
        loop {
            if st.synced >= ticket {
                return Ok(());
            }
            if let Some((covered, why)) = &st.failed {
                if *covered >= ticket {
                    return Err(sled::Error::Io(io::Error::other(why.clone())));
                }
            }
            if st.running {
                st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            st.running = true;
            let covers = st.asked;
            drop(st);
            let result = sync();
            st = self.lock();
            st.running = false;
            match result {
                Ok(()) => st.synced = st.synced.max(covers),
                Err(e) => st.failed = Some((covers, e.to_string())),
            }
            self.done.notify_all();
        }
    }
}

#[derive(Default)]
struct Seen {
    /// Each blob file, with its length when it was last synced.
    blobs: BTreeMap<OsString, u64>,
    entries: BTreeSet<OsString>,
    /// Blob files synced so far (for tests).
    blob_syncs: u64,
}

impl std::ops::Deref for Synced {
    type Target = sled::Db;
    fn deref(&self) -> &sled::Db {
        &self.inner.db
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: `db` is taken here once, as `Inner` is dropped, and never touched again.
        let db = unsafe { ManuallyDrop::take(&mut self.db) };
        crate::sled_lock::last_drop(db);
    }
}

impl Synced {
    /// Takes `db`, opened on `dir`, and makes what sled created there durable.
    pub fn open(db: sled::Db, dir: &Path) -> io::Result<Synced> {
        let log = match File::open(dir.join(LOG_FILE)) {
            Ok(log) => log,
            Err(e) => {
                crate::sled_lock::last_drop(db);
                return Err(e);
            }
        };
        let disk = Synced {
            inner: Arc::new(Inner {
                db: ManuallyDrop::new(db),
                dir: dir.to_owned(),
                log,
                seen: Mutex::default(),
                first: Mutex::default(),
                gate: Gate::default(),
            }),
        };
        if let Ok(conf) = File::open(dir.join(CONF_FILE)) {
            conf.sync_all()?;
        }
        disk.inner.log.sync_all()?;
        disk.sync_files()?;
        sync_dir(dir)?;
        Ok(disk)
    }

    /// The directory of sled's files.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Makes everything written to the database so far durable (see the module's doc).
    pub fn sync_now(&self) -> sled::Result<()> {
        // A slow or failing fsync, for tests (see `failpoint`).
        #[cfg(feature = "failpoints")]
        if let Some(e) = crate::failpoint::io_fault("disk-fsync") {
            return Err(sled::Error::Io(e));
        }
        self.inner.gate.run(|| {
            let mut first = self.inner.first.lock().unwrap_or_else(|e| e.into_inner());
            for dir in first.iter() {
                sync_dir(dir)?;
            }
            first.clear();
            drop(first);
            self.inner.db.flush()?;
            self.inner.log.sync_data()?;
            self.sync_files()?;
            Ok(())
        })
    }

    /// Makes every sync from now on sync `dir` first, until one succeeds: for a rename in `dir`
    /// (a rewrite's `current`) that must be durable before any write to this database is
    /// acknowledged.
    pub(crate) fn sync_dir_first(&self, dir: &Path) {
        self.inner.first.lock().unwrap_or_else(|e| e.into_inner()).push(dir.to_owned());
    }

    /// Syncs the blob files that are new or grew since a sync last saw them, and the
    /// directories whose entries changed.
    ///
    /// sled writes a blob with no fsync of its own: it creates the file, then writes it in three
    /// `write`s, while other threads' syncs may list the directory. A blob synced when it was
    /// still empty, and never again, held 0 bytes after a power cut, under a log record that
    /// pointed at it (sled then panicked as it reopened its files: "tried to serialize
    /// Uninitialized"). So a blob's length is read before each sync of it, and a blob is synced
    /// again whenever it is longer than when last synced (sled only appends to a blob).
    fn sync_files(&self) -> io::Result<()> {
        let mut seen = self.inner.seen.lock().unwrap_or_else(|e| e.into_inner());
        let blob_dir = self.inner.dir.join(BLOB_DIR);
        let blobs = names(&blob_dir)?;
        let mut synced = BTreeMap::new();
        let mut new_blobs = false;
        for name in &blobs {
            let path = blob_dir.join(name);
            // The length first: the sync below covers at least this much.
            let len = match std::fs::metadata(&path) {
                Ok(m) => m.len(),
                // sled removed it meanwhile (its blob GC): nothing left to sync.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let before = seen.blobs.get(name).copied();
            if before != Some(len) {
                match File::open(&path) {
                    Ok(f) => f.sync_data()?,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                }
                seen.blob_syncs += 1;
                new_blobs |= before.is_none();
            }
            synced.insert(name.clone(), len);
        }
        if new_blobs {
            sync_dir(&blob_dir)?;
        }
        seen.blobs = synced;
        let entries = names(&self.inner.dir)?;
        if entries != seen.entries {
            sync_dir(&self.inner.dir)?;
            seen.entries = entries;
        }
        Ok(())
    }
}

/// The names in `dir` (none if it does not exist).
fn names(dir: &Path) -> io::Result<BTreeSet<OsString>> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.map(|e| e.file_name())).collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(BTreeSet::new()),
        Err(e) => Err(e),
    }
}

/// fsyncs the directory `dir`: its entries (files created, renamed or removed in it) survive a
/// power cut once this returns.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// `std::fs::create_dir_all`, durably (the parent of each directory it creates is synced), each
/// new directory mode 0700 (less what the umask takes).
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_all(parent)?;
    }
    // Owner-only: the store holds token hashes and obfuscation keys.
    match std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(e),
    }
    sync_dir(dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sync_covers_blobs_and_the_store_directory() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        let disk = Synced::open(db, dir.path()).unwrap();
        // A value larger than a quarter of a log segment goes to a blob file of its own.
        disk.insert(b"big", vec![7u8; 300 * 1024]).unwrap();
        disk.sync_now().unwrap();
        let seen = disk.inner.seen.lock().unwrap();
        assert!(!seen.blobs.is_empty(), "sled wrote no blob for a 300 KiB value: the blob path is not exercised");
        assert!(seen.entries.contains(&OsString::from(LOG_FILE)));
    }

    /// A blob a sync saw while sled was still writing it (created, not yet written) is synced
    /// again once it grew, and not again while it stays the same.
    #[test]
    fn a_blob_seen_half_written_is_synced_again_once_it_grew() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        let disk = Synced::open(db, dir.path()).unwrap();
        let blob_dir = dir.path().join(BLOB_DIR);
        std::fs::create_dir_all(&blob_dir).unwrap();
        // As sled's `write_blob` leaves it between its `create_new` and its writes.
        let blob = blob_dir.join("123456");
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&blob).unwrap();
        let syncs = || disk.inner.seen.lock().unwrap().blob_syncs;
        disk.sync_now().unwrap();
        assert_eq!(syncs(), 1, "the new, empty blob");
        disk.sync_now().unwrap();
        assert_eq!(syncs(), 1, "an unchanged blob is not synced again");
        std::io::Write::write_all(&mut f, &[7u8; 4096]).unwrap();
        disk.sync_now().unwrap();
        assert_eq!(syncs(), 2, "the blob grew after a sync saw it: synced again");
        assert_eq!(disk.inner.seen.lock().unwrap().blobs.get(std::ffi::OsStr::new("123456")), Some(&4096));
    }

    #[test]
    fn concurrent_callers_share_syncs_and_each_is_covered_by_one_that_started_after_it() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let gate = Arc::new(Gate::default());
        // `written` counts writes; a sync records how many it saw when it started (what its
        // flush covers), and each caller checks that a sync covering its write finished.
        let written = Arc::new(AtomicU64::new(0));
        let covered = Arc::new(AtomicU64::new(0));
        let syncs = Arc::new(AtomicU64::new(0));
        let callers: Vec<_> = (0..16)
            .map(|_| {
                let (gate, written, covered, syncs) = (gate.clone(), written.clone(), covered.clone(), syncs.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        let mine = written.fetch_add(1, Ordering::SeqCst) + 1;
                        gate.run(|| {
                            let saw = written.load(Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_micros(200));
                            syncs.fetch_add(1, Ordering::SeqCst);
                            covered.fetch_max(saw, Ordering::SeqCst);
                            Ok(())
                        })
                        .unwrap();
                        assert!(covered.load(Ordering::SeqCst) >= mine, "returned before a sync covered write {mine}");
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
        let syncs = syncs.load(Ordering::SeqCst);
        assert!(syncs < 16 * 200, "{syncs} syncs for 3,200 callers: nothing was grouped");
    }

    #[test]
    fn a_failed_sync_fails_every_caller_it_covered_and_the_next_one_tries_again() {
        let gate = Gate::default();
        let err = gate.run(|| Err(sled::Error::Io(io::Error::other("EIO on the log")))).unwrap_err();
        assert!(err.to_string().contains("EIO on the log"), "{err}");
        gate.run(|| Ok(())).unwrap();
    }

    /// A directory to sync first fails every sync until its sync succeeds once, then is
    /// forgotten.
    #[test]
    fn a_directory_to_sync_first_holds_every_sync_until_it_is_synced() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path().join("s")).open().unwrap();
        let disk = Synced::open(db, &dir.path().join("s")).unwrap();
        let first = dir.path().join("later");
        disk.sync_dir_first(&first);
        assert!(disk.sync_now().is_err(), "synced without the directory");
        assert!(disk.sync_now().is_err(), "the second sync forgot the directory");
        std::fs::create_dir(&first).unwrap();
        disk.sync_now().unwrap();
        std::fs::remove_dir(&first).unwrap();
        disk.sync_now().expect("the directory was synced once; it is not needed again");
    }

    #[test]
    fn create_dir_all_makes_every_level_and_accepts_an_existing_one() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("a/b/c");
        create_dir_all(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all(&deep).unwrap();
        std::fs::write(dir.path().join("file"), b"x").unwrap();
        assert!(create_dir_all(&dir.path().join("file")).is_err());
    }
}
