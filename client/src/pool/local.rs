//! [`LocalIds`]: a per-thread cache in front of a [`TagPool`], for many threads taking IDs of
//! one tag at once.
//!
//! Threads sharing a `TagPool` all write one word (the `fetch_add` on the tag's cursor), and
//! that cache line bouncing between cores caps each thread far below its single-thread rate
//! (BENCHMARKS.md: two threads on one bare atomic counter reach about a sixth of one
//! thread's rate). A `LocalIds` takes a run of `chunk` consecutive IDs with one `fetch_add`
//! and hands them out from plain fields: the shared line is touched once per chunk.
//!
//! What changes against [`TagPool::next_id`]: IDs of one tag are still unique and come from
//! ranges the pool leased, but different threads' IDs interleave by chunk, not one by one
//! (segment IDs stay trend-increasing, as Leaf's are across nodes); up to `chunk - 1` IDs
//! left in a dropped `LocalIds` are a gap. Snowflake freshness still holds: each ID checks
//! that its range was not retired (one relaxed load of the buffer's retirement watermark, a
//! line written only when ranges are retired).
use super::buffer::Run;
use super::handle::TagPool;
use super::stats::Counters;
use super::{IdKind, PoolError};

/// A per-thread cache of one tag's IDs (`&mut self`: one owner at a time; `Send`, so it can
/// move between threads). From [`TagPool::local`].
#[derive(Debug)]
pub struct LocalIds {
    pool: TagPool,
    /// The run being handed out: `next..end` are left.
    run: Option<Run>,
    next: i64,
    end: i64,
    chunk: u64,
    snowflake: bool,
}

impl LocalIds {
    pub(crate) fn new(pool: TagPool, chunk: u32) -> LocalIds {
        let snowflake = pool.kind() == IdKind::Snowflake;
        LocalIds { pool, run: None, next: 0, end: 0, chunk: u64::from(chunk.max(1)), snowflake }
    }

    /// How many IDs one refill of this cache takes.
    pub fn chunk(&self) -> u64 {
        self.chunk
    }

    /// The next ID: no atomic write while the cache holds IDs. Waits and errors like
    /// [`TagPool::next_id`] (it blocks the thread when nothing is buffered).
    #[inline]
    pub fn next_id(&mut self) -> Result<i64, PoolError> {
        if self.next < self.end
            && !(self.snowflake && self.run.as_ref().is_some_and(|r| self.pool.shared.buffer.is_retired(r)))
        {
            let id = self.next;
            self.next += 1;
            return Ok(id);
        }
        self.refill()
    }

    /// IDs cached and not handed out.
    pub fn cached(&self) -> u64 {
        self.end.abs_diff(self.next)
    }

    #[cold]
    #[inline(never)]
    fn refill(&mut self) -> Result<i64, PoolError> {
        self.discard();
        let shared = &self.pool.shared;
        match shared.buffer.take_run(self.chunk) {
            Some(run) => {
                if run.prefetch {
                    shared.want();
                }
                let first = run.first;
                // count <= len <= i64::MAX - first: no overflow.
                self.next = first + 1;
                self.end = first + run.count as i64;
                self.run = Some(run);
                Ok(first)
            }
            // Nothing buffered: the shared path's wait (one ID at a time until leases return).
            None => self.pool.next_id(),
        }
    }

    /// Drops the cached IDs (a retired range's, or all at the end), counted as retired.
    fn discard(&mut self) {
        let left = self.cached();
        if left > 0 {
            Counters::add(&self.pool.shared.counters.ids_retired, left);
        }
        self.next = self.end;
        self.run = None;
    }
}

impl Drop for LocalIds {
    fn drop(&mut self) {
        self.discard();
    }
}
