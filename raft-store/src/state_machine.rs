//! The openraft state machine on sled ([`StateMachineStore`]): the state in memory, applied
//! entry by entry through the pure [`apply`], checkpointed to sled and snapshotted.
//!
//! - `store`: the sled I/O: the `sm` tree's keys, loading the state at open, checkpoints
//!   every [`CHECKPOINT_EVERY`] entries (sooner once [`CHECKPOINT_KEYS`] keys changed),
//!   replacing the whole state.
//! - `reader`: the [`StateReader`] the node reads the applied state through, and the
//!   published [`Tokens`].
//! - `snapshot`: building a snapshot and installing one, their files, and the coverage they
//!   give the log store.
//! - `base`: the `sm` tree as the changes over a base snapshot file, merged into the state's
//!   pairs, and rebased onto each new snapshot.
//! - `staged`: writing a checkpoint of many keys as one step in small sled batches.
//! - `snapshot_file`: a snapshot file's streamed layout (the `sm` tree's pairs), written and
//!   read pair by pair.
//! - `legacy`: the layouts of earlier releases (V1 to V5) and how they are read.
//!
//! Trees `journal` and `journal_meta`: the [`Journal`] of committed allocations (an audit
//! record outside the replicated state; a snapshot install marks a gap in it).
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use arc_swap::ArcSwap;
use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend};
use serde::{Deserialize, Serialize};

use crate::apply::{apply, Applied, ApplyResult, Changes};
use crate::command::{Command, Op};
use crate::coverage::Coverage;
use crate::failpoint::failpoint;
use crate::journal::{Journal, JournalRecord, Place};
use crate::log_weight::{entry_weight, LogWeights};
use crate::state::{record_members, State};
use crate::tags::Allocation;
use crate::types::{Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig};
use crate::version::{ClusterVersion, SUPPORTED};
use store::sm_write_err;

mod backup;
mod base;
mod legacy;
mod reader;
mod snapshot;
mod snapshot_file;
mod staged;
mod store;

pub use backup::{read_backup, BackupError, BackupHeader, BackupWritten, BACKUP_MAGIC};
pub use reader::{DueReservations, StateReader, Tokens};
pub(crate) use snapshot::verify_current as verify_current_snapshot;

/// Whether the `sm` tree holds changes over a base snapshot (see `base`) rather than the whole
/// state.
pub(crate) fn has_base(sm: &crate::Tree) -> Result<bool, StorageError> {
    Ok(base::base_of(sm)?.is_some())
}

/// Applied entries between checkpoints of the `sm` tree: the most a restart re-applies from the
/// log beyond what a lost, unflushed checkpoint adds (applying is in memory, about a
/// microsecond an entry).
pub const CHECKPOINT_EVERY: u64 = 256;

/// Changed keys that make a checkpoint due at once, however few entries changed them: a
/// batch of tags writes thousands of keys in one entry, and a checkpoint that gathered several
/// batches stalled every apply behind it (460 ms for 80,000 keys, measured), the next segment
/// commits included. Checkpointed with their batch, the keys cost their own commit's latency.
pub const CHECKPOINT_KEYS: usize = 4096;

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

impl Dirty {
    /// Keys to write at the next checkpoint.
    fn keys(&self) -> usize {
        let c = &self.changes;
        c.tags.len()
            + c.workers.len()
            + c.tokens.len()
            + c.audit.len()
            + c.templates.len()
            + c.numbers.len()
            + c.regions.len()
            + c.blocks.len()
            + c.homes.len()
            + c.leases.len()
    }
}

/// Everything the state machine holds, as kept in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmData {
    pub last_applied: Option<LogId>,
    pub membership: StoredMembership,
    pub state: State,
}

