//! The lock-free double buffer of one tag: the per-ID hot path.
//!
//! A [`Segment`] is a committed range `[start, end)` with an atomic cursor; taking IDs is one
//! `fetch_add`. A [`DoubleBuffer`] publishes the current segment and the committed segments
//! queued after it (Leaf's `next`, and for a hot tag a few spares behind it) as one immutable
//! [`Buffers`] value through `ArcSwap`, so readers never lock: switching to the next segment is
//! a compare-and-swap of that value, and only the tag's actor installs new segments.
//!
//! Rules the actor and the request path share:
//! - Only the actor installs segments ([`DoubleBuffer::install`]), one refill at a time, in
//!   commit order; a segment goes to the end of the queue (or becomes `current`).
//! - The request path moves the queue up once `current` is exhausted: queued segments need no
//!   actor to come into use, so a busy actor thread is not on the request path either.
//! - The request path asks for a refill (returns `want_refill`) at most once per refill: when
//!   more than 10% of `current` is used and fewer segments are queued than the actor's target
//!   depth (1 = Leaf's preload rule: no `next` yet), or when nothing is left. The actor clears
//!   the request flag when the refill ends.
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use leaf_api::types::SegmentView;

/// One committed range of IDs.
#[derive(Debug)]
pub struct Segment {
    start: i64,
    end: i64,
    /// IDs handed out so far (may run past `len` by the amounts of racing takers).
    taken: AtomicU64,
}

impl Segment {
    /// A segment over `[start, end)`; `None` unless `0 <= start < end` (the range crossed the
    /// network: a release build must never serve from a range without an end).
    pub fn new(start: i64, end: i64) -> Option<Self> {
        (0 <= start && start < end).then(|| Segment { start, end, taken: AtomicU64::new(0) })
    }

    fn len(&self) -> u64 {
        (self.end - self.start) as u64
    }

    /// Takes up to `n` IDs: `(first, count, used_after)`, or `None` when exhausted.
    #[inline]
    fn take(&self, n: u64) -> Option<(i64, u64, u64)> {
        let len = self.len();
        // Check first so `taken` stays near `len` and can never wrap around.
        if self.taken.load(Ordering::Relaxed) >= len {
            return None;
        }
        let off = self.taken.fetch_add(n, Ordering::Relaxed);
        if off >= len {
            return None;
        }
        let got = n.min(len - off);
        // off < len <= i64::MAX - start, so this cannot overflow.
        Some((self.start + off as i64, got, off + got))
    }

    pub fn is_exhausted(&self) -> bool {
        self.taken.load(Ordering::Relaxed) >= self.len()
    }

    /// The monitor's view of this segment.
    pub fn view(&self) -> SegmentView {
        let used = self.taken.load(Ordering::Relaxed).min(self.len());
        SegmentView {
            start: self.start,
            position: self.start + used as i64,
            end: self.end,
            step: self.end - self.start,
        }
    }
}

/// Most committed segments queued after `current`.
pub const MAX_QUEUED: usize = 8;

/// The buffers as one immutable value.
#[derive(Debug, Default)]
pub struct Buffers {
    pub current: Option<Arc<Segment>>,
    /// Committed segments after `current`, oldest first: `next`, then spares.
    pub queued: Vec<Arc<Segment>>,
}

/// What a take produced besides the IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakeOutcome {
    /// IDs still missing (0 when the request was served in full).
    pub missing: u64,
    /// The caller must ask the actor for a refill (this call won the request flag).
    pub want_refill: bool,
}

/// A tag's double buffer.
#[derive(Debug)]
pub struct DoubleBuffer {
    bufs: ArcSwap<Buffers>,
    refill_requested: AtomicBool,
    /// Segments the actor wants queued after `current` (1 to [`MAX_QUEUED`]).
    depth: AtomicUsize,
}

impl Default for DoubleBuffer {
    fn default() -> Self {
        DoubleBuffer { bufs: ArcSwap::default(), refill_requested: AtomicBool::new(false), depth: AtomicUsize::new(1) }
    }
}

