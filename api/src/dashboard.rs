//! The body of `GET /admin/dashboard`: everything the built-in `/ui` page shows, as the node
//! that answers sees it, in one document (the page polls it).
use serde::{Deserialize, Serialize};

use crate::regions::{HomeInfo, RegionInfo};
use crate::types::{CacheEntry, ClusterStatus, Health, MemberRole, TagInfo};
use crate::ErrorCode;

/// Most tags one dashboard answer lists (`tags_total` counts them all).
pub const MAX_DASHBOARD_TAGS: usize = 500;
/// Most recent errors a node keeps for the dashboard.
pub const MAX_RECENT_ERRORS: usize = 50;

/// The query of `GET /admin/dashboard`: `prefix` narrows the tags to those that start with it
/// (the page's tag search).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct DashboardQuery {
    /// Only tags that start with this.
    #[cfg_attr(feature = "openapi", param(max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]*$", example = "tenant-"))]
    pub prefix: Option<String>,
}

/// `GET /admin/dashboard`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Dashboard {
    /// The node that answered.
    pub node_id: u64,
    /// Its release (`leaf --version`).
    pub version: String,
    /// Its clock when it answered, Unix ms (the page's rates divide by differences of this).
    pub now_ms: i64,
    /// Seconds since it started.
    pub uptime_secs: u64,
    /// Membership, leader, term, log indexes, replication (on the leader) and snowflake
    /// workers, as this node has applied them (`GET /cluster/status`).
    pub cluster: ClusterStatus,
    /// Every member as it answered this node just now, this node included, in membership order.
    pub nodes: Vec<NodeView>,
    /// Tags in the replicated state (those that start with the query's `prefix`), with this
    /// node's buffers: those this node served most first, then by name, at most
    /// [`MAX_DASHBOARD_TAGS`].
    pub tags: Vec<TagView>,
    /// Tags in the replicated state (that start with the query's `prefix`).
    pub tags_total: usize,
    /// This node's totals since it started.
    pub totals: Totals,
    /// This node's most recent error answers, newest first (at most [`MAX_RECENT_ERRORS`]).
    pub recent_errors: Vec<RecentError>,
    /// Regions, on a global tier or a region (absent on a cluster that is neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<RegionView>,
}

/// What a cluster holds of regions, as the node that answers has applied it: a global tier's
/// registry, a region's identity and blocks, and the homes either knows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegionView {
    /// The region this cluster is, once it adopted it (`None` on a global tier, or before).
    pub here: Option<RegionHere>,
    /// On a global tier: every region it registered, retired ones too, in name order.
    pub registry: Vec<RegionInfo>,
    /// In a region: each tag's blocks, the shortest runway first (tags without a rate last, by
    /// name), at most [`MAX_DASHBOARD_TAGS`].
    pub blocks: Vec<BlockView>,
    /// Tags with blocks here (`blocks` lists at most [`MAX_DASHBOARD_TAGS`]).
    pub blocks_total: usize,
    /// Homes of homed tags, in tag order, at most [`MAX_DASHBOARD_TAGS`]: on a global tier as
    /// decided, in a region as it learnt them.
    pub homes: Vec<HomeInfo>,
    /// Homes known here.
    pub homes_total: usize,
}

/// The identity a region adopted from the global tier's registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegionHere {
    pub name: String,
    pub id: u16,
    /// Its snowflake workers keep to `first_worker..=last_worker`.
    pub first_worker: u16,
    pub last_worker: u16,
}

/// A region's blocks of one tag.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BlockView {
    pub tag: String,
    /// IDs left: the rest of the current block and every queued one.
    pub remaining: i64,
    /// Blocks adopted and not begun.
    pub queued: usize,
    /// How long `remaining` lasts at the tag's rate as this node measured it, in seconds
    /// (`None`: no rate measured here).
    pub runway_secs: Option<f64>,
}

/// A member of the cluster, as it answered the node that builds the dashboard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NodeView {
    pub node_id: u64,
    pub addr: String,
    pub role: MemberRole,
    /// Its own `/health`; `None` when it did not answer (see `error`).
    pub health: Option<Health>,
    /// Why it did not answer.
    pub error: Option<String>,
    /// Round trip of the question, ms (0 for the answering node itself).
    pub rtt_ms: Option<u64>,
    /// Its clock minus the answering node's, ms, corrected by half the round trip (0 for the
    /// answering node itself).
    pub clock_offset_ms: Option<i64>,
}

/// A tag and this node's buffers of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TagView {
    /// The tag as stored.
    pub info: TagInfo,
    /// This node's buffers and the tag's forecast (`GET /cache`'s entry); `None` until the tag's
    /// first request on this node.
    pub cache: Option<CacheEntry>,
    /// IDs of the tag this node handed out since it started.
    pub served: u64,
}

/// A node's totals since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Totals {
    /// Segment-mode IDs handed out (every profile).
    pub segment_ids: u64,
    /// Snowflake IDs handed out.
    pub snowflake_ids: u64,
    /// Error answers (HTTP and gRPC).
    pub errors: u64,
}

/// One error answer of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecentError {
    /// When it was answered, Unix ms.
    pub at_ms: i64,
    /// HTTP status.
    pub status: u16,
    pub code: ErrorCode,
    /// The route template (`/api/segment/get/{tag}`), `grpc`, or `unmatched`.
    pub route: String,
    /// The answer's message (never a secret).
    pub message: String,
}
