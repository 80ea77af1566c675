//! Elections a majority agrees to first: a pre-vote before every campaign.
//!
//! openraft 0.9.25 has no pre-vote. A follower that stops hearing its leader raises its term and
//! campaigns, and a follower cut off from the rest does so again and again; when it comes back,
//! its higher term makes the leader step down: an election for nothing (about 1.5 s without a
//! leader, measured on a 5-node cluster). So openraft's own elections are off
//! (`enable_elect = false`, see `start.rs`) and [`RaftNode::watch_elections`] decides:
//! - a voter that heard no leader for a random time in `[election_timeout_min_ms,
//!   election_timeout_max_ms)` asks every other voter for a pre-vote ([`PATH_PRE_VOTE`]);
//! - a peer grants it ([`grants`]) if it heard no leader itself within the lease (it is not a
//!   leader with a quorum acknowledgement that recent either) and the asker's log is at least
//!   as up to date as its own; a pre-vote changes nothing on either side;
//! - with a majority of grants, its own included, the node campaigns (`trigger().elect()`).
//!   openraft's vote then runs as before, and a follower still refuses it while its own lease of
//!   the leader holds (openraft's `election_timeout_max`, which is set to the lease).
//!
//! A node that cannot reach a majority never raises its term, so its return disturbs nothing.
//! The lease is `election_timeout_min_ms`: a follower campaigns only after its peers' leases
//! ran out too, since they heard the leader last at about the moment it did.
use std::time::{Duration, Instant};

use leaf_raft_store::types::{LogId, NodeId};
use openraft::storage::RaftLogStorage;
use openraft::ServerState;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::RaftNode;

/// The internal endpoint of a pre-vote.
pub const PATH_PRE_VOTE: &str = "/internal/raft/pre-vote";

/// A voter asks whether the peer would vote for it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PreVote {
    pub candidate: NodeId,
    /// The term it would campaign in (for the peer's log).
    pub term: u64,
    /// Its last log entry.
    pub last_log: Option<LogId>,
}

/// The peer's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreVoteAnswer {
    pub granted: bool,
}

/// When elections happen ([this module](self)).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// A follower's lease of its leader: it grants no pre-vote while it heard one this recently.
    pub lease: Duration,
    /// The random time without a leader after which a voter asks for pre-votes: from `lease`
    /// to `max`.
    pub max: Duration,
    /// How often the watch looks.
    pub tick: Duration,
    /// How long a pre-vote is waited for: the lease (a majority's answers end the wait
    /// sooner). Not the tick: over a WAN a round trip, and the handshakes of a new connection
    /// between two followers (which otherwise never talk), take longer than half a heartbeat,
    /// and a pre-vote that can never be answered in time left the voters without a leader for
    /// good (found by `cluster-tests/tests/cluster/regions_wan.rs`).
    pub ask: Duration,
}

impl Timing {
    /// A new random wait before the next pre-vote.
    fn wait(&self) -> Duration {
        let (lo, hi) = (self.lease.as_millis() as u64, self.max.as_millis() as u64);
        Duration::from_millis(if hi > lo { rand::thread_rng().gen_range(lo..hi) } else { lo })
    }
}

/// What a peer knows when it is asked for a pre-vote, gathered first so that the decision is a
/// pure function.
#[derive(Debug, Clone, Copy)]
pub(super) struct Local {
    /// Since the last append-entries request it accepted from a leader.
    pub heard_age: Option<Duration>,
    /// When it leads: the age of its last quorum acknowledgement.
    pub leading_ack_age: Option<Duration>,
    pub last_log: Option<LogId>,
}

/// Whether a peer with `local` grants a pre-vote to a candidate whose last entry is
/// `candidate_log`.
pub(super) fn grants(candidate_log: Option<LogId>, local: &Local, lease: Duration) -> bool {
    let heard_leader = local.heard_age.is_some_and(|a| a < lease);
    let leads = local.leading_ack_age.is_some_and(|a| a < lease);
    !heard_leader && !leads && candidate_log >= local.last_log
}

impl RaftNode {
    /// This node's last log entry.
    pub(super) async fn last_log(&self) -> Option<LogId> {
        let mut log = self.log.clone();
        log.get_log_state().await.ok().and_then(|s| s.last_log_id)
    }

    /// Answers a pre-vote ([`grants`]).
    pub(super) async fn answer_pre_vote(&self, asked: &PreVote) -> PreVoteAnswer {
        let now = Instant::now();
        let (leading_ack_age, term) = {
            let m = self.raft.metrics();
            let m = m.borrow();
            let ack = (m.state == ServerState::Leader)
                .then(|| m.millis_since_quorum_ack.map_or(Duration::ZERO, Duration::from_millis));
            (ack, m.current_term)
        };
        let local = Local { heard_age: self.heard.age(now), leading_ack_age, last_log: self.last_log().await };
        let granted = grants(asked.last_log, &local, self.elections.lease);
        tracing::debug!(candidate = asked.candidate, term = asked.term, my_term = term, granted, ?local, "pre-vote");
        PreVoteAnswer { granted }
    }

