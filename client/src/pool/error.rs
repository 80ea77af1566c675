//! What can go wrong taking IDs from an [`IdPool`](super::IdPool).
use std::time::Duration;

use super::IdKind;

/// Why the pool could not hand out an ID, or could not be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// Nothing was buffered and no lease arrived within [`PoolOptions::max_wait`](super::PoolOptions::max_wait).
    /// `last_error` is the last lease failure in words (`None`: no lease failed, it was only
    /// slow — or the runtime running the refill task is gone).
    #[error(
        "no {kind} ID of {name:?} within {waited:?}: {}",
        last_error.as_deref().unwrap_or("no lease arrived in time")
    )]
    Exhausted { kind: IdKind, name: String, waited: Duration, last_error: Option<String> },
    /// Nothing is buffered and the last lease was refused for a reason waiting does not fix
    /// (an unknown tag, a rejected token, a TLS setup problem): returned at once instead of
    /// after `max_wait`. The refill task keeps trying with backoff, so a later call succeeds
    /// once the cause is gone (the tag created).
    #[error("{kind} IDs of {name:?} refused: {error}")]
    Rejected { kind: IdKind, name: String, error: String },
    /// A tag or key name the service would refuse (1–128 bytes of `[A-Za-z0-9_.:-]`).
    #[error("invalid {kind} name {name:?}: {reason}")]
    InvalidName { kind: IdKind, name: String, reason: String },
    /// [`PoolOptions`](super::PoolOptions) out of range.
    #[error("invalid pool options: {0}")]
    InvalidOptions(String),
    /// [`IdPool::new`](super::IdPool::new) outside a tokio runtime.
    #[error("an IdPool needs a tokio runtime: create it inside one or pass a Handle to IdPool::with_runtime")]
    NoRuntime,
}
