//! The one place where an [`ApiError`] becomes a [`tonic::Status`]: the gRPC code of each
//! stable error code, and the code itself in the trailing metadata `leaf-code` (the same
//! string as the HTTP API's JSON `code`), for programs to match on. The message is the one the
//! HTTP API answers: it never holds a secret.
use leaf_api::ErrorCode;
use tonic::metadata::MetadataValue;
use tonic::{Code, Status};

use crate::service::ApiError;

/// The metadata key holding the stable error code of a failed call.
pub const LEAF_CODE: &str = "leaf-code";

/// The gRPC status code of each error code.
pub fn code_of(code: ErrorCode) -> Code {
    use ErrorCode::*;
    match code {
        InvalidTag | InvalidCount | InvalidRequest | PayloadTooLarge => Code::InvalidArgument,
        Unauthorized => Code::Unauthenticated,
        Forbidden => Code::PermissionDenied,
        TagNotFound | NotFound | MemberNotFound | TokenNotFound | TemplateNotFound | NumberNotFound => Code::NotFound,
        RateLimited => Code::ResourceExhausted,
        MethodNotAllowed => Code::Unimplemented,
        TagExists | MemberExists | TokenExists => Code::AlreadyExists,
        // The tag cannot give out another segment, the cluster has no worker ID left.
        TagExhausted | WorkerIdsExhausted => Code::ResourceExhausted,
        NodeIdRetired | TemplateConflict | WrongProfile | NumberConflict | FeatureNotActive | MembershipConflict
        | RegionConflict => Code::FailedPrecondition,
        SegmentsNotReady | NotReady | Unavailable | ShuttingDown | SnowflakeUnavailable | ClockMovedBackwards => {
            Code::Unavailable
        }
    }
}

/// `e` as a status: its gRPC code, its message, and `leaf-code` metadata.
pub fn status(e: ApiError) -> Status {
    let mut s = Status::new(code_of(e.code), e.message);
    s.metadata_mut().insert(LEAF_CODE, MetadataValue::from_static(e.code.as_str()));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_and_carries_its_wire_name() {
        for code in ErrorCode::ALL {
            let s = status(ApiError::new(code, "m"));
            assert_eq!(s.code(), code_of(code));
            assert_ne!(s.code(), Code::Ok);
            assert_eq!(s.metadata().get(LEAF_CODE).unwrap().to_str().unwrap(), code.as_str());
            assert_eq!(s.message(), "m");
        }
        assert_eq!(code_of(ErrorCode::InvalidCount), Code::InvalidArgument);
        assert_eq!(code_of(ErrorCode::TagNotFound), Code::NotFound);
        assert_eq!(code_of(ErrorCode::SegmentsNotReady), Code::Unavailable);
        assert_eq!(code_of(ErrorCode::ShuttingDown), Code::Unavailable);
        assert_eq!(code_of(ErrorCode::TagExhausted), Code::ResourceExhausted);
    }
}
