//! Snapshots: building one from the state, installing one from a leader, and the files that
//! hold them.
//!
//! A snapshot is a file in the snapshot directory (`snapshots/` beside the sled files), in the
//! streamed layout of `snapshot_file`: every pair of the `sm` tree as of one log ID, so its size
//! is bounded by the disk alone. openraft sends it to a follower in chunks read from the file
//! and the follower receives the chunks into an unnamed file. Tree `snapshot`, key `file`: the
//! current snapshot's meta and file name ([`SnapshotRef`]); releases before snapshot files kept
//! the whole snapshot under key `current`, and an open converts that into a file.
//!
//! A file is written as `<name>.part`, fsynced, renamed and its directory fsynced before the
//! `snapshot` tree names it; the tree is flushed before the state is replaced from it. On open,
//! a snapshot newer than the state in `sm` (a crash mid-install) replaces it, `.part` files are
//! removed, and so is every snapshot file the tree does not name.
//!
//! Durable coverage: at open and after every flush that stores a snapshot (a build, or an
//! install once its snapshot is on disk), the store tells the log store the snapshot's last
//! log ID, and the log store never makes a purge point durable beyond it (nor a commit point
//! beyond it and the log): openraft purges a follower's log for a snapshot it has only queued
//! for installing, and a crash before the install reached the disk must not leave the log
//! starting after the state, nor after the snapshot that stands for the purged entries.
use std::fs::{self, File, OpenOptions};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom};
use std::path::PathBuf;

use leaf_api::codec;
use openraft::RaftSnapshotBuilder;
use serde::{Deserialize, Serialize};
use tokio::sync::OwnedRwLockReadGuard;

use super::base::Base;
use super::legacy::decode_sm_data;
use super::snapshot_file::{self, Writer};
use super::store::{for_each_pair, sm_read_err, sm_write_err, Loader};
use super::{SmData, StateMachineStore};
use crate::failpoint::failpoint;
use crate::types::{Snapshot, SnapshotMeta, StorageError, StorageIOError, TypeConfig};

/// The key of the current snapshot's [`SnapshotRef`].
const KEY_FILE: &[u8] = b"file";
/// The key under which releases before snapshot files kept a [`LegacySnapshot`].
const KEY_LEGACY: &[u8] = b"current";
/// The ending of a complete snapshot file.
const SNAP_EXT: &str = ".snap";
/// The ending of a file being written.
const PART_EXT: &str = ".part";

/// The current snapshot, as the `snapshot` tree names it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SnapshotRef {
    pub(super) meta: SnapshotMeta,
    /// The file's name in the snapshot directory (chosen by this node, never by a peer).
    pub(super) file: String,
}

/// A snapshot as releases before snapshot files kept it in the `snapshot` tree.
#[derive(Serialize, Deserialize)]
pub(super) struct LegacySnapshot {
    pub(super) meta: SnapshotMeta,
    pub(super) data: Vec<u8>,
}

/// A write error of the snapshot described by `meta`.
fn snap_write_err(meta: Option<&SnapshotMeta>, e: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageIOError::write_snapshot(meta.map(|m| m.signature()), &e).into()
}

/// A read error of the snapshot described by `meta`.
fn snap_read_err(meta: Option<&SnapshotMeta>, e: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageIOError::read_snapshot(meta.map(|m| m.signature()), &e).into()
}

/// An error of the blocking task an I/O ran on.
fn join_err(e: tokio::task::JoinError) -> StorageError {
    sm_write_err(std::io::Error::other(format!("snapshot task failed: {e}")))
}

/// fsyncs `file` (a disk fault can fail it, see `failpoint`).
fn sync(file: &File) -> std::io::Result<()> {
    #[cfg(feature = "failpoints")]
    if let Some(e) = crate::failpoint::io_fault("disk-fsync") {
        return Err(e);
    }
    file.sync_all()
}

