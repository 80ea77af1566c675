//! Routing to the leader: a request only the leader can execute ([`super::ops`]) runs here when
//! this node leads, and is otherwise forwarded over the internal API, retried across leader
//! changes and unreachable leaders until the deadline. The leader's answer is checked
//! ([`super::answer`]) before anything acts on it; a refused answer is logged and counted
//! (`leaf_peer_answers_rejected`).
use std::fmt::Debug;
use std::time::Duration;

use leaf_raft_store::types::NodeId;
use tokio::time::Instant;

use super::answer::AnswerError;
use super::leader::LeaderOp;
use super::ops;
use super::ProposeError;
use super::RaftNode;

/// A forwarding attempt with less time than this left is not started.
const MIN_ATTEMPT: Duration = Duration::from_millis(100);

impl RaftNode {
    /// When a request arriving now must be done by.
    pub(super) fn deadline(&self) -> Instant {
        Instant::now() + self.propose_timeout
    }

    /// When a forwarded request must be done by: the sender's budget, at most ours.
    pub(crate) fn deadline_within(&self, budget: Duration) -> Instant {
        Instant::now() + budget.min(self.propose_timeout)
    }

    /// The current leader, if known, and its address, if the membership has it.
    pub(super) fn leader_and_addr(&self) -> (Option<NodeId>, Option<String>) {
        let m = self.raft.metrics();
        let m = m.borrow();
        let leader = m.current_leader;
        let addr = leader.and_then(|l| m.membership_config.membership().get_node(&l).map(|n| n.addr.clone()));
        (leader, addr)
    }

    /// Runs `op` on the current leader, retrying across leader changes and unreachable
    /// leaders until the deadline, and returns the leader's checked reply. A request that may
    /// have reached the leader is retried only when [`LeaderOp::retry_unknown`].
    pub(crate) async fn on_leader<O: LeaderOp>(&self, op: &O) -> Result<O::Reply, ProposeError> {
        let reply = self.on_leader_unchecked(op).await?;
        if let Err(why) = op.check(&reply) {
            return Err(self.refuse_answer(&why, op, Some(&reply)));
        }
        Ok(reply)
    }

    /// Counts and logs an answer to `req` refused for `why`; the caller's error.
    pub(crate) fn refuse_answer(&self, why: &AnswerError, req: &dyn Debug, answer: Option<&dyn Debug>) -> ProposeError {
        self.rejected_answers.inc();
        tracing::error!(%why, ?req, ?answer, "refused the leader's answer");
        ProposeError::Unavailable(format!("refused the leader's answer: {why}"))
    }

    /// Resolves once this node knows of a leader other than `leader` (never after Raft stopped).
    async fn leader_other_than(&self, leader: NodeId) {
        let mut metrics = self.raft.metrics();
        loop {
            if metrics.borrow_and_update().current_leader.is_some_and(|l| l != leader) {
                return;
            }
            if metrics.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    async fn on_leader_unchecked<O: LeaderOp>(&self, op: &O) -> Result<O::Reply, ProposeError> {
        let retry_unknown = op.retry_unknown();
        let deadline = self.deadline();
        let mut last: Option<ProposeError>;
        // One retry without the pause below, when the node tried names another leader (a
        // leader that just handed over, `transfer`): once, so two nodes that each name the
        // other cannot spin.
        let mut quick = true;
        loop {
            match self.leader_and_addr() {
                (Some(l), _) if l == self.node_id => match op.clone().execute(self, deadline).await {
                    Err(ProposeError::NotLeader { leader: Some(n) }) if n != l && quick => {
                        quick = false;
                        continue;
                    }
                    Err(e @ ProposeError::NotLeader { .. }) => last = Some(e),
                    // No quorum yet, a membership change in progress, a learner catching up.
                    Err(e @ ProposeError::Unavailable(_)) if retry_unknown => last = Some(e),
                    other => return other,
                },
                (Some(l), Some(addr)) => {
                    // One attempt may not eat the whole budget: a hung leader is replaced by an
                    // election well within `attempt_timeout`, and the new one must get a try.
                    let wait = deadline.saturating_duration_since(Instant::now()).min(self.attempt_timeout);
                    // A request that may be retried is abandoned as soon as another leader is
                    // known: a frozen or cut-off leader would otherwise hold it for the whole
                    // attempt, long after its successor was elected.
                    let answer = tokio::select! {
                        answer = ops::call(&self.peers, l, &addr, op, wait) => Some(answer),
                        () = self.leader_other_than(l), if retry_unknown => None,
                    };
                    let Some(answer) = answer else {
                        // At once, without the pause below: the next attempt sets `last`.
                        tracing::debug!(leader = l, "a new leader was elected during the attempt; retrying there");
                        continue;
                    };
                    match answer {
                        Ok(Err(ProposeError::NotLeader { leader: Some(n) })) if n != l && quick => {
                            quick = false;
                            continue;
                        }
                        Ok(Err(e @ ProposeError::NotLeader { .. })) => last = Some(e),
                        Ok(Err(e @ ProposeError::Unavailable(_))) if retry_unknown => last = Some(e),
                        Ok(result) => return result,
                        Err(e) => {
                            if e.is_bad_answer() {
                                // Garbled, or for another operation: a broken or hostile peer.
                                self.rejected_answers.inc();
                                tracing::error!(leader = l, error = %e, req = ?op, "refused the leader's answer");
                            }
                            if !(e.surely_not_delivered() || retry_unknown) {
                                return Err(ProposeError::Uncertain { leader: l, detail: e.to_string() });
                            }
                            tracing::debug!(leader = l, error = %e, "forwarding to the leader failed; retrying");
                            last = Some(ProposeError::Unavailable(format!("leader {l}: {e}")));
                        }
                    }
                }
                (Some(l), None) => last = Some(ProposeError::Unavailable(format!("leader {l} has no address"))),
                (None, _) => last = Some(ProposeError::Unavailable("no raft leader".into())),
            }
            // Elections take a few hundred milliseconds; poll the leader at a modest pace. No
            // attempt starts with almost no budget left: it could only time out and would hide
            // why the earlier ones failed.
            let now = Instant::now();
            if now < deadline {
                tokio::time::sleep((deadline - now).min(Duration::from_millis(50))).await;
            }
            if Instant::now() + MIN_ATTEMPT >= deadline {
                return Err(match last {
                    Some(ProposeError::Unavailable(why)) => {
                        ProposeError::Unavailable(format!("gave up after {:?}: {why}", self.propose_timeout))
                    }
                    _ => ProposeError::Timeout(self.propose_timeout),
                });
            }
        }
    }
}
