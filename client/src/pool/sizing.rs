//! The adaptive lease size (Leaf's dynamic step, in the client): pure arithmetic.
//!
//! The refill task measures how long a lease lasted — the time from one lease request to the
//! next, which in steady state is the time the application took to use one lease (the next is
//! asked for at 10% of each) — and aims for a lease to last about `period`:
//! - lasted less than `period / 2`: double the size (the application waits less often);
//! - lasted more than `2 × period`: halve it (fewer IDs wasted if this process dies: a crashed
//!   client loses what it holds — a gap, never a duplicate);
//! - otherwise keep it;
//!
//! always within `[min, max]`. When callers had to wait since the previous request, the
//! refill task counts the lease as lasting no time (it doubles): the time then includes the
//! wait for the next lease, and halving would starve the callers further.
use std::time::Duration;

/// The bounds and aim of the lease size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// Smallest lease (≥ 1).
    pub min: u32,
    /// Largest lease (≥ `min`, ≤ [`leaf_api::tag::MAX_RANGE_BATCH`]).
    pub max: u32,
    /// How long a lease should last.
    pub period: Duration,
}

impl Sizing {
    /// The size of the next lease, given the current size and how long the last lease lasted.
    pub fn adapt(&self, current: u32, lasted: Duration) -> u32 {
        let current = self.clamp(current);
        if lasted < self.period / 2 {
            self.clamp(current.saturating_mul(2))
        } else if lasted > self.period.saturating_mul(2) {
            self.clamp(current / 2)
        } else {
            current
        }
    }

    /// `size` within `[min, max]`.
    pub fn clamp(&self, size: u32) -> u32 {
        size.max(self.min).min(self.max)
    }
}

/// IDs per second: `ids` used over `elapsed` (0 for no time).
pub fn rate(ids: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        ids as f64 / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: Sizing = Sizing { min: 10, max: 1_000_000, period: Duration::from_secs(1) };

    #[test]
    fn doubles_when_short_halves_when_long_keeps_otherwise() {
        assert_eq!(S.adapt(1000, Duration::from_millis(100)), 2000);
        assert_eq!(S.adapt(1000, Duration::from_millis(499)), 2000);
        assert_eq!(S.adapt(1000, Duration::from_millis(500)), 1000);
        assert_eq!(S.adapt(1000, Duration::from_secs(2)), 1000);
        assert_eq!(S.adapt(1000, Duration::from_millis(2001)), 500);
        assert_eq!(S.adapt(1000, Duration::from_secs(3600)), 500);
    }

    #[test]
    fn stays_within_the_bounds() {
        assert_eq!(S.adapt(800_000, Duration::ZERO), 1_000_000);
        assert_eq!(S.adapt(1_000_000, Duration::ZERO), 1_000_000);
        assert_eq!(S.adapt(15, Duration::from_secs(10)), 10);
        assert_eq!(S.adapt(10, Duration::from_secs(10)), 10);
        assert_eq!(S.adapt(0, Duration::from_secs(1)), 10);
        assert_eq!(S.adapt(u32::MAX, Duration::from_secs(1)), 1_000_000);
    }

    #[test]
    fn rate_is_ids_per_second() {
        assert_eq!(rate(500, Duration::from_millis(250)), 2000.0);
        assert_eq!(rate(500, Duration::ZERO), 0.0);
    }

    proptest! {
        #[test]
        fn adapt_is_bounded_and_moves_by_at_most_a_factor_of_two(
            min in 1u32..1000,
            extra in 0u32..1_000_000,
            current in 0u32..=u32::MAX,
            period_ms in 1u64..10_000,
            lasted_ms in 0u64..100_000,
        ) {
            let s = Sizing { min, max: min + extra, period: Duration::from_millis(period_ms) };
            let lasted = Duration::from_millis(lasted_ms);
            let c = s.clamp(current);
            let next = s.adapt(current, lasted);
            prop_assert!(next >= s.min && next <= s.max);
            prop_assert!(next <= c.saturating_mul(2) && next >= c / 2);
            // The direction follows the measurement.
            if lasted < s.period / 2 {
                prop_assert!(next >= c);
            } else if lasted > s.period * 2 {
                prop_assert!(next <= c);
            } else {
                prop_assert_eq!(next, c);
            }
        }

        #[test]
        fn repeated_short_leases_reach_max_and_long_ones_reach_min(
            min in 1u32..1000, extra in 0u32..1_000_000, start in 0u32..2_000_000,
        ) {
            let s = Sizing { min, max: min + extra, period: Duration::from_secs(1) };
            let mut up = start;
            let mut down = start;
            for _ in 0..64 {
                up = s.adapt(up, Duration::ZERO);
                down = s.adapt(down, Duration::from_secs(60));
            }
            prop_assert_eq!(up, s.max);
            prop_assert_eq!(down, s.min);
        }
    }
}
