//! Segment-mode tags: one actix actor per tag owning its refills, a [`TagHandle`] for the
//! lock-free request path, and the [`Tags`] registry.
//!
//! The request path ([`TagHandle::take`]) takes IDs straight from the tag's [`DoubleBuffer`]. It
//! messages the actor only to trigger a refill (fire and forget, once per refill) or, when both
//! buffers are empty, to wait for the refill in flight, up to `segment.wait_timeout_ms`. The
//! actor proposes `AllocateSegment` through the [`Allocator`] (Raft), installs the committed
//! segment and sizes the next one with Leaf's dynamic-step rule.
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use arc_swap::ArcSwap;
use leaf_api::tag::MAX_STEP;
use leaf_api::types::CacheEntry;
use leaf_raft_store::Allocation;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::oneshot;

use crate::config::SegmentConfig;
use crate::metrics::Metrics;
use crate::segment::{DoubleBuffer, Segment, MAX_QUEUED};

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Why a segment could not be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("tag {0:?} does not exist")]
    TagNotFound(String),
    #[error("{0}")]
    TagExhausted(String),
    #[error("segment allocation failed: {0}")]
    Unavailable(String),
    #[error("the node is shutting down")]
    ShuttingDown,
}

/// Where committed segments come from (Raft in the node, a fake in tests).
pub trait Allocator: Send + Sync + 'static {
    /// Commits `[max_id, max_id + step)` of `tag` to this node.
    fn allocate(&self, tag: &str, step: i64) -> BoxFuture<Result<Allocation, AllocError>>;
}

/// Why a request got fewer IDs than it asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TakeError {
    #[error("no committed segment for tag {tag:?} within {waited:?} (both buffers empty)")]
    NotReady { tag: String, waited: Duration },
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

/// The actix system that runs the tag actors, on its own thread.
pub struct ActorSystem {
    system: actix::System,
    arbiter: actix::ArbiterHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ActorSystem {
    pub fn start() -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name("leaf-actors".into()).spawn(move || {
            let sys = actix::System::new();
            sys.block_on(async {
                let _ = tx.send((actix::System::current(), actix::Arbiter::current()));
            });
            if let Err(e) = sys.run() {
                tracing::error!(error = %e, "actor system stopped with an error");
            }
        })?;
        let (system, arbiter) = rx.recv().map_err(|_| std::io::Error::other("actor system failed to start"))?;
        Ok(ActorSystem { system, arbiter, thread: Some(thread) })
    }

    pub fn arbiter(&self) -> &actix::ArbiterHandle {
        &self.arbiter
    }

    /// Stops every actor and joins the thread.
    pub fn stop(mut self) {
        self.system.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ActorSystem {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.system.stop();
        }
    }
}

/// What the actor owns that `/cache` shows, published by the actor after each change.
#[derive(Debug, Clone, Default)]
struct ActorView {
    initialised: bool,
    dynamic_step: i64,
    refill_in_flight: bool,
    last_error: Option<String>,
}

/// The request path's handle on one tag.
pub struct TagHandle {
    tag: String,
    buf: Arc<DoubleBuffer>,
    actor_view: Arc<ArcSwap<ActorView>>,
    addr: Addr<TagActor>,
    served: Counter,
    /// Requests that found both buffers empty (`leaf_segment_waits`).
    waits: Counter,
    wait: Duration,
}

