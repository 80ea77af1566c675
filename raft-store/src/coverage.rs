//! How far the state machine's durable state reaches: the bridge that keeps the log store from
//! making a purge or a commit point durable before the state it depends on is.
//!
//! openraft (0.9.25) installs a snapshot on a follower by queueing the install for the state
//! machine task and, in the same step, purging the log up to the snapshot and raising
//! `committed` to it, without waiting for the install. Had the purge (or a later
//! `save_committed`) reached the disk before the installed snapshot, a crash in between would
//! leave a node whose log starts after its state machine: openraft's start-up re-applies the
//! committed entries from the log, finds them gone, and the node never starts again.
//!
//! The state machine publishes here the last log ID of the snapshot it has on disk. A reopen
//! finds the state at least there (a snapshot newer than the checkpointed state replaces it),
//! and openraft requires the log never to be purged beyond the snapshot, which stands in for
//! the purged entries when a lagging follower needs them (its start-up refuses a purge point
//! beyond the snapshot). The log store never makes `last_purged` durable beyond it, never
//! writes entries after a hole that only a covered purge can close, and never makes
//! `committed` durable beyond it and the entries the log holds. See [`crate::log_store`].
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::types::LogId;

/// The last log ID of the snapshot on disk, shared by the log store and the state machine of
/// one database. Only ever rises. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Coverage(Arc<watch::Sender<Option<LogId>>>);

impl Coverage {
    pub(crate) fn new() -> Coverage {
        Coverage(Arc::new(watch::Sender::new(None)))
    }

    /// Notes that a snapshot up to `log_id` is on disk. Call only after the flush that stored
    /// it.
    pub(crate) fn raise(&self, log_id: Option<LogId>) {
        self.0.send_if_modified(|c| {
            if log_id > *c {
                *c = log_id;
                true
            } else {
                false
            }
        });
    }

    /// The durably covered log ID (`None`: nothing is).
    pub(crate) fn get(&self) -> Option<LogId> {
        *self.0.borrow()
    }

    /// Waits up to `timeout` until the covered index reaches `index`; returns the covered log
    /// ID then (which may still be short of it).
    pub(crate) async fn wait_for(&self, index: u64, timeout: Duration) -> Option<LogId> {
        let mut rx = self.0.subscribe();
        let reached = rx.wait_for(|c| c.is_some_and(|c| c.index >= index));
        let _ = tokio::time::timeout(timeout, reached).await;
        self.get()
    }
}
