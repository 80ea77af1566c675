//! Giving the memory of closed connections back to the operating system.
//!
//! Every open connection holds buffers (tens of KiB). glibc's malloc keeps freed memory in its
//! per-thread arenas, so after a flood of 15,000 connections a node stayed at its peak RSS
//! (285 MB here, 495 MB in the report that found it) long after they closed. [`Trimmer`]
//! counts closed connections and, when many closed since the last time, asks glibc to return
//! its free pages (`malloc_trim(0)`, which releases free memory inside every arena, not only at
//! the top of the heap; under jemalloc, purges its arenas). Normal keep-alive traffic closes few
//! connections and never triggers it; a trim costs about a millisecond when there is little to
//! release. Which allocator, and what each can say and give back: [`allocator`]. What a map
//! that emptied keeps of its largest table: [`shrink_sparse`].
use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub mod allocator;

pub use allocator::{heap, trim, NAME as ALLOCATOR};

/// Tables smaller than this are left as they are by [`shrink_sparse`].
const SHRINK_ABOVE: usize = 64;

/// Gives back most of `map`'s table once it holds a quarter of what it has room for, or less.
///
/// A `HashMap` keeps the largest table it ever had: after a load over 30,000 tags and the idle
/// sweep, the tables of the per-tag series, the forecasts and the sweeper's own notes held
/// about 10 MB for maps that were empty or nearly (heaptrack, BENCHMARKS.md). Called after
/// removals; shrinking to twice the entries left leaves room to grow again before a resize, so
/// a map that shrinks and grows by turns does not rebuild its table each time.
pub fn shrink_sparse<K: Eq + Hash, V, S: BuildHasher>(map: &mut HashMap<K, V, S>) {
    let room = map.capacity();
    if room > SHRINK_ABOVE && map.len() <= room / 4 {
        map.shrink_to(map.len() * 2);
    }
}

/// Closed connections that make the next check trim.
const TRIM_AFTER_CLOSED: usize = 512;

/// Counts closed connections and trims the allocator after many.
#[derive(Debug, Default)]
pub struct Trimmer {
    closed: AtomicUsize,
}

impl Trimmer {
    /// Records one closed connection.
    pub fn connection_closed(&self) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }

    /// Trims if enough connections closed since the last trim; returns whether it did.
    pub fn maybe_trim(&self) -> bool {
        if self.closed.load(Ordering::Relaxed) < TRIM_AFTER_CLOSED {
            return false;
        }
        self.closed.store(0, Ordering::Relaxed);
        trim();
        true
    }

    /// Checks every `every` until the task is aborted.
    pub async fn run(self: std::sync::Arc<Self>, every: Duration) {
        let mut tick = crate::ticker::Ticker::forever(every);
        while tick.next().await {
            if self.maybe_trim() {
                tracing::debug!("returned freed memory to the OS after many connections closed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map keeps its table while it holds more than a quarter of its room, and gives most of
    /// it back below that.
    #[test]
    fn a_map_emptied_gives_its_table_back_and_a_full_one_keeps_it() {
        let mut map: HashMap<u32, u64> = (0..10_000).map(|i| (i, 0)).collect();
        let full = map.capacity();
        shrink_sparse(&mut map);
        assert_eq!(map.capacity(), full, "a full map keeps its table");
        map.retain(|k, _| *k < 4_000);
        shrink_sparse(&mut map);
        assert!(map.capacity() > full / 2, "above a quarter, the table stays: {} of {full}", map.capacity());
        map.retain(|k, _| *k < 100);
        shrink_sparse(&mut map);
        assert!(map.capacity() < full / 16, "{} of {full} left for 100 entries", map.capacity());
        assert!(map.capacity() >= 200, "room to grow again: {}", map.capacity());
        map.clear();
        shrink_sparse(&mut map);
        assert!(map.capacity() <= SHRINK_ABOVE, "{}", map.capacity());
    }

    #[test]
    fn trims_only_after_many_closed_connections() {
        let t = Trimmer::default();
        for _ in 0..TRIM_AFTER_CLOSED - 1 {
            t.connection_closed();
        }
        assert!(!t.maybe_trim());
        t.connection_closed();
        assert!(t.maybe_trim());
        assert!(!t.maybe_trim(), "the count starts again");
    }
}
