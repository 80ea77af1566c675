//! A test file system that models a power cut, after Jepsen's LazyFS: a FUSE passthrough over a
//! backing directory that keeps track of everything written but not yet synced, and forgets exactly
//! that at a simulated power cut.
//!
//! ```no_run
//! # fn main() -> std::io::Result<()> {
//! use leaf_lazyfs::{LazyFs, Options};
//! let fs = LazyFs::new("/tmp/backing".as_ref(), Options::default())?;
//! let mounted = fs.mount("/tmp/mnt".as_ref())?;
//! // ... run processes with their data under /tmp/mnt, kill them with SIGKILL ...
//! let report = mounted.power_cut()?;
//! println!("{report}");
//! let mounted = fs.mount("/tmp/mnt".as_ref())?; // what was synced, and nothing else
//! # mounted.unmount()
//! # }
//! ```
//!
//! # The model
//!
//! **Passthrough.** Every operation is applied to the backing directory at once; reads read the
//! backing files. In addition the file system keeps an undo log of what a power cut takes back.
//!
//! **File contents.** Per backing file (by its `(st_dev, st_ino)`, so renames do not matter) the
//! log holds the file's length at its last sync (`synced_len`) and, for every byte below
//! `synced_len` that a write, truncation (`ftruncate`, `truncate`, `O_TRUNC`) or `fallocate`
//! changed since, its synced value (read from the backing file before the change, once per byte).
//! Writes at or beyond `synced_len` need nothing saved. `fsync` and `fdatasync` (FUSE `fsync`
//! with or without the datasync flag), on any handle of the file, make its current content the
//! synced one. Nothing else syncs: not `sync_file_range` (the kernel has sent the data as plain
//! writes already; it never reaches the file system as a sync), not `close`/`flush`/`release`, not
//! `sync(2)`/`syncfs(2)`. `O_SYNC`/`O_DSYNC` files are synced by every write because the kernel
//! sends an `fsync` after each of their writes.
//!
//! **Directory entries** (the strict model, [`Options::strict_dirs`], on by default). Creating
//! an entry (`create`, `mknod`, `mkdir`, `symlink`), `unlink`, `rmdir` and `rename` are durable only
//! once the directory concerned has been fsynced since (FUSE `fsyncdir`: `fsync` of an open
//! directory); a rename needs both its directories fsynced. A power cut undoes the changes not
//! durable, last first: it removes what was created (with everything in it) and brings back what
//! was removed or replaced, and renames back. So a new file whose data was fsynced but whose
//! directory was not is lost with its entry. Removed entries are not deleted but moved to a hidden
//! trash directory in the backing directory (`.lazyfs-trash`, never shown through the mount), and
//! deleted when their removal is durable. With `strict_dirs: false` every directory change is
//! durable at once.
//!
//! **Before and after.** Files in the backing directory before the first mount count as synced.
//! The state (undo logs, journal, trash) lives in the [`LazyFs`] and survives remounts.
//! [`Mounted::power_cut`] unmounts and takes back everything not synced; [`Mounted::unmount`] (and
//! dropping a [`Mounted`]) is a clean shutdown, which like a real unmount makes everything durable.
//! Every mount is a new FUSE session, so nothing the kernel cached survives a cut.
//!
//! **Not modelled:** metadata (mode, owner, times) is never taken back; hard links are not
//! supported (`link` fails with `EPERM`); extended attributes are not supported; a cut takes back
//! whole unsynced changes, never tears a write or reorders writes; `fallocate` supports mode 0,
//! `KEEP_SIZE`, `PUNCH_HOLE` and `ZERO_RANGE` only; `RENAME_EXCHANGE` fails with `EINVAL`. The
//! backing files are not fsynced for real (the machine the tests run on does not lose power).
//! Locks (`flock`, POSIX locks) are the kernel's local ones and work between processes on the
//! machine.
//!
//! # How the kernel delivers what applications do
//!
//! The session does not ask for the kernel's writeback cache, so every `write(2)` reaches the
//! file system as a FUSE `write` before it returns (write-through); the page cache holds nothing
//! dirty. Hence `sync_file_range(2)` sends nothing at all. `open(O_TRUNC)` arrives as an `open`
//! without `O_TRUNC` followed by a `setattr` of the size to 0 (no atomic `O_TRUNC`). A write to an
//! `O_DSYNC`/`O_SYNC` file arrives as a `write` and an `fsync` (datasync for `O_DSYNC`). Appends
//! (`O_APPEND`) arrive with the offset the kernel computed from its cached size. `fsync(2)` of a
//! directory arrives as `fsyncdir`. `flock(2)` and POSIX locks never arrive (the session does not
//! ask for them): the kernel keeps them locally.
//!
//! For sled 0.34 this means: its log writes are made "stable" by `sync_file_range` alone, which
//! syncs nothing here (nor, for the file's size and the disk's cache, on a real disk); they are
//! durable only after a `sync_all` (its periodic flusher, `flush_every_ms`, segment truncation,
//! snapshots, drop). It writes its `conf` file without any sync. And it fsyncs no directory: under
//! the strict model its files vanish at a cut unless something fsyncs the directories they were
//! created in.
//!
//! # Mounting
//!
//! Mounting needs root and `/dev/fuse`; the mount is made with `mount(2)` directly (no libfuse,
//! no `fusermount3`), with `allow_other` and `default_permissions`, named `lazyfs` in
//! `/proc/mounts`. An unmount (clean or a cut) waits while the mount is busy for a few seconds,
//! then detaches it; it waits for the session thread to end before it touches the state.

