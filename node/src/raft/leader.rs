//! What the leader executes: proposals, read indexes and quorum ages, its own callers' and
//! forwarded ones.
use leaf_raft_store::Command;
use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::ServerState;
use tokio::time::Instant;

use super::error::write_error;
use super::{Forward, Forwarded, ProposeError, RaftNode};

impl RaftNode {
    /// Executes `req` on this node, which must be the leader ([`ProposeError::NotLeader`]
    /// otherwise; never forwarded again). Peers' forwarded requests land here.
    pub(crate) async fn execute(&self, req: Forward, deadline: Instant) -> Result<Forwarded, ProposeError> {
        let budget = deadline.saturating_duration_since(Instant::now());
        let timeout = ProposeError::Timeout(self.propose_timeout);
        match req {
            Forward::Propose(op) => {
                let cmd = Command { at_ms: self.clock.now_ms(), op };
                // Peers' forwarded operations skipped this node's HTTP checks: never log one
                // that apply would refuse for its fields or that is too big to replicate.
                leaf_raft_store::check_command(&cmd)?;
                let resp = match tokio::time::timeout(budget, self.raft.client_write(cmd)).await {
                    Err(_) => return Err(timeout),
                    Ok(r) => r.map_err(write_error)?,
                };
                Ok(Forwarded::Proposed { applied: resp.data?, log_index: resp.log_id.index })
            }
            Forward::QuorumAge => {
                let m = self.raft.metrics().borrow().clone();
                if m.state != ServerState::Leader {
                    return Err(ProposeError::NotLeader { leader: m.current_leader });
                }
                Ok(Forwarded::QuorumAge(m.millis_since_quorum_ack))
            }
            Forward::ReadIndex => {
                let raft = self.raft.clone();
                let round = move || {
                    let raft = raft.clone();
                    async move {
                        let (read, _applied) = raft.get_read_log_id().await.map_err(|e| match e {
                            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => {
                                ProposeError::NotLeader { leader: f.leader_id }
                            }
                            RaftError::APIError(e @ CheckIsLeaderError::QuorumNotEnough(_)) => {
                                ProposeError::Unavailable(e.to_string())
                            }
                            RaftError::Fatal(f) => ProposeError::Fatal(f.to_string()),
                        })?;
                        Ok(read.map(|l| l.index))
                    }
                };
                match tokio::time::timeout(budget, self.leader_reads.read(round)).await {
                    Err(_) => Err(timeout),
                    Ok(r) => Ok(Forwarded::ReadIndex(r?)),
                }
            }
            Forward::AddLearner { node_id, addr } => {
                self.add_learner_here(node_id, addr, budget).await.map(Forwarded::Membership)
            }
            Forward::Promote { node_id } => self.promote_here(node_id, budget).await.map(Forwarded::Membership),
            Forward::Remove { node_id } => self.remove_here(node_id, budget).await.map(Forwarded::Membership),
        }
    }
}
