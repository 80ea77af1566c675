//! The cursor word's layout and one slot of the ring: a range installed under a generation,
//! written by the refill task, read by takers with seqlock validation.
use std::sync::atomic::{fence, AtomicI64, AtomicU64, Ordering};

/// Slots in the ring (a power of two, so `gen % RING` survives the generation wrapping). Tests
/// use 4, so that slots are reused under a paused reader all the time.
pub(super) const RING: usize = if cfg!(test) { 4 } else { 64 };
/// The tickets of a generation end here: a range of `len` IDs starts at ticket `END - len`, and
/// ticket `k` below `END` is the ID at offset `k - (END - len)`. A ticket at or past `END` is a
/// miss.
pub(super) const END: u32 = 1 << 31;
/// The longest range a slot holds (longer ranges are split): tickets start at `END - len ≥ 2^30`.
pub(super) const MAX_LEN: u64 = 1 << 30;
/// Misses push the ticket past `END`; past this, a taker resets it to `END` so it never carries
/// into the generation (2^30 below the carry: 16,384 takers each in flight with a 65,536-ID run).
pub(super) const CLAMP: u32 = END + (1 << 30);
/// The most IDs one take claims (a `LocalIds` chunk).
pub(super) const MAX_RUN: u64 = 1 << 16;
/// A slot's `seq` while it is written (or before its first range): no generation (a `u32`)
/// equals it.
const NO_GEN: u64 = u64::MAX;
/// `prefetch` of a range without the lease's prefetch point.
const NO_PREFETCH: u64 = u64::MAX;

/// The cursor word: the generation in the high half, the ticket in the low half.
#[inline(always)]
pub(super) fn pack(gen: u32, ticket: u32) -> u64 {
    (u64::from(gen) << 32) | u64::from(ticket)
}

/// The generation and the ticket of a cursor word.
#[inline(always)]
pub(super) fn split(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// Whether generation `a` comes before `b` (they are never 2^31 apart).
pub(super) fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// What a slot holds for one generation: everything a take needs, as a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct View {
    /// `end - END`: the ID of ticket `k` is `base + k` (wrapping; the result is in range).
    pub base: i64,
    /// The range's first ticket, `END - len`.
    pub first: u32,
    /// The ticket of the lease's prefetch point, or [`NO_PREFETCH`].
    pub prefetch: u64,
    /// When its lease was requested, in nanoseconds since the buffer's epoch.
    pub leased_ns: u64,
}

impl View {
    /// A range of `len` (`0..=MAX_LEN`) IDs from `start`, whose offset `prefetch` (if any) asks
    /// for the next lease.
    pub fn new(start: i64, len: u64, prefetch: Option<u64>, leased_ns: u64) -> View {
        let len = len.min(MAX_LEN) as u32;
        let first = END - len;
        let end = start.wrapping_add(i64::from(len));
        View {
            base: end.wrapping_sub(i64::from(END)),
            first,
            prefetch: prefetch.filter(|&o| o < u64::from(len)).map_or(NO_PREFETCH, |o| u64::from(first) + o),
            leased_ns,
        }
    }

    /// IDs in the range.
    pub fn len(&self) -> u64 {
        u64::from(END - self.first)
    }

    /// IDs not yet claimed when the generation's ticket is `ticket`.
    pub fn left(&self, ticket: u32) -> u64 {
        u64::from(END.saturating_sub(ticket.max(self.first)))
    }

    /// The IDs a claim of `n` at `ticket` (`first <= ticket < END`) got.
    #[inline(always)]
    pub fn claim(&self, ticket: u32, n: u64) -> Claim {
        let count = n.min(u64::from(END - ticket));
        let prefetch = (u64::from(ticket)..u64::from(ticket) + count).contains(&self.prefetch);
        Claim { first: self.base.wrapping_add(i64::from(ticket)), count, prefetch, leased_ns: self.leased_ns }
    }

    /// The ID of ticket `ticket` (`first <= ticket < END`), and whether it is the prefetch point.
    #[inline(always)]
    pub fn one(&self, ticket: u32) -> (i64, bool) {
        (self.base.wrapping_add(i64::from(ticket)), u64::from(ticket) == self.prefetch)
    }
}

/// Consecutive IDs claimed at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    pub first: i64,
    pub count: u64,
    /// The claim holds the lease's prefetch point: ask for the next lease.
    pub prefetch: bool,
    /// When the lease of the range was requested (ns since the buffer's epoch).
    pub leased_ns: u64,
}

/// One slot of the ring. Every field is an atomic so that a taker reading a slot while the
/// refill task rewrites it is a race the seqlock detects, not undefined behaviour.
#[derive(Debug)]
#[repr(align(64))]
pub(super) struct Slot {
    /// The generation whose range the slot holds, or [`NO_GEN`] while it is written.
    seq: AtomicU64,
    base: AtomicI64,
    first: AtomicU64,
    prefetch: AtomicU64,
    leased_ns: AtomicU64,
}

impl Slot {
    /// An empty slot (no generation).
    pub fn empty() -> Slot {
        Slot {
            seq: AtomicU64::new(NO_GEN),
            base: AtomicI64::new(0),
            first: AtomicU64::new(u64::from(END)),
            prefetch: AtomicU64::new(NO_PREFETCH),
            leased_ns: AtomicU64::new(0),
        }
    }

    /// The slot's range if it holds generation `gen` for the whole read (seqlock: `seq` before
    /// and after the fields, the fence keeping the field reads between them).
    #[inline(always)]
    pub fn read(&self, gen: u32) -> Option<View> {
        let before = self.seq.load(Ordering::Acquire);
        let view = View {
            base: self.base.load(Ordering::Relaxed),
            first: self.first.load(Ordering::Relaxed) as u32,
            prefetch: self.prefetch.load(Ordering::Relaxed),
            leased_ns: self.leased_ns.load(Ordering::Relaxed),
        };
        fence(Ordering::Acquire);
        let after = self.seq.load(Ordering::Relaxed);
        (before == u64::from(gen) && after == before).then_some(view)
    }

    /// Installs `view` as generation `gen` (the refill side only, one writer at a time).
    pub fn write(&self, gen: u32, view: &View) {
        self.seq.store(NO_GEN, Ordering::Relaxed);
        // A reader that sees any of the stores below sees `NO_GEN` (or later) in its second
        // `seq` load: it discards what it read.
        fence(Ordering::Release);
        self.base.store(view.base, Ordering::Relaxed);
        self.first.store(u64::from(view.first), Ordering::Relaxed);
        self.prefetch.store(view.prefetch, Ordering::Relaxed);
        self.leased_ns.store(view.leased_ns, Ordering::Relaxed);
        self.seq.store(u64::from(gen), Ordering::Release);
    }
}

/// Where a take may pause between its claim and its read of the slot: in tests every 8th take
/// of a thread yields its core here, so that other takers switch ranges meanwhile and the
/// slot it is about to read gets reused (the case the seqlock and the log are for).
#[inline(always)]
pub(super) fn pause_point() {
    #[cfg(test)]
    {
        use std::cell::Cell;
        thread_local!(static TAKES: Cell<u32> = const { Cell::new(0) });
        if TAKES.with(|t| {
            t.set(t.get().wrapping_add(1));
            t.get() % 8 == 0
        }) {
            std::thread::yield_now();
        }
    }
}
