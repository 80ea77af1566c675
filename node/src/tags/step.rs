//! Leaf's dynamic step, as a pure type: no clock is read here, the caller passes the time since
//! the previous refill.
//!
//! Leaf's rule, at each refill that consumption asked for:
//! - refilled again within `double_below` → the step doubles, unless that would pass the cap;
//! - within `halve_after` → the step stays;
//! - later → the step halves, unless that would go below the stored step.
//!
//! The cap is `max_step`, or the tag's stored step when that is larger; the step never goes
//! below the stored step. A waiting batch larger than the step gets one segment big enough
//! for it (capped the same way) without moving the step. No segment is larger than
//! [`MAX_STEP`].
use std::time::Duration;

use leaf_api::tag::MAX_STEP;

use crate::config::SegmentConfig;

/// The dynamic-step settings (from `[segment]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepPolicy {
    /// Cap of the doubling (Leaf's `MAX_STEP`); a larger stored step is its own cap.
    pub max_step: i64,
    /// A refill sooner than this after the previous one doubles the step.
    pub double_below: Duration,
    /// A refill this long or longer after the previous one halves the step.
    pub halve_after: Duration,
}

impl StepPolicy {
    pub fn new(cfg: &SegmentConfig) -> Self {
        StepPolicy {
            max_step: cfg.max_step,
            double_below: Duration::from_secs(cfg.double_below_secs),
            halve_after: Duration::from_secs(cfg.halve_after_secs),
        }
    }
}

/// One tag's step: the stored step (the floor) and Leaf's in-memory dynamic step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DynamicStep {
    policy: StepPolicy,
    stored: i64,
    current: i64,
}

impl DynamicStep {
    /// A tag just loaded: the dynamic step starts at the stored step.
    pub fn new(policy: StepPolicy, stored: i64) -> Self {
        DynamicStep { policy, stored, current: stored }
    }

    /// The dynamic step as it stands (shown in `/cache`).
    pub fn current(&self) -> i64 {
        self.current
    }

    /// The stored step, the floor of the dynamic step.
    #[cfg(test)]
    pub fn stored(&self) -> i64 {
        self.stored
    }

    /// The largest the dynamic step (or a waiting batch's segment) may become.
    pub fn cap(&self) -> i64 {
        self.policy.max_step.max(self.stored)
    }

    /// A refill that consumption asked for: moves the dynamic step by Leaf's rule, given the
    /// time since the previous refill (`None`: the first refill), and returns the size of the
    /// segment to request, at least `wanted` (a waiting batch's shortfall) within the cap.
    pub fn next(&mut self, since_last: Option<Duration>, wanted: u64) -> i64 {
        let cap = self.cap();
        let mut step = self.current;
        if let Some(since) = since_last {
            if since < self.policy.double_below {
                if let Some(doubled) = step.checked_mul(2).filter(|&d| d <= cap) {
                    step = doubled;
                }
            } else if since >= self.policy.halve_after && step / 2 >= self.stored {
                step /= 2;
            }
        }
        self.current = step.max(self.stored);
        let wanted = i64::try_from(wanted).unwrap_or(MAX_STEP).min(cap);
        self.current.max(wanted).min(MAX_STEP)
    }

    /// A top-up (filling a hot tag's queue right after a refill) keeps the step: only refills
    /// that consumption asked for move it, or a burst of top-ups would double it once per
    /// queued segment.
    pub fn top_up(&self) -> i64 {
        self.current.max(self.stored).min(MAX_STEP)
    }