impl DoubleBuffer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes up to `n` IDs, calling `sink(first, count)` for each contiguous run, in increasing
    /// order. Never blocks and never locks.
    #[inline]
    pub fn take(&self, n: u64, mut sink: impl FnMut(i64, u64)) -> TakeOutcome {
        let mut missing = n;
        let mut refill = false;
        loop {
            let g = self.bufs.load();
            if let Some(cur) = &g.current {
                if let Some((first, got, used)) = cur.take(missing) {
                    sink(first, got);
                    missing -= got;
                    // Leaf's preload rule: more than 10% used and the queue short of its depth.
                    let short = g.queued.len() < self.depth.load(Ordering::Relaxed);
                    if short && used.saturating_mul(10) > cur.len() {
                        refill = true;
                    }
                    if missing == 0 {
                        break;
                    }
                }
                if let Some((next, rest)) = g.queued.split_first() {
                    // Current is exhausted: move the queue up. If another thread won, reload.
                    let promoted = Arc::new(Buffers { current: Some(next.clone()), queued: rest.to_vec() });
                    self.bufs.compare_and_swap(&*g, promoted);
                    continue;
                }
            }
            refill = true;
            break;
        }
        let want_refill = refill && self.request_refill();
        TakeOutcome { missing, want_refill }
    }

    /// Sets the refill flag; true if this call set it.
    fn request_refill(&self) -> bool {
        !self.refill_requested.load(Ordering::Relaxed) && !self.refill_requested.swap(true, Ordering::AcqRel)
    }

    /// Marks the refill as finished (actor only), so the next trigger asks again.
    pub fn refill_done(&self) {
        self.refill_requested.store(false, Ordering::Release);
    }

    pub fn refill_requested(&self) -> bool {
        self.refill_requested.load(Ordering::Relaxed)
    }

    /// Sets how many segments the actor wants queued after `current` (actor only).
    pub fn set_depth(&self, depth: usize) {
        self.depth.store(depth.clamp(1, MAX_QUEUED), Ordering::Relaxed);
    }

    /// Installs a newly committed segment (actor only) after the live ones: as `current` if
    /// nothing is live (the queue moves up first), otherwise at the end of the queue. Returns
    /// false if [`MAX_QUEUED`] segments were queued and this one was dropped (its IDs are
    /// skipped, never reused).
    pub fn install(&self, seg: Segment) -> bool {
        let seg = Arc::new(seg);
        let mut stored = true;
        self.bufs.rcu(|b| {
            let live = b.current.as_ref().filter(|c| !c.is_exhausted());
            let mut all: Vec<Arc<Segment>> = live.into_iter().chain(&b.queued).cloned().collect();
            stored = all.len() <= MAX_QUEUED;
            if stored {
                all.push(seg.clone());
            }
            let mut all = all.into_iter();
            Buffers { current: all.next(), queued: all.collect() }
        });
        stored
    }

    /// Drops every segment that starts below `first_kept` (actor only): a daily tag's
    /// segments of a past day at midnight. Returns the IDs dropped (skipped, never reused). A
    /// request already inside a dropped segment may still finish taking from it.
    pub fn retire_below(&self, first_kept: i64) -> u64 {
        let mut dropped = 0;
        self.bufs.rcu(|b| {
            dropped = 0;
            let mut kept = Vec::new();
            for s in b.current.iter().chain(&b.queued) {
                if s.start < first_kept {
                    dropped += s.len() - s.taken.load(Ordering::Relaxed).min(s.len());
                } else {
                    kept.push(s.clone());
                }
            }
            let mut kept = kept.into_iter();
            Buffers { current: kept.next(), queued: kept.collect() }
        });
        dropped
    }

    /// True when a request could be served without waiting for the actor.
    pub fn has_ids(&self) -> bool {
        let g = self.bufs.load();
        g.current.as_ref().is_some_and(|c| !c.is_exhausted()) || !g.queued.is_empty()
    }

    /// Segments queued after `current`.
    pub fn queued(&self) -> usize {
        self.bufs.load().queued.len()
    }

    /// True when no `next` segment is loaded.
    pub fn next_missing(&self) -> bool {
        self.queued() == 0
    }

    /// IDs left in `current` and the queue.
    pub fn buffered_ids(&self) -> u64 {
        let g = self.bufs.load();
        g.current.iter().chain(&g.queued).map(|s| s.len() - s.taken.load(Ordering::Relaxed).min(s.len())).sum()
    }

    /// The current segment and the queue, for the monitor.
    pub fn views(&self) -> (Option<SegmentView>, Vec<SegmentView>) {
        let g = self.bufs.load();
        (g.current.as_ref().map(|s| s.view()), g.queued.iter().map(|s| s.view()).collect())
    }
}

