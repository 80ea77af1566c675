//! Raft storage of leaf: the openraft log store and state machine on sled, and the pure state
//! machine they drive.
//!
//! Layout, a file each (the pure ones touch no disk, network or clock):
//! - `lib.rs`: this map, the re-exports, [`open`] with its [`StoreOptions`].
//! - [`command`]: the [`Command`]s proposed through Raft and the [`Op`] each one carries; its
//!   `wire` module holds every form the log has held, and the envelope of later versions.
//! - [`version`]: cluster versions: what this build supports, and the form an operation is
//!   proposed in for the cluster's active version.
//! - [`check`]: the fields a command may hold, checked without the state; [`check_command`].
//! - [`apply`](mod@apply): the pure [`apply`](fn@apply), its answers and the keys it wrote.
//! - [`state`]: the replicated [`State`] and how a membership entry updates its members.
//! - [`tags`]: tag records: creation (one or a batch), update, allocation, archive and restore;
//!   [`MAX_TAGS`] (and [`LEGACY_MAX_TAGS`] for single creations).
//! - [`templates`]: tag templates (a pattern such as `tenant-*-invoice` and the settings of
//!   the tags it makes): put, delete, and which one makes a tag.
//! - [`profile`]: a tag's stored profile and how an allocation advances each one's counter.
//! - [`gapless`]: gapless series: issuing and reserving numbers one per idempotency key,
//!   settling reservations, retention, the ledger of every number and its hash chains.
//! - [`workers`]: snowflake worker IDs: registration, renewal, fencing and recycling.
//! - [`regions`]: one ID space over several clusters: a global tier's registry of regions
//!   (IDs, worker ranges, retirement) and its block grants; a region's identity, its blocks
//!   and the segments it cuts from them; `regions/homes.rs`: home regions of monotonic tags and
//!   gapless series (claims, leases, moves), not yet used by the node.
//! - [`tokens`]: scoped tokens as stored (the secret as its SHA-256), their limits, and
//!   create, rotate, revoke and the count of tags each created.
//! - [`audit`]: the audit trail of admin changes in the state: numbering, retention, paging.
//! - [`restore`]: restoring a backup without handing out an ID twice: the plan of each tag's
//!   jump, applying it, the snowflake floor and the state's lineage of restores.
//! - [`restore_store`]: writing a restored state into a new data directory.
//! - [`durable`]: sled's database synced for real ([`durable::Synced::sync_now`]: its flush,
//!   then `fdatasync` of the files it wrote, which its flush only `sync_file_range`s), and
//!   directories made durably.
//! - `sled_lock.rs` (private): sled's batches kept apart from a database's last drop (sled
//!   0.34.7 deadlocks the whole process on the two together).
//! - [`disk`]: the stores' handle on that database ([`Disk`], its [`Tree`]s and [`Batch`]es),
//!   which a rewrite swaps while they run.
//! - [`compact`]: sled's files rewritten once they hold mostly garbage (at open, and after a
//!   snapshot build), into a directory the file `current` names.
//! - [`log_end`]: the log's end and the vote, kept outside sled, so that an open finds
//!   acknowledged entries or a vote that sled's recovery dropped behind a damaged record.
//! - [`log_store`]: `RaftLogStorage` on sled, each write synced before it is acknowledged.
//! - [`state_machine`]: `RaftStateMachine` on sled: the state in memory, applying entries.
//! - `state_machine/store.rs`: its sled I/O: the `sm` tree's keys, loading, checkpoints.
//! - `state_machine/base.rs`: the `sm` tree as the changes over a base snapshot file: the
//!   merge of the two, and the rebase and shedding after each build.
//! - `state_machine/reader.rs`: the [`StateReader`] for the node's read paths, its tokens and
//!   its archive counter.
//! - `state_machine/snapshot.rs`: building and installing snapshots, their files, and their
//!   coverage.
//! - `state_machine/staged.rs`: a checkpoint of many keys, staged in small sled batches.
//! - `state_machine/snapshot_file.rs`: the streamed layout of a snapshot file, its writer and
//!   checking reader.
//! - `state_machine/backup.rs`: backup files: writing one from the tree, reading one back
//!   whole and checked, and installing a restored state.
//! - `state_machine/legacy.rs`: the layouts of earlier releases (V1 to V5), read into this one.
//! - `coverage.rs` (private): the snapshot's log ID the state machine publishes to the log store.
//! - [`log_weight`]: what the applied, unpurged log holds by weight (a batch counts each tag),
//!   for the node's snapshot and purge decisions.
//! - [`journal`]: the audit journal of committed allocations and the node each went to.
//! - [`verify`]: damage found at open: every record read back and checked, the file and offset
//!   of any that is not sound.
//! - `sled_log.rs` (private): sled's log file walked as its recovery reads it, to place damage
//!   sled reports with no offset.
//! - [`failpoint`]: crash points and disk faults for tests (cargo feature `failpoints`).
//! - [`types`]: the openraft type configuration; the one place naming openraft generics.
//! - `testing.rs` (unit tests only): the helpers the unit tests share.
//!
//! Every record goes through [`leaf_api::codec`] (versioned, checksummed bincode).
// openraft's trait methods return its `StorageError` (200+ bytes); our helpers return the same
// type so `?` composes, and storage errors are rare and fatal, so boxing buys nothing.
#![allow(clippy::result_large_err)]

