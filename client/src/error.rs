//! What can go wrong building a client or calling a node.
//!
//! No variant carries the admin token, a URL's credentials or key material: error text is safe
//! to log.
use std::path::PathBuf;
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
    /// The TLS settings (CA, client certificate) could not be turned into a configuration.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Why TLS settings could not be turned into a `rustls` configuration. The text names files
/// and says what is wrong with them; it never quotes their contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read the {what} {}: {reason}", path.display())]
    Read { what: &'static str, path: PathBuf, reason: String },
    /// A PEM text (from `origin`: a file name or "(given in memory)") holds nothing usable.
    #[error("the {what} {origin}: {reason}")]
    Pem { what: &'static str, origin: String, reason: String },
    /// A client certificate without its key, or a key without its certificate.
    #[error("a client certificate and its key go together: {0}")]
    IncompleteClientCert(&'static str),
    /// `https://` without a CA, and the platform's root certificates could not be loaded.
    #[error(
        "no CA to check the nodes' certificates against: none given and the platform's root \
         certificates could not be loaded ({reason}); pass the cluster's CA with --ca / LEAF_CA"
    )]
    NoRoots { reason: String },
    /// `rustls` refused the configuration (for example, a key that does not match its
    /// certificate).
    #[error("TLS configuration: {reason}")]
    Config { reason: String },
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The node answered with an error body (`{"code": ..., "message": ...}`).
    #[error("HTTP {status}: {code}: {message}")]
    Api { status: StatusCode, code: ErrorCode, message: String },
    /// No answer: connection refused or reset, or the node closed the connection.
    /// `connect` is true when the request was never sent: the connection could not be opened,
    /// or it closed before the request was written.
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
    /// The TLS handshake with a node failed (untrusted certificate, wrong name, expired,
    /// a plaintext port, a client certificate demanded or refused): a setup problem, not an
    /// outage. The node processed no request. `message` says what is wrong in plain words.
    #[error("{node}: {message}")]
    Tls { node: String, failure: TlsFailure, message: String },
    /// A request could not be built (a body that does not serialise).
    #[error("cannot build the request: {0}")]
    Request(String),
}

/// What kind of TLS failure a [`ClientError::Tls`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsFailure {
    /// The node's certificate is not signed by a CA this client trusts.
    UnknownIssuer,
    /// The node's certificate does not name the host it was dialled at.
    NotValidForName,
    /// The node's certificate has expired.
    Expired,
    /// The node's certificate is not valid yet (a clock, or a certificate from the future).
    NotValidYet,
    /// The node's certificate is unusable in another way (bad signature, wrong purpose...).
    BadCertificate,
    /// `https://` to a node that answered in plaintext.
    Plaintext,
    /// The node demands a client certificate and this client has none.
    ClientCertRequired,
    /// The node refused this client's certificate.
    ClientCertRejected,
    /// Another handshake failure (no common protocol version or cipher suite...).
    Handshake,
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

    /// The kind of TLS failure, when the call failed in the TLS handshake (looking through
    /// [`ClientError::AllNodesFailed`]).
    pub fn tls_failure(&self) -> Option<TlsFailure> {
        match self {
            ClientError::Tls { failure, .. } => Some(*failure),
            ClientError::AllNodesFailed { last, .. } => last.tls_failure(),
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
            ClientError::Tls { .. } | ClientError::Request(_) => false,
        }
    }
}
