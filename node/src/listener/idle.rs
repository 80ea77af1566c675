//! The idle timeout of HTTP/2 connections. hyper closes an HTTP/1.1 keep-alive connection that
//! sends no request within `http.header_read_timeout_ms`, and an HTTP/2 connection whose peer
//! stops answering pings, but an HTTP/2 connection that answers pings and sends nothing holds
//! its slot for good. [`Activity`] counts a connection's requests in flight and when the last
//! one ended; [`idle`] resolves once none has been in flight for `http.idle_timeout_ms`, and
//! the connection is then shut down gracefully (GOAWAY: a client opens a new one when it needs
//! it, as gRPC channels do).
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// Requests in flight on one connection, and when it was last busy.
#[derive(Debug)]
pub struct Activity {
    start: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds after `start` when the last request ended (or the connection opened).
    last_ms: AtomicU64,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity { start: Instant::now(), in_flight: AtomicUsize::new(0), last_ms: AtomicU64::new(0) })
    }

    /// A request started; the guard marks its end.
    pub fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Busy(self.clone())
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// One request in flight; dropping it (the response is ready, or the request was dropped)
/// records the end.
pub struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.last_ms.store(self.0.now_ms(), Ordering::Relaxed);
        self.0.in_flight.fetch_sub(1, Ordering::Release);
    }
}

/// Resolves once `activity` has had no request in flight for `timeout`.
pub async fn idle(activity: Arc<Activity>, timeout: Duration) {
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    loop {
        let busy = activity.in_flight.load(Ordering::Acquire) > 0;
        let quiet = activity.now_ms().saturating_sub(activity.last_ms.load(Ordering::Relaxed));
        if !busy && quiet >= timeout_ms {
            return;
        }
        // Busy now: look again a full timeout later; quiet: when the timeout would be up.
        let wait = if busy { timeout_ms } else { timeout_ms.saturating_sub(quiet) };
        tokio::time::sleep(Duration::from_millis(wait.max(1))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_after_the_timeout_without_a_request_in_flight() {
        let a = Activity::new();
        let t0 = Instant::now();
        idle(a.clone(), Duration::from_secs(5)).await;
        assert_eq!(t0.elapsed(), Duration::from_secs(5), "from the connection's start");

        // A request in flight keeps it busy however long it takes; the timeout counts from
        // its end.
        let busy = a.begin();
        let waiting = tokio::spawn(idle(a.clone(), Duration::from_secs(5)));
        tokio::time::sleep(Duration::from_secs(12)).await;
        assert!(!waiting.is_finished());
        let ended = Instant::now();
        drop(busy);
        waiting.await.unwrap();
        assert!(ended.elapsed() >= Duration::from_secs(5), "{:?}", ended.elapsed());
    }
}
