//! The lock-free buffer of one tag's leased ranges: the `next_id()` fast path.
//!
//! A [`Segment`] is one leased range `[start, end)` with an atomic offset; taking an ID is one
//! `fetch_add`. Segments form a singly linked list in lease order: the buffer's `head` (an
//! `ArcSwap`) is the range IDs are taken from, and each segment's `next` (an `ArcSwapOption`)
//! the range queued after it. No lock anywhere:
//! - Only the tag's refill task appends (it keeps the tail), one lease at a time: it links the
//!   lease's ranges together first and publishes them with one store into the tail's `next`.
//! - A taker that finds `head` exhausted moves `head` to its `next` with a compare-and-swap (a
//!   racing taker that lost simply reloads), so queued ranges come into use without the task.
//! - The ID at 10% of a lease (its `prefetch_at`) is handed out exactly once (the `fetch_add`
//!   hands every offset out once), and whoever gets it asks the task for the next lease.
//! - Retiring a range (snowflake freshness) pushes its offset to its length with `fetch_max`:
//!   every later take misses, and the IDs left are counted as retired, never handed out.
//!
//! A segment that `head` moved past is freed once the last taker holding it lets go.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption, Guard};
use leaf_api::ranges::IdRange;
use tokio::time::Instant;

/// A segment's cursor on a cache line of its own: takers write it on every ID, and the fields
/// every take reads (`start`, `len`, `prefetch_at`, `next`) would otherwise share its line, so
/// each write would evict them from the other cores' caches (false sharing).
#[derive(Debug)]
#[repr(align(128))]
struct Cursor(AtomicU64);

impl std::ops::Deref for Cursor {
    type Target = AtomicU64;

    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

/// One leased range of IDs.
#[derive(Debug)]
pub(crate) struct Segment {
    start: i64,
    len: u64,
    /// IDs taken so far; runs past `len` by the takers that found the range exhausted (a `u64`
    /// counting from 0 cannot wrap in practice).
    taken: Cursor,
    /// The offset whose hand-out asks for the next lease; `u64::MAX` for none in this range.
    prefetch_at: u64,
    /// Which lease the range came from: 1, 2, … (0 for the empty placeholder).
    pub lease: u64,
    /// When the request that leased the range was sent: its IDs are no older than this.
    pub leased_at: Instant,
    /// Set when the range is retired (snowflake freshness): a [`Run`] taken from it before
    /// then hands out nothing more.
    retired: AtomicBool,
    next: ArcSwapOption<Segment>,
}

impl Segment {
    /// The empty range a buffer starts with (lease 0).
    fn placeholder(now: Instant) -> Segment {
        Segment {
            start: 0,
            len: 0,
            taken: Cursor(AtomicU64::new(0)),
            prefetch_at: u64::MAX,
            lease: 0,
            leased_at: now,
            retired: AtomicBool::new(false),
            next: ArcSwapOption::empty(),
        }
    }

    /// IDs not yet taken.
    fn left(&self) -> u64 {
        self.len.saturating_sub(self.taken.load(Ordering::Relaxed))
    }
}

/// What a take found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// An ID; `prefetch` when it is the one that asks for the next lease.
    Id { id: i64, prefetch: bool },
    /// Nothing left: the current range is exhausted and nothing is queued.
    Empty,
}

/// Up to `n` consecutive IDs taken at once ([`Buffer::take_run`]), for a per-thread cache.
#[derive(Debug)]
pub(crate) struct Run {
    /// The range they came from (to notice its retirement).
    pub segment: Arc<Segment>,
    pub first: i64,
    pub count: u64,
    /// The run holds the lease's prefetch point: ask for the next lease.
    pub prefetch: bool,
}

impl Run {
    /// Whether the range the run came from was retired since (its IDs are too old).
    #[inline]
    pub fn is_retired(&self) -> bool {
        self.segment.retired.load(Ordering::Relaxed)
    }
}

/// One tag's ranges: the current one and those queued behind it.
pub(crate) struct Buffer {
    head: ArcSwap<Segment>,
}