/// The openraft state machine. Cheap to clone; clones share state (the snapshot builder is a
/// clone).
#[derive(Clone)]
pub struct StateMachineStore {
    db: crate::Disk,
    sm: crate::Tree,
    /// Checkpoints of many keys, staged (see `staged`).
    pending: crate::Tree,
    snap: crate::Tree,
    /// The directory of the snapshot files.
    snap_dir: std::path::PathBuf,
    data: Arc<RwLock<SmData>>,
    /// The tokens of `data`, published after each change (see [`StateReader::tokens`]).
    tokens: Arc<ArcSwap<Tokens>>,
    /// Raised after each applied tag archive and each installed snapshot (see
    /// [`StateReader::archives`]).
    archives: Arc<std::sync::atomic::AtomicU64>,
    /// Locked before `data` wherever both are: a checkpoint then never sees a change in `data`
    /// whose key is not yet in the set.
    dirty: Arc<Mutex<Dirty>>,
    /// Read by a snapshot build while it copies the `sm` tree into its file, written by
    /// whatever writes the tree (a checkpoint, a replace): the build needs no copy of the state
    /// and stops no apply, only the checkpoints, which wait for it. Taken after `dirty`.
    tree: Arc<tokio::sync::RwLock<()>>,
    /// Held while writing the `snapshot` tree: a build (openraft runs it as its own task) that
    /// finishes after a newer snapshot was installed must not replace it.
    snap_write: Arc<Mutex<()>>,
    /// A permit per running part of a snapshot build (see [`StateMachineStore::builds_finished`]).
    builds: Arc<tokio::sync::Semaphore>,
    journal: Journal,
    /// The last log ID of the snapshot on disk, for the log store: raised after each flush that
    /// stores a newer one.
    coverage: Coverage,
    /// The applied entries' weights, for the node's snapshot and purge decisions.
    weights: LogWeights,
}

/// The node IDs of a stored membership (voters and learners).
fn member_ids(m: &StoredMembership) -> impl Iterator<Item = u64> + '_ {
    m.membership().nodes().map(|(id, _)| *id)
}

impl StateMachineStore {
    /// The journal of committed allocations.
    pub fn journal(&self) -> Journal {
        self.journal.clone()
    }

    /// The applied entries' weights (a batch of tags counts each tag), for snapshot and purge
    /// decisions by what the log holds rather than by its entry count.
    pub fn log_weights(&self) -> LogWeights {
        self.weights.clone()
    }

    /// A read-only handle on the applied state.
    pub fn reader(&self) -> StateReader {
        StateReader::new(self.data.clone(), self.tokens.clone(), self.archives.clone())
    }

    /// Tells the readers that tags may have been archived (after the state says so).
    fn publish_archives(&self) {
        self.archives.fetch_add(1, std::sync::atomic::Ordering::Release);
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
}

/// Adds the allocations `cmd` committed at `index` (its result `r`) to `journal`, each in its
/// place in the entry.
fn journal_allocations(index: u64, cmd: &Command, r: &ApplyResult, journal: &mut Vec<(Place, JournalRecord)>) {
    let record = |tag: &str, node_id: u64, a: &Allocation| JournalRecord {
        tag: tag.to_string(),
        node_id,
        start: a.start,
        end: a.end,
        at_ms: cmd.at_ms,
    };
    match (r, &cmd.op) {
        (Ok(Applied::Segment(a)), Op::AllocateSegment { tag, node_id, .. }) => {
            journal.push((Place::at(index), record(tag, *node_id, a)));
        }
        (Ok(Applied::Segments(results)), Op::AllocateSegments { asks }) => {
            for (position, (ask, result)) in (0u32..).zip(asks.iter().zip(results)) {
                if let Ok(a) = result {
                    journal.push((Place { index, position }, record(&ask.tag, ask.node_id, a)));
                }
            }
        }
        _ => {}
    }
}

/// An entry this release cannot apply: it stops the state machine.
#[derive(Debug, thiserror::Error)]
#[error(
    "log entry {index} holds an operation of cluster version {version}, and this release applies versions up to \
     {SUPPORTED}: the state machine stops before it; start this node with a release that supports version {version}"
)]
pub struct Undecodable {
    pub index: u64,
    pub version: ClusterVersion,
}

/// Changed keys a checkpoint may leave waiting for a snapshot build to finish copying the tree;
/// with more, applies wait for the build.
const MAX_DEFERRED_KEYS: usize = 2 * CHECKPOINT_KEYS;

