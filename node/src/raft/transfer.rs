//! Leadership transfer before a graceful stop: a leader given SIGTERM hands its leadership to a
//! follower that holds its whole log, so a rolling restart pauses writes for about one round
//! trip instead of an election.
//!
//! openraft 0.9.25 has no transfer of its own. The steps ([`RaftNode::hand_over`]):
//! 1. The leader closes its write gate ([`super::gate`]): a write that reaches it from now on
//!    waits for the hand-over to end and is then answered "not the leader", so the caller's
//!    forwarding ([`super::forward`]) sends it to the new leader. It waits for the writes
//!    already past the gate to finish: no entry is added to its log after that, so the
//!    successor's log can be as long as the leader's.
//! 2. It waits until it has led for longer than the lease: before that, it would refuse the
//!    successor's vote itself (openraft counts a leader's lease from its election).
//! 3. It picks a voter whose replicated log matches its last entry ([`successor`]), waiting a
//!    moment for one to catch up if none does yet.
//! 4. It asks that voter to take over ([`PATH_TAKE_OVER`]). The voter checks that the request
//!    comes from the leader it follows and that it holds the entry named, then campaigns
//!    (`trigger().elect()`) until it wins or the lease and an election timeout have passed.
//!    In a 3-node cluster the old leader's vote and its own are a majority at once. With 5 or
//!    more voters it also needs a follower whose lease of the old leader has run out: openraft
//!    0.9 has no way to tell a follower that the leader itself asked for the campaign, so that
//!    takes up to the lease (`raft.election_timeout_min_ms`).
//! 5. The old leader waits until it knows the new leader, then the node stops as before.
//!
//! Whatever fails (no caught-up voter, the successor unreachable), the node stops anyway and
//! the others elect a leader as after a crash.
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaf_raft_store::types::{LogId, NodeId};
use openraft::ServerState;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::RaftNode;

/// The internal endpoint a leader asks its successor to take over with.
pub const PATH_TAKE_OVER: &str = "/internal/raft/take-over";

/// How long a leader waits for a follower to catch up with its last entry before it gives up
/// the hand-over.
const CATCH_UP: Duration = Duration::from_secs(1);

/// Campaigns a successor makes at most: one at once, one when the other followers' leases of
/// the old leader have run out, and one more.
const MAX_CAMPAIGNS: u32 = 3;

/// The leader asks a follower to campaign now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TakeOver {
    /// The leader asking.
    pub from: NodeId,
    /// The term it leads in.
    pub term: u64,
    /// Its last log entry: the successor campaigns only once it holds it.
    pub last_log: Option<LogId>,
}

/// The successor's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TakeOverAnswer {
    /// Whether it leads now.
    pub won: bool,
    /// Its term when it answered.
    pub term: u64,
}

/// Since when this node leads, by term: noted by the election watch at each of its ticks, so
/// it is never earlier than the truth.
#[derive(Debug, Clone, Default)]
pub(crate) struct Leadership(Arc<Mutex<Option<(u64, std::time::Instant)>>>);

impl Leadership {
    /// Notes that this node leads in `term` at `now` (keeps the first note of a term).
    pub(crate) fn note(&self, term: u64, now: std::time::Instant) {
        let mut led = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if led.is_none_or(|(t, _)| t != term) {
            *led = Some((term, now));
        }
    }

    /// How long this node has led in `term` at `now`; zero when the watch has not seen it yet.
    fn age(&self, term: u64, now: std::time::Instant) -> Duration {
        match *self.0.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((t, since)) if t == term => now.saturating_duration_since(since),
            _ => Duration::ZERO,
        }
    }
}

/// The voter to hand leadership to: one whose replicated log reaches the leader's last entry,
/// `last_index` (the lowest such ID), or none.
pub(super) fn successor(
    me: NodeId,
    voters: &[NodeId],
    last_index: Option<u64>,
    matched: &BTreeMap<NodeId, Option<LogId>>,
) -> Option<NodeId> {
    voters
        .iter()
        .copied()
        .filter(|v| *v != me)
        .find(|v| matched.get(v).is_some_and(|m| m.map(|l| l.index) >= last_index))
}

