//! What the leader executes: every [`ForwardOp`], its own callers' and forwarded ones, with how
//! the router retries it and checks the answer ([`LeaderOp`]). Proposals, read indexes and
//! quorum ages are executed here; membership changes in [`super::membership`].
use std::future::Future;

use leaf_raft_store::{Applied, Command, Op, Repeat};
use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::ServerState;
use tokio::time::Instant;

use super::answer::{check_membership, AnswerError};
use super::error::write_error;
use super::ops::{AddLearner, ForwardOp, MonotonicTake, Promote, Propose, QuorumAge, ReadIndex, Remove};
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
        node.execute_here(self.op, deadline).await
    }
}

impl RaftNode {
    /// Executes `op` on this node, which must be the leader: in a group when a feature's hook
    /// takes it ([`super::hooks`]), otherwise as an entry of its own, stamped first.
    pub(crate) async fn execute_here(&self, op: Op, deadline: Instant) -> Result<Applied, ProposeError> {
        // The proposer chose the form by its own view of the cluster's version, which may be
        // ahead of this leader's applied state for a moment, or a peer's forged request.
        // An operation newer than the cluster's version (a cluster just formed, before the
        // leader's first round of versions) raises it first when every member supports it,
        // rather than be refused or take an earlier form (an owned number without its owner).
        if op.version() > self.state.cluster_version() && !matches!(op.inner(), Op::SetClusterVersion { .. }) {
            self.raise_for(op.version()).await;
        }
        let mut op = leaf_raft_store::version::form(op, self.state.cluster_version())?;
        for group in &self.hooks.groups {
            op = match group.join(self, op) {
                Ok(joined) => {
                    return match tokio::time::timeout_at(deadline, joined).await {
                        Err(_) => Err(ProposeError::Timeout(self.propose_timeout)),
                        Ok(outcome) => outcome,
                    }
                }
                Err(op) => op,
            };
        }
        if let Some(stamp) = &self.hooks.stamp {
            stamp(&mut op);
        }
        self.write_here_until(op, deadline).await
    }

    /// Logs `op` as one entry through this node, the leader, within the propose timeout, and
    /// returns what the state machine answered. Checked first: peers' forwarded operations
    /// skipped this node's HTTP checks, and nothing apply would refuse for its fields, or too
    /// big to replicate, is ever logged.
    pub(crate) async fn write_here(&self, op: Op) -> Result<Applied, ProposeError> {
        self.write_here_until(op, Instant::now() + self.propose_timeout).await
    }

    async fn write_here_until(&self, op: Op, deadline: Instant) -> Result<Applied, ProposeError> {
        let Some(_pass) = self.gate.enter() else {
            // Handing leadership over (`transfer`): nothing more goes into this log; once the
            // hand-over ends the caller's forwarding finds the new leader.
            self.gate.wait_open(deadline).await;
            return Err(self.not_leader());
        };
        if let Some(age_ms) = self.cut_off_for() {
            // Nothing logged: the caller may go to another node, which most likely has a new
            // leader by now, instead of waiting out the propose timeout here.
            return Err(ProposeError::Unavailable(format!(
                "this node leads, but no quorum has acknowledged it for {age_ms} ms: it is cut off from the \
                 other voters, which elect a leader of their own"
            )));
        }
        let cmd = Command { at_ms: self.clock.now_ms(), op };
        leaf_raft_store::check_command(&cmd)?;
        let resp = match tokio::time::timeout_at(deadline, self.raft.client_write(cmd)).await {
            Err(_) => return Err(ProposeError::Timeout(self.propose_timeout)),
            Ok(r) => r.map_err(write_error)?,
        };
        Ok(resp.data?)
    }

    /// Checks `op` as apply would, without logging it (a group's member, before it joins).
    pub(crate) fn check_here(&self, op: Op) -> Result<(), ProposeError> {
        Ok(leaf_raft_store::check_command(&Command { at_ms: self.clock.now_ms(), op })?)
    }

