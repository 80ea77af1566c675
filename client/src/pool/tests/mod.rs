//! The pool against a fake [`RangeSource`]: every ID inside a leased range and none twice under
//! concurrent callers and refills (randomized, seed printed), snowflake retirement and the
//! adaptive size on a paused clock, shutdown. Failing leases are in `failures`, the size under a
//! slow source in `sizing`.
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaf_api::ranges::{IdRange, IdRanges};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use super::*;

mod failures;
mod sizing;

/// One lease the fake granted.
#[derive(Debug, Clone)]
struct Granted {
    ranges: Vec<IdRange>,
    size: u32,
    at: Instant,
}

/// What the fake answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Grant,
    Unavailable,
    Refuse,
}

/// Hands out ascending IDs, split into 1–3 ranges with gaps when randomized.
struct Fake {
    next: Mutex<i64>,
    granted: Mutex<Vec<Granted>>,
    mode: Mutex<Mode>,
    /// Leases to fail (as unavailable) before `mode` applies.
    fail_next: AtomicU32,
    rng: Mutex<Option<StdRng>>,
    /// Upper bound of a random delay per lease, in microseconds (randomized fakes).
    max_delay_us: u64,
}

impl Fake {
    fn new() -> Arc<Fake> {
        Fake::build(None, 0)
    }

