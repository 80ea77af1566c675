//! The forecasts' arithmetic: the rate estimator (steady, lumpy, burst, idle, edges), IDs left
//! and time to exhaustion at the ends of the `i64` range, the snowflake epoch and worker IDs.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use leaf_raft_store::{WorkerRecord, WORKER_IDS};
use proptest::prelude::*;

use super::*;
use crate::snowflake::generator::Layout;

const WINDOW: Duration = Duration::from_secs(900);
const EVERY: Duration = Duration::from_secs(10);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

/// An estimator fed `samples` samples, `EVERY` apart, `per_sample` IDs each, from `max_id` 1;
/// returns it and the time and `max_id` of its last sample.
fn steady(samples: u64, per_sample: i64) -> (RateEstimator, Duration, i64) {
    let mut e = RateEstimator::new(WINDOW);
    let (mut t, mut m) = (Duration::ZERO, 1);
    e.observe(t, m);
    for _ in 1..samples {
        t += EVERY;
        m += per_sample;
        e.observe(t, m);
    }
    (e, t, m)
}

#[test]
fn no_rate_until_two_samples_some_time_apart() {
    let mut e = RateEstimator::new(WINDOW);
    assert_eq!(e.rate(), None);
    e.observe(secs(5), 100);
    assert_eq!(e.rate(), None);
    // The same instant again (or an earlier one) is no interval: still none, and the base stays.
    e.observe(secs(5), 150);
    e.observe(secs(4), 170);
    assert_eq!(e.rate(), None);
    e.observe(secs(15), 200);
    // 100 IDs over the 10 s since the base sample: nothing was lost to the ignored ones.
    assert_eq!(e.rate(), Some(10.0));
    assert_eq!(exhausted_in_secs(ids_left(200, LAST_ID), None), None);
}

#[test]
fn a_steady_rate_is_reported_exactly() {
    // Five windows of 100 IDs per second.
    let (e, _, _) = steady(5 * 90 + 1, 1000);
    let r = e.rate().unwrap();
    assert!(close(r, 100.0, 1e-9), "{r}");
    // Before the window fills too: the plain average, no bias towards zero.
    let (e, _, _) = steady(3, 1000);
    assert!(close(e.rate().unwrap(), 100.0, 1e-12));
}

#[test]
fn segments_average_out_over_the_window() {
    // 100 IDs/s allocated as a 10,000-ID segment every 100 s (every tenth sample).
    let mut e = RateEstimator::new(WINDOW);
    let mut m = 1;
    let mut lo = f64::MAX;
    let mut hi = 0.0f64;
    for i in 0..=2000u64 {
        if i % 10 == 0 && i > 0 {
            m += 10_000;
        }
        e.observe(EVERY * i as u32, m);
        if i > 900 {
            let r = e.rate().unwrap();
            lo = lo.min(r);
            hi = hi.max(r);
        }
    }
    // A sawtooth around 100 within about ±6%: one segment over a 900 s window.
    assert!(lo > 93.0 && hi < 107.0, "rate between {lo} and {hi}");
}

#[test]
fn one_large_segment_does_not_spike_the_rate() {
    // Eleven windows of 100 IDs/s: the sums are full.
    let (mut e, t, m) = steady(1000, 1000);
    e.observe(t + EVERY, m + 1_000_000);
    let r = e.rate().unwrap();
    // Over the 10 s interval alone that is 100,000 IDs/s; the window spreads it over ~900 s.
    assert!(r > 100.0 + 1_000_000.0 / 910.0 && r < 100.0 + 1_000_000.0 / 900.0, "{r}");
}

#[test]
fn an_idle_tag_decays_with_the_window() {
    let (mut e, mut t, m) = steady(1000, 1000);
    for _ in 0..90 {
        t += EVERY;
        e.observe(t, m);
    }
    // One window of idleness: 1/e of the rate.
    let r = e.rate().unwrap();
    assert!(close(r, 100.0 / std::f64::consts::E, 1e-4), "{r}");
    for _ in 0..90 * 40 {
        t += EVERY;
        e.observe(t, m);
    }
    let r = e.rate().unwrap();
    assert!(r > 0.0 && r < 1e-15, "{r}");
    // Still a finite forecast, only a very long one.
    let left = ids_left(m, LAST_ID);
    assert!(exhausted_in_secs(left, Some(r)).unwrap() > 1_000_000_000_000_000);
}

