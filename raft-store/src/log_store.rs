//! Raft log and vote on sled, and their synced end outside it (`log_end`).
//!
//! Tree `log`: big-endian log index → codec-encoded [`Entry`]. Tree `raft_meta`: the vote, the
//! last purged log ID and the committed log ID. Every append, vote, truncate and purge is
//! flushed (fsynced) before it is acknowledged; the committed log ID is an optimisation and
//! rides along with the next flush.
//!
//! The durable purge and commit points never run ahead of the snapshot the state machine has on
//! disk (the `Coverage` it publishes; why, in the private `coverage` module):
//! - [`purge`](RaftLogStorage::purge) takes effect for openraft at once: entries up to the
//!   purge point are never read again and [`get_log_state`](RaftLogStorage::get_log_state)
//!   reports it. On disk, `last_purged` is written and entries deleted only up to the covered
//!   log ID (the snapshot's); the rest waits in the tree until a later purge or append finds it
//!   covered.
//! - [`append`](RaftLogStorage::append) of entries that would leave a hole after the entries the
//!   tree holds (a follower that installed a snapshot beyond its log) first waits up to
//!   [`COVERAGE_WAIT`] for the state machine to store the snapshot, and completes the purge before
//!   writing. If the state machine never gets there, the append fails (a storage error stops
//!   Raft; what is on disk is consistent and the node restarts from it).
//! - [`save_committed`](RaftLogStorage::save_committed) stores the committed log ID, lowered to
//!   the covered log ID or the last entry the tree holds if it is beyond both, so that re-applying
//!   the committed entries after a restart never needs an entry the log does not hold.
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaf_api::codec;
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader};
use serde::{de::DeserializeOwned, Serialize};

use crate::coverage::Coverage;
use crate::failpoint::failpoint;
use crate::log_end::{LogEnd, LogEndError, Mark};
use crate::types::{Entry, LogId, LogState, StorageError, StorageIOError, TypeConfig, Vote};

const KEY_VOTE: &[u8] = b"vote";
const KEY_PURGED: &[u8] = b"last_purged";
const KEY_COMMITTED: &[u8] = b"committed";

/// Longest an append waits for the state machine to cover a hole in front of it (a snapshot
/// being installed: decoding, writing and flushing at most ~46 MiB of state).
pub const COVERAGE_WAIT: Duration = Duration::from_secs(60);

/// Purge points: what openraft asked for and what is on disk.
#[derive(Debug, Default, Clone, Copy)]
struct Purged {
    /// Entries up to this are gone as far as openraft is concerned.
    requested: Option<LogId>,
    /// `raft_meta`'s `last_purged` (flushed): entries up to this are deleted from the tree.
    durable: Option<LogId>,
}

/// The Raft log store. Cheap to clone: clones share the same sled trees and purge points.
#[derive(Clone)]
pub struct LogStore {
    db: crate::Disk,
    log: crate::Tree,
    meta: crate::Tree,
    purged: Arc<Mutex<Purged>>,
    coverage: Coverage,
    /// The end and vote synced at most, outside sled (`log_end`).
    end: Arc<LogEnd>,
}

