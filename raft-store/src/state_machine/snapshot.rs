//! Snapshots: building one from the state in memory and installing one from a leader.
//!
//! Tree `snapshot`: the current snapshot (meta and data). Building or installing one flushes.
//! On open, a snapshot newer than the state in `sm` (a crash mid-install) replaces it.
//!
//! Durable coverage: at open and after every flush that stores a snapshot (a build, or an
//! install once its snapshot is on disk), the store tells the log store the snapshot's last
//! log ID, and the log store never makes a purge point durable beyond it (nor a commit point
//! beyond it and the log): openraft purges a follower's log for a snapshot it has only queued
//! for installing, and a crash before the install reached the disk must not leave the log
//! starting after the state, nor after the snapshot that stands for the purged entries.
use std::io::Cursor;

use leaf_api::codec;
use openraft::RaftSnapshotBuilder;
use serde::{Deserialize, Serialize};

use super::legacy::decode_sm_data;
use super::store::{sm_read_err, sm_write_err};
use super::StateMachineStore;
use crate::failpoint::failpoint;
use crate::types::{Snapshot, SnapshotMeta, StorageError, StorageIOError, TypeConfig};

const KEY_SNAPSHOT: &[u8] = b"current";

/// A snapshot as the `snapshot` tree keeps it.
#[derive(Serialize, Deserialize)]
pub(super) struct StoredSnapshot {
    pub(super) meta: SnapshotMeta,
    pub(super) data: Vec<u8>,
}

/// A write error of the snapshot described by `meta`.
fn snap_write_err(meta: Option<&SnapshotMeta>, e: impl std::error::Error + Send + Sync + 'static) -> StorageError {
    StorageIOError::write_snapshot(meta.map(|m| m.signature()), &e).into()
}

impl StateMachineStore {
    /// The snapshot on disk, if any.
    pub(super) fn stored_snapshot(&self) -> Result<Option<StoredSnapshot>, StorageError> {
        match self.snap.get(KEY_SNAPSHOT).map_err(sm_read_err)? {
            Some(v) => Ok(Some(codec::decode(&v).map_err(sm_read_err)?)),
            None => Ok(None),
        }
    }