/// Reads a snapshot from `input`, of this layout or (sent by an older leader) of an earlier
/// release's, and checks that it is the one `meta` describes. Nothing is kept of a snapshot
/// that does not read whole.
fn read_snapshot(mut input: impl Read, meta: &SnapshotMeta) -> Result<SmData, StorageError> {
    let err = |e: &dyn std::fmt::Display| snap_read_err(Some(meta), std::io::Error::other(e.to_string()));
    let mut first = Vec::with_capacity(snapshot_file::MAGIC.len());
    (&mut input).take(snapshot_file::MAGIC.len() as u64).read_to_end(&mut first).map_err(|e| err(&e))?;
    let data = if snapshot_file::is_current(&first) {
        let mut loader = Loader::default();
        let got = snapshot_file::read(first.chain(input), |k, v| loader.pair(k, v)).map_err(|e| err(&e))?;
        if got.last_log_id != meta.last_log_id || got.last_membership != meta.last_membership {
            return Err(err(&format!("the snapshot file is {got:?}, not {meta:?}")));
        }
        loader.finish()
    } else {
        // One codec record: its length is bounded before it is read whole.
        let mut bytes = first;
        let max = (codec::MAX_PAYLOAD + 64) as u64;
        input.take(max + 1).read_to_end(&mut bytes).map_err(|e| err(&e))?;
        if bytes.len() as u64 > max {
            return Err(err(&"a snapshot of an earlier release is longer than the codec allows"));
        }
        decode_sm_data(&bytes).map_err(|e| err(&e))?
    };
    if data.last_applied != meta.last_log_id {
        return Err(err(&format!(
            "snapshot data is at {:?} but its meta says {:?}",
            data.last_applied, meta.last_log_id
        )));
    }
    Ok(data)
}

/// Reads the current snapshot file (as the `snapshot` tree of `db` names it, in `snap_dir`)
/// through its checksums, and the `sm` tree's base file if it is another (see `base`): a
/// damaged one stops the node's start rather than a follower's catch-up later.
pub(crate) fn verify_current(db: &sled::Db, snap_dir: &std::path::Path) -> Result<(), crate::verify::Damage> {
    let named = db.open_tree("snapshot").ok().and_then(|t| t.get(KEY_FILE).ok().flatten());
    let current = named.and_then(|v| codec::decode::<SnapshotRef>(&v).ok()).map(|r| r.file);
    let base = db
        .open_tree("sm")
        .ok()
        .and_then(|t| super::base::decode_base(t.get(super::base::KEY_BASE).ok().flatten()).ok().flatten())
        .map(|b| b.file);
    let mut files: Vec<String> = current.into_iter().chain(base).collect();
    files.dedup();
    for name in files {
        let path = snap_dir.join(&name);
        let damaged = |offset, why| crate::verify::Damage::File { file: path.clone(), offset, why };
        let file = File::open(&path).map_err(|e| damaged(0, e.to_string()))?;
        let pairs = snapshot_file::verify(BufReader::with_capacity(1 << 20, file)).map_err(|(o, w)| damaged(o, w))?;
        tracing::info!(file = %name, pairs, "read the snapshot file back whole: no damage");
    }
    Ok(())
}

impl StateMachineStore {
    /// The current snapshot, if any.
    pub(super) fn stored_snapshot(&self) -> Result<Option<SnapshotRef>, StorageError> {
        match self.snap.get(KEY_FILE).map_err(sm_read_err)? {
            Some(v) => Ok(Some(codec::decode(&v).map_err(sm_read_err)?)),
            None => Ok(None),
        }
    }

    fn snap_path(&self, file: &str) -> PathBuf {
        self.snap_dir.join(file)
    }

    /// The state in the snapshot `r` names.
    pub(super) fn load_snapshot_file(&self, r: &SnapshotRef) -> Result<SmData, StorageError> {
        let file = File::open(self.snap_path(&r.file)).map_err(|e| snap_read_err(Some(&r.meta), e))?;
        read_snapshot(BufReader::with_capacity(1 << 20, file), &r.meta)
    }

