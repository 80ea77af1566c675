//! Reloads the TLS files when they change (polled every `tls.reload_interval_ms`: size,
//! modification time and inode of each, so an atomic rename counts) and on SIGHUP. A reload
//! that fails keeps the configs in use and is logged once per state of the files.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::Tls;

/// What identifies a version of one file.
type Stamp = Option<(SystemTime, u64, u64)>;

fn stamps(paths: &[PathBuf]) -> Vec<Stamp> {
    paths
        .iter()
        .map(|p| {
            let m = std::fs::metadata(p).ok()?;
            #[cfg(unix)]
            let ino = std::os::unix::fs::MetadataExt::ino(&m);
            #[cfg(not(unix))]
            let ino = 0;
            Some((m.modified().ok()?, m.len(), ino))
        })
        .collect()
}

/// Runs until `shutdown` turns true.
pub async fn run(tls: Arc<Tls>, shutdown: watch::Receiver<bool>) {
    let c = tls.config();
    let paths: Vec<PathBuf> = [&c.cert, &c.key, &c.ca, &c.client_ca].into_iter().flatten().cloned().collect();
    let mut every = crate::ticker::Ticker::new(Duration::from_millis(c.reload_interval_ms), shutdown);
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut loaded = stamps(&paths);
    let mut failed: Option<Vec<Stamp>> = None;
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(h) => h.recv().await,
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<Option<()>>();
        let forced = tokio::select! {
            going = every.next() => {
                if !going {
                    return;
                }
                false
            }
            _ = hangup => true,
        };
        let now = stamps(&paths);
        if !forced && (now == loaded || failed.as_ref() == Some(&now)) {
            continue;
        }
        match tls.reload() {
            Ok(()) => {
                tracing::info!(forced, not_after = tls.current().not_after, "reloaded the TLS certificate files");
                loaded = now;
                failed = None;
            }
            Err(e) => {
                if forced || failed.as_ref() != Some(&now) {
                    tracing::error!(error = %e, "reloading the TLS files failed; the previous ones stay in use");
                }
                failed = Some(now);
            }
        }
    }
}
