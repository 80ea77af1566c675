//! The state machine on sled, with snapshots.
//!
//! Tree `sm`: `t/<tag>` → [`TagRecord`], `w/<worker id, 2 bytes BE>` → [`WorkerRecord`],
//! `k/<token id, 8 bytes BE>` → [`TokenRecord`], `a/<seq, 8 bytes BE>` → [`AuditRecord`],
//! `m/audit` → the trail's [`AuditMeta`], `m/applied` → last applied log ID, `m/membership` →
//! last applied membership (the current members are derived from it), `m/members_ever` →
//! every node ID ever in a membership.
//!
//! Tokens are also published, after every batch of entries that changed one, as an immutable
//! map behind an `ArcSwap` ([`StateReader::tokens`]): the request path checks a token with one
//! atomic load, and a node refuses a revoked token as soon as it applied the revocation.
//!
//! The tree is a checkpoint, not a mirror: `apply` changes the state in memory and notes which
//! keys changed, and every [`CHECKPOINT_EVERY`] entries (and whenever a snapshot is built)
//! writes those keys with `m/applied` in one atomic sled batch. sled makes a batch atomic by
//! writing out its log buffer before and after it, so a batch per entry cost four disk writes
//! per segment allocation; a checkpoint costs two per [`CHECKPOINT_EVERY`] entries. Nothing
//! is lost: the log entries are on disk before they are applied, purges stay behind the last
//! snapshot, which is never newer than the checkpoint, and on open openraft re-applies the
//! committed entries after `m/applied`, which yields the same state because [`apply`] is
//! deterministic. Checkpoints are not flushed on their own; sled flushes are database-wide, so
//! the next append, vote or purge makes them durable.
//!
//! Trees `journal` and `journal_meta`: the [`Journal`] of committed allocations (an audit
//! record outside the replicated state; a snapshot install marks a gap in it).
//!
//! Tree `snapshot`: the current snapshot (meta and data). Building or installing one flushes.
//! On open, a snapshot newer than the state in `sm` (a crash mid-install) replaces it.
//!
//! Durable coverage: at open and after every flush that stores a snapshot (a build, or an
//! install once its snapshot is on disk), the store tells the log store the snapshot's last
//! log ID, and the log store never makes a purge point durable beyond it (nor a commit point
//! beyond it and the log): openraft purges a follower's log for a snapshot it has only queued
//! for installing, and a crash before the install reached the disk must not leave the log
//! starting after the state, nor after the snapshot that stands for the purged entries.
use std::io::Cursor;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use arc_swap::ArcSwap;
use leaf_api::audit::AuditRecord;
use leaf_api::codec;
use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder};
use serde::{Deserialize, Serialize};

use crate::apply::{apply, Applied, ApplyResult, Changes};
use crate::audit::{AuditLog, AuditMeta};
use crate::command::Op;
use crate::coverage::Coverage;
use crate::failpoint::failpoint;
use crate::journal::{Journal, JournalRecord};
use crate::profile::StoredProfile;
use crate::state::{record_members, State};
use crate::tags::TagRecord;
use crate::tokens::TokenRecord;
use crate::types::{Entry, LogId, Snapshot, SnapshotMeta, StorageError, StorageIOError, StoredMembership, TypeConfig};
use crate::workers::WorkerRecord;

const KEY_APPLIED: &[u8] = b"m/applied";
const KEY_MEMBERSHIP: &[u8] = b"m/membership";
const KEY_MEMBERS_EVER: &[u8] = b"m/members_ever";
const TAG_PREFIX: &[u8] = b"t/";
const WORKER_PREFIX: &[u8] = b"w/";
const TOKEN_PREFIX: &[u8] = b"k/";
const AUDIT_PREFIX: &[u8] = b"a/";
const KEY_AUDIT_META: &[u8] = b"m/audit";
const KEY_SNAPSHOT: &[u8] = b"current";

/// Applied entries between checkpoints of the `sm` tree: the most a restart re-applies from the
/// log beyond what a lost, unflushed checkpoint adds (applying is in memory, about a
/// microsecond an entry).
pub const CHECKPOINT_EVERY: u64 = 256;

/// What changed in memory since the last checkpoint of the `sm` tree.
#[derive(Debug, Default)]
struct Dirty {
    /// The keys [`apply`] and [`record_members`] reported writing.
    changes: Changes,
    /// A membership entry was applied (`m/membership`).
    membership: bool,
    /// Entries applied since the last checkpoint.
    entries: u64,
}

/// Everything the state machine holds, as kept in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmData {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub state: State,
}

/// [`TagRecord`] as releases before tag profiles stored it: a segment tag with no bound.
#[derive(Deserialize)]
struct TagRecordV1 {
    max_id: i64,
    step: i64,
    description: String,
    created_ms: i64,
    updated_ms: i64,
}

