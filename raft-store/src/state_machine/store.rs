//! The state machine's sled I/O: loading the state at open, its checkpoints, and replacing it
//! whole.
//!
//! Tree `sm`: `t/<tag>` → [`TagRecord`](crate::TagRecord), `w/<worker id, 2 bytes BE>` →
//! [`WorkerRecord`](crate::WorkerRecord), `k/<token id, 8 bytes BE>` →
//! [`TokenRecord`](crate::TokenRecord), `p/<template name>` →
//! [`TemplateRecord`](crate::TemplateRecord), `a/<seq, 8 bytes BE>` → [`AuditRecord`], `m/audit` →
//! the trail's [`AuditMeta`], `r/<region name>` → a global tier's
//! [`RegionRecord`](crate::regions::RegionRecord), `m/region` → a region's
//! [`Identity`](crate::regions::Identity), `b/<tag>` → a region's
//! [`TagBlocks`](crate::regions::TagBlocks), `h/<tag>` → a tag's [`Home`](crate::regions::Home) (both
//! sides), `l/<region name>` → the end of a region's lease (global tier), `m/applied` → last applied log ID, `m/membership` → last applied
//! membership (the current members are derived from it), `m/members_ever` → every node ID
//! ever in a membership, `m/lineage` → the [`Lineage`](crate::restore::Lineage) of a restored
//! state (absent in one never restored; nothing but the restore writes it).
//!
//! The tree holds the changes since its base snapshot (`m/base`; see `base`), removals as
//! empty values; with no base it holds the whole state.
//!
//! The tree is a checkpoint, not a mirror: `apply` changes the state in memory and notes which
//! keys changed, and every [`CHECKPOINT_EVERY`](super::CHECKPOINT_EVERY) entries (sooner once
//! [`CHECKPOINT_KEYS`](super::CHECKPOINT_KEYS) keys changed, and whenever a snapshot is built)
//! writes those keys with `m/applied` in one atomic step (one sled batch, or through tree
//! `sm_pending` when they are many: see `staged`). sled makes
//! a batch atomic by writing out its log buffer before and after it, so a batch per entry cost
//! four disk writes per segment allocation; a checkpoint costs two per `CHECKPOINT_EVERY`
//! entries. Nothing is lost: the log entries are on disk before they are applied, purges stay
//! behind the last snapshot, which is never newer than the checkpoint, and on open openraft
//! re-applies the committed entries after `m/applied`, which yields the same state because
//! [`apply`](crate::apply::apply) is deterministic. Checkpoints are not flushed on their own;
//! sled flushes are database-wide, so the next append, vote or purge makes them durable.
//!
//! On open, a snapshot newer than the state in `sm` (a crash mid-install) replaces it.
use std::sync::{Arc, RwLock};

use arc_swap::ArcSwap;
use leaf_api::audit::AuditRecord;
use leaf_api::codec;

use super::base::Base;
use super::legacy::{decode_tag_record, decode_token_record};
use super::{member_ids, staged, Dirty, SmData, StateMachineStore};
use crate::audit::AuditMeta;
use crate::coverage::Coverage;
use crate::gapless::ledger::decode_number_record;
use crate::journal::Journal;
use crate::types::{LogId, StorageError, StorageIOError};

/// Keys written (or removed) per sled batch when the whole state is replaced (see `staged`
/// for why sled batches stay small).
#[cfg(test)]
const REPLACE_BATCH: usize = super::staged::CHUNK_KEYS;

