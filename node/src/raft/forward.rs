//! Routing to the leader: a request only the leader can execute runs here when this node
//! leads, and is otherwise forwarded over the internal API, retried across leader changes and
//! unreachable leaders until the deadline. The leader's answer is checked ([`super::answer`])
//! before anything acts on it.
use std::time::Duration;

use leaf_api::types::MembershipChange;
use leaf_raft_store::types::NodeId;
use leaf_raft_store::{Applied, Op};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::network::PATH_FORWARD;
use super::{answer, ProposeError, RaftNode};

/// A forwarding attempt with less time than this left is not started.
const MIN_ATTEMPT: Duration = Duration::from_millis(100);

/// A request that only the leader can execute; followers forward it over [`PATH_FORWARD`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Forward {
    Propose(Op),
    /// The log index a linearizable read must wait for (leadership confirmed by a quorum).
    ReadIndex,
    AddLearner {
        node_id: NodeId,
        addr: String,
    },
    Promote {
        node_id: NodeId,
    },
    Remove {
        node_id: NodeId,
    },
    /// How long ago the leader last had a quorum acknowledgement (followers probe it, so their
    /// `/health` is truthful when the leader lost its quorum).
    QuorumAge,
}

/// A [`Forward`] on the wire, with how long the sender will wait for the answer: the leader
/// gives up when the sender has, instead of finishing work whose result nobody receives while
/// the sender already retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardRequest {
    pub budget_ms: u64,
    pub req: Forward,
}

/// The leader's answer to a [`Forward`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Forwarded {
    Proposed {
        applied: Applied,
        log_index: u64,
    },
    ReadIndex(Option<u64>),
    Membership(MembershipChange),
    /// Milliseconds since the leader's last quorum acknowledgement (`None`: none yet).
    QuorumAge(Option<u64>),
}

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

    /// Runs `req` on the current leader, retrying across leader changes and unreachable
    /// leaders until the deadline. A request that may have reached the leader is retried only
    /// when `retry_unknown`.
    pub(super) async fn on_leader(&self, req: Forward, retry_unknown: bool) -> Result<Forwarded, ProposeError> {
        let answer = self.on_leader_unchecked(&req, retry_unknown).await?;
        if let Err(why) = answer::check(&req, &answer) {
            self.rejected_answers.inc();
            tracing::error!(%why, ?req, ?answer, "refused the leader's answer");
            return Err(ProposeError::Unavailable(format!("refused the leader's answer: {why}")));
        }
        Ok(answer)
    }

    async fn on_leader_unchecked(&self, req: &Forward, retry_unknown: bool) -> Result<Forwarded, ProposeError> {
        let deadline = self.deadline();
        let mut last: Option<ProposeError>;
        loop {
            match self.leader_and_addr() {
                (Some(l), _) if l == self.node_id => match self.execute(req.clone(), deadline).await {
                    Err(e @ ProposeError::NotLeader { .. }) => last = Some(e),
                    // No quorum yet, a membership change in progress, a learner catching up.
                    Err(e @ ProposeError::Unavailable(_)) if retry_unknown => last = Some(e),
                    other => return other,
                },
                (Some(l), Some(addr)) => {
                    // One attempt may not eat the whole budget: a hung leader is replaced by an
                    // election well within `attempt_timeout`, and the new one must get a try.
                    let wait = deadline.saturating_duration_since(Instant::now()).min(self.attempt_timeout);
                    let wire = ForwardRequest { budget_ms: wait.as_millis() as u64, req: req.clone() };
                    let answer =
                        self.peers.call::<_, Result<Forwarded, ProposeError>>(&addr, PATH_FORWARD, &wire, wait);
                    match answer.await {
                        Ok(Err(e @ ProposeError::NotLeader { .. })) => last = Some(e),
                        Ok(Err(e @ ProposeError::Unavailable(_))) if retry_unknown => last = Some(e),
                        Ok(result) => return result,
                        Err(e) if e.surely_not_delivered() || retry_unknown => {
                            tracing::debug!(leader = l, error = %e, "forwarding to the leader failed; retrying");
                            last = Some(ProposeError::Unavailable(format!("leader {l}: {e}")));
                        }
                        Err(e) => {
                            return Err(ProposeError::Unavailable(format!(
                                "leader {l} may or may not have done it: {e}"
                            )))
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
