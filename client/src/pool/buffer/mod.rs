//! The lock-free buffer of one tag's leased ranges: the `next_id()` fast path.
//!
//! **Layout.** Leased ranges are installed, in lease order, into a ring of [`RING`] (64)
//! slots. Installed range number `g` — its *generation*, a `u32` from 0 (the empty
//! placeholder) — lives in slot `g % RING`. One word, the **cursor**, on a cache line of its
//! own, packs the current generation (high half) and a *ticket* (low half). A range of `len`
//! IDs is entered at ticket `first = END - len` (`END` = 2^31), so ticket `k` is a hit exactly
//! when `first <= k < END`, and it stands for the ID `end - END + k`.
//!
//! **A take** reads `hints.current` (the generation of the last switch, on a line written only
//! at switches) and that generation's slot as a seqlock — `seq`, the fields, `seq` again, both
//! equal to the generation — and then claims with one `fetch_add` on the cursor (`n` for a run
//! of `n` IDs). It is a hit when the claim's generation is the one it read and the ticket is in
//! range. The reads come before the claim so that they do not wait for the `fetch_add` (a
//! locked instruction on x86). Nothing is written but the cursor; no lock, allocation, syscall
//! or clock. Otherwise (the guess lagged a switch, or the range is used up) the slow path reads
//! the claimed generation's slot after the claim, and on a miss **switches**: if the next
//! generation's slot holds it, one compare-and-swap moves the cursor from any word of the used
//! up generation to `(g + 1, first(g + 1))` (a loser takes again); if not, the buffer is empty.
//!
//! **The refill task** is the only writer of slots (the refill side, `queue.rs`, under a mutex
//! no hit touches). It appends a lease's ranges to a pending queue and installs them: generation
//! `t` goes into its slot only once the cursor has passed `t - RING`, the slot's previous
//! generation. Ranges that do not fit wait, and a taker that switches while some wait wakes the
//! task. A slot is written as a seqlock: `seq` = none, a release fence, the fields, then
//! `seq = t` with release.
//!
//! **No ID twice, none outside its range.** The cursor only moves forward — `fetch_add`, the
//! switch and retirement; the one step back (a run of misses clamped to `END`, so the ticket
//! never carries into the generation) re-issues only miss tickets — so each hit ticket `(g, k)`
//! is returned by one `fetch_add` only. A slot's fields never change while it holds a
//! generation, and a seqlock read that saw `seq == g` before and after is generation `g`'s
//! fields: the writer of a later generation stores `seq` = none and fences before its first
//! field store, so a read of any of its fields is followed (after the reader's acquire fence)
//! by a `seq` that is not `g`. So the ID computed from the claim `(g, k)` and a read of
//! generation `g` — made before the claim (the hit) or after it (the slow path) — is ticket `k`
//! of range `g`: inside a leased range, and nobody else's. The cursor reaches `g` only from a
//! switcher that saw slot `g` hold it (acquire load, then a release CAS), and claims are acquire
//! RMWs in that CAS's release sequence, so a read after a claim of `g` never sees the slot's
//! older contents.
//!
//! **ABA, late readers.** A slot is reused only after the cursor passed its generation, and
//! the seqlock tells a reader it is gone. A hit never needs a reused slot: it read its
//! generation first. A slow-path reader paused between its claim and its read has a valid
//! claim but no data: it looks the generation up in the refill side's log of installed ranges
//! (the mutex, on this rare path), which keeps each one a second after the cursor passed it
//! (less when over 65,536 ranges pass within that second). A reader paused longer than that
//! loses its claim: a gap, counted as retired, never a duplicate (if the lost ID was the
//! prefetch point, the next lease is asked for only when the buffer runs dry). Generations
//! are `u32`: a take paused between its read and its claim (or its claim and its read) while
//! 2^32 ranges are switched would match a different range with an equal generation. At a
//! million ranges a second that is a pause of over an hour; leases come about once a second.
//!
//! **Prefetch.** The ID at 10% of a lease is one ticket of one range: the one take that gets
//! it asks the task for the next lease.
//!
//! **Retirement** (snowflake freshness) is a CAS of the cursor past the retired ranges (and a
//! drop of those still pending): a ticket claimed before it was taken, every later one misses.
//! The IDs left are counted from the word the CAS replaced, so the books stay exact. A
//! `LocalIds` run learns of it from a watermark of lease times (`retired_below`).
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;

mod queue;
mod slot;
#[cfg(test)]
mod stress;
#[cfg(test)]
mod tests;

use queue::{Queue, Recovered};
pub(crate) use slot::Claim;
use slot::{before, pack, pause_point, split, Slot, View, CLAMP, END, MAX_RUN, RING};

