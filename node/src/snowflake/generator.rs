//! The 1 + 41 + 10 + 12-bit layout and the lock-free generator (the per-ID hot path).
//!
//! # State
//! Everything an ID is made of lives in one `AtomicU64`, the *state word*, and IDs are taken
//! with one compare-and-swap on it per run of IDs (up to a whole millisecond's sequence):
//!
//! ```text
//! bit 63: serving | bits 53..=62: worker ID | bits 12..=52: ms since the epoch | bits 0..=11: sequence
//! ```
//!
//! (the last issued millisecond and sequence, or the floor the generator was started with).
//! A worker change ([`Generator::start`]) and [`Generator::stop`] replace the word, so a request
//! preempted across them fails its CAS and starts over: an ID's worker ID always comes from the
//! same state as its millisecond and sequence.
//!
//! # Logical milliseconds
//! The issued millisecond is the wall clock's when the clock is past the last issued one;
//! otherwise the generator keeps issuing in the last millisecond until its sequence is used up
//! and then moves to the next millisecond *ahead of the clock*. So a node restarted with a
//! floor ahead of its clock issues at once, strictly above the floor, and a burst of more than
//! 4,096 IDs per ms borrows later milliseconds instead of waiting; the clock catches up as load
//! allows. No ID is ever above the durable high-water mark (`limit`): a millisecond past it is
//! a [`Stall::Window`] for the caller to raise the mark (or, when the mark is as high as the
//! window allows, to wait for the clock).
//!
//! # Separate atomics, and why they are safe
//! The lease end and the durable mark (`limit_ms`) stay separate atomics. The state word never
//! repeats: every CAS and every [`Generator::start`] moves the position strictly up (a start
//! continues above everything issued before, whatever the worker; only the layout's very last
//! position, from which nothing can be issued, can recur), and [`Generator::stop`] clears the
//! serving bit. So a request whose CAS succeeds knows that no start or stop came
//! between its load of the word and its CAS; it reads the lease and the limit in between, and
//! `start` stores them *after* stopping and *before* publishing the new word, so what it read
//! is the value stored by the start of the word it issues from, or a later extension or raise.
//! The actor only ever raises the limit to a mark it has fsynced for the worker then serving,
//! and extends only that worker's lease. A stale read can therefore only be lower than the
//! current value: it can make a request stall (a spurious `Window` or `NotServing`), never
//! issue above a durable mark or under another worker's lease. (As with any lease, a request
//! that checked the lease and then stalls past its end before the CAS issues late; the state
//! machine hands a worker ID over only a whole lease after that.)
//!
//! `wall_ms`, the highest wall-clock reading, only serves the clock-moved-backwards check; it
//! never decides which ID is issued.
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::SeqCst};
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
/// The position part of the state word: `ms << 12 | sequence`, ordered like the IDs of one worker.
const POSITION_BITS: u32 = TIMESTAMP_BITS + SEQUENCE_BITS;
const MAX_POSITION: u64 = (1 << POSITION_BITS) - 1;
const SERVING: u64 = 1 << 63;

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
            timestamp_ms: self.epoch_ms.saturating_add((id >> (WORKER_BITS + SEQUENCE_BITS)) as i64),
            worker_id: ((id >> SEQUENCE_BITS) & MAX_WORKER as u64) as u16,
            sequence: (id & MAX_SEQUENCE) as u16,
        })
    }

    /// Milliseconds since the epoch of Unix millisecond `ms`, `None` outside the layout.
    fn relative(&self, ms: i64) -> Option<u64> {
        ms.checked_sub(self.epoch_ms).filter(|r| (0..=MAX_TIMESTAMP).contains(r)).map(|r| r as u64)
    }
}

/// The state word, unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct State {
    serving: bool,
    worker: u16,
    /// `ms << 12 | sequence` of the last issued ID (or of the floor).
    position: u64,
}

impl State {
    fn unpack(word: u64) -> State {
        State {
            serving: word & SERVING != 0,
            worker: ((word >> POSITION_BITS) & MAX_WORKER as u64) as u16,
            position: word & MAX_POSITION,
        }
    }

