//! Backup files: the whole replicated state as of one applied log ID, with what a restore needs
//! to move every sequence past the lost cluster's ([`BackupHeader`]).
//!
//! ```text
//! "LEAFBAK1"                                   magic and layout version
//! u32 LE length, codec(BackupHeader)           the header
//! a snapshot file (see `snapshot_file`)        every pair of the `sm` tree, CRC-checked
//! 32 bytes                                     SHA-256 of every byte before them
//! ```
//!
//! [`StateMachineStore::write_backup`] writes one from the `sm` tree, checkpointed at the applied
//! state and held for reading like a snapshot build (applies go on). [`read_backup`] reads one
//! whole and returns the state only once the digest, the snapshot's own trailer and the end of
//! the file all checked out, so a truncated, corrupted or padded file yields nothing.
//! Encryption, if any, wraps the whole file (the node's `backup` module).
use std::io::{self, Read, Write};

use leaf_api::codec;
use ring::digest::{Context, SHA256};
use serde::{Deserialize, Serialize};

use super::snapshot_file::{self, FileError, Writer};
use super::store::{sm_write_err, Loader};
use super::{SmData, StateMachineStore};
use crate::failpoint::failpoint;
use crate::types::{LogId, SnapshotMeta, StorageError};

/// The first bytes of a backup file.
pub const BACKUP_MAGIC: &[u8; 8] = b"LEAFBAK1";

/// The longest header: its rates name at most every tag (a million of ~30 bytes).
const MAX_HEADER_BYTES: u32 = 64 * 1024 * 1024;

/// What a restore needs besides the state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackupHeader {
    /// Random: tells backups apart, and a restored cluster remembers it.
    pub backup_id: u128,
    /// When it was taken (Unix ms, the clock of the node that took it).
    pub taken_ms: i64,
    /// The node that took it.
    pub taken_by: u64,
    /// The applied log ID the state is at (filled in by the writer).
    pub applied: Option<LogId>,
    /// The state's restore generation (filled in by the writer).
    pub generation: u32,
    /// Nodes in the membership when it was taken (filled in by the writer).
    pub nodes: u64,
    /// `segment.max_step` of the node that took it.
    pub max_step: i64,
    /// Tags' consumption rates when it was taken (IDs per second), for the tags that moved.
    pub rates: Vec<(String, f64)>,
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct BackupWritten {
    pub header: BackupHeader,
    pub tags: u64,
    pub bytes: u64,
    /// The file's SHA-256.
    pub sha256: [u8; 32],
}

/// Why a backup file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("the backup file ends early (truncated?)")]
    Truncated,
    #[error("reading the backup: {0}")]
    Io(io::Error),
    #[error("not a leaf backup file (it starts {0:02x?}); an encrypted one needs its key or passphrase")]
    Magic([u8; 8]),
    #[error("a backup header of {0} bytes is longer than allowed")]
    HeaderTooLong(u32),
    #[error("the backup's header: {0}")]
    Header(codec::CodecError),
    #[error("the backup is corrupted: {0}")]
    State(String),
    #[error("the backup's SHA-256 does not match its content: the file is corrupted")]
    Digest,
    #[error("the backup has bytes after its end")]
    Trailing,
}

impl From<io::Error> for BackupError {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            BackupError::Truncated
        } else {
            BackupError::Io(e)
        }
    }
}

impl From<FileError> for BackupError {
    fn from(e: FileError) -> Self {
        match e {
            FileError::Io(e) => e.into(),
            other => BackupError::State(other.to_string()),
        }
    }
}

