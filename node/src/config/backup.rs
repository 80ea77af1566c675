//! `[backup]`: backups the cluster takes by itself (`leaf backup` takes one by hand).
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Scheduled backups: the leader writes one to `dir` every `interval_secs` and keeps the newest
/// `keep`. Off unless `dir` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct BackupConfig {
    /// Directory the leader writes backups to (created 0700; each file 0600). Best on a disk the
    /// nodes do not share a fate with (a mounted volume, object storage through a sync). Default
    /// none: no scheduled backups.
    pub dir: Option<PathBuf>,
    /// Seconds between backups. From 5 to 604800; default `3600`.
    pub interval_secs: u64,
    /// Backups kept in `dir`, the newest; older ones of this cluster are removed. From 1 to
    /// 10000; default `24`.
    pub keep: u32,
    /// Encrypt each backup to this age recipient (`age1...`, from `leaf backup keygen`): the
    /// node needs no secret to write one, and only the identity file's holder can restore it.
    /// Default none: plaintext (the file still holds token hashes and obfuscation keys; keep it
    /// private).
    pub recipient: Option<String>,
}

impl Default for BackupConfig {
    fn default() -> Self {
        BackupConfig { dir: None, interval_secs: 3600, keep: 24, recipient: None }
    }
}

impl BackupConfig {
    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if !(5..=604_800).contains(&self.interval_secs) {
            errs.push("backup.interval_secs must be from 5 to 604800".to_string());
        }
        if !(1..=10_000).contains(&self.keep) {
            errs.push("backup.keep must be from 1 to 10000".to_string());
        }
        if self.dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
            errs.push("backup.dir must not be empty".to_string());
        }
        if let Some(r) = &self.recipient {
            // The same parse as the backups' encryption (`backup::crypt`), which starts from
            // this validated configuration.
            if let Err(e) = r.trim().parse::<age::x25519::Recipient>() {
                errs.push(format!("backup.recipient: not an age recipient (expected `age1...`): {e}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonsense_is_refused_with_every_reason() {
        let mut errs = Vec::new();
        BackupConfig::default().validate(&mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        let bad = BackupConfig {
            dir: Some(PathBuf::new()),
            interval_secs: 4,
            keep: 0,
            recipient: Some("age1notakey".into()),
        };
        bad.validate(&mut errs);
        assert_eq!(errs.len(), 4, "{errs:?}");
        for key in ["interval_secs", "keep", "dir", "recipient"] {
            assert!(errs.iter().any(|e| e.contains(&format!("backup.{key}"))), "{key}: {errs:?}");
        }
        let mut errs = Vec::new();
        BackupConfig { interval_secs: 604_801, keep: 10_001, ..BackupConfig::default() }.validate(&mut errs);
        assert_eq!(errs.len(), 2, "{errs:?}");
    }
}