#[test]
fn a_falling_max_id_skips_the_interval() {
    let (mut e, t, _) = steady(10, 1000);
    let before = e.rate();
    e.observe(t + EVERY, 5);
    assert_eq!(e.rate(), before);
    // The low value is the new base.
    e.observe(t + EVERY * 2, 1005);
    assert!(e.rate().unwrap() > 0.0);
}

#[test]
fn the_whole_i64_range_is_handled() {
    let mut e = RateEstimator::new(WINDOW);
    e.observe(secs(0), i64::MIN);
    e.observe(secs(1), i64::MAX);
    let r = e.rate().unwrap();
    assert!(close(r, 2f64.powi(64), 1e-12), "{r}");
    // A zero window is clamped, not a division by zero.
    let mut e = RateEstimator::new(Duration::ZERO);
    e.observe(secs(0), 0);
    e.observe(secs(1), 10);
    assert_eq!(e.rate(), Some(10.0));
}

#[test]
fn ids_left_near_the_end_of_the_range() {
    assert_eq!(ids_left(1, LAST_ID), (i64::MAX - 1) as u64);
    assert_eq!(ids_left(i64::MAX - 2, LAST_ID), 2);
    assert_eq!(ids_left(i64::MAX - 1, LAST_ID), 1);
    // The last segment ended at i64::MAX (exclusive): nothing left.
    assert_eq!(ids_left(i64::MAX, LAST_ID), 0);
    // A lower limit (an upper bound) already passed.
    assert_eq!(ids_left(1000, 99), 0);
    assert_eq!(ids_left(100, 99), 0);
    assert_eq!(ids_left(99, 99), 1);
    // 2^64 IDs do not fit a u64: saturated.
    assert_eq!(ids_left(i64::MIN, i64::MAX), u64::MAX);
    assert_eq!(ids_left(i64::MAX, i64::MIN), 0);
}

#[test]
fn time_to_exhaustion() {
    // Nothing left: exhausted now, whatever the rate.
    assert_eq!(exhausted_in_secs(0, None), Some(0));
    assert_eq!(exhausted_in_secs(0, Some(0.0)), Some(0));
    assert_eq!(exhausted_in_secs(0, Some(f64::NAN)), Some(0));
    // Unknown, idle or nonsense rates: no forecast.
    for r in [None, Some(0.0), Some(-1.0), Some(f64::NAN), Some(f64::INFINITY), Some(f64::NEG_INFINITY)] {
        assert_eq!(exhausted_in_secs(10, r), None, "{r:?}");
    }
    assert_eq!(exhausted_in_secs(10, Some(3.0)), Some(4));
    assert_eq!(exhausted_in_secs(10, Some(5.0)), Some(2));
    assert_eq!(exhausted_in_secs(1, Some(1e9)), Some(1));
    // Saturates instead of overflowing.
    assert_eq!(exhausted_in_secs(u64::MAX, Some(1e-300)), Some(u64::MAX));
    assert_eq!(exhausted_in_secs(u64::MAX, Some(f64::MIN_POSITIVE)), Some(u64::MAX));
    assert_eq!(exhausted_in_secs(u64::MAX, Some(1.0)), Some(u64::MAX));
}

#[test]
fn snowflake_years_left() {
    const EPOCH: i64 = 1_288_834_974_657;
    let l = Layout { epoch_ms: EPOCH };
    let whole = epoch_years_left(l, EPOCH);
    assert!((69.68..69.70).contains(&whole), "{whole}");
    // 2024-01-01T00:00:00Z: the default epoch ends in July 2080, 56.5 years later.
    let y = epoch_years_left(l, 1_704_067_200_000);
    assert!((56.5..56.8).contains(&y), "{y}");
    // The last expressible millisecond leaves one, after it none.
    assert!(epoch_years_left(l, l.max_ms()) > 0.0);
    assert_eq!(epoch_years_left(l, l.max_ms() + 1), 0.0);
    assert_eq!(epoch_years_left(l, i64::MAX), 0.0);
    assert!(epoch_years_left(l, i64::MIN).is_finite());
    // An epoch at the end of time saturates in the layout (its last millisecond is i64::MAX).
    let y = epoch_years_left(Layout { epoch_ms: i64::MAX }, i64::MAX);
    assert!(y > 0.0 && y < 1e-10, "{y}");
}