pub(super) const KEY_APPLIED: &[u8] = b"m/applied";
const KEY_MEMBERSHIP: &[u8] = b"m/membership";
const KEY_MEMBERS_EVER: &[u8] = b"m/members_ever";
const TAG_PREFIX: &[u8] = b"t/";
const WORKER_PREFIX: &[u8] = b"w/";
const TOKEN_PREFIX: &[u8] = b"k/";
const AUDIT_PREFIX: &[u8] = b"a/";
const TEMPLATE_PREFIX: &[u8] = b"p/";
const NUMBER_PREFIX: &[u8] = b"n/";
/// A gapless series' limits, by tag (only the series that set theirs).
const LIMITS_PREFIX: &[u8] = b"g/";
/// A global tier's regions, by name.
const REGION_PREFIX: &[u8] = b"r/";
/// A regional cluster's blocks, by tag.
const BLOCKS_PREFIX: &[u8] = b"b/";
/// Homed tags' homes, by tag.
const HOMES_PREFIX: &[u8] = b"h/";
/// The end of each region's lease, by name (global tier).
const LEASES_PREFIX: &[u8] = b"l/";
/// Which region a regional cluster is.
const KEY_REGION: &[u8] = b"m/region";
const KEY_AUDIT_META: &[u8] = b"m/audit";
const KEY_LINEAGE: &[u8] = b"m/lineage";
/// The cluster's active version; only once raised above [`crate::version::BASE`], so that a
/// state of a cluster that never raised it reads on the releases before cluster versions (and
/// one that did is refused by them: they know no such key).
const KEY_VERSION: &[u8] = b"m/version";

/// A read error of the state machine.
pub(super) fn sm_read_err(e: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageIOError::read_state_machine(&e).into()
}

/// A write error of the state machine.
pub(super) fn sm_write_err(e: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageIOError::write_state_machine(&e).into()
}

/// The key of `tag`'s record.
fn tag_key(tag: &str) -> Vec<u8> {
    let mut k = TAG_PREFIX.to_vec();
    k.extend_from_slice(tag.as_bytes());
    k
}

