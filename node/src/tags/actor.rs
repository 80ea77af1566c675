//! The tag actor: one per tag, owning its refills, the requests waiting for one, the size of
//! its queue of spare segments and its dynamic step ([`DynamicStep`]).
//!
//! An actor runs while its tag has traffic for it. Once it has handled nothing for
//! [`SLEEP_AFTER`] and has nothing in flight, it hands what it must remember ([`Memo`]) back to
//! its handle and stops, freeing its context and mailbox (about 700 bytes each); the handle starts
//! a new one at the next refill or wait. A hot tag's actor never sleeps; a daily tag's stays up
//! for its midnight timers.
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::metrics::tag_series::TagCounters;
use actix::prelude::*;
use leaf_api::profile::DailyFormat;
use leaf_raft_store::Allocation;
use tokio::sync::oneshot;

use super::handle::TagHandle;
use super::step::DynamicStep;
use super::{AllocError, Allocator};
use crate::metrics::Metrics;
use crate::segment::{DoubleBuffer, Segment, MAX_QUEUED};

/// What the actor owns that `/cache` shows, published by the actor into its handle's slot after
/// each change (a refill at most: not per ID), and read from there by its next actor.
#[derive(Debug, Clone, Default)]
pub(super) struct ActorView {
    pub(super) initialised: bool,
    pub(super) dynamic_step: i64,
    pub(super) refill_in_flight: bool,
    pub(super) last_error: Option<String>,
}

/// Request a refill (sent once per refill by the request path).
#[derive(Message)]
#[rtype(result = "()")]
pub(super) struct Refill;

/// Wait for IDs: answered when the buffers hold IDs again or the refill failed.
#[derive(Message)]
#[rtype(result = "oneshot::Receiver<Result<(), AllocError>>")]
pub(super) struct Wait {
    pub(super) missing: u64,
}

/// A tag keeps this much of its measured consumption (or ten commit latencies, if longer)
/// committed and queued after its current segment, in segments of its step: 1 to
/// [`MAX_QUEUED`]. A segment lasting longer gets Leaf's double buffer (depth 1).
const QUEUE_AHEAD: Duration = Duration::from_secs(1);

/// Shortest window over which a tag's consumption rate is measured.
const RATE_WINDOW: Duration = Duration::from_millis(100);

/// How long an actor with nothing to do stays up before it sleeps (module doc).
pub(super) const SLEEP_AFTER: Duration = Duration::from_secs(5);

/// What a tag actor remembers across its sleeps beyond its view: Leaf's dynamic step and when
/// it last refilled (the step doubles or halves by the time between refills). The measured
/// consumption is not kept: an actor sleeps after seconds without traffic, so its next one
/// measures afresh, from a queue of one segment.
#[derive(Debug, Clone, Copy)]
pub(super) struct Memo {
    pub(super) step: DynamicStep,
    last_refill: Option<Instant>,
}

impl Memo {
    /// A tag's first actor's.
    pub(super) fn new(step: DynamicStep) -> Self {
        Memo { step, last_refill: None }
    }
}

/// What a tag actor is started with.
pub(super) struct TagActorParts {
    pub(super) tag: Arc<str>,
    pub(super) buf: Arc<DoubleBuffer>,
    pub(super) allocator: Arc<dyn Allocator>,
    pub(super) memo: Memo,
    /// The view its last actor published (its error and whether a refill ever succeeded).
    pub(super) view: ActorView,
    pub(super) metrics: Arc<Metrics>,
    pub(super) counts: TagCounters,
    /// A daily tag's ID layout: its segments of a past day are dropped at local midnight.
    pub(super) daily: Option<DailyFormat>,
    /// Its handle, where it leaves its [`Memo`] when it sleeps (weak: a handle dropped stops
    /// the actor, through its mailbox, and leaves nothing to sleep for).
    pub(super) handle: Weak<TagHandle>,
    pub(super) sleep_after: Duration,
}

/// Owns one tag's refills and dynamic step.
pub(super) struct TagActor {
    tag: Arc<str>,
    buf: Arc<DoubleBuffer>,
    allocator: Arc<dyn Allocator>,
    metrics: Arc<Metrics>,
    counts: TagCounters,
    /// The stored step and Leaf's in-memory step, doubled or halved at each refill.
    step: DynamicStep,
    last_refill: Option<Instant>,
    in_flight: bool,
    /// Largest shortfall of a waiting request: the next segment is at least this big (capped).
    wanted: u64,
    waiters: Vec<oneshot::Sender<Result<(), AllocError>>>,
    last_error: Option<String>,
    initialised: bool,
    /// Segments kept queued after `current` (see [`QUEUE_AHEAD`]). A hot tag keeps spares
    /// behind `next`, which the request path moves up without a Raft round trip or this actor,
    /// so an fsync stall or a busy actor thread has that many segments' time instead of 90% of
    /// one. Costs at most that many more segments of IDs skipped on restart.
    depth: usize,
    /// IDs installed so far; minus those still buffered, the IDs consumed.
    installed: u64,
    /// Start of the current rate window: when, and the IDs consumed by then.
    rate_mark: Option<(Instant, u64)>,
    /// IDs per second consumed over the last complete window.
    rate: f64,
    daily: Option<DailyFormat>,
    handle: Weak<TagHandle>,
    sleep_after: Duration,
    /// Messages handled, and the count at the last look for sleep.
    handled: u64,
    looked: u64,
}