fn io_err(e: impl std::error::Error + Send + Sync + 'static, write: bool) -> StorageError {
    if write {
        StorageIOError::write_logs(&e).into()
    } else {
        StorageIOError::read_logs(&e).into()
    }
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn index_of(k: &[u8]) -> Result<u64, StorageError> {
    let bytes: [u8; 8] =
        k.try_into().map_err(|_| io_err(std::io::Error::other(format!("malformed log key {k:?}")), false))?;
    Ok(u64::from_be_bytes(bytes))
}

fn next_index(log_id: Option<LogId>) -> u64 {
    log_id.map_or(0, |l| l.index + 1)
}

/// The earlier of two log IDs by index (`None`, nothing, is earliest).
fn earlier(a: Option<LogId>, b: Option<LogId>) -> Option<LogId> {
    if next_index(a) <= next_index(b) {
        a
    } else {
        b
    }
}

/// The later of two log IDs by index.
fn later(a: Option<LogId>, b: Option<LogId>) -> Option<LogId> {
    if next_index(a) >= next_index(b) {
        a
    } else {
        b
    }
}

impl LogStore {
    /// Opens the log in `db` (the store at `dir`), refusing a log or vote shorter than the
    /// `log-end` file says was synced.
    pub(crate) fn open(db: &crate::Disk, dir: &std::path::Path, coverage: Coverage) -> Result<Self, crate::OpenError> {
        use crate::OpenError;
        let open_err = |e| OpenError::Log(io_err(e, false));
        let log = db.tree("log").map_err(open_err)?;
        let meta = db.tree("raft_meta").map_err(open_err)?;
        let get =
            |k: &[u8]| -> Result<Option<Vec<u8>>, OpenError> { Ok(meta.get(k).map_err(open_err)?.map(|v| v.to_vec())) };
        let decode_err = |e| OpenError::Log(io_err(e, false));
        let durable: Option<LogId> = get(KEY_PURGED)?.map(|v| codec::decode(&v)).transpose().map_err(decode_err)?;
        let vote: Option<Vote> = get(KEY_VOTE)?.map(|v| codec::decode(&v)).transpose().map_err(decode_err)?;
        let last = match log.last().map_err(open_err)? {
            Some((k, _)) => Some(index_of(&k).map_err(OpenError::Log)?),
            None => None,
        };
        let held = Mark { end: last.max(durable.map(|l| l.index)), vote };
        let end = LogEnd::open(dir, held).map_err(|e| match e {
            // sled's files may be in a directory of their own (see `compact`).
            LogEndError::Damaged(crate::verify::Damage::LogLost { why, .. }) => {
                let file = db.dir().join(crate::durable::LOG_FILE);
                OpenError::Damaged(crate::verify::Damage::LogLost { file, why })
            }
            LogEndError::Damaged(d) => OpenError::Damaged(d),
            e @ LogEndError::Io { .. } => OpenError::Log(io_err(e, false)),
        })?;
        Ok(LogStore {
            db: db.clone(),
            log,
            meta,
            purged: Arc::new(Mutex::new(Purged { requested: durable, durable })),
            coverage,
            end: Arc::new(end),
        })
    }

    fn purge_points(&self) -> Purged {
        *self.purged.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn get_meta<T: DeserializeOwned>(&self, k: &[u8]) -> Result<Option<T>, StorageError> {
        match self.meta.get(k).map_err(|e| io_err(e, false))? {
            Some(v) => Ok(Some(codec::decode(&v).map_err(|e| io_err(e, false))?)),
            None => Ok(None),
        }
    }

    fn put_meta<T: Serialize>(&self, k: &[u8], v: &T) -> Result<(), StorageError> {
        let bytes = codec::encode(v).map_err(|e| io_err(e, true))?;
        self.meta.insert(k, bytes).map_err(|e| io_err(e, true))?;
        Ok(())
    }

    async fn flush(&self) -> Result<(), StorageError> {
        self.db.sync().await.map_err(|e| io_err(e, true))?;
        Ok(())
    }

    /// Number of entries currently held (for status pages and tests), including any that are
    /// purged for openraft but wait for the state machine before they are deleted.
    pub fn len(&self) -> usize {
        self.log.len()
    }

    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }

    /// The purge point on disk (tests): never beyond the snapshot on disk.
    #[doc(hidden)]
    pub fn durable_purged(&self) -> Option<LogId> {
        self.purge_points().durable
    }

    fn remove_range(&self, range: impl RangeBounds<[u8; 8]>) -> Result<(), StorageError> {
        let mut batch = crate::Batch::default();
        for item in self.log.range(range) {
            let (k, _) = item.map_err(|e| io_err(e, true))?;
            batch.remove(k);
        }
        self.log.apply_batch(batch).map_err(|e| io_err(e, true))
    }

    /// The log ID of the last entry the tree holds.
    fn last_held(&self) -> Result<Option<LogId>, StorageError> {
        match self.log.last().map_err(|e| io_err(e, false))? {
            Some((_, v)) => Ok(Some(codec::decode::<Entry>(&v).map_err(|e| io_err(e, false))?.log_id)),
            None => Ok(None),
        }
    }

    /// The index after the last entry the tree holds (after the durable purge point if none).
    fn held_next_index(&self, durable: Option<LogId>) -> Result<u64, StorageError> {
        match self.log.last().map_err(|e| io_err(e, false))? {
            Some((k, _)) => Ok(index_of(&k)? + 1),
            None => Ok(next_index(durable)),
        }
    }

    /// Makes `target` the purge point on disk and deletes the entries up to it.
    async fn purge_durably(&self, target: LogId) -> Result<(), StorageError> {
        failpoint!("log-purge-begin");
        // Record the purge point first: a crash between the two steps leaves entries that are
        // already covered by `last_purged`, which readers never ask for.
        self.put_meta(KEY_PURGED, &target)?;
        failpoint!("log-purge-meta-written");
        self.flush().await?;
        failpoint!("log-purge-meta-flushed");
        {
            let mut p = self.purged.lock().unwrap_or_else(|e| e.into_inner());
            p.durable = later(p.durable, Some(target));
        }
        self.remove_range(..=key(target.index))?;
        failpoint!("log-purge-entries-removed");
        self.flush().await?;
        failpoint!("log-purge-done");
        Ok(())
    }

    /// Brings the durable purge point up to the requested one as far as the state machine
    /// covers it.
    async fn complete_purge(&self) -> Result<(), StorageError> {
        let p = self.purge_points();
        let target = earlier(p.requested, self.coverage.get());
        match target {
            Some(t) if next_index(target) > next_index(p.durable) => self.purge_durably(t).await,
            _ => Ok(()),
        }
    }

    /// Before entries from `first` on are written: when a purge is pending and the tree ends
    /// before `first - 1`, waits until the snapshot on disk covers `first - 1` (so the purge can
    /// close the hole on disk), then completes the purge.
    async fn close_hole_before(&self, first: u64) -> Result<(), StorageError> {
        let p = self.purge_points();
        if next_index(p.requested) <= next_index(p.durable) {
            return Ok(());
        }
        let covered_next = next_index(self.coverage.get());
        if first > covered_next && first > self.held_next_index(p.durable)? {
            tracing::info!(
                first,
                covered = ?self.coverage.get(),
                "entries after a purged hole wait for the state machine to cover it (snapshot install)"
            );
            let covered = self.coverage.wait_for(first - 1, COVERAGE_WAIT).await;
            if next_index(covered) < first {
                let e = std::io::Error::other(format!(
                    "the state machine stored no snapshot up to log index {} within {COVERAGE_WAIT:?} (covered: {covered:?}); \
                     refusing to write entries after a hole",
                    first - 1
                ));
                return Err(io_err(e, true));
            }
        }
        self.complete_purge().await
    }

    /// `committed`, lowered to what a restart can re-apply: the covered log ID or the last
    /// entry the tree holds, whichever is later.
    fn storable_committed(&self, committed: Option<LogId>) -> Result<Option<LogId>, StorageError> {
        let Some(c) = committed else { return Ok(None) };
        let covered = self.coverage.get();
        if covered.is_some_and(|cv| cv.index >= c.index) {
            return Ok(Some(c));
        }
        let held = self.last_held()?;
        if held.is_some_and(|h| h.index >= c.index) {
            return Ok(Some(c));
        }
        let bound = later(covered, held);
        tracing::info!(committed = %c, stored = ?bound, "committed log ID stored lower: beyond the state machine and the log");
        Ok(bound)
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        // Entries purged for openraft may still be in the tree: never return them.
        let from = next_index(self.purge_points().requested);
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        }
        .max(from);
        let end = match range.end_bound() {
            Bound::Included(&i) => Bound::Included(key(i)),
            Bound::Excluded(&i) => Bound::Excluded(key(i)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut out = Vec::new();
        let empty = match range.end_bound() {
            Bound::Included(&i) => start > i,
            Bound::Excluded(&i) => start >= i,
            Bound::Unbounded => false,
        };
        if empty {
            return Ok(out);
        }
        for item in self.log.range((Bound::Included(key(start)), end)) {
            let (_, v) = item.map_err(|e| io_err(e, false))?;
            out.push(codec::decode::<Entry>(&v).map_err(|e| io_err(e, false))?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState, StorageError> {
        let last_purged_log_id = self.purge_points().requested;
        let last = match self.last_held()? {
            Some(l) if l.index + 1 > next_index(last_purged_log_id) => Some(l),
            _ => last_purged_log_id,
        };
        Ok(LogState { last_purged_log_id, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let bytes = codec::encode(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        self.meta.insert(KEY_VOTE, bytes).map_err(|e| StorageIOError::write_vote(&e))?;
        failpoint!("log-vote-written");
        self.db.sync().await.map_err(|e| StorageIOError::write_vote(&e))?;
        if let Err(e) = self.end.raise_vote(*vote) {
            // The file then claims less than sled holds: safe, it only checks less.
            tracing::warn!(error = %e, "cannot record the vote in the log-end file");
        }
        failpoint!("log-vote-flushed");
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.get_meta(KEY_VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let stored = self.storable_committed(committed)?;
        self.put_meta(KEY_COMMITTED, &stored)?;
        failpoint!("log-committed-written");
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.get_meta::<Option<LogId>>(KEY_COMMITTED)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut encoded = Vec::new();
        let mut last = None;
        for entry in entries {
            last = Some(entry.log_id.index);
            let bytes = codec::encode(&entry).map_err(|e| io_err(e, true))?;
            encoded.push((key(entry.log_id.index), bytes));
        }
        if let Some((first, _)) = encoded.first() {
            if let Err(e) = self.close_hole_before(u64::from_be_bytes(*first)).await {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                return Err(e);
            }
        }
        // One entry (a leader's usual append) is a plain insert, atomic on its own. sled makes a
        // batch atomic by sealing and writing its log buffer before and after it, two extra
        // writes that cost more CPU than the entry; several entries still go in one batch, so a
        // crash never leaves a hole between them.
        if encoded.len() == 1 {
            let (k, v) = encoded.remove(0);
            self.log.insert(k, v).map_err(|e| io_err(e, true))?;
        } else {
            let mut batch = crate::Batch::default();
            for (k, v) in encoded {
                batch.insert(&k, v);
            }
            self.log.apply_batch(batch).map_err(|e| io_err(e, true))?;
        }
        failpoint!("log-append-written");
        // The entries are readable now; acknowledge only once they are on disk.
        match self.db.sync().await {
            Ok(_) => {
                if let Some(e) = last.map(|i| self.end.raise_end(i)).and_then(Result::err) {
                    tracing::warn!(error = %e, "cannot record the log's end in the log-end file");
                }
                failpoint!("log-append-flushed");
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                callback.log_io_completed(Err(std::io::Error::other(msg)));
                Err(io_err(e, true))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // First the log-end file, synced: it must never claim entries sled no longer has.
        self.end.lower_end_before(log_id.index).map_err(|e| io_err(e, true))?;
        self.remove_range(key(log_id.index)..)?;
        failpoint!("log-truncate-removed");
        self.flush().await?;
        failpoint!("log-truncate-done");
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        {
            let mut p = self.purged.lock().unwrap_or_else(|e| e.into_inner());
            p.requested = later(p.requested, Some(log_id));
        }
        let covered = self.coverage.get();
        if next_index(covered) <= log_id.index {
            tracing::info!(
                purge = %log_id,
                ?covered,
                "log purged on disk only up to the stored snapshot; the rest follows once a snapshot covers it"
            );
        }
        self.complete_purge().await
    }
}
