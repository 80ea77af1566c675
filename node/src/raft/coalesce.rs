//! Coalesced read-index requests.
//!
//! A request for a tag this node does not know asks the leader for a read index, so a tag
//! created through any node is usable here at once. One round per request made a flood of
//! random unknown tags cost a quorum round each (about 4,400 requests a second on a follower
//! here, a sixteenth of a known tag's rate). Callers now share rounds: a caller joins the batch
//! of the next round to start; a driver task takes the whole batch, runs one round and answers
//! them all. Up to [`MAX_IN_FLIGHT`] drivers run at once (one: rounds cost the leader CPU).
//!
//! Linearizable all the same: every caller is answered from a round that *started after the
//! caller arrived*, so the index covers every write that completed before the caller's request
//! (a caller that arrives while a round is in flight waits for the next one, never reuses the
//! one in flight). At most [`MAX_IN_FLIGHT`] rounds are in flight per [`Coalescer`], whatever the
//! request rate.
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::ProposeError;

type Reply = Result<Option<u64>, ProposeError>;

/// Shares read-index rounds among concurrent callers.
#[derive(Default)]
pub(crate) struct Coalescer {
    state: Mutex<State>,
    /// Rounds started.
    rounds: prometheus_client::metrics::counter::Counter,
}

#[derive(Default)]
struct State {
    /// Driver tasks running rounds (at most [`MAX_IN_FLIGHT`]).
    drivers: usize,
    /// Callers for the next round.
    waiting: Vec<oneshot::Sender<Reply>>,
}

/// Rounds in flight at once. More would let a caller skip waiting for a running round, but
/// each round costs the leader a heartbeat to every follower: on 2 cores, 4 in flight served
/// fewer unknown-tag requests than 1 (32k vs 37k a second on a follower, bench/hardening.sh).
const MAX_IN_FLIGHT: usize = 1;

impl Coalescer {
    /// A coalescer that counts its rounds in `rounds`.
    pub(crate) fn counting(rounds: prometheus_client::metrics::counter::Counter) -> Self {
        Coalescer { state: Mutex::default(), rounds }
    }

    /// The result of a round of `fetch` that started after this call did. `fetch` runs on a
    /// spawned task, so a caller that gives up does not cancel the round of the others.
    pub(crate) async fn read<F, Fut>(self: &Arc<Self>, fetch: F) -> Reply
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.waiting.push(tx);
            let start = s.drivers < MAX_IN_FLIGHT;
            s.drivers += usize::from(start);
            start
        };
        if start {
            let me = self.clone();
            tokio::spawn(async move {
                loop {
                    let batch = {
                        let mut s = me.state.lock().unwrap_or_else(|e| e.into_inner());
                        if s.waiting.is_empty() {
                            s.drivers -= 1;
                            return;
                        }
                        std::mem::take(&mut s.waiting)
                    };
                    // Everyone in `batch` arrived before this round starts.
                    me.rounds.inc();
                    let reply = fetch().await;
                    for w in batch {
                        let _ = w.send(reply.clone());
                    }
                }
            });
        }
        rx.await.unwrap_or_else(|_| Err(ProposeError::Unavailable("read index round was dropped".into())))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use super::*;

    /// Each round returns the number of writes completed when it *started*: a caller must get a
    /// value at least as large as the writes completed before it called.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_share_rounds_but_never_one_that_started_before_them() {
        let writes = Arc::new(AtomicU64::new(0));
        let rounds = Arc::new(AtomicU64::new(0));
        let c = Arc::new(Coalescer::default());
        let fetch = {
            let (writes, rounds) = (writes.clone(), rounds.clone());
            move || {
                let seen = writes.load(Ordering::SeqCst);
                rounds.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Ok(Some(seen))
                }
            }
        };
        let fetch = Arc::new(fetch);
        let mut tasks = Vec::new();
        for i in 0..400u64 {
            let (c, writes, fetch) = (c.clone(), writes.clone(), fetch.clone());
            tasks.push(tokio::spawn(async move {
                if i % 3 == 0 {
                    writes.fetch_add(1, Ordering::SeqCst);
                }
                let before = writes.load(Ordering::SeqCst);
                let got = c.read(move || fetch()).await.unwrap().unwrap();
                assert!(got >= before, "caller {i} saw {got} writes, {before} had completed before it asked");
            }));
            if i % 50 == 0 {
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        }
        for t in tasks {
            t.await.unwrap();
        }
        let r = rounds.load(Ordering::SeqCst);
        assert!(r < 100, "400 callers took {r} rounds: not coalesced");
    }
}