    /// A read index confirmed by a quorum round that started after the call, shared with the
    /// concurrent callers ([`super::coalesce`]): this node still led when the round ended.
    pub(crate) async fn leader_read_index(&self, deadline: Instant) -> Result<Option<u64>, ProposeError> {
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
        match tokio::time::timeout_at(deadline, self.leader_reads.read(round)).await {
            Err(_) => Err(ProposeError::Timeout(self.propose_timeout)),
            Ok(r) => r,
        }
    }

    /// How long ago a quorum last acknowledged this leader, when that is longer than the
    /// longest election timeout ([`cut_off`]).
    fn cut_off_for(&self) -> Option<u64> {
        let m = self.raft.metrics();
        let m = m.borrow();
        let voters = m.membership_config.membership().voter_ids().count();
        let age = m.millis_since_quorum_ack;
        if m.state == ServerState::Leader && cut_off(voters, age, self.contact_limit_ms) {
            age
        } else {
            None
        }
    }

    /// The term this node leads in, if it leads.
    pub(crate) fn leading_term(&self) -> Option<u64> {
        let m = self.raft.metrics();
        let m = m.borrow();
        (m.state == ServerState::Leader && m.current_leader == Some(self.node_id)).then_some(m.current_term)
    }

    /// "Not the leader", naming the leader this node knows of.
    pub(crate) fn not_leader(&self) -> ProposeError {
        ProposeError::NotLeader { leader: self.raft.metrics().borrow().current_leader }
    }
}

impl LeaderOp for MonotonicTake {
    fn retry_unknown(&self) -> bool {
        // A repeated take skips the IDs of the first (nobody received them): order holds.
        true
    }

    fn check(&self, first: &i64) -> Result<(), AnswerError> {
        if *first < 0 || first.checked_add(i64::from(self.count)).is_none() {
            return Err(AnswerError::Invalid(format!("{} monotonic IDs from {first}", self.count)));
        }
        Ok(())
    }

    async fn execute(self, node: &RaftNode, deadline: Instant) -> Result<i64, ProposeError> {
        match &node.hooks.served {
            Some(served) => served.monotonic_take(node, self, deadline).await,
            None => Err(ProposeError::Unavailable("this node serves no monotonic takes".into())),
        }
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
        node.leader_read_index(deadline).await
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

/// Whether a leader of `voters` voters whose last quorum acknowledgement is `ack_age_ms` old
/// is cut off from them: past `limit_ms` (the longest election timeout, as `/health` judges
/// it), the voters it cannot reach have stopped hearing it and elected another leader, and
/// openraft 0.9 never steps it down. New writes are refused at once (`write_here_until`);
/// a leader that was never acknowledged yet (just elected) is not judged, nor a single voter.
pub(super) fn cut_off(voters: usize, ack_age_ms: Option<u64>, limit_ms: u64) -> bool {
    voters > 1 && ack_age_ms.is_some_and(|a| a > limit_ms)
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::Actor;
    use leaf_api::tokens::TokenId;
    use leaf_raft_store::tokens::{NewToken, TokenLimits};

    use super::*;

    /// What the node proposes for a token's creation, and everything else that must not be
    /// sent twice: wrapped as an admin change, as `tag_admin::admin` wraps it.
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

    #[test]
    fn a_leader_is_cut_off_only_past_the_limit_with_other_voters_and_an_acknowledgement() {
        assert!(!cut_off(3, Some(800), 800), "at the limit");
        assert!(cut_off(3, Some(801), 800));
        assert!(cut_off(2, Some(5_000), 800));
        assert!(!cut_off(1, Some(5_000), 800), "a single voter is its own quorum");
        assert!(!cut_off(3, None, 800), "not acknowledged yet: just elected");
        assert!(!cut_off(3, Some(100), 800));
    }
}