    /// At open: makes the snapshot directory, removes files a crash left half-written or
    /// unnamed, and converts a snapshot of a release before snapshot files into one.
    pub(super) fn open_snapshots(&self) -> Result<(), StorageError> {
        crate::durable::create_dir_all(&self.snap_dir).map_err(sm_write_err)?;
        for entry in fs::read_dir(&self.snap_dir).map_err(sm_read_err)? {
            let path = entry.map_err(sm_read_err)?.path();
            if path.to_string_lossy().ends_with(PART_EXT) {
                fs::remove_file(&path).map_err(sm_write_err)?;
            }
        }
        if let Some(v) = self.snap.get(KEY_LEGACY).map_err(sm_read_err)? {
            let legacy: LegacySnapshot = codec::decode(&v).map_err(sm_read_err)?;
            let data = read_snapshot(legacy.data.as_slice(), &legacy.meta)?;
            let (file, _) = self.write_state(&legacy.meta, &data)?;
            tracing::info!(snapshot = %legacy.meta.snapshot_id, %file, "converted the snapshot of an earlier release into a file");
            let r = SnapshotRef { meta: legacy.meta, file };
            let mut batch = crate::Batch::default();
            batch.insert(KEY_FILE, codec::encode(&r).map_err(sm_write_err)?);
            batch.remove(KEY_LEGACY);
            self.snap.apply_batch(batch).map_err(sm_write_err)?;
            self.db.sync_now().map_err(sm_write_err)?;
        }
        let keep = self.stored_snapshot()?.map(|r| r.file);
        let base = self.base()?.map(|b| b.file);
        self.remove_files_but(&[keep.as_deref(), base.as_deref()])
    }

    /// Removes every snapshot file but those in `keep`.
    fn remove_files_but(&self, keep: &[Option<&str>]) -> Result<(), StorageError> {
        for entry in fs::read_dir(&self.snap_dir).map_err(sm_read_err)? {
            let entry = entry.map_err(sm_read_err)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(SNAP_EXT) && !keep.contains(&Some(name.as_str())) {
                fs::remove_file(entry.path()).map_err(sm_write_err)?;
            }
        }
        Ok(())
    }

