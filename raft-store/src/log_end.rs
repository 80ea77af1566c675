//! The log's end and the vote, kept outside sled: how an open finds that sled lost some of
//! the Raft log or the vote.
//!
//! At open, sled replays the tail of its log file and takes a message that does not check out
//! for the end of what was written: after a power cut that is a torn write, rightly dropped;
//! after a flipped byte it is the silent loss of every record behind it, acknowledged Raft
//! entries and votes included. A node that came back so would break Raft's promises (it could
//! lead with a shorter log, or vote twice in a term), and a test saw a whole cluster's worker
//! IDs reshuffled by one. So the store keeps, in the file `log-end` beside sled's, the highest
//! log index and the vote it ever had synced, and an open refuses to start when sled holds
//! less ([`crate::verify::Damage::LogLost`]; the ends compare under the same vote, see `lost`).
//!
//! The file never claims more than sled has on disk:
//! - it is raised (end of the log, vote) only after sled's sync of the append or the vote, so
//!   it needs no sync of its own: lost at a power cut, it only claims less;
//! - it is lowered (a truncation of conflicting entries, rare) and synced *before* sled
//!   removes the entries.
//!
//! Layout: one record at offset 0, `u32 LE length` then a [`codec`] record of [`Mark`], in
//! the first 512 bytes (one sector: a write of it is not torn). A store of a release before
//! this file gets it at its first open, from what sled holds.
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use leaf_api::codec;
use serde::{Deserialize, Serialize};

use crate::types::Vote;
use crate::verify::Damage;

/// The file's name in the store's directory.
pub const LOG_END_FILE: &str = "log-end";

/// The bytes a record may take (one sector).
const MAX_BYTES: usize = 512;

/// What the store had synced at most: the end of its log and its vote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The highest log index held or purged (`None`: none yet).
    pub end: Option<u64>,
    pub vote: Option<Vote>,
}

/// Why the file could not be opened or checked.
#[derive(Debug, thiserror::Error)]
pub enum LogEndError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Damaged(#[from] Damage),
}

/// The open file and what it says.
pub(crate) struct LogEnd {
    file: File,
    path: PathBuf,
    mark: Mutex<Mark>,
}

