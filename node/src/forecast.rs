//! Exhaustion forecasts (issue 19), as pure types and functions: no clock is read here, the
//! caller passes the time.
//!
//! - [`RateEstimator`]: one tag's consumption rate, from samples of its `max_id` in the
//!   applied state. Every node applies the same committed allocations, so the rate is the
//!   cluster's and every node shows about the same one. It is the rate at which IDs are
//!   *allocated*: IDs committed to a node count as spent even while they sit unserved in its
//!   buffers, so it moves in steps of a segment and leads the IDs served by up to the
//!   segments buffered.
//! - [`ids_left`] and [`exhausted_in_secs`]: how many IDs a tag has left before its last ID
//!   and how long they last at that rate. The last ID is a parameter: [`LAST_ID`] for every tag
//!   today (see [`last_id`]).
//! - [`epoch_years_left`] and [`free_worker_ids`]: how long the snowflake layout and the worker
//!   IDs last.
//!
//! The [`sampler`] reads the state every `forecast.sample_interval_ms` and feeds the estimators,
//! the metrics and the views of `/cache` and `/health`.
pub mod sampler;

use std::collections::BTreeSet;
use std::time::Duration;

use leaf_raft_store::{StoredProfile, TagRecord, WorkerRecord, WORKER_IDS};

use crate::snowflake::generator::Layout;

/// The largest ID any tag may hand out today: a segment ends (exclusive) at most at
/// `i64::MAX` (`AllocateSegment` refuses to overflow), so its last ID is `i64::MAX - 1`.
pub const LAST_ID: i64 = i64::MAX - 1;

/// The largest value `record`'s counter may reach (inclusive): the one place that decides a
/// tag's limit for the forecasts. Its upper bound, or [`LAST_ID`]; for a daily tag, the last
/// counter of the day (`10^digits − 1`), so its forecast is about the current day's space.
pub fn last_id(record: &TagRecord) -> i64 {
    match &record.profile() {
        StoredProfile::Daily { format, .. } => format.counter_limit() - 1,
        _ => record.upper_bound().unwrap_or(LAST_ID),
    }
}

/// Milliseconds in a year of 365.25 days.
const MS_PER_YEAR: f64 = 365.25 * 24.0 * 3600.0 * 1000.0;

/// One tag's consumption rate: an exponentially weighted average of the IDs allocated per
/// second, from samples of the tag's `max_id`.
///
/// It keeps the sums of the IDs allocated and of the seconds elapsed, both decayed by
/// `e^(-dt/window)` at each sample, and reports their ratio. A steady rate is reported exactly;
/// one segment of `n` IDs raises the rate by about `n / window` (not `n` over the sampling
/// interval); an idle tag's rate decays towards zero with the window's time constant. Until the
/// window fills, the sums are short and the rate is the plain average since the first sample
/// (no bias towards zero). A tag whose segments last longer than the window shows a sawtooth:
/// up at each allocation, down between them.
#[derive(Debug, Clone, PartialEq)]
pub struct RateEstimator {
    window_secs: f64,
    /// The previous sample: when (from any fixed origin) and the tag's `max_id` then.
    last: Option<(Duration, i64)>,
    /// Decayed sum of the IDs allocated between samples.
    ids: f64,
    /// Decayed sum of the seconds between samples.
    secs: f64,
}

impl RateEstimator {
    /// An estimator with no sample yet; `window` is the decay's time constant (at least 1 ms).
    pub fn new(window: Duration) -> Self {
        RateEstimator { window_secs: window.as_secs_f64().max(0.001), last: None, ids: 0.0, secs: 0.0 }
    }

    /// Feeds the tag's `max_id` as read at time `at` (a monotonic time from any fixed origin).
    ///
    /// A sample no later than the previous one is ignored (the previous one stays the base,
    /// so no allocation is lost). A `max_id` below the previous one (a tag recreated, or a
    /// space that starts over) skips the interval: the rate stays, the new value is the base.
    pub fn observe(&mut self, at: Duration, max_id: i64) {
        let Some((t0, m0)) = self.last else {
            self.last = Some((at, max_id));
            return;
        };
        let Some(dt) = at.checked_sub(t0).filter(|d| !d.is_zero()) else {
            return;
        };
        self.last = Some((at, max_id));
        if max_id < m0 {
            return;
        }
        let dt = dt.as_secs_f64();
        let decay = (-dt / self.window_secs).exp();
        // Exact in i128, then rounded once: the difference of two i64 may exceed i64.
        let allocated = (i128::from(max_id) - i128::from(m0)) as f64;
        self.ids = self.ids * decay + allocated;
        self.secs = self.secs * decay + dt;
    }

    /// IDs per second; `None` until two samples some time apart.
    pub fn rate(&self) -> Option<f64> {
        (self.secs > 0.0).then(|| self.ids / self.secs).filter(|r| r.is_finite())
    }
}

/// IDs left between `max_id` (the next unallocated ID) and `last_id` (the largest the tag may
/// hand out, inclusive): `0` once `max_id` is past it. Exact over the whole `i64` range.
pub fn ids_left(max_id: i64, last_id: i64) -> u64 {
    let left = i128::from(last_id) - i128::from(max_id) + 1;
    u64::try_from(left.max(0)).unwrap_or(u64::MAX)
}

/// Seconds until `left` IDs are spent at `rate` IDs per second, rounded up: `Some(0)` when
/// none is left; `None` when the rate is unknown, zero, negative or not finite. Saturates at
/// `u64::MAX` for a vanishing rate.
pub fn exhausted_in_secs(left: u64, rate: Option<f64>) -> Option<u64> {
    if left == 0 {
        return Some(0);
    }
    let rate = rate.filter(|r| r.is_finite() && *r > 0.0)?;
    // A float-to-int `as` saturates (an infinity becomes u64::MAX); the quotient is positive.
    Some((left as f64 / rate).ceil() as u64)
}

/// Years (of 365.25 days) from `now_ms` until the snowflake `layout` runs out of
/// milliseconds (after [`Layout::max_ms`]); `0` once it has.
pub fn epoch_years_left(layout: Layout, now_ms: i64) -> f64 {
    let ms = i128::from(layout.max_ms()) + 1 - i128::from(now_ms);
    ms.max(0) as f64 / MS_PER_YEAR
}

/// Worker IDs of `range` (`snowflake.worker_ids`) a new node could register at leader time
/// `at_ms`: the range's size minus those held (a record in `workers`) and not reclaimable
/// ([`WorkerRecord::reclaimable`] with the current `members`).
pub fn free_worker_ids<'a>(
    workers: impl IntoIterator<Item = (&'a u16, &'a WorkerRecord)>,
    members: &BTreeSet<u64>,
    at_ms: i64,
    range: crate::config::WorkerIds,
) -> u16 {
    let held = workers.into_iter().filter(|(id, w)| range.contains(**id) && !w.reclaimable(at_ms, members)).count();
    let size = u16::try_from(range.count()).unwrap_or(WORKER_IDS);
    size.saturating_sub(u16::try_from(held).unwrap_or(u16::MAX))
}

#[cfg(test)]
mod tests;
