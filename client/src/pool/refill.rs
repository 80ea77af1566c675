//! The background task of one tag: leases ranges ahead of use, adapts their size, retries
//! failed leases with backoff, and retires stale snowflake ranges.
//!
//! One task per tag, one lease in flight at a time. It sleeps until woken (a prefetch point
//! reached, a caller found nothing, a caller freed a slot while ranges wait for one, a retry is
//! due, the tick) and then:
//! 1. retires the ranges that got too old (snowflake only, see [`super::snowflake`]), and
//!    installs ranges waiting for a slot of the buffer's ring (a lease of more ranges than
//!    free slots), waking the waiters if it did;
//! 2. leases when fewer than `depth` leases are queued behind the current range and a caller
//!    asked for one (at 10% of a lease, or with nothing left) or nothing is left. A new request
//!    (not a retry) first adapts the size to how long the previous lease lasted
//!    ([`super::sizing`]);
//! 3. when a lease returns: appends its ranges (checked first: a malformed answer is a failed
//!    lease) and wakes the waiters; or records the failure, wakes the waiters (a refused lease
//!    fails them at once) and retries after a capped exponential backoff, for as long as IDs
//!    are wanted. A failed lease hands out nothing: IDs the service allocated for it are a
//!    gap, never a duplicate.
//!
//! The task holds only a weak reference to the tag's shared state and stops when it is gone
//! (the pool and every handle dropped), dropping a lease in flight.
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::{Instant, MissedTickBehavior};

use super::handle::TagShared;
use super::sizing::{rate, Sizing};
use super::snowflake::Freshness;
use super::source::{LeaseFailure, RangeSource};
use super::stats::Counters;
use super::IdKind;
use std::sync::atomic::Ordering::Relaxed;

/// Everything the task needs, given at spawn.
pub(crate) struct Refill {
    pub shared: Weak<TagShared>,
    pub wake: Arc<Notify>,
    pub kind: IdKind,
    pub name: String,
    pub source: Arc<dyn RangeSource>,
    pub sizing: Sizing,
    pub initial: u32,
    pub depth: u64,
    pub tick: Duration,
    /// Snowflake keys only.
    pub freshness: Option<Freshness>,
    pub retry_min: Duration,
    pub retry_max: Duration,
}

/// A lease on its way: its future, size and when it was asked for.
struct InFlight<'a> {
    future: super::source::LeaseFuture<'a>,
    size: u32,
    sent: Instant,
}

