//! Snowflake IDs through the pool: batched prefetch with a freshness bound.
//!
//! A snowflake ID carries the time it was made, so a buffered one grows old. The pool bounds
//! that: **no ID is handed out from a range more than `max_staleness` after the request that
//! leased it was sent** (the service made the IDs after that moment), plus however late the
//! tokio runtime runs the tag's refill task. An ID from the pool is thus at most
//! `max_staleness` (+ that lateness) older than one fetched directly at the same moment.
//!
//! The fast path never reads the clock. The refill task retires ranges instead, on a timer
//! ticking every `tick` (< `max_staleness`) and whenever it wakes: it retires every range whose
//! age is at least `max_staleness − tick`, so a range is retired at the latest by the first
//! tick after that age, i.e. by age `max_staleness`. A lease whose answer arrives already that
//! old is dropped unused. Retired IDs are counted (`ids_retired`), never handed out.
//!
//! Snowflake leases aim to last `min(lease_period, max_staleness / 2)` so that few IDs are
//! retired in steady state.
use std::time::Duration;

use tokio::time::Instant;

/// The freshness bound of one snowflake key's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Freshness {
    pub max_staleness: Duration,
    pub tick: Duration,
}

impl Freshness {
    /// Ranges leased at or before this moment are retired now (`None`: none can be yet).
    pub fn cutoff(&self, now: Instant) -> Option<Instant> {
        now.checked_sub(self.max_staleness.saturating_sub(self.tick))
    }

    /// Whether a range leased at `leased_at` must not be handed out any more at `now`.
    pub fn is_stale(&self, leased_at: Instant, now: Instant) -> bool {
        self.cutoff(now).is_some_and(|cutoff| leased_at <= cutoff)
    }

    /// How long a snowflake lease should last.
    pub fn lease_period(&self, lease_period: Duration) -> Duration {
        lease_period.min(self.max_staleness / 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_stale_one_tick_before_max_staleness() {
        let f = Freshness { max_staleness: Duration::from_millis(1000), tick: Duration::from_millis(100) };
        let t0 = Instant::now();
        assert!(!f.is_stale(t0, t0));
        assert!(!f.is_stale(t0, t0 + Duration::from_millis(899)));
        assert!(f.is_stale(t0, t0 + Duration::from_millis(900)));
        assert!(f.is_stale(t0, t0 + Duration::from_secs(5)));
        // Checked every tick, a range leased at t0 is retired by t0 + max_staleness at the latest.
        for phase in 0..100 {
            let mut tick = t0 + Duration::from_millis(phase);
            while !f.is_stale(t0, tick) {
                tick += f.tick;
            }
            assert!(tick <= t0 + f.max_staleness);
        }
        assert_eq!(f.lease_period(Duration::from_secs(1)), Duration::from_millis(500));
        assert_eq!(f.lease_period(Duration::from_millis(200)), Duration::from_millis(200));
    }
}
