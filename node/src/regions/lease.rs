//! The region's lease of its homes, as its leader measured it: a homed tag is served here only
//! while it runs ([`HomeGate`]).
//!
//! The global tier's lease runs [`HOME_LEASE_MS`] from its leader's time of the renewal; this
//! one runs as long from **before the region asked**, on this node's monotonic clock, so it
//! ends no later than the global tier's (a move waits out the old home's lease and
//! [`HOME_GRACE_MS`](leaf_raft_store::regions::HOME_GRACE_MS) more, for the skew between the
//! two clocks).
//!
//! Order is what makes it safe: the homes task ([`super::homes`]) adopts every move away a
//! renewal lists before it extends the lease with that renewal, and [`HomeGate::serving`]
//! reads the lease before the home. An ID that leaves under an extended lease was therefore
//! checked against a state that already knew of the move.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leaf_raft_store::regions::HOME_LEASE_MS;
use leaf_raft_store::{ApplyError, StateReader};
use tokio::time::Instant;

use super::Wanted;
use crate::profiles::monotonic::HomeGate;
use crate::raft::ProposeError;

/// The lease, and whom to tell of a tag it cannot serve.
pub struct HomeLease {
    /// Tags whose home the homes task should claim or learn again.
    homeless: Wanted,
    /// Tags whose allocation found no block, for the keeper.
    blocks: Wanted,
    base: Instant,
    /// The lease's end, in ns after `base`; 0 for none.
    until_ns: AtomicU64,
}

impl HomeLease {
    /// No lease yet.
    pub fn new(homeless: Wanted, blocks: Wanted) -> Self {
        HomeLease { homeless, blocks, base: Instant::now(), until_ns: AtomicU64::new(0) }
    }

    /// Extends the lease to [`HOME_LEASE_MS`] after `asked`, the instant before the renewal
    /// was sent (never shortens it).
    pub fn extend(&self, asked: Instant) {
        let until = asked + Duration::from_millis(HOME_LEASE_MS as u64);
        let ns = until.saturating_duration_since(self.base).as_nanos().min(u128::from(u64::MAX)) as u64;
        self.until_ns.fetch_max(ns, Ordering::AcqRel);
    }

    /// Drops the lease (this node stopped leading: the next leader renews its own).
    pub fn end(&self) {
        self.until_ns.store(0, Ordering::Release);
    }

    /// How long the lease still runs (zero once it ran out, or before the first renewal).
    pub fn remaining(&self) -> Duration {
        let until = self.until_ns.load(Ordering::Acquire);
        let now = Instant::now().saturating_duration_since(self.base).as_nanos() as u64;
        Duration::from_nanos(until.saturating_sub(now))
    }
}

impl HomeGate for HomeLease {
    fn serving(&self, state: &StateReader, tag: &str) -> Result<u32, ProposeError> {
        // The lease first, then the home (the module's docs).
        if self.remaining().is_zero() {
            self.homeless.tell(tag);
            return Err(ProposeError::Unavailable(format!(
                "this region's lease of its homes ran out, so it serves no monotonic ID of tag {tag:?} until its \
                 leader renews it with the global tier"
            )));
        }
        let here = state.region_here().map(|i| i.name);
        match (state.home(tag), here) {
            (Some(home), Some(here)) if home.region == here => Ok(home.epoch),
            // Known elsewhere: a move here is listed by the next renewal, so nothing to claim.
            (Some(home), _) => {
                Err(ProposeError::Rejected(ApplyError::NotHome { tag: tag.to_string(), home: home.region }))
            }
            (None, _) => {
                self.homeless.tell(tag);
                Err(ProposeError::Rejected(ApplyError::HomeUnknown(tag.to_string())))
            }
        }
    }

    fn no_block(&self, tag: &str) {
        self.blocks.tell(tag);
    }
}