fn worker(node_id: u64, lease_expires_ms: i64) -> WorkerRecord {
    WorkerRecord { node_id, high_water_ms: 0, lease_expires_ms, lease_ms: 60_000, since_ms: 0, previous_node_id: None }
}

#[test]
fn free_worker_ids_count_the_reclaimable_ones_as_free() {
    use crate::config::WorkerIds;
    let members: BTreeSet<u64> = [1, 2].into();
    let now = 1_000_000;
    let every = WorkerIds::ALL;
    assert_eq!(free_worker_ids(&BTreeMap::new(), &members, now, every), WORKER_IDS);
    let held: BTreeMap<u16, WorkerRecord> = [
        // A member's: held even with its lease run out (it may renew).
        (0, worker(1, 0)),
        // A departed node whose lease ran out more than a lease ago: reclaimable.
        (1, worker(7, now - 60_001)),
        // A departed node still within its lease and the grace after it: held.
        (600, worker(8, now - 60_000)),
    ]
    .into();
    assert_eq!(free_worker_ids(&held, &members, now, every), WORKER_IDS - 2);
    // Only the configured range counts (old Leaf servers own the rest).
    let upper: WorkerIds = "512-1023".parse().unwrap();
    assert_eq!(free_worker_ids(&held, &members, now, upper), 511);
    let all: BTreeMap<u16, WorkerRecord> = (0..WORKER_IDS).map(|i| (i, worker(2, now))).collect();
    assert_eq!(free_worker_ids(&all, &members, now, every), 0);
}

proptest! {
    /// A constant rate sampled at any intervals is reported as that rate; any samples give a
    /// finite, non-negative rate and a forecast that does not panic.
    #[test]
    fn the_rate_of_any_samples_is_sound(
        per_ms in 0u32..1_000_000,
        gaps in proptest::collection::vec(1u64..200_000, 1..60),
        noise in proptest::collection::vec(any::<i64>(), 1..30),
        window_secs in 1u64..100_000,
    ) {
        let mut e = RateEstimator::new(Duration::from_secs(window_secs));
        let (mut t, mut m) = (0u64, 0i64);
        e.observe(Duration::from_millis(t), m);
        for g in &gaps {
            t += g;
            m += i64::from(per_ms) * *g as i64;
            e.observe(Duration::from_millis(t), m);
        }
        let r = e.rate().unwrap();
        let want = f64::from(per_ms) * 1000.0;
        prop_assert!((r - want).abs() <= 1e-6 * want.max(1.0), "rate {r}, want {want}");

        let mut e = RateEstimator::new(Duration::from_secs(window_secs));
        for (i, m) in noise.iter().enumerate() {
            e.observe(Duration::from_secs(i as u64), *m);
            if let Some(r) = e.rate() {
                prop_assert!(r.is_finite() && r >= 0.0, "rate {r}");
            }
            let _ = exhausted_in_secs(ids_left(*m, LAST_ID), e.rate());
        }
    }
}

#[test]
fn the_limit_follows_the_upper_bound_and_a_daily_tags_day() {
    use leaf_raft_store::StoredProfile;
    let plain = TagRecord::plain(10, 0, 0, 0);
    assert_eq!(last_id(&plain), LAST_ID);
    let bounded = plain.clone().with_upper_bound(Some(leaf_api::profile::JS_SAFE_MAX));
    assert_eq!(ids_left(bounded.max_id, last_id(&bounded)), (leaf_api::profile::JS_SAFE_MAX - 9) as u64);
    let format = leaf_api::profile::DailyFormat { digits: 4, utc_offset_minutes: 0 };
    let daily = plain.with_profile(StoredProfile::Daily { format, day: 20261123 });
    // Counters 10..=9999 are left today.
    assert_eq!(ids_left(daily.max_id, last_id(&daily)), 9990);
}
