//! What the leader executes: every [`ForwardOp`], its own callers' and forwarded ones, with how
//! the router retries it and checks the answer ([`LeaderOp`]). Proposals, read indexes and
//! quorum ages are executed here; membership changes in [`super::membership`].
use std::future::Future;

use futures::future::BoxFuture;
use leaf_raft_store::{Allocation, Applied, Command, Issued, NumberRules, Op, OwnedAsk, Repeat, SegmentAsk};
use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::ServerState;
use tokio::time::Instant;

use super::answer::{check_membership, AnswerError};
use super::error::write_error;
use super::ops::{AddLearner, ForwardOp, Promote, Propose, QuorumAge, ReadIndex, Remove};
use super::{ProposeError, RaftNode};

/// A [`ForwardOp`] as this node routes and executes it.
pub(crate) trait LeaderOp: ForwardOp {
    /// Whether a request that may have reached the leader may be sent again (repeating it is
    /// harmless).
    fn retry_unknown(&self) -> bool;

    /// Checks the leader's reply against the request ([`super::answer`]).
    fn check(&self, reply: &Self::Reply) -> Result<(), AnswerError>;

    /// Executes the request on `node`, which must be the leader ([`ProposeError::NotLeader`]
    /// otherwise; never forwarded again), giving up at `deadline`.
    fn execute(
        self,
        node: &RaftNode,
        deadline: Instant,
    ) -> impl Future<Output = Result<Self::Reply, ProposeError>> + Send;
}

impl LeaderOp for Propose {
    fn retry_unknown(&self) -> bool {
        // Every operation declares what a repeat does ([`Op::repeat`]).
        self.op.repeat() == Repeat::Harmless
    }

    /// Checked by the caller, by the type that answers it ([`super::answer::Answer`]).
    fn check(&self, _reply: &Self::Reply) -> Result<(), AnswerError> {
        Ok(())
    }

    async fn execute(self, node: &RaftNode, deadline: Instant) -> Result<Self::Reply, ProposeError> {
        let budget = deadline.saturating_duration_since(Instant::now());
        // The proposer chose the form by its own view of the cluster's version, which may be
        // ahead of this leader's applied state for a moment, or a peer's forged request.
        // An operation newer than the cluster's version (a cluster just formed, before the
        // leader's first round of versions) raises it first when every member supports it,
        // rather than be refused or take an earlier form (an owned number without its owner).
        if self.op.version() > node.state.cluster_version() && !matches!(self.op.inner(), Op::SetClusterVersion { .. })
        {
            node.raise_for(self.op.version()).await;
        }
        let op = leaf_raft_store::version::form(self.op, node.state.cluster_version())?;
        if let Op::AllocateSegment { tag, step, node_id } = op {
            let ask = SegmentAsk { tag, step, node_id };
            // Checked alone before it joins a group: a malformed one (a peer's forwarded
            // request skipped this node's HTTP checks) must not fail the others with it.
            let alone = Op::AllocateSegment { tag: ask.tag.clone(), step, node_id };
            leaf_raft_store::check_command(&Command { at_ms: node.clock.now_ms(), op: alone })?;
            return match tokio::time::timeout(budget, node.allocations.join(ask, segment_committer(node))).await {
                Err(_) => Err(ProposeError::Timeout(node.propose_timeout)),
                Ok(outcome) => Ok(Applied::Segment(outcome??)),
            };
        }
        if let Op::IssueNumbers { asks, rules: NumberRules::Owned } = &op {
            if let [ask] = asks.as_slice() {
                // Checked alone first, as an allocation is.
                let cmd = Command { at_ms: node.clock.now_ms(), op: op.clone() };
                leaf_raft_store::check_command(&cmd)?;
                return match tokio::time::timeout(budget, node.numbers.join(ask.clone(), number_committer(node))).await
                {
                    Err(_) => Err(ProposeError::Timeout(node.propose_timeout)),
                    Ok(outcome) => Ok(Applied::Numbers(vec![outcome?])),
                };
            }
        }
        let mut op = op;
        // The leader's retention is the one in force, whoever proposed the change.
        if let Op::Admin { retention, .. } = &mut op {
            *retention = node.audit_retention;
        }
        let cmd = Command { at_ms: node.clock.now_ms(), op };
        // Peers' forwarded operations skipped this node's HTTP checks: never log one that
        // apply would refuse for its fields or that is too big to replicate.
        leaf_raft_store::check_command(&cmd)?;
        let resp = match tokio::time::timeout(budget, node.raft.client_write(cmd)).await {
            Err(_) => return Err(ProposeError::Timeout(node.propose_timeout)),
            Ok(r) => r.map_err(write_error)?,
        };
        Ok(resp.data?)
    }
}

