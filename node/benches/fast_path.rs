//! In-process segment fast path: IDs per second taken from a tag's double buffer, with one and
//! two threads contending on the same tag. Segments are refilled by a helper thread standing in
//! for the tag actor, so switches between segments are part of what is measured.
//!
//! Also the snowflake generator (`bench_snowflake`), against the layout's limit.
//!
//! Baseline, measured in the same run: a bare shared `AtomicI64::fetch_add`, the floor for any
//! counter shared between threads. `BENCHMARKS.md` reports the take path as a ratio to it.
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leaf_node::internals::{DoubleBuffer, Segment};

const STEP: i64 = 1_000_000;

/// Installs the next segment whenever the buffer asks, like the actor does.
fn refiller(buf: Arc<DoubleBuffer>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut next = 1;
        while !stop.load(Ordering::Relaxed) {
            if buf.refill_requested() {
                if buf.next_missing() && Segment::new(next, next + STEP).is_some_and(|s| buf.install(s)) {
                    next += STEP;
                }
                buf.refill_done();
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    })
}

fn take_one(buf: &DoubleBuffer) -> i64 {
    let mut id = 0;
    while buf.take(1, |f, _| id = f).missing != 0 {
        std::hint::spin_loop();
    }
    id
}

/// Runs `per_thread(iters / threads)` on `threads` threads; returns the wall time.
fn parallel(threads: usize, iters: u64, work: impl Fn(u64) + Sync) -> Duration {
    let per = iters / threads as u64;
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            let work = &work;
            s.spawn(move || work(per));
        }
    });
    start.elapsed()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("segment_take");
    g.throughput(Throughput::Elements(1));
    for threads in [1usize, 2] {
        g.bench_function(format!("baseline_atomic_{threads}_thread"), |b| {
            let counter = AtomicI64::new(0);
            b.iter_custom(|iters| {
                parallel(threads, iters, |n| {
                    for _ in 0..n {
                        std::hint::black_box(counter.fetch_add(1, Ordering::Relaxed));
                    }
                })
            });
        });
        g.bench_function(format!("{threads}_thread"), |b| {
            let buf = Arc::new(DoubleBuffer::new());
            buf.install(Segment::new(0, STEP).expect("a valid range"));
            let stop = Arc::new(AtomicBool::new(false));
            let r = refiller(buf.clone(), stop.clone());
            // Wall time for `iters` IDs across all threads: throughput is aggregate.
            b.iter_custom(|iters| {
                parallel(threads, iters, |n| {
                    for _ in 0..n {
                        std::hint::black_box(take_one(&buf));
                    }
                })
            });
            stop.store(true, Ordering::Relaxed);
            r.join().unwrap();
        });
    }
    g.finish();
}

/// Snowflake generation in-process. Against the real clock the generator is held to the
/// layout's 4,096 IDs per millisecond per worker (4.096 M/s), so that is the baseline of these
/// rows (their durable mark is kept at the clock, so no ID runs ahead of it); the manual-clock
/// rows let IDs run ahead of a clock that does not move (no mark in the way) instead of waiting
/// for it, which measures the CPU cost of one ID (the headroom above the limit).
fn bench_snowflake(c: &mut Criterion) {
    use leaf_node::internals::{Clock, ManualClock, SystemClock};
    use leaf_node::internals::{Generator, Layout, Stall};
    let layout = Layout { epoch_ms: 1_288_834_974_657 };
    let mut g = c.benchmark_group("snowflake");
    g.throughput(Throughput::Elements(1));
    let far = Instant::now() + Duration::from_secs(3600);
    for (name, batch) in [("real_clock_1_id_per_call", 1u64), ("real_clock_4096_ids_per_call", 4096)] {
        g.bench_function(name, |b| {
            let clock: Arc<dyn Clock> = Arc::new(SystemClock::new(0));
            let gen = Generator::new(layout, clock.clone(), 100);
            // A mark at the clock (no window ahead): held to 4,096 IDs per ms of the clock.
            gen.start(1, clock.now_ms() - 1, clock.now_ms(), far);
            b.iter_custom(|iters| {
                let start = Instant::now();
                let mut left = iters;
                while left > 0 {
                    match gen.try_take(left.min(batch), &mut |f, _| {
                        std::hint::black_box(f);
                    }) {
                        Ok(k) => left -= k,
                        Err(Stall::Window { .. }) => {
                            gen.raise_limit(clock.now_ms());
                            std::hint::spin_loop()
                        }
                        Err(e) => panic!("{e:?}"),
                    }
                }
                start.elapsed()
            });
        });
    }
    g.bench_function("manual_clock_1_id_per_call", |b| {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let gen = Generator::new(layout, clock.clone(), 100);
        gen.start(1, 1_699_999_999_999, i64::MAX, far);
        b.iter_custom(|iters| {
            let start = Instant::now();
            let mut left = iters;
            while left > 0 {
                match gen.try_take(1, &mut |f, _| {
                    std::hint::black_box(f);
                }) {
                    Ok(k) => left -= k,
                    Err(Stall::Window { .. }) => clock.advance(1),
                    Err(e) => panic!("{e:?}"),
                }
            }
            start.elapsed()
        });
    });
    g.finish();
}

criterion_group!(benches, bench, bench_snowflake);
criterion_main!(benches);