    fn build(rng: Option<StdRng>, max_delay_us: u64) -> Arc<Fake> {
        Arc::new(Fake {
            next: Mutex::new(1),
            granted: Mutex::new(Vec::new()),
            mode: Mutex::new(Mode::Grant),
            fail_next: AtomicU32::new(0),
            rng: Mutex::new(rng),
            max_delay_us,
        })
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn granted(&self) -> Vec<Granted> {
        self.granted.lock().unwrap().clone()
    }

    fn sizes(&self) -> Vec<u32> {
        self.granted().iter().map(|g| g.size).collect()
    }

    /// Whether `id` lies in a granted range, and that range's lease time.
    fn leased_at(&self, id: i64) -> Option<Instant> {
        let granted = self.granted.lock().unwrap();
        granted.iter().find(|g| g.ranges.iter().any(|r| (r.start..r.end).contains(&id))).map(|g| g.at)
    }

    fn grant(&self, count: u32) -> Result<(IdRanges, u64), LeaseFailure> {
        if self.fail_next.load(Ordering::SeqCst) > 0 {
            self.fail_next.fetch_sub(1, Ordering::SeqCst);
            return Err(LeaseFailure::retryable("injected: no node answered"));
        }
        match *self.mode.lock().unwrap() {
            Mode::Grant => {}
            Mode::Unavailable => return Err(LeaseFailure::retryable("injected: unavailable")),
            Mode::Refuse => return Err(LeaseFailure::permanent("injected: tag_not_found")),
        }
        let mut rng = self.rng.lock().unwrap();
        let mut next = self.next.lock().unwrap();
        let mut out = IdRanges::default();
        let mut left = u64::from(count);
        while left > 0 {
            let n = match rng.as_mut() {
                Some(rng) if left > 1 => {
                    if rng.gen_bool(0.5) {
                        rng.gen_range(1..left)
                    } else {
                        left
                    }
                }
                _ => left,
            };
            out.push_run(*next, n);
            *next += n as i64;
            left -= n;
            if let Some(rng) = rng.as_mut() {
                *next += rng.gen_range(0..3); // a gap, sometimes
            }
        }
        let delay = rng.as_mut().map_or(0, |r| r.gen_range(0..=self.max_delay_us));
        self.granted.lock().unwrap().push(Granted { ranges: out.ranges.clone(), size: count, at: Instant::now() });
        Ok((out, delay))
    }
}

/// The fake as a source (the test keeps another reference to inspect it).
struct Source(Arc<Fake>);

impl RangeSource for Source {
    fn lease<'a>(&'a self, _kind: IdKind, _name: &'a str, count: u32) -> LeaseFuture<'a> {
        Box::pin(async move {
            let (ranges, delay_us) = self.0.grant(count)?;
            if delay_us > 0 {
                tokio::time::sleep(Duration::from_micros(delay_us)).await;
            }
            Ok(ranges)
        })
    }
}

fn quick() -> PoolOptions {
    PoolOptions {
        max_wait: Duration::from_secs(5),
        min_lease: 1,
        initial_lease: 10,
        max_lease: 5_000,
        retry_min: Duration::from_millis(5),
        retry_max: Duration::from_millis(50),
        tick: Duration::from_millis(10),
        ..PoolOptions::default()
    }
}

/// Held by the tests that keep every core busy for a while, so that they run one at a time
/// (each is quicker alone than two sharing the cores). Starved of CPU, a pool's leases seem to
/// last longer than `lease_period`; while callers wait for leases the size grows anyway (see
/// `leases_grow_while_callers_wait_on_a_slow_source`).
pub(crate) static CPU_HEAVY: Mutex<()> = Mutex::new(());

pub(crate) fn cpu_heavy() -> std::sync::MutexGuard<'static, ()> {
    CPU_HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn seed() -> u64 {
    let seed = std::env::var("POOL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("seed {seed} (rerun with POOL_SEED={seed})");
    seed
}

/// Every ID is inside a granted range, none twice, and the served count adds up.
fn check_ids(fake: &Fake, mut ids: Vec<i64>) {
    let n = ids.len();
    let granted = fake.granted();
    let mut ranges: Vec<IdRange> = granted.iter().flat_map(|g| g.ranges.iter().copied()).collect();
    ranges.sort_by_key(|r| r.start);
    ids.sort_unstable();
    let mut ri = 0;
    for w in ids.windows(2) {
        assert_ne!(w[0], w[1], "ID {} handed out twice", w[0]);
    }
    for id in &ids {
        while ri < ranges.len() && ranges[ri].end <= *id {
            ri += 1;
        }
        assert!(ri < ranges.len() && ranges[ri].start <= *id, "ID {id} not in any leased range");
    }
    assert_eq!(ids.len(), n);
}

#[test]
fn concurrent_callers_get_only_leased_ids_and_none_twice() {
    let _cpu = cpu_heavy();
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..4 {
        let threads = rng.gen_range(2..=6);
        let per_thread = rng.gen_range(5_000..40_000);
        let options = PoolOptions {
            depth: rng.gen_range(1..=3),
            initial_lease: rng.gen_range(1..=50),
            max_lease: rng.gen_range(50..=2_000),
            lease_period: Duration::from_millis(rng.gen_range(1..=50)),
            ..quick()
        };
        eprintln!("round {round}: {threads} threads x {per_thread}, {options:?}");
        let started = std::time::Instant::now();
        let rt = runtime();
        let fake = Fake::build(Some(StdRng::seed_from_u64(rng.gen())), rng.gen_range(0..500));
        let pool = IdPool::with_runtime(Source(fake.clone()), options, rt.handle().clone()).unwrap();
        let tag = pool.segment("orders").unwrap();
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let tag = tag.clone();
                std::thread::spawn(move || {
                    let mut ids = Vec::with_capacity(per_thread);
                    for i in 0..per_thread {
                        // Mix the three ways of taking an ID.
                        if (i + t) % 7 == 0 {
                            if let Some(id) = tag.try_next_id() {
                                ids.push(id);
                            }
                        } else {
                            ids.push(tag.next_id().unwrap());
                        }
                    }
                    ids
                })
            })
            .collect();
        let mut ids: Vec<i64> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        for _ in 0..1000 {
            ids.push(rt.block_on(tag.next_id_async()).unwrap());
        }
        let stats = tag.stats();
        eprintln!("round {round}: {:?}, {stats:?}", started.elapsed());
        let n = ids.len() as u64;
        check_ids(&fake, ids);
        assert_eq!(stats.ids_served, n, "{stats:?}");
        assert_eq!(stats.exhausted + stats.rejected, 0);
    }
}