/// The cursor on a cache line of its own: takers write it on every ID, and the slots every
/// take reads would otherwise share its line (false sharing).
#[derive(Debug)]
#[repr(align(128))]
struct Cursor(AtomicU64);

/// What takes read besides the cursor and the slots; written rarely (a switch, an install
/// while ranges wait, a retirement), so its line stays in every taker's cache.
#[derive(Debug)]
#[repr(align(64))]
struct Hints {
    /// The cursor's generation, as of the last switch (a take's guess).
    current: AtomicU32,
    /// Lease times (ns since the epoch, plus one) below this are retired.
    retired_below: AtomicU64,
    /// Ranges waiting for a slot: a taker that switches while some wait wakes the task.
    pending: AtomicU64,
    /// IDs claimed by a taker that could no longer read their range (see "ABA").
    lost: AtomicU64,
    /// Claims read back from the log (tests).
    #[cfg(test)]
    recovered: AtomicU64,
}

/// The refill side's mutex on lines of its own.
#[repr(align(128))]
struct Guarded(Mutex<Queue>);

/// What a take found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taken {
    /// An ID; `prefetch` when it is the one that asks for the next lease.
    Id { id: i64, prefetch: bool },
    /// Nothing left: the current range is exhausted and nothing is queued.
    Empty,
}

/// Up to `n` consecutive IDs taken at once ([`Buffer::take_run`]), for a per-thread cache.
pub(crate) type Run = Claim;

/// One tag's ranges: the current one and those queued behind it.
pub(crate) struct Buffer {
    cursor: Cursor,
    slots: [Slot; RING],
    hints: Hints,
    /// Lease times are kept as nanoseconds since this.
    epoch: Instant,
    /// Wakes the refill task (shared with the tag's handles).
    wake: Arc<Notify>,
    queue: Guarded,
}

/// One step of a take off its hit path.
enum Step {
    Hit(Claim),
    /// Generation `g` has nothing left for this taker.
    Exhausted(u32),
    /// Take again.
    Retry,
}

impl Buffer {
    /// An empty buffer (the placeholder, generation 0, holds nothing) whose lease times count
    /// from `now`.
    pub fn new(now: Instant) -> Buffer {
        Buffer::starting_at(now, 0)
    }

    /// A new buffer whose placeholder is generation `gen` (tests cross the `u32` wrap).
    fn starting_at(now: Instant, gen: u32) -> Buffer {
        let slots: [Slot; RING] = std::array::from_fn(|_| Slot::empty());
        let placeholder = View::new(0, 0, None, 0);
        slots[gen as usize % RING].write(gen, &placeholder);
        Buffer {
            cursor: Cursor(AtomicU64::new(pack(gen, placeholder.first))),
            slots,
            hints: Hints {
                current: AtomicU32::new(gen),
                retired_below: AtomicU64::new(0),
                pending: AtomicU64::new(0),
                lost: AtomicU64::new(0),
                #[cfg(test)]
                recovered: AtomicU64::new(0),
            },
            epoch: now,
            wake: Arc::new(Notify::new()),
            queue: Guarded(Mutex::new(Queue::new(placeholder, now, gen))),
        }
    }

    /// What wakes the tag's refill task.
    pub fn wake(&self) -> &Arc<Notify> {
        &self.wake
    }