impl From<TagRecordV1> for TagRecord {
    fn from(r: TagRecordV1) -> Self {
        TagRecord {
            max_id: r.max_id,
            step: r.step,
            description: r.description,
            created_ms: r.created_ms,
            updated_ms: r.updated_ms,
            profile: StoredProfile::Segment,
            upper_bound: None,
        }
    }
}

type TagsV1 = std::collections::BTreeMap<String, TagRecordV1>;

fn upgrade_tags(tags: TagsV1) -> std::collections::BTreeMap<String, TagRecord> {
    tags.into_iter().map(|(t, r)| (t, r.into())).collect()
}

/// A checkpointed tag record of this release or of one before tag profiles.
fn decode_tag_record(bytes: &[u8]) -> Result<TagRecord, codec::CodecError> {
    codec::decode::<TagRecord>(bytes).or_else(|e| codec::decode::<TagRecordV1>(bytes).map(Into::into).map_err(|_| e))
}

/// [`SmData`] as snapshots of the first release stored it, before `State::members_ever`.
#[derive(Deserialize)]
struct SmDataV1 {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    tags: TagsV1,
}

/// [`SmData`] as the second release stored it, before snowflake workers.
#[derive(Deserialize)]
struct SmDataV2 {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: StateV2,
}

#[derive(Deserialize)]
struct StateV2 {
    tags: TagsV1,
    members_ever: std::collections::BTreeSet<u64>,
}

/// [`SmData`] as releases before tokens and the audit trail stored it.
#[derive(Deserialize)]
struct SmDataV4 {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: StateV4,
}

#[derive(Deserialize)]
struct StateV4 {
    tags: std::collections::BTreeMap<String, TagRecord>,
    members_ever: std::collections::BTreeSet<u64>,
    members: std::collections::BTreeSet<u64>,
    workers: std::collections::BTreeMap<u16, WorkerRecord>,
}

/// [`SmData`] as the third release stored it, before tag profiles.
#[derive(Deserialize)]
struct SmDataV3 {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: StateV3,
}

#[derive(Deserialize)]
struct StateV3 {
    tags: TagsV1,
    members_ever: std::collections::BTreeSet<u64>,
    members: std::collections::BTreeSet<u64>,
    workers: std::collections::BTreeMap<u16, WorkerRecord>,
}

fn member_ids(m: &StoredMembership) -> impl Iterator<Item = u64> + '_ {
    m.membership().nodes().map(|(id, _)| *id)
}

/// Decodes snapshot data of this release or of an earlier one (the first held only tags, and
/// the nodes of its membership are the best record of past members it has; the second had no
/// workers). Each layout is tried newest first; the codec refuses short and trailing bytes, so
/// a record never decodes as the wrong layout.
fn decode_sm_data(bytes: &[u8]) -> Result<SmData, codec::CodecError> {
    let e = match codec::decode::<SmData>(bytes) {
        Ok(d) => return Ok(d),
        Err(e) => e,
    };
    if let Ok(old) = codec::decode::<SmDataV4>(bytes) {
        let s = old.state;
        let state = State {
            tags: s.tags,
            members_ever: s.members_ever,
            members: s.members,
            workers: s.workers,
            ..State::default()
        };
        return Ok(SmData { last_applied: old.last_applied, membership: old.membership, state });
    }
    if let Ok(old) = codec::decode::<SmDataV3>(bytes) {
        let s = old.state;
        let state = State {
            tags: upgrade_tags(s.tags),
            members_ever: s.members_ever,
            members: s.members,
            workers: s.workers,
            ..State::default()
        };
        return Ok(SmData { last_applied: old.last_applied, membership: old.membership, state });
    }
    if let Ok(old) = codec::decode::<SmDataV2>(bytes) {
        let mut state =
            State { tags: upgrade_tags(old.state.tags), members_ever: old.state.members_ever, ..State::default() };
        record_members(&mut state, member_ids(&old.membership), &mut Changes::default());
        return Ok(SmData { last_applied: old.last_applied, membership: old.membership, state });
    }
    if let Ok(old) = codec::decode::<SmDataV1>(bytes) {
        let mut state = State { tags: upgrade_tags(old.tags), ..State::default() };
        record_members(&mut state, member_ids(&old.membership), &mut Changes::default());
        return Ok(SmData { last_applied: old.last_applied, membership: old.membership, state });
    }
    Err(e)
}

#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    data: Vec<u8>,
}

/// The tokens as last applied, by ID: replaced whole after each batch that changed one.
pub type Tokens = std::collections::BTreeMap<u64, TokenRecord>;

/// Read-only view of the applied state for the rest of the node (tag lookups, `/db`).
#[derive(Clone)]
pub struct StateReader {
    data: Arc<RwLock<SmData>>,
    tokens: Arc<ArcSwap<Tokens>>,
}