/// Hashes what goes through it.
struct Hashing<T> {
    inner: T,
    sha: Context,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// The SHA-256 of what went through `sha` so far.
fn digest(sha: &Context) -> [u8; 32] {
    let mut out = [0; 32];
    out.copy_from_slice(sha.clone().finish().as_ref());
    out
}

impl StateMachineStore {
    /// Writes a backup of the applied state to `out` (blocking; run it off the async threads),
    /// with `header` completed from the state. The caller makes `out` durable.
    pub fn write_backup<W: Write>(&self, mut header: BackupHeader, out: W) -> Result<(W, BackupWritten), StorageError> {
        // Checkpoint and hold the tree for reading, as a snapshot build does: the tree is then
        // the applied state, and stays so until the file is written.
        let (meta, tags, _tree) = loop {
            let mut dirty = self.lock_dirty();
            let Ok(tree) = self.tree.clone().try_read_owned() else {
                drop(dirty);
                // An apply holds the tree while it waits for `dirty`: let it finish first.
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            };
            let d = self.data.read().unwrap_or_else(|e| e.into_inner());
            self.checkpoint_from(&mut dirty, &d)?;
            header.applied = d.last_applied;
            header.generation = d.state.lineage.generation;
            header.nodes = d.state.members.len() as u64;
            let snapshot_id = format!("backup-{:032x}", header.backup_id);
            let meta = SnapshotMeta { last_log_id: d.last_applied, last_membership: d.membership.clone(), snapshot_id };
            break (meta, d.state.tags.len() as u64, tree);
        };
        let mut w = Hashing { inner: out, sha: Context::new(&SHA256), bytes: 0 };
        let encoded = codec::encode(&header).map_err(sm_write_err)?;
        let len = u32::try_from(encoded.len()).ok().filter(|n| *n <= MAX_HEADER_BYTES);
        let len = len.ok_or_else(|| sm_write_err(io::Error::other("the backup header is too long")))?;
        let io = |e: io::Error| sm_write_err(e);
        w.write_all(BACKUP_MAGIC).map_err(io)?;
        w.write_all(&len.to_le_bytes()).map_err(io)?;
        w.write_all(&encoded).map_err(io)?;
        let mut snap = Writer::new(w, &meta).map_err(io)?;
        let mut pairs = 0u64;
        super::base::merged(&self.sm, &self.snap_dir, |k, v| {
            snap.pair(k, v).map_err(io)?;
            pairs += 1;
            if pairs == 1000 {
                // A crash point in the middle of a backup (tests kill the node here).
                failpoint!("backup-midway");
            }
            Ok(())
        })?;
        let mut w = snap.finish().map_err(io)?;
        let sha256 = digest(&w.sha);
        w.inner.write_all(&sha256).map_err(io)?;
        w.inner.flush().map_err(io)?;
        let written = BackupWritten { header, tags, bytes: w.bytes + 32, sha256 };
        Ok((w.inner, written))
    }
}

/// Reads a whole backup from `input`: its header and its state, only if every check passed.
pub fn read_backup(input: impl Read) -> Result<(BackupHeader, SmData), BackupError> {
    let mut r = Hashing { inner: input, sha: Context::new(&SHA256), bytes: 0 };
    let mut magic = [0; 8];
    r.read_exact(&mut magic)?;
    if &magic != BACKUP_MAGIC {
        return Err(BackupError::Magic(magic));
    }
    let mut len = [0; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len);
    if len > MAX_HEADER_BYTES {
        return Err(BackupError::HeaderTooLong(len));
    }
    let mut encoded = Vec::new();
    (&mut r).take(u64::from(len)).read_to_end(&mut encoded)?;
    if encoded.len() < len as usize {
        return Err(BackupError::Truncated);
    }
    let header: BackupHeader = codec::decode(&encoded).map_err(BackupError::Header)?;
    let mut loader = Loader::default();
    let meta = snapshot_file::read_section(&mut r, |k, v| loader.pair(k, v))?;
    let computed = digest(&r.sha);
    let mut stored = [0; 32];
    r.inner.read_exact(&mut stored)?;
    if stored != computed {
        return Err(BackupError::Digest);
    }
    if r.inner.read(&mut [0; 1])? != 0 {
        return Err(BackupError::Trailing);
    }
    let data = loader.finish();
    if data.last_applied != meta.last_log_id || header.applied != meta.last_log_id {
        return Err(BackupError::State(format!(
            "the state is at {:?}, its snapshot says {:?} and the header {:?}",
            data.last_applied, meta.last_log_id, header.applied
        )));
    }
    Ok((header, data))
}

impl StateMachineStore {
    /// Makes `data` this store's state and snapshot at `log_id`, with `membership`: how a
    /// restore fills an empty data directory (see [`crate::restore_store`]). The state's
    /// members (and every member ever) include the new membership's.
    pub async fn install_restored(
        &self,
        mut data: SmData,
        log_id: LogId,
        membership: openraft::Membership<crate::types::NodeId, crate::types::Node>,
    ) -> Result<SnapshotMeta, StorageError> {
        let ids: Vec<u64> = membership.nodes().map(|(id, _)| *id).collect();
        crate::state::record_members(&mut data.state, ids, &mut crate::apply::Changes::default());
        data.last_applied = Some(log_id);
        data.membership = crate::types::StoredMembership::new(Some(log_id), membership);
        let meta = SnapshotMeta {
            last_log_id: Some(log_id),
            last_membership: data.membership.clone(),
            snapshot_id: format!("restore-{}-{}", log_id.leader_id.term, log_id.index),
        };
        let file = self.receiving_file()?.into_std().await;
        let (m, d) = (meta.clone(), data);
        let file = tokio::task::spawn_blocking(move || {
            let io = |e: io::Error| sm_write_err(e);
            let mut w = Writer::new(io::BufWriter::new(file), &m).map_err(io)?;
            super::store::for_each_pair(&d, |k, v| w.pair(k, v).map_err(io))?;
            w.finish().map_err(io)?.into_inner().map_err(|e| io(e.into_error()))
        })
        .await
        .map_err(|e| sm_write_err(io::Error::other(e.to_string())))??;
        self.install(&meta, tokio::fs::File::from_std(file)).await?;
        Ok(meta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tags::TagRecord;
    use crate::StoreOptions;

    fn header() -> BackupHeader {
        BackupHeader {
            backup_id: 7,
            taken_ms: 1_000,
            taken_by: 1,
            applied: None,
            generation: 0,
            nodes: 0,
            max_step: 1_000_000,
            rates: vec![("a".into(), 2.5)],
        }
    }

    fn backup_of(tags: u32) -> (Vec<u8>, BackupWritten) {
        let dir = tempfile::tempdir().unwrap();
        let (_log, sm) = crate::open(dir.path(), &StoreOptions::default()).unwrap();
        {
            let mut d = sm.write();
            for i in 0..tags {
                d.state.tags.insert(format!("t{i}"), TagRecord::plain(i64::from(i) * 10, 5, 0, 0));
            }
            let mut dirty = sm.lock_dirty();
            dirty.changes.tags.extend(d.state.tags.keys().cloned());
            dirty.entries += 1;
        }
        sm.write_backup(header(), Vec::new()).unwrap()
    }

    /// A backup of a raised cluster carries its version, so a restore keeps it (and a
    /// release that does not support it refuses the backup).
    #[test]
    fn a_backup_carries_the_cluster_version() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, sm) = crate::open(dir.path(), &StoreOptions::default()).unwrap();
        let raised = crate::version::ClusterVersion(2);
        let (mut d, mut dirty) = (sm.write(), sm.lock_dirty());
        let mut c = crate::apply::Changes::default();
        let raise = crate::Command { at_ms: 1, op: crate::Op::SetClusterVersion { version: raised } };
        crate::apply::apply(&mut d.state, &raise, &mut c).unwrap();
        (dirty.changes, dirty.entries) = (c, 1);
        drop((d, dirty));
        let (bytes, _) = sm.write_backup(header(), Vec::new()).unwrap();
        assert_eq!(read_backup(bytes.as_slice()).unwrap().1.state.version, raised);
    }