impl RaftNode {
    /// When this node leads and other voters exist, hands leadership to an up-to-date follower
    /// ([this module](self)) before the node stops; the new leader, if it took over. Takes at
    /// most about the lease, an election timeout and a second.
    pub async fn hand_over(&self) -> Option<NodeId> {
        let term = self.leading_term()?;
        // Alone, or Raft already stopped (a storage failure): nothing to hand over.
        if self.voters().len() < 2 || self.raft.metrics().borrow().running_state.is_err() {
            return None;
        }
        let started = Instant::now();
        let timing = self.elections;
        let deadline = started + timing.lease + timing.max + CATCH_UP;
        let _closed = self.gate.close();
        if !self.gate.drained(started + CATCH_UP).await {
            tracing::warn!(term, "stopping without a hand-over: writes in flight did not finish");
            return None;
        }
        // Led for less than the lease: this node would refuse its successor's vote.
        let led = self.leadership.age(term, std::time::Instant::now());
        if led < timing.lease {
            tokio::time::sleep(timing.lease - led + timing.tick).await;
        }
        let (successor, addr) = match self.caught_up_successor(term, started + CATCH_UP).await {
            Some(s) => s,
            None => {
                tracing::warn!(term, "stopping without a hand-over: no voter caught up with this leader's log");
                return None;
            }
        };
        let ask = TakeOver { from: self.node_id, term, last_log: self.last_log().await };
        let within = deadline.saturating_duration_since(Instant::now());
        match self.peers.call::<_, TakeOverAnswer>(successor, &addr, PATH_TAKE_OVER, &ask, within).await {
            Ok(TakeOverAnswer { won: true, term: new_term }) => {
                // It leads: wait (briefly) until this node has heard so, so that what it still
                // answers before it stops points at the new leader.
                let wait = self.raft.wait(Some(deadline.saturating_duration_since(Instant::now())));
                let _ = wait.current_leader(successor, "the new leader").await;
                tracing::info!(
                    successor,
                    term = new_term,
                    took_ms = started.elapsed().as_millis() as u64,
                    "handed leadership over before stopping"
                );
                Some(successor)
            }
            Ok(TakeOverAnswer { won: false, term: t }) => {
                tracing::warn!(successor, term = t, "stopping without a hand-over: the successor did not win");
                None
            }
            Err(e) => {
                tracing::warn!(successor, error = %e, "stopping without a hand-over: the successor did not answer");
                None
            }
        }
    }

    /// The voters of the current membership, with their addresses.
    pub(super) fn voters(&self) -> Vec<(NodeId, String)> {
        let m = self.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        membership.voter_ids().filter_map(|id| membership.get_node(&id).map(|n| (id, n.addr.clone()))).collect()
    }

    /// Waits (until `by`) for a voter that holds this leader's last entry; it and its address.
    /// None once this node no longer leads in `term`.
    async fn caught_up_successor(&self, term: u64, by: Instant) -> Option<(NodeId, String)> {
        let mut metrics = self.raft.metrics();
        loop {
            {
                let m = metrics.borrow_and_update();
                if m.state != ServerState::Leader || m.current_term != term {
                    return None;
                }
                let voters: Vec<NodeId> = m.membership_config.membership().voter_ids().collect();
                if let Some(matched) = &m.replication {
                    if let Some(s) = successor(self.node_id, &voters, m.last_log_index, matched) {
                        let addr = m.membership_config.membership().get_node(&s).map(|n| n.addr.clone())?;
                        return Some((s, addr));
                    }
                }
            }
            // Time is up, or Raft stopped.
            if !matches!(tokio::time::timeout_at(by, metrics.changed()).await, Ok(Ok(()))) {
                return None;
            }
        }
    }