    fn pack(self) -> u64 {
        (if self.serving { SERVING } else { 0 })
            | ((self.worker as u64 & MAX_WORKER as u64) << POSITION_BITS)
            | (self.position & MAX_POSITION)
    }

    fn ms(self) -> u64 {
        self.position >> SEQUENCE_BITS
    }

    fn sequence(self) -> u64 {
        self.position & MAX_SEQUENCE
    }
}

/// Why the generator did not hand out (all) IDs right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// No worker ID, or its lease ran out.
    NotServing,
    /// The wall clock reads `by_ms` below the highest reading seen before (it moved back).
    Backwards { by_ms: i64 },
    /// The next millisecond to issue, Unix ms `next_ms`, is above the durable high-water mark;
    /// it is `ahead_ms` ahead of the wall clock (`<= 0`: the clock itself passed the mark). The
    /// caller raises the mark, or waits for the clock when the mark may not run that far ahead.
    Window { next_ms: i64, ahead_ms: i64 },
    /// The clock, or the next millisecond, is outside the layout's 69 years.
    OutOfRange,
}

/// Lock-free snowflake generator of one node.
pub struct Generator {
    layout: Layout,
    clock: Arc<dyn Clock>,
    /// Each millisecond's sequence starts at a random value below this (at least 1).
    random_start: u64,
    /// The state word: serving bit, worker ID, last issued `(ms, sequence)`.
    state: AtomicU64,
    /// Highest Unix millisecond that may be issued (durably recorded).
    limit_ms: AtomicI64,
    /// Lease end, in milliseconds of the monotonic clock since `anchor`.
    lease_until: AtomicU64,
    /// The highest wall-clock reading so far (clock-moved-backwards check only).
    wall_ms: AtomicI64,
    anchor: Instant,
}

