//! Whether this node is caught up with a leader it heard from recently, so it may say "no
//! such tag" from its own state without a read-index round through the leader.
//!
//! A read index costs the leader a heartbeat to every follower; a flood of requests for tags
//! that exist nowhere (typos, probes, a client misconfigured) made each follower ask the
//! leader again and again. With `raft.unknown_tags = "local"` (the default; `"leader"` asks
//! every time), a node answers such a miss locally when all of these hold:
//! - **a leader**: it leads, and its last quorum acknowledgement is at most
//!   [`RaftNode::local_reads_within`] old. A create that completed anywhere was applied here
//!   before its caller was answered (a follower's create is forwarded here and applied before
//!   the answer), so only a deposed leader that does not know it yet could miss it.
//! - **a follower**: the last append-entries request from its current leader (a heartbeat or
//!   entries, in the current term) arrived at most that long ago, this node has applied at
//!   least the commit index that request carried, and the leader's quorum contact as last
//!   probed ([`super::quorum`]) is at most that old too (a deposed leader on the minority side
//!   of a partition still sends heartbeats, but it no longer hears from a quorum).
//!
//! What this gives up: a tag created on another node may be answered 404 here for a moment,
//! until the next append from the leader carries its commit — at most about the window,
//! `2 × raft.heartbeat_ms`. A node that cannot tell (a stale contact, an election) confirms
//! with the leader as before. `leaf-client` reads its own creates: it retries a 404 of a tag
//! it created itself through the window (the book's chapter on clusters says what a client
//! sees).
use std::sync::Mutex;
use std::time::{Duration, Instant};

use leaf_raft_store::types::NodeId;
use openraft::ServerState;

use super::RaftNode;

/// The last append-entries request this node accepted from a leader.
#[derive(Debug, Clone, Copy)]
struct Heard {
    /// When it arrived (before it was handled, so the age is never understated).
    at: Instant,
    leader: NodeId,
    term: u64,
    /// The leader's commit index it carried.
    commit: Option<u64>,
}

/// The last append-entries request accepted from a leader ([`LeaderHeard::heard`]).
#[derive(Debug, Default)]
pub(crate) struct LeaderHeard {
    last: Mutex<Option<Heard>>,
}

impl LeaderHeard {
    /// Records an append-entries request from `leader` in `term`, carrying `commit`, that
    /// arrived `at` and was accepted.
    pub(crate) fn heard(&self, at: Instant, leader: NodeId, term: u64, commit: Option<u64>) {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        // Requests are handled concurrently: keep the latest arrival.
        if last.is_none_or(|h| h.at <= at) {
            *last = Some(Heard { at, leader, term, commit });
        }
    }

    fn last(&self) -> Option<Heard> {
        *self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the last accepted request from a leader arrived.
    pub(crate) fn at(&self) -> Option<Instant> {
        self.last().map(|h| h.at)
    }

    /// How long ago, at `now`, the last accepted request from a leader arrived.
    pub(crate) fn age(&self, now: Instant) -> Option<Duration> {
        self.at().map(|at| now.saturating_duration_since(at))
    }
}

/// What the follower check reads, gathered first so the decision is a pure function.
#[derive(Debug, Clone, Copy)]
struct FollowerView {
    heard: Option<Heard>,
    now: Instant,
    leader: Option<NodeId>,
    term: u64,
    applied: Option<u64>,
    quorum_age_ms: Option<u64>,
}

/// Whether a follower with `v` is caught up with a leader heard from within `window`.
fn follower_caught_up(v: FollowerView, window: Duration) -> bool {
    let Some(h) = v.heard else { return false };
    let within = |ms: u64| Duration::from_millis(ms) <= window;
    Some(h.leader) == v.leader
        && h.term == v.term
        && v.now.saturating_duration_since(h.at) <= window
        && v.applied >= h.commit
        && v.quorum_age_ms.is_some_and(within)
}

impl RaftNode {
    /// How stale a local "no such tag" may be: twice the heartbeat interval, below the
    /// shortest election timeout.
    pub(crate) fn local_reads_within(&self) -> Duration {
        self.local_reads_window
    }

