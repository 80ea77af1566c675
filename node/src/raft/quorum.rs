//! Quorum contact: how long ago this node last confirmed that a quorum follows its leader.
//!
//! A leader that lost its followers keeps calling itself leader (openraft 0.9 has no step-down
//! without a quorum), so "has a leader" is not the same as "can commit". The leader knows the
//! age of its last quorum acknowledgement (openraft's `millis_since_quorum_ack`, refreshed every
//! tick). A follower or learner cannot see that in the heartbeats it receives (a stale leader on
//! the minority side of a partition still sends them), so [`run`] asks the leader for its age
//! every heartbeat interval over the internal API; the follower's contact is then "when the
//! leader last heard from a quorum", as of the last answer.
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ops::{self, QuorumAge};
use super::RaftNode;

/// No contact was ever confirmed.
const NEVER: i64 = i64::MIN;

/// The last confirmed quorum contact of a non-leader, on the monotonic clock.
#[derive(Debug)]
pub(crate) struct Contact {
    anchor: Instant,
    /// Milliseconds after `anchor` (negative: before) at which the leader last had a quorum
    /// acknowledgement.
    at_ms: AtomicI64,
    /// The leader that confirmed it: a contact confirmed by an old leader does not count.
    leader: AtomicU64,
}

impl Contact {
    pub(crate) fn new() -> Arc<Contact> {
        Arc::new(Contact { anchor: Instant::now(), at_ms: AtomicI64::new(NEVER), leader: AtomicU64::new(0) })
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.anchor.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// Records that `leader` reported a quorum acknowledgement `age_ms` before `sent` (when the
    /// question left: the answer may have taken a while).
    fn confirm(&self, leader: u64, sent: Instant, age_ms: u64) {
        let sent_ms = i64::try_from(sent.saturating_duration_since(self.anchor).as_millis()).unwrap_or(i64::MAX);
        // A leader's age is at most hours; anything larger just means "long ago".
        let at = sent_ms.saturating_sub(i64::try_from(age_ms).unwrap_or(i64::MAX)).max(NEVER + 1);
        if self.leader.swap(leader, Ordering::AcqRel) != leader {
            self.at_ms.store(at, Ordering::Release);
        } else {
            // Never move backwards (a slow answer overtaken by a faster one).
            let _ = self.at_ms.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some(if old == NEVER { at } else { old.max(at) })
            });
        }
    }

    /// Age of the last contact confirmed by `leader`, in ms; `None` when it never confirmed one.
    pub(crate) fn age_ms(&self, leader: u64) -> Option<u64> {
        if self.leader.load(Ordering::Acquire) != leader {
            return None;
        }
        match self.at_ms.load(Ordering::Acquire) {
            NEVER => None,
            at => Some(u64::try_from(self.now_ms().saturating_sub(at)).unwrap_or(0)),
        }
    }
}

impl RaftNode {
    /// Runs the quorum contact probe until aborted (spawn it once per node).
    pub async fn watch_quorum(self) {
        let every = self.probe_every;
        run(self, every).await
    }
}

/// Asks the current leader for its quorum acknowledgement age every `interval` while this node
/// is not the leader; runs until aborted.
async fn run(node: RaftNode, interval: Duration) {
    let mut tick = crate::ticker::Ticker::forever(interval);
    while tick.next().await {
        let (Some(leader), Some(addr)) = node.leader_and_addr() else { continue };
        if leader == node.node_id {
            continue;
        }
        let sent = Instant::now();
        match ops::call(&node.peers, leader, &addr, &QuorumAge, interval).await {
            Ok(Ok(Some(age))) => node.contact.confirm(leader, sent, age),
            Ok(Ok(None)) => tracing::debug!(leader, "the leader had no quorum acknowledgement yet"),
            Ok(Err(e)) => tracing::debug!(leader, error = %e, "leader refused the quorum age"),
            Err(e) => tracing::debug!(leader, error = %e, "quorum age probe failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contact_is_per_leader_and_never_moves_back() {
        let c = Contact::new();
        assert_eq!(c.age_ms(1), None);
        let sent = Instant::now();
        c.confirm(1, sent, 0);
        assert!(c.age_ms(1).is_some_and(|a| a < 1000));
        // Another leader's contact does not count for leader 2 until leader 2 confirms.
        assert_eq!(c.age_ms(2), None);
        // An older answer from the same leader does not make the contact older.
        std::thread::sleep(Duration::from_millis(20));
        c.confirm(1, sent, 5_000);
        assert!(c.age_ms(1).is_some_and(|a| a < 1000), "{:?}", c.age_ms(1));
        // A new leader replaces it.
        c.confirm(2, Instant::now(), 3_000);
        assert!(c.age_ms(2).is_some_and(|a| a >= 3_000));
        assert_eq!(c.age_ms(1), None);
    }
}