impl Actor for TagActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        if self.daily.is_some() {
            self.schedule_day_switch(ctx);
        } else {
            ctx.run_interval(self.sleep_after, |act, ctx| act.sleep_if_idle(ctx));
        }
    }
}

impl TagActor {
    /// Stops this actor, its memo left with its handle, if it handled nothing since the last
    /// look, has nothing in flight, and no message is on its way: the handle counts what it
    /// sends under the lock taken here, so none can be sent between the check and the stop.
    fn sleep_if_idle(&mut self, ctx: &mut Context<Self>) {
        let quiet = self.handled == self.looked && !self.in_flight && self.waiters.is_empty();
        self.looked = self.handled;
        if !quiet {
            return;
        }
        let Some(handle) = self.handle.upgrade() else {
            ctx.stop();
            return;
        };
        if handle.put_to_sleep(&ctx.address(), self.handled, || self.memo()) {
            tracing::debug!(tag = %self.tag, "idle tag actor sleeps");
            ctx.stop();
        }
    }

    fn memo(&self) -> Memo {
        Memo { step: self.step, last_refill: self.last_refill }
    }
}

/// After a daily tag's midnight, when the actor drops segments of past days again: a leader
/// whose clock is a little behind this node's still allocates in the old day for that long
/// (the committed day is the leader's), and what it allocated then is dropped at these checks.
const DAY_SWITCH_RECHECKS: [Duration; 4] =
    [Duration::ZERO, Duration::from_secs(1), Duration::from_secs(5), Duration::from_secs(30)];

impl TagActor {
    /// Arms the timers of the next local midnight of a daily tag.
    fn schedule_day_switch(&mut self, ctx: &mut Context<Self>) {
        let Some(format) = self.daily else { return };
        let now = unix_ms();
        let Some(next) = format.day_at(now).and_then(|d| format.next_midnight_ms(d)) else { return };
        let until = Duration::from_millis(u64::try_from(next.saturating_sub(now)).unwrap_or(0));
        for (i, after) in DAY_SWITCH_RECHECKS.into_iter().enumerate() {
            ctx.run_later(until + after, move |act, ctx| {
                act.retire_past_days();
                if i + 1 == DAY_SWITCH_RECHECKS.len() {
                    act.schedule_day_switch(ctx);
                }
            });
        }
    }

    /// Drops buffered segments of days before today (this node's clock, the tag's zone).
    fn retire_past_days(&mut self) {
        let Some(format) = self.daily else { return };
        let Some(first_today) = format.day_at(unix_ms()).and_then(|d| format.compose(d, 0)) else { return };
        let dropped = self.buf.retire_below(first_today);
        if dropped > 0 {
            tracing::info!(tag = %self.tag, dropped, "a new day: dropped the rest of past days' segments");
            self.publish();
        }
    }
}

