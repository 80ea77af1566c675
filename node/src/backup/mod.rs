//! Backups of the replicated state (`leaf backup`, `GET /admin/backup`, `[backup]`) and what
//! the node keeps of them; restoring one (`leaf restore`, offline) is [`restore`].
//!
//! - this file: [`Backups`], which takes one: a read barrier first (the state is then at least
//!   as new as everything committed before the request), then the state machine writes the
//!   applied state through a [`crypt::Sink`] into a file; the scheduled files' names and their
//!   pruning; [`BackupStatus`] for `/metrics`.
//! - [`crypt`]: age encryption and decryption.
//! - [`schedule`]: the task that takes one every `backup.interval_secs` on the leader.
//! - [`restore`]: `leaf restore`'s work: read and check a backup, plan, write a new data dir.
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use leaf_raft_store::{BackupHeader, BackupWritten};

use crate::forecast::sampler::Forecasts;
use crate::raft::RaftNode;

pub mod crypt;
pub mod restore;
pub mod schedule;

/// The start of a scheduled backup's file name; the rest is the time and the backup's ID.
const PREFIX: &str = "leaf-backup-";
/// The ending of a backup file, plain; an encrypted one adds [`AGE_EXT`].
pub const EXT: &str = ".leafbak";
pub const AGE_EXT: &str = ".age";

/// Why a backup could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum BackupFailure {
    #[error("no committed point to back up from: {0}")]
    Barrier(String),
    #[error("writing the backup: {0}")]
    Write(String),
    #[error("{0}")]
    Crypt(#[from] crypt::CryptError),
}

/// A backup taken: the file (read from its start) and what it holds.
pub struct Taken {
    pub file: File,
    pub written: BackupWritten,
    /// The file's size (larger than `written.bytes` when encrypted).
    pub bytes: u64,
    pub seconds: f64,
}

/// The last scheduled backup, for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LastBackup {
    /// Unix seconds of the last success; `None` before the first.
    pub success_at: Option<f64>,
    pub bytes: u64,
    pub seconds: f64,
    pub tags: u64,
    pub failures: u64,
}

/// Shared by the schedule and the metrics.
#[derive(Debug, Clone, Default)]
pub struct BackupStatus(Arc<Mutex<LastBackup>>);