impl Generator {
    pub fn new(layout: Layout, clock: Arc<dyn Clock>, random_start: u16) -> Self {
        Generator {
            layout,
            clock,
            random_start: (random_start as u64).max(1),
            state: AtomicU64::new(0),
            limit_ms: AtomicI64::new(i64::MIN),
            lease_until: AtomicU64::new(0),
            wall_ms: AtomicI64::new(i64::MIN),
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

    /// Reads the wall clock as a request does, recording the reading for the
    /// clock-moved-backwards check: the actor bases its marks on readings made here, so no ID
    /// is issued while the clock reads below the reading a mark was based on.
    pub fn now_ms(&self) -> i64 {
        let now = self.clock.now_ms();
        self.wall_ms.fetch_max(now, SeqCst);
        now
    }

    fn load(&self) -> State {
        State::unpack(self.state.load(SeqCst))
    }

    /// Starts issuing as `worker_id`, strictly after Unix millisecond `floor_ms` (and after
    /// everything issued before in this process), up to the durable mark `limit_ms`, until the
    /// monotonic instant `lease_until`. Issuing begins at once, ahead of the clock if the floor
    /// is.
    pub fn start(&self, worker_id: u16, floor_ms: i64, limit_ms: i64, lease_until: Instant) {
        // The floor's millisecond counts as used up: the first ID is in a later millisecond.
        let floor_rel = floor_ms.saturating_sub(self.layout.epoch_ms).clamp(0, MAX_TIMESTAMP) as u64;
        let floor = (floor_rel << SEQUENCE_BITS) | MAX_SEQUENCE;
        // First stop: a request that loaded the old word fails its CAS from here on, so it
        // cannot pair the old word with the limit and lease stored below.
        self.stop();
        self.limit_ms.store(limit_ms, SeqCst);
        self.lease_until.store(self.mono_ms(lease_until), SeqCst);
        let mut cur = self.state.load(SeqCst);
        loop {
            // The position only ever moves up, also across workers (harmless: IDs of two
            // workers never collide), so the word never repeats and a request's successful CAS
            // proves no start or stop came between its load and its CAS.
            let old = State::unpack(cur);
            let position = floor.max((old.position + 1).min(MAX_POSITION));
            let next = State { serving: true, worker: worker_id & MAX_WORKER, position }.pack();
            match self.state.compare_exchange(cur, next, SeqCst, SeqCst) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Stops issuing (lease lost, worker ID lost, shutdown).
    pub fn stop(&self) {
        self.state.fetch_and(!SERVING, SeqCst);
    }

    /// Raises the durable high-water mark (never lowers it).
    pub fn raise_limit(&self, limit_ms: i64) {
        self.limit_ms.fetch_max(limit_ms, SeqCst);
    }

    /// Extends the lease to the monotonic instant `until` (never shortens it).
    pub fn extend_lease(&self, until: Instant) {
        self.lease_until.fetch_max(self.mono_ms(until), SeqCst);
    }

    pub fn limit_ms(&self) -> i64 {
        self.limit_ms.load(SeqCst)
    }

    /// The Unix millisecond of the last issued ID (or of the floor); logical, so it may be
    /// ahead of the clock.
    pub fn last_ms(&self) -> i64 {
        self.layout.epoch_ms.saturating_add(self.load().ms() as i64)
    }

    pub fn worker_id(&self) -> Option<u16> {
        let s = self.load();
        s.serving.then_some(s.worker)
    }

    /// Lease time left, `None` when not serving.
    pub fn lease_remaining_ms(&self) -> Option<u64> {
        self.worker_id()?;
        Some(self.lease_until.load(SeqCst).saturating_sub(self.mono_ms(Instant::now())))
    }

    /// Whether the generator holds a worker ID on a live lease.
    pub fn serving(&self) -> bool {
        self.lease_remaining_ms().is_some_and(|r| r > 0)
    }

    /// A random first sequence number for a new millisecond.
    fn first_sequence(&self) -> u64 {
        if self.random_start > 1 {
            rand::thread_rng().gen_range(0..self.random_start)
        } else {
            0
        }
    }

    /// Takes up to `n` IDs from one millisecond, calling `sink(first, count)` with one run of
    /// consecutive IDs; returns how many it took (at least 1) or why none.
    pub fn try_take(&self, n: u64, sink: &mut impl FnMut(i64, u64)) -> Result<u64, Stall> {
        let n = n.max(1);
        let mono_now = self.mono_ms(Instant::now());
        loop {
            // The word first: the lease and limit read after it are that state's or later.
            let cur = self.state.load(SeqCst);
            let s = State::unpack(cur);
            if !s.serving || mono_now >= self.lease_until.load(SeqCst) {
                return Err(Stall::NotServing);
            }
            let limit = self.limit_ms.load(SeqCst);
            // Load the highest reading before reading the clock: if the clock then reads below
            // it, the clock really went back (whoever stored it read the clock earlier).
            let seen = self.wall_ms.load(SeqCst);
            let now = self.clock.now_ms();
            if now < seen {
                return Err(Stall::Backwards { by_ms: seen.saturating_sub(now) });
            }
            if now > seen {
                self.wall_ms.fetch_max(now, SeqCst);
            }
            let Some(now_rel) = self.layout.relative(now) else { return Err(Stall::OutOfRange) };
            let (ms, first, count) = if now_rel > s.ms() {
                // The clock is past the last issued millisecond: use the clock.
                let first = self.first_sequence();
                (now_rel, first, n.min(MAX_SEQUENCE + 1 - first))
            } else if s.sequence() < MAX_SEQUENCE {
                // At or behind it: the rest of the last millisecond first.
                (s.ms(), s.sequence() + 1, n.min(MAX_SEQUENCE - s.sequence()))
            } else if s.ms() < MAX_TIMESTAMP as u64 {
                // Then the next millisecond, ahead of the clock.
                let first = self.first_sequence();
                (s.ms() + 1, first, n.min(MAX_SEQUENCE + 1 - first))
            } else {
                return Err(Stall::OutOfRange);
            };
            let ms_unix = self.layout.epoch_ms.saturating_add(ms as i64);
            if ms_unix > limit {
                return Err(Stall::Window { next_ms: ms_unix, ahead_ms: ms_unix.saturating_sub(now) });
            }
            let next = State { position: (ms << SEQUENCE_BITS) | (first + count - 1), ..s }.pack();
            if self.state.compare_exchange_weak(cur, next, SeqCst, SeqCst).is_ok() {
                sink(Layout::compose(ms, s.worker, first), count);
                return Ok(count);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use super::*;
    use crate::clock::ManualClock;

    const EPOCH: i64 = 1_288_834_974_657;
    const NOW: i64 = 1_700_000_000_000;

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(600)
    }

    fn generator(random_start: u16) -> (Arc<ManualClock>, Generator) {
        let clock = Arc::new(ManualClock::new(NOW));
        let g = Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), random_start);
        g.start(7, NOW - 1, NOW + 3000, far());
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

    /// Takes IDs until the generator stalls; returns them and the stall.
    fn drain(g: &Generator) -> (Vec<i64>, Stall) {
        let mut out = Vec::new();
        loop {
            if let Err(stall) = g.try_take(1000, &mut |first, c| out.extend(first..first + c as i64)) {
                return (out, stall);
            }
        }
    }

    fn ms(g: &Generator, id: i64) -> i64 {
        g.layout().decode(id).unwrap().timestamp_ms
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
    fn the_state_word_holds_serving_worker_ms_and_sequence_in_64_bits() {
        for s in [
            State { serving: true, worker: MAX_WORKER, position: MAX_POSITION },
            State { serving: false, worker: MAX_WORKER, position: 0 },
            State { serving: true, worker: 0, position: (12345 << SEQUENCE_BITS) | 77 },
        ] {
            assert_eq!(State::unpack(s.pack()), s);
        }
        let s = State::unpack(State { serving: true, worker: 5, position: (9 << SEQUENCE_BITS) | 4095 }.pack());
        assert_eq!((s.worker, s.ms(), s.sequence()), (5, 9, 4095));
        assert_eq!(SERVING.count_ones() + WORKER_BITS + TIMESTAMP_BITS + SEQUENCE_BITS, 64);
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
    fn a_full_millisecond_moves_on_ahead_of_the_clock_and_the_clock_catches_up() {
        let (clock, g) = generator(0);
        let first = take(&g, 4096).unwrap();
        assert!(first.iter().all(|id| ms(&g, *id) == NOW));
        // The clock still reads NOW: the next ID is in the next (logical) millisecond.
        let next = take(&g, 4097).unwrap();
        assert_eq!(g.layout().decode(next[0]).unwrap(), Parts { timestamp_ms: NOW + 1, worker_id: 7, sequence: 0 });
        assert_eq!(ms(&g, next[4096]), NOW + 2);
        assert!(next[0] > first[4095]);
        // Once the clock passes the last logical millisecond, IDs follow the clock again.
        clock.set(NOW + 5);
        assert_eq!(ms(&g, take(&g, 1).unwrap()[0]), NOW + 5);
        // The clock has not moved since: the rest of that millisecond is used first.
        let ids = take(&g, 10).unwrap();
        assert!(ids.iter().all(|id| ms(&g, *id) == NOW + 5));
    }

    #[test]
    fn a_floor_ahead_of_the_clock_issues_at_once_strictly_above_it_and_never_above_the_limit() {
        let clock = Arc::new(ManualClock::new(NOW));
        let g = Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), 0);
        // A restart: the floor (the old high-water mark) is 2 s ahead of the clock.
        let (floor, limit) = (NOW + 2000, NOW + 2003);
        g.start(3, floor, limit, far());
        let started = Instant::now();
        let (ids, stall) = drain(&g);
        assert!(started.elapsed() < Duration::from_millis(500), "issuing did not wait for the clock");
        assert_eq!(ms(&g, ids[0]), floor + 1, "the first ID is right above the floor");
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
        assert!(ids.iter().all(|id| (floor + 1..=limit).contains(&ms(&g, *id))));
        assert_eq!(ids.len(), 3 * 4096, "every sequence number of the 3 ms up to the limit");
        // The next millisecond is above the durable mark: a stall, never an ID.
        assert_eq!(stall, Stall::Window { next_ms: limit + 1, ahead_ms: limit + 1 - NOW });
        // The clock moving forward below the floor is not a clock error.
        clock.set(NOW + 1500);
        let stall = Stall::Window { next_ms: limit + 1, ahead_ms: limit + 1 - (NOW + 1500) };
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(stall));
        g.raise_limit(NOW + 2010);
        let more = take(&g, 10).unwrap();
        assert!(more[0] > ids[ids.len() - 1] && ms(&g, more[0]) == limit + 1);
        // The clock passes the last logical millisecond: it converges to the clock.
        clock.set(NOW + 2007);
        let (conv, _) = drain(&g);
        assert!(conv[0] > more[9]);
        assert_eq!(ms(&g, conv[0]), NOW + 2007);
        assert_eq!(ms(&g, *conv.last().unwrap()), NOW + 2010, "ahead of the clock again, up to the limit");
    }

    #[test]
    fn a_restart_continues_above_everything_issued_before_whatever_the_worker() {
        let (clock, g) = generator(0);
        let a = take(&g, 5000).unwrap();
        // Same worker, a floor below what was issued: it continues above, never at or below.
        g.start(7, NOW - 10, NOW + 3000, far());
        let b = take(&g, 1).unwrap()[0];
        assert!(b > a[4999], "{b} <= {}", a[4999]);
        // Another worker with a floor below: its IDs still never go back in time.
        g.start(8, NOW - 10, NOW + 3000, far());
        let c = take(&g, 1).unwrap()[0];
        assert_eq!(g.layout().decode(c).unwrap().worker_id, 8);
        assert!(ms(&g, c) >= ms(&g, b));
        // A higher floor wins.
        g.start(7, NOW + 100, NOW + 3000, far());
        assert_eq!(ms(&g, take(&g, 1).unwrap()[0]), NOW + 101);
        assert_eq!(g.worker_id(), Some(7));
        clock.set(NOW + 200);
        assert_eq!(ms(&g, take(&g, 1).unwrap()[0]), NOW + 200);
    }

    #[test]
    fn rollback_of_the_wall_clock_is_reported_not_issued() {
        let (clock, g) = generator(0);
        take(&g, 1).unwrap();
        clock.advance(-3);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Backwards { by_ms: 3 }));
        // Relative to the last wall reading, not to the (logical) last ID: a floor ahead of
        // the clock is no rollback, but the clock going back under it still is.
        g.start(7, NOW + 1000, NOW + 4000, far());
        clock.set(NOW + 10);
        assert!(take(&g, 1).is_ok());
        clock.set(NOW + 4);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Backwards { by_ms: 6 }));
    }