    /// Writes the snapshot `meta` to a new file, durably (the file and its directory fsynced),
    /// with the pairs `pairs` hands to its writer; returns its name and the file, open for
    /// reading at its start.
    fn write_file(
        &self,
        meta: &SnapshotMeta,
        pairs: impl FnOnce(&mut dyn FnMut(&[u8], &[u8]) -> Result<(), StorageError>) -> Result<(), StorageError>,
    ) -> Result<(String, File), StorageError> {
        let werr = |e: std::io::Error| snap_write_err(Some(meta), e);
        let index = meta.last_log_id.map_or(0, |l| l.index);
        let seq = self.db.generate_id().map_err(|e| snap_write_err(Some(meta), e))?;
        let name = format!("snap-{index:020}-{seq}{SNAP_EXT}");
        let part = self.snap_path(&format!("{name}{PART_EXT}"));
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&part).map_err(werr)?;
        let mut w = Writer::new(BufWriter::with_capacity(1 << 20, file), meta).map_err(werr)?;
        pairs(&mut |k, v| w.pair(k, v).map_err(werr))?;
        let mut file = w.finish().map_err(werr)?.into_inner().map_err(|e| werr(e.into_error()))?;
        sync(&file).map_err(werr)?;
        fs::rename(&part, self.snap_path(&name)).map_err(werr)?;
        sync(&File::open(&self.snap_dir).map_err(werr)?).map_err(werr)?;
        file.seek(SeekFrom::Start(0)).map_err(werr)?;
        Ok((name, file))
    }

    /// Writes `data` as the snapshot `meta` (see [`Self::write_file`]).
    fn write_state(&self, meta: &SnapshotMeta, data: &SmData) -> Result<(String, File), StorageError> {
        self.write_file(meta, |put| for_each_pair(data, |k, v| put(k, v)))
    }

    /// Writes the state the `sm` tree holds over its base as the snapshot `meta`: the caller
    /// holds `tree`, so nothing writes the tree meanwhile, and has checkpointed it at `meta`'s
    /// log ID.
    pub(super) fn write_tree(&self, meta: &SnapshotMeta) -> Result<(String, File), StorageError> {
        self.write_file(meta, |put| super::base::merged(&self.sm, &self.snap_dir, put))
    }

    /// Names `r` as the current snapshot (unless `only_if_newer` and the current one is at
    /// least as new). Not flushed. Returns whether `r` is now the current snapshot.
    pub(super) fn store_ref(&self, r: &SnapshotRef, only_if_newer: bool) -> Result<bool, StorageError> {
        let _w = self.snap_write.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.stored_snapshot()?;
        let stored = !only_if_newer || current.is_none_or(|c| c.meta.last_log_id <= r.meta.last_log_id);
        if stored {
            let enc = codec::encode(r).map_err(|e| snap_write_err(Some(&r.meta), e))?;
            self.snap.insert(KEY_FILE, enc).map_err(|e| snap_write_err(Some(&r.meta), e))?;
        }
        Ok(stored)
    }

    /// Removes the files of earlier snapshots, once the tree naming `mine` was flushed: keeps
    /// `mine` and the current snapshot's file, one of which the tree on disk names (another
    /// build or install may have named its own since, not yet flushed), and the base of the
    /// `sm` tree (see `base`).
    fn prune(&self, mine: &str) -> Result<(), StorageError> {
        let _w = self.snap_write.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.stored_snapshot()?.map(|c| c.file);
        let base = self.base()?.map(|b| b.file);
        self.remove_files_but(&[Some(mine), current.as_deref(), base.as_deref()])
    }

    /// A file for receiving a snapshot from the leader: unnamed (removed as soon as it is
    /// made), so a crash or an abandoned transfer leaves nothing behind.
    pub(super) fn receiving_file(&self) -> Result<tokio::fs::File, StorageError> {
        let seq = self.db.generate_id().map_err(sm_write_err)?;
        let path = self.snap_path(&format!("recv-{seq}{PART_EXT}"));
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).map_err(sm_write_err)?;
        fs::remove_file(&path).map_err(sm_write_err)?;
        Ok(tokio::fs::File::from_std(file))
    }

    /// Installs the snapshot received into `received`, described by `meta`: reads and checks
    /// it whole, writes it as this node's snapshot file, names it and flushes, then replaces
    /// the state with it.
    pub(super) async fn install(&self, meta: &SnapshotMeta, received: tokio::fs::File) -> Result<(), StorageError> {
        let mut received = received.into_std().await;
        let (this, m) = (self.clone(), meta.clone());
        let (data, file) = tokio::task::spawn_blocking(move || {
            received.seek(SeekFrom::Start(0)).map_err(|e| snap_read_err(Some(&m), e))?;
            let data = read_snapshot(BufReader::with_capacity(1 << 20, received), &m)?;
            failpoint!("sm-install-begin");
            // Mark the journal's gap first, flushed with the snapshot: the journal never
            // claims records that the restored state skipped, whenever a crash interrupts this.
            this.journal.mark_gap(m.last_log_id.map_or(0, |l| l.index)).map_err(sm_write_err)?;
            // The snapshot first: if we crash while rewriting `sm`, open() restores from it.
            let (file, _) = this.write_state(&m, &data)?;
            Ok::<_, StorageError>((data, file))
        })
        .await
        .map_err(join_err)??;
        self.store_ref(&SnapshotRef { meta: meta.clone(), file: file.clone() }, false)?;
        failpoint!("sm-install-snapshot-written");
        self.db.sync().await.map_err(|e| snap_write_err(Some(meta), e))?;
        self.prune(&file)?;
        // From here a reopen restores this snapshot: the log may be purged up to it (openraft
        // asked for that when it queued this install; the log store waited for this).
        self.coverage.raise(meta.last_log_id);
        failpoint!("sm-install-snapshot-flushed");
        let (this, base) = (self.clone(), Base { file: file.clone(), last_log_id: meta.last_log_id });
        tokio::task::spawn_blocking(move || this.replace_over(data, &base)).await.map_err(join_err)??;
        failpoint!("sm-install-state-replaced");
        self.db.sync().await.map_err(sm_write_err)?;
        // The earlier base, kept until the tree on disk named this one.
        self.prune(&file)?;
        failpoint!("sm-install-done");
        tracing::info!(snapshot = %meta.snapshot_id, "installed snapshot");
        Ok(())
    }

    /// Checkpoints the tree at the applied state and takes it for reading, with the meta of
    /// the snapshot it makes; `None` when an apply holds the tree (it waits for `dirty`).
    pub(super) fn begin_build(&self) -> Result<Option<(SnapshotMeta, OwnedRwLockReadGuard<()>)>, StorageError> {
        let mut dirty = self.lock_dirty();
        let Ok(tree) = self.tree.clone().try_read_owned() else { return Ok(None) };
        let d = self.data.read().unwrap_or_else(|e| e.into_inner());
        self.checkpoint_from(&mut dirty, &d)?;
        let seq = self.db.generate_id().map_err(|e| snap_write_err(None, e))?;
        let snapshot_id = match d.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, seq),
            None => format!("0-0-{seq}"),
        };
        let meta = SnapshotMeta { last_log_id: d.last_applied, last_membership: d.membership.clone(), snapshot_id };
        Ok(Some((meta, tree)))
    }

    /// The current snapshot, open for reading.
    pub(super) async fn current_snapshot(&self) -> Result<Option<Snapshot>, StorageError> {
        let Some(r) = self.stored_snapshot()? else { return Ok(None) };
        let file = tokio::fs::File::open(self.snap_path(&r.file)).await.map_err(|e| snap_read_err(Some(&r.meta), e))?;
        Ok(Some(Snapshot { meta: r.meta, snapshot: Box::new(file) }))
    }
}