    /// Records an accepted append-entries request ([`super::service`]).
    pub(crate) fn leader_heard(&self, at: Instant, leader: NodeId, term: u64, commit: Option<u64>) {
        self.heard.heard(at, leader, term, commit);
    }

    /// Whether this node may answer that a tag does not exist from its own state ([this
    /// module](self)): never unless `raft.unknown_tags = "local"`.
    pub fn caught_up(&self) -> bool {
        if !self.local_misses {
            return false;
        }
        let window = self.local_reads_within();
        let m = self.raft.metrics();
        let m = m.borrow();
        match m.state {
            ServerState::Leader => {
                m.current_leader == Some(self.node_id)
                    && m.millis_since_quorum_ack.is_some_and(|a| Duration::from_millis(a) <= window)
            }
            ServerState::Follower | ServerState::Learner => {
                let view = FollowerView {
                    heard: self.heard.last(),
                    now: Instant::now(),
                    leader: m.current_leader,
                    term: m.current_term,
                    applied: m.last_applied.map(|l| l.index),
                    quorum_age_ms: m.current_leader.and_then(|l| self.contact.age_ms(l)),
                };
                follower_caught_up(view, window)
            }
            ServerState::Candidate | ServerState::Shutdown => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_millis(500);

    fn caught_up_view(now: Instant) -> FollowerView {
        FollowerView {
            heard: Some(Heard { at: now - Duration::from_millis(100), leader: 1, term: 4, commit: Some(40) }),
            now,
            leader: Some(1),
            term: 4,
            applied: Some(40),
            quorum_age_ms: Some(200),
        }
    }

    #[test]
    fn a_follower_answers_locally_only_when_every_condition_holds() {
        let now = Instant::now();
        let ok = caught_up_view(now);
        assert!(follower_caught_up(ok, WINDOW));
        let cases: [(&str, FollowerView); 8] = [
            ("never heard", FollowerView { heard: None, ..ok }),
            ("behind the commit it heard", FollowerView { applied: Some(39), ..ok }),
            ("nothing applied", FollowerView { applied: None, ..ok }),
            ("another leader now", FollowerView { leader: Some(2), ..ok }),
            ("no leader", FollowerView { leader: None, ..ok }),
            ("a later term", FollowerView { term: 5, ..ok }),
            ("quorum contact too old", FollowerView { quorum_age_ms: Some(501), ..ok }),
            ("no quorum contact", FollowerView { quorum_age_ms: None, ..ok }),
        ];
        for (why, v) in cases {
            assert!(!follower_caught_up(v, WINDOW), "{why}");
        }
        let old = Heard { at: now - Duration::from_millis(501), leader: 1, term: 4, commit: Some(40) };
        assert!(!follower_caught_up(FollowerView { heard: Some(old), ..ok }, WINDOW), "heard too long ago");
        // A leader that has committed nothing yet (no commit index) and a node that applied
        // nothing: caught up.
        let fresh = Heard { commit: None, ..ok.heard.unwrap() };
        assert!(follower_caught_up(FollowerView { heard: Some(fresh), applied: None, ..ok }, WINDOW));
    }

    #[test]
    fn the_latest_arrival_is_kept() {
        let h = LeaderHeard::default();
        let t0 = Instant::now();
        h.heard(t0 + Duration::from_millis(10), 1, 3, Some(9));
        h.heard(t0, 1, 3, Some(5)); // handled later, arrived earlier
        let last = h.last().unwrap();
        assert_eq!((last.commit, last.at), (Some(9), t0 + Duration::from_millis(10)));
        h.heard(t0 + Duration::from_millis(20), 2, 4, Some(12));
        assert_eq!(h.last().unwrap().leader, 2);
    }
}