impl StateMachineStore {
    /// Applies `entries` in memory, records their allocations in the journal and writes a
    /// checkpoint if one is due; returns the results and whether the checkpoint waits for a
    /// snapshot build with too many keys (see [`Self::checkpoint_if_due`]).
    fn apply_entries(
        &self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<(Vec<ApplyResult>, bool), StorageError> {
        let mut results = Vec::new();
        let mut journal = Vec::new();
        let mut dirty = self.lock_dirty();
        let tokens_before = dirty.changes.tokens.len();
        let mut tokens_changed = false;
        let mut archived = false;
        let mut d = self.write();
        for entry in entries {
            if let EntryPayload::Normal(Command { op, .. }) = &entry.payload {
                if let Op::Undecodable(e) = op.inner() {
                    // Stop here rather than skip it: every later entry may build on it.
                    return Err(sm_write_err(Undecodable { index: entry.log_id.index, version: e.version }));
                }
            }
            d.last_applied = Some(entry.log_id);
            dirty.entries += 1;
            self.weights.push(entry.log_id.index, entry_weight(&entry));
            let result = match entry.payload {
                EntryPayload::Blank => Ok(Applied::Nothing),
                EntryPayload::Normal(cmd) => {
                    // `apply` notes the keys it writes (none when it refuses the command).
                    let r = apply(&mut d.state, &cmd, &mut dirty.changes);
                    tokens_changed |= r.is_ok() && cmd.op.touches_tokens();
                    archived |= r.is_ok() && matches!(cmd.op.inner(), Op::ArchiveTag { .. });
                    journal_allocations(entry.log_id.index, &cmd, &r, &mut journal);
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
        if archived {
            self.publish_archives();
        }
        // The journal before any checkpoint that covers its records: `Journal::open` trusts
        // the checkpointed index to have its allocations recorded.
        if !journal.is_empty() {
            self.journal.record(&journal).map_err(sm_write_err)?;
        }
        self.journal.applied_through(last_index);
        let behind = self.checkpoint_if_due(&mut dirty)?;
        Ok((results, behind))
    }

    /// Writes a checkpoint if one is due and no snapshot build is copying the tree (then the
    /// keys wait for the next apply). Returns whether one is due, waiting, with more than
    /// [`MAX_DEFERRED_KEYS`] keys.
    fn checkpoint_if_due(&self, dirty: &mut Dirty) -> Result<bool, StorageError> {
        if !checkpoint_due(dirty) {
            return Ok(false);
        }
        let Ok(_tree) = self.tree.try_write() else {
            return Ok(dirty.keys() > MAX_DEFERRED_KEYS);
        };
        self.checkpoint_holding_tree(dirty)?;
        Ok(false)
    }

    /// Writes the checkpoint, for a caller that holds `tree` for writing and `dirty`.
    fn checkpoint_holding_tree(&self, dirty: &mut Dirty) -> Result<(), StorageError> {
        // Readers may go on meanwhile; nothing changes `data` while `dirty` is held.
        let d = self.data.read().unwrap_or_else(|e| e.into_inner());
        failpoint!("sm-checkpoint-begin");
        self.checkpoint_from(dirty, &d)?;
        failpoint!("sm-checkpoint-written");
        Ok(())
    }
}

/// Whether `dirty` is worth a checkpoint: [`CHECKPOINT_EVERY`] entries or [`CHECKPOINT_KEYS`]
/// keys.
fn checkpoint_due(dirty: &Dirty) -> bool {
    dirty.entries >= CHECKPOINT_EVERY || dirty.keys() >= CHECKPOINT_KEYS
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
        let (results, behind) = self.apply_entries(entries)?;
        if behind {
            // A snapshot build is copying the tree, and the keys waiting for it would make
            // one long checkpoint after it: wait for the build instead, then checkpoint with
            // the tree held (`checkpoint_if_due` would find it taken, by this very guard).
            let tree = self.tree.clone().write_owned().await;
            let mut dirty = self.lock_dirty();
            if checkpoint_due(&dirty) {
                self.checkpoint_holding_tree(&mut dirty)?;
            }
            drop((dirty, tree));
        }
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError> {
        Ok(Box::new(self.receiving_file()?))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError> {
        self.install(meta, *snapshot).await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        self.current_snapshot().await
    }
}