    /// Installs the snapshot `bytes` described by `meta`: stores and flushes it first, then
    /// replaces the state with it.
    pub(super) async fn install(&self, meta: &SnapshotMeta, bytes: Vec<u8>) -> Result<(), StorageError> {
        let new = decode_sm_data(&bytes).map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        if new.last_applied != meta.last_log_id {
            let e = std::io::Error::other(format!(
                "snapshot data is at {:?} but its meta says {:?}",
                new.last_applied, meta.last_log_id
            ));
            return Err(StorageIOError::read_snapshot(Some(meta.signature()), &e).into());
        }
        failpoint!("sm-install-begin");
        // Mark the journal's gap first, flushed with the snapshot: the journal never claims
        // records that the restored state skipped, whenever a crash interrupts this.
        self.journal.mark_gap(meta.last_log_id.map_or(0, |l| l.index)).map_err(sm_write_err)?;
        // Save the snapshot first: if we crash while rewriting `sm`, open() restores from it.
        let stored = StoredSnapshot { meta: meta.clone(), data: bytes };
        let enc = codec::encode(&stored).map_err(|e| snap_write_err(Some(meta), e))?;
        {
            let _w = self.snap_write.lock().unwrap_or_else(|e| e.into_inner());
            self.snap.insert(KEY_SNAPSHOT, enc).map_err(|e| snap_write_err(Some(meta), e))?;
        }
        failpoint!("sm-install-snapshot-written");
        crate::flush(&self.db).await.map_err(|e| snap_write_err(Some(meta), e))?;
        // From here a reopen restores this snapshot: the log may be purged up to it (openraft
        // asked for that when it queued this install; the log store waited for this).
        self.coverage.raise(meta.last_log_id);
        failpoint!("sm-install-snapshot-flushed");
        self.replace(new)?;
        failpoint!("sm-install-state-replaced");
        crate::flush(&self.db).await.map_err(sm_write_err)?;
        failpoint!("sm-install-done");
        tracing::info!(snapshot = %meta.snapshot_id, "installed snapshot");
        Ok(())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        // Checkpoint the state the snapshot holds, so the `sm` tree is never older than the
        // snapshot and the log purged behind it.
        failpoint!("sm-build-begin");
        let data = {
            let mut dirty = self.lock_dirty();
            let data = self.data.read().unwrap_or_else(|e| e.into_inner()).clone();
            self.checkpoint_from(&mut dirty, &data)?;
            data
        };
        failpoint!("sm-build-checkpointed");
        let bytes = codec::encode(&data).map_err(|e| snap_write_err(None, e))?;
        let seq = self.db.generate_id().map_err(|e| snap_write_err(None, e))?;
        let snapshot_id = match data.last_applied {
            Some(l) => format!("{}-{}-{}", l.leader_id.term, l.index, seq),
            None => format!("0-0-{seq}"),
        };
        let meta =
            SnapshotMeta { last_log_id: data.last_applied, last_membership: data.membership.clone(), snapshot_id };
        let stored = StoredSnapshot { meta: meta.clone(), data: bytes.clone() };
        let enc = codec::encode(&stored).map_err(|e| snap_write_err(Some(&meta), e))?;
        {
            let _w = self.snap_write.lock().unwrap_or_else(|e| e.into_inner());
            // A snapshot installed while this one was being built is newer: keep it.
            if self.stored_snapshot()?.is_none_or(|s| s.meta.last_log_id <= meta.last_log_id) {
                self.snap.insert(KEY_SNAPSHOT, enc).map_err(|e| snap_write_err(Some(&meta), e))?;
            }
        }
        failpoint!("sm-build-snapshot-written");
        crate::flush(&self.db).await.map_err(|e| snap_write_err(Some(&meta), e))?;
        failpoint!("sm-build-done");
        // This snapshot is on disk now (or a newer one is, which already raised the coverage).
        self.coverage.raise(meta.last_log_id);
        tracing::info!(snapshot = %meta.snapshot_id, bytes = bytes.len(), "built snapshot");
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::AuditRecord;

    use super::*;
    use crate::profile::StoredProfile;
    use crate::state::State;
    use crate::state_machine::SmData;
    use crate::tags::TagRecord;
    use crate::tokens::TokenRecord;
    use crate::workers::WorkerRecord;

    /// The worst case `MAX_TAGS` documents: every tag at its longest name and description and
    /// its widest numbers, every worker ID held. The snapshot still encodes, within the bound
    /// the doc computes.
    #[test]
    fn the_largest_possible_state_still_encodes() {
        use crate::tags::{MAX_DESCRIPTION_BYTES, MAX_TAGS};
        use crate::workers::WORKER_IDS;
        let description = "d".repeat(MAX_DESCRIPTION_BYTES);
        let mut state = State::default();
        for i in 0..MAX_TAGS {
            let record = TagRecord {
                max_id: i64::MAX,
                step: leaf_api::tag::MAX_STEP,
                description: description.clone(),
                created_ms: i64::MIN,
                updated_ms: i64::MIN,
                // The widest profile: a key of 32 bytes (the daily one is smaller).
                profile: StoredProfile::Obfuscated { key: [0xff; crate::OBFUSCATION_KEY_BYTES] },
                upper_bound: Some(i64::MAX - 1),
                archived_ms: Some(i64::MIN),
            };
            state.tags.insert(format!("{i:0width$}", width = leaf_api::tag::MAX_TAG_LEN), record);
        }
        for id in 0..WORKER_IDS {
            let record = WorkerRecord {
                node_id: u64::MAX,
                high_water_ms: i64::MIN,
                lease_expires_ms: i64::MIN,
                lease_ms: i64::MIN,
                since_ms: i64::MIN,
                previous_node_id: Some(u64::MAX),
            };
            state.workers.insert(id, record);
        }
        let tags_only = codec::encode(&SmData { state: state.clone(), ..SmData::default() }).unwrap().len();
        // Every token at its widest: the longest name, eight of the longest patterns, a quota,
        // a previous secret, an actor with the longest name.
        use leaf_api::audit::{Actor, AuditAction, MAX_ACTOR_NAME};
        use leaf_api::tokens::{IdQuota, Quota, Right, TagPattern, TokenId, MAX_TOKEN_NAME, MAX_TOKEN_PATTERNS};
        let patterns: Vec<TagPattern> = (0..MAX_TOKEN_PATTERNS)
            .map(|i| TagPattern::parse(&format!("{i:0width$}*", width = leaf_api::tag::MAX_TAG_LEN - 1)).unwrap())
            .collect();
        let actor = Actor::Token { id: TokenId(u64::MAX), name: "a".repeat(MAX_ACTOR_NAME) };
        for i in 0..crate::tokens::MAX_TOKENS as u64 {
            let record = TokenRecord {
                name: "n".repeat(MAX_TOKEN_NAME),
                rights: Right::ALL.into_iter().collect(),
                tags: patterns.clone(),
                quota: Some(Quota { rate_per_sec: u32::MAX, burst: u32::MAX }),
                secret_hash: [0xff; 32],
                previous: Some(([0xff; 32], i64::MIN)),
                created_ms: i64::MIN,
                created_by: actor.clone(),
                rotated_ms: Some(i64::MIN),
                limits: crate::tokens::TokenLimits {
                    id_quota: Some(IdQuota { ids_per_sec: u32::MAX, burst_ids: u32::MAX }),
                    max_tags: Some(u32::MAX),
                },
                tags_created: u32::MAX,
            };
            state.tokens.insert(u64::MAX - i, record);
        }
        // Every audit record at its widest: the tag records (kept apart, as many again), then
        // the security records, each a token creation with all of the above.
        let max = crate::audit::MAX_AUDIT_RECORDS as u64;
        for seq in 0..max {
            let action = AuditAction::TagCreated {
                tag: "t".repeat(leaf_api::tag::MAX_TAG_LEN),
                profile: leaf_api::profile::Profile::Obfuscated,
                step: i64::MIN,
                first_id: i64::MIN,
                upper_bound: Some(i64::MIN),
            };
            let record = AuditRecord { seq: u64::MAX - 2 * max + seq, at_ms: i64::MIN, actor: actor.clone(), action };
            state.audit.records.push_back(record);
        }
        for seq in 0..max {
            let action = AuditAction::TokenCreatedWithLimits {
                token: TokenId(u64::MAX),
                name: "n".repeat(MAX_TOKEN_NAME),
                rights: Right::ALL.to_vec(),
                tags: patterns.clone(),
                quota: Some(Quota { rate_per_sec: u32::MAX, burst: u32::MAX }),
                id_quota: Some(IdQuota { ids_per_sec: u32::MAX, burst_ids: u32::MAX }),
                max_tags: Some(u32::MAX),
            };
            let record = AuditRecord { seq: u64::MAX - max + seq, at_ms: i64::MIN, actor: actor.clone(), action };
            state.audit.records.push_back(record);
        }
        let data = SmData { state, ..SmData::default() };
        let bytes = codec::encode(&data).unwrap();
        println!("worst-case state: {} bytes ({} of them tags and workers)", bytes.len(), tags_only);
        assert!(tags_only <= 49_720_000, "{tags_only} bytes");
        assert!(bytes.len() <= 58_500_000, "{} bytes", bytes.len());
        let meta = SnapshotMeta::default();
        let stored = codec::encode(&StoredSnapshot { meta, data: bytes }).unwrap();
        assert!(stored.len() < codec::MAX_PAYLOAD, "{} bytes", stored.len());
    }
}
