//! The 1 + 41 + 10 + 12-bit layout and the lock-free generator (the per-ID hot path).
//!
//! The generator keeps the last issued `(millisecond, sequence)` in one `AtomicU64` and takes
//! IDs with a compare-and-swap, a whole run of sequence numbers at a time. It issues only while
//! it holds a worker ID on an unexpired lease, and only timestamps strictly above the floor it
//! was started with and at most the durable high-water mark (`limit`) the actor keeps ahead of
//! the clock. Everything else is reported as a [`Stall`] for the async caller to wait on or turn
//! into an error.
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rand::Rng;

use crate::clock::Clock;

pub const SEQUENCE_BITS: u32 = 12;
pub const WORKER_BITS: u32 = 10;
pub const TIMESTAMP_BITS: u32 = 41;
/// Largest sequence number in one millisecond (4,096 IDs per ms per worker).
pub const MAX_SEQUENCE: u64 = (1 << SEQUENCE_BITS) - 1;
/// Largest worker ID.
pub const MAX_WORKER: u16 = (1 << WORKER_BITS) - 1;
const MAX_TIMESTAMP: i64 = (1 << TIMESTAMP_BITS) - 1;
const NO_WORKER: u32 = u32::MAX;

/// The bit layout of an ID: sign 0, then milliseconds since `epoch_ms`, worker ID, sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub epoch_ms: i64,
}

/// The parts of an ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// Unix milliseconds.
    pub timestamp_ms: i64,
    pub worker_id: u16,
    pub sequence: u16,
}

impl Layout {
    /// The last Unix millisecond the layout can express.
    pub fn max_ms(&self) -> i64 {
        self.epoch_ms.saturating_add(MAX_TIMESTAMP)
    }

    /// The ID of `sequence` in millisecond `relative_ms` (since the epoch) of `worker_id`.
    fn compose(relative_ms: u64, worker_id: u16, sequence: u64) -> i64 {
        ((relative_ms << (WORKER_BITS + SEQUENCE_BITS)) | ((worker_id as u64) << SEQUENCE_BITS) | sequence) as i64
    }

    /// Splits an ID; `None` for a negative one (no layout produces it).
    pub fn decode(&self, id: i64) -> Option<Parts> {
        if id < 0 {
            return None;
        }
        let id = id as u64;
        Some(Parts {
            timestamp_ms: self.epoch_ms + (id >> (WORKER_BITS + SEQUENCE_BITS)) as i64,
            worker_id: ((id >> SEQUENCE_BITS) & MAX_WORKER as u64) as u16,
            sequence: (id & MAX_SEQUENCE) as u16,
        })
    }
}

/// Why the generator did not hand out (all) IDs right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// No worker ID, or its lease ran out.
    NotServing,
    /// The clock reads `by_ms` below the last issued (or floor) millisecond.
    Backwards { by_ms: i64 },
    /// This millisecond's sequence is used up.
    NextMs,
    /// The clock is past the durable high-water mark; the actor must raise it first.
    Window,
    /// The clock is outside the layout's 69 years (before the epoch or after its end).
    OutOfRange,
}

/// Lock-free snowflake generator of one node.
pub struct Generator {
    layout: Layout,
    clock: Arc<dyn Clock>,
    /// Each millisecond's sequence starts at a random value below this (at least 1).
    random_start: u64,
    /// `(ms since epoch) << 12 | sequence` of the last issued ID (or of the floor).
    last: AtomicU64,
    /// Highest Unix millisecond that may be issued (durably recorded).
    limit_ms: AtomicI64,
    /// The worker ID, or `NO_WORKER`.
    worker: AtomicU32,
    /// Lease end, in milliseconds of the monotonic clock since `anchor`.
    lease_until: AtomicU64,
    anchor: Instant,
}