impl TagHandle {
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// Takes `n` IDs, calling `sink(first, count)` for each increasing run. Lock-free while the
    /// buffers hold IDs; otherwise waits (bounded) for the actor's refill.
    pub async fn take(&self, n: u64, mut sink: impl FnMut(i64, u64) + Send) -> Result<(), TakeError> {
        let deadline = tokio::time::Instant::now() + self.wait;
        let mut missing = n;
        loop {
            let out = self.buf.take(missing, &mut sink);
            self.served.inc_by(missing - out.missing);
            if out.missing == 0 {
                if out.want_refill {
                    // Preload: fire and forget.
                    self.addr.do_send(Refill);
                }
                return Ok(());
            }
            // Both buffers are empty: `Wait` starts the refill, sized for what is missing.
            self.waits.inc();
            missing = out.missing;
            let not_ready = || TakeError::NotReady { tag: self.tag.clone(), waited: self.wait };
            let rx = match tokio::time::timeout_at(deadline, self.addr.send(Wait { missing })).await {
                Err(_) => return Err(not_ready()),
                Ok(Err(_)) => return Err(AllocError::ShuttingDown.into()),
                Ok(Ok(rx)) => rx,
            };
            match tokio::time::timeout_at(deadline, rx).await {
                Err(_) => return Err(not_ready()),
                Ok(Err(_)) => return Err(AllocError::ShuttingDown.into()),
                Ok(Ok(Err(e))) => return Err(e.into()),
                Ok(Ok(Ok(()))) => {}
            }
        }
    }

    /// The monitor's view of this tag (`/cache`), from the lock-free buffer and the state the
    /// actor publishes: it never messages the actor, so a `/cache` flood cannot delay refills
    /// or the snowflake lease renewals that share the actor thread.
    pub fn inspect(&self) -> CacheEntry {
        let (current, queued) = self.buf.views();
        let next = queued.first().cloned();
        let spares = queued.into_iter().skip(1).collect();
        let a = self.actor_view.load();
        CacheEntry {
            tag: self.tag.clone(),
            initialised: a.initialised,
            next_ready: next.is_some(),
            current,
            next,
            spares,
            dynamic_step: a.dynamic_step,
            refill_in_flight: a.refill_in_flight,
            last_error: a.last_error.clone(),
        }
    }
}

/// Request a refill (sent once per refill by the request path).
#[derive(Message)]
#[rtype(result = "()")]
struct Refill;

/// Wait for IDs: answered when the buffers hold IDs again or the refill failed.
#[derive(Message)]
#[rtype(result = "oneshot::Receiver<Result<(), AllocError>>")]
struct Wait {
    missing: u64,
}

/// A tag keeps this much of its measured consumption (or ten commit latencies, if longer)
/// committed and queued after its current segment, in segments of its step: 1 to
/// [`MAX_QUEUED`]. A segment lasting longer gets Leaf's double buffer (depth 1).
const QUEUE_AHEAD: Duration = Duration::from_secs(1);

/// Shortest window over which a tag's consumption rate is measured.
const RATE_WINDOW: Duration = Duration::from_millis(100);

/// Owns one tag's refills and dynamic step.
struct TagActor {
    tag: String,
    buf: Arc<DoubleBuffer>,
    /// Published for `/cache` (see [`TagHandle::inspect`]).
    view: Arc<ArcSwap<ActorView>>,
    allocator: Arc<dyn Allocator>,
    cfg: SegmentConfig,
    metrics: Arc<Metrics>,
    refills: Counter,
    failures: Counter,
    /// The tag's stored step: the floor of the dynamic step.
    stored_step: i64,
    /// Leaf's in-memory step, doubled or halved at each refill.
    dynamic_step: i64,
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
}

impl Actor for TagActor {
    type Context = Context<Self>;
}

impl TagActor {
    /// Leaf's rule: refilled again within `double_below` → double (up to the cap); within
    /// `halve_after` → keep; later → halve, never below the stored step.
    fn next_step(&mut self) -> i64 {
        let cap = self.cfg.max_step.max(self.stored_step);
        let mut step = self.dynamic_step;
        if let Some(last) = self.last_refill {
            let since = last.elapsed();
            if since < Duration::from_secs(self.cfg.double_below_secs) {
                if step.saturating_mul(2) <= cap {
                    step *= 2;
                }
            } else if since >= Duration::from_secs(self.cfg.halve_after_secs) && step / 2 >= self.stored_step {
                step /= 2;
            }
        }
        self.dynamic_step = step.max(self.stored_step);
        // A waiting batch larger than the step gets one segment big enough for it.
        let wanted = i64::try_from(self.wanted).unwrap_or(MAX_STEP).min(cap);
        self.dynamic_step.max(wanted).min(MAX_STEP)
    }

