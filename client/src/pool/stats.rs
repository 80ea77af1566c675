//! The pool's metrics: relaxed atomic counters written off the fast path (by the refill task
//! and by waiting callers), and their snapshots. IDs served are not counted per ID: they are
//! what was leased minus what was retired minus what is still buffered.
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::IdKind;

/// One tag's counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub ids_leased: AtomicU64,
    pub ids_retired: AtomicU64,
    pub leases_ok: AtomicU64,
    pub leases_failed: AtomicU64,
    pub last_lease_size: AtomicU64,
    pub lease_target: AtomicU64,
    /// `f64` bits.
    pub rate: AtomicU64,
    pub waits: AtomicU64,
    pub wait_nanos: AtomicU64,
    pub exhausted: AtomicU64,
    pub rejected: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    pub fn set_rate(&self, per_sec: f64) {
        self.rate.store(per_sec.to_bits(), Relaxed);
    }

    pub fn waited(&self, d: Duration) {
        self.wait_nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// A snapshot, given the IDs still buffered and those lost by the buffer (counted as
    /// retired).
    pub fn snapshot(&self, kind: IdKind, name: &str, buffered: u64, lost: u64) -> TagStats {
        let leased = self.ids_leased.load(Relaxed);
        let retired = self.ids_retired.load(Relaxed).saturating_add(lost);
        TagStats {
            kind,
            name: name.to_string(),
            ids_served: leased.saturating_sub(retired).saturating_sub(buffered),
            ids_leased: leased,
            ids_retired: retired,
            ids_buffered: buffered,
            leases_ok: self.leases_ok.load(Relaxed),
            leases_failed: self.leases_failed.load(Relaxed),
            last_lease_size: self.last_lease_size.load(Relaxed),
            lease_target: self.lease_target.load(Relaxed),
            rate_per_sec: f64::from_bits(self.rate.load(Relaxed)),
            waits: self.waits.load(Relaxed),
            wait_time: Duration::from_nanos(self.wait_nanos.load(Relaxed)),
            exhausted: self.exhausted.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
        }
    }
}

/// A snapshot of one tag's (or snowflake key's) pool. While callers take IDs it is approximate
/// (never negative); once they are idle it is exact, even with a lease landing meanwhile: the
/// refill task moves IDs and counts them under the lock the snapshot reads under.
#[derive(Debug, Clone, PartialEq)]
pub struct TagStats {
    pub kind: IdKind,
    pub name: String,
    /// IDs handed out to the application.
    pub ids_served: u64,
    /// IDs received in successful leases.
    pub ids_leased: u64,
    /// IDs dropped unused: snowflake IDs whose range got too old, IDs left in a dropped
    /// [`LocalIds`](super::LocalIds), and any a caller paused for over a second in the middle of
    /// a take could no longer read (a gap, never a duplicate; see the buffer's module).
    pub ids_retired: u64,
    /// IDs leased and not yet handed out.
    pub ids_buffered: u64,
    pub leases_ok: u64,
    pub leases_failed: u64,
    /// IDs asked for in the last successful lease.
    pub last_lease_size: u64,
    /// The size the next lease will ask for (before this lease's adaptation).
    pub lease_target: u64,
    /// IDs per second used between the last two lease requests.
    pub rate_per_sec: f64,
    /// Calls that found nothing buffered and waited (or failed fast).
    pub waits: u64,
    /// Time spent in those waits, in total.
    pub wait_time: Duration,
    /// [`PoolError::Exhausted`](super::PoolError::Exhausted) errors returned.
    pub exhausted: u64,
    /// [`PoolError::Rejected`](super::PoolError::Rejected) errors returned.
    pub rejected: u64,
}

/// A snapshot of every tag and key of an [`IdPool`](super::IdPool), in name order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolStats {
    pub tags: Vec<TagStats>,
}

impl PoolStats {
    /// The snapshot of one tag or key.
    pub fn get(&self, kind: IdKind, name: &str) -> Option<&TagStats> {
        self.tags.iter().find(|t| t.kind == kind && t.name == name)
    }
}