    #[test]
    fn window_lease_and_worker_gate_issuing() {
        let (clock, g) = generator(0);
        clock.set(NOW + 3001);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::Window { next_ms: NOW + 3001, ahead_ms: 0 }));
        g.raise_limit(NOW + 6000);
        g.raise_limit(NOW);
        assert_eq!(g.limit_ms(), NOW + 6000, "limits never go down");
        assert!(take(&g, 1).is_ok());
        g.stop();
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::NotServing));
        assert!(!g.serving());
        assert_eq!(g.worker_id(), None);
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
        g.start(1, i64::MIN, i64::MAX, far());
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::OutOfRange));
        clock.set(g.layout().max_ms());
        let (ids, stall) = drain(&g);
        assert!(ids[0] > 0 && ids.len() == 4096);
        assert_eq!(stall, Stall::OutOfRange, "no millisecond after the layout's last one");
        clock.set(g.layout().max_ms() + 1);
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::OutOfRange));
        // Extreme floors and epochs do not overflow.
        let g = Generator::new(Layout { epoch_ms: i64::MAX }, clock.clone(), 0);
        g.start(1, i64::MAX, i64::MAX, far());
        assert_eq!(g.try_take(1, &mut |_, _| {}), Err(Stall::OutOfRange));
        assert_eq!(Layout { epoch_ms: i64::MAX }.decode(i64::MAX).unwrap().timestamp_ms, i64::MAX);
    }

    #[test]
    fn concurrent_takers_never_share_an_id() {
        let clock: Arc<dyn Clock> = Arc::new(crate::clock::SystemClock::new(0));
        let g = Arc::new(Generator::new(Layout { epoch_ms: EPOCH }, clock.clone(), 100));
        let now = clock.now_ms();
        g.start(3, now - 1, now + 600_000, far());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let g = g.clone();
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    while out.len() < 50_000 {
                        if let Err(e) = g.try_take(7, &mut |f, c| out.extend(f..f + c as i64)) {
                            panic!("{e:?}");
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

    /// Takers race a thread that keeps restarting the generator with other worker IDs and
    /// floors. The clock stays below every floor, so each ID's millisecond says which start it
    /// came from; its worker ID must be that start's, its millisecond strictly above that
    /// start's floor and at most its limit, and no ID may repeat.
    #[test]
    fn restarts_under_concurrent_takers_keep_each_id_with_the_start_it_came_from() {
        const BASE: i64 = NOW + 1000;
        const REGION: i64 = 10_000;
        const SPAN: i64 = 2_000;
        const STARTS: i64 = 60_000;
        const TAKES_PER_START: i64 = 20;
        const TAKERS: usize = 6;
        let worker_of = |k: i64| (k % 4) as u16;
        let floor_of = |k: i64| BASE + k * REGION;
        let clock = Arc::new(ManualClock::new(NOW));
        let g = Arc::new(Generator::new(Layout { epoch_ms: EPOCH }, clock, 0));
        g.start(worker_of(0), floor_of(0), floor_of(0) + SPAN, far());
        // Takes the takers may still start under the current start (keeps the run short and
        // lets the restarter in while takers are in the middle of theirs).
        let (done, budget) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicI64::new(TAKES_PER_START)));
        let takers: Vec<_> = (0..TAKERS)
            .map(|t| {
                let (g, done, budget) = (g.clone(), done.clone(), budget.clone());
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    let mut n = t as u64;
                    while !done.load(SeqCst) {
                        if budget.fetch_sub(1, SeqCst) <= 0 {
                            std::thread::yield_now();
                            continue;
                        }
                        n = n % 5 + 1;
                        let _ = g.try_take(n, &mut |f, c| out.extend(f..f + c as i64));
                    }
                    out
                })
            })
            .collect();
        let restarter = {
            let (g, budget) = (g.clone(), budget.clone());
            std::thread::spawn(move || {
                for k in 1..STARTS {
                    let since = Instant::now();
                    while budget.load(SeqCst) > 0 && since.elapsed() < Duration::from_millis(50) {
                        std::thread::yield_now();
                    }
                    g.start(worker_of(k), floor_of(k), floor_of(k) + SPAN, far());
                    budget.store(TAKES_PER_START, SeqCst);
                }
            })
        };
        restarter.join().unwrap();
        done.store(true, SeqCst);
        let mut all: Vec<i64> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
        assert!(all.len() > STARTS as usize, "too few IDs taken ({}) to exercise the race", all.len());
        let (mut mismatched, mut outside) = (Vec::new(), Vec::new());
        for &id in &all {
            let p = g.layout().decode(id).unwrap();
            let k = (p.timestamp_ms - BASE).div_euclid(REGION);
            if !(floor_of(k) + 1..=floor_of(k) + SPAN).contains(&p.timestamp_ms) {
                outside.push(p);
            } else if p.worker_id != worker_of(k) {
                mismatched.push(p);
            }
        }
        assert!(outside.is_empty(), "IDs at or below their start's floor or above its limit: {outside:?}");
        assert!(
            mismatched.is_empty(),
            "{} IDs pair one start's millisecond with another start's worker ID: {:?}",
            mismatched.len(),
            &mismatched[..mismatched.len().min(5)]
        );
        let n = all.len();
        let unique: HashSet<i64> = all.drain(..).collect();
        assert_eq!(unique.len(), n, "duplicate IDs");
    }
}