    #[inline(always)]
    fn slot(&self, gen: u32) -> &Slot {
        &self.slots[gen as usize % RING]
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one ID: lock-free, no allocation, no syscall, no clock.
    #[inline]
    pub fn take(&self) -> Taken {
        let (guess, view) = self.current();
        pause_point();
        let word = self.cursor.0.fetch_add(1, Ordering::Acquire);
        let (gen, ticket) = split(word);
        if let Some(view) = view {
            if gen == guess && ticket < END && ticket >= view.first {
                let (id, prefetch) = view.one(ticket);
                return Taken::Id { id, prefetch };
            }
        }
        match self.take_slow(word, 1) {
            Some(c) => Taken::Id { id: c.first, prefetch: c.prefetch },
            None => Taken::Empty,
        }
    }

    /// Takes up to `n` (1 to 65,536) consecutive IDs with one `fetch_add`: what is left of the
    /// current range when fewer; `None` when nothing is left. Tickets past the range's end are
    /// lost to nobody: they were never IDs.
    #[inline]
    pub fn take_run(&self, n: u64) -> Option<Run> {
        let n = n.clamp(1, MAX_RUN);
        let (guess, view) = self.current();
        pause_point();
        let word = self.cursor.0.fetch_add(n, Ordering::Acquire);
        let (gen, ticket) = split(word);
        if let Some(view) = view {
            if gen == guess && ticket < END && ticket >= view.first {
                return Some(view.claim(ticket, n));
            }
        }
        self.take_slow(word, n)
    }

    /// The generation the cursor is most likely in (`hints.current`) and its range, read before
    /// the claim so that these loads do not wait for the `fetch_add`.
    #[inline(always)]
    fn current(&self) -> (u32, Option<View>) {
        let guess = self.hints.current.load(Ordering::Relaxed);
        (guess, self.slot(guess).read(guess))
    }

    /// Moves `hints.current` forward to `gen` (never back: of two switchers, the later wins).
    fn raise_hint(&self, gen: u32) {
        let mut now = self.hints.current.load(Ordering::Relaxed);
        while before(now, gen) {
            match self.hints.current.compare_exchange_weak(now, gen, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => now = seen,
            }
        }
    }

    /// Whether the range a run came from was retired since (its IDs are too old).
    #[inline]
    pub fn is_retired(&self, run: &Run) -> bool {
        run.leased_ns < self.hints.retired_below.load(Ordering::Relaxed)
    }

    /// IDs claimed by takers that could no longer read their range (counted as retired).
    pub fn lost(&self) -> u64 {
        self.hints.lost.load(Ordering::Relaxed)
    }

    /// A take whose first claim `word` (of `n` tickets) missed: switch ranges, recover a late
    /// read, or find the buffer empty.
    #[cold]
    #[inline(never)]
    fn take_slow(&self, mut word: u64, n: u64) -> Option<Claim> {
        pause_point();
        // The guess lagged (a switch raced this take): catch it up.
        self.raise_hint(split(word).0);
        loop {
            match self.resolve(word, n) {
                Step::Hit(claim) => return Some(claim),
                Step::Exhausted(gen) => {
                    if !self.advance(gen) {
                        return None;
                    }
                }
                Step::Retry => {}
            }
            word = self.cursor.0.fetch_add(n, Ordering::Acquire);
            pause_point();
        }
    }

    /// What the claim `word` of `n` tickets got.
    fn resolve(&self, word: u64, n: u64) -> Step {
        let (gen, ticket) = split(word);
        match self.slot(gen).read(gen) {
            Some(_) if ticket >= END => Step::Exhausted(gen),
            Some(view) if ticket >= view.first => Step::Hit(view.claim(ticket, n)),
            Some(view) => {
                // A ticket below the range's first: the count carried into this generation
                // (see `CLAMP`). Not an ID; move the ticket up to the range's start.
                let now = self.cursor.0.load(Ordering::Relaxed);
                let (g, k) = split(now);
                if g == gen && k < view.first {
                    let _ =
                        self.cursor.0.compare_exchange(now, pack(gen, view.first), Ordering::AcqRel, Ordering::Relaxed);
                }
                Step::Retry
            }
            None if ticket >= END => Step::Exhausted(gen),
            // The slot was reused while this taker was paused after its `fetch_add`: the claim
            // is valid, its range is in the refill side's log (or lost: a gap).
            None => match self.recover(gen) {
                Recovered::Found(view) if ticket >= view.first => {
                    #[cfg(test)]
                    self.hints.recovered.fetch_add(1, Ordering::Relaxed);
                    Step::Hit(view.claim(ticket, n))
                }
                Recovered::Found(_) => Step::Retry,
                Recovered::Dropped => {
                    let lost = n.min(u64::from(END - ticket));
                    self.hints.lost.fetch_add(lost, Ordering::Relaxed);
                    Step::Retry
                }
                // Only a ticket carried past a used-up range gets here: nothing to take.
                Recovered::Ahead => Step::Exhausted(gen),
            },
        }
    }

    /// Moves the cursor from the used-up generation `gen` to the next one if it is installed.
    /// `false` when nothing is: the buffer is empty.
    fn advance(&self, gen: u32) -> bool {
        let next = gen.wrapping_add(1);
        let mut word = self.cursor.0.load(Ordering::Relaxed);
        loop {
            let (g, ticket) = split(word);
            if g != gen {
                // Someone moved on (a switch or a retirement): take again.
                return true;
            }
            let Some(view) = self.slot(next).read(next) else {
                if ticket >= CLAMP {
                    let _ = self.cursor.0.compare_exchange(word, pack(gen, END), Ordering::AcqRel, Ordering::Relaxed);
                }
                return false;
            };
            match self.cursor.0.compare_exchange_weak(word, pack(next, view.first), Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.raise_hint(next);
                    if self.hints.pending.load(Ordering::Relaxed) > 0 {
                        // Ranges wait for a slot: one is free now.
                        self.wake.notify_one();
                    }
                    return true;
                }
                Err(now) => word = now,
            }
        }
    }
}