/// Commits a group of gapless issues as one owned `IssueNumbers` entry ([`super::group_commit`]).
fn number_committer(
    node: &RaftNode,
) -> impl Fn(Vec<OwnedAsk>) -> BoxFuture<'static, super::group_commit::GroupResult<Issued>> + Send + Sync + 'static {
    let (raft, clock, timeout) = (node.raft.clone(), node.clock.clone(), node.propose_timeout);
    move |asks: Vec<OwnedAsk>| {
        let (raft, clock) = (raft.clone(), clock.clone());
        Box::pin(async move {
            let n = asks.len();
            let cmd = Command { at_ms: clock.now_ms(), op: Op::IssueNumbers { asks, rules: NumberRules::Owned } };
            leaf_raft_store::check_command(&cmd)?;
            let resp = match tokio::time::timeout(timeout, raft.client_write(cmd)).await {
                Err(_) => return Err(ProposeError::Timeout(timeout)),
                Ok(r) => r.map_err(write_error)?,
            };
            match resp.data {
                Ok(Applied::Numbers(results)) => Ok(results),
                Err(e) => Ok(vec![Err(e); n]),
                Ok(other) => Err(ProposeError::Unavailable(format!("an issue of numbers was answered {other:?}"))),
            }
        })
    }
}

/// Commits a group of allocations as one entry ([`super::group_commit`]): a lone one as the
/// `AllocateSegment` every release applies, more as `AllocateSegments`.
fn segment_committer(
    node: &RaftNode,
) -> impl Fn(Vec<SegmentAsk>) -> BoxFuture<'static, super::group_commit::GroupResult<Allocation>> + Send + Sync + 'static
{
    let (raft, clock, timeout) = (node.raft.clone(), node.clock.clone(), node.propose_timeout);
    move |mut asks: Vec<SegmentAsk>| {
        let (raft, clock) = (raft.clone(), clock.clone());
        Box::pin(async move {
            let n = asks.len();
            let op = match n {
                1 => {
                    let SegmentAsk { tag, step, node_id } = asks.remove(0);
                    Op::AllocateSegment { tag, step, node_id }
                }
                _ => Op::AllocateSegments { asks },
            };
            let cmd = Command { at_ms: clock.now_ms(), op };
            leaf_raft_store::check_command(&cmd)?;
            let resp = match tokio::time::timeout(timeout, raft.client_write(cmd)).await {
                Err(_) => return Err(ProposeError::Timeout(timeout)),
                Ok(r) => r.map_err(write_error)?,
            };
            match resp.data {
                Ok(Applied::Segment(a)) => Ok(vec![Ok(a)]),
                Ok(Applied::Segments(results)) => Ok(results),
                // The entry refused whole (the same answer on every node): each ask with it.
                Err(e) => Ok(vec![Err(e); n]),
                Ok(other) => Err(ProposeError::Unavailable(format!("an allocation was answered {other:?}"))),
            }
        })
    }
}

impl LeaderOp for ReadIndex {
    fn retry_unknown(&self) -> bool {
        true
    }

    fn check(&self, _reply: &Option<u64>) -> Result<(), AnswerError> {
        // Any index (or none) is an index; a wrong one is caught by nothing a follower knows.
        Ok(())
    }

    async fn execute(self, node: &RaftNode, deadline: Instant) -> Result<Option<u64>, ProposeError> {
        let budget = deadline.saturating_duration_since(Instant::now());
        let raft = node.raft.clone();
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
        match tokio::time::timeout(budget, node.leader_reads.read(round)).await {
            Err(_) => Err(ProposeError::Timeout(node.propose_timeout)),
            Ok(r) => r,
        }
    }
}