impl BackupStatus {
    pub fn get(&self) -> LastBackup {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn update(&self, f: impl FnOnce(&mut LastBackup)) {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// Takes backups of this node's state.
#[derive(Clone)]
pub struct Backups {
    raft: RaftNode,
    forecasts: Arc<Forecasts>,
    /// `segment.max_step`, recorded for the restore's margins.
    max_step: i64,
    /// Where the unnamed files of `GET /admin/backup` are made.
    tmp_dir: PathBuf,
    pub status: BackupStatus,
}

impl Backups {
    pub fn new(raft: RaftNode, forecasts: Arc<Forecasts>, max_step: i64, data_dir: &Path) -> Self {
        Backups { raft, forecasts, max_step, tmp_dir: data_dir.join("backup-tmp"), status: BackupStatus::default() }
    }

    /// Takes a backup into `file` (which must be empty), encrypted as `enc` and synced.
    pub async fn take_into(&self, file: File, enc: &crypt::Encryption) -> Result<Taken, BackupFailure> {
        let started = Instant::now();
        self.raft.read_barrier().await.map_err(|e| BackupFailure::Barrier(e.to_string()))?;
        let header = BackupHeader {
            backup_id: rand::random(),
            taken_ms: self.raft.clock().now_ms(),
            taken_by: self.raft.node_id(),
            applied: None,
            generation: 0,
            nodes: 0,
            max_step: self.max_step,
            rates: Vec::new(),
        };
        let mut header = header;
        header.rates = self.rates(header.taken_ms);
        let sink = crypt::Sink::new(file, enc)?;
        let sm = self.raft.store().clone();
        let write = move || {
            let (sink, written) = sm.write_backup(header, sink).map_err(|e| BackupFailure::Write(e.to_string()))?;
            let io = |e: std::io::Error| BackupFailure::Write(e.to_string());
            let mut file = sink.finish().map_err(io)?;
            file.sync_all().map_err(io)?;
            let bytes = file.seek(SeekFrom::End(0)).map_err(io)?;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            Ok::<_, BackupFailure>((file, written, bytes))
        };
        let (file, written, bytes) = tokio::task::spawn_blocking(write)
            .await
            .map_err(|e| BackupFailure::Write(format!("the backup task failed: {e}")))??;
        Ok(Taken { file, written, bytes, seconds: started.elapsed().as_secs_f64() })
    }

    /// Each tag's consumption rate for the restore's margins: the highest of the forecast's and
    /// of what the allocation journal holds over its last minute and last 15 minutes (the
    /// forecasts leave obfuscated tags out, and a burst shows sooner in a short window).
    fn rates(&self, now_ms: i64) -> Vec<(String, f64)> {
        let mut rates: HashMap<String, f64> = self.forecasts.rates().into_iter().collect();
        match self.raft.store().journal().dump(None, None) {
            Ok(dump) => {
                let records: Vec<_> = dump.records.into_iter().map(|(_, r)| r).collect();
                for (tag, rate) in journal_rates(&records, now_ms) {
                    let r = rates.entry(tag).or_insert(0.0);
                    *r = r.max(rate);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "backup: the allocation journal could not be read; forecast rates only")
            }
        }
        rates.into_iter().collect()
    }

    /// Takes a plaintext backup into an unnamed file (gone once closed), for a download.
    pub async fn take_unnamed(&self) -> Result<Taken, BackupFailure> {
        let io = |e: std::io::Error| BackupFailure::Write(format!("{}: {e}", self.tmp_dir.display()));
        private_dir(&self.tmp_dir).map_err(io)?;
        let path = self.tmp_dir.join(format!("download-{}.part", rand::random::<u64>()));
        let file = private_file(&path).map_err(io)?;
        std::fs::remove_file(&path).map_err(io)?;
        self.take_into(file, &crypt::Encryption::None).await
    }

    /// Takes a backup into `dir` under a new name (written as `.part`, synced, renamed, the
    /// directory synced), then removes the oldest beyond `keep`. Returns the file's path.
    pub async fn save(
        &self,
        dir: &Path,
        keep: u32,
        enc: &crypt::Encryption,
    ) -> Result<(PathBuf, Taken), BackupFailure> {
        let io = |e: std::io::Error| BackupFailure::Write(format!("{}: {e}", dir.display()));
        private_dir(dir).map_err(io)?;
        let now = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
        let ext = if matches!(enc, crypt::Encryption::None) { EXT.to_string() } else { format!("{EXT}{AGE_EXT}") };
        let name = format!("{PREFIX}{now}-{:08x}{ext}", rand::random::<u32>());
        let part = dir.join(format!("{name}.part"));
        let taken = match self.take_into(private_file(&part).map_err(io)?, enc).await {
            Ok(t) => t,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                return Err(e);
            }
        };
        let path = dir.join(&name);
        std::fs::rename(&part, &path).map_err(io)?;
        File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        prune(dir, keep).map_err(io)?;
        Ok((path, taken))
    }

    /// Records a scheduled backup's outcome for `/metrics`.
    fn record(&self, outcome: &Result<(PathBuf, Taken), BackupFailure>, now_secs: f64) {
        self.status.update(|s| match outcome {
            Ok((_, t)) => {
                (s.success_at, s.bytes, s.seconds, s.tags) = (Some(now_secs), t.bytes, t.seconds, t.written.tags);
            }
            Err(_) => s.failures += 1,
        });
    }
}

/// How far back [`journal_rates`] reads the allocation journal.
const RATE_LOOKBACK_MS: i64 = 900_000;
/// The stretch of time whose busiest one [`journal_rates`] counts.
const RATE_BUCKET_MS: i64 = 10_000;

/// Each tag's peak consumption in `records` (the allocation journal) over the
/// [`RATE_LOOKBACK_MS`] before `now_ms`: the IDs allocated in its busiest [`RATE_BUCKET_MS`]
/// stretch (counted back from `now_ms`), per second. A journal younger than a stretch counts
/// its own span (at least a second). A peak rather than an average: what a tag did after the
/// backup is better bounded by what it has shown it can do than by a lull before the backup
/// (a failover, a quiet hour).
pub fn journal_rates(records: &[leaf_raft_store::JournalRecord], now_ms: i64) -> HashMap<String, f64> {
    let mut rates: HashMap<String, f64> = HashMap::new();
    let Some(first) = records.iter().map(|r| r.at_ms).min() else { return rates };
    let stretch_ms = (now_ms - first).clamp(1_000, RATE_BUCKET_MS);
    let mut ids: HashMap<(&str, i64), i64> = HashMap::new();
    for r in records.iter().filter(|r| r.at_ms > now_ms - RATE_LOOKBACK_MS) {
        let bucket = (now_ms - r.at_ms).max(0) / RATE_BUCKET_MS;
        *ids.entry((&r.tag, bucket)).or_default() += r.end.saturating_sub(r.start).max(0);
    }
    for ((tag, _), n) in ids {
        let rate = n as f64 * 1000.0 / stretch_ms as f64;
        let r = rates.entry(tag.to_string()).or_insert(0.0);
        *r = r.max(rate);
    }
    rates
}

/// Makes `dir` (and its parents) if need be; a new one is private (0700).
fn private_dir(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        std::fs::create_dir_all(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// A new file readable by its owner only (0600), for reading and writing.
pub fn private_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(path)
}

/// The scheduled backups in `dir`, oldest first (their names sort by time).
pub fn scheduled_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            name.starts_with(PREFIX) && (name.ends_with(EXT) || name.ends_with(&format!("{EXT}{AGE_EXT}")))
        })
        .collect();
    files.sort();
    Ok(files)
}

