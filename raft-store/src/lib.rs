//! Raft storage of leaf: the openraft log store and state machine on sled, and the pure state
//! machine they drive.
//!
//! Layout:
//! - [`state`]: commands, the replicated [`State`] and the pure [`apply`] — no I/O, no clock.
//! - [`profile`]: a tag's stored profile (segment, monotonic, obfuscated with its key, daily
//!   with its current day) and how an allocation advances each one's counter.
//! - [`log_store`]: `RaftLogStorage` on sled; every append, vote, truncate and purge is fsynced
//!   before it is acknowledged, and no purge or commit point is made durable beyond what the
//!   state machine's snapshot on disk covers.
//! - [`state_machine`]: `RaftStateMachine` + snapshot builder on sled (state in memory, its
//!   tree checkpointed every [`state_machine::CHECKPOINT_EVERY`] entries and at snapshots), and a
//!   [`StateReader`] for the node's read paths.
//! - `coverage` (private): the snapshot's log ID the state machine publishes to the log store,
//!   and why a follower's snapshot install needs it.
//! - [`tokens`]: scoped tokens as stored (the secret as its SHA-256) and their creation,
//!   rotation and revocation.
//! - [`audit`]: the audit trail of admin changes in the state: numbering, retention, paging.
//! - [`journal`]: the audit journal of committed allocations and the node each went to.
//! - [`failpoint`]: crash points and disk faults for tests (cargo feature `failpoints`; nothing
//!   without it).
//! - [`types`]: the openraft type configuration; the one place naming openraft generics.
//!
//! Every record goes through [`leaf_api::codec`] (versioned, checksummed bincode).
// openraft's trait methods return its `StorageError` (200+ bytes); our helpers return the same
// type so `?` composes, and storage errors are rare and fatal, so boxing buys nothing.
#![allow(clippy::result_large_err)]

use std::path::Path;

pub mod audit;
mod coverage;
pub mod failpoint;
pub mod journal;
pub mod log_store;
pub mod profile;
pub mod state;
pub mod state_machine;
pub mod tokens;
pub mod types;

pub use journal::{Journal, JournalDump, JournalRecord};
pub use log_store::LogStore;
pub use profile::{StoredProfile, OBFUSCATION_KEY_BYTES};
pub use state::{
    apply, check_command, Allocation, Applied, ApplyError, ApplyResult, Changes, Command, Op, State, TagRecord,
    WorkerGrant, WorkerRecord, MAX_COMMAND_BYTES, MAX_TAGS, WORKER_IDS,
};
pub use state_machine::{StateMachineStore, StateReader};
pub use tokens::{NewToken, SecretHash, TokenRecord, MAX_TOKENS};
pub use types::TypeConfig;

/// Flushes (fsyncs) everything written to `db` so far, on tokio's blocking pool.
///
/// Not `flush_async`: that hands the flush to sled's own thread pool, whose every task wakes
/// all of its idle threads (seven); on a segment refill that was a quarter of the context
/// switches. The blocking pool wakes one thread.
pub(crate) async fn flush(db: &sled::Db) -> sled::Result<usize> {
    let db = db.clone();
    let flush = move || {
        // A slow or failing fsync, for tests (see `failpoint`).
        #[cfg(feature = "failpoints")]
        if let Some(e) = failpoint::io_fault("disk-fsync") {
            return Err(sled::Error::Io(e));
        }
        db.flush()
    };
    match tokio::task::spawn_blocking(flush).await {
        Ok(r) => r,
        Err(e) => Err(sled::Error::Io(std::io::Error::other(format!("flush task failed: {e}")))),
    }
}

/// Options for [`open`].
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Bytes of sled page cache. The state is small (a record per tag); the default 16 MiB keeps
    /// an idle node lean while holding thousands of tags and the unpurged log tail.
    pub cache_bytes: u64,
    /// Allocations kept in the audit [`Journal`]: enough for a long chaos run or a day of a busy
    /// small-step tag; about 60 bytes each on disk. Default 100,000.
    pub journal_entries: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions { cache_bytes: 16 * 1024 * 1024, journal_entries: 100_000 }
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
}

/// Opens (or creates) the log store and state machine in `dir`.
pub fn open(dir: &Path, opts: &StoreOptions) -> Result<(LogStore, StateMachineStore), OpenError> {
    let sled_err = |source| OpenError::Sled { path: dir.display().to_string(), source };
    let db = sled::Config::new().path(dir).cache_capacity(opts.cache_bytes).open().map_err(sled_err)?;
    let coverage = coverage::Coverage::new();
    let log = LogStore::open(&db, coverage.clone()).map_err(OpenError::Log)?;
    let sm = StateMachineStore::open(&db, opts.journal_entries, coverage)?;
    Ok((log, sm))
}