impl LogEnd {
    /// Opens the file in `dir` and checks it against `held`, what sled holds now: `Damaged`
    /// when the file claims more. Creates it from `held` when there is none, whole or not at
    /// all (a temporary file, synced, renamed, the directory synced): a crash while creating
    /// it never leaves a short file that the next open would take for damage.
    pub(crate) fn open(dir: &Path, held: Mark) -> Result<LogEnd, LogEndError> {
        let path = dir.join(LOG_END_FILE);
        let io_err = |source| LogEndError::Io { path: path.clone(), source };
        if !path.exists() {
            let tmp = dir.join(format!("{LOG_END_FILE}.tmp"));
            let file = std::fs::File::create(&tmp).map_err(io_err)?;
            file.write_all_at(&record(held).map_err(io_err)?, 0).map_err(io_err)?;
            file.sync_data().map_err(io_err)?;
            std::fs::rename(&tmp, &path).map_err(io_err)?;
            crate::durable::sync_dir(dir).map_err(io_err)?;
        }
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path).map_err(io_err)?;
        let this = LogEnd { file, path: path.clone(), mark: Mutex::new(held) };
        let synced = this.read()?;
        if let Some(why) = lost(synced, held) {
            return Err(Damage::LogLost { file: dir.join(crate::durable::LOG_FILE), why }.into());
        }
        this.write(held).map_err(io_err)?;
        this.file.sync_data().map_err(io_err)?;
        Ok(this)
    }

    fn read(&self) -> Result<Mark, LogEndError> {
        let damaged = |offset, why: String| LogEndError::Damaged(Damage::File { file: self.path.clone(), offset, why });
        let mut buf = vec![0u8; MAX_BYTES];
        let n =
            read_up_to(&self.file, &mut buf).map_err(|source| LogEndError::Io { path: self.path.clone(), source })?;
        if n < 4 {
            return Err(damaged(n as u64, format!("{n} bytes, shorter than its length")));
        }
        let len = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if len > MAX_BYTES - 4 || 4 + len > n {
            return Err(damaged(0, format!("a length of {len} bytes in a file of {n}")));
        }
        codec::decode(&buf[4..4 + len]).map_err(|e| damaged(4 + e.offset() as u64, e.to_string()))
    }

    fn write(&self, mark: Mark) -> io::Result<()> {
        self.file.write_all_at(&record(mark)?, 0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mark> {
        self.mark.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// After sled synced entries up to `index`: raises the end (no sync needed, see above).
    pub(crate) fn raise_end(&self, index: u64) -> io::Result<()> {
        let mut m = self.lock();
        if m.end.is_some_and(|e| e >= index) {
            return Ok(());
        }
        m.end = Some(index);
        self.write(*m)
    }

    /// After sled synced `vote`.
    pub(crate) fn raise_vote(&self, vote: Vote) -> io::Result<()> {
        let mut m = self.lock();
        if m.vote == Some(vote) {
            return Ok(());
        }
        m.vote = Some(vote);
        self.write(*m)
    }

    /// Before sled removes the entries from `index` on: lowers the end below them, synced.
    pub(crate) fn lower_end_before(&self, index: u64) -> io::Result<()> {
        let mut m = self.lock();
        let end = index.checked_sub(1);
        if m.end <= end {
            return Ok(());
        }
        m.end = end;
        self.write(*m)?;
        self.file.sync_data()
    }
}

/// The file's bytes for `mark`: its length, then its codec record.
fn record(mark: Mark) -> io::Result<Vec<u8>> {
    let record = codec::encode(&mark).map_err(io::Error::other)?;
    let mut buf = Vec::with_capacity(4 + record.len());
    buf.extend_from_slice(&(record.len() as u32).to_le_bytes());
    buf.extend_from_slice(&record);
    if buf.len() > MAX_BYTES {
        return Err(io::Error::other(format!("a log-end record of {} bytes", buf.len())));
    }
    Ok(buf)
}

/// Reads from offset 0 until `buf` is full or the file ends.
fn read_up_to(file: &File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], n as u64)? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// What `held` lacks of `synced`, if anything.
///
/// The vote only rises, so sled holding an older one is a loss. The ends compare only under
/// the same vote: a newer vote in sled was saved without this file hearing of it (its
/// unsynced raise lost to a power cut, or a release before this file ran on the directory),
/// and a truncation may have come with it, so the file is stale and is rewritten from sled.
fn lost(synced: Mark, held: Mark) -> Option<String> {
    if let Some(v) = synced.vote {
        let kept = held.vote.is_some_and(|h| h >= v);
        if !kept {
            return Some(format!(
                "the Raft vote is {:?}, but {v} was synced before: sled's recovery dropped it behind a damaged record",
                held.vote
            ));
        }
    }
    if synced.vote == held.vote && synced.end > held.end {
        return Some(format!(
            "the Raft log ends at index {}, but entries up to {} were synced before: sled's recovery dropped \
             acknowledged entries behind a damaged record",
            held.end.map_or("(none)".to_string(), |e| e.to_string()),
            synced.end.unwrap_or(0)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(term: u64) -> Vote {
        Vote::new(term, 1)
    }

    #[test]
    fn a_store_holding_less_than_was_synced_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = Mark { end: Some(10), vote: Some(vote(2)) };
        let f = LogEnd::open(dir.path(), first).unwrap();
        f.raise_end(12).unwrap();
        f.raise_vote(vote(3)).unwrap();
        drop(f);
        // Holding as much (or more) is fine.
        LogEnd::open(dir.path(), Mark { end: Some(12), vote: Some(vote(3)) }).unwrap();
        LogEnd::open(dir.path(), Mark { end: Some(13), vote: Some(vote(3)) }).unwrap();
        // Less of the log, or an older vote, is damage.
        let e = LogEnd::open(dir.path(), Mark { end: Some(11), vote: Some(vote(3)) }).err().unwrap();
        assert!(e.to_string().contains("ends at index 11, but entries up to 13 were synced"), "{e}");
        let e = LogEnd::open(dir.path(), Mark { end: Some(13), vote: Some(vote(2)) }).err().unwrap();
        assert!(e.to_string().contains("vote"), "{e}");
        let e = LogEnd::open(dir.path(), Mark { end: Some(13), vote: None }).err().unwrap();
        assert!(e.to_string().contains("vote"), "{e}");
        // A newer vote in sled than the file knows: the file is stale (another release ran, or
        // its raise was lost), and a shorter log under that vote is no proof of loss.
        LogEnd::open(dir.path(), Mark { end: Some(5), vote: Some(vote(4)) }).unwrap();
        let e = LogEnd::open(dir.path(), Mark { end: Some(4), vote: Some(vote(4)) }).err().unwrap();
        assert!(e.to_string().contains("ends at index 4, but entries up to 5"), "{e}");
    }

    /// A crash while the file was first made leaves at most its temporary file, which the
    /// next open replaces; never a short `log-end` taken for damage.
    #[test]
    fn a_crash_while_creating_the_file_leaves_nothing_to_refuse() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(format!("{LOG_END_FILE}.tmp")), b"").unwrap();
        drop(LogEnd::open(dir.path(), Mark { end: Some(3), vote: None }).unwrap());
        LogEnd::open(dir.path(), Mark { end: Some(3), vote: None }).unwrap();
        assert!(LogEnd::open(dir.path(), Mark { end: Some(2), vote: None }).is_err());
    }

    #[test]
    fn a_truncation_lowers_the_end_first() {
        let dir = tempfile::tempdir().unwrap();
        let f = LogEnd::open(dir.path(), Mark { end: Some(20), vote: None }).unwrap();
        f.lower_end_before(15).unwrap();
        drop(f);
        LogEnd::open(dir.path(), Mark { end: Some(14), vote: None }).unwrap();
        let f = LogEnd::open(dir.path(), Mark { end: Some(14), vote: None }).unwrap();
        f.lower_end_before(0).unwrap();
        drop(f);
        LogEnd::open(dir.path(), Mark { end: None, vote: None }).unwrap();
    }

    #[test]
    fn a_damaged_file_is_refused_with_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let v = Vote::new_committed(4, 2);
        drop(LogEnd::open(dir.path(), Mark { end: Some(7), vote: Some(v) }).unwrap());
        let path = dir.path().join(LOG_END_FILE);
        let good = std::fs::read(&path).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x08;
            std::fs::write(&path, bad).unwrap();
            let e = LogEnd::open(dir.path(), Mark { end: Some(7), vote: Some(v) }).err().unwrap();
            assert!(e.to_string().contains(&format!("{}: damaged at offset", path.display())), "byte {i}: {e}");
        }
    }
}