    /// Publishes what `/cache` shows of this actor (a refill at most: not per ID).
    fn publish(&self) {
        self.view.store(Arc::new(ActorView {
            initialised: self.initialised,
            dynamic_step: self.dynamic_step,
            refill_in_flight: self.in_flight,
            last_error: self.last_error.clone(),
        }));
    }

    /// Starts a refill if one is due. `top_up` (filling a hot tag's queue right after a
    /// refill) keeps the step: only refills that consumption asked for move Leaf's dynamic
    /// step, or a burst of top-ups would double it once per queued segment.
    fn refill(&mut self, ctx: &mut Context<Self>, top_up: bool) {
        if self.in_flight {
            return;
        }
        if self.buf.queued() >= self.depth && self.waiters.is_empty() {
            self.buf.refill_done();
            return;
        }
        let step = if top_up { self.dynamic_step.max(self.stored_step) } else { self.next_step() };
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
        let segments = (self.rate * ahead / self.dynamic_step.max(1) as f64).ceil();
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
            None => Err(AllocError::Unavailable(format!("refused an empty segment [{}, {})", a.start, a.end))),
        });
        let reply = match res {
            Ok((a, seg)) => {
                let latency = started.elapsed();
                self.metrics.observe_refill(latency.as_secs_f64());
                self.refills.inc();
                self.stored_step = a.stored_step;
                self.dynamic_step = self.dynamic_step.max(a.stored_step);
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
                self.failures.inc();
                tracing::warn!(tag = %self.tag, error = %e, "segment refill failed");
                self.last_error = Some(e.to_string());
                Err(e)
            }
        };
        let ok = reply.is_ok();
        self.publish();
        self.buf.refill_done();
        for w in self.waiters.drain(..) {
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
        self.refill(ctx, false);
    }
}

impl Handler<Wait> for TagActor {
    type Result = MessageResult<Wait>;