/// Removes the oldest scheduled backups of `dir` beyond the newest `keep`.
fn prune(dir: &Path, keep: u32) -> std::io::Result<()> {
    let files = scheduled_in(dir)?;
    let extra = files.len().saturating_sub(keep as usize);
    for old in &files[..extra] {
        std::fs::remove_file(old)?;
        tracing::info!(file = %old.display(), "removed an old backup");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use leaf_raft_store::JournalRecord;

    use super::*;

    fn rec(tag: &str, start: i64, end: i64, at_ms: i64) -> JournalRecord {
        JournalRecord { tag: tag.into(), node_id: 1, start, end, at_ms }
    }

    #[test]
    fn journal_rates_are_each_tag_s_busiest_ten_seconds() {
        let now = 1_000_000;
        let records = [
            rec("steady", 0, 9_000, now - 890_000),
            rec("steady", 9_000, 9_600, now - 30_000),
            rec("steady", 9_600, 9_700, now - 25_000),
            rec("burst", 0, 6_000, now - 10_000),
            rec("old", 0, 1_000_000, now - 900_000),
        ];
        let r = journal_rates(&records, now);
        // steady: 9,000 in one stretch beats the 700 of another.
        assert!((r["steady"] - 900.0).abs() < 1e-9, "{r:?}");
        assert!((r["burst"] - 600.0).abs() < 1e-9, "{r:?}");
        assert!(!r.contains_key("old"), "beyond the look-back: {r:?}");
        // A journal of a few seconds counts its own span.
        let young = journal_rates(&[rec("t", 0, 500, now - 2_000), rec("t", 500, 1_000, now - 200)], now);
        assert!((young["t"] - 500.0).abs() < 1e-9, "{young:?}");
        assert!(journal_rates(&[], now).is_empty());
    }
}
