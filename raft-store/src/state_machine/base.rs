//! The `sm` tree as the changes over a base snapshot file.
//!
//! sled keeps small records at several times their size and gives back little of what a
//! removal frees: a million tags are 41 MB of pairs, and a fresh sled database held them in
//! 195 MB of files; removing them all returned nothing until a reopen, which returned a third
//! (measured with sled 0.34.7). So the tree holds what changed since the last snapshot, and
//! the snapshot file holds the rest. (sled's file still keeps the size it once reached, so the
//! data directory does not shrink by this alone: BENCHMARKS.md.)
//!
//! - `m/base` → [`Base`]: the snapshot file the tree's pairs apply over, and its log ID.
//!   Absent, the tree holds the whole state: a node before its first snapshot, and a directory
//!   of an earlier release until its first snapshot here (the conversion, done by that build).
//! - A pair of the tree overrides the base's pair of its key; an empty value removes it (a
//!   tombstone: a codec record is never empty). [`merged`] yields the state's pairs: the base
//!   file's and the tree's, both in key order, merged.
//! - A snapshot build writes the merged pairs as its file (under `tree`, held for reading, so
//!   no checkpoint changes the tree meanwhile), names it in the `snapshot` tree, then
//!   [`rebases`](StateMachineStore::rebase) (`m/base` names the new file) and
//!   [`sheds`](StateMachineStore::shed) every pair the file holds as it is (the `m/` keys, a
//!   few records, stay).
//! - An install (and an open that finds its snapshot newer than the state) replaces the tree
//!   with just `m/base` naming the installed file ([`StateMachineStore::replace_over`]).
//!
//! A crash anywhere leaves a tree that loads: sled recovers a prefix of its writes, a new file is
//! synced (with its directory) before `m/base` names it, and a file stays until no `m/base` on
//! disk can name it (prune and open keep the base). A pair is shed only while it equals the
//! base's, so any prefix of the shedding reads the same. An install removes `m/applied` first,
//! so a crash midway leaves a state older than the snapshot the `snapshot` tree names, which
//! the next open replaces again.
use std::cmp::Ordering;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use leaf_api::codec;
use serde::{Deserialize, Serialize};
use sled::IVec;

use super::snapshot_file;
use super::store::{sm_read_err, sm_write_err, KEY_APPLIED};
use super::{SmData, StateMachineStore};
use crate::failpoint::failpoint;
use crate::types::{LogId, StorageError};

/// The key of the tree's [`Base`].
pub(super) const KEY_BASE: &[u8] = b"m/base";

/// The prefix of the keys a rebase keeps (the state's meta records).
const META_PREFIX: &[u8] = b"m/";

/// Keys removed per sled batch by a rebase.
const REMOVE_BATCH: usize = 1024;

/// How far a [`StateMachineStore::shed`] got.
#[derive(Default)]
struct Shed {
    removed: u64,
    /// The tree names another base: nothing more is removed.
    stopped: bool,
}

/// The snapshot file the `sm` tree's pairs apply over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Base {
    /// Its name in the snapshot directory.
    pub(super) file: String,
    /// The log ID its header names.
    pub(super) last_log_id: Option<LogId>,
}

/// The base named by the tree `sm`, if any.
pub(super) fn base_of(sm: &crate::Tree) -> Result<Option<Base>, StorageError> {
    decode_base(sm.get(KEY_BASE).map_err(sm_read_err)?)
}

/// The base an `m/base` value names.
pub(super) fn decode_base(value: Option<IVec>) -> Result<Option<Base>, StorageError> {
    match value {
        Some(v) => Ok(Some(codec::decode(&v).map_err(sm_read_err)?)),
        None => Ok(None),
    }
}

/// A read error naming the base file.
fn base_err(path: &Path, why: impl std::fmt::Display) -> StorageError {
    sm_read_err(std::io::Error::other(format!("base snapshot {}: {why}", path.display())))
}