impl Buffer {
    /// An empty buffer, and its tail (the placeholder) for the refill task.
    pub fn new(now: Instant) -> (Buffer, Arc<Segment>) {
        let placeholder = Arc::new(Segment::placeholder(now));
        (Buffer { head: ArcSwap::new(placeholder.clone()) }, placeholder)
    }

    /// Takes one ID: lock-free, no allocation, no syscall, no clock.
    #[inline]
    pub fn take(&self) -> Taken {
        loop {
            let seg = self.head.load();
            let off = seg.taken.fetch_add(1, Ordering::Relaxed);
            if off < seg.len {
                // off < len <= i64::MAX - start: no overflow.
                return Taken::Id { id: seg.start + off as i64, prefetch: off == seg.prefetch_at };
            }
            match seg.next.load_full() {
                Some(next) => {
                    // Lost races are fine: someone else moved head on; reload it.
                    let _ = self.head.compare_and_swap(&seg, next);
                }
                None => return Taken::Empty,
            }
        }
    }

    /// Takes up to `n` (≥ 1) consecutive IDs with one `fetch_add`: what is left of the current
    /// range when fewer; `None` when nothing is left. Offsets past the range's end are lost to
    /// nobody: they were never IDs.
    pub fn take_run(&self, n: u64) -> Option<Run> {
        loop {
            let seg = self.head.load();
            let off = seg.taken.fetch_add(n, Ordering::Relaxed);
            if off < seg.len {
                let count = n.min(seg.len - off);
                let prefetch = (off..off + count).contains(&seg.prefetch_at);
                // off < len <= i64::MAX - start: no overflow.
                let first = seg.start + off as i64;
                return Some(Run { segment: Guard::into_inner(seg), first, count, prefetch });
            }
            match seg.next.load_full() {
                Some(next) => {
                    let _ = self.head.compare_and_swap(&seg, next);
                }
                None => return None,
            }
        }
    }

    /// The lease of the current range.
    pub fn head_lease(&self) -> u64 {
        self.head.load().lease
    }

    /// Nothing can be taken: the current range is exhausted and nothing is queued.
    pub fn is_dry(&self) -> bool {
        let mut seg = self.head.load_full();
        loop {
            if seg.left() > 0 {
                return false;
            }
            match seg.next.load_full() {
                Some(next) => seg = next,
                None => return true,
            }
        }
    }

    /// IDs leased and neither taken nor retired.
    pub fn left(&self) -> u64 {
        let mut seg = self.head.load_full();
        let mut left = seg.left();
        while let Some(next) = seg.next.load_full() {
            left += next.left();
            seg = next;
        }
        left
    }

    /// Appends one lease's ranges after `tail` (only the refill task calls this, with the tail
    /// it was given or the one this returned) and returns the new tail. The ID at 10% of the
    /// lease asks for the next one. `ranges` must be well-formed (validated by the caller).
    pub fn append(tail: &Arc<Segment>, ranges: &[IdRange], lease: u64, leased_at: Instant) -> Arc<Segment> {
        let total: u64 = ranges.iter().map(IdRange::len).sum();
        // Where in the lease the prefetch point falls: (range index, offset in that range).
        let mut prefetch = (usize::MAX, u64::MAX);
        let mut skip = total / 10;
        for (i, r) in ranges.iter().enumerate() {
            if skip < r.len() {
                prefetch = (i, skip);
                break;
            }
            skip -= r.len();
        }
        let mut next: Option<Arc<Segment>> = None;
        let mut last: Option<Arc<Segment>> = None;
        for (i, r) in ranges.iter().enumerate().rev() {
            let seg = Arc::new(Segment {
                start: r.start,
                len: r.len(),
                taken: Cursor(AtomicU64::new(0)),
                prefetch_at: if i == prefetch.0 { prefetch.1 } else { u64::MAX },
                lease,
                leased_at,
                retired: AtomicBool::new(false),
                next: ArcSwapOption::new(next.take()),
            });
            last.get_or_insert_with(|| seg.clone());
            next = Some(seg);
        }
        match (next, last) {
            (Some(first), Some(last)) => {
                tail.next.store(Some(first));
                last
            }
            _ => tail.clone(),
        }
    }