    /// Campaigns whenever a voter has heard no leader for its random wait and a majority of the
    /// voters grant it a pre-vote ([this module](self)); runs until aborted (spawn it once).
    pub async fn watch_elections(self) {
        let timing = self.elections;
        let mut tick = crate::ticker::Ticker::forever(timing.tick);
        let mut since = Instant::now();
        let mut wait = timing.wait();
        while tick.next().await {
            let (state, term) = {
                let m = self.raft.metrics();
                let m = m.borrow();
                (m.state, m.current_term)
            };
            let voters = self.voters();
            let now = Instant::now();
            if state == ServerState::Leader {
                self.leadership.note(term, now);
            }
            if state == ServerState::Leader || !voters.iter().any(|(id, _)| *id == self.node_id) {
                (since, wait) = (now, timing.wait());
                continue;
            }
            // The later of the last word from a leader and the last attempt.
            let quiet_since = self.heard.at().map_or(since, |at| at.max(since));
            if now.saturating_duration_since(quiet_since) < wait {
                continue;
            }
            (since, wait) = (now, timing.wait());
            let asked = PreVote { candidate: self.node_id, term: term + 1, last_log: self.last_log().await };
            let majority = voters.len() / 2 + 1;
            let granted = self.pre_vote(&voters, &asked, timing.ask, majority).await;
            if granted < majority {
                tracing::debug!(
                    granted,
                    majority,
                    term = asked.term,
                    "no leader heard, and no majority for a campaign"
                );
                continue;
            }
            tracing::info!(granted, voters = voters.len(), term = asked.term, "no leader heard: campaigning");
            if let Err(e) = self.raft.trigger().elect().await {
                tracing::warn!(error = %e, "could not start a campaign");
            }
        }
    }

    /// Asks every other voter for a pre-vote at once; the grants, this node's included, counted
    /// until they reach `majority` (a peer cut off from this one would otherwise hold the count
    /// for the whole wait, and two voters would campaign together more often).
    async fn pre_vote(&self, voters: &[(NodeId, String)], asked: &PreVote, within: Duration, majority: usize) -> usize {
        use futures::stream::{FuturesUnordered, StreamExt};
        let mut asks: FuturesUnordered<_> = voters
            .iter()
            .filter(|(id, _)| *id != self.node_id)
            .map(|(id, addr)| async move {
                match self.peers.call::<_, PreVoteAnswer>(*id, addr, PATH_PRE_VOTE, asked, within).await {
                    Ok(a) => a.granted,
                    Err(e) => {
                        tracing::debug!(peer = id, error = %e, "pre-vote not answered");
                        false
                    }
                }
            })
            .collect();
        let mut granted = 1;
        while granted < majority {
            match asks.next().await {
                Some(true) => granted += 1,
                Some(false) => {}
                None => break,
            }
        }
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn log(term: u64, index: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(term, 1), index))
    }

    #[test]
    fn a_pre_vote_is_granted_only_without_a_live_leader_and_to_a_log_as_long() {
        let lease = Duration::from_millis(400);
        let ms = Duration::from_millis;
        let quiet = Local { heard_age: Some(ms(450)), leading_ack_age: None, last_log: log(2, 10) };
        assert!(grants(log(2, 10), &quiet, lease), "a log as long, no leader for longer than the lease");
        assert!(grants(log(3, 1), &quiet, lease), "a later term wins over a longer log");
        assert!(!grants(log(2, 9), &quiet, lease), "a shorter log");
        assert!(!grants(log(1, 50), &quiet, lease), "an older term");
        assert!(!grants(None, &quiet, lease), "an empty log against entries");
        // Never heard a leader (a fresh start of every node): granted.
        assert!(grants(None, &Local { heard_age: None, leading_ack_age: None, last_log: None }, lease));
        // A leader heard within the lease: refused, however long the asker's log.
        assert!(!grants(log(9, 99), &Local { heard_age: Some(ms(399)), ..quiet }, lease));
        // A leader with a recent quorum acknowledgement refuses; one that lost its quorum grants.
        assert!(!grants(log(2, 10), &Local { leading_ack_age: Some(ms(100)), ..quiet }, lease));
        assert!(grants(log(2, 10), &Local { leading_ack_age: Some(ms(500)), ..quiet }, lease));
    }

    #[test]
    fn the_wait_is_drawn_between_the_lease_and_the_max() {
        let t = Timing {
            lease: Duration::from_millis(400),
            max: Duration::from_millis(800),
            tick: Duration::ZERO,
            ask: Duration::ZERO,
        };
        for _ in 0..1000 {
            let w = t.wait();
            assert!(w >= t.lease && w < t.max, "{w:?}");
        }
        let flat = Timing { max: t.lease, ..t };
        assert_eq!(flat.wait(), t.lease);
    }
}