use std::path::Path;

pub mod apply;
pub mod audit;
pub mod check;
pub mod command;
pub mod compact;
mod coverage;
pub mod disk;
pub mod durable;
pub mod failpoint;
pub mod gapless;
pub mod journal;
pub mod log_end;
pub mod log_store;
pub mod log_weight;
pub mod profile;
pub mod regions;
pub mod restore;
pub mod restore_store;
mod sled_lock;
mod sled_log;
pub mod state;
pub mod state_machine;
pub mod tags;
pub mod templates;
#[cfg(test)]
mod testing;
pub mod tokens;
pub mod types;
pub mod verify;
pub mod version;
pub mod workers;

pub use apply::{apply, Applied, ApplyError, ApplyResult, Changes};
pub use check::{check_command, MAX_BATCH_COMMAND_BYTES, MAX_COMMAND_BYTES};
pub use command::{Command, NumberRules, Op, Repeat, SegmentAsk, TagCap, Trim};
pub use disk::{Batch, Disk, Iter, Tree};
pub use gapless::{
    chain_hash, heads_digest, ChainEvent, Issued, Ledger, NumberAct, NumberAsk, NumberRecord, OwnedAsk, Proof,
    CHAIN_GENESIS, MAX_LEDGER_NUMBERS, MAX_NUMBER_ASKS,
};
pub use journal::{Journal, JournalDump, JournalRecord, Moved, Place};
pub use log_store::LogStore;
pub use log_weight::LogWeights;
pub use profile::{StoredProfile, OBFUSCATION_KEY_BYTES};
pub use state::State;
pub use state_machine::{
    read_backup, BackupError, BackupHeader, BackupWritten, SmData, StateMachineStore, StateReader,
};
pub use tags::{Allocation, NewTag, TagRecord, LEGACY_MAX_TAGS, MAX_SEGMENT_ASKS, MAX_TAGS, MAX_TAGS_PER_COMMAND};
pub use templates::{NewTemplate, TemplateRecord, TemplateSettings, MAX_TEMPLATES};
pub use tokens::{NewToken, SecretHash, TokenLimits, TokenRecord, MAX_TOKENS};
pub use types::TypeConfig;
pub use workers::{WorkerGrant, WorkerRecord, WORKER_IDS};

/// Options for [`open`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Bytes of sled page cache. The state is small (a record per tag); the default 16 MiB keeps
    /// an idle node lean while holding thousands of tags and the unpurged log tail.
    pub cache_bytes: u64,
    /// Allocations kept in the audit [`Journal`]: enough for a long chaos run or a day of a busy
    /// small-step tag; about 60 bytes each on disk. Default 100,000.
    pub journal_entries: usize,
    /// sled's files are rewritten when they exceed this many bytes (or a quarter of the
    /// snapshot file, if less) and [`compact::GARBAGE_RATIO`] times the records they hold (see
    /// [`compact::due`]). Default 64 MiB.
    pub compact_above: u64,
    /// ... and never below this many bytes, whatever the state. Default 1 MiB.
    pub compact_min: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            cache_bytes: 16 * 1024 * 1024,
            journal_entries: 100_000,
            compact_above: 64 * 1024 * 1024,
            compact_min: compact::MIN_FILES,
        }
    }
}

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("open sled database at {path}: {source}")]
    Sled { path: String, source: sled::Error },
    #[error("load state machine: {0}")]
    StateMachine(#[from] types::StorageError),
    #[error("load Raft log: {0}")]
    Log(types::StorageError),
    /// A byte of the data directory is not what was written: the node must not serve from it.
    #[error(
        "the data directory is damaged: {0}. This node refuses to start rather than serve from it; \
         replace it from its peers under a new node ID (book: Docker and Compose, \"Replace a failed node\")"
    )]
    Damaged(#[from] verify::Damage),
    #[error(transparent)]
    Compact(compact::CompactError),
}

