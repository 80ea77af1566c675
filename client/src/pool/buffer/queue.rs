//! The refill side of a [`Buffer`]: appending leases, installing their ranges into free slots,
//! retiring, and the counts the refill task and snapshots read. Everything here runs under the
//! buffer's mutex, which no take on the hit path touches; only the refill task writes.
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Duration;

use leaf_api::ranges::IdRange;
use tokio::time::Instant;

use super::slot::{before, pack, split, View, END, MAX_LEN, RING};
use super::Buffer;

/// How long a range stays in the log after the cursor passed it, for a late reader.
const GRACE: Duration = Duration::from_secs(1);
/// The most ranges the log keeps (older ones go even within `GRACE`).
const LOG_CAP: usize = 1 << 16;

/// A range appended and not yet installed.
#[derive(Debug, Clone)]
struct Piece {
    start: i64,
    len: u64,
    /// The offset of the lease's prefetch point, when it falls in this range.
    prefetch: Option<u64>,
    lease: u64,
    leased_at: Instant,
}

/// An installed range.
#[derive(Debug)]
struct Entry {
    gen: u32,
    view: View,
    lease: u64,
    leased_at: Instant,
    /// When the refill side first saw the cursor past it.
    passed_at: Option<std::time::Instant>,
}

/// The ranges of a buffer as the refill side knows them.
#[derive(Debug)]
pub(super) struct Queue {
    /// Installed ranges in generation order: the last few passed (for late readers), the
    /// current one and those queued behind it.
    log: VecDeque<Entry>,
    /// How many of `log`'s first entries have `passed_at` set.
    stamped: usize,
    /// Appended, waiting for a free slot.
    pending: VecDeque<Piece>,
    /// IDs in `pending`.
    pending_ids: u64,
    /// The generation the next installed range gets.
    next_gen: u32,
    /// The lease of the last range appended (0: none yet).
    tail_lease: u64,
}

impl Queue {
    /// The queue of a new buffer: the placeholder (generation `gen`, lease 0) installed.
    pub fn new(placeholder: View, epoch: Instant, gen: u32) -> Queue {
        let entry = Entry { gen, view: placeholder, lease: 0, leased_at: epoch, passed_at: None };
        Queue {
            log: VecDeque::from([entry]),
            stamped: 0,
            pending: VecDeque::new(),
            pending_ids: 0,
            next_gen: gen.wrapping_add(1),
            tail_lease: 0,
        }
    }

    /// Drops every passed range from the log at once, as time would (tests).
    #[cfg(test)]
    pub fn forget_passed(&mut self) {
        let stamped = self.stamped;
        self.log.drain(..stamped);
        self.stamped = 0;
    }

    /// Where generation `gen` is in the log.
    fn index(&self, gen: u32) -> Option<usize> {
        let front = self.log.front()?.gen;
        let i = gen.wrapping_sub(front) as usize;
        (i < self.log.len()).then_some(i)
    }
}

/// What the log says of a generation a late reader claimed from.
pub(super) enum Recovered {
    Found(View),
    /// Passed and dropped from the log: the claim is lost.
    Dropped,
    /// Not installed yet (a ticket carried into it).
    Ahead,
}

impl Buffer {
    /// Appends one lease's ranges (only the refill task calls this; `ranges` are well-formed,
    /// validated by the caller) and installs what fits. The ID at 10% of the lease asks for the
    /// next one.
    pub fn append(&self, ranges: &[IdRange], lease: u64, leased_at: Instant) {
        let total: u64 = ranges.iter().map(IdRange::len).sum();
        let mut skip = total / 10;
        let mut q = self.queue();
        for r in ranges {
            let mut start = r.start;
            let mut left = r.len();
            while left > 0 {
                let len = left.min(MAX_LEN);
                let prefetch = (skip < len).then_some(skip);
                skip = skip.checked_sub(len).unwrap_or(u64::MAX);
                q.pending.push_back(Piece { start, len, prefetch, lease, leased_at });
                q.pending_ids += len;
                start = start.wrapping_add(len as i64);
                left -= len;
            }
        }
        if !ranges.is_empty() {
            q.tail_lease = lease;
        }
        self.install(&mut q);
    }

    /// Installs waiting ranges into the slots the cursor has freed; whether it installed any.
    pub fn top_up(&self) -> bool {
        let mut q = self.queue();
        self.install(&mut q)
    }

    fn install(&self, q: &mut Queue) -> bool {
        let (current, _) = split(self.cursor.0.load(Ordering::Relaxed));
        let mut installed = false;
        while let Some(piece) = q.pending.front() {
            let gen = q.next_gen;
            // The slot holds `gen - RING` until the cursor passed it.
            if gen.wrapping_sub(current) as usize >= RING {
                break;
            }
            let leased_ns = nanos(piece.leased_at.saturating_duration_since(self.epoch));
            let view = View::new(piece.start, piece.len, piece.prefetch, leased_ns);
            self.slot(gen).write(gen, &view);
            q.log.push_back(Entry { gen, view, lease: piece.lease, leased_at: piece.leased_at, passed_at: None });
            q.next_gen = gen.wrapping_add(1);
            q.pending_ids -= piece.len;
            q.pending.pop_front();
            installed = true;
        }
        self.set_pending(q.pending.len() as u64);
        self.prune(q, current);
        installed
    }

