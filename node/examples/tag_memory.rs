//! The heap a loaded, idle tag keeps: loads N tags (one ID each, so each has had its actor, has
//! its buffers with a committed segment, and its counters), leaves them idle for 11 s, and
//! divides the live heap bytes they added by N. The heap is counted by a wrapping global allocator, so the figure
//! is the program's own and does not depend on what else the machine runs; RSS is printed
//! beside it. Raft and the disk are left out (the probe's allocator commits at once): this is
//! what the tag itself carries.
//!
//!   cargo run --release -p leaf-node --example tag_memory [N]   (default 20000)
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use leaf_node::internals::TagsProbe;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

/// Waits until the live heap stops moving (the actors' last messages handled).
async fn settled() -> isize {
    let mut last = LIVE.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = LIVE.load(Ordering::Relaxed);
        if now == last {
            return now;
        }
        last = now;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let probe = TagsProbe::start(1000).expect("actor system");
    // Warm up what is made once (the maps' first buckets, the actor thread's runtime).
    for i in 0..1_000 {
        probe.take_one(&format!("warm-{i}")).await.expect("an ID");
    }
    let (heap0, rss0) = (settled().await, rss_bytes());
    for i in 0..n {
        probe.take_one(&format!("tenant-{i:07}")).await.expect("an ID");
    }
    // Idle: long enough for every actor to have looked twice and found nothing to do (an idle
    // actor sleeps after 5 to 10 s).
    tokio::time::sleep(Duration::from_secs(11)).await;
    let (heap1, rss1) = (settled().await, rss_bytes());
    assert_eq!(probe.loaded(), n + 1_000);
    // What the node's idle sweeper does once many actors slept: give free pages back.
    // SAFETY: malloc_trim only reads and updates the allocator's own state.
    unsafe { libc::malloc_trim(0) };
    let rss2 = rss_bytes();
    let per = |a: isize, b: isize| (b - a) as f64 / n as f64;
    println!(
        "{n} idle loaded tags: {:.0} heap bytes per tag ({:.1} MB); RSS {:.0} bytes per tag ({:.1} MB), {:.0} \
         after malloc_trim ({:.1} MB)",
        per(heap0, heap1),
        (heap1 - heap0) as f64 / 1e6,
        per(rss0 as isize, rss1 as isize),
        (rss1 - rss0) as f64 / 1e6,
        per(rss0 as isize, rss2 as isize),
        (rss2 as f64 - rss0 as f64) / 1e6
    );
}