    #[test]
    fn a_backup_reads_back_whole_with_its_header() {
        let (bytes, written) = backup_of(3_000);
        assert_eq!((written.tags, written.bytes), (3_000, bytes.len() as u64));
        assert_eq!(written.sha256[..], ring::digest::digest(&SHA256, &bytes[..bytes.len() - 32]).as_ref()[..]);
        let (h, data) = read_backup(bytes.as_slice()).unwrap();
        assert_eq!(h, written.header);
        assert_eq!((h.backup_id, h.rates.len()), (7, 1));
        assert_eq!(data.state.tags.len(), 3_000);
        assert_eq!(data.state.tags["t42"].max_id, 420);
    }

    /// Every truncation and a flipped bit anywhere are refused, with the kind of damage named.
    #[test]
    fn a_damaged_backup_is_refused() {
        let (bytes, _) = backup_of(20);
        for len in 0..bytes.len() {
            let e = read_backup(&bytes[..len]).unwrap_err();
            assert!(matches!(e, BackupError::Truncated), "truncated to {len}: {e}");
        }
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x04;
            assert!(read_backup(bad.as_slice()).is_err(), "byte {i} flipped");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(read_backup(longer.as_slice()), Err(BackupError::Trailing)));
        let e = read_backup(&b"age-encryption.org/v1\n"[..]).unwrap_err();
        assert!(e.to_string().contains("not a leaf backup"), "{e}");
    }
}
