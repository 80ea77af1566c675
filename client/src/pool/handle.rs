//! [`TagPool`]: the handle of one tag's (or snowflake key's) buffer, and its waits.
//!
//! `next_id()` is one `fetch_add` and a read of one slot while IDs are buffered. With nothing
//! buffered it wakes the refill task and waits — blocking the thread on a condition variable
//! (`next_id`) or as a future (`next_id_async`) — until a lease arrives, the last lease was
//! refused ([`PoolError::Rejected`], at once) or `max_wait` passed ([`PoolError::Exhausted`]).
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use tokio::sync::Notify;

use leaf_api::ranges::IdRange;
use tokio::time::Instant;

use super::buffer::{Buffer, Taken};
use super::local::LocalIds;
use super::source::LeaseFailure;
use super::stats::{Counters, TagStats};
use super::{IdKind, PoolError};

/// What a tag's handles and its refill task share. Dropping it (the last handle and the pool
/// gone) wakes the task, which then finds it gone and stops.
pub(crate) struct TagShared {
    pub kind: IdKind,
    pub name: String,
    pub buffer: Buffer,
    pub counters: Counters,
    pub max_wait: Duration,
    /// Wakes the refill task: a prefetch point reached, a caller with nothing left, shutdown.
    pub wake: Arc<Notify>,
    /// Set with `wake` by callers; the task clears it when it acts on it.
    pub wanted: AtomicBool,
    /// The last lease's failure; `None` once a lease succeeds.
    pub failure: ArcSwapOption<LeaseFailure>,
    /// Async waiters, woken after each lease outcome.
    ready: Notify,
    /// Held by the refill task while it moves IDs into or out of the buffer and counts them,
    /// and by a snapshot while it reads them: with callers idle, a snapshot is exact.
    books: Mutex<()>,
    /// Blocking waiters sleep on `ready_cv` under `ready_lock` (the slow path only).
    ready_lock: Mutex<()>,
    ready_cv: Condvar,
}

impl TagShared {
    pub fn new(kind: IdKind, name: String, buffer: Buffer, max_wait: Duration) -> TagShared {
        let wake = buffer.wake().clone();
        TagShared {
            kind,
            name,
            buffer,
            counters: Counters::default(),
            max_wait,
            wake,
            // The first lease is wanted at once.
            wanted: AtomicBool::new(true),
            failure: ArcSwapOption::empty(),
            ready: Notify::new(),
            books: Mutex::new(()),
            ready_lock: Mutex::new(()),
            ready_cv: Condvar::new(),
        }
    }

    /// Asks the refill task for a lease.
    pub(crate) fn want(&self) {
        self.wanted.store(true, Ordering::Relaxed);
        self.wake.notify_one();
    }

    /// Whether the task should lease now: fewer than `depth` leases queued behind the current
    /// range, and a caller asked (a prefetch point, nothing left) or nothing is left.
    pub fn needs_lease(&self, tail_lease: u64, depth: u64) -> bool {
        let queued = tail_lease.saturating_sub(self.buffer.head_lease());
        if queued >= depth {
            self.wanted.store(false, Ordering::Relaxed);
            return false;
        }
        self.wanted.swap(false, Ordering::Relaxed) || self.buffer.is_dry()
    }

    /// Locks the books: the buffer's leased and retired IDs and their counters change together
    /// (the refill task only; never on a caller's path).
    pub fn books(&self) -> MutexGuard<'_, ()> {
        self.books.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a lease of `size` IDs and counts it, as one step for a snapshot (see
    /// [`Buffer::append`]).
    pub fn credit(&self, ranges: &[IdRange], size: u64, lease: u64, sent: Instant) {
        let _books = self.books();
        Counters::add(&self.counters.ids_leased, size);
        self.buffer.append(ranges, lease, sent);
    }

    /// A snapshot of the metrics.
    pub fn stats(&self) -> TagStats {
        let _books = self.books();
        self.counters.snapshot(self.kind, &self.name, self.buffer.left(), self.buffer.lost())
    }

    /// IDs handed out so far: leased, minus retired, minus still buffered.
    pub fn served(&self) -> u64 {
        let _books = self.books();
        let c = &self.counters;
        c.ids_leased
            .load(Ordering::Relaxed)
            .saturating_sub(c.ids_retired.load(Ordering::Relaxed))
            .saturating_sub(self.buffer.lost())
            .saturating_sub(self.buffer.left())
    }

    /// Wakes every waiter after a lease arrived or failed.
    pub fn notify_ready(&self) {
        {
            let _guard = self.ready_lock.lock().unwrap_or_else(|e| e.into_inner());
            self.ready_cv.notify_all();
        }
        self.ready.notify_waiters();
    }

    /// The error for a caller that found nothing, when the last lease was refused.
    fn rejected(&self) -> Option<PoolError> {
        let failure = self.failure.load();
        let f = failure.as_ref().filter(|f| !f.retryable)?;
        Counters::add(&self.counters.rejected, 1);
        Some(PoolError::Rejected { kind: self.kind, name: self.name.clone(), error: f.message.clone() })
    }

    fn exhausted(&self, waited: Duration) -> PoolError {
        Counters::add(&self.counters.exhausted, 1);
        let last_error = self.failure.load().as_ref().map(|f| f.message.clone());
        PoolError::Exhausted { kind: self.kind, name: self.name.clone(), waited, last_error }
    }

    /// A waiting caller's next step after `waited`: an ID, the refusal, `Exhausted` once
    /// `max_wait` passed, or `None` to keep waiting.
    fn settled(&self, waited: Duration) -> Option<Result<i64, PoolError>> {
        if let Some(id) = self.take() {
            return Some(Ok(id));
        }
        if let Some(e) = self.rejected() {
            return Some(Err(e));
        }
        (waited >= self.max_wait).then(|| Err(self.exhausted(waited)))
    }

    /// Takes one ID, asking for the next lease at the prefetch point.
    #[inline]
    fn take(&self) -> Option<i64> {
        match self.buffer.take() {
            Taken::Id { id, prefetch } => {
                if prefetch {
                    self.want();
                }
                Some(id)
            }
            Taken::Empty => None,
        }
    }
}

/// The handle of one tag's (or snowflake key's) ID buffer; cheap to clone, clones share the
/// buffer. From [`IdPool::segment`](super::IdPool::segment) or
/// [`IdPool::snowflake`](super::IdPool::snowflake).
#[derive(Clone)]
pub struct TagPool {
    pub(crate) shared: Arc<TagShared>,
}

impl std::fmt::Debug for TagPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TagPool").field("kind", &self.shared.kind).field("name", &self.shared.name).finish()
    }
}

