//! [`Ticker`]: the periodic wake-up of every background task (forecast samples, scheduled
//! backups, compaction, reservations, clock samples, certificate reloads, idle tags, quorum
//! probes, memory trims) that ends when the node shuts down.
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Interval, MissedTickBehavior};

/// Ticks every period (the first at once; a late tick delays the next ones rather than
/// bursting) until the node's shutdown signal turns true.
pub struct Ticker {
    tick: Interval,
    shutdown: watch::Receiver<bool>,
    /// The sender of a ticker that ends only when its task is aborted ([`Ticker::forever`]).
    _never: Option<watch::Sender<bool>>,
}

impl Ticker {
    pub fn new(every: Duration, shutdown: watch::Receiver<bool>) -> Self {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ticker { tick, shutdown, _never: None }
    }

    /// Ticks every period until its task is aborted (a task the node aborts at shutdown).
    pub fn forever(every: Duration) -> Self {
        let (never, shutdown) = watch::channel(false);
        Ticker { _never: Some(never), ..Ticker::new(every, shutdown) }
    }

    /// Waits for the next tick: `true`, or `false` once the node shuts down (or the signal's
    /// sender is gone), and then at once every time after.
    pub async fn next(&mut self) -> bool {
        tokio::select! {
            // The shutdown first: once it is signalled, no tick is ever taken.
            biased;
            _ = self.shutdown.wait_for(|stop| *stop) => false,
            _ = self.tick.tick() => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn ticks_until_the_shutdown_then_never_again() {
        let (stop, rx) = watch::channel(false);
        let mut t = Ticker::new(Duration::from_secs(5), rx);
        assert!(t.next().await && t.next().await);
        stop.send(true).unwrap();
        assert!(!t.next().await);
        assert!(!t.next().await);
        let (gone, rx) = watch::channel(false);
        let mut t = Ticker::new(Duration::from_secs(5), rx);
        drop(gone);
        assert!(!t.next().await, "a dropped sender stops it");
        let mut t = Ticker::forever(Duration::from_secs(5));
        assert!(t.next().await && t.next().await, "a ticker for ever keeps ticking");
    }
}