impl LeaderOp for QuorumAge {
    fn retry_unknown(&self) -> bool {
        true
    }

    fn check(&self, _reply: &Option<u64>) -> Result<(), AnswerError> {
        // Any age is an age; a huge one only makes this node report itself not ready.
        Ok(())
    }

    async fn execute(self, node: &RaftNode, _deadline: Instant) -> Result<Option<u64>, ProposeError> {
        let m = node.raft.metrics().borrow().clone();
        if m.state != ServerState::Leader {
            return Err(ProposeError::NotLeader { leader: m.current_leader });
        }
        Ok(m.millis_since_quorum_ack)
    }
}

// Membership changes are idempotent at the leader (re-adding the same learner or promoting a
// voter is a no-op), so an uncertain first attempt may be retried.

impl LeaderOp for AddLearner {
    fn retry_unknown(&self) -> bool {
        true
    }

    fn check(&self, reply: &Self::Reply) -> Result<(), AnswerError> {
        check_membership(reply)
    }

    async fn execute(self, node: &RaftNode, deadline: Instant) -> Result<Self::Reply, ProposeError> {
        node.add_learner_here(self.node_id, self.addr, deadline).await
    }
}

impl LeaderOp for Promote {
    fn retry_unknown(&self) -> bool {
        true
    }

    fn check(&self, reply: &Self::Reply) -> Result<(), AnswerError> {
        check_membership(reply)
    }

    async fn execute(self, node: &RaftNode, deadline: Instant) -> Result<Self::Reply, ProposeError> {
        node.promote_here(self.node_id, deadline).await
    }
}

impl LeaderOp for Remove {
    fn retry_unknown(&self) -> bool {
        true
    }

    fn check(&self, reply: &Self::Reply) -> Result<(), AnswerError> {
        check_membership(reply)
    }

    async fn execute(self, node: &RaftNode, deadline: Instant) -> Result<Self::Reply, ProposeError> {
        node.remove_here(self.node_id, deadline).await
    }
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::Actor;
    use leaf_api::tokens::TokenId;
    use leaf_raft_store::tokens::{NewToken, TokenLimits};

    use super::*;

    /// What the node proposes for a token's creation, and everything else that must not be
    /// sent twice: wrapped as an admin change, as `RaftNode::admin` wraps it.
    #[test]
    fn a_proposal_whose_repeat_answers_otherwise_is_not_retried_once_it_may_have_been_applied() {
        let admin = |op: Op| Propose {
            op: Op::Admin {
                actor: Actor::AdminToken,
                retention: leaf_raft_store::audit::DEFAULT_RETENTION,
                trim: leaf_raft_store::Trim::Apart,
                op: Box::new(op),
            },
        };
        let token = NewToken {
            id: TokenId(7),
            name: "ci".into(),
            rights: Default::default(),
            tags: vec![],
            quota: None,
            secret_hash: [1; 32],
        };
        let not_again = [
            Op::CreateToken { token: token.clone(), limits: Some(TokenLimits::default()) },
            Op::CreateToken { token, limits: None },
            Op::RotateToken { id: TokenId(7), secret_hash: [2; 32], grace_ms: 60_000 },
            Op::RevokeToken { id: TokenId(7) },
            Op::create_segment_tag("t".into(), 10, 0, String::new()),
            Op::ArchiveTag { tag: "t".into() },
            Op::RestoreTag { tag: "t".into() },
            Op::DeleteTemplate { name: "x".into() },
        ];
        for op in not_again {
            assert!(!admin(op.clone()).retry_unknown(), "{op:?} must not be sent again");
        }
        let again =
            [Op::UpdateTag { tag: "t".into(), step: Some(20), description: None }, Op::CreateTags { tags: vec![] }];
        for op in again {
            assert!(admin(op.clone()).retry_unknown(), "{op:?} is harmless to repeat");
        }
        assert!(Propose { op: Op::AllocateSegment { tag: "t".into(), step: 10, node_id: 1 } }.retry_unknown());
    }
}
