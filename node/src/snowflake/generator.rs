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
mod tests;
