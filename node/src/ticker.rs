//! [`Ticker`]: the periodic wake-up of a background task (forecast samples, scheduled
//! backups) that ends when the node shuts down.
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Interval, MissedTickBehavior};

/// Ticks every period (the first at once; a late tick delays the next ones rather than
/// bursting) until the node's shutdown signal turns true.
pub struct Ticker {
    tick: Interval,
    shutdown: watch::Receiver<bool>,
}

impl Ticker {
    pub fn new(every: Duration, shutdown: watch::Receiver<bool>) -> Self {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Ticker { tick, shutdown }
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
    }
}
