//! Giving the memory of closed connections back to the operating system.
//!
//! Every open connection holds buffers (tens of KiB). glibc's malloc keeps freed memory in its
//! per-thread arenas, so after a flood of 15,000 connections a node stayed at its peak RSS
//! (285 MB here, 495 MB in the report that found it) long after they closed. [`Trimmer`]
//! counts closed connections and, when many closed since the last time, asks glibc to return
//! its free pages (`malloc_trim(0)`, which releases free memory inside every arena, not only at
//! the top of the heap; under jemalloc, purges its arenas). Normal keep-alive traffic closes few
//! connections and never triggers it; a trim costs about a millisecond when there is little to
//! release. Which allocator, and what each can say and give back: [`allocator`].
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub mod allocator;

pub use allocator::{heap, trim, NAME as ALLOCATOR};

/// Closed connections that make the next check trim.
const TRIM_AFTER_CLOSED: usize = 512;

/// Counts closed connections and trims the allocator after many.
#[derive(Debug, Default)]
pub struct Trimmer {
    closed: AtomicUsize,
}

impl Trimmer {
    /// Records one closed connection.
    pub fn connection_closed(&self) {
        self.closed.fetch_add(1, Ordering::Relaxed);
    }

    /// Trims if enough connections closed since the last trim; returns whether it did.
    pub fn maybe_trim(&self) -> bool {
        if self.closed.load(Ordering::Relaxed) < TRIM_AFTER_CLOSED {
            return false;
        }
        self.closed.store(0, Ordering::Relaxed);
        trim();
        true
    }

    /// Checks every `every` until the task is aborted.
    pub async fn run(self: std::sync::Arc<Self>, every: Duration) {
        let mut tick = crate::ticker::Ticker::forever(every);
        while tick.next().await {
            if self.maybe_trim() {
                tracing::debug!("returned freed memory to the OS after many connections closed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_only_after_many_closed_connections() {
        let t = Trimmer::default();
        for _ in 0..TRIM_AFTER_CLOSED - 1 {
            t.connection_closed();
        }
        assert!(!t.maybe_trim());
        t.connection_closed();
        assert!(t.maybe_trim());
        assert!(!t.maybe_trim(), "the count starts again");
    }
}