impl TagPool {
    /// Segment IDs of a tag, or snowflake IDs?
    pub fn kind(&self) -> IdKind {
        self.shared.kind
    }

    /// The tag (or snowflake key).
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The next ID. Lock-free, without allocation, syscall or clock read while IDs are
    /// buffered. With nothing buffered it **blocks the calling thread** until a lease arrives,
    /// at most [`PoolOptions::max_wait`](super::PoolOptions::max_wait): do not call it on an
    /// async executor's thread (use [`TagPool::next_id_async`] there, or
    /// [`TagPool::try_next_id`]).
    ///
    /// Errors: [`PoolError::Exhausted`] after `max_wait`; [`PoolError::Rejected`] at once when
    /// nothing is buffered and the last lease was refused in a way waiting does not fix.
    #[inline]
    pub fn next_id(&self) -> Result<i64, PoolError> {
        match self.shared.take() {
            Some(id) => Ok(id),
            None => self.wait_blocking(),
        }
    }

    /// An ID if one is buffered, never waiting. `None` asks the refill task for a lease.
    #[inline]
    pub fn try_next_id(&self) -> Option<i64> {
        let id = self.shared.take();
        if id.is_none() {
            self.shared.want();
        }
        id
    }

    /// [`TagPool::next_id`] for async code: the same, but waits as a future.
    pub async fn next_id_async(&self) -> Result<i64, PoolError> {
        match self.shared.take() {
            Some(id) => Ok(id),
            None => self.wait_async().await,
        }
    }

    /// A per-thread cache of this tag's IDs taking `chunk` (1–65,536) at a time with one
    /// atomic operation: for many threads taking IDs of one tag at once (see [`LocalIds`]).
    pub fn local(&self, chunk: u32) -> LocalIds {
        LocalIds::new(self.clone(), chunk.clamp(1, 65_536))
    }

    /// A snapshot of this tag's metrics.
    pub fn stats(&self) -> TagStats {
        self.shared.stats()
    }

    #[cold]
    #[inline(never)]
    fn wait_blocking(&self) -> Result<i64, PoolError> {
        let s = &self.shared;
        let started = std::time::Instant::now();
        Counters::add(&s.counters.waits, 1);
        s.want();
        let mut guard = s.ready_lock.lock().unwrap_or_else(|e| e.into_inner());
        let outcome = loop {
            // Checked under the lock the refill task takes to notify: no lost wake-up.
            let waited = started.elapsed();
            if let Some(outcome) = s.settled(waited) {
                break outcome;
            }
            guard = match s.ready_cv.wait_timeout(guard, s.max_wait - waited) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        };
        drop(guard);
        s.counters.waited(started.elapsed());
        outcome
    }

    #[cold]
    async fn wait_async(&self) -> Result<i64, PoolError> {
        let s = &self.shared;
        let started = tokio::time::Instant::now();
        Counters::add(&s.counters.waits, 1);
        s.want();
        let outcome = loop {
            let mut notified = pin!(s.ready.notified());
            // Registered before checking: a lease arriving in between still wakes us.
            notified.as_mut().enable();
            let waited = started.elapsed();
            if let Some(outcome) = s.settled(waited) {
                break outcome;
            }
            let _ = tokio::time::timeout(s.max_wait - waited, notified).await;
        };
        s.counters.waited(started.elapsed());
        outcome
    }
}

impl Drop for TagShared {
    fn drop(&mut self) {
        // The task holds only a weak reference: woken, it finds this gone and stops.
        self.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leases land while nobody takes an ID: every snapshot, however it interleaves with them,
    /// sees nothing served (without the books' lock one sees a lease counted but not queued).
    #[test]
    fn a_snapshot_never_sees_a_lease_half_landed() {
        // Rounds of a fresh buffer: most leases wait for a slot, the rest fill the ring.
        for round in 0..40 {
            let now = Instant::now();
            let buffer = Buffer::new(now);
            let shared = Arc::new(TagShared::new(IdKind::Segment, "t".into(), buffer, Duration::from_secs(1)));
            let done = Arc::new(AtomicBool::new(false));
            let reader = {
                let (shared, done) = (shared.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut snapshots = 0u64;
                    while !done.load(Ordering::Relaxed) || snapshots == 0 {
                        let stats = shared.stats();
                        assert_eq!(stats.ids_served, 0, "round {round}, snapshot {snapshots}: {stats:?}");
                        snapshots += 1;
                    }
                })
            };
            for lease in 1..=1_000u64 {
                let start = lease as i64 * 10;
                shared.credit(&[IdRange { start, end: start + 10 }], 10, lease, now);
            }
            done.store(true, Ordering::Relaxed);
            reader.join().expect("no snapshot saw an ID served");
            assert_eq!(shared.stats().ids_leased, 10_000);
        }
    }
}