    /// Publishes how many ranges wait for a slot (written only on a change: takers read the
    /// line on every take).
    fn set_pending(&self, n: u64) {
        if self.hints.pending.load(Ordering::Relaxed) != n {
            self.hints.pending.store(n, Ordering::Relaxed);
        }
    }

    /// Drops from the log the ranges passed more than `GRACE` ago (or beyond `LOG_CAP`).
    fn prune(&self, q: &mut Queue, current: u32) {
        let now = std::time::Instant::now();
        while q.stamped < q.log.len() && before(q.log[q.stamped].gen, current) {
            q.log[q.stamped].passed_at = Some(now);
            q.stamped += 1;
        }
        while let Some(front) = q.log.front() {
            let passed = before(front.gen, current);
            let old = front.passed_at.is_some_and(|t| now.saturating_duration_since(t) >= GRACE);
            if !(passed && (old || q.log.len() > LOG_CAP)) {
                break;
            }
            q.log.pop_front();
            q.stamped = q.stamped.saturating_sub(1);
        }
    }

    /// The range of generation `gen` for a reader that found its slot reused.
    pub(super) fn recover(&self, gen: u32) -> Recovered {
        let q = self.queue();
        match q.index(gen) {
            Some(i) => Recovered::Found(q.log[i].view),
            None if before(gen, q.next_gen) => Recovered::Dropped,
            None => Recovered::Ahead,
        }
    }

    /// The lease of the current range.
    pub fn head_lease(&self) -> u64 {
        let q = self.queue();
        let (gen, _) = split(self.cursor.0.load(Ordering::Relaxed));
        q.index(gen).or(q.log.len().checked_sub(1)).map_or(0, |i| q.log[i].lease)
    }

    /// The lease of the last range appended (0 before the first).
    pub fn tail_lease(&self) -> u64 {
        self.queue().tail_lease
    }

    /// Nothing can be taken: the current range is exhausted and nothing is queued.
    pub fn is_dry(&self) -> bool {
        self.left() == 0
    }

    /// IDs leased and neither taken nor retired.
    pub fn left(&self) -> u64 {
        let q = self.queue();
        let (gen, ticket) = split(self.cursor.0.load(Ordering::Relaxed));
        let installed = match q.index(gen) {
            Some(i) => q.log[i].view.left(ticket) + q.log.range(i + 1..).map(|e| e.view.len()).sum::<u64>(),
            None => 0,
        };
        installed + q.pending_ids
    }

    /// Retires every range leased at or before `cutoff` (they are in lease order, so it stops
    /// at the first later one): none of their IDs is handed out any more. Returns how many IDs
    /// were retired. Ranges waiting for a slot are installed by the next [`Buffer::top_up`].
    pub fn retire_leased_until(&self, cutoff: Instant) -> u64 {
        if let Some(since) = cutoff.checked_duration_since(self.epoch) {
            self.hints.retired_below.fetch_max(nanos(since).saturating_add(1), Ordering::Relaxed);
        }
        let mut q = self.queue();
        let mut retired = 0;
        let mut word = self.cursor.0.load(Ordering::Relaxed);
        let all_installed_retired = loop {
            let (gen, ticket) = split(word);
            let Some(i) = q.index(gen) else { break false };
            let mut j = i;
            while j < q.log.len() && q.log[j].leased_at <= cutoff {
                j += 1;
            }
            if j == i {
                break false;
            }
            // Past every retired range: to the next one's start, or (none installed) to the end
            // of the last retired one.
            let to = match q.log.get(j) {
                Some(next) => pack(next.gen, next.view.first),
                None if j - 1 == i => pack(gen, ticket.max(END)),
                None => pack(q.log[j - 1].gen, END),
            };
            if to == word {
                break j == q.log.len();
            }
            match self.cursor.0.compare_exchange(word, to, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    self.raise_hint(split(to).0);
                    retired += q.log[i].view.left(ticket) + q.log.range(i + 1..j).map(|e| e.view.len()).sum::<u64>();
                    break j == q.log.len();
                }
                Err(now) => word = now,
            }
        };
        if all_installed_retired {
            while q.pending.front().is_some_and(|p| p.leased_at <= cutoff) {
                if let Some(p) = q.pending.pop_front() {
                    q.pending_ids -= p.len;
                    retired += p.len;
                }
            }
            self.set_pending(q.pending.len() as u64);
        }
        retired
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
