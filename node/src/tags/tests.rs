//! The tag actors with a fake allocator: ordering, batches, refused ranges, errors,
//! timeouts, preloading, spare segments and the dynamic step end to end.
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
    let lookup: TagLookup =
        Arc::new(move |t| (t == "t").then_some((step, leaf_raft_store::StoredProfile::Segment, None)));
    let tags = Tags::new(&actors, alloc.clone(), (lookup, Arc::default()), cfg, Arc::new(Metrics::new()));
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

/// One ID at once (the HTTP fast path's ready answers): nothing for a tag not loaded yet or
/// with empty buffers (nothing counted, nothing lost), then the IDs `take` would hand out, in
/// the same order and interleaved with it, counted as served, the preloads asked for as `take`
/// asks for them (the tag is served across many refills without a wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_id_at_once_is_what_take_hands_out() {
    let (actors, tags, alloc) = setup(FakeAllocator::new(10), SegmentConfig::default());
    assert!(tags.with_loaded("t", |h| h.take_one_now()).is_none(), "not loaded yet");
    let h = tags.get("t").unwrap();
    assert_eq!(tags.with_loaded("nope", |h| h.take_one_now()), None);
    let first = match tags.with_loaded("t", |h| h.take_one_now()) {
        Some(Some(id)) => vec![id],
        // The buffers are still empty (the first refill is under way): `take` waits for it.
        _ => ids(&h, 1).await.unwrap(),
    };
    let mut got = first;
    let mut at_once = 0;
    while got.len() < 500 {
        if got.len() % 3 == 0 {
            got.extend(ids(&h, 1).await.unwrap());
        } else if let Some(id) = h.take_one_now() {
            got.push(id);
            at_once += 1;
        } else {
            // Only while a refill is late: `take` waits for it.
            got.extend(ids(&h, 1).await.unwrap());
        }
    }
    assert_eq!(got, (1..501).collect::<Vec<_>>());
    assert_eq!(h.served(), 500);
    // How many came at once depends on the scheduler (a loaded machine runs the actor late).
    assert!(at_once > 0, "take_one_now never found an ID");
    // Taken only at once (no `take` to send a `Wait`), the tag still moves from segment to
    // segment: the preloads its takes ask for arrive by themselves.
    let (calls, mut want) = (alloc.calls.load(Ordering::SeqCst), 501);
    while alloc.calls.load(Ordering::SeqCst) < calls + 3 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let id = loop {
            if let Some(id) = h.take_one_now() {
                break id;
            }
            assert!(tokio::time::Instant::now() < deadline, "no refill came for ID {want}: a preload was lost");
            tokio::task::yield_now().await;
        };
        assert_eq!(id, want);
        want += 1;
    }
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
            Err(TakeError::Alloc(AllocError::EmptySegment { start: 1, end })) => assert_eq!(end, 1 + forged),
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
    assert_eq!(h.counts.waits.get(), 1, "the first request has nothing buffered and waits");
    paced(&h, 350).await;
    assert_eq!(h.counts.waits.get(), 1, "a request waited for a refill that preloading should have made");
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
    let waits = h.counts.waits.get();
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
    let waits = h.counts.waits.get();
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
    assert_eq!(h.counts.waits.get(), waits, "a request waited for the blocked actor");
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

