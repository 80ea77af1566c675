//! The conversions into the one error type of the service core, [`ApiError`] (defined in
//! [`crate::error`], under every layer that refuses a request), and the one rule for what its
//! message holds. Every layer's typed error
//! (Raft proposals, segment takes, snowflake, the internal RPC) becomes an `ApiError` here and
//! nowhere else; the edges only map the code to an HTTP or gRPC status.
//!
//! **What a client may see.** A refused request says why in terms of the request (a tag that
//! does not exist, a bound reached, a malformed field). A failure inside the cluster says what
//! kind of failure it was and whether a retry may help, never a peer's address or a peer's
//! error text: those go to this node's log ([`ProposeError::public_message`]).
use leaf_api::ErrorCode;
use leaf_raft_store::ApplyError;

use crate::raft::service::ServiceError;
use crate::raft::{MemberErrorKind, ProposeError};
use crate::snowflake::SnowflakeError;
use crate::tags::{AllocError, CommitFailure, TakeError};

pub use crate::error::ApiError;

/// The stable code of a failed proposal.
fn propose_code(e: &ProposeError) -> ErrorCode {
    match e {
        ProposeError::Rejected(ApplyError::TagExists(_)) => ErrorCode::TagExists,
        ProposeError::Rejected(ApplyError::TagNotFound(_) | ApplyError::TagArchived(_)) => ErrorCode::TagNotFound,
        ProposeError::Rejected(
            ApplyError::TagExhausted { .. }
            | ApplyError::UpperBoundReached { .. }
            | ApplyError::DayExhausted { .. }
            | ApplyError::SeriesFull { .. }
            | ApplyError::LedgerFull { .. },
        ) => ErrorCode::TagExhausted,
        ProposeError::Rejected(ApplyError::Invalid(_)) => ErrorCode::InvalidRequest,
        ProposeError::Rejected(ApplyError::TokenNotFound(_)) => ErrorCode::TokenNotFound,
        ProposeError::Rejected(ApplyError::TokenNameTaken(_)) => ErrorCode::TokenExists,
        ProposeError::Rejected(ApplyError::TokenTagLimit { .. } | ApplyError::TokenTagBudget { .. }) => {
            ErrorCode::Forbidden
        }
        ProposeError::Rejected(ApplyError::TemplateNotFound(_)) => ErrorCode::TemplateNotFound,
        ProposeError::Rejected(ApplyError::FeatureNotActive { .. }) => ErrorCode::FeatureNotActive,
        ProposeError::Rejected(ApplyError::TemplateOverlap { .. }) => ErrorCode::TemplateConflict,
        ProposeError::Rejected(ApplyError::NumberNotFound { .. }) => ErrorCode::NumberNotFound,
        ProposeError::Rejected(ApplyError::NumberConflict { .. }) => ErrorCode::NumberConflict,
        // Token IDs are 64 random bits: a clash is a fluke; the caller may simply retry.
        ProposeError::Rejected(ApplyError::TokenExists(_)) => ErrorCode::Unavailable,
        // Worker registration is the snowflake actor's business; no request proposes it.
        ProposeError::Rejected(ApplyError::NotAMember(_) | ApplyError::WorkerLost { .. }) => {
            ErrorCode::SnowflakeUnavailable
        }
        ProposeError::Rejected(ApplyError::WorkersExhausted) => ErrorCode::WorkerIdsExhausted,
        // A region's tag between blocks: what a tag between segments answers, retryable.
        ProposeError::Rejected(ApplyError::NoBlock(_) | ApplyError::HomeUnknown(_)) => ErrorCode::SegmentsNotReady,
        ProposeError::Rejected(ApplyError::RegionNotFound(_)) => ErrorCode::NotFound,
        // The message names the home region.
        ProposeError::Rejected(
            ApplyError::RegionRetired(_) | ApplyError::RegionConflict(_) | ApplyError::NotHome { .. },
        ) => ErrorCode::RegionConflict,
        ProposeError::Rejected(ApplyError::NotBlockable { .. }) => ErrorCode::WrongProfile,
        ProposeError::Member { kind, .. } => match kind {
            MemberErrorKind::Exists => ErrorCode::MemberExists,
            MemberErrorKind::Retired => ErrorCode::NodeIdRetired,
            MemberErrorKind::NotFound => ErrorCode::MemberNotFound,
            MemberErrorKind::Invalid => ErrorCode::InvalidRequest,
            MemberErrorKind::Conflict => ErrorCode::MembershipConflict,
        },
        // Fatal: Raft stopped (a storage error such as a full disk); the message says why.
        ProposeError::NotLeader { .. }
        | ProposeError::Timeout(_)
        | ProposeError::Unavailable(_)
        | ProposeError::Uncertain { .. }
        | ProposeError::Fatal(_) => ErrorCode::Unavailable,
    }
}

