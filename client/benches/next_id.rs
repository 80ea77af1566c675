//! `TagPool::next_id()` per thread, in process: a fake source answering at once with ranges of
//! `MAX_RANGE_BATCH` IDs, so what is measured is the pool (a read of the current range's slot
//! and one `fetch_add` per ID, a range switch and a background lease every million IDs), not a
//! network. Throughput is in IDs per second: for the `2 threads` rows the total of both
//! threads (per thread: half). Baselines in the same run: a bare `AtomicI64::fetch_add` on one
//! thread and shared by two.
//!
//! `bench/pool.sh` runs it (`lcargo bench -p leaf-client --bench next_id`).
use std::hint::black_box;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use leaf_api::ranges::IdRanges;
use leaf_api::tag::MAX_RANGE_BATCH;
use leaf_client::pool::{IdKind, IdPool, LeaseFuture, PoolOptions, RangeSource, TagPool};

/// Hands out consecutive IDs at once.
struct Immediate {
    next: AtomicI64,
}

impl RangeSource for Immediate {
    fn lease<'a>(&'a self, _kind: IdKind, _name: &'a str, count: u32) -> LeaseFuture<'a> {
        let start = self.next.fetch_add(i64::from(count), Ordering::Relaxed);
        let mut out = IdRanges::default();
        out.push_run(start, count.into());
        Box::pin(async move { Ok(out) })
    }
}

fn pool(rt: &tokio::runtime::Runtime) -> TagPool {
    let options = PoolOptions {
        min_lease: MAX_RANGE_BATCH,
        initial_lease: MAX_RANGE_BATCH,
        max_lease: MAX_RANGE_BATCH,
        depth: 2,
        ..PoolOptions::default()
    };
    let source = Immediate { next: AtomicI64::new(1) };
    let pool = IdPool::with_runtime(source, options, rt.handle().clone()).expect("valid options");
    let tag = pool.segment("bench").expect("valid tag");
    // The first lease.
    tag.next_id().expect("an ID");
    tag
}

/// Runs `work(iters)` on `threads` threads at once and returns the wall time.
fn on_threads(threads: usize, iters: u64, work: impl Fn(usize, u64) + Sync) -> Duration {
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let work = &work;
            s.spawn(move || work(t, iters));
        }
    });
    started.elapsed()
}

fn next_id(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let mut group = c.benchmark_group("next_id");

    // Baseline: a bare shared counter, the floor for any ID handed out from shared memory.
    let counter = AtomicI64::new(0);
    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline: atomic fetch_add, 1 thread", |b| {
        b.iter(|| black_box(counter.fetch_add(1, Ordering::Relaxed)))
    });
    let tag = pool(&rt);
    group.bench_function("1 thread", |b| b.iter(|| black_box(tag.next_id().expect("an ID"))));
    group.bench_function("1 thread, try_next_id", |b| b.iter(|| black_box(tag.try_next_id())));
    let mut local = tag.local(64);
    group.bench_function("1 thread, LocalIds(64)", |b| b.iter(|| black_box(local.next_id().expect("an ID"))));

    // Two threads (the machine's cores): a shared counter, one shared TagPool, a TagPool each.
    group.throughput(Throughput::Elements(2));
    group.bench_function("baseline: atomic fetch_add, 2 threads on one counter", |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, |_, n| {
                for _ in 0..n {
                    black_box(counter.fetch_add(1, Ordering::Relaxed));
                }
            })
        })
    });
    let tag = pool(&rt);
    group.bench_function("2 threads sharing one TagPool", |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, |_, n| {
                for _ in 0..n {
                    black_box(tag.next_id().expect("an ID"));
                }
            })
        })
    });
    let tag = pool(&rt);
    group.bench_function("2 threads sharing one TagPool, a LocalIds(64) each", |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, |_, n| {
                let mut local = tag.local(64);
                for _ in 0..n {
                    black_box(local.next_id().expect("an ID"));
                }
            })
        })
    });
    let tags = [pool(&rt), pool(&rt)];
    group.bench_function("2 threads, a TagPool each", |b| {
        b.iter_custom(|iters| {
            on_threads(2, iters, |t, n| {
                for _ in 0..n {
                    black_box(tags[t].next_id().expect("an ID"));
                }
            })
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = next_id
}
criterion_main!(benches);