/// The tree's pairs in key order, `m/base` left out, handed on up to a key.
struct Changes<I> {
    iter: I,
    head: Option<(IVec, IVec)>,
}

impl<I: Iterator<Item = sled::Result<(IVec, IVec)>>> Changes<I> {
    fn new(iter: I) -> Result<Self, StorageError> {
        let mut c = Changes { iter, head: None };
        c.advance()?;
        Ok(c)
    }

    fn advance(&mut self) -> Result<(), StorageError> {
        self.head = loop {
            match self.iter.next().transpose().map_err(sm_read_err)? {
                Some((k, _)) if k == KEY_BASE => continue,
                next => break next,
            }
        };
        Ok(())
    }

    /// Hands each change before `key` (every one left when `None`) to `put`, tombstones left
    /// out; returns (and consumes) the change of `key` itself, if there is one.
    fn until(
        &mut self,
        key: Option<&[u8]>,
        put: &mut impl FnMut(&[u8], &[u8]) -> Result<(), StorageError>,
    ) -> Result<Option<IVec>, StorageError> {
        while let Some((k, v)) = &self.head {
            match key.map(|key| k.as_ref().cmp(key)) {
                Some(Ordering::Greater) => return Ok(None),
                Some(Ordering::Equal) => {
                    let v = v.clone();
                    self.advance()?;
                    return Ok(Some(v));
                }
                _ => {
                    if !v.is_empty() {
                        put(k, v)?;
                    }
                    self.advance()?;
                }
            }
        }
        Ok(None)
    }
}