/// A failed proposal, forwarded or not (admin writes, monotonic takes on a follower): the
/// public message only; the full error, which may name the leader and hold its error text,
/// goes to the log.
impl From<ProposeError> for ApiError {
    fn from(e: ProposeError) -> Self {
        let code = propose_code(&e);
        if code == ErrorCode::Unavailable {
            tracing::debug!(error = %e, "a proposal failed");
        }
        ApiError::new(code, e.public_message())
    }
}

impl From<TakeError> for ApiError {
    fn from(e: TakeError) -> Self {
        let code = match &e {
            TakeError::NotReady { .. } | TakeError::Alloc(AllocError::NotCommitted(CommitFailure::NoBlock(_))) => {
                ErrorCode::SegmentsNotReady
            }
            TakeError::Alloc(AllocError::TagNotFound(_)) => ErrorCode::TagNotFound,
            TakeError::Alloc(AllocError::TagExhausted(_)) => ErrorCode::TagExhausted,
            TakeError::Alloc(AllocError::NotServed(_)) => ErrorCode::WrongProfile,
            // The message names the home region.
            TakeError::Alloc(AllocError::NotHome(_)) => ErrorCode::RegionConflict,
            TakeError::Alloc(AllocError::NotCommitted(_) | AllocError::EmptySegment { .. }) => ErrorCode::Unavailable,
            TakeError::Alloc(AllocError::ShuttingDown) => ErrorCode::ShuttingDown,
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<SnowflakeError> for ApiError {
    fn from(e: SnowflakeError) -> Self {
        let code = match &e {
            SnowflakeError::NotServing(_) | SnowflakeError::OutOfRange => ErrorCode::SnowflakeUnavailable,
            SnowflakeError::ClockBackwards { .. } | SnowflakeError::ClockStalled(_) => ErrorCode::ClockMovedBackwards,
            SnowflakeError::Exhausted(_) => ErrorCode::WorkerIdsExhausted,
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        let code = match &e {
            ServiceError::NotFound(_) => ErrorCode::NotFound,
            ServiceError::BadRequest(_) => ErrorCode::InvalidRequest,
            ServiceError::Encode(_) => ErrorCode::Unavailable,
            ServiceError::Impersonation { .. } => ErrorCode::Forbidden,
        };
        ApiError::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// An address a peer error could carry.
    const PEER: &str = "10.9.8.7:8443";

    #[test]
    fn no_failed_proposal_shows_a_peer_address_or_a_peer_s_error_text() {
        let peer_text = format!("forwarding to node 2 at {PEER} failed: connection refused");
        for e in [
            ProposeError::Unavailable(peer_text.clone()),
            ProposeError::Uncertain { leader: 2, detail: peer_text.clone() },
            ProposeError::NotLeader { leader: Some(2) },
            ProposeError::Timeout(Duration::from_secs(3)),
        ] {
            let shown = ApiError::from(e);
            assert_eq!(shown.code, ErrorCode::Unavailable);
            assert!(!shown.message.contains(PEER) && !shown.message.contains("refused"), "{}", shown.message);
        }
        // An uncertain outcome says so (the caller must check before retrying a create).
        let uncertain = ApiError::from(ProposeError::Uncertain { leader: 2, detail: peer_text });
        assert!(uncertain.message.contains("may or may not"), "{}", uncertain.message);
        // What the caller asked about is shown as it is.
        let rejected = ApiError::from(ProposeError::Rejected(ApplyError::TagNotFound("orders".into())));
        assert_eq!(rejected.code, ErrorCode::TagNotFound);
        assert!(rejected.message.contains("orders"), "{}", rejected.message);
    }

    #[test]
    fn a_segment_that_did_not_commit_says_why_without_peer_details() {
        for why in [CommitFailure::NoQuorum, CommitFailure::Timeout(Duration::from_secs(1))] {
            let shown = ApiError::from(TakeError::Alloc(AllocError::NotCommitted(why)));
            assert_eq!(shown.code, ErrorCode::Unavailable);
            assert!(shown.message.starts_with("segment allocation failed"), "{}", shown.message);
        }
        let empty = ApiError::from(TakeError::Alloc(AllocError::EmptySegment { start: 5, end: 5 }));
        assert_eq!(empty.code, ErrorCode::Unavailable);
    }
}
