//! Raft log and vote on sled.
//!
//! Tree `log`: big-endian log index → codec-encoded [`Entry`]. Tree `raft_meta`: the vote, the
//! last purged log ID and the committed log ID. Every append, vote, truncate and purge is
//! flushed (fsynced) before it is acknowledged; the committed log ID is an optimisation and
//! rides along with the next flush.
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use leaf_api::codec;
use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader};
use serde::{de::DeserializeOwned, Serialize};

use crate::types::{Entry, LogId, LogState, StorageError, StorageIOError, TypeConfig, Vote};

const KEY_VOTE: &[u8] = b"vote";
const KEY_PURGED: &[u8] = b"last_purged";
const KEY_COMMITTED: &[u8] = b"committed";

/// The Raft log store. Cheap to clone: clones share the same sled trees.
#[derive(Clone)]
pub struct LogStore {
    db: sled::Db,
    log: sled::Tree,
    meta: sled::Tree,
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

impl LogStore {
    pub(crate) fn open(db: &sled::Db) -> Result<Self, sled::Error> {
        Ok(LogStore { db: db.clone(), log: db.open_tree("log")?, meta: db.open_tree("raft_meta")? })
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
        crate::flush(&self.db).await.map_err(|e| io_err(e, true))?;
        Ok(())
    }

    /// Number of entries currently held (for status pages and tests).
    pub fn len(&self) -> usize {
        self.log.len()
    }

    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }

    fn remove_range(&self, range: impl RangeBounds<[u8; 8]>) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for item in self.log.range(range) {
            let (k, _) = item.map_err(|e| io_err(e, true))?;
            batch.remove(k);
        }
        self.log.apply_batch(batch).map_err(|e| io_err(e, true))
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = match range.start_bound() {
            Bound::Included(&i) => Bound::Included(key(i)),
            Bound::Excluded(&i) => Bound::Excluded(key(i)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let end = match range.end_bound() {
            Bound::Included(&i) => Bound::Included(key(i)),
            Bound::Excluded(&i) => Bound::Excluded(key(i)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut out = Vec::new();
        for item in self.log.range((start, end)) {
            let (_, v) = item.map_err(|e| io_err(e, false))?;
            out.push(codec::decode::<Entry>(&v).map_err(|e| io_err(e, false))?);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState, StorageError> {
        let last_purged_log_id: Option<LogId> = self.get_meta(KEY_PURGED)?;
        let last = match self.log.last().map_err(|e| io_err(e, false))? {
            Some((_, v)) => Some(codec::decode::<Entry>(&v).map_err(|e| io_err(e, false))?.log_id),
            None => last_purged_log_id,
        };
        Ok(LogState { last_purged_log_id, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let bytes = codec::encode(vote).map_err(|e| StorageIOError::write_vote(&e))?;
        self.meta.insert(KEY_VOTE, bytes).map_err(|e| StorageIOError::write_vote(&e))?;
        crate::flush(&self.db).await.map_err(|e| StorageIOError::write_vote(&e))?;
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.get_meta(KEY_VOTE)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.put_meta(KEY_COMMITTED, &committed)
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
        for entry in entries {
            let bytes = codec::encode(&entry).map_err(|e| io_err(e, true))?;
            encoded.push((key(entry.log_id.index), bytes));
        }
        // One entry (a leader's usual append) is a plain insert, atomic on its own. sled makes a
        // batch atomic by sealing and writing its log buffer before and after it, two extra
        // writes that cost more CPU than the entry; several entries still go in one batch, so a
        // crash never leaves a hole between them.
        if encoded.len() == 1 {
            let (k, v) = encoded.remove(0);
            self.log.insert(k, v).map_err(|e| io_err(e, true))?;
        } else {
            let mut batch = sled::Batch::default();
            for (k, v) in encoded {
                batch.insert(&k, v);
            }
            self.log.apply_batch(batch).map_err(|e| io_err(e, true))?;
        }
        // The entries are readable now; acknowledge only once they are on disk.
        match crate::flush(&self.db).await {
            Ok(_) => {
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
        self.remove_range(key(log_id.index)..)?;
        self.flush().await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first: a crash between the two steps leaves entries that are
        // already covered by `last_purged`, which readers never ask for.
        self.put_meta(KEY_PURGED, &log_id)?;
        self.flush().await?;
        self.remove_range(..=key(log_id.index))?;
        self.flush().await
    }
}