    fn handle(&mut self, msg: Wait, ctx: &mut Context<Self>) -> Self::Result {
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

/// Looks up a tag's stored step in the applied state; `None` if the tag does not exist.
pub type TagLookup = Arc<dyn Fn(&str) -> Option<i64> + Send + Sync>;

/// Registry of the tags loaded on this node. Lookups are lock-free; a tag is loaded (its actor
/// started) on its first request, if it exists in the replicated state.
#[derive(Clone)]
pub struct Tags {
    inner: Arc<TagsInner>,
}

struct TagsInner {
    map: ArcSwap<HashMap<String, Arc<TagHandle>>>,
    loading: Mutex<()>,
    arbiter: actix::ArbiterHandle,
    allocator: Arc<dyn Allocator>,
    lookup: TagLookup,
    cfg: SegmentConfig,
    metrics: Arc<Metrics>,
}

impl Tags {
    pub fn new(
        actors: &ActorSystem,
        allocator: Arc<dyn Allocator>,
        lookup: TagLookup,
        cfg: SegmentConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        Tags {
            inner: Arc::new(TagsInner {
                map: ArcSwap::default(),
                loading: Mutex::new(()),
                arbiter: actors.arbiter().clone(),
                allocator,
                lookup,
                cfg,
                metrics,
            }),
        }
    }

    /// The handle of `tag`, loading it on first use; `None` if the tag does not exist.
    pub fn get(&self, tag: &str) -> Option<Arc<TagHandle>> {
        if let Some(h) = self.inner.map.load().get(tag) {
            return Some(h.clone());
        }
        self.load(tag)
    }

    #[cold]
    fn load(&self, tag: &str) -> Option<Arc<TagHandle>> {
        let stored_step = (self.inner.lookup)(tag)?;
        let _guard = self.inner.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = self.inner.map.load().get(tag) {
            return Some(h.clone());
        }
        let i = &self.inner;
        let buf = Arc::new(DoubleBuffer::new());
        let (refills, failures) = i.metrics.refill_counters(tag);
        let actor_view =
            Arc::new(ArcSwap::from_pointee(ActorView { dynamic_step: stored_step, ..ActorView::default() }));
        let actor = TagActor {
            tag: tag.to_string(),
            buf: buf.clone(),
            view: actor_view.clone(),
            allocator: i.allocator.clone(),
            cfg: i.cfg.clone(),
            metrics: i.metrics.clone(),
            refills,
            failures,
            stored_step,
            dynamic_step: stored_step,
            last_refill: None,
            in_flight: false,
            wanted: 0,
            waiters: Vec::new(),
            last_error: None,
            initialised: false,
            depth: 1,
            installed: 0,
            rate_mark: None,
            rate: 0.0,
        };
        let addr = TagActor::start_in_arbiter(&i.arbiter, move |_| actor);
        let handle = Arc::new(TagHandle {
            tag: tag.to_string(),
            buf,
            actor_view,
            addr,
            served: i.metrics.ids_counter("segment", tag),
            waits: i.metrics.wait_counter(tag),
            wait: Duration::from_millis(i.cfg.wait_timeout_ms),
        });
        let mut map = HashMap::clone(&i.map.load());
        map.insert(tag.to_string(), handle.clone());
        i.map.store(Arc::new(map));
        tracing::info!(tag, stored_step, "tag loaded");
        Some(handle)
    }

    /// Every loaded tag, sorted by name.
    pub fn loaded(&self) -> Vec<Arc<TagHandle>> {
        let mut v: Vec<_> = self.inner.map.load().values().cloned().collect();
        v.sort_by(|a, b| a.tag.cmp(&b.tag));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    /// Hands out contiguous segments, optionally failing or stalling.
    struct FakeAllocator {
        next: AtomicI64,
        stored_step: i64,
        calls: AtomicUsize,
        steps: Mutex<Vec<i64>>,
        fail: Option<AllocError>,
        delay: Duration,
        /// Every n-th allocation takes this long instead (an fsync stall).
        stall: Option<(usize, Duration)>,
        /// Answer every allocation with `[start, start + this)` (a forged, empty range).
        forged_len: Option<i64>,
    }

    impl FakeAllocator {
        fn new(stored_step: i64) -> Self {
            FakeAllocator {
                next: AtomicI64::new(1),
                stored_step,
                calls: AtomicUsize::new(0),
                steps: Mutex::new(Vec::new()),
                fail: None,
                delay: Duration::ZERO,
                stall: None,
                forged_len: None,
            }
        }
    }

    impl Allocator for FakeAllocator {
        fn allocate(&self, _tag: &str, step: i64) -> BoxFuture<Result<Allocation, AllocError>> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
            self.steps.lock().unwrap().push(step);
            let res = match &self.fail {
                Some(e) => Err(e.clone()),
                None => {
                    let start = self.next.fetch_add(step, Ordering::SeqCst);
                    let end = start + self.forged_len.unwrap_or(step);
                    Ok(Allocation { start, end, stored_step: self.stored_step })
                }
            };
            let delay = match self.stall {
                Some((every, d)) if call.is_multiple_of(every) => d,
                _ => self.delay,
            };
            Box::pin(async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                res
            })
        }
    }

    fn setup(alloc: FakeAllocator, cfg: SegmentConfig) -> (ActorSystem, Tags, Arc<FakeAllocator>) {
        let actors = ActorSystem::start().unwrap();
        let alloc = Arc::new(alloc);
        let step = alloc.stored_step;
        let lookup: TagLookup = Arc::new(move |t| (t == "t").then_some(step));
        let tags = Tags::new(&actors, alloc.clone(), lookup, cfg, Arc::new(Metrics::new()));
        (actors, tags, alloc)
    }

    /// `n` single IDs, about one per millisecond (a paced client).
    async fn paced(h: &TagHandle, n: usize) -> Vec<i64> {
        let mut all = Vec::with_capacity(n);
        for _ in 0..n {
            all.extend(ids(h, 1).await.unwrap());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        all
    }

    async fn ids(h: &TagHandle, n: u64) -> Result<Vec<i64>, TakeError> {
        let mut v = Vec::new();
        h.take(n, |f, c| v.extend((0..c as i64).map(|i| f + i))).await?;
        Ok(v)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unknown_tag_is_none_and_known_tag_serves_in_order() {
        let (actors, tags, alloc) = setup(FakeAllocator::new(10), SegmentConfig::default());
        assert!(tags.get("nope").is_none());
        let h = tags.get("t").unwrap();
        let mut got = Vec::new();
        for _ in 0..25 {
            got.extend(ids(&h, 1).await.unwrap());
        }
        assert_eq!(got, (1..26).collect::<Vec<_>>());
        // Within 15 minutes each refill doubles the step: 10, 20, 40, ...
        let steps = alloc.steps.lock().unwrap().clone();
        assert_eq!(steps[..2], [10, 20]);
        actors.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_large_batch_gets_one_big_segment() {
        let (actors, tags, alloc) = setup(FakeAllocator::new(100), SegmentConfig::default());
        let h = tags.get("t").unwrap();
        let got = ids(&h, 100_000).await.unwrap();
        assert_eq!(got.len(), 100_000);
        assert!(got.windows(2).all(|w| w[0] < w[1]));
        // The big segment, its preload and (a fast tag) a spare: not a refill per step.
        assert!(alloc.calls.load(Ordering::SeqCst) <= 4, "a batch must not need a refill per step");
        actors.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_empty_or_inverted_range_is_refused_not_served() {
        for forged in [0, -5] {
            let mut fake = FakeAllocator::new(10);
            fake.forged_len = Some(forged);
            let cfg = SegmentConfig { wait_timeout_ms: 300, ..SegmentConfig::default() };
            let (actors, tags, _) = setup(fake, cfg);
            let h = tags.get("t").unwrap();
            match ids(&h, 1).await {
                Err(TakeError::Alloc(AllocError::Unavailable(m))) => assert!(m.contains("empty segment"), "{m}"),
                Err(TakeError::NotReady { .. }) => {}
                other => panic!("a forged range [1, {}) served: {other:?}", 1 + forged),
            }
            assert!(h.inspect().current.is_none(), "a forged range was installed");
            actors.stop();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn refill_errors_reach_the_waiter() {
        let mut fake = FakeAllocator::new(10);
        fake.fail = Some(AllocError::TagExhausted("t is exhausted".into()));
        let (actors, tags, _) = setup(fake, SegmentConfig::default());
        let h = tags.get("t").unwrap();
        assert_eq!(ids(&h, 1).await, Err(TakeError::Alloc(AllocError::TagExhausted("t is exhausted".into()))));
        let cache = h.inspect();
        assert!(!cache.initialised);
        assert!(cache.last_error.unwrap().contains("exhausted"));
        actors.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_refill_times_out_with_not_ready() {
        let mut fake = FakeAllocator::new(10);
        fake.delay = Duration::from_millis(500);
        let cfg = SegmentConfig { wait_timeout_ms: 50, ..SegmentConfig::default() };
        let (actors, tags, _) = setup(fake, cfg);
        let h = tags.get("t").unwrap();
        assert!(matches!(ids(&h, 1).await, Err(TakeError::NotReady { .. })));
        // Once the refill lands, the same handle serves again.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(ids(&h, 1).await.unwrap(), vec![1]);
        actors.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn preloading_keeps_requests_off_the_slow_path() {
        // Step 100, consumed at about one ID per millisecond: each preload has ~90 ms to land.
        let (actors, tags, alloc) = setup(FakeAllocator::new(100), SegmentConfig::default());
        let h = tags.get("t").unwrap();
        ids(&h, 1).await.unwrap();
        assert_eq!(h.waits.get(), 1, "the first request has nothing buffered and waits");
        paced(&h, 350).await;
        assert_eq!(h.waits.get(), 1, "a request waited for a refill that preloading should have made");
        assert!(alloc.steps.lock().unwrap().len() >= 3, "the run crossed several segments");
        actors.stop();
    }

    /// Step 20 consumed at one ID per 1–2 ms (a segment lasts 20–40 ms). Commits take 2 ms,
    /// but every fourth stalls for 60 ms, longer than the 90% of a segment a preload gets:
    /// with a spare segment kept ahead, the stalls no longer reach requests.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_fast_tag_keeps_a_spare_segment_so_slow_commits_do_not_reach_requests() {
        let mut fake = FakeAllocator::new(20);
        fake.delay = Duration::from_millis(2);
        fake.stall = Some((4, Duration::from_millis(60)));
        let (actors, tags, alloc) = setup(fake, SegmentConfig { max_step: 20, ..SegmentConfig::default() });
        let h = tags.get("t").unwrap();
        let all = paced(&h, 600).await;
        let waits = h.waits.get();
        assert!(alloc.steps.lock().unwrap().len() >= 25, "the run crossed many segments");
        assert!(waits <= 2, "{waits} requests waited for a refill");
        // Still strictly increasing and unique.
        assert!(all.windows(2).all(|w| w[0] < w[1]), "IDs out of order");
        actors.stop();
    }

    /// A hot tag with its queue of spares loaded, whose actor thread is then blocked for
    /// 300 ms: the request path alone serves every buffered ID, none of them waiting.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_busy_actor_thread_does_not_reach_requests_while_the_queue_lasts() {
        let mut fake = FakeAllocator::new(20);
        fake.delay = Duration::from_millis(1);
        let (actors, tags, _) = setup(fake, SegmentConfig { max_step: 20, ..SegmentConfig::default() });
        let h = tags.get("t").unwrap();
        let mut all = paced(&h, 300).await;
        // Let the refills settle: a segment lasts well under a second, so spares are queued.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while h.buf.queued() < 2 || h.buf.refill_requested() {
            assert!(tokio::time::Instant::now() < deadline, "no spares were queued");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let waits = h.waits.get();
        // Block the actors' thread (as a long handler or a starved thread would).
        let blocked = Arc::new(std::sync::Barrier::new(2));
        let b = blocked.clone();
        assert!(actors.arbiter().spawn(async move {
            b.wait();
            std::thread::sleep(Duration::from_millis(300));
        }));
        blocked.wait();
        // `/cache` does not message the actor: it answers while the actor thread is blocked.
        let view = h.inspect();
        assert!(view.initialised && view.current.is_some() && view.next_ready, "{view:?}");
        let buffered = h.buf.buffered_ids();
        assert!(buffered > 20, "more than a segment buffered: {buffered}");
        for _ in 0..buffered {
            all.extend(ids(&h, 1).await.unwrap());
        }
        assert_eq!(h.waits.get(), waits, "a request waited for the blocked actor");
        assert!(all.windows(2).all(|w| w[0] < w[1]), "IDs out of order");
        actors.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn step_halves_after_a_long_pause_but_not_below_stored() {
        let cfg = SegmentConfig { double_below_secs: 0, halve_after_secs: 0, ..SegmentConfig::default() };
        let (actors, tags, alloc) = setup(FakeAllocator::new(10), cfg);
        let h = tags.get("t").unwrap();
        for _ in 0..200 {
            ids(&h, 1).await.unwrap();
        }
        let steps = alloc.steps.lock().unwrap().clone();
        assert!(steps.iter().all(|&s| s == 10), "halving never goes below the stored step: {steps:?}");
        actors.stop();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_requests_get_unique_ids() {
        let mut fake = FakeAllocator::new(7);
        fake.delay = Duration::from_millis(1);
        let (actors, tags, _) = setup(fake, SegmentConfig { max_step: 50, ..SegmentConfig::default() });
        let h = tags.get("t").unwrap();
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let h = h.clone();
                tokio::spawn(async move {
                    let mut all = Vec::new();
                    for j in 0..300 {
                        all.extend(ids(&h, 1 + (i + j) % 5).await.unwrap());
                    }
                    all
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let set: HashSet<_> = all.iter().collect();
        assert_eq!(set.len(), all.len(), "duplicate IDs");
        actors.stop();
    }
}
