//! JSON bodies of membership changes and of `GET /cluster/status` (re-exported by
//! [`crate::types`]).
use serde::{Deserialize, Serialize};

use crate::types::{Health, WorkerView};

/// `POST /admin/cluster/learners`: add a node that replicates the log and serves IDs but does
/// not vote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct AddLearnerRequest {
    /// A node ID never used in this cluster before.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 9_223_372_036_854_775_807_u64, example = 4))]
    #[serde(deserialize_with = "crate::json_int::u64")]
    pub node_id: u64,
    /// `host:port` where the other nodes reach the new node's HTTP listener.
    #[cfg_attr(
        feature = "openapi",
        schema(
            max_length = 259,
            pattern = r"^([A-Za-z0-9._\-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$",
            example = "10.0.0.4:8080"
        )
    )]
    pub addr: String,
}

/// The reply of a membership change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MembershipChange {
    /// Raft log index of the committed membership entry.
    pub log_index: u64,
    pub voters: Vec<u64>,
    pub learners: Vec<u64>,
}

/// A member of the Raft group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemberView {
    pub node_id: u64,
    /// `host:port` of the member's HTTP listener.
    pub addr: String,
    /// `voter` or `learner`.
    pub role: MemberRole,
    /// The newest cluster version the member supports, as it last told the leader (on the
    /// leader only; absent from releases before cluster versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supports_version: Option<u32>,
}

/// How far the leader has replicated its log to one member (leader only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplicationView {
    pub node_id: u64,
    /// Highest log index known to be stored on that member.
    pub matched_index: Option<u64>,
    /// Entries the member is behind the leader's last log index.
    pub lag: u64,
}

/// `GET /cluster/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterStatus {
    /// The node that answered.
    pub node_id: u64,
    pub leader_id: Option<u64>,
    /// `leader`, `follower`, `candidate`, `learner` or `shutdown`.
    pub state: Role,
    pub term: u64,
    pub last_log_index: Option<u64>,
    /// Highest log index known committed (on the leader: the quorum-acknowledged index; on
    /// others: what they applied).
    pub committed_index: Option<u64>,
    pub last_applied_index: Option<u64>,
    pub snapshot_index: Option<u64>,
    pub purged_index: Option<u64>,
    /// Members of the current membership, voters first.
    pub members: Vec<MemberView>,
    /// Per-member replication progress; present only on the leader.
    pub replication: Option<Vec<ReplicationView>>,
    /// This node's readiness, as on `/health`.
    pub health: Health,
    /// Snowflake worker IDs in use, as this node has applied them.
    pub workers: Vec<WorkerView>,
    /// The cluster's version, as this node applied it, and the newest this node supports
    /// (absent from releases before cluster versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<VersionView>,
}

/// The cluster's version and this node's (`GET /cluster/status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VersionView {
    /// The version the cluster runs: what its log may hold. Raised by the leader once every
    /// member supports a newer one; never lowered.
    pub active: u32,
    /// The newest version this node supports.
    pub supported: u32,
}

/// A node's Raft state (`ClusterStatus.state`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Leader,
    Follower,
    Candidate,
    Learner,
    Shutdown,
}

/// How a node belongs to the membership (`MemberView.role`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberRole {
    Voter,
    Learner,
}

impl std::fmt::Display for MemberRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            MemberRole::Voter => "voter",
            MemberRole::Learner => "learner",
        })
    }
}