impl StateReader {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, SmData> {
        // A poisoned lock means a panic while applying; the data is still the last consistent
        // state because apply() mutates only on success.
        self.data.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The tokens as of the last applied entry: one atomic load, no lock (the request path).
    pub fn tokens(&self) -> arc_swap::Guard<Arc<Tokens>> {
        self.tokens.load()
    }

    /// The audit trail's page of up to `limit` records after `after_seq` passing `filter`,
    /// the next page's `after_seq`, the oldest record kept and the retention.
    pub fn audit_page(
        &self,
        filter: &leaf_api::audit::AuditFilter,
        after_seq: u64,
        limit: usize,
    ) -> leaf_api::audit::AuditPage {
        let d = self.read();
        let log = &d.state.audit;
        let (records, next_after_seq) = log.page(filter, after_seq, limit);
        leaf_api::audit::AuditPage {
            records,
            next_after_seq,
            oldest_seq: log.records.front().map(|r| r.seq),
            retention: log.retention,
        }
    }

    pub fn tag(&self, tag: &str) -> Option<TagRecord> {
        self.read().state.tags.get(tag).cloned()
    }

    pub fn tags(&self) -> Vec<(String, TagRecord)> {
        self.read().state.tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// Snowflake worker IDs in use.
    pub fn workers(&self) -> Vec<(u16, WorkerRecord)> {
        self.read().state.workers.iter().map(|(k, v)| (*k, v.clone())).collect()
    }

    pub fn tag_count(&self) -> usize {
        self.read().state.tags.len()
    }

    /// Runs `f` on the applied state under the read lock, for a reader that needs more than
    /// one record without copying the whole state (the forecasts). Keep `f` short: applying
    /// the next entry waits for it.
    pub fn with_state<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.read().state)
    }

    pub fn last_applied(&self) -> Option<LogId> {
        self.read().last_applied
    }

    /// A copy of the whole applied state (tests, diagnostics).
    pub fn data(&self) -> SmData {
        self.read().clone()
    }

    /// Whether `node_id` was a member once and was removed (node IDs are never reused).
    pub fn is_retired_node(&self, node_id: u64) -> bool {
        let d = self.read();
        let current = d.membership.membership().nodes().map(|(id, _)| *id);
        d.state.is_retired(node_id, current)
    }
}

/// The openraft state machine. Cheap to clone; clones share state (the snapshot builder is a
/// clone).
#[derive(Clone)]
pub struct StateMachineStore {
    db: sled::Db,
    sm: sled::Tree,
    snap: sled::Tree,
    data: Arc<RwLock<SmData>>,
    /// The tokens of `data`, published after each change (see [`StateReader::tokens`]).
    tokens: Arc<ArcSwap<Tokens>>,
    /// Locked before `data` wherever both are: a checkpoint then never sees a change in `data`
    /// whose key is not yet in the set.
    dirty: Arc<Mutex<Dirty>>,
    /// Held while writing the `snapshot` tree: a build (openraft runs it as its own task) that
    /// finishes after a newer snapshot was installed must not replace it.
    snap_write: Arc<Mutex<()>>,
    journal: Journal,
    /// The last log ID of the snapshot on disk, for the log store: raised after each flush that
    /// stores a newer one.
    coverage: Coverage,
}

fn sm_read_err(e: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageIOError::read_state_machine(&e).into()
}

fn sm_write_err(e: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageIOError::write_state_machine(&e).into()
}

fn snap_write_err(meta: Option<&SnapshotMeta>, e: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageIOError::write_snapshot(meta.map(|m| m.signature()), &e).into()
}

fn tag_key(tag: &str) -> Vec<u8> {
    let mut k = TAG_PREFIX.to_vec();
    k.extend_from_slice(tag.as_bytes());
    k
}