#[tokio::test(start_paused = true)]
async fn stale_snowflake_ranges_are_retired_never_handed_out() {
    let fake = Fake::new();
    let options = PoolOptions {
        max_staleness: Duration::from_millis(1000),
        tick: Duration::from_millis(100),
        initial_lease: 1000,
        ..PoolOptions::default()
    };
    let pool = IdPool::new(Source(fake.clone()), options).unwrap();
    let flakes = pool.snowflake("payments").unwrap();
    let mut checked = 0;
    for step in 0..300 {
        // A trickle of IDs: leases last long enough to go stale.
        let id = flakes.next_id_async().await.unwrap();
        let leased_at = fake.leased_at(id).expect("an ID from a granted range");
        let age = Instant::now() - leased_at;
        assert!(age <= Duration::from_millis(1000), "step {step}: ID {id} from a range {age:?} old");
        checked += 1;
        tokio::time::sleep(Duration::from_millis(37)).await;
    }
    let stats = flakes.stats();
    assert!(stats.ids_retired > 0, "{stats:?}");
    assert!(fake.granted().len() > 1);
    assert_eq!(stats.ids_served, checked);
}

#[tokio::test(start_paused = true)]
async fn the_lease_size_doubles_when_used_fast_and_halves_when_used_slowly() {
    let fake = Fake::new();
    let options = PoolOptions {
        min_lease: 10,
        initial_lease: 100,
        max_lease: 100_000,
        lease_period: Duration::from_secs(1),
        ..PoolOptions::default()
    };
    let pool = IdPool::new(Source(fake.clone()), options).unwrap();
    let tag = pool.segment("orders").unwrap();
    // Fast: no time passes between leases, so each lasts "no time": the size doubles.
    let mut taken = 0;
    while !fake.sizes().contains(&1600) {
        tag.next_id_async().await.unwrap();
        taken += 1;
        assert!(taken < 100_000, "{:?}", fake.sizes());
    }
    let fast = fake.sizes();
    assert_eq!(fast[..5], [100, 200, 400, 800, 1600], "{fast:?}");
    // Slow: one ID per 50 ms, so a lease of 1600 lasts 80 s, far more than 2 x 1 s: it halves.
    for _ in 0..100_000 {
        if fake.sizes().len() >= fast.len() + 4 {
            break;
        }
        tag.next_id_async().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let all = fake.sizes();
    let slow = &all[fast.len() + 1..];
    assert!(slow.len() >= 3 && slow.windows(2).all(|w| w[1] * 2 == w[0]), "{all:?}");
    assert!(*slow.last().unwrap() < 1600, "{all:?}");
    assert_eq!(tag.stats().lease_target, u64::from(*slow.last().unwrap()));
}

#[tokio::test]
async fn dropping_the_pool_and_its_handles_stops_the_refill_tasks() {
    let fake = Fake::new();
    let pool = IdPool::new(Source(fake.clone()), quick()).unwrap();
    let a = pool.segment("orders").unwrap();
    let b = pool.snowflake("payments").unwrap();
    a.next_id_async().await.unwrap();
    b.next_id_async().await.unwrap();
    assert_eq!(pool.stats().tags.len(), 2);
    drop(pool);
    // A handle keeps its tag alive.
    let leases = fake.granted().len();
    for _ in 0..10_000 {
        a.next_id_async().await.unwrap();
    }
    assert!(fake.granted().len() > leases);
    drop((a, b));
    // The tasks (each holding the source) end.
    for _ in 0..500 {
        if Arc::strong_count(&fake) == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("refill tasks still hold the source");
}

#[tokio::test]
async fn handles_are_shared_per_name_and_names_options_runtime_are_checked() {
    let pool = IdPool::new(Source(Fake::new()), quick()).unwrap();
    let a = pool.segment("orders").unwrap();
    let b = pool.segment("orders").unwrap();
    assert!(Arc::ptr_eq(&a.shared, &b.shared));
    let f = pool.snowflake("orders").unwrap();
    assert!(!Arc::ptr_eq(&a.shared, &f.shared));
    assert_eq!((f.kind(), f.name()), (IdKind::Snowflake, "orders"));
    assert!(matches!(pool.segment("no spaces"), Err(PoolError::InvalidName { .. })));
    assert!(matches!(pool.snowflake(""), Err(PoolError::InvalidName { .. })));
    let bad = [
        PoolOptions { min_lease: 0, ..quick() },
        PoolOptions { max_lease: leaf_api::tag::MAX_RANGE_BATCH + 1, ..quick() },
        PoolOptions { initial_lease: 10_000, ..quick() },
        PoolOptions { depth: 0, ..quick() },
        PoolOptions { tick: Duration::from_secs(2), ..quick() },
        PoolOptions { retry_min: Duration::from_secs(2), ..quick() },
    ];
    for options in bad {
        assert!(matches!(IdPool::new(Source(Fake::new()), options), Err(PoolError::InvalidOptions(_))));
    }
    assert!(PoolOptions::default().validate().is_ok());
    let outside = std::thread::spawn(|| IdPool::new(Source(Fake::new()), quick()).map(|_| ()));
    assert_eq!(outside.join().unwrap(), Err(PoolError::NoRuntime));
}

#[test]
fn per_thread_caches_hand_out_only_leased_ids_and_none_twice() {
    let _cpu = cpu_heavy();
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..3 {
        let threads = rng.gen_range(2..=5);
        let per_thread = rng.gen_range(5_000..30_000);
        let options = PoolOptions { max_lease: rng.gen_range(50..=2_000), ..quick() };
        let rt = runtime();
        let fake = Fake::build(Some(StdRng::seed_from_u64(rng.gen())), rng.gen_range(0..300));
        let pool = IdPool::with_runtime(Source(fake.clone()), options, rt.handle().clone()).unwrap();
        let tag = pool.segment("orders").unwrap();
        let chunks: Vec<u32> = (0..threads).map(|_| rng.gen_range(1..=300)).collect();
        eprintln!("round {round}: {threads} threads x {per_thread}, chunks {chunks:?}");
        let workers: Vec<_> = chunks
            .into_iter()
            .enumerate()
            .map(|(t, chunk)| {
                let tag = tag.clone();
                std::thread::spawn(move || {
                    let mut local = tag.local(chunk);
                    let mut ids = Vec::with_capacity(per_thread);
                    for i in 0..per_thread {
                        // Mostly the cache, sometimes the shared handle.
                        ids.push(if (i + t) % 5 == 0 { tag.next_id() } else { local.next_id() }.unwrap());
                    }
                    ids
                })
            })
            .collect();
        let ids: Vec<i64> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        let n = ids.len() as u64;
        check_ids(&fake, ids);
        // IDs left in the dropped caches were counted as retired: the books balance.
        let stats = tag.stats();
        assert_eq!(stats.ids_served, n, "{stats:?}");
    }
}

#[test]
fn a_per_thread_cache_drops_what_is_left_of_a_retired_range() {
    let rt = runtime();
    let fake = Fake::new();
    let options = PoolOptions { initial_lease: 1000, min_lease: 1000, ..quick() };
    let pool = IdPool::with_runtime(Source(fake.clone()), options, rt.handle().clone()).unwrap();
    let flakes = pool.snowflake("payments").unwrap();
    flakes.next_id().unwrap(); // the first lease is in
    let mut local = flakes.local(100);
    let first = local.next_id().unwrap();
    assert_eq!(local.cached(), 99);
    // The refill task retires every range leased so far (as it does with stale ones).
    let retired = flakes.shared.buffer.retire_leased_until(Instant::now());
    super::stats::Counters::add(&flakes.shared.counters.ids_retired, retired);
    let next = local.next_id().unwrap();
    let first_lease = fake.granted()[0].ranges.clone();
    assert!(first_lease.iter().any(|r| (r.start..r.end).contains(&first)));
    assert!(!first_lease.iter().any(|r| (r.start..r.end).contains(&next)), "{next} came from the retired range");
    drop(local);
    assert_eq!(flakes.stats().ids_served, 3);
}