impl Generator {
    pub fn new(layout: Layout, clock: Arc<dyn Clock>, random_start: u16) -> Self {
        Generator {
            layout,
            clock,
            random_start: (random_start as u64).max(1),
            last: AtomicU64::new(0),
            limit_ms: AtomicI64::new(i64::MIN),
            worker: AtomicU32::new(NO_WORKER),
            lease_until: AtomicU64::new(0),
            anchor: Instant::now(),
        }
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    fn mono_ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.anchor).as_millis() as u64
    }

    /// Starts issuing as `worker_id`, strictly after Unix millisecond `floor_ms`, up to
    /// `limit_ms`, until the monotonic instant `lease_until`.
    pub fn start(&self, worker_id: u16, floor_ms: i64, limit_ms: i64, lease_until: Instant) {
        // The floor's millisecond counts as used up: the first ID is in a later millisecond.
        let floor_rel = floor_ms.saturating_sub(self.layout.epoch_ms).clamp(-1, MAX_TIMESTAMP);
        let last = if floor_rel < 0 { 0 } else { ((floor_rel as u64) << SEQUENCE_BITS) | MAX_SEQUENCE };
        self.stop();
        self.last.store(last, Ordering::SeqCst);
        self.limit_ms.store(limit_ms, Ordering::SeqCst);
        self.lease_until.store(self.mono_ms(lease_until), Ordering::SeqCst);
        self.worker.store(worker_id as u32, Ordering::SeqCst);
    }

    /// Stops issuing (lease lost, worker ID lost, shutdown).
    pub fn stop(&self) {
        self.worker.store(NO_WORKER, Ordering::SeqCst);
    }

    /// Raises the durable high-water mark (never lowers it).
    pub fn raise_limit(&self, limit_ms: i64) {
        self.limit_ms.fetch_max(limit_ms, Ordering::SeqCst);
    }

    /// Extends the lease to the monotonic instant `until` (never shortens it).
    pub fn extend_lease(&self, until: Instant) {
        self.lease_until.fetch_max(self.mono_ms(until), Ordering::SeqCst);
    }

    pub fn limit_ms(&self) -> i64 {
        self.limit_ms.load(Ordering::SeqCst)
    }

    /// The Unix millisecond of the last issued ID (or of the floor); `None` before the epoch.
    pub fn last_ms(&self) -> Option<i64> {
        let last = self.last.load(Ordering::SeqCst);
        (last != 0).then(|| self.layout.epoch_ms + (last >> SEQUENCE_BITS) as i64)
    }

    pub fn worker_id(&self) -> Option<u16> {
        let w = self.worker.load(Ordering::SeqCst);
        (w != NO_WORKER).then_some(w as u16)
    }

    /// Lease time left, `None` when not serving.
    pub fn lease_remaining_ms(&self) -> Option<u64> {
        self.worker_id()?;
        Some(self.lease_until.load(Ordering::SeqCst).saturating_sub(self.mono_ms(Instant::now())))
    }

    /// Whether the generator holds a worker ID on a live lease.
    pub fn serving(&self) -> bool {
        self.lease_remaining_ms().is_some_and(|r| r > 0)
    }

    /// Takes up to `n` IDs from the current millisecond, calling `sink(first, count)` with one
    /// run of consecutive IDs; returns how many it took (at least 1) or why none.
    pub fn try_take(&self, n: u64, sink: &mut impl FnMut(i64, u64)) -> Result<u64, Stall> {
        let worker = self.worker.load(Ordering::Acquire);
        if worker == NO_WORKER {
            return Err(Stall::NotServing);
        }
        if self.mono_ms(Instant::now()) >= self.lease_until.load(Ordering::Acquire) {
            return Err(Stall::NotServing);
        }
        let worker = worker as u16;
        let n = n.max(1);
        loop {
            // Load the last issued ID before reading the clock: if the clock then reads below
            // it, the clock really went back (it was read after whoever issued that ID read it).
            let cur = self.last.load(Ordering::Acquire);
            let now = self.clock.now_ms();
            if now > self.limit_ms.load(Ordering::Acquire) {
                return Err(Stall::Window);
            }
            let rel = now - self.layout.epoch_ms;
            if !(0..=MAX_TIMESTAMP).contains(&rel) {
                return Err(Stall::OutOfRange);
            }
            let rel = rel as u64;
            let (last_ms, seq) = (cur >> SEQUENCE_BITS, cur & MAX_SEQUENCE);
            let (first, count, next) = if rel < last_ms {
                return Err(Stall::Backwards { by_ms: (last_ms - rel) as i64 });
            } else if rel == last_ms {
                if seq >= MAX_SEQUENCE {
                    return Err(Stall::NextMs);
                }
                let count = n.min(MAX_SEQUENCE - seq);
                (seq + 1, count, cur + count)
            } else {
                let start = if self.random_start > 1 { rand::thread_rng().gen_range(0..self.random_start) } else { 0 };
                let count = n.min(MAX_SEQUENCE + 1 - start);
                (start, count, (rel << SEQUENCE_BITS) | (start + count - 1))
            };
            if self.last.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                sink(Layout::compose(rel, worker, first), count);
                return Ok(count);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;

    const EPOCH: i64 = 1_288_834_974_657;
    const NOW: i64 = 1_700_000_000_000;

    fn generator(random_start: u16) -> (Arc<ManualClock>, Generator) {
        let clock = Arc::new(ManualClock::new(NOW));
        let g = Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), random_start);
        g.start(7, NOW - 1, NOW + 3000, Instant::now() + Duration::from_secs(60));
        (clock, g)
    }

    fn take(g: &Generator, n: u64) -> Result<Vec<i64>, Stall> {
        let mut out = Vec::new();
        let mut left = n;
        while left > 0 {
            left -= g.try_take(left, &mut |first, c| out.extend(first..first + c as i64))?;
        }
        Ok(out)
    }

    #[test]
    fn layout_round_trips_and_matches_leaf() {
        let l = Layout { epoch_ms: EPOCH };
        let id = Layout::compose((NOW - EPOCH) as u64, 1023, 4095);
        assert_eq!(l.decode(id), Some(Parts { timestamp_ms: NOW, worker_id: 1023, sequence: 4095 }));
        // Leaf: ((timestamp - twepoch) << 22) | (workerId << 12) | sequence.
        assert_eq!(Layout::compose(1, 1, 1), (1 << 22) | (1 << 12) | 1);
        assert_eq!(l.decode(-1), None);
        assert_eq!(l.max_ms() - EPOCH, (1 << 41) - 1);
        // The largest timestamp still gives a positive ID.
        assert!(Layout::compose(MAX_TIMESTAMP as u64, 1023, 4095) > 0);
    }

    #[test]
    fn ids_increase_and_carry_the_worker() {
        let (clock, g) = generator(100);
        let a = take(&g, 10).unwrap();
        clock.advance(1);
        let b = take(&g, 10).unwrap();
        let all: Vec<i64> = a.iter().chain(&b).copied().collect();
        assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
        let l = g.layout();
        for id in &all {
            assert_eq!(l.decode(*id).unwrap().worker_id, 7);
        }
        assert_eq!(l.decode(a[0]).unwrap().timestamp_ms, NOW);
        assert_eq!(l.decode(b[0]).unwrap().timestamp_ms, NOW + 1);
        assert!(l.decode(a[0]).unwrap().sequence < 100, "the random start is below 100");
    }

    #[test]
    fn sequence_overflow_moves_to_the_next_millisecond() {
        let (clock, g) = generator(0);
        let first = take(&g, 4096).unwrap();
        assert_eq!(first.len(), 4096);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::NextMs));
        clock.advance(1);
        let next = take(&g, 1).unwrap();
        let l = g.layout();
        assert_eq!(l.decode(next[0]).unwrap(), Parts { timestamp_ms: NOW + 1, worker_id: 7, sequence: 0 });
        assert!(next[0] > first[4095]);
    }

    #[test]
    fn never_at_or_below_the_floor() {
        let clock = Arc::new(ManualClock::new(NOW));
        let g = Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), 0);
        g.start(1, NOW + 5, NOW + 3000, Instant::now() + Duration::from_secs(60));
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Backwards { by_ms: 5 }));
        clock.set(NOW + 5);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::NextMs), "the floor's own millisecond is used up");
        clock.set(NOW + 6);
        let id = take(&g, 1).unwrap()[0];
        assert_eq!(g.layout().decode(id).unwrap().timestamp_ms, NOW + 6);
    }

    #[test]
    fn rollback_is_reported_not_issued() {
        let (clock, g) = generator(0);
        take(&g, 1).unwrap();
        clock.advance(-3);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Backwards { by_ms: 3 }));
    }

    #[test]
    fn window_lease_and_worker_gate_issuing() {
        let (clock, g) = generator(0);
        clock.set(NOW + 3001);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Window));
        g.raise_limit(NOW + 6000);
        g.raise_limit(NOW);
        assert_eq!(g.limit_ms(), NOW + 6000, "limits never go down");
        assert!(take(&g, 1).is_ok());
        g.stop();
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::NotServing));
        assert!(!g.serving());
        // A lease that has run out stops the generator by itself.
        g.start(7, NOW + 3001, NOW + 6000, Instant::now() + Duration::from_millis(30));
        clock.set(NOW + 3002);
        assert!(take(&g, 1).is_ok());
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::NotServing));
    }

    #[test]
    fn clock_outside_the_layout_is_refused() {
        let clock = Arc::new(ManualClock::new(EPOCH - 1));
        let g = Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), 0);
        g.start(1, i64::MIN, i64::MAX, Instant::now() + Duration::from_secs(60));
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::OutOfRange));
        clock.set(g.layout().max_ms() + 1);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::OutOfRange));
        clock.set(g.layout().max_ms());
        assert!(take(&g, 1).unwrap()[0] > 0);
    }

    #[test]
    fn concurrent_takers_never_share_an_id() {
        let clock: Arc<dyn Clock> = Arc::new(crate::clock::SystemClock::new(0));
        let g = Arc::new(Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), 100));
        let now = clock.now_ms();
        g.start(3, now - 1, now + 600_000, Instant::now() + Duration::from_secs(600));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    while out.len() < 50_000 {
                        match g.try_take(7, &mut |f, c| out.extend(f..f + c as i64)) {
                            Ok(_) | Err(Stall::NextMs) => {}
                            Err(e) => panic!("{e:?}"),
                        }
                    }
                    out
                })
            })
            .collect();
        let mut all: Vec<i64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "duplicate IDs");
    }
}