/// Hands every pair of the state that the tree `sm` and its base (in `snap_dir`) hold to `put`,
/// in key order, tombstones applied: what a load reads and a snapshot or backup file holds.
/// The caller keeps the tree from changing meanwhile (`tree` held, or the open).
pub(super) fn merged(
    sm: &crate::Tree,
    snap_dir: &Path,
    mut put: impl FnMut(&[u8], &[u8]) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let mut changes = Changes::new(sm.iter())?;
    if let Some(base) = base_of(sm)? {
        let path = snap_dir.join(&base.file);
        let file = File::open(&path).map_err(|e| base_err(&path, e))?;
        // The callback's own error, kept apart from the file's.
        let mut failed: Option<StorageError> = None;
        let mut last: Vec<u8> = Vec::new();
        let read = snapshot_file::read(BufReader::with_capacity(1 << 20, file), |k, v| {
            let mut step = || {
                if !last.is_empty() && k <= last.as_slice() {
                    return Err(base_err(&path, "its pairs are not in key order"));
                }
                last.clear();
                last.extend_from_slice(k);
                match changes.until(Some(k), &mut put)? {
                    Some(change) if change.is_empty() => Ok(()),
                    Some(change) => put(k, &change),
                    None => put(k, v),
                }
            };
            step().map_err(|e| {
                failed = Some(e);
                "stopped".to_owned()
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let meta = read.map_err(|e| base_err(&path, e))?;
        if meta.last_log_id != base.last_log_id {
            return Err(base_err(
                &path,
                format!("it is at {:?}, its name says {:?}", meta.last_log_id, base.last_log_id),
            ));
        }
    }
    changes.until(None, &mut put)?;
    Ok(())
}

impl StateMachineStore {
    /// The base the `sm` tree names, if any.
    pub(super) fn base(&self) -> Result<Option<Base>, StorageError> {
        base_of(&self.sm)
    }

    /// Makes `base`, a snapshot file of every merged pair the tree holds now, the tree's base.
    /// The caller holds `tree` since it wrote the file (so no checkpoint changed the tree
    /// meanwhile), and the `snapshot` tree names the file; then it lets `tree` go and calls
    /// [`Self::shed`].
    pub(super) fn rebase(&self, base: &Base) -> Result<(), StorageError> {
        self.sm.insert(KEY_BASE, codec::encode(base).map_err(sm_write_err)?).map_err(sm_write_err)?;
        Ok(())
    }

    /// Removes from the tree every pair its base `base` holds as is, and every tombstone of a
    /// key the base lacks: what a [`rebase`](Self::rebase) made redundant, read side by side
    /// with the file (both in key order). The `m/` keys stay. Removed in batches of
    /// [`REMOVE_BATCH`], each under `tree` held for writing: a checkpoint waits for one batch
    /// at most (not for the whole, which took seconds for 190,000 pairs), and a reader that
    /// began over the earlier base (a backup) is done before a pair it reads goes. Each removal
    /// compares the value first (a checkpoint since may have changed it), and a batch stops the
    /// whole once the tree names another base (an install). Returns the pairs removed.
    pub(super) fn shed(&self, base: &Base) -> Result<u64, StorageError> {
        let path = self.snap_dir.join(&base.file);
        let file = File::open(&path).map_err(|e| base_err(&path, e))?;
        let mut iter = self.sm.iter();
        let mut next = move || iter.next().transpose().map_err(sm_read_err);
        let mut head = next()?;
        let mut batch: Vec<(IVec, IVec)> = Vec::new();
        let mut progress = Shed::default();
        let mut failed: Option<StorageError> = None;
        let redundant = |k: &[u8], v: &[u8], base_value: Option<&[u8]>| {
            !k.starts_with(META_PREFIX) && base_value.map_or(v.is_empty(), |b| b == v)
        };
        let read = snapshot_file::read(BufReader::with_capacity(1 << 20, file), |k, v| {
            let mut step = || {
                while let Some((tk, tv)) = &head {
                    let order = tk.as_ref().cmp(k);
                    if order == Ordering::Greater {
                        break;
                    }
                    let base_value = (order == Ordering::Equal).then_some(v);
                    if redundant(tk, tv, base_value) {
                        batch.push((tk.clone(), tv.clone()));
                    }
                    head = next()?;
                    if order == Ordering::Equal {
                        break;
                    }
                }
                if batch.len() >= REMOVE_BATCH {
                    self.shed_batch(base, &mut batch, &mut progress)?;
                }
                Ok(())
            };
            step().map_err(|e| {
                failed = Some(e);
                "stopped".to_owned()
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        read.map_err(|e| base_err(&path, e))?;
        while let Some((tk, tv)) = head {
            if redundant(&tk, &tv, None) {
                batch.push((tk, tv));
            }
            head = next()?;
        }
        self.shed_batch(base, &mut batch, &mut progress)?;
        tracing::debug!(file = %base.file, removed = progress.removed, "changes shed into the new base snapshot");
        Ok(progress.removed)
    }

    /// Removes the pairs of `batch` that are still as read, under `tree`, unless the tree
    /// names a base other than `base` by now (then the shedding stops).
    fn shed_batch(&self, base: &Base, batch: &mut Vec<(IVec, IVec)>, progress: &mut Shed) -> Result<(), StorageError> {
        if progress.stopped || batch.is_empty() {
            batch.clear();
            return Ok(());
        }
        let _tree = self.tree_for_replace();
        if self.base()?.as_ref() != Some(base) {
            progress.stopped = true;
            batch.clear();
            return Ok(());
        }
        for (k, v) in batch.drain(..) {
            let swapped = self.sm.compare_and_swap(&k, Some(&v), None as Option<&[u8]>).map_err(sm_write_err)?;
            progress.removed += u64::from(swapped.is_ok());
        }
        failpoint!("sm-build-rebase-midway");
        Ok(())
    }

    /// Replaces the whole state with `new`, which the snapshot file `base` holds: in memory,
    /// and in the `sm` tree, which then holds just `m/base` (and `m/applied`). `m/applied` goes
    /// first: a crash midway leaves a tree older than the snapshot, which the next open
    /// replaces again.
    pub(super) fn replace_over(&self, new: SmData, base: &Base) -> Result<(), StorageError> {
        let mut dirty = self.lock_dirty();
        let _tree = self.tree_for_replace();
        self.sm.remove(KEY_APPLIED).map_err(sm_write_err)?;
        let mut batch = crate::Batch::default();
        let mut n = 0;
        for key in self.sm.iter().keys() {
            let key = key.map_err(sm_write_err)?;
            if key != KEY_BASE {
                batch.remove(key);
                n += 1;
            }
            if n == REMOVE_BATCH {
                self.sm.apply_batch(std::mem::take(&mut batch)).map_err(sm_write_err)?;
                n = 0;
            }
        }
        self.sm.apply_batch(batch).map_err(sm_write_err)?;
        failpoint!("sm-install-state-cleared");
        let mut batch = crate::Batch::default();
        batch.insert(KEY_BASE, codec::encode(base).map_err(sm_write_err)?);
        batch.insert(KEY_APPLIED, codec::encode(&new.last_applied).map_err(sm_write_err)?);
        self.sm.apply_batch(batch).map_err(sm_write_err)?;
        self.publish_tokens(&new.state);
        *self.write() = new;
        *dirty = Default::default();
        self.publish_archives();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::{Actor, AuditRetention};
    use openraft::storage::RaftStateMachine;
    use openraft::{CommittedLeaderId, EntryPayload, RaftSnapshotBuilder};

    use super::*;
    use crate::command::{Command, Op};
    use crate::testing::{open_store, rt, tags_state};
    use crate::types::Entry;

    fn entry(index: u64, op: Op) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(2, 1), index),
            payload: EntryPayload::Normal(Command { at_ms: 1_700_000_000_000 + index as i64, op }),
        }
    }

    /// Entries from `from` on that change a tag, create one, and add audit records to a trail
    /// kept at two records (so older ones are removed: tombstones).
    fn changes(from: u64) -> Vec<Entry> {
        let admin = |op: Op| Op::Admin {
            actor: Actor::Unattributed,
            retention: AuditRetention { max_records: 2, max_age_ms: 365 * 86_400_000 },
            trim: crate::Trim::Together,
            op: Box::new(op),
        };
        vec![
            entry(from, Op::AllocateSegment { tag: "tag-0000001".into(), step: 10, node_id: 1 }),
            entry(from + 1, admin(Op::create_segment_tag(format!("new-{from}"), 5, 0, "d".into()))),
            entry(from + 2, admin(Op::ArchiveTag { tag: "tag-0000003".into() })),
            entry(from + 3, admin(Op::RestoreTag { tag: "tag-0000003".into() })),
        ]
    }

    /// The pairs of the tree but its `m/` keys, and how many of them are tombstones.
    fn tree_changes(sm: &StateMachineStore) -> (usize, usize) {
        let pairs: Vec<_> = sm.sm.iter().map(|r| r.unwrap()).filter(|(k, _)| !k.starts_with(META_PREFIX)).collect();
        (pairs.len(), pairs.iter().filter(|(_, v)| v.is_empty()).count())
    }

    fn snapshot_files(sm: &StateMachineStore) -> usize {
        std::fs::read_dir(&sm.snap_dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "snap"))
            .count()
    }

    /// After a build the tree holds no pair but its meta; changes since (a removal among them)
    /// are pairs and tombstones over the base, a reopen reads the same state, and the next build
    /// sheds them again and leaves one file.
    #[test]
    fn changes_apply_over_the_base_and_each_build_sheds_them() {
        rt().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut sm = open_store(dir.path());
            sm.replace(tags_state(2_000, 10, 1)).unwrap();
            assert_eq!(tree_changes(&sm).0, 2_000, "no base yet: the tree holds the state");
            let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
            let base = sm.base().unwrap().expect("the build named a base");
            assert_eq!(base.last_log_id, snap.meta.last_log_id);
            assert_eq!(tree_changes(&sm), (0, 0));
            let mut next = 2;
            for _ in 0..3 {
                sm.apply(changes(next)).await.unwrap();
                next += 4;
            }
            sm.checkpoint().await.unwrap();
            let (pairs, tombstones) = tree_changes(&sm);
            assert!(pairs > 0 && tombstones > 0, "{pairs} pairs, {tombstones} tombstones");
            let before = sm.data.read().unwrap().clone();
            assert_eq!(before.state.audit.records.len(), 2);
            drop(sm);
            let mut sm = open_store(dir.path());
            assert_eq!(*sm.data.read().unwrap(), before, "the base and its changes reopen as the state");
            sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
            assert_eq!(tree_changes(&sm), (0, 0));
            assert_eq!(snapshot_files(&sm), 1);
            drop(sm);
            let sm = open_store(dir.path());
            assert_eq!(*sm.data.read().unwrap(), before);
        });
    }

    /// A pair a checkpoint changed between the rebase and the shedding stays: the shedding
    /// removes only what the base holds as is.
    #[test]
    fn the_shedding_keeps_a_pair_changed_after_the_file_was_written() {
        rt().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut sm = open_store(dir.path());
            sm.replace(tags_state(500, 10, 1)).unwrap();
            sm.apply(changes(2)).await.unwrap();
            // A build up to its rebase, by hand.
            let (meta, tree) = sm.begin_build().unwrap().unwrap();
            let (name, _) = sm.write_tree(&meta).unwrap();
            let base = Base { file: name.clone(), last_log_id: meta.last_log_id };
            assert!(sm
                .store_ref(&super::super::snapshot::SnapshotRef { meta: meta.clone(), file: name }, true)
                .unwrap());
            sm.rebase(&base).unwrap();
            drop(tree);
            // Then a checkpoint changes a tag the file holds.
            let key = IVec::from(b"t/tag-0000001".as_slice());
            let as_in_file = sm.sm.get(&key).unwrap().expect("the tag's change, as the file holds it");
            sm.apply(vec![entry(6, Op::AllocateSegment { tag: "tag-0000001".into(), step: 10, node_id: 1 })])
                .await
                .unwrap();
            sm.checkpoint().await.unwrap();
            let removed = sm.shed(&base).unwrap();
            assert!(removed >= 500, "{removed} removed");
            assert_eq!(tree_changes(&sm), (1, 0), "the changed tag stays");
            // A batch read before that checkpoint (the race the comparison is for) keeps it too.
            sm.shed_batch(&base, &mut vec![(key.clone(), as_in_file)], &mut Shed::default()).unwrap();
            assert!(sm.sm.get(&key).unwrap().is_some_and(|v| !v.is_empty()), "a newer change was shed");
            let before = sm.data.read().unwrap().clone();
            drop(sm);
            let sm = open_store(dir.path());
            assert_eq!(*sm.data.read().unwrap(), before);
        });
    }

    /// The pairs of a state come in key order, as a base's must (the merge checks it).
    #[test]
    fn a_state_is_written_in_key_order() {
        let mut d = tags_state(50, 1, 3);
        d.state.members.insert(1);
        let mut changes = crate::apply::Changes::default();
        // A gapless series with its limits and a number: the ledger's keys and the limits'.
        let series = crate::testing::create_series("inv", Default::default(), 1_700_000_000_000).op;
        let limits = leaf_api::gapless::SeriesLimits { max_numbers: 5, issues_per_sec: 1 };
        let ask = crate::NumberAsk {
            tag: "inv".into(),
            key: "k".into(),
            actor: leaf_api::audit::Actor::AdminToken,
            act: crate::NumberAct::Issue,
        };
        let gapless = [
            series,
            Op::SetClusterVersion { version: crate::version::ClusterVersion(2) },
            Op::SetSeriesLimits { tag: "inv".into(), limits },
            Op::IssueNumbers { asks: vec![crate::OwnedAsk { ask, proof: None }], rules: crate::NumberRules::Owned },
        ];
        for (i, e) in changes_ops().into_iter().chain(gapless).enumerate() {
            let cmd = Command { at_ms: 1_700_000_000_000 + i as i64, op: e };
            let _ = crate::apply::apply(&mut d.state, &cmd, &mut changes);
        }
        let mut keys: Vec<Vec<u8>> = Vec::new();
        super::super::store::for_each_pair(&d, |k, _| {
            keys.push(k.to_vec());
            Ok(())
        })
        .unwrap();
        let prefixes: std::collections::BTreeSet<_> = keys.iter().map(|k| k[..2].to_vec()).collect();
        assert_eq!(prefixes.len(), 6, "audit, limits, meta, numbers, tags and workers: {prefixes:?}");
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys out of order");
        assert!(keys.iter().any(|k| k == b"m/version"), "the raised cluster version is written");
    }

    /// A global tier's registry and a region's identity and blocks are checkpointed, written
    /// into snapshots in key order, and read back the same.
    #[test]
    fn regions_checkpoint_snapshot_and_reopen() {
        use crate::regions::{Block, Identity};
        let v3 = || Op::SetClusterVersion { version: crate::version::ClusterVersion(3) };
        let tag = || Op::create_segment_tag("order".into(), 10, 1, "d".into());
        let admin = |op| Op::admin(Actor::Unattributed, crate::audit::DEFAULT_RETENTION, op);
        let global = vec![
            v3(),
            tag(),
            admin(Op::JoinRegion { name: "eu".into(), workers: 8 }),
            admin(Op::JoinRegion { name: "us".into(), workers: 8 }),
            Op::GrantBlock { region: "eu".into(), tag: "order".into(), size: 100, above: 0 },
            admin(Op::RetireRegion { name: "us".into() }),
        ];
        let eu = Identity { name: "eu".into(), id: 1, first_worker: 0, last_worker: 7 };
        let region = vec![
            v3(),
            tag(),
            admin(Op::AdoptRegion(eu)),
            Op::AdoptBlock { tag: "order".into(), block: Block { start: 1, end: 101 } },
            Op::AdoptBlock { tag: "order".into(), block: Block { start: 300, end: 400 } },
            Op::AllocateSegment { tag: "order".into(), step: 10, node_id: 1 },
        ];
        for ops in [global, region] {
            rt().block_on(async {
                let dir = tempfile::tempdir().unwrap();
                let mut sm = open_store(dir.path());
                let entries: Vec<Entry> = ops.into_iter().enumerate().map(|(i, op)| entry(i as u64 + 1, op)).collect();
                let answers = sm.apply(entries).await.unwrap();
                assert!(answers.iter().all(|a| a.is_ok()), "{answers:?}");
                sm.checkpoint().await.unwrap();
                let before = sm.data.read().unwrap().clone();
                assert_ne!(before.state.regions, Default::default());
                let mut keys: Vec<Vec<u8>> = Vec::new();
                super::super::store::for_each_pair(&before, |k, _| {
                    keys.push(k.to_vec());
                    Ok(())
                })
                .unwrap();
                assert!(keys.windows(2).all(|w| w[0] < w[1]), "keys out of order: {keys:?}");
                drop(sm);
                let mut sm = open_store(dir.path());
                assert_eq!(*sm.data.read().unwrap(), before, "checkpointed and reopened");
                sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
                drop(sm);
                let sm = open_store(dir.path());
                assert_eq!(*sm.data.read().unwrap(), before, "from the snapshot as its base");
            });
        }
    }

    fn changes_ops() -> Vec<Op> {
        changes(2)
            .into_iter()
            .chain([entry(9, Op::RegisterWorker { node_id: 1, lease_ms: 10_000, within: None })])
            .filter_map(|e| match e.payload {
                EntryPayload::Normal(c) => Some(c.op),
                _ => None,
            })
            .collect()
    }
}