/// A tag that served nothing for the idle time is unloaded (its buffered IDs dropped, never
/// handed out); a busy one stays; the unloaded one, asked again, serves above what it served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tags_are_unloaded_and_serve_above_their_old_ids_when_asked_again() {
    let actors = ActorSystem::start().unwrap();
    let alloc = Arc::new(FakeAllocator::new(100));
    let lookup: TagLookup = Arc::new(|t| ["busy", "cold"].contains(&t).then_some((100, StoredProfile::Segment, None)));
    let metrics = Arc::new(Metrics::new());
    let tags = Tags::new(&actors, alloc.clone(), (lookup, Arc::default()), SegmentConfig::default(), metrics.clone());
    let (busy, cold) = (tags.get("busy").unwrap(), tags.get("cold").unwrap());
    let mut seen: HashSet<i64> = ids(&cold, 5).await.unwrap().into_iter().collect();
    seen.extend(ids(&busy, 5).await.unwrap());
    let idle = Duration::from_secs(60);
    let mut watch = super::idle::IdleWatch::default();
    let t0 = tokio::time::Instant::now();
    assert_eq!(tags.sweep_idle(&mut watch, t0, idle), 0, "the first look only notes the counts");
    seen.extend(ids(&busy, 5).await.unwrap());
    assert_eq!(tags.sweep_idle(&mut watch, t0 + idle / 2, idle), 0);
    // `cold` has not moved since t0; `busy` moved at the second look.
    assert_eq!(tags.sweep_idle(&mut watch, t0 + idle, idle), 1);
    let loaded: Vec<String> = tags.loaded().iter().map(|h| h.tag().to_string()).collect();
    assert_eq!(loaded, ["busy"]);
    assert!(!metrics_text(&metrics).contains("tag=\"cold\""), "its series went with it");
    assert_eq!(cold.buf.buffered_ids(), 0, "its buffered IDs are dropped");
    drop(cold);
    // Asked again: loaded anew, from a new segment; no ID twice.
    let again = tags.get("cold").unwrap();
    for id in ids(&again, 10).await.unwrap() {
        assert!(seen.insert(id), "{id} handed out twice");
    }
    assert_eq!(tags.loaded().len(), 2);
    // `busy` goes too once it stopped long enough; the reloaded tag after its own idle time.
    assert_eq!(tags.sweep_idle(&mut watch, t0 + idle * 3, idle), 1, "busy, idle since t0 + idle / 2");
    assert_eq!(tags.sweep_idle(&mut watch, t0 + idle * 5, idle), 1, "cold, first seen again at t0 + 3 idle");
    assert!(tags.loaded().is_empty());
    actors.stop();
}

/// The sweeper's notes give their table back once the tags they noted are unloaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweepers_notes_shrink_with_the_tags_loaded() {
    let actors = ActorSystem::start().unwrap();
    let alloc = Arc::new(FakeAllocator::new(100));
    let lookup: TagLookup = Arc::new(|_| Some((100, StoredProfile::Segment, None)));
    let metrics = Arc::new(Metrics::new());
    let tags = Tags::new(&actors, alloc, (lookup, Arc::default()), SegmentConfig::default(), metrics);
    for i in 0..1_000 {
        ids(&tags.get(&format!("t{i}")).unwrap(), 1).await.unwrap();
    }
    let idle = Duration::from_secs(60);
    let mut watch = super::idle::IdleWatch::default();
    let t0 = tokio::time::Instant::now();
    assert_eq!(tags.sweep_idle(&mut watch, t0, idle), 0, "the first look only notes the counts");
    let full = watch.room();
    assert!(full >= 1_000, "{full}");
    assert_eq!(tags.sweep_idle(&mut watch, t0 + idle, idle), 1_000);
    assert!(watch.room() <= 64, "room for {} after {full}", watch.room());
    actors.stop();
}

fn metrics_text(m: &Metrics) -> String {
    crate::metrics::render_idle(m)
}

