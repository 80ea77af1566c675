//! Why a run could not start (or got no answer at all).
/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("invalid URL {0:?}: expected http://host:port or https://host:port")]
    Url(String),
    /// The TLS settings (`--ca`, `--client-cert`, `--client-key`) are unusable.
    #[error(transparent)]
    Tls(#[from] leaf_client::TlsError),
    #[error("cannot resolve {0}: {1}")]
    Resolve(String, String),
    #[error("path must start with '/': {0:?}")]
    Path(String),
    #[error("--duration must be more than zero")]
    Duration,
    #[error("histogram: {0}")]
    Histogram(String),
    #[error("no request got an answer: {0}")]
    NoAnswers(String),
}