mod attr;
mod cut;
mod dirs;
mod entries;
mod fs;
mod mount;
mod nodes;
mod state;
mod sys;
mod undo;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

pub use mount::Mounted;

use crate::state::State;

/// How the file system models durability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Directory changes are durable only once their directory is fsynced (see the crate docs);
    /// `false` makes them durable at once.
    pub strict_dirs: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { strict_dirs: true }
    }
}

/// Counters since [`LazyFs::new`], and what is not synced now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// `write` requests.
    pub writes: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// `fsync` requests (without the datasync flag).
    pub fsyncs: u64,
    /// `fdatasync` requests (`fsync` with the datasync flag).
    pub fdatasyncs: u64,
    /// `fsyncdir` requests.
    pub fsyncdirs: u64,
    /// Truncations (`setattr` of the size, `O_TRUNC`).
    pub truncates: u64,
    /// Power cuts.
    pub cuts: u64,
    /// Files with content not synced now.
    pub unsynced_files: usize,
    /// Synced bytes saved in the undo logs now.
    pub saved_bytes: u64,
    /// Directory changes not durable now.
    pub unsynced_dir_ops: usize,
}

/// What a power cut took back.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutReport {
    /// Files whose content was brought back to the synced one.
    pub files_reverted: usize,
    /// Synced bytes written back over changes.
    pub bytes_restored: u64,
    /// Bytes beyond the synced lengths cut off.
    pub bytes_truncated: u64,
    /// Directory changes undone.
    pub dir_ops_undone: usize,
    /// What could not be taken back (empty unless the backing directory was changed behind the
    /// file system's back).
    pub problems: Vec<String>,
}

impl fmt::Display for CutReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "power cut: {} files reverted ({} bytes restored, {} bytes cut off), {} directory changes undone",
            self.files_reverted, self.bytes_restored, self.bytes_truncated, self.dir_ops_undone
        )?;
        for p in &self.problems {
            write!(f, "; problem: {p}")?;
        }
        Ok(())
    }
}

/// What the file system and its mounts share.
pub(crate) struct Shared {
    pub state: Mutex<State>,
    /// Session threads an unmount could not wait for (see [`Mounted::power_cut`]).
    pub lingering: Mutex<Vec<JoinHandle<io::Result<()>>>>,
}

impl Shared {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The file system: its backing directory and its state, which survives remounts.
pub struct LazyFs {
    shared: Arc<Shared>,
    backing: PathBuf,
}

impl fmt::Debug for LazyFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyFs").field("backing", &self.backing).finish_non_exhaustive()
    }
}

impl LazyFs {
    /// A file system over the directory `backing`, whose current content counts as synced. A trash
    /// left in it by an earlier file system is emptied.
    pub fn new(backing: &Path, opts: Options) -> io::Result<Self> {
        let backing = backing.canonicalize()?;
        let state = State::new(backing.clone(), opts.strict_dirs)?;
        let shared = Arc::new(Shared { state: Mutex::new(state), lingering: Mutex::new(Vec::new()) });
        Ok(LazyFs { shared, backing })
    }

    /// The backing directory (canonical).
    pub fn backing(&self) -> &Path {
        &self.backing
    }

    /// Mounts the file system on the directory `mountpoint` (which must be outside the backing
    /// directory). One mount at a time.
    pub fn mount(&self, mountpoint: &Path) -> io::Result<Mounted> {
        mount::mount(&self.shared, mountpoint)
    }

    /// Whether it is mounted now.
    pub fn is_mounted(&self) -> bool {
        self.shared.state().mounted
    }

    pub fn stats(&self) -> Stats {
        let st = self.shared.state();
        Stats {
            unsynced_files: st.files.len(),
            saved_bytes: st.files.values().map(|t| t.undo.saved_bytes()).sum(),
            unsynced_dir_ops: st.journal.len(),
            ..st.stats.clone()
        }
    }
}