/// The directory, inside the store's, of the snapshot files.
pub const SNAPSHOT_DIR: &str = "snapshots";

/// Opens (or creates) the log store and state machine in `dir` (sled's files, and the
/// snapshot files in [`SNAPSHOT_DIR`]), after reading every record and the current snapshot
/// back: [`OpenError::Damaged`] names the file and offset of any damage. sled's files are
/// rewritten first when they hold mostly garbage (see [`compact`]); the state machine's builds
/// check again as the node runs.
pub fn open(dir: &Path, opts: &StoreOptions) -> Result<(LogStore, StateMachineStore), OpenError> {
    let sled_err = |source| OpenError::Sled { path: dir.display().to_string(), source };
    durable::create_dir_all(dir).map_err(|e| sled_err(sled::Error::Io(e)))?;
    let sled_dir = compact::prepare(dir).map_err(compact_err)?;
    // sled reports no offset for these, and only warns about its config.
    verify::sled_files(&sled_dir)?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    let db = loop {
        match sled::Config::new().path(&sled_dir).cache_capacity(opts.cache_bytes).open() {
            Err(sled::Error::Io(e))
                if e.to_string().contains("could not acquire lock") && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other,
        }
    }
    .map_err(|e| match verify::damage_of(&sled_dir, &e) {
        Some(d) => OpenError::Damaged(d),
        None => sled_err(e),
    })?;
    let files = durable::Synced::open(db, &sled_dir).map_err(|e| sled_err(sled::Error::Io(e)))?;
    let disk = Disk::new(files, dir, opts);
    let scan_err = |e| match e {
        verify::ScanError::Damaged(d) => OpenError::Damaged(d),
        verify::ScanError::Sled(e) => sled_err(e),
    };
    verify::scan_trees(&disk.db(), &sled_dir, |tree| tree != "sm").map_err(scan_err)?;
    // Only a state machine over a base snapshot is small (an earlier release's holds the whole
    // state: its first build converts it, and a later rewrite follows).
    let sm = disk.tree("sm").map_err(sled_err)?;
    if state_machine::has_base(&sm).map_err(OpenError::StateMachine)? {
        let started = std::time::Instant::now();
        match compact::rewrite_if_due(&disk, compact::live_bytes(&dir.join(SNAPSHOT_DIR))) {
            Ok(None) => {}
            Ok(Some(r)) => tracing::info!(
                from = %sled_dir.display(), to = %r.to.display(), files = r.files, records = r.records,
                ms = started.elapsed().as_millis() as u64, "rewrote sled's files, which held mostly garbage"
            ),
            // The old files stay current: the node starts on them.
            Err(e) => tracing::warn!(error = %e, "could not rewrite sled's files; going on with them"),
        }
    }
    let snap_dir = dir.join(SNAPSHOT_DIR);
    let snapshot_check = std::thread::spawn({
        let (db, snap_dir) = (disk.db(), snap_dir.clone());
        move || verify::snapshot(&db, &snap_dir)
    });
    let coverage = coverage::Coverage::new();
    let log = LogStore::open(&disk, dir, coverage.clone())?;
    let sm = StateMachineStore::open(&disk, &snap_dir, opts.journal_entries, coverage);
    let snapshots = snapshot_check
        .join()
        .map_err(|_| sled_err(sled::Error::Io(std::io::Error::other("the snapshot check panicked"))))?;
    // The load read `sm` and its base snapshot whole: if it failed on damage, say where.
    let sm = match (sm, snapshots) {
        (Ok(sm), Ok(())) => sm,
        (_, Err(d)) => return Err(OpenError::Damaged(d)),
        (Err(e), Ok(())) => match verify::scan_trees(&disk.db(), &disk.dir(), |tree| tree == "sm") {
            Err(verify::ScanError::Damaged(d)) => return Err(OpenError::Damaged(d)),
            _ => return Err(OpenError::StateMachine(e)),
        },
    };
    Ok((log, sm))
}

/// How long an open waits for sled's lock on its files, which sled releases from a background
/// thread after a database's last handle is dropped (a store closed and opened again in one
/// process).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// A rewrite's error as the open's.
fn compact_err(e: compact::CompactError) -> OpenError {
    match e {
        compact::CompactError::Damaged(d) => OpenError::Damaged(d),
        e => OpenError::Compact(e),
    }
}
