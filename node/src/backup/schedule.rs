//! Scheduled backups (`[backup] dir`): every node runs this task, and the one that is leader
//! when a backup is due takes it, so the schedule survives a failover. A backup is due
//! `interval_secs` after the newest one in `dir` (at once when there is none); after a
//! failure, a minute later (or the interval, if shorter).
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use super::{crypt, scheduled_in, Backups};
use crate::config::BackupConfig;

/// How often the task looks whether a backup is due.
const TICK: Duration = Duration::from_secs(1);

/// Unix seconds of `t`.
fn unix_secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// When the newest backup in `dir` was written, if there is one.
fn newest(dir: &Path) -> Option<SystemTime> {
    let files = scheduled_in(dir).ok()?;
    files.last().and_then(|f| f.metadata().ok()?.modified().ok())
}

/// Runs until `shutdown` turns true; returns at once when `cfg.dir` is not set.
pub async fn run(backups: Backups, cfg: BackupConfig, enc: crypt::Encryption, shutdown: watch::Receiver<bool>) {
    let Some(dir) = cfg.dir.clone() else { return };
    let interval = Duration::from_secs(cfg.interval_secs);
    let mut due = match newest(&dir) {
        Some(t) => {
            backups.status.update(|s| s.success_at = Some(unix_secs(t)));
            t + interval
        }
        None => SystemTime::now(),
    };
    let mut ticker = crate::ticker::Ticker::new(TICK, shutdown);
    while ticker.next().await {
        if SystemTime::now() < due || !backups.raft.status().is_leader {
            continue;
        }
        let outcome = backups.save(&dir, cfg.keep, &enc).await;
        let now = SystemTime::now();
        backups.record(&outcome, unix_secs(now));
        match outcome {
            Ok((path, t)) => {
                tracing::info!(
                    file = %path.display(),
                    tags = t.written.tags,
                    bytes = t.bytes,
                    seconds = t.seconds,
                    applied = ?t.written.header.applied.map(|l| l.index),
                    "scheduled backup written"
                );
                due = now + interval;
            }
            Err(e) => {
                tracing::warn!(error = %e, dir = %dir.display(), "scheduled backup failed; retrying in a minute");
                due = now + interval.min(Duration::from_secs(60));
            }
        }
    }
}
