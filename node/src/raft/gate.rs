//! The leader's write gate: closed while it hands leadership over ([`super::transfer`]), so
//! that nothing more enters its log.
//!
//! A writer [`Gate::enter`]s before it appends and holds the pass until its write is done; a
//! closed gate turns it away, and it waits for the gate to open again ([`Gate::wait_open`]).
//! The closer then waits until every pass given out before is returned ([`Gate::drained`]).
//! Both sides touch the counter and the flag in opposite orders with sequentially consistent
//! atomics, so a writer either sees the gate closed or is counted before the closer checks.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub(crate) struct Gate(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    closed: watch::Sender<bool>,
    /// Writes past the gate and not done yet.
    inflight: AtomicUsize,
}

impl Default for Gate {
    fn default() -> Self {
        Gate(Arc::new(Inner { closed: watch::channel(false).0, inflight: AtomicUsize::new(0) }))
    }
}

/// A write past the gate; returned when dropped.
pub(crate) struct Pass<'a>(&'a Gate);

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        self.0 .0.inflight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The gate closed; opens it again when dropped.
pub(crate) struct Closed<'a>(&'a Gate);

impl Drop for Closed<'_> {
    fn drop(&mut self) {
        self.0 .0.closed.send_replace(false);
    }
}

/// How often [`Gate::drained`] looks.
const DRAIN_POLL: Duration = Duration::from_millis(2);

impl Gate {
    /// A pass for one write, or `None` while the gate is closed.
    pub(crate) fn enter(&self) -> Option<Pass<'_>> {
        self.0.inflight.fetch_add(1, Ordering::SeqCst);
        let pass = Pass(self);
        (!*self.0.closed.borrow()).then_some(pass)
    }

    /// Closes the gate until the returned guard is dropped.
    pub(crate) fn close(&self) -> Closed<'_> {
        self.0.closed.send_replace(true);
        Closed(self)
    }

    /// Waits until every pass given out before the gate closed is returned; whether that
    /// happened by `deadline`.
    pub(crate) async fn drained(&self, deadline: Instant) -> bool {
        loop {
            if self.0.inflight.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(DRAIN_POLL).await;
        }
    }

    /// Waits until the gate is open, or `deadline`.
    pub(crate) async fn wait_open(&self, deadline: Instant) {
        let mut rx = self.0.closed.subscribe();
        let _ = tokio::time::timeout_at(deadline, rx.wait_for(|closed| !closed)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_gate_turns_writers_away_and_waits_for_those_already_past() {
        let gate = Gate::default();
        let early = gate.enter().expect("open");
        let closed = gate.close();
        assert!(gate.enter().is_none(), "closed: no pass");
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(!gate.drained(soon).await, "a write past the gate is still in flight");
        drop(early);
        assert!(gate.drained(Instant::now() + Duration::from_secs(10)).await);
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.wait_open(Instant::now() + Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a writer waits while the gate is closed");
        drop(closed);
        tokio::time::timeout(Duration::from_secs(10), waiter).await.expect("released").unwrap();
        assert!(gate.enter().is_some(), "open again");
    }
}