/// The permits of [`StateMachineStore::builds_finished`]: more than the parts of builds that
/// can run at once (openraft runs one build at a time; it holds two permits).
pub(super) const BUILD_PERMITS: u32 = 16;

impl StateMachineStore {
    /// The two permits of a snapshot build: one for its task, one for its blocking part.
    async fn building(&self) -> Option<tokio::sync::OwnedSemaphorePermit> {
        // The semaphore is never closed.
        self.builds.clone().acquire_many_owned(2).await.ok()
    }

    /// Rewrites sled's files if they hold mostly garbage (`compact::rewrite_if_due`, against the
    /// current snapshot file's size); logs what it did. For the node after it purged the log
    /// (a build checks by itself). Under a build's permits, so a shutdown waits for it.
    pub async fn rewrite_if_due(&self) {
        let _permits = self.building().await;
        self.rewrite_under_permit().await;
    }

    /// [`Self::rewrite_if_due`], for a caller holding permits already (a second acquire could
    /// queue behind a waiting `builds_finished`).
    async fn rewrite_under_permit(&self) {
        let this = self.clone();
        let started = std::time::Instant::now();
        let rewrite = move || {
            let live = match this.stored_snapshot() {
                Ok(Some(r)) => fs::metadata(this.snap_path(&r.file)).map_or(0, |m| m.len()),
                _ => 0,
            };
            crate::compact::rewrite_if_due(&this.db, live)
        };
        match tokio::task::spawn_blocking(rewrite).await {
            Ok(Ok(None)) => {}
            Ok(Ok(Some(r))) => tracing::info!(
                to = %r.to.display(), files = r.files, records = r.records, noted = r.noted, last_round = r.last_round,
                held_ms = r.held_ms, ms = started.elapsed().as_millis() as u64, "rewrote sled's files, which held mostly garbage"
            ),
            // The old files stay current.
            Ok(Err(e)) => tracing::warn!(error = %e, "could not rewrite sled's files; going on with them"),
            Err(e) => tracing::warn!(error = %e, "the rewrite of sled's files stopped"),
        }
    }

    /// Waits until no snapshot build is running, for a shutdown. openraft runs a build as a
    /// task of its own that its shutdown does not stop; without this wait, the build would
    /// write to the store after the shutdown's checkpoint and flush, and the final drop of the
    /// store (sled flushing what is left) would happen wherever the build ends. Called after
    /// Raft stopped, so no build is asked for afterwards; one whose task was spawned but had
    /// not yet taken its permits may still run after this returns (a narrow window).
    pub async fn builds_finished(&self) {
        drop(self.builds.acquire_many(BUILD_PERMITS).await);
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        // Both permits at once: the semaphore is fair, so a second acquire would queue behind
        // a waiting `builds_finished` that waits for this build.
        let mut building = self.building().await;
        // Checkpoint the state the snapshot holds, so the `sm` tree is never older than the
        // snapshot and the log purged behind it.
        failpoint!("sm-build-begin");
        // The tree, checkpointed at the applied state, is the snapshot: it is read under
        // `tree`, which keeps checkpoints out until the file is written, while applies go on
        // (no copy of the state; an apply waits only once the keys waiting for the build pass
        // `MAX_DEFERRED_KEYS`, a batch of tags).
        let (meta, tree) = loop {
            if let Some(begun) = self.begin_build()? {
                break begun;
            }
            // An apply holds the tree while it waits for `dirty`: let it finish first.
            drop(self.tree.read().await);
        };
        failpoint!("sm-build-checkpointed");
        let writing = building.as_mut().and_then(|p| p.split(1));
        let (this, m) = (self.clone(), meta.clone());
        let (name, file) = tokio::task::spawn_blocking(move || {
            let written = this.write_tree(&m).and_then(|(name, file)| {
                // A snapshot installed while this one was being built is newer: it stays.
                let r = SnapshotRef { meta: m.clone(), file: name.clone() };
                let base = Base { file: name.clone(), last_log_id: m.last_log_id };
                let stored = this.store_ref(&r, true)?;
                if stored {
                    failpoint!("sm-build-snapshot-written");
                    // Still under `tree`: the tree changed nothing the file does not hold.
                    this.rebase(&base)?;
                }
                Ok((name, file, stored.then_some(base)))
            });
            drop(tree);
            // The tree's pairs the new base holds as they are go, a batch at a time.
            let shed = match &written {
                Ok((_, _, Some(base))) => this.shed(base).map(drop),
                _ => Ok(()),
            };
            // Its own permit, since the build's task may be gone by now (a runtime shutting
            // down cancels it at its await): the store's last clone may be this one.
            drop(this);
            drop(writing);
            written.and_then(|(name, file, _)| shed.map(|()| (name, file)))
        })
        .await
        .map_err(join_err)??;
        let bytes = file.metadata().map_or(0, |m| m.len());
        self.db.sync().await.map_err(|e| snap_write_err(Some(&meta), e))?;
        self.prune(&name)?;
        failpoint!("sm-build-done");
        // This snapshot is on disk now (or a newer one is, which already raised the coverage).
        self.coverage.raise(meta.last_log_id);
        tracing::info!(snapshot = %meta.snapshot_id, bytes, "built snapshot");
        // The tree just shed what the file holds: sled's files hold little but the log. Still
        // under the build's permits, so a shutdown waits for it.
        self.rewrite_under_permit().await;
        Ok(Snapshot { meta, snapshot: Box::new(tokio::fs::File::from_std(file)) })
    }
}