/// The key of template `name`'s record.
fn template_key(name: &str) -> Vec<u8> {
    let mut k = TEMPLATE_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// `prefix` and `name`: the key of a record by name.
fn named_key(prefix: &[u8], name: &str) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// The key of series `tag`'s limits.
fn limits_key(tag: &str) -> Vec<u8> {
    named_key(LIMITS_PREFIX, tag)
}

/// The key of a gapless number's ledger entry: `n/<tag>\0<period BE><number BE>`, so a
/// series' numbers scan in order (a tag name holds no NUL).
fn number_key(tag: &str, period: u32, number: u64) -> Vec<u8> {
    let mut k = NUMBER_PREFIX.to_vec();
    k.extend_from_slice(tag.as_bytes());
    k.push(0);
    k.extend_from_slice(&period.to_be_bytes());
    k.extend_from_slice(&number.to_be_bytes());
    k
}

/// The tag, period and number of a ledger key's part after [`NUMBER_PREFIX`].
fn number_of_key(rest: &[u8]) -> Option<(&str, u32, u64)> {
    let split = rest.len().checked_sub(13)?;
    let (tag, place) = rest.split_at(split);
    let (nul, place) = place.split_first()?;
    let (period, number) = place.split_at(4);
    let tag = std::str::from_utf8(tag).ok().filter(|t| leaf_api::tag::validate_tag(t).is_ok())?;
    let (period, number) = (u32::from_be_bytes(period.try_into().ok()?), u64::from_be_bytes(number.try_into().ok()?));
    (*nul == 0).then_some((tag, period, number))
}

/// The key of worker ID `id`'s record.
fn worker_key(id: u16) -> Vec<u8> {
    let mut k = WORKER_PREFIX.to_vec();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// `prefix` and `id`, big-endian (so keys scan in `id` order).
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

/// Every pair of the `sm` tree that holds the state `d`, handed to `f` in key order (the
/// prefixes in byte order, each map in its own): what a checkpoint of everything would write,
/// and what a snapshot file holds, so that a file written from it can be a base (see `base`).
pub(super) fn for_each_pair(
    d: &SmData,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    for record in &d.state.audit.records {
        f(&u64_key(AUDIT_PREFIX, record.seq), &enc(record)?)?;
    }
    for (tag, blocks) in &d.state.regions.blocks {
        f(&named_key(BLOCKS_PREFIX, tag), &enc(blocks)?)?;
    }
    for (tag, limits) in &d.state.ledger.limits {
        f(&limits_key(tag), &enc(limits)?)?;
    }
    for (tag, home) in &d.state.regions.homes {
        f(&named_key(HOMES_PREFIX, tag), &enc(home)?)?;
    }
    for (id, record) in &d.state.tokens {
        f(&u64_key(TOKEN_PREFIX, *id), &enc(record)?)?;
    }
    for (name, until) in &d.state.regions.leases {
        f(&named_key(LEASES_PREFIX, name), &enc(until)?)?;
    }
    f(KEY_APPLIED, &enc(&d.last_applied)?)?;
    f(KEY_AUDIT_META, &enc(&d.state.audit.meta())?)?;
    // Only in a restored state, so a state never restored reads on earlier releases.
    if d.state.lineage != Default::default() {
        f(KEY_LINEAGE, &enc(&d.state.lineage)?)?;
    }
    f(KEY_MEMBERS_EVER, &enc(&d.state.members_ever)?)?;
    f(KEY_MEMBERSHIP, &enc(&d.membership)?)?;
    if let Some(here) = &d.state.regions.here {
        f(KEY_REGION, &enc(here)?)?;
    }
    if d.state.version > crate::version::BASE {
        f(KEY_VERSION, &enc(&d.state.version)?)?;
    }
    for (tag, series) in &d.state.ledger.series {
        for ((period, number), record) in &series.numbers {
            f(&number_key(tag, *period, *number), &enc(record)?)?;
        }
    }
    for (name, record) in &d.state.templates {
        f(&template_key(name), &enc(record)?)?;
    }
    for (name, record) in &d.state.regions.registry {
        f(&named_key(REGION_PREFIX, name), &enc(record)?)?;
    }
    for (tag, record) in &d.state.tags {
        f(&tag_key(tag), &enc(record)?)?;
    }
    for (id, record) in &d.state.workers {
        f(&worker_key(*id), &enc(record)?)?;
    }
    Ok(())
}

/// `v` encoded as a record of the `sm` tree.
fn enc<T: serde::Serialize>(v: &T) -> Result<Vec<u8>, StorageError> {
    codec::encode(v).map_err(sm_write_err)
}

/// Builds the state from pairs of the `sm` tree, in any order: at open from the tree, and
/// from a snapshot file. Reads the layouts of earlier releases (see `legacy`).
#[derive(Default)]
pub(super) struct Loader {
    data: SmData,
    audit_meta: Option<AuditMeta>,
}

impl Loader {
    /// Takes one pair; refuses a key this release does not know.
    pub(super) fn pair(&mut self, k: &[u8], v: &[u8]) -> Result<(), String> {
        let s = &mut self.data.state;
        let bad = |e: &dyn std::fmt::Display| format!("key {}: {e}", String::from_utf8_lossy(k));
        if let Some(tag) = k.strip_prefix(TAG_PREFIX) {
            let tag = std::str::from_utf8(tag).map_err(|e| bad(&e))?;
            s.tags.insert(tag.to_owned(), decode_tag_record(v).map_err(|e| bad(&e))?);
        } else if let Some(id) = k.strip_prefix(WORKER_PREFIX) {
            let id: [u8; 2] = id.try_into().map_err(|_| bad(&"malformed worker key"))?;
            s.workers.insert(u16::from_be_bytes(id), codec::decode(v).map_err(|e| bad(&e))?);
        } else if k.starts_with(TOKEN_PREFIX) {
            let id = u64_of_key(TOKEN_PREFIX, k).map_err(|e| bad(&e))?;
            s.tokens.insert(id, decode_token_record(v).map_err(|e| bad(&e))?);
        } else if let Some(name) = k.strip_prefix(TEMPLATE_PREFIX) {
            let name = std::str::from_utf8(name).map_err(|e| bad(&e))?;
            s.templates.insert(name.to_owned(), codec::decode(v).map_err(|e| bad(&e))?);
        } else if let Some(rest) = k.strip_prefix(NUMBER_PREFIX) {
            let (tag, period, number) = number_of_key(rest).ok_or_else(|| bad(&"malformed ledger key"))?;
            s.ledger.insert(tag, (period, number), decode_number_record(v).map_err(|e| bad(&e))?);
        } else if let Some(tag) = k.strip_prefix(LIMITS_PREFIX) {
            let tag = std::str::from_utf8(tag).map_err(|e| bad(&e))?;
            s.ledger.limits.insert(tag.to_owned(), codec::decode(v).map_err(|e| bad(&e))?);
        } else if let Some(name) = k.strip_prefix(REGION_PREFIX) {
            let name = std::str::from_utf8(name).map_err(|e| bad(&e))?;
            s.regions.registry.insert(name.to_owned(), codec::decode(v).map_err(|e| bad(&e))?);
        } else if let Some(tag) = k.strip_prefix(BLOCKS_PREFIX) {
            let tag = std::str::from_utf8(tag).map_err(|e| bad(&e))?;
            s.regions.blocks.insert(tag.to_owned(), codec::decode(v).map_err(|e| bad(&e))?);
        } else if let Some(tag) = k.strip_prefix(HOMES_PREFIX) {
            let tag = std::str::from_utf8(tag).map_err(|e| bad(&e))?;
            s.regions.homes.insert(tag.to_owned(), codec::decode(v).map_err(|e| bad(&e))?);
        } else if let Some(name) = k.strip_prefix(LEASES_PREFIX) {
            let name = std::str::from_utf8(name).map_err(|e| bad(&e))?;
            s.regions.leases.insert(name.to_owned(), codec::decode(v).map_err(|e| bad(&e))?);
        } else if k == KEY_REGION {
            s.regions.here = Some(codec::decode(v).map_err(|e| bad(&e))?);
        } else if k.starts_with(AUDIT_PREFIX) {
            s.audit.records.push_back(codec::decode::<AuditRecord>(v).map_err(|e| bad(&e))?);
        } else if k == KEY_APPLIED {
            self.data.last_applied = codec::decode(v).map_err(|e| bad(&e))?;
        } else if k == KEY_MEMBERSHIP {
            self.data.membership = codec::decode(v).map_err(|e| bad(&e))?;
        } else if k == KEY_MEMBERS_EVER {
            s.members_ever = codec::decode(v).map_err(|e| bad(&e))?;
        } else if k == KEY_AUDIT_META {
            self.audit_meta = Some(codec::decode(v).map_err(|e| bad(&e))?);
        } else if k == KEY_LINEAGE {
            s.lineage = codec::decode(v).map_err(|e| bad(&e))?;
        } else if k == KEY_VERSION {
            s.version = codec::decode(v).map_err(|e| bad(&e))?;
            if s.version > crate::version::SUPPORTED {
                return Err(format!(
                    "the state is at cluster version {}, and this release supports versions up to {}: a node \
                     cannot go back to a release older than the cluster's version; run a release that supports it",
                    s.version,
                    crate::version::SUPPORTED
                ));
            }
        } else {
            return Err(bad(&"not a key of this release"));
        }
        Ok(())
    }

    /// The state the pairs make up.
    pub(super) fn finish(self) -> SmData {
        let Loader { mut data, audit_meta } = self;
        data.state.members = member_ids(&data.membership).collect();
        let audit = &mut data.state.audit;
        if let Some(meta) = audit_meta {
            (audit.retention, audit.next_seq) = (meta.retention, meta.next_seq);
        }
        // The trail's order; a tree scan yields it already (big-endian keys).
        audit.records.make_contiguous().sort_by_key(|r| r.seq);
        data
    }
}

impl StateMachineStore {
    /// Opens the `sm` and `snapshot` trees of `db` and loads the state from them (restoring the
    /// snapshot when it is newer), and the journal of `journal_cap` allocations. Snapshot files
    /// live in `snap_dir`.
    pub(crate) fn open(
        db: &crate::Disk,
        snap_dir: &std::path::Path,
        journal_cap: usize,
        coverage: Coverage,
    ) -> Result<Self, StorageError> {
        let sm = db.tree("sm").map_err(sm_read_err)?;
        let pending = db.tree("sm_pending").map_err(sm_read_err)?;
        staged::recover(&sm, &pending, KEY_APPLIED).map_err(sm_write_err)?;
        let snap = db.tree("snapshot").map_err(sm_read_err)?;
        let mut loader = Loader::default();
        super::base::merged(&sm, snap_dir, |k, v| {
            loader.pair(k, v).map_err(|e| sm_read_err(std::io::Error::other(e)))
        })?;
        let data = loader.finish();
        let applied = data.last_applied.map_or(0, |l| l.index);
        let journal = Journal::open(db, journal_cap, applied).map_err(sm_read_err)?;
        let store = StateMachineStore {
            db: db.clone(),
            sm,
            pending,
            snap,
            snap_dir: snap_dir.to_owned(),
            tokens: Arc::new(ArcSwap::from_pointee(data.state.tokens.clone())),
            archives: Arc::default(),
            data: Arc::new(RwLock::new(data)),
            dirty: Arc::default(),
            tree: Arc::default(),
            snap_write: Arc::default(),
            builds: Arc::new(tokio::sync::Semaphore::new(super::snapshot::BUILD_PERMITS as usize)),
            journal,
            coverage,
            weights: Default::default(),
        };
        store.open_snapshots()?;
        if let Some(current) = store.stored_snapshot()? {
            if current.meta.last_log_id > store.reader().last_applied() {
                tracing::warn!(snapshot = %current.meta.snapshot_id, "state machine is older than its snapshot; restoring");
                let restored = store.load_snapshot_file(&current)?;
                let base = Base { file: current.file.clone(), last_log_id: current.meta.last_log_id };
                store.replace_over(restored, &base)?;
                store.journal.mark_gap(current.meta.last_log_id.map_or(0, |l| l.index)).map_err(sm_write_err)?;
            }
        }
        // The snapshot on disk: a reopen finds at least its state, and the log may go up to it.
        store.coverage.raise(store.stored_snapshot()?.and_then(|s| s.meta.last_log_id));
        Ok(store)
    }

    /// Writes the keys changed since the last checkpoint, from `d`, with `d`'s last applied
    /// log ID, in one atomic batch. `d` must be the current state (or a copy taken under the
    /// `dirty` lock).
    pub(super) fn checkpoint_from(&self, dirty: &mut Dirty, d: &SmData) -> Result<(), StorageError> {
        let mut ops: Vec<staged::Op> = Vec::with_capacity(dirty.keys() + 3);
        for tag in &dirty.changes.tags {
            ops.push((tag_key(tag), d.state.tags.get(tag).map(enc).transpose()?));
        }
        for id in &dirty.changes.workers {
            ops.push((worker_key(*id), d.state.workers.get(id).map(enc).transpose()?));
        }
        for id in &dirty.changes.tokens {
            ops.push((u64_key(TOKEN_PREFIX, *id), d.state.tokens.get(id).map(enc).transpose()?));
        }
        let audit = &d.state.audit;
        for seq in &dirty.changes.audit {
            // Records are ordered by `seq`: find one by binary search.
            let i = audit.records.partition_point(|r| r.seq < *seq);
            let record = audit.records.get(i).filter(|r| r.seq == *seq);
            ops.push((u64_key(AUDIT_PREFIX, *seq), record.map(enc).transpose()?));
        }
        for name in &dirty.changes.templates {
            ops.push((template_key(name), d.state.templates.get(name).map(enc).transpose()?));
        }
        for tag in &dirty.changes.limits {
            ops.push((limits_key(tag), d.state.ledger.limits.get(tag).map(enc).transpose()?));
        }
        for (tag, period, number) in &dirty.changes.numbers {
            let record = d.state.ledger.get(tag, (*period, *number));
            ops.push((number_key(tag, *period, *number), record.map(enc).transpose()?));
        }
        for name in &dirty.changes.regions {
            ops.push((named_key(REGION_PREFIX, name), d.state.regions.registry.get(name).map(enc).transpose()?));
        }
        for tag in &dirty.changes.blocks {
            ops.push((named_key(BLOCKS_PREFIX, tag), d.state.regions.blocks.get(tag).map(enc).transpose()?));
        }
        for tag in &dirty.changes.homes {
            ops.push((named_key(HOMES_PREFIX, tag), d.state.regions.homes.get(tag).map(enc).transpose()?));
        }
        for name in &dirty.changes.leases {
            ops.push((named_key(LEASES_PREFIX, name), d.state.regions.leases.get(name).map(enc).transpose()?));
        }
        if dirty.changes.region {
            ops.push((KEY_REGION.to_vec(), d.state.regions.here.as_ref().map(enc).transpose()?));
        }
        if dirty.changes.audit_meta {
            ops.push((KEY_AUDIT_META.to_vec(), Some(enc(&audit.meta())?)));
        }
        if dirty.changes.version {
            ops.push((KEY_VERSION.to_vec(), Some(enc(&d.state.version)?)));
        }
        if dirty.membership || dirty.changes.members {
            ops.push((KEY_MEMBERSHIP.to_vec(), Some(enc(&d.membership)?)));
            ops.push((KEY_MEMBERS_EVER.to_vec(), Some(enc(&d.state.members_ever)?)));
        }
        // A removal is a tombstone: the key may be in the base snapshot (see `base`).
        for op in &mut ops {
            op.1.get_or_insert_with(Vec::new);
        }
        let applied = (KEY_APPLIED.to_vec(), Some(enc(&d.last_applied)?));
        staged::write(&self.sm, &self.pending, ops, applied).map_err(sm_write_err)?;
        *dirty = Dirty::default();
        Ok(())
    }

    /// Writes a checkpoint of the `sm` tree now if anything changed since the last one, and
    /// flushes it: a clean shutdown calls this so the next start has less to re-apply. Must
    /// run inside a tokio runtime (the flush uses its blocking pool).
    pub async fn checkpoint(&self) -> Result<(), StorageError> {
        {
            let mut dirty = self.lock_dirty();
            // Skipped while a snapshot build reads the tree (the log has the entries).
            if let (true, Ok(_tree)) = (dirty.entries > 0, self.tree.try_write()) {
                let d = self.data.read().unwrap_or_else(|e| e.into_inner());
                self.checkpoint_from(&mut dirty, &d)?;
            }
        }
        self.db.sync().await.map_err(sm_write_err)?;
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

    /// `tree`, for writing, for a replace of the whole state; the caller holds `dirty`. A
    /// snapshot build or backup may still be reading the tree (it holds no `dirty`): waits for
    /// it. Only on a blocking thread or at open, where nothing else holds it.
    pub(super) fn tree_for_replace(&self) -> tokio::sync::RwLockWriteGuard<'_, ()> {
        loop {
            match self.tree.try_write() {
                Ok(g) => break g,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    }

    /// Replaces the whole state, in memory and in the `sm` tree (which then holds it all, with
    /// no base), in batches of [`REPLACE_BATCH`] keys: the first removes `m/applied`, the last
    /// writes it. The tests' way to set a state up; nodes replace theirs over a snapshot file
    /// (`base`).
    #[cfg(test)]
    pub(super) fn replace(&self, new: SmData) -> Result<(), StorageError> {
        let mut dirty = self.lock_dirty();
        let _tree = self.tree_for_replace();
        self.sm.remove(KEY_APPLIED).map_err(sm_write_err)?;
        let mut batch = crate::Batch::default();
        let mut n = 0;
        let flush = |batch: &mut crate::Batch, n: &mut usize, force: bool| {
            if *n >= REPLACE_BATCH || (force && *n > 0) {
                self.sm.apply_batch(std::mem::take(batch)).map_err(sm_write_err)?;
                *n = 0;
            }
            Ok::<(), StorageError>(())
        };
        for item in self.sm.iter().keys() {
            batch.remove(item.map_err(sm_write_err)?);
            n += 1;
            flush(&mut batch, &mut n, false)?;
        }
        flush(&mut batch, &mut n, true)?;
        for_each_pair(&new, |k, v| {
            if k != KEY_APPLIED {
                batch.insert(k, v);
                n += 1;
                flush(&mut batch, &mut n, false)?;
            }
            Ok(())
        })?;
        batch.insert(KEY_APPLIED, codec::encode(&new.last_applied).map_err(sm_write_err)?);
        n += 1;
        flush(&mut batch, &mut n, true)?;
        self.publish_tokens(&new.state);
        *self.write() = new;
        *dirty = Dirty::default();
        self.publish_archives();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::{ClusterVersion, SUPPORTED};

    /// A node of this release on a state a later release raised beyond it (a downgrade after
    /// the cluster moved on) refuses to load it, saying why.
    #[test]
    fn a_state_of_a_later_cluster_version_is_refused_by_name() {
        let mut l = Loader::default();
        l.pair(KEY_VERSION, &codec::encode(&SUPPORTED).unwrap()).unwrap();
        assert_eq!(l.finish().state.version, SUPPORTED);
        let later = codec::encode(&ClusterVersion(SUPPORTED.0 + 1)).unwrap();
        let err = Loader::default().pair(KEY_VERSION, &later).unwrap_err();
        assert!(
            err.contains(&format!("cluster version {}", SUPPORTED.0 + 1)) && err.contains("cannot go back"),
            "{err}"
        );
    }
}
