//! Where the pool leases its ranges: [`RangeSource`], implemented by [`Client`] (and by fakes in
//! tests and benchmarks).
use std::future::Future;
use std::pin::Pin;

use leaf_api::ranges::IdRanges;

use super::IdKind;
use crate::{Client, ClientError};

/// The future of one lease.
pub type LeaseFuture<'a> = Pin<Box<dyn Future<Output = Result<IdRanges, LeaseFailure>> + Send + 'a>>;

/// Leases ranges of IDs: `count` IDs of tag (or snowflake key) `name`, as ascending,
/// non-overlapping ranges holding exactly `count` IDs. The pool checks that before using an
/// answer, and treats a malformed one as a failed (retryable) lease.
///
/// Every ID an implementation returns must be its own: never returned before, to anyone. A
/// failed lease must hand out nothing (IDs the service allocated for a lost answer are a gap).
pub trait RangeSource: Send + Sync + 'static {
    fn lease<'a>(&'a self, kind: IdKind, name: &'a str, count: u32) -> LeaseFuture<'a>;
}

/// A failed lease, in words, and whether waiting may help.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LeaseFailure {
    pub message: String,
    /// `false` when the service refused the request in a way waiting does not fix (unknown
    /// tag, bad token, TLS setup): callers with nothing buffered get
    /// [`PoolError::Rejected`](super::PoolError::Rejected) at once.
    pub retryable: bool,
}

impl LeaseFailure {
    pub fn retryable(message: impl Into<String>) -> LeaseFailure {
        LeaseFailure { message: message.into(), retryable: true }
    }

    pub fn permanent(message: impl Into<String>) -> LeaseFailure {
        LeaseFailure { message: message.into(), retryable: false }
    }
}

impl From<ClientError> for LeaseFailure {
    fn from(e: ClientError) -> Self {
        // Unavailable (no answer, timeout, 503) or a garbled answer: try again. An error code
        // that is not a 503 (unknown tag, bad request, unauthorised) or a TLS failure: refused.
        let retryable = e.is_unavailable() || matches!(e, ClientError::Decode { .. });
        LeaseFailure { message: e.to_string(), retryable }
    }
}

/// The cluster, through the client's failover, retries and deadline
/// ([`Client::segment_ranges`], [`Client::snowflake_ranges`]).
impl RangeSource for Client {
    fn lease<'a>(&'a self, kind: IdKind, name: &'a str, count: u32) -> LeaseFuture<'a> {
        Box::pin(async move {
            let ranges = match kind {
                IdKind::Segment => self.segment_ranges(name, count).await?,
                IdKind::Snowflake => self.snowflake_ranges(name, count).await?,
            };
            Ok(ranges)
        })
    }
}