#[cfg(test)]
mod tests {
    use openraft::storage::RaftStateMachine;
    use openraft::CommittedLeaderId;
    use tokio::io::AsyncWriteExt;

    use super::*;
    use crate::tags::TagRecord;
    use crate::testing::{open_store as open, rt, tags_state as state};
    use crate::types::LogId;

    fn meta_of(data: &SmData) -> SnapshotMeta {
        SnapshotMeta {
            last_log_id: data.last_applied,
            last_membership: data.membership.clone(),
            snapshot_id: "s".into(),
        }
    }

    /// A state beyond what one codec record may hold (the limit of the snapshots of earlier
    /// releases) is built into a file, sent and installed whole.
    #[test]
    fn a_state_larger_than_a_codec_record_is_snapshotted_and_installed() {
        rt().block_on(async {
            let data = state(70_000, 1000, 9);
            let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let mut leader = open(a.path());
            leader.replace(data.clone()).unwrap();
            let mut snap = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
            let len = snap.snapshot.metadata().await.unwrap().len();
            assert!(len > codec::MAX_PAYLOAD as u64, "{len} bytes");
            // Chunks as openraft sends them, into the follower's receiving file.
            let mut follower = open(b.path());
            let mut received = follower.begin_receiving_snapshot().await.unwrap();
            tokio::io::copy(&mut snap.snapshot, &mut *received).await.unwrap();
            received.flush().await.unwrap();
            follower.install_snapshot(&snap.meta, received).await.unwrap();
            assert_eq!(*follower.data.read().unwrap(), data);
            drop(follower);
            // The follower's state and its snapshot survive a restart.
            let mut follower = open(b.path());
            assert_eq!(*follower.data.read().unwrap(), data);
            let current = follower.get_current_snapshot().await.unwrap().unwrap();
            assert_eq!(current.meta.last_log_id, data.last_applied);
        });
    }

