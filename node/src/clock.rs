//! Wall-clock time, read through one abstraction so tests and fault injection can move it.
//!
//! Every read of the time of day in the node goes through a [`Clock`]: snowflake timestamps,
//! high-water marks, the peer clock check, and the time the Raft leader stamps into log
//! entries. Durations (leases, timeouts) use the monotonic clock instead, which a wrong time
//! of day cannot shorten or stretch.
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> i64;
}

/// The system clock plus an adjustable offset (fault injection: `POST /admin/fault/clock`).
#[derive(Debug, Default)]
pub struct SystemClock {
    offset_ms: AtomicI64,
}

impl SystemClock {
    pub fn new(offset_ms: i64) -> Self {
        SystemClock { offset_ms: AtomicI64::new(offset_ms) }
    }

    /// Replaces the offset added to the system clock.
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::Relaxed);
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        // Before 1970 only on a broken clock; report it as 0 rather than panic.
        let sys = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        sys.saturating_add(self.offset_ms.load(Ordering::Relaxed))
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug, Default)]
pub struct ManualClock {
    now_ms: AtomicI64,
}

impl ManualClock {
    pub fn new(now_ms: i64) -> Self {
        ManualClock { now_ms: AtomicI64::new(now_ms) }
    }

    pub fn set(&self, now_ms: i64) {
        self.now_ms.store(now_ms, Ordering::SeqCst);
    }

    pub fn advance(&self, ms: i64) {
        self.now_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_moves_the_system_clock() {
        let c = SystemClock::new(0);
        let a = c.now_ms();
        c.set_offset_ms(-60_000);
        let b = c.now_ms();
        assert!((a - 60_000 - 1000..=a - 60_000 + 1000).contains(&b), "{a} {b}");
        assert_eq!(c.offset_ms(), -60_000);
    }
}