#[cfg(test)]
#[allow(clippy::inconsistent_digit_grouping)] // daily IDs as yyyyMMdd_counter
mod tests {
    use super::*;

    fn seg(start: i64, end: i64) -> Segment {
        Segment::new(start, end).expect("a valid range")
    }
    use std::collections::HashSet;

    fn collect(buf: &DoubleBuffer, n: u64) -> (Vec<i64>, TakeOutcome) {
        let mut ids = Vec::new();
        let out = buf.take(n, |first, count| ids.extend((0..count as i64).map(|i| first + i)));
        (ids, out)
    }

    /// A daily tag at midnight: yesterday's segments go, today's stay in order.
    #[test]
    fn segments_of_past_days_are_retired() {
        let buf = DoubleBuffer::new();
        buf.set_depth(MAX_QUEUED);
        for (s, e) in [(20261123_001, 20261123_011), (20261123_011, 20261123_021), (20261124_001, 20261124_011)] {
            assert!(buf.install(seg(s, e)));
        }
        assert_eq!(collect(&buf, 3).0, vec![20261123_001, 20261123_002, 20261123_003]);
        // 7 left in the first, 10 in the second.
        assert_eq!(buf.retire_below(20261124_000), 17);
        assert_eq!(collect(&buf, 2).0, vec![20261124_001, 20261124_002]);
        assert_eq!(buf.retire_below(20261124_000), 0, "nothing of a past day is left");
    }

    #[test]
    fn empty_buffer_asks_for_a_refill_once() {
        let b = DoubleBuffer::new();
        let (ids, out) = collect(&b, 1);
        assert!(ids.is_empty());
        assert_eq!(out, TakeOutcome { missing: 1, want_refill: true });
        assert_eq!(collect(&b, 1).1, TakeOutcome { missing: 1, want_refill: false });
        b.refill_done();
        assert!(collect(&b, 1).1.want_refill);
    }

    #[test]
    fn preload_after_ten_percent_and_switch_on_exhaustion() {
        let b = DoubleBuffer::new();
        assert!(b.install(seg(100, 200)));
        // 10 of 100 used: exactly 10%, not more — no preload yet.
        let (ids, out) = collect(&b, 10);
        assert_eq!(ids, (100..110).collect::<Vec<_>>());
        assert!(!out.want_refill);
        let (_, out) = collect(&b, 1);
        assert!(out.want_refill, "11% used must trigger the preload");
        assert!(b.install(seg(500, 510)));
        b.refill_done();
        // The batch crosses from current into next, in order.
        let (ids, out) = collect(&b, 95);
        let mut want: Vec<i64> = (111..200).collect();
        want.extend(500..506);
        assert_eq!(ids, want);
        assert_eq!(out.missing, 0);
        assert!(out.want_refill, "60% of the promoted segment used and no next");
        let (ids, out) = collect(&b, 10);
        assert_eq!(ids, (506..510).collect::<Vec<_>>());
        assert_eq!(out.missing, 6);
        assert!(!b.has_ids());
    }

