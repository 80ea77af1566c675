//! Membership changes: adding a learner, promoting it once caught up, removing a member (the
//! callers' methods, and what the leader executes for them), and the membership as it is now.
use std::collections::{BTreeMap, BTreeSet};

use leaf_api::types::{MemberRole, MembershipChange};
use leaf_raft_store::types::NodeId;
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers};
use tokio::time::Instant;

use super::error::{member_err, write_error};
use super::learner_proof;
use super::ops::{AddLearner, Promote, Remove};
use super::{MemberErrorKind, ProposeError, RaftNode};
use crate::config::check_host_port;

/// How many entries a learner may lag behind the leader and still be promoted to voter.
const CATCH_UP_SLACK: u64 = 100;
/// Longest wait for a new learner's proof (cluster without TLS).
const LEARNER_PROOF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl RaftNode {
    /// Adds `node_id` at `addr` as a learner: it receives the log (or a snapshot) and serves
    /// IDs, but does not vote.
    pub async fn add_learner(&self, node_id: NodeId, addr: String) -> Result<MembershipChange, ProposeError> {
        self.on_leader(&AddLearner { node_id, addr }).await
    }

    /// Makes the learner `node_id` a voter.
    pub async fn promote(&self, node_id: NodeId) -> Result<MembershipChange, ProposeError> {
        self.on_leader(&Promote { node_id }).await
    }

    /// Removes `node_id` (voter or learner) from the cluster; its ID is never reused.
    pub async fn remove(&self, node_id: NodeId) -> Result<MembershipChange, ProposeError> {
        self.on_leader(&Remove { node_id }).await
    }

    /// Adds the learner; this node must be the leader. Re-adding the same learner is a no-op.
    pub(super) async fn add_learner_here(
        &self,
        node_id: NodeId,
        addr: String,
        deadline: Instant,
    ) -> Result<MembershipChange, ProposeError> {
        if !self.peers.has_secret() {
            return Err(member_err(
                MemberErrorKind::Conflict,
                "the leader has no cluster_secret, so it cannot replicate to other nodes",
            ));
        }
        check_host_port(&addr).map_err(|e| member_err(MemberErrorKind::Invalid, e))?;
        if node_id == 0 {
            return Err(member_err(MemberErrorKind::Invalid, "node IDs start at 1"));
        }
        let existing = self.members().get(&node_id).cloned();
        match existing {
            Some((MemberRole::Learner, a)) if a == addr => return Ok(self.membership_now()),
            Some((role, a)) => {
                return Err(member_err(MemberErrorKind::Exists, format!("node {node_id} is already a {role} at {a}")))
            }
            None if self.state.is_retired_node(node_id) => {
                return Err(member_err(
                    MemberErrorKind::Retired,
                    format!("node {node_id} was removed; node IDs are never reused, pick a new one"),
                ))
            }
            None => {}
        }
        // Without TLS nothing proves who listens at `addr`, and every request to it would carry
        // the secret (and the first appends, the whole state): it proves itself first.
        if !self.peers.is_tls() {
            let Some(secret) = self.peers.secret() else {
                return Err(member_err(MemberErrorKind::Conflict, "the leader has no cluster_secret"));
            };
            let timeout = deadline.saturating_duration_since(Instant::now()).min(LEARNER_PROOF_TIMEOUT);
            learner_proof::ask(&self.peers, secret, node_id, &addr, timeout).await.map_err(|e| match e {
                e @ learner_proof::Unproven::NoAnswer { .. } => ProposeError::Unavailable(e.to_string()),
                e @ learner_proof::Unproven::Refused { .. } => member_err(MemberErrorKind::Invalid, e.to_string()),
            })?;
        }
        self.refuse_if_older(node_id, &addr).await?;
        let change = self.raft.add_learner(node_id, BasicNode::new(addr), false);
        self.commit_membership(change, deadline).await
    }

    /// Refuses a node that could not apply the log: one that supports only cluster versions
    /// below the cluster's ([`leaf_raft_store::version`]). A node that does not answer yet
    /// cannot be checked, and is added; a cluster that never raised its version takes any
    /// node (as releases before cluster versions did).
    async fn refuse_if_older(&self, node_id: NodeId, addr: &str) -> Result<(), ProposeError> {
        let active = self.state.cluster_version();
        if active <= leaf_raft_store::version::BASE {
            return Ok(());
        }
        match self.peer_status(node_id, addr).await {
            Some(s) if s.supports >= active => Ok(()),
            Some(s) => Err(member_err(
                MemberErrorKind::Conflict,
                format!(
                    "node {node_id} runs a release that supports cluster versions up to {}, and the cluster runs \
                     version {active}: it could not apply the log; start it with a release that supports version \
                     {active}, then add it",
                    s.supports
                ),
            )),
            // Not up yet (a learner may be added before it starts): nothing to check now. A
            // release that cannot apply the log stops at its first entry of a later version.
            None => {
                tracing::warn!(
                    node_id,
                    cluster_version = %active,
                    "adding a learner that did not say which cluster version it supports"
                );
                Ok(())
            }
        }
    }

    /// Promotes the learner once caught up; this node must be the leader. Promoting a voter is a
    /// no-op.
    pub(super) async fn promote_here(
        &self,
        node_id: NodeId,
        deadline: Instant,
    ) -> Result<MembershipChange, ProposeError> {
        match self.members().get(&node_id).map(|(role, _)| *role) {
            None => return Err(member_err(MemberErrorKind::NotFound, format!("node {node_id} is not a member"))),
            Some(MemberRole::Voter) => return Ok(self.membership_now()),
            Some(MemberRole::Learner) => {}
        }
        self.check_caught_up(node_id)?;
        let change = self.raft.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([node_id])), false);
        self.commit_membership(change, deadline).await
    }

    /// Removes the member; this node must be the leader. Removing a removed node is a no-op.
    pub(super) async fn remove_here(
        &self,
        node_id: NodeId,
        deadline: Instant,
    ) -> Result<MembershipChange, ProposeError> {
        let change = match self.members().get(&node_id).map(|(role, _)| *role) {
            // Already removed (a retried request whose first attempt succeeded).
            None if self.state.is_retired_node(node_id) => return Ok(self.membership_now()),
            None => return Err(member_err(MemberErrorKind::NotFound, format!("node {node_id} is not a member"))),
            Some(MemberRole::Voter) => ChangeMembers::RemoveVoters(BTreeSet::from([node_id])),
            Some(MemberRole::Learner) => ChangeMembers::RemoveNodes(BTreeSet::from([node_id])),
        };
        let change = self.raft.change_membership(change, false);
        self.commit_membership(change, deadline).await
    }

    async fn commit_membership(
        &self,
        change: impl std::future::Future<
            Output = Result<
                openraft::raft::ClientWriteResponse<leaf_raft_store::TypeConfig>,
                RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>,
            >,
        >,
        deadline: Instant,
    ) -> Result<MembershipChange, ProposeError> {
        let resp = match tokio::time::timeout_at(deadline, change).await {
            Err(_) => return Err(ProposeError::Timeout(self.propose_timeout)),
            Ok(r) => r.map_err(write_error)?,
        };
        let mut m = self.membership_now();
        m.log_index = resp.log_id.index;
        if let Some(new) = resp.membership {
            m.voters = new.voter_ids().collect();
            m.learners = new.learner_ids().collect();
        }
        Ok(m)
    }

    /// A voter may only be added once it holds nearly the whole log; otherwise the new
    /// quorum would need a node that cannot yet acknowledge anything.
    fn check_caught_up(&self, node_id: NodeId) -> Result<(), ProposeError> {
        let m = self.raft.metrics().borrow().clone();
        let last = m.last_log_index.unwrap_or(0);
        let matched = m.replication.as_ref().and_then(|r| r.get(&node_id).cloned()).flatten().map(|l| l.index);
        match matched {
            Some(i) if last.saturating_sub(i) <= CATCH_UP_SLACK => Ok(()),
            _ => Err(ProposeError::Unavailable(format!(
                "learner {node_id} has not caught up yet (it holds the log up to {matched:?} of {last}); retry once \
                 `leaf cluster status` shows its lag near 0"
            ))),
        }
    }

    /// Current members: ID → (role, address).
    pub(super) fn members(&self) -> BTreeMap<NodeId, (MemberRole, String)> {
        let m = self.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        membership
            .nodes()
            .map(|(id, n)| {
                let role = if voters.contains(id) { MemberRole::Voter } else { MemberRole::Learner };
                (*id, (role, n.addr.clone()))
            })
            .collect()
    }

    pub(super) fn membership_now(&self) -> MembershipChange {
        let m = self.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        MembershipChange {
            log_index: m.membership_config.log_id().map_or(0, |l| l.index),
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
        }
    }
}
