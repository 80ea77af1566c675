//! Cluster operations: the public status, membership changes (admin, recorded in the audit
//! trail) and the internal node-to-node RPC (bincode, authenticated by the edge first).
use leaf_api::audit::{cut, AuditAction, MAX_AUDIT_ADDR};
use leaf_api::types::{AddLearnerRequest, ClusterStatus, MembershipChange};

use super::dashboard::NodeProbe;
use super::{ApiError, App};
use crate::access::credentials::PeerNode;
use crate::access::Principal;
use crate::clock::Clock;
use crate::raft::learner_proof::{self, Challenge, PATH_LEARNER_PROOF};
use crate::raft::network::PATH_NODE_HEALTH;

impl App {
    /// Membership, leader, term, log indexes, replication (on the leader) and this node's
    /// health.
    pub fn cluster_status(&self) -> ClusterStatus {
        self.raft.cluster_status(self.health())
    }

    /// Adds a learner: it receives the log and serves IDs, but does not vote. Idempotent for
    /// the same ID and address. Without TLS it takes the root credentials (the learner receives
    /// the cluster secret and the whole state, token hashes and obfuscation keys included, so a
    /// `cluster`-right token may not choose where they go) and the learner must prove it holds
    /// the secret first ([`crate::raft::learner_proof`]).
    pub async fn add_learner(&self, body: AddLearnerRequest, who: &Principal) -> Result<MembershipChange, ApiError> {
        if self.tls.is_none() {
            who.require_root("adding a learner to a cluster without TLS")?;
        }
        let action = AuditAction::LearnerAdded { node_id: body.node_id, addr: cut(&body.addr, MAX_AUDIT_ADDR) };
        let change = self.raft.add_learner(body.node_id, body.addr).await?;
        self.note_membership(action, who).await;
        Ok(change)
    }

    /// Makes a learner a voter, once it has nearly the whole log. A voter: no change.
    pub async fn promote(&self, id: u64, who: &Principal) -> Result<MembershipChange, ApiError> {
        let change = self.raft.promote(id).await?;
        self.note_membership(AuditAction::NodePromoted { node_id: id }, who).await;
        Ok(change)
    }

    /// Removes a member (voter or learner); its ID is never reused. The last voter cannot be
    /// removed (400 `invalid_request`).
    pub async fn remove_member(&self, id: u64, who: &Principal) -> Result<MembershipChange, ApiError> {
        let change = self.raft.remove(id).await?;
        self.note_membership(AuditAction::NodeRemoved { node_id: id }, who).await;
        Ok(change)
    }

    /// Records a membership change that committed in the audit trail. openraft commits the
    /// change in its own entry first, so a failure here (a leader change in between) leaves it
    /// unrecorded: logged, and the change stands.
    async fn note_membership(&self, action: AuditAction, who: &Principal) {
        if let Err(e) = super::tag_admin::note(&self.raft, action.clone(), who.actor()).await {
            tracing::warn!(?action, error = %e, "a membership change committed but its audit record failed");
        }
    }

    /// One internal RPC (`/internal/*`, the caller already authenticated as a peer): its
    /// bincode answer.
    pub async fn internal_rpc(&self, path: &str, body: &[u8], caller: Option<PeerNode>) -> Result<Vec<u8>, ApiError> {
        match path {
            PATH_NODE_HEALTH => self.node_health(body),
            PATH_LEARNER_PROOF => self.learner_proof(body),
            path => Ok(crate::raft::service::handle(&self.raft, path, body, caller.map(|p| p.0)).await?),
        }
    }

    /// This node's answer to a leader's challenge before it is added as a learner (a cluster
    /// without TLS; asked without the secret): only as the node challenged, and only with a
    /// cluster secret.
    fn learner_proof(&self, body: &[u8]) -> Result<Vec<u8>, ApiError> {
        let challenge: Challenge =
            leaf_api::codec::decode(body).map_err(|e| ApiError::invalid(format!("malformed request body: {e}")))?;
        let forbidden = |m: String| ApiError::new(leaf_api::ErrorCode::Forbidden, m);
        let Some(secret) = self.config.cluster_secret() else {
            return Err(forbidden("this node has no cluster_secret, so it cannot join a cluster".into()));
        };
        if challenge.node_id != self.config.node_id {
            return Err(forbidden(format!("this is node {}, not node {}", self.config.node_id, challenge.node_id)));
        }
        leaf_api::codec::encode(&learner_proof::prove(secret.as_bytes(), &challenge))
            .map_err(|e| ApiError::new(leaf_api::ErrorCode::Unavailable, format!("cannot encode: {e}")))
    }

    /// This node's health and clock, for a peer's dashboard.
    fn node_health(&self, body: &[u8]) -> Result<Vec<u8>, ApiError> {
        let () =
            leaf_api::codec::decode(body).map_err(|e| ApiError::invalid(format!("malformed request body: {e}")))?;
        let probe = NodeProbe { health: self.health(), now_ms: self.clock.now_ms() };
        leaf_api::codec::encode(&probe)
            .map_err(|e| ApiError::new(leaf_api::ErrorCode::Unavailable, format!("cannot encode: {e}")))
    }
}
