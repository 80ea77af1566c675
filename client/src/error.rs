//! What can go wrong building a client or calling a node.
//!
//! No variant carries the admin token or a URL's credentials: error text is safe to log.
use std::time::Duration;

use hyper::StatusCode;
use leaf_api::ErrorCode;

/// Why a [`Client`](crate::Client) could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("no node URLs given")]
    NoNodes,
    /// `url` is `None` when the text held credentials (`user:pass@`), which are never echoed.
    #[error("invalid node URL {}: {reason}", url.as_deref().unwrap_or("(redacted)"))]
    InvalidUrl { url: Option<String>, reason: &'static str },
    #[error("the admin token contains characters not allowed in an HTTP header")]
    InvalidToken,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The node answered with an error body (`{"code": ..., "message": ...}`).
    #[error("HTTP {status}: {code}: {message}")]
    Api { status: StatusCode, code: ErrorCode, message: String },
    /// No answer: connection refused or reset, or the node closed the connection.
    /// `connect` is true when the connection could not be opened, so the request was never
    /// sent.
    #[error("{node}: {message}")]
    Transport { node: String, message: String, connect: bool },
    /// No complete answer within the per-request timeout (or what was left of the deadline).
    #[error("{node}: no answer within {timeout:?}")]
    Timeout { node: String, timeout: Duration },
    /// An answer that is not what the endpoint returns (wrong JSON, wrong number of IDs, too
    /// large).
    #[error("{node}: HTTP {status}: unexpected answer: {message}")]
    Decode { node: String, status: StatusCode, message: String },
    /// Every allowed attempt failed with an error worth retrying; `last` is the final one.
    #[error("gave up after {attempts} attempts: {last}")]
    AllNodesFailed { attempts: u32, last: Box<ClientError> },
    /// A request could not be built (a body that does not serialise).
    #[error("cannot build the request: {0}")]
    Request(String),
}

impl ClientError {
    /// The API error code of this error (looking through [`ClientError::AllNodesFailed`]).
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Api { code, .. } => Some(*code),
            ClientError::AllNodesFailed { last, .. } => last.code(),
            _ => None,
        }
    }

    /// The HTTP status of the answer, when there was one.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Api { status, .. } | ClientError::Decode { status, .. } => Some(*status),
            ClientError::AllNodesFailed { last, .. } => last.status(),
            _ => None,
        }
    }

    /// The service is unavailable (a 503, no answer, or a timeout) rather than the request
    /// being wrong: worth trying again later.
    pub fn is_unavailable(&self) -> bool {
        match self {
            ClientError::Api { status, .. } | ClientError::Decode { status, .. } => {
                *status == StatusCode::SERVICE_UNAVAILABLE
            }
            ClientError::Transport { .. } | ClientError::Timeout { .. } => true,
            ClientError::AllNodesFailed { last, .. } => last.is_unavailable(),
            ClientError::Request(_) => false,
        }
    }
}
