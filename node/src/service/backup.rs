//! A backup on request (`GET /admin/backup`, root credentials only): the operation hands the
//! edge a file to send; scheduled ones are [`crate::backup::schedule`]'s.
use leaf_api::ErrorCode;

use super::{ApiError, App};
use crate::backup::{BackupFailure, Taken};

impl App {
    /// Takes a plaintext backup of the whole replicated state, at least as new as everything
    /// committed before the call, into an unnamed file for the edge to stream (the caller
    /// encrypts it if it wants; the transport is TLS when configured).
    pub async fn backup(&self) -> Result<Taken, ApiError> {
        let taken = self.backups.take_unnamed().await.map_err(|e| match e {
            BackupFailure::Barrier(why) => ApiError::new(ErrorCode::Unavailable, format!("backup: {why}")),
            other => ApiError::new(ErrorCode::Unavailable, format!("this node could not write the backup: {other}")),
        })?;
        tracing::info!(
            backup_id = %format!("{:032x}", taken.written.header.backup_id),
            tags = taken.written.tags,
            bytes = taken.bytes,
            applied = ?taken.written.header.applied.map(|l| l.index),
            "backup taken for a download"
        );
        Ok(taken)
    }

    /// The scheduled backups' status (`/metrics`).
    pub fn last_backup(&self) -> crate::backup::LastBackup {
        self.backups.status.get()
    }
}
