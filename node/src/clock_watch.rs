//! Watches the peers' clocks while the node runs: every [`EVERY`] it reads each member's clock
//! (the same internal call and the same checks of the answer as the snowflake startup check,
//! [`crate::snowflake::clock_check`]) and keeps the offsets for `/metrics`
//! (`leaf_peer_clock_offset_seconds{peer}`), so a clock that drifts after the start is seen and
//! alerted on. It only observes: the high-water marks keep snowflake IDs unique whatever the
//! clocks do.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use crate::raft::RaftNode;
use crate::snowflake::clock_check;

/// How often the peers are asked.
pub const EVERY: Duration = Duration::from_secs(15);
/// Timeout of one peer's answer: a longer round trip is too uncertain to judge an offset.
const TIMEOUT: Duration = Duration::from_millis(500);

/// The offsets of the last round, by peer: its clock minus this node's, ms.
#[derive(Debug, Default)]
pub struct PeerClocks(ArcSwap<BTreeMap<u64, i64>>);

impl PeerClocks {
    pub fn offsets(&self) -> Arc<BTreeMap<u64, i64>> {
        self.0.load_full()
    }

    /// Asks every peer now and keeps the usable answers.
    pub async fn sample(&self, raft: &RaftNode) {
        let calls = raft.peer_addrs().into_iter().map(|(id, addr)| async move {
            let sample = match raft.peer_time(id, &addr, TIMEOUT).await {
                Ok((before, peer, after)) => clock_check::sample(before, peer, after, TIMEOUT)
                    .map_err(|why| tracing::debug!(peer = id, %why, "peer clock sample discarded"))
                    .ok(),
                Err(e) => {
                    tracing::debug!(peer = id, error = %e, "peer clock unknown (unreachable)");
                    None
                }
            };
            sample.map(|s| (id, s.offset_ms))
        });
        let offsets: BTreeMap<u64, i64> = futures::future::join_all(calls).await.into_iter().flatten().collect();
        self.0.store(Arc::new(offsets));
    }

    /// Samples every [`EVERY`] until `shutdown` turns true.
    pub async fn run(self: Arc<Self>, raft: RaftNode, shutdown: watch::Receiver<bool>) {
        let mut tick = crate::ticker::Ticker::new(EVERY, shutdown);
        while tick.next().await {
            self.sample(&raft).await;
        }
    }
}