    /// A shutdown waits for a build still running: once `builds_finished` returns, the build
    /// has written and stored its snapshot, so nothing writes to the store after the
    /// shutdown's checkpoint.
    #[test]
    fn builds_finished_waits_for_a_running_build() {
        rt().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut sm = open(dir.path());
            sm.replace(state(50_000, 200, 9)).unwrap();
            let mut builder = sm.get_snapshot_builder().await;
            let build = tokio::spawn(async move { builder.build_snapshot().await.map(|s| s.meta) });
            // A condition, not a sleep: the build holds a permit once it runs.
            while sm.builds.available_permits() == BUILD_PERMITS as usize {
                assert!(!build.is_finished(), "the build ended without a permit");
                tokio::task::yield_now().await;
            }
            sm.builds_finished().await;
            let current = sm.get_current_snapshot().await.unwrap().expect("the build stored its snapshot");
            assert_eq!(current.meta.last_log_id.map(|l| l.index), Some(9));
            assert_eq!(build.await.unwrap().unwrap().last_log_id, current.meta.last_log_id);
        });
    }

    /// A leader of an earlier release sends its snapshot as one codec record; it installs.
    #[test]
    fn a_snapshot_of_an_earlier_release_is_installed() {
        rt().block_on(async {
            let data = state(10, 10, 5);
            let dir = tempfile::tempdir().unwrap();
            let mut sm = open(dir.path());
            let mut received = sm.begin_receiving_snapshot().await.unwrap();
            received.write_all(&codec::encode(&data).unwrap()).await.unwrap();
            sm.install_snapshot(&meta_of(&data), received).await.unwrap();
            assert_eq!(*sm.data.read().unwrap(), data);
            let current = sm.get_current_snapshot().await.unwrap().unwrap();
            assert_eq!(current.meta.last_log_id, data.last_applied);
        });
    }

    /// A store of an earlier release kept its snapshot in the `snapshot` tree; an open converts
    /// it into a file (and restores it when it is newer than the checkpointed state).
    #[test]
    fn a_stored_snapshot_of_an_earlier_release_becomes_a_file() {
        rt().block_on(async {
            let data = state(10, 10, 5);
            let dir = tempfile::tempdir().unwrap();
            {
                let sm = open(dir.path());
                let legacy = LegacySnapshot { meta: meta_of(&data), data: codec::encode(&data).unwrap() };
                sm.snap.remove(KEY_FILE).unwrap();
                sm.snap.insert(KEY_LEGACY, codec::encode(&legacy).unwrap()).unwrap();
                sm.db.sync_now().unwrap();
            }
            let mut sm = open(dir.path());
            assert_eq!(*sm.data.read().unwrap(), data, "restored from the converted snapshot");
            assert!(sm.snap.get(KEY_LEGACY).unwrap().is_none());
            let current = sm.get_current_snapshot().await.unwrap().unwrap();
            assert_eq!(current.meta.last_log_id, data.last_applied);
            let files: Vec<_> = fs::read_dir(&sm.snap_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(files.len(), 1, "{files:?}");
        });
    }

    /// A damaged snapshot from the leader is refused and the state stays as it was.
    #[test]
    fn a_damaged_snapshot_changes_nothing() {
        rt().block_on(async {
            let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let mut leader = open(a.path());
            leader.replace(state(100, 10, 7)).unwrap();
            let mut snap = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
            let mut bytes = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut snap.snapshot, &mut bytes).await.unwrap();
            let mut follower = open(b.path());
            let before = follower.data.read().unwrap().clone();
            for bad in [bytes[..bytes.len() / 2].to_vec(), {
                let mut x = bytes.clone();
                x[bytes.len() / 2] ^= 1;
                x
            }] {
                let mut received = follower.begin_receiving_snapshot().await.unwrap();
                received.write_all(&bad).await.unwrap();
                assert!(follower.install_snapshot(&snap.meta, received).await.is_err());
                assert_eq!(*follower.data.read().unwrap(), before);
                assert!(follower.get_current_snapshot().await.unwrap().is_none());
            }
        });
    }

    /// Each build leaves one snapshot file, the newest, once it is named on disk; the receiving
    /// files have no name.
    #[test]
    fn only_the_current_snapshot_keeps_a_file() {
        rt().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut sm = open(dir.path());
            let _receiving = sm.begin_receiving_snapshot().await.unwrap();
            for i in 1..=3 {
                sm.replace(state(i, 1, i as u64)).unwrap();
                sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
                let files: Vec<_> = fs::read_dir(&sm.snap_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
                assert_eq!(files.len(), 1, "{files:?}");
            }
        });
    }

    /// A build reads the checkpointed tree while entries go on being applied (their
    /// checkpoints wait): the snapshot holds exactly the state at its log ID, and the entries
    /// after it are checkpointed once it is done.
    #[test]
    fn a_build_reads_its_own_log_id_while_applies_go_on() {
        use crate::command::{Command, Op};
        use crate::types::Entry;
        use openraft::EntryPayload;
        let entry = |index: u64, op: Op| Entry {
            log_id: LogId::new(CommittedLeaderId::new(2, 1), index),
            payload: EntryPayload::Normal(Command { at_ms: 1, op }),
        };
        // Its key sorts after every other: read last, when checkpoints had most time to land.
        let alloc = || Op::AllocateSegment { tag: "zz".into(), step: 10, node_id: 1 };
        rt().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let mut sm = open(dir.path());
            let mut base = state(30_000, 100, 1);
            base.state.tags.insert("zz".into(), TagRecord { max_id: 1, step: 10, ..TagRecord::default() });
            sm.replace(base).unwrap();
            let mut builder = sm.get_snapshot_builder().await;
            let build = tokio::spawn(async move { builder.build_snapshot().await.unwrap() });
            let mut next = 2;
            // Each call applies enough entries for a checkpoint to be due.
            let chunk = crate::state_machine::CHECKPOINT_EVERY + 1;
            while !build.is_finished() || next < 2 * chunk {
                sm.apply((next..next + chunk).map(|i| entry(i, alloc()))).await.unwrap();
                next += chunk;
                tokio::task::yield_now().await;
            }
            let mut snap = build.await.unwrap();
            let at = snap.meta.last_log_id.unwrap().index;
            let mut bytes = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut snap.snapshot, &mut bytes).await.unwrap();
            let data = read_snapshot(bytes.as_slice(), &snap.meta).unwrap();
            assert_eq!(data.state.tags["zz"].max_id, 1 + 10 * (at as i64 - 1), "the state at {at}");
            assert_eq!(data.state.tags.len(), 30_001);
            // The checkpoints that waited are written by the next one due.
            sm.checkpoint().await.unwrap();
            assert_eq!(sm.checkpointed_index().unwrap(), next - 1);
            // Batches of tags during a build: too many keys to wait, so the applies wait for it.
            let mut builder = sm.get_snapshot_builder().await;
            let build = tokio::spawn(async move { builder.build_snapshot().await.unwrap() });
            for b in 0..3 {
                let tags = (0..5_000).map(|i| crate::NewTag::segment(format!("b{b}-{i}"), 10, 1, String::new()));
                sm.apply([entry(next, Op::CreateTags { tags: tags.collect() })]).await.unwrap();
                next += 1;
            }
            let snap = build.await.unwrap();
            assert!(snap.meta.last_log_id.unwrap().index < next);
            sm.checkpoint().await.unwrap();
            assert_eq!(sm.checkpointed_index().unwrap(), next - 1);
            assert_eq!(sm.reader().tag_count(), 30_001 + 15_000);
        });
    }

    /// An apply whose keys pass the bound while a build copies the tree waits for the build,
    /// then writes the checkpoint: no keys wait once it returns.
    #[test]
    fn an_apply_that_waited_for_a_build_checkpoints_after_it() {
        use crate::command::{Command, Op};
        use crate::state_machine::MAX_DEFERRED_KEYS;
        use crate::types::Entry;
        use openraft::EntryPayload;
        // Two batches of the most tags an entry may create, a key per tag at least: past the
        // bound, in one call.
        let entry = |index: u64| Entry {
            log_id: LogId::new(CommittedLeaderId::new(2, 1), index),
            payload: EntryPayload::Normal(Command {
                at_ms: 1,
                op: Op::CreateTags {
                    tags: (0..5_000)
                        .map(|i| crate::NewTag::segment(format!("w{index}-{i}"), 10, 1, String::new()))
                        .collect(),
                },
            }),
        };
        const { assert!(2 * 5_000 > MAX_DEFERRED_KEYS) };
        rt().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let sm = open(dir.path());
            // A build copying the tree.
            let build = sm.tree.clone().try_read_owned().unwrap();
            let waiting = tokio::spawn({
                let mut sm = sm.clone();
                async move { sm.apply([entry(1), entry(2)]).await.unwrap() }
            });
            // Waits for the condition: the batch applied in memory, its checkpoint waiting.
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
            while sm.lock_dirty().keys() <= MAX_DEFERRED_KEYS {
                assert!(tokio::time::Instant::now() < deadline, "the batch was never applied");
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            assert!(!waiting.is_finished(), "the apply returned past the bound during the build");
            drop(build);
            let results = waiting.await.unwrap();
            let left = sm.lock_dirty().keys();
            assert_eq!(left, 0, "{left} keys still wait after the build ended");
            assert_eq!(sm.checkpointed_index().unwrap(), 2);
            assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
        });
    }
}