/// Runs until the tag's shared state is dropped.
pub(crate) async fn run(r: Refill) {
    let Refill {
        shared: weak,
        wake,
        kind,
        name,
        source,
        sizing,
        initial,
        depth,
        tick,
        freshness,
        retry_min,
        retry_max,
    } = r;
    let mut timer = tokio::time::interval(tick);
    timer.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut target = sizing.clamp(initial);
    let mut next_lease: u64 = 1;
    let mut inflight: Option<InFlight<'_>> = None;
    let mut failures: u32 = 0;
    let mut retry_at: Option<Instant> = None;
    // When the previous new request was sent, and the IDs served and the callers' waits by then.
    let mut last_request: Option<(Instant, u64, u64)> = None;
    if let Some(shared) = weak.upgrade() {
        shared.counters.lease_target.store(target.into(), Relaxed);
    }
    loop {
        {
            let Some(shared) = weak.upgrade() else { return };
            let now = Instant::now();
            if let Some(cutoff) = freshness.and_then(|f| f.cutoff(now)) {
                let _books = shared.books();
                Counters::add(&shared.counters.ids_retired, shared.buffer.retire_leased_until(cutoff));
            }
            // Ranges of a long lease waiting for a slot the takers freed (they woke the task).
            if shared.buffer.top_up() {
                shared.notify_ready();
            }
            let due = !matches!(retry_at, Some(at) if now < at);
            if inflight.is_none() && due && shared.needs_lease(shared.buffer.tail_lease(), depth) {
                if failures == 0 {
                    let served = shared.served();
                    let waits = shared.counters.waits.load(Relaxed);
                    if let Some((at, served_then, waits_then)) = last_request {
                        let lasted = now.saturating_duration_since(at);
                        shared.counters.set_rate(rate(served.saturating_sub(served_then), lasted));
                        // Callers waited since the last request: the IDs ran out before the next
                        // lease came, so that lease was too small however long it "lasted" (the
                        // time includes the wait). Grow it: shrinking would starve the callers
                        // further, down to leases of one ID when a lease takes longer than
                        // `period / 2` to come back.
                        let lasted = if waits > waits_then { Duration::ZERO } else { lasted };
                        target = sizing.adapt(target, lasted);
                        shared.counters.lease_target.store(target.into(), Relaxed);
                    }
                    last_request = Some((now, served, waits));
                }
                retry_at = None;
                inflight = Some(InFlight { future: source.lease(kind, &name, target), size: target, sent: now });
            }
            // A retry time that has passed with no lease wanted (one is queued by now) wakes
            // nothing more: a passed time would wake the task at once, again and again.
            if retry_at.is_some_and(|at| now >= at) {
                retry_at = None;
            }
        }
        tokio::select! {
            result = async {
                match inflight.as_mut() {
                    Some(f) => (&mut f.future).await,
                    None => std::future::pending().await,
                }
            } => {
                let Some(InFlight { size, sent, .. }) = inflight.take() else { continue };
                let Some(shared) = weak.upgrade() else { return };
                let now = Instant::now();
                let outcome = result.and_then(|ranges| {
                    ranges
                        .validate(size.into())
                        .map_err(|e| LeaseFailure::retryable(format!("a malformed answer: {e}")))?;
                    if freshness.is_some_and(|f| f.is_stale(sent, now)) {
                        let _books = shared.books();
                        Counters::add(&shared.counters.ids_retired, size.into());
                        Counters::add(&shared.counters.ids_leased, size.into());
                        return Err(LeaseFailure::retryable(format!(
                            "a lease took {:?}: its snowflake IDs were too old to hand out",
                            now.saturating_duration_since(sent)
                        )));
                    }
                    Ok(ranges)
                });
                match outcome {
                    Ok(ranges) => {
                        let c = &shared.counters;
                        shared.credit(&ranges.ranges, size.into(), next_lease, sent);
                        next_lease += 1;
                        Counters::add(&c.leases_ok, 1);
                        c.last_lease_size.store(size.into(), Relaxed);
                        failures = 0;
                        shared.failure.store(None);
                    }
                    Err(failure) => {
                        Counters::add(&shared.counters.leases_failed, 1);
                        failures = failures.saturating_add(1);
                        retry_at = Some(now + backoff(failures, retry_min, retry_max));
                        shared.failure.store(Some(Arc::new(failure)));
                        // Still wanted: a failed prefetch is retried at `retry_at`, not once the
                        // buffer has run dry (asking for it cleared the wish).
                        shared.wanted.store(true, Relaxed);
                    }
                }
                shared.notify_ready();
            }
            _ = wake.notified() => {}
            _ = timer.tick() => {}
            _ = sleep_until_opt(retry_at) => {}
        }
    }
}

/// The wait before retry `failures` (1, 2, …): `min`, doubling, at most `max`.
fn backoff(failures: u32, min: Duration, max: Duration) -> Duration {
    min.saturating_mul(1u32 << failures.saturating_sub(1).min(20)).min(max)
}

/// Sleeps until `at`, or forever.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let (min, max) = (Duration::from_millis(50), Duration::from_secs(1));
        let waits: Vec<u64> = (1..=8).map(|n| backoff(n, min, max).as_millis() as u64).collect();
        assert_eq!(waits, vec![50, 100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(backoff(u32::MAX, min, max), max);
    }
}
