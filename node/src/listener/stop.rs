//! The listener's shutdown as its connections wait for it: a flag and a [`Notify`], set once.
//!
//! Every connection task polls its [`Stopped`] each time the task wakes (with the connection,
//! in one `select!`), that is several times a request. A `watch` receiver's wait takes the
//! channel's waiter lock on each of those polls, one lock that every connection shares;
//! [`Stopped`] registers its task once and then only reads the flag.
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// The shutdown signal of one listener.
#[derive(Debug, Default)]
pub struct Stop {
    stopped: AtomicBool,
    notify: Notify,
}

impl Stop {
    pub fn new() -> Arc<Stop> {
        Arc::new(Stop::default())
    }

    /// Stops: every [`Stopped`], made before or after, resolves.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// A future that resolves once [`Stop::stop`] was called.
    pub fn stopped(&self) -> Stopped<'_> {
        // Made before the flag is read: a `stop` in between still wakes it.
        Stopped { stop: self, notified: Box::pin(self.notify.notified()), registered: None }
    }
}

/// [`Stop::stopped`]'s future.
pub struct Stopped<'a> {
    stop: &'a Stop,
    notified: Pin<Box<Notified<'a>>>,
    /// The waker the `Notify` holds, once registered.
    registered: Option<Waker>,
}

impl Future for Stopped<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.stop.stopped.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        if this.registered.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            // `stop` sets the flag before it wakes the registered waker.
            return Poll::Pending;
        }
        match this.notified.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(()),
            Poll::Pending => {
                this.registered = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_wait_ends_at_stop_whenever_it_was_made_or_polled() {
        let stop = Stop::new();
        let early = stop.stopped();
        let waiting = tokio::spawn({
            let stop = stop.clone();
            async move { stop.stopped().await }
        });
        // Polled (registered) and not yet: both end.
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        stop.stop();
        waiting.await.unwrap();
        early.await;
        stop.stopped().await;
    }

    #[tokio::test]
    async fn polling_again_before_stop_stays_pending() {
        let stop = Stop::new();
        let mut wait = stop.stopped();
        for _ in 0..3 {
            assert!(futures::poll!(&mut wait).is_pending());
        }
        stop.stop();
        assert!(futures::poll!(&mut wait).is_ready());
    }
}