/// An idle tag's actor sleeps (its context and mailbox freed, what it must remember left with
/// its handle) and the next refill or wait starts a new one that carries on: the IDs stay in
/// order with nothing skipped beyond the buffers, and Leaf's dynamic step continues where it
/// was (doubled by quick refills before the sleep, doubled again after it, not reset to the
/// stored step).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_actor_sleeps_and_the_next_refill_wakes_it_where_it_was() {
    let actors = ActorSystem::start().unwrap();
    let alloc = Arc::new(FakeAllocator::new(10));
    let lookup: TagLookup = Arc::new(|t| (t == "t").then_some((10, leaf_raft_store::StoredProfile::Segment, None)));
    let sleep = Duration::from_millis(50);
    let metrics = Arc::new(Metrics::new());
    let tags = Tags::with_actor_sleep(
        &actors,
        alloc.clone(),
        (lookup, Arc::default()),
        SegmentConfig::default(),
        metrics,
        sleep,
    );
    let h = tags.get("t").unwrap();
    assert!(!h.actor_runs(), "no actor before the first refill");
    let mut got = Vec::new();
    for _ in 0..25 {
        got.extend(ids(&h, 1).await.unwrap());
    }
    let step_before = h.inspect().dynamic_step;
    assert!(step_before > 10, "quick refills doubled the step: {step_before}");
    leaf_test_support::eventually("the idle actor sleeps", Duration::from_secs(10), || async {
        if h.actor_runs() {
            Err("still running")
        } else {
            Ok(())
        }
    })
    .await;
    let refills_before = alloc.steps.lock().unwrap().len();
    // Woken by the waits and refills of the next takes; in order, and the step carries on.
    while got.len() < 200 {
        got.extend(ids(&h, 5).await.unwrap());
    }
    assert_eq!(got, (1..201).collect::<Vec<_>>());
    let steps = alloc.steps.lock().unwrap().clone();
    assert!(steps.len() > refills_before, "refills after the sleep: {steps:?}");
    assert!(steps[refills_before] >= step_before, "the step carried on, not reset: {steps:?}");
    drop(h);
    actors.stop();
}

/// Actors that sleep after 2 ms of quiet, under takes from four tasks that pause now and then
/// for longer than that: no wait is lost between an actor's decision to sleep and a message
/// sent to it (every take is answered, none times out), and the IDs are unique.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_and_refills_are_never_lost_to_an_actor_going_to_sleep() {
    let actors = ActorSystem::start().unwrap();
    let alloc = Arc::new(FakeAllocator::new(3));
    let lookup: TagLookup = Arc::new(|t| (t == "t").then_some((3, leaf_raft_store::StoredProfile::Segment, None)));
    let cfg = SegmentConfig { wait_timeout_ms: 2_000, max_step: 3, ..SegmentConfig::default() };
    let metrics = Arc::new(Metrics::new());
    let sleep = Duration::from_millis(2);
    let tags = Tags::with_actor_sleep(&actors, alloc, (lookup, Arc::default()), cfg, metrics, sleep);
    let h = tags.get("t").unwrap();
    let tasks: Vec<_> = (0..4u64)
        .map(|k| {
            let h = h.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..150u64 {
                    got.extend(ids(&h, 1).await.expect("every take is answered"));
                    if (i + k) % 7 == 0 {
                        tokio::time::sleep(Duration::from_millis(3 + (i % 5))).await;
                    }
                }
                got
            })
        })
        .collect();
    let mut all = HashSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(all.insert(id), "ID {id} twice");
        }
    }
    assert_eq!(all.len(), 600);
    assert!(tags.inner.spawner.slept.load(Ordering::Relaxed) > 0, "the actor slept at least once");
    drop(h);
    actors.stop();
}

/// The rule that makes sleeping safe: an actor may sleep only when it has handled every message
/// sent to it (counted under the slot's lock, which sends take too); otherwise it stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_actor_with_a_message_on_its_way_does_not_sleep() {
    let (actors, tags, _alloc) = setup(FakeAllocator::new(10), SegmentConfig::default());
    let h = tags.get("t").unwrap();
    ids(&h, 1).await.unwrap();
    let sent = h.actor.lock().unwrap().sent;
    assert!(sent > 0 && h.actor_runs());
    let memo = || h.actor.lock().unwrap().memo;
    let m = memo();
    let me = h.actor.lock().unwrap().addr.clone().unwrap();
    assert!(!h.put_to_sleep(&me, sent - 1, || m), "one message not handled yet");
    assert!(h.actor_runs());
    // Another actor's address: not this slot's actor, whatever its count.
    let other = actor::TagActor::new(h.parts(&h.actor.lock().unwrap()));
    let other = actix::Actor::start_in_arbiter(actors.arbiter(), move |_| other);
    assert!(!h.put_to_sleep(&other, sent, || m), "another actor's slot");
    assert!(h.put_to_sleep(&me, sent, || m), "all handled");
    assert!(h.actor.lock().unwrap().addr.is_none());
    // The next take starts a new actor.
    ids(&h, 20).await.unwrap();
    assert!(h.actor_runs());
    drop(h);
    actors.stop();
}