/// This node's wall clock, in Unix milliseconds (0 if it is before 1970).
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl TagActor {
    pub(super) fn new(p: TagActorParts) -> Self {
        let m = p.memo;
        // Its last actor's queue depth is not kept (see [`Memo`]): back to one segment.
        p.buf.set_depth(1);
        TagActor {
            tag: p.tag,
            buf: p.buf,
            allocator: p.allocator,
            metrics: p.metrics,
            counts: p.counts,
            step: m.step,
            last_refill: m.last_refill,
            in_flight: false,
            wanted: 0,
            waiters: Vec::new(),
            last_error: p.view.last_error,
            initialised: p.view.initialised,
            depth: 1,
            installed: 0,
            rate_mark: None,
            rate: 0.0,
            daily: p.daily,
            handle: p.handle,
            sleep_after: p.sleep_after,
            handled: 0,
            looked: 0,
        }
    }

    /// Publishes what `/cache` shows of this actor into its handle's slot (a refill at most:
    /// not per ID).
    fn publish(&self) {
        if let Some(h) = self.handle.upgrade() {
            h.set_view(ActorView {
                initialised: self.initialised,
                dynamic_step: self.step.current(),
                refill_in_flight: self.in_flight,
                last_error: self.last_error.clone(),
            });
        }
    }

    /// Starts a refill if one is due. `top_up` (filling a hot tag's queue right after a
    /// refill) keeps the step: only refills that consumption asked for move Leaf's dynamic
    /// step (see [`DynamicStep::top_up`]).
    fn refill(&mut self, ctx: &mut Context<Self>, top_up: bool) {
        if self.in_flight {
            return;
        }
        if self.buf.queued() >= self.depth && self.waiters.is_empty() {
            self.buf.refill_done();
            return;
        }
        let step = if top_up {
            self.step.top_up()
        } else {
            self.step.next(self.last_refill.map(|t| t.elapsed()), self.wanted)
        };
        self.in_flight = true;
        self.publish();
        let started = Instant::now();
        let fut = self.allocator.allocate(&self.tag, step);
        ctx.spawn(fut.into_actor(self).map(move |res, act, ctx| act.finish(res, started, ctx)));
    }

    /// Measures the consumption rate (over windows of at least [`RATE_WINDOW`]) and sets how
    /// many segments to keep queued: [`QUEUE_AHEAD`] of it (or ten commit latencies).
    fn size_queue(&mut self, commit_latency: Duration) {
        let now = Instant::now();
        let consumed = self.installed.saturating_sub(self.buf.buffered_ids());
        match self.rate_mark {
            Some((t0, c0)) if now.duration_since(t0) >= RATE_WINDOW => {
                self.rate = consumed.saturating_sub(c0) as f64 / now.duration_since(t0).as_secs_f64();
                self.rate_mark = Some((now, consumed));
            }
            Some(_) => {}
            None => self.rate_mark = Some((now, consumed)),
        }
        let ahead = QUEUE_AHEAD.max(commit_latency.saturating_mul(10)).as_secs_f64();
        let segments = (self.rate * ahead / self.step.current().max(1) as f64).ceil();
        // NaN and infinities fall to the clamp's bounds through `as`.
        self.depth = (segments as usize).clamp(1, MAX_QUEUED);
        self.buf.set_depth(self.depth);
    }

    /// Installs a committed segment; false if the buffers were full and it was skipped.
    fn install(&self, seg: Segment) -> bool {
        let view = seg.view();
        if !self.buf.install(seg) {
            tracing::warn!(tag = %self.tag, start = view.start, end = view.end, "all buffers full; segment skipped");
            return false;
        }
        tracing::debug!(tag = %self.tag, start = view.start, end = view.end, "segment installed");
        true
    }

    fn finish(&mut self, res: Result<Allocation, AllocError>, started: Instant, ctx: &mut Context<Self>) {
        self.in_flight = false;
        self.wanted = 0;
        // The range was checked against the request already; an empty one is refused again
        // here, as an error, rather than installed.
        let res = res.and_then(|a| match Segment::new(a.start, a.end) {
            Some(seg) => Ok((a, seg)),
            None => Err(AllocError::EmptySegment { start: a.start, end: a.end }),
        });
        let reply = match res {
            Ok((a, seg)) => {
                let latency = started.elapsed();
                self.metrics.observe_refill(latency.as_secs_f64());
                self.counts.refills.inc();
                self.step.set_stored(a.stored_step);
                self.last_refill = Some(Instant::now());
                self.last_error = None;
                self.initialised = true;
                // Segments are committed in order and proposals are serial, so queueing each
                // at the end keeps the buffers in increasing order.
                if self.install(seg) {
                    self.installed = self.installed.saturating_add(a.end.saturating_sub(a.start).unsigned_abs());
                }
                self.size_queue(latency);
                Ok(())
            }
            Err(e) => {
                self.counts.failures.inc();
                tracing::warn!(tag = %self.tag, error = %e, "segment refill failed");
                self.last_error = Some(e.to_string());
                Err(e)
            }
        };
        let ok = reply.is_ok();
        self.publish();
        self.buf.refill_done();
        // Taken, not drained: an idle actor keeps no capacity for waiters.
        for w in std::mem::take(&mut self.waiters) {
            let _ = w.send(reply.clone());
        }
        // Top up a hot tag's queue right away (a depth of 1 preloads by Leaf's rule instead).
        if ok && self.depth > 1 && self.buf.queued() < self.depth {
            self.refill(ctx, true);
        }
    }
}

impl Handler<Refill> for TagActor {
    type Result = ();

    fn handle(&mut self, _: Refill, ctx: &mut Context<Self>) {
        self.handled += 1;
        self.refill(ctx, false);
    }
}

impl Handler<Wait> for TagActor {
    type Result = MessageResult<Wait>;

    fn handle(&mut self, msg: Wait, ctx: &mut Context<Self>) -> Self::Result {
        self.handled += 1;
        let (tx, rx) = oneshot::channel();
        if self.buf.has_ids() {
            let _ = tx.send(Ok(()));
            if self.buf.refill_requested() {
                // The waiter set the refill flag; honour it as a preload.
                self.refill(ctx, false);
            }
        } else {
            self.wanted = self.wanted.max(msg.missing);
            self.waiters.push(tx);
            self.refill(ctx, false);
        }
        MessageResult(rx)
    }
}