    /// Answers a leader's request to take over ([this module](self)): campaigns when it comes
    /// from the leader this voter follows and this voter holds the leader's last entry.
    pub(super) async fn take_over(&self, ask: &TakeOver) -> TakeOverAnswer {
        let timing = self.elections;
        let deadline = Instant::now() + timing.lease + timing.max;
        let (follows, voter, term) = {
            let m = self.raft.metrics();
            let m = m.borrow();
            let voter = m.membership_config.membership().voter_ids().any(|v| v == self.node_id);
            (m.current_leader == Some(ask.from) && m.current_term == ask.term, voter, m.current_term)
        };
        if !follows || !voter {
            tracing::warn!(from = ask.from, term = ask.term, my_term = term, voter, "refused to take over");
            return TakeOverAnswer { won: false, term };
        }
        let index = ask.last_log.map(|l| l.index);
        let holds = self
            .raft
            .wait(Some(deadline.saturating_duration_since(Instant::now())))
            .metrics(move |m| m.last_log_index >= index, "the leader's last entry")
            .await;
        if holds.is_err() || self.last_log().await < ask.last_log {
            return TakeOverAnswer { won: false, term: self.raft.metrics().borrow().current_term };
        }
        tracing::info!(from = ask.from, term = ask.term, "taking over leadership at the leader's request");
        // With 5 or more voters the other followers refuse the first campaign while their lease
        // of the old leader holds (it heartbeated until a moment ago): after the first round,
        // the next campaign waits for the end of that lease; the last follows a round later.
        let round = (timing.tick * 2).max(Duration::from_millis(20));
        let leases_end = Instant::now() + timing.lease + timing.tick;
        let mut attempt = 0u32;
        loop {
            if let Err(e) = self.raft.trigger().elect().await {
                tracing::warn!(error = %e, "could not start a campaign to take over");
            }
            let mut by = Instant::now() + round;
            if attempt == 0 {
                by = by.max(leases_end);
            }
            if let Some(answer) = self.took_over(ask.from, by.min(deadline)).await {
                return answer;
            }
            attempt += 1;
            // A campaign lost after the leases ran out is lost to a longer log elsewhere: more
            // would only raise the term.
            if Instant::now() >= deadline || attempt >= MAX_CAMPAIGNS {
                return TakeOverAnswer { won: false, term: self.raft.metrics().borrow().current_term };
            }
        }
    }

    /// Waits until `by` for this node to lead (won) or another voter than `old` to lead (lost);
    /// `None` if neither happened.
    async fn took_over(&self, old: NodeId, by: Instant) -> Option<TakeOverAnswer> {
        let mut metrics = self.raft.metrics();
        let decided = |m: &openraft::RaftMetrics<NodeId, leaf_raft_store::types::Node>| {
            if m.state == ServerState::Leader {
                Some(TakeOverAnswer { won: true, term: m.current_term })
            } else if m.current_leader.is_some_and(|l| l != self.node_id && l != old) {
                Some(TakeOverAnswer { won: false, term: m.current_term })
            } else {
                None
            }
        };
        loop {
            if let Some(a) = decided(&metrics.borrow_and_update()) {
                return Some(a);
            }
            if !matches!(tokio::time::timeout_at(by, metrics.changed()).await, Ok(Ok(()))) {
                return decided(&metrics.borrow());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    /// A follower's matched entry: only its index counts.
    fn matched_at(index: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(3, 1), index))
    }

    #[test]
    fn the_successor_holds_the_leaders_last_entry() {
        let voters = [1, 2, 3];
        let matched = BTreeMap::from([(2, matched_at(9)), (3, matched_at(10))]);
        assert_eq!(successor(1, &voters, Some(10), &matched), Some(3), "only 3 holds entry 10");
        assert_eq!(successor(1, &voters, Some(11), &matched), None, "nobody holds entry 11 yet");
        let both = BTreeMap::from([(2, matched_at(10)), (3, matched_at(10))]);
        assert_eq!(successor(1, &voters, Some(10), &both), Some(2), "the lowest ID of those who do");
        // A learner is not a voter; the leader itself is never its successor; nothing
        // replicated yet is not caught up.
        let learner = BTreeMap::from([(4, matched_at(10)), (1, matched_at(10)), (2, None)]);
        assert_eq!(successor(1, &voters, Some(10), &learner), None);
        assert_eq!(successor(1, &[1], None, &BTreeMap::new()), None, "alone");
    }

    #[test]
    fn leadership_age_counts_from_the_first_note_of_the_term() {
        let led = Leadership::default();
        let t0 = std::time::Instant::now();
        assert_eq!(led.age(2, t0), Duration::ZERO, "never noted");
        led.note(2, t0);
        led.note(2, t0 + Duration::from_millis(300));
        assert_eq!(led.age(2, t0 + Duration::from_millis(500)), Duration::from_millis(500));
        assert_eq!(led.age(3, t0 + Duration::from_millis(500)), Duration::ZERO, "another term");
    }
}