fn worker_key(id: u16) -> Vec<u8> {
    let mut k = WORKER_PREFIX.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

fn u64_key(prefix: &[u8], id: u64) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The `u64` after `prefix` in a key of the `sm` tree.
fn u64_of_key(prefix: &[u8], k: &[u8]) -> Result<u64, StorageError> {
    let id: [u8; 8] =
        k[prefix.len()..].try_into().map_err(|_| sm_read_err(std::io::Error::other(format!("malformed key {k:?}"))))?;
    Ok(u64::from_be_bytes(id))
}

impl StateMachineStore {
    pub(crate) fn open(db: &sled::Db, journal_cap: usize, coverage: Coverage) -> Result<Self, StorageError> {
        let sm = db.open_tree("sm").map_err(sm_read_err)?;
        let snap = db.open_tree("snapshot").map_err(sm_read_err)?;
        let mut data = SmData::default();
        if let Some(v) = sm.get(KEY_APPLIED).map_err(sm_read_err)? {
            data.last_applied = codec::decode(&v).map_err(sm_read_err)?;
        }
        if let Some(v) = sm.get(KEY_MEMBERSHIP).map_err(sm_read_err)? {
            data.membership = codec::decode(&v).map_err(sm_read_err)?;
        }
        data.state.members = member_ids(&data.membership).collect();
        if let Some(v) = sm.get(KEY_MEMBERS_EVER).map_err(sm_read_err)? {
            data.state.members_ever = codec::decode(&v).map_err(sm_read_err)?;
        }
        for item in sm.scan_prefix(TAG_PREFIX) {
            let (k, v) = item.map_err(sm_read_err)?;
            let tag = String::from_utf8(k[TAG_PREFIX.len()..].to_vec()).map_err(sm_read_err)?;
            data.state.tags.insert(tag, decode_tag_record(&v).map_err(sm_read_err)?);
        }
        for item in sm.scan_prefix(WORKER_PREFIX) {
            let (k, v) = item.map_err(sm_read_err)?;
            let id: [u8; 2] = k[WORKER_PREFIX.len()..]
                .try_into()
                .map_err(|_| sm_read_err(std::io::Error::other(format!("malformed worker key {:?}", k.as_ref()))))?;
            data.state.workers.insert(u16::from_be_bytes(id), codec::decode(&v).map_err(sm_read_err)?);
        }
        for item in sm.scan_prefix(TOKEN_PREFIX) {
            let (k, v) = item.map_err(sm_read_err)?;
            data.state.tokens.insert(u64_of_key(TOKEN_PREFIX, &k)?, codec::decode(&v).map_err(sm_read_err)?);
        }
        if let Some(v) = sm.get(KEY_AUDIT_META).map_err(sm_read_err)? {
            let meta: AuditMeta = codec::decode(&v).map_err(sm_read_err)?;
            data.state.audit = AuditLog { retention: meta.retention, next_seq: meta.next_seq, ..AuditLog::default() };
        }
        // Big-endian keys scan in `seq` order: the trail's order.
        for item in sm.scan_prefix(AUDIT_PREFIX) {
            let (_, v) = item.map_err(sm_read_err)?;
            data.state.audit.records.push_back(codec::decode::<AuditRecord>(&v).map_err(sm_read_err)?);
        }
        let applied = data.last_applied.map_or(0, |l| l.index);
        let journal = Journal::open(db, journal_cap, applied).map_err(sm_read_err)?;
        let store = StateMachineStore {
            db: db.clone(),
            sm,
            snap,
            tokens: Arc::new(ArcSwap::from_pointee(data.state.tokens.clone())),
            data: Arc::new(RwLock::new(data)),
            dirty: Arc::default(),
            snap_write: Arc::default(),
            journal,
            coverage,
        };
        if let Some(stored) = store.stored_snapshot()? {
            if stored.meta.last_log_id > store.reader().last_applied() {
                tracing::warn!(snapshot = %stored.meta.snapshot_id, "state machine is older than its snapshot; restoring");
                let restored = decode_sm_data(&stored.data).map_err(sm_read_err)?;
                store.replace(restored)?;
                store.journal.mark_gap(stored.meta.last_log_id.map_or(0, |l| l.index)).map_err(sm_write_err)?;
            }
        }
        // The snapshot on disk: a reopen finds at least its state, and the log may go up to it.
        store.coverage.raise(store.stored_snapshot()?.and_then(|s| s.meta.last_log_id));
        Ok(store)
    }

    /// The journal of committed allocations.
    pub fn journal(&self) -> Journal {
        self.journal.clone()
    }

    /// A read-only handle on the applied state.
    pub fn reader(&self) -> StateReader {
        StateReader { data: self.data.clone(), tokens: self.tokens.clone() }
    }

    /// Publishes `state`'s tokens to the readers.
    fn publish_tokens(&self, state: &State) {
        self.tokens.store(Arc::new(state.tokens.clone()));
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, SmData> {
        self.data.write().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_dirty(&self) -> MutexGuard<'_, Dirty> {
        // Poisoned only by a panic while noting keys; the set is still a superset of what the
        // last completed apply changed.
        self.dirty.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes the keys changed since the last checkpoint, from `d`, with `d`'s last applied
    /// log ID, in one atomic batch. `d` must be the current state (or a copy taken under the
    /// `dirty` lock).
    fn checkpoint_from(&self, dirty: &mut Dirty, d: &SmData) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for tag in &dirty.changes.tags {
            match d.state.tags.get(tag) {
                Some(record) => batch.insert(tag_key(tag), codec::encode(record).map_err(sm_write_err)?),
                None => batch.remove(tag_key(tag)),
            }
        }
        for id in &dirty.changes.workers {
            match d.state.workers.get(id) {
                Some(record) => batch.insert(worker_key(*id), codec::encode(record).map_err(sm_write_err)?),
                None => batch.remove(worker_key(*id)),
            }
        }
        for id in &dirty.changes.tokens {
            match d.state.tokens.get(id) {
                Some(record) => batch.insert(u64_key(TOKEN_PREFIX, *id), codec::encode(record).map_err(sm_write_err)?),
                None => batch.remove(u64_key(TOKEN_PREFIX, *id)),
            }
        }
        let audit = &d.state.audit;
        for seq in &dirty.changes.audit {
            // Records are ordered by `seq`: find one by binary search.
            let i = audit.records.partition_point(|r| r.seq < *seq);
            match audit.records.get(i).filter(|r| r.seq == *seq) {
                Some(record) => batch.insert(u64_key(AUDIT_PREFIX, *seq), codec::encode(record).map_err(sm_write_err)?),
                None => batch.remove(u64_key(AUDIT_PREFIX, *seq)),
            }
        }
        if dirty.changes.audit_meta {
            batch.insert(KEY_AUDIT_META, codec::encode(&audit.meta()).map_err(sm_write_err)?);
        }
        batch.insert(KEY_APPLIED, codec::encode(&d.last_applied).map_err(sm_write_err)?);
        if dirty.membership || dirty.changes.members {
            batch.insert(KEY_MEMBERSHIP, codec::encode(&d.membership).map_err(sm_write_err)?);
            batch.insert(KEY_MEMBERS_EVER, codec::encode(&d.state.members_ever).map_err(sm_write_err)?);
        }
        self.sm.apply_batch(batch).map_err(sm_write_err)?;
        *dirty = Dirty::default();
        Ok(())
    }

    /// Writes a checkpoint of the `sm` tree now if anything changed since the last one, and
    /// flushes it: a clean shutdown calls this so the next start has less to re-apply. Must
    /// run inside a tokio runtime (the flush uses its blocking pool).
    pub async fn checkpoint(&self) -> Result<(), StorageError> {
        {
            let mut dirty = self.lock_dirty();
            if dirty.entries > 0 {
                let d = self.data.read().unwrap_or_else(|e| e.into_inner());
                self.checkpoint_from(&mut dirty, &d)?;
            }
        }
        crate::flush(&self.db).await.map_err(sm_write_err)?;
        Ok(())
    }

    /// The last applied log index written to the `sm` tree (tests).
    #[doc(hidden)]
    pub fn checkpointed_index(&self) -> Result<u64, StorageError> {
        match self.sm.get(KEY_APPLIED).map_err(sm_read_err)? {
            Some(v) => Ok(codec::decode::<Option<LogId>>(&v).map_err(sm_read_err)?.map_or(0, |l| l.index)),
            None => Ok(0),
        }
    }

    fn stored_snapshot(&self) -> Result<Option<StoredSnapshot>, StorageError> {
        match self.snap.get(KEY_SNAPSHOT).map_err(sm_read_err)? {
            Some(v) => Ok(Some(codec::decode(&v).map_err(sm_read_err)?)),
            None => Ok(None),
        }
    }

    /// Replaces the whole state, in memory and in the `sm` tree.
    fn replace(&self, new: SmData) -> Result<(), StorageError> {
        let mut dirty = self.lock_dirty();
        let mut batch = sled::Batch::default();
        for item in self.sm.iter() {
            let (k, _) = item.map_err(sm_write_err)?;
            batch.remove(k);
        }
        for (tag, record) in &new.state.tags {
            batch.insert(tag_key(tag), codec::encode(record).map_err(sm_write_err)?);
        }
        for (id, record) in &new.state.workers {
            batch.insert(worker_key(*id), codec::encode(record).map_err(sm_write_err)?);
        }
        for (id, record) in &new.state.tokens {
            batch.insert(u64_key(TOKEN_PREFIX, *id), codec::encode(record).map_err(sm_write_err)?);
        }
        for record in &new.state.audit.records {
            batch.insert(u64_key(AUDIT_PREFIX, record.seq), codec::encode(record).map_err(sm_write_err)?);
        }
        batch.insert(KEY_AUDIT_META, codec::encode(&new.state.audit.meta()).map_err(sm_write_err)?);
        batch.insert(KEY_APPLIED, codec::encode(&new.last_applied).map_err(sm_write_err)?);
        batch.insert(KEY_MEMBERSHIP, codec::encode(&new.membership).map_err(sm_write_err)?);
        batch.insert(KEY_MEMBERS_EVER, codec::encode(&new.state.members_ever).map_err(sm_write_err)?);
        self.sm.apply_batch(batch).map_err(sm_write_err)?;
        self.publish_tokens(&new.state);
        *self.write() = new;
        *dirty = Dirty::default();
        Ok(())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        // Checkpoint the state the snapshot holds, so the `sm` tree is never older than the
        // snapshot and the log purged behind it.
        failpoint!("sm-build-begin");
        let data = {
            let mut dirty = self.lock_dirty();
            let data = self.data.read().unwrap_or_else(|e| e.into_inner()).clone();
            self.checkpoint_from(&mut dirty, &data)?;
            data
        };
        failpoint!("sm-build-checkpointed");
        let bytes = codec::encode(&data).map_err(|e| snap_write_err(None, e))?;
        let seq = self.db.generate_id().map_err(|e| snap_write_err(None, e))?;
        let snapshot_id = match data.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, seq),
            None => format!("0-0-{seq}"),
        };
        let meta =
            SnapshotMeta { last_log_id: data.last_applied, last_membership: data.membership.clone(), snapshot_id };
        let stored = StoredSnapshot { meta: meta.clone(), data: bytes.clone() };
        let enc = codec::encode(&stored).map_err(|e| snap_write_err(Some(&meta), e))?;
        {
            let _w = self.snap_write.lock().unwrap_or_else(|e| e.into_inner());
            // A snapshot installed while this one was being built is newer: keep it.
            if self.stored_snapshot()?.is_none_or(|s| s.meta.last_log_id <= meta.last_log_id) {
                self.snap.insert(KEY_SNAPSHOT, enc).map_err(|e| snap_write_err(Some(&meta), e))?;
            }
        }
        failpoint!("sm-build-snapshot-written");
        crate::flush(&self.db).await.map_err(|e| snap_write_err(Some(&meta), e))?;
        failpoint!("sm-build-done");
        // This snapshot is on disk now (or a newer one is, which already raised the coverage).
        self.coverage.raise(meta.last_log_id);
        tracing::info!(snapshot = %meta.snapshot_id, bytes = bytes.len(), "built snapshot");
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let d = self.data.read().unwrap_or_else(|e| e.into_inner());
        Ok((d.last_applied, d.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ApplyResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut results = Vec::new();
        let mut journal = Vec::new();
        let mut dirty = self.lock_dirty();
        let tokens_before = dirty.changes.tokens.len();
        let mut tokens_changed = false;
        let mut d = self.write();
        for entry in entries {
            d.last_applied = Some(entry.log_id);
            dirty.entries += 1;
            let result = match entry.payload {
                EntryPayload::Blank => Ok(Applied::Nothing),
                EntryPayload::Normal(cmd) => {
                    // `apply` notes the keys it writes (none when it refuses the command).
                    let r = apply(&mut d.state, &cmd, &mut dirty.changes);
                    tokens_changed |= matches!(r, Ok(Applied::Token { .. }));
                    if let (Ok(Applied::Segment(a)), Op::AllocateSegment { tag, node_id, .. }) = (&r, &cmd.op) {
                        let record = JournalRecord {
                            tag: tag.clone(),
                            node_id: *node_id,
                            start: a.start,
                            end: a.end,
                            at_ms: cmd.at_ms,
                        };
                        journal.push((entry.log_id.index, record));
                    }
                    r
                }
                EntryPayload::Membership(m) => {
                    record_members(&mut d.state, m.nodes().map(|(id, _)| *id), &mut dirty.changes);
                    d.membership = StoredMembership::new(Some(entry.log_id), m);
                    dirty.membership = true;
                    Ok(Applied::Nothing)
                }
            };
            results.push(result);
        }
        let last_index = d.last_applied.map_or(0, |l| l.index);
        // Before this call returns (and so before openraft reports the entries applied): a
        // node refuses a revoked token once it applied the revocation.
        if tokens_changed || dirty.changes.tokens.len() != tokens_before {
            self.publish_tokens(&d.state);
        }
        drop(d);
        // The journal before any checkpoint that covers its records: `Journal::open` trusts
        // the checkpointed index to have its allocations recorded.
        if !journal.is_empty() {
            self.journal.record(&journal).map_err(sm_write_err)?;
        }
        self.journal.applied_through(last_index);
        if dirty.entries >= CHECKPOINT_EVERY {
            // Readers may go on meanwhile; nothing changes `data` while `dirty` is held.
            let d = self.data.read().unwrap_or_else(|e| e.into_inner());
            failpoint!("sm-checkpoint-begin");
            self.checkpoint_from(&mut dirty, &d)?;
            failpoint!("sm-checkpoint-written");
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        let new = decode_sm_data(&bytes).map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        if new.last_applied != meta.last_log_id {
            let e = std::io::Error::other(format!(
                "snapshot data is at {:?} but its meta says {:?}",
                new.last_applied, meta.last_log_id
            ));
            return Err(StorageIOError::read_snapshot(Some(meta.signature()), &e).into());
        }
        failpoint!("sm-install-begin");
        // Mark the journal's gap first, flushed with the snapshot: the journal never claims
        // records that the restored state skipped, whenever a crash interrupts this.
        self.journal.mark_gap(meta.last_log_id.map_or(0, |l| l.index)).map_err(sm_write_err)?;
        // Save the snapshot first: if we crash while rewriting `sm`, open() restores from it.
        let stored = StoredSnapshot { meta: meta.clone(), data: bytes };
        let enc = codec::encode(&stored).map_err(|e| snap_write_err(Some(meta), e))?;
        {
            let _w = self.snap_write.lock().unwrap_or_else(|e| e.into_inner());
            self.snap.insert(KEY_SNAPSHOT, enc).map_err(|e| snap_write_err(Some(meta), e))?;
        }
        failpoint!("sm-install-snapshot-written");
        crate::flush(&self.db).await.map_err(|e| snap_write_err(Some(meta), e))?;
        // From here a reopen restores this snapshot: the log may be purged up to it (openraft
        // asked for that when it queued this install; the log store waited for this).
        self.coverage.raise(meta.last_log_id);
        failpoint!("sm-install-snapshot-flushed");
        self.replace(new)?;
        failpoint!("sm-install-state-replaced");
        crate::flush(&self.db).await.map_err(sm_write_err)?;
        failpoint!("sm-install-done");
        tracing::info!(snapshot = %meta.snapshot_id, "installed snapshot");
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        Ok(self.stored_snapshot()?.map(|s| Snapshot { meta: s.meta, snapshot: Box::new(Cursor::new(s.data)) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tag record as releases before profiles wrote it.
    #[derive(Serialize, Clone)]
    struct OldRecord {
        max_id: i64,
        step: i64,
        description: String,
        created_ms: i64,
        updated_ms: i64,
    }

    fn old_record() -> (OldRecord, TagRecord) {
        let old = OldRecord { max_id: 7, step: 2, description: "d".into(), created_ms: 1, updated_ms: 2 };
        let new = TagRecord {
            max_id: 7,
            step: 2,
            description: "d".into(),
            created_ms: 1,
            updated_ms: 2,
            profile: StoredProfile::Segment,
            upper_bound: None,
        };
        (old, new)
    }

    #[test]
    fn checkpointed_tags_of_releases_before_profiles_still_decode() {
        let (old, new) = old_record();
        assert_eq!(decode_tag_record(&codec::encode(&old).unwrap()).unwrap(), new);
        let daily = TagRecord {
            profile: StoredProfile::Daily {
                format: leaf_api::profile::DailyFormat { digits: 6, utc_offset_minutes: 480 },
                day: 20261123,
            },
            ..new.clone()
        };
        assert_eq!(decode_tag_record(&codec::encode(&daily).unwrap()).unwrap(), daily);
        assert!(decode_tag_record(b"garbage").is_err());
    }

    #[test]
    fn snapshots_of_earlier_releases_still_decode() {
        #[derive(Serialize)]
        struct V1 {
            last_applied: Option<LogId>,
            membership: StoredMembership,
            tags: std::collections::BTreeMap<String, OldRecord>,
        }
        let nodes = std::collections::BTreeMap::from([(1, openraft::BasicNode::new("a:1"))]);
        let membership = StoredMembership::new(None, openraft::Membership::new(vec![[1].into()], nodes));
        let (old_rec, record) = old_record();
        let old = V1 {
            last_applied: None,
            membership,
            tags: [("t".to_string(), old_rec.clone()), ("u".into(), old_rec)].into(),
        };
        let bytes = codec::encode(&old).unwrap();
        let d = decode_sm_data(&bytes).unwrap();
        assert_eq!(d.state.tags["t"], record);
        assert!(d.state.members_ever.contains(&1));
        assert!(d.state.members.contains(&1));
        // The second release's layout: tags and members_ever, no workers.
        #[derive(Serialize)]
        struct V2State {
            tags: std::collections::BTreeMap<String, OldRecord>,
            members_ever: std::collections::BTreeSet<u64>,
        }
        #[derive(Serialize)]
        struct V2 {
            last_applied: Option<LogId>,
            membership: StoredMembership,
            state: V2State,
        }
        let v2 = V2 {
            last_applied: None,
            membership: old.membership.clone(),
            state: V2State { tags: old.tags.clone(), members_ever: [1, 7].into() },
        };
        let d2 = decode_sm_data(&codec::encode(&v2).unwrap()).unwrap();
        assert_eq!(d2.state.members_ever, [1, 7].into());
        assert_eq!(d2.state.members, [1].into());
        assert_eq!(d2.state.tags["t"], record);
        assert!(d2.state.workers.is_empty());
        // The third release's: members and workers, tags without profiles.
        #[derive(Serialize)]
        struct V3State {
            tags: std::collections::BTreeMap<String, OldRecord>,
            members_ever: std::collections::BTreeSet<u64>,
            members: std::collections::BTreeSet<u64>,
            workers: std::collections::BTreeMap<u16, WorkerRecord>,
        }
        #[derive(Serialize)]
        struct V3 {
            last_applied: Option<LogId>,
            membership: StoredMembership,
            state: V3State,
        }
        let worker = WorkerRecord {
            node_id: 1,
            high_water_ms: 5,
            lease_expires_ms: 6,
            lease_ms: 1000,
            since_ms: 1,
            previous_node_id: None,
        };
        let v3 = V3 {
            last_applied: None,
            membership: old.membership.clone(),
            state: V3State {
                tags: old.tags.clone(),
                members_ever: [1, 7].into(),
                members: [1].into(),
                workers: [(3, worker.clone())].into(),
            },
        };
        let d3 = decode_sm_data(&codec::encode(&v3).unwrap()).unwrap();
        assert_eq!((d3.state.tags["t"].clone(), d3.state.tags["u"].clone()), (record.clone(), record.clone()));
        assert_eq!(d3.state.workers[&3], worker);
        assert_eq!(d3.state.members_ever, [1, 7].into());
        // And the current layout round-trips.
        let again = decode_sm_data(&codec::encode(&d).unwrap()).unwrap();
        assert_eq!(again, d);
        assert!(decode_sm_data(b"garbage").is_err());
    }

    /// The worst case `MAX_TAGS` documents: every tag at its longest name and description and
    /// its widest numbers, every worker ID held. The snapshot still encodes, within the bound
    /// the doc computes.
    #[test]
    fn the_largest_possible_state_still_encodes() {
        use crate::tags::{MAX_DESCRIPTION_BYTES, MAX_TAGS};
        use crate::workers::WORKER_IDS;
        let description = "d".repeat(MAX_DESCRIPTION_BYTES);
        let mut state = State::default();
        for i in 0..MAX_TAGS {
            let record = TagRecord {
                max_id: i64::MAX,
                step: leaf_api::tag::MAX_STEP,
                description: description.clone(),
                created_ms: i64::MIN,
                updated_ms: i64::MIN,
                // The widest profile: a key of 32 bytes (the daily one is smaller).
                profile: StoredProfile::Obfuscated { key: [0xff; crate::OBFUSCATION_KEY_BYTES] },
                upper_bound: Some(i64::MAX - 1),
            };
            state.tags.insert(format!("{i:0width$}", width = leaf_api::tag::MAX_TAG_LEN), record);
        }
        for id in 0..WORKER_IDS {
            let record = WorkerRecord {
                node_id: u64::MAX,
                high_water_ms: i64::MIN,
                lease_expires_ms: i64::MIN,
                lease_ms: i64::MIN,
                since_ms: i64::MIN,
                previous_node_id: Some(u64::MAX),
            };
            state.workers.insert(id, record);
        }
        let tags_only = codec::encode(&SmData { state: state.clone(), ..SmData::default() }).unwrap().len();
        // Every token at its widest: the longest name, eight of the longest patterns, a quota,
        // a previous secret, an actor with the longest name.
        use leaf_api::audit::{Actor, AuditAction, MAX_ACTOR_NAME};
        use leaf_api::tokens::{Quota, Right, TagPattern, TokenId, MAX_TOKEN_NAME, MAX_TOKEN_PATTERNS};
        let patterns: Vec<TagPattern> = (0..MAX_TOKEN_PATTERNS)
            .map(|i| TagPattern::parse(&format!("{i:0width$}*", width = leaf_api::tag::MAX_TAG_LEN - 1)).unwrap())
            .collect();
        let actor = Actor::Token { id: TokenId(u64::MAX), name: "a".repeat(MAX_ACTOR_NAME) };
        for i in 0..crate::tokens::MAX_TOKENS as u64 {
            let record = TokenRecord {
                name: "n".repeat(MAX_TOKEN_NAME),
                rights: Right::ALL.into_iter().collect(),
                tags: patterns.clone(),
                quota: Some(Quota { rate_per_sec: u32::MAX, burst: u32::MAX }),
                secret_hash: [0xff; 32],
                previous: Some(([0xff; 32], i64::MIN)),
                created_ms: i64::MIN,
                created_by: actor.clone(),
                rotated_ms: Some(i64::MIN),
            };
            state.tokens.insert(u64::MAX - i, record);
        }
        // Every audit record at its widest: a token creation with all of the above.
        let max = crate::audit::MAX_AUDIT_RECORDS as u64;
        for seq in 0..max {
            let action = AuditAction::TokenCreated {
                token: TokenId(u64::MAX),
                name: "n".repeat(MAX_TOKEN_NAME),
                rights: Right::ALL.to_vec(),
                tags: patterns.clone(),
                quota: Some(Quota { rate_per_sec: u32::MAX, burst: u32::MAX }),
            };
            let record = AuditRecord { seq: u64::MAX - max + seq, at_ms: i64::MIN, actor: actor.clone(), action };
            state.audit.records.push_back(record);
        }
        let data = SmData { state, ..SmData::default() };
        let bytes = codec::encode(&data).unwrap();
        println!("worst-case state: {} bytes ({} of them tags and workers)", bytes.len(), tags_only);
        assert!(tags_only <= 49_320_000, "{tags_only} bytes");
        assert!(bytes.len() <= 57_000_000, "{} bytes", bytes.len());
        let meta = SnapshotMeta::default();
        let stored = codec::encode(&StoredSnapshot { meta, data: bytes }).unwrap();
        assert!(stored.len() < codec::MAX_PAYLOAD, "{} bytes", stored.len());
    }
}