    /// The stored step as a committed allocation reported it (an admin may have changed it):
    /// the new floor, which also lifts the dynamic step.
    pub fn set_stored(&mut self, stored: i64) {
        self.stored = stored;
        self.current = self.current.max(stored);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DOUBLE: Duration = Duration::from_secs(900);
    const HALVE: Duration = Duration::from_secs(1800);

    fn policy(max_step: i64) -> StepPolicy {
        StepPolicy { max_step, double_below: DOUBLE, halve_after: HALVE }
    }

    fn step(max_step: i64, stored: i64, current: i64) -> DynamicStep {
        DynamicStep { policy: policy(max_step), stored, current }
    }

    const SOON: Option<Duration> = Some(Duration::from_secs(1));
    const BETWEEN: Option<Duration> = Some(Duration::from_secs(1000));
    const LATE: Option<Duration> = Some(Duration::from_secs(2000));

    #[test]
    fn the_policy_comes_from_the_segment_config() {
        let p = StepPolicy::new(&SegmentConfig::default());
        assert_eq!(p, StepPolicy { max_step: 1_000_000, double_below: DOUBLE, halve_after: HALVE });
    }

    #[test]
    fn the_first_refill_keeps_the_stored_step() {
        let mut s = DynamicStep::new(policy(1000), 10);
        assert_eq!(s.next(None, 0), 10);
        assert_eq!((s.current(), s.stored()), (10, 10));
    }

    #[test]
    fn a_refill_within_double_below_doubles() {
        let mut s = step(1000, 10, 10);
        assert_eq!(s.next(SOON, 0), 20);
        assert_eq!(s.next(SOON, 0), 40);
        assert_eq!(s.current(), 40);
        // Just below the threshold still doubles.
        assert_eq!(s.next(Some(DOUBLE - Duration::from_nanos(1)), 0), 80);
    }

    #[test]
    fn doubling_stops_below_the_cap_rather_than_passing_it() {
        let mut s = step(100, 10, 40);
        assert_eq!(s.next(SOON, 0), 80);
        // 160 would pass the cap of 100: the step stays at 80 (it is not clipped to the cap).
        assert_eq!(s.next(SOON, 0), 80);
        let mut s = step(100, 10, 50);
        assert_eq!(s.next(SOON, 0), 100, "exactly the cap is allowed");
        assert_eq!(s.next(SOON, 0), 100);
    }

    #[test]
    fn a_stored_step_above_max_step_is_its_own_cap() {
        let mut s = step(100, 500, 500);
        assert_eq!(s.cap(), 500);
        assert_eq!(s.next(SOON, 0), 500, "no doubling past the stored step's cap");
        assert_eq!(s.next(None, 10_000), 500, "a waiting batch is capped by it too");
    }

    #[test]
    fn a_refill_between_the_thresholds_keeps_the_step() {
        let mut s = step(1000, 10, 80);
        assert_eq!(s.next(BETWEEN, 0), 80);
        assert_eq!(s.next(Some(DOUBLE), 0), 80, "double_below itself no longer doubles");
        assert_eq!(s.current(), 80);
    }

    #[test]
    fn a_late_refill_halves_but_never_below_the_stored_step() {
        let mut s = step(1000, 10, 80);
        assert_eq!(s.next(LATE, 0), 40);
        assert_eq!(s.next(Some(HALVE), 0), 20, "halve_after itself halves");
        assert_eq!(s.next(LATE, 0), 10);
        assert_eq!(s.next(LATE, 0), 10, "never below the stored step");
        // 30 / 2 = 15 < 20: kept rather than halved to the floor.
        let mut s = step(1000, 20, 30);
        assert_eq!(s.next(LATE, 0), 30);
    }

    #[test]
    fn equal_thresholds_halve_every_time() {
        let p = StepPolicy { max_step: 1000, double_below: Duration::ZERO, halve_after: Duration::ZERO };
        let mut s = DynamicStep { policy: p, stored: 10, current: 40 };
        assert_eq!(s.next(Some(Duration::ZERO), 0), 20);
        assert_eq!(s.next(Some(Duration::ZERO), 0), 10);
        assert_eq!(s.next(Some(Duration::ZERO), 0), 10);
    }

    #[test]
    fn a_waiting_batch_larger_than_the_step_gets_one_big_segment() {
        let mut s = step(1000, 10, 10);
        assert_eq!(s.next(None, 300), 300);
        assert_eq!(s.current(), 10, "the batch does not move the dynamic step");
        assert_eq!(s.next(None, 5), 10, "a smaller batch gets the step");
        assert_eq!(s.next(None, 5000), 1000, "capped by max_step");
        assert_eq!(s.next(None, u64::MAX), 1000, "a shortfall beyond i64 is capped too");
    }

    #[test]
    fn no_segment_is_larger_than_max_step_of_the_api() {
        let mut s = step(MAX_STEP, MAX_STEP, MAX_STEP);
        assert_eq!(s.next(SOON, u64::MAX), MAX_STEP);
        let mut s = step(i64::MAX, 10, i64::MAX / 2 + 1);
        assert_eq!(s.next(SOON, 0), MAX_STEP, "no overflow when doubling near i64::MAX");
    }

    #[test]
    fn a_top_up_keeps_the_step() {
        let mut s = step(1000, 10, 40);
        assert_eq!(s.top_up(), 40);
        assert_eq!(s.top_up(), 40);
        assert_eq!(s.current(), 40);
        s.set_stored(100);
        assert_eq!(s.top_up(), 100);
    }

    #[test]
    fn a_new_stored_step_lifts_the_floor_and_the_step() {
        let mut s = step(1000, 10, 40);
        s.set_stored(25);
        assert_eq!((s.stored(), s.current()), (25, 40));
        s.set_stored(60);
        assert_eq!((s.stored(), s.current()), (60, 60));
        // A lowered stored step keeps the dynamic step, which may halve down to the new floor.
        s.set_stored(5);
        assert_eq!((s.stored(), s.current()), (5, 60));
        assert_eq!(s.next(LATE, 0), 30);
    }

    proptest! {
        /// Any sequence of refills and batches: every segment lies in
        /// `[stored, min(cap, MAX_STEP)]`, and so does the dynamic step.
        #[test]
        fn the_step_stays_within_the_floor_and_the_caps(
            max_step in 1..=MAX_STEP,
            stored in 1..=MAX_STEP,
            refills in proptest::collection::vec(
                (proptest::option::of(0u64..4000), prop_oneof![Just(0u64), 0..2_000_000u64, Just(u64::MAX)]),
                1..40,
            ),
        ) {
            let mut s = DynamicStep::new(policy(max_step), stored);
            let hi = max_step.max(stored).min(MAX_STEP);
            for (since, wanted) in refills {
                let got = s.next(since.map(Duration::from_secs), wanted);
                prop_assert!((stored..=hi).contains(&got), "segment {got} outside [{stored}, {hi}]");
                prop_assert!((stored..=hi).contains(&s.current()), "step {} outside [{stored}, {hi}]", s.current());
                let w = i64::try_from(wanted).unwrap_or(i64::MAX);
                prop_assert!(got >= w.min(hi), "a batch of {wanted} got {got} within the cap {hi}");
                prop_assert!((stored..=hi).contains(&s.top_up()));
            }
        }
    }
}