    /// Retires every range leased at or before `cutoff` (the list is in lease order, so it
    /// stops at the first later one): none of their IDs is handed out any more. Returns how
    /// many IDs were retired.
    pub fn retire_leased_until(&self, cutoff: Instant) -> u64 {
        let mut retired = 0;
        let mut seg = self.head.load_full();
        loop {
            if seg.leased_at > cutoff {
                return retired;
            }
            seg.retired.store(true, Ordering::Relaxed);
            let before = seg.taken.fetch_max(seg.len, Ordering::Relaxed);
            retired += seg.len.saturating_sub(before);
            match seg.next.load_full() {
                Some(next) => seg = next,
                None => return retired,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(start: i64, end: i64) -> IdRange {
        IdRange { start, end }
    }

    fn drain(b: &Buffer) -> Vec<(i64, bool)> {
        let mut out = Vec::new();
        while let Taken::Id { id, prefetch } = b.take() {
            out.push((id, prefetch));
        }
        out
    }

    #[test]
    fn takes_every_id_of_every_range_once_in_order_and_asks_at_ten_percent() {
        let now = Instant::now();
        let (b, tail) = Buffer::new(now);
        assert_eq!(b.take(), Taken::Empty);
        assert!(b.is_dry());
        let tail = Buffer::append(&tail, &[r(10, 13), r(20, 27)], 1, now);
        let tail = Buffer::append(&tail, &[r(100, 120)], 2, now);
        assert_eq!(tail.lease, 2);
        assert_eq!(b.left(), 30);
        let got = drain(&b);
        let ids: Vec<i64> = got.iter().map(|g| g.0).collect();
        let want: Vec<i64> = (10..13).chain(20..27).chain(100..120).collect();
        assert_eq!(ids, want);
        // Lease 1 holds 10 IDs: the 2nd (offset 1) asks; lease 2 holds 20: offset 2.
        let asks: Vec<i64> = got.iter().filter(|g| g.1).map(|g| g.0).collect();
        assert_eq!(asks, vec![11, 102]);
        assert_eq!(b.take(), Taken::Empty);
        assert!(b.is_dry());
        assert_eq!(b.left(), 0);
        assert_eq!(b.head_lease(), 2);
    }

    #[test]
    fn a_range_ending_at_the_largest_id_never_wraps() {
        let now = Instant::now();
        let (b, tail) = Buffer::new(now);
        Buffer::append(&tail, &[r(i64::MAX - 2, i64::MAX)], 1, now);
        assert_eq!(drain(&b).len(), 2);
        for _ in 0..1000 {
            assert_eq!(b.take(), Taken::Empty);
        }
    }

    #[test]
    fn retiring_stops_at_the_first_fresh_range_and_counts_what_was_left() {
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_secs(1);
        let (b, tail) = Buffer::new(t0);
        let tail = Buffer::append(&tail, &[r(0, 10)], 1, t0);
        Buffer::append(&tail, &[r(50, 60)], 2, t1);
        for _ in 0..4 {
            b.take();
        }
        assert_eq!(b.retire_leased_until(t0), 6);
        assert_eq!(b.left(), 10);
        assert!(!b.is_dry());
        assert_eq!(drain(&b).first().map(|g| g.0), Some(50));
        assert_eq!(b.retire_leased_until(t1), 0);
    }

    #[test]
    fn concurrent_takers_get_each_id_exactly_once() {
        let now = Instant::now();
        let (b, mut tail) = Buffer::new(now);
        let mut want = 0u64;
        for lease in 1..=200u64 {
            let start = lease as i64 * 1000;
            tail =
                Buffer::append(&tail, &[r(start, start + 7), r(start + 500, start + 500 + lease as i64)], lease, now);
            want += 7 + lease;
        }
        let b = Arc::new(b);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let b = b.clone();
                std::thread::spawn(move || drain(&b).into_iter().map(|g| g.0).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<i64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        assert_eq!(all.len() as u64, want);
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len() as u64, want);
    }
}
