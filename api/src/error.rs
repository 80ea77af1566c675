//! Stable error codes of the public API.
//!
//! Every failed request answers with an [`ErrorBody`] as JSON:
//! `{"code": "tag_not_found", "message": "...", "leaf_code": -2}`. `code` is stable and meant for
//! programs; `message` is for people; `leaf_code` is the result code Leaf's `SegmentIDGenImpl`
//! would have returned for the same condition (-2 key does not exist, -3 segments not ready or
//! the clock moved back),
//! or `null` where Leaf has none. The HTTP status of each code is chosen at the HTTP edge.
use serde::{Deserialize, Serialize};

/// What went wrong, as a stable machine-readable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The tag name breaks the naming rules.
    InvalidTag,
    /// `count` is not an integer from 1 to 1,000,000 (100,000 for a gRPC list).
    InvalidCount,
    /// A request body or parameter is malformed or out of range.
    InvalidRequest,
    /// The request body exceeds the configured limit.
    PayloadTooLarge,
    /// Admin credentials are missing or wrong.
    Unauthorized,
    /// Admin endpoints are closed on this listener (no admin token configured and the
    /// connection is not on loopback).
    Forbidden,
    /// The tag does not exist (Leaf -2).
    TagNotFound,
    /// No such endpoint, or no such item under one (an ID outside an obfuscated tag's ID
    /// space has no decoding).
    NotFound,
    /// The endpoint exists but not for this method.
    MethodNotAllowed,
    /// A tag with this name already exists.
    TagExists,
    /// The tag's `max_id + step` would overflow a signed 64-bit integer.
    TagExhausted,
    /// No committed segment was available in time (Leaf -3).
    SegmentsNotReady,
    /// The node has no Raft leader or has not caught up with its log (Leaf -3).
    NotReady,
    /// The Raft group could not commit the request (no quorum, leader change, timeout).
    Unavailable,
    /// The node is shutting down or its storage failed.
    ShuttingDown,
    /// The node ID is already a member of the cluster.
    MemberExists,
    /// The node ID belonged to a member that was removed; node IDs are never reused.
    NodeIdRetired,
    /// The node ID is not a member of the cluster.
    MemberNotFound,
    /// This node does not issue snowflake IDs now: no worker ID or lease yet, its clock failed
    /// the startup check, or its lease could not be renewed (the reason is in the message and
    /// in `/health`).
    SnowflakeUnavailable,
    /// The clock moved back further than the configured tolerance, or did not catch up after
    /// waiting (Leaf -3).
    ClockMovedBackwards,
    /// All 1024 snowflake worker IDs are held by other nodes.
    WorkerIdsExhausted,
    /// The token's request quota on this node is used up for now (`Retry-After` says when to
    /// come back).
    RateLimited,
    /// No token with this ID (never created, or revoked).
    TokenNotFound,
    /// No tag template with this name.
    TemplateNotFound,
    /// The template's pattern may match a tag another template's matches.
    TemplateConflict,
    /// The tag exists, but its profile does not serve this request: a gapless series is not
    /// taken as IDs, and only a gapless series issues numbers.
    WrongProfile,
    /// The gapless series has no number for this key.
    NumberNotFound,
    /// The key's number is in a state that refuses the request: a final number voided, a voided
    /// or expired reservation confirmed.
    NumberConflict,
    /// The request needs a cluster version the cluster has not activated yet: it is activated
    /// once every node runs a release that supports it (the message names the version).
    FeatureNotActive,
    /// The membership change does not fit the cluster as it stands: it would leave no voter,
    /// or the leader has no `cluster_secret` to replicate to a new node, or the new node's
    /// release cannot apply the cluster's log.
    MembershipConflict,
    /// A token with this name exists already (names are unique).
    TokenExists,
    /// A region's request that the regions as they stand refuse: a retired region, no worker IDs
    /// left for a new one, a block below what the region adopted, or a cluster asked to be the
    /// other side (a global tier is no region, a region registers none).
    RegionConflict,
}

impl ErrorCode {
    /// Leaf's result code for the same condition, where one exists.
    pub fn leaf_code(self) -> Option<i64> {
        match self {
            ErrorCode::TagNotFound => Some(-2),
            ErrorCode::SegmentsNotReady
            | ErrorCode::NotReady
            | ErrorCode::Unavailable
            | ErrorCode::ClockMovedBackwards => Some(-3),
            _ => None,
        }
    }

    /// The code as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidTag => "invalid_tag",
            ErrorCode::InvalidCount => "invalid_count",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::TagNotFound => "tag_not_found",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::TagExists => "tag_exists",
            ErrorCode::TagExhausted => "tag_exhausted",
            ErrorCode::SegmentsNotReady => "segments_not_ready",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::MemberExists => "member_exists",
            ErrorCode::NodeIdRetired => "node_id_retired",
            ErrorCode::MemberNotFound => "member_not_found",
            ErrorCode::SnowflakeUnavailable => "snowflake_unavailable",
            ErrorCode::ClockMovedBackwards => "clock_moved_backwards",
            ErrorCode::WorkerIdsExhausted => "worker_ids_exhausted",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::TokenNotFound => "token_not_found",
            ErrorCode::TemplateNotFound => "template_not_found",
            ErrorCode::TemplateConflict => "template_conflict",
            ErrorCode::WrongProfile => "wrong_profile",
            ErrorCode::NumberNotFound => "number_not_found",
            ErrorCode::NumberConflict => "number_conflict",
            ErrorCode::FeatureNotActive => "feature_not_active",
            ErrorCode::MembershipConflict => "membership_conflict",
            ErrorCode::TokenExists => "token_exists",
            ErrorCode::RegionConflict => "region_conflict",
        }
    }

    /// Every code, for metrics that pre-register one series per code.
    pub const ALL: [ErrorCode; 32] = [
        ErrorCode::InvalidTag,
        ErrorCode::InvalidCount,
        ErrorCode::InvalidRequest,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::TagNotFound,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::TagExists,
        ErrorCode::TagExhausted,
        ErrorCode::SegmentsNotReady,
        ErrorCode::NotReady,
        ErrorCode::Unavailable,
        ErrorCode::ShuttingDown,
        ErrorCode::MemberExists,
        ErrorCode::NodeIdRetired,
        ErrorCode::MemberNotFound,
        ErrorCode::SnowflakeUnavailable,
        ErrorCode::ClockMovedBackwards,
        ErrorCode::WorkerIdsExhausted,
        ErrorCode::RateLimited,
        ErrorCode::TokenNotFound,
        ErrorCode::TemplateNotFound,
        ErrorCode::TemplateConflict,
        ErrorCode::WrongProfile,
        ErrorCode::NumberNotFound,
        ErrorCode::NumberConflict,
        ErrorCode::FeatureNotActive,
        ErrorCode::MembershipConflict,
        ErrorCode::TokenExists,
        ErrorCode::RegionConflict,
    ];
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The JSON body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub leaf_code: Option<i64>,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody { code, message: message.into(), leaf_code: code.leaf_code() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form() {
        let body = ErrorBody::new(ErrorCode::TagNotFound, "no tag x");
        let json = serde_json::to_string(&body).unwrap();
        assert_eq!(json, r#"{"code":"tag_not_found","message":"no tag x","leaf_code":-2}"#);
        for code in ErrorCode::ALL {
            let s = serde_json::to_string(&code).unwrap();
            assert_eq!(s, format!("\"{}\"", code.as_str()));
        }
    }
}
