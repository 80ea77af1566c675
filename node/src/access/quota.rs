//! Per-token request quotas on this node: a token bucket as GCRA (the generic cell rate
//! algorithm), one `AtomicU64` a token, updated with compare-and-swap: no lock on the request
//! path. A bucket refills `rate_per_sec` requests a second and holds at most `burst`.
//!
//! The limit is per node: a client that spreads its calls over three nodes may make up to three
//! times the rate (documented with the token endpoints).
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leaf_api::tokens::Quota;

/// One token's bucket. Time is nanoseconds on a monotonic clock the caller passes in.
#[derive(Debug)]
pub struct Gcra {
    /// The theoretical arrival time: when the bucket is full again.
    tat: AtomicU64,
    /// Nanoseconds one request costs (1 / rate).
    interval: u64,
    /// How far `tat` may run ahead of now: `(burst − 1) × interval`.
    tolerance: u64,
}

impl Gcra {
    pub fn new(q: Quota) -> Self {
        let interval = 1_000_000_000 / u64::from(q.rate_per_sec.max(1));
        Gcra { tat: AtomicU64::new(0), interval, tolerance: u64::from(q.burst.max(1) - 1) * interval }
    }

    /// A bucket of `per_sec` units a second holding at most `burst` (each at least 1).
    pub fn per_sec(per_sec: u32, burst: u32) -> Self {
        Gcra::new(Quota { rate_per_sec: per_sec, burst })
    }

    /// Takes one request at time `now_ns`; refused with how long to wait until one is allowed.
    #[cfg(test)]
    pub fn take(&self, now_ns: u64) -> Result<(), Duration> {
        self.take_n(now_ns, 1)
    }

    /// Takes `n` units (at least 1) at once at time `now_ns`: all or none; refused with how long
    /// to wait until they are allowed (never, if `n` is above the burst: the caller bounds it).
    #[cfg(test)]
    pub fn take_n(&self, now_ns: u64, n: u64) -> Result<(), Duration> {
        self.take_n_by(|| now_ns, n)
    }

    /// Whether the bucket is full at `now_ns`: its caller has waited long enough that
    /// forgetting it forgives nothing.
    pub fn is_full_at(&self, now_ns: u64) -> bool {
        self.tat.load(Ordering::Relaxed) <= now_ns
    }

    /// [`Gcra::take_n`] at the time `clock` reads. Before refusing, the clock is read once
    /// more: a thread preempted between reading it and updating the bucket (a millisecond is
    /// common on a busy machine) would otherwise judge other threads' later takes against its
    /// stale time and refuse although the bucket has room, which a large rate with a burst of
    /// a millisecond's worth turns into spurious refusals.
    pub fn take_n_by(&self, clock: impl Fn() -> u64, n: u64) -> Result<(), Duration> {
        let n = n.max(1);
        let mut now_ns = clock();
        let mut read_again = true;
        let mut tat = self.tat.load(Ordering::Relaxed);
        loop {
            let base = tat.max(now_ns);
            // As far ahead as the bucket would be before the last of the `n` units.
            let ahead = (base - now_ns).saturating_add((n - 1).saturating_mul(self.interval));
            if ahead > self.tolerance {
                if std::mem::take(&mut read_again) {
                    now_ns = now_ns.max(clock());
                    tat = self.tat.load(Ordering::Relaxed);
                    continue;
                }
                return Err(Duration::from_nanos(ahead - self.tolerance));
            }
            let next = base.saturating_add(n.saturating_mul(self.interval));
            match self.tat.compare_exchange_weak(tat, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(now) => tat = now,
            }
        }
    }
}

/// Whole seconds for a `Retry-After` header: at least one.
pub fn retry_after_secs(wait: Duration) -> u64 {
    wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn a_burst_then_the_rate() {
        let g = Gcra::new(Quota { rate_per_sec: 10, burst: 5 });
        let t0 = 1_000 * SEC;
        for i in 0..5 {
            assert!(g.take(t0).is_ok(), "request {i} of the burst");
        }
        let wait = g.take(t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(100));
        assert_eq!(retry_after_secs(wait), 1);
        // One more every 100 ms.
        assert!(g.take(t0 + SEC / 10).is_ok());
        assert!(g.take(t0 + SEC / 10).is_err());
        // After a quiet second the bucket is full again, and no fuller.
        let t1 = t0 + 2 * SEC;
        for _ in 0..5 {
            assert!(g.take(t1).is_ok());
        }
        assert!(g.take(t1).is_err());
    }

    #[test]
    fn a_burst_of_one_spaces_requests() {
        let g = Gcra::new(Quota { rate_per_sec: 1, burst: 1 });
        assert!(g.take(5 * SEC).is_ok());
        assert_eq!(g.take(5 * SEC + SEC / 2), Err(Duration::from_millis(500)));
        assert!(g.take(6 * SEC).is_ok());
    }

    #[test]
    fn threads_never_take_more_than_the_bucket_holds() {
        let g = std::sync::Arc::new(Gcra::new(Quota { rate_per_sec: 1, burst: 1000 }));
        let now = 50 * SEC;
        let taken: usize = (0..4)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || (0..1000).filter(|_| g.take(now).is_ok()).count())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!(taken, 1000);
    }

    #[test]
    fn units_are_taken_all_or_none() {
        // 1,000 a second, at most 5,000 at once.
        let g = Gcra::per_sec(1000, 5000);
        let t0 = 1_000 * SEC;
        assert!(g.take_n(t0, 5000).is_ok(), "the whole burst in one take");
        assert_eq!(g.take_n(t0, 1), Err(Duration::from_millis(1)));
        // Half a second later, 500 are back: 500 fit, 501 do not (and take nothing).
        let t1 = t0 + SEC / 2;
        assert_eq!(g.take_n(t1, 501), Err(Duration::from_millis(1)));
        assert!(g.take_n(t1, 500).is_ok());
        assert!(g.take_n(t1, 1).is_err());
        // More than the burst never fits.
        let fresh = Gcra::per_sec(1000, 5000);
        assert!(fresh.take_n(t0, 5001).is_err());
        assert!(fresh.take_n(t0, 5000).is_ok());
    }

    #[test]
    fn a_time_read_before_a_preemption_is_read_again_before_refusing() {
        // A billion a second, a million at once: a millisecond of tolerance.
        let g = Gcra::per_sec(1_000_000_000, 1_000_000);
        let t0 = 1_000 * SEC;
        let t1 = t0 + SEC / 200;
        // Another thread took at t1; this one read the clock at t0, then was preempted.
        assert!(g.take_n(t1, 1).is_ok());
        let reads = std::cell::Cell::new(0);
        let clock = || {
            reads.set(reads.get() + 1);
            if reads.get() == 1 {
                t0
            } else {
                t1
            }
        };
        assert!(g.take_n_by(clock, 1).is_ok(), "refused on a stale time");
        assert_eq!(reads.get(), 2);
        // A bucket that is truly over is refused after one more read, not read forever.
        let full = Gcra::per_sec(1, 1);
        assert!(full.take_n(t1, 1).is_ok());
        let reads = std::cell::Cell::new(0);
        let moving = || {
            reads.set(reads.get() + 1);
            t1 + reads.get()
        };
        assert!(full.take_n_by(moving, 1).is_err());
        assert_eq!(reads.get(), 2);
    }

    #[test]
    fn retry_after_rounds_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(2)), 2);
        assert_eq!(retry_after_secs(Duration::from_millis(2001)), 3);
    }
}