    #[test]
    fn installs_queue_in_order_up_to_the_limit() {
        let b = DoubleBuffer::new();
        for i in 0..=MAX_QUEUED as i64 {
            assert!(b.install(seg(i * 5, i * 5 + 5)));
        }
        assert!(!b.install(seg(1000, 1005)), "a queue beyond MAX_QUEUED is refused");
        let (ids, _) = collect(&b, 1000);
        assert_eq!(ids, (0..5 * (MAX_QUEUED as i64 + 1)).collect::<Vec<_>>());
    }

    /// The request path moves the queue up itself: with the actor silent, every queued segment
    /// is served in order, and a short queue asks for a refill only below the actor's depth.
    #[test]
    fn queued_segments_come_into_use_without_the_actor() {
        let b = DoubleBuffer::new();
        for s in [0, 10, 20] {
            assert!(b.install(seg(s, s + 10)));
        }
        assert_eq!(b.buffered_ids(), 30);
        let mut got = Vec::new();
        for _ in 0..30 {
            let (ids, out) = collect(&b, 1);
            assert_eq!(out.missing, 0);
            got.extend(ids);
        }
        assert_eq!(got, (0..30).collect::<Vec<_>>());
        assert!(!b.has_ids());

        let b = DoubleBuffer::new();
        assert!(b.install(seg(0, 10)));
        assert!(b.install(seg(10, 20)));
        assert!(!collect(&b, 5).1.want_refill, "next loaded at depth 1: nothing to do");
        b.set_depth(2);
        assert!(collect(&b, 1).1.want_refill, "the queue is short of depth 2");
        assert!(b.install(seg(20, 30)));
        b.refill_done();
        assert!(!collect(&b, 1).1.want_refill);
        let (cur, queued) = b.views();
        assert_eq!(cur.map(|v| v.position), Some(7));
        assert_eq!(queued.iter().map(|v| v.start).collect::<Vec<_>>(), vec![10, 20]);
        assert_eq!(b.buffered_ids(), 23);
    }

    #[test]
    fn segment_at_the_top_of_the_range_never_overflows() {
        let b = DoubleBuffer::new();
        b.install(seg(i64::MAX - 3, i64::MAX));
        let (ids, out) = collect(&b, 100_000);
        assert_eq!(ids, vec![i64::MAX - 3, i64::MAX - 2, i64::MAX - 1]);
        assert_eq!(out.missing, 100_000 - 3);
        for _ in 0..1000 {
            assert!(collect(&b, 100_000).0.is_empty());
        }
    }

    #[test]
    fn concurrent_takers_get_unique_ids_across_switches() {
        let b = Arc::new(DoubleBuffer::new());
        let stop = Arc::new(AtomicBool::new(false));
        // A refiller standing in for the actor: installs 10-ID segments on request.
        let refiller = {
            let (b, stop) = (b.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut next = 0;
                while !stop.load(Ordering::Relaxed) {
                    if b.refill_requested() {
                        if b.next_missing() && b.install(seg(next, next + 10)) {
                            next += 10;
                        }
                        b.refill_done();
                    }
                    std::thread::yield_now();
                }
                next
            })
        };
        let takers: Vec<_> = (0..4)
            .map(|t| {
                let b = b.clone();
                std::thread::spawn(move || {
                    let mut got = Vec::new();
                    while got.len() < 20_000 {
                        let n = 1 + (got.len() as u64 + t) % 7;
                        let before = got.len();
                        b.take(n, |f, c| got.extend((0..c as i64).map(|i| f + i)));
                        assert!(got[before..].windows(2).all(|w| w[0] < w[1]), "a batch is not increasing");
                        std::thread::yield_now();
                    }
                    got
                })
            })
            .collect();
        let all: Vec<i64> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        let allocated = refiller.join().unwrap();
        let set: HashSet<i64> = all.iter().copied().collect();
        assert_eq!(set.len(), all.len(), "duplicate IDs handed out");
        assert!(all.iter().all(|&id| (0..allocated).contains(&id)), "an ID outside every installed segment");
    }
}
