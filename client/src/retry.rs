//! When a failed attempt may be repeated (on the same or the next node), and how long to wait
//! first.
//!
//! Each call declares its safety:
//! - **idempotent**: repeating it cannot change what the caller ends up with. Reads;
//!   ID requests (an ID range handed to an answer that was lost is never handed out again: a
//!   retry makes a *gap* in the sequence, never a duplicate); tag updates (they set absolute
//!   values); gapless issues (the key keeps a repeat to the number it got); membership changes
//!   (the leader treats re-adding the same learner at the same address, promoting a voter and
//!   removing a removed node as no-ops that answer the current membership); the fault clock
//!   (it sets an absolute offset).
//! - **at most once**: repeating it after it may have reached a node could turn a
//!   success into an error. Creating a tag: if the first attempt committed but its answer was
//!   lost, a retry answers `tag_exists`. Retried only when the connection could not be opened
//!   (the request never left this process).
//!
//! A TLS handshake failure ([`ClientError::Tls`]) means the node processed no request, so
//! another node may be tried whatever the safety; the failure is a setup problem that waiting
//! does not cure, so the call gives up once every node failed that way.
//!
//! Errors worth retrying: no answer (transport error, timeout) and a 503 whose code says the
//! node or the cluster is temporarily unable (`unavailable`, `not_ready`,
//! `segments_not_ready`, `shutting_down`, `snowflake_unavailable`, `clock_moved_backwards`),
//! or a 503 without a readable error body (a proxy's). Everything else (400s, 401, 404, 409,
//! `worker_ids_exhausted`) is the answer, returned at once.
use std::time::Duration;

use hyper::StatusCode;
use leaf_api::ErrorCode;
use rand::Rng;

use crate::error::ClientError;

/// Whether a call may be repeated after it may have reached a node (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Safety {
    Idempotent,
    AtMostOnce,
}

/// Whether `err`, from one attempt of a call with `safety`, may be retried.
pub(crate) fn retryable(err: &ClientError, safety: Safety) -> bool {
    match (err, safety) {
        (ClientError::Transport { connect: true, .. } | ClientError::Tls { .. }, _) => true,
        (_, Safety::AtMostOnce) => false,
        (ClientError::Transport { .. } | ClientError::Timeout { .. }, Safety::Idempotent) => true,
        (ClientError::Api { status, code, .. }, Safety::Idempotent) => {
            *status == StatusCode::SERVICE_UNAVAILABLE && code_is_transient(*code)
        }
        (ClientError::Decode { status, .. }, Safety::Idempotent) => *status == StatusCode::SERVICE_UNAVAILABLE,
        (ClientError::AllNodesFailed { .. } | ClientError::Request(_), Safety::Idempotent) => false,
    }
}

/// Whether a call over `nodes` nodes stops after an attempt that failed with `err`, when
/// `tls_failures` of its attempts so far (this one included) failed in the TLS handshake: a
/// TLS failure is tried on another node, but not on the same node again once every node had
/// its turn (a wrong CA or a plaintext port does not fix itself).
pub(crate) fn gives_up_on_tls(err: &ClientError, nodes: usize, tls_failures: usize) -> bool {
    matches!(err, ClientError::Tls { .. }) && tls_failures >= nodes
}

/// 503 codes that another node, or the same node a little later, may not answer.
fn code_is_transient(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::Unavailable
            | ErrorCode::NotReady
            | ErrorCode::SegmentsNotReady
            | ErrorCode::ShuttingDown
            | ErrorCode::SnowflakeUnavailable
            | ErrorCode::ClockMovedBackwards
    )
}

/// Capped exponential backoff with jitter: before retry `n` (0-based) it waits a random time
/// between half and all of `min(cap, base * 2^n)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Backoff {
    pub fn delay(&self, retry: u32) -> Duration {
        let full = self.base.saturating_mul(1u32 << retry.min(20)).min(self.cap);
        let half = full / 2;
        let jitter_nanos = rand::thread_rng().gen_range(0..=half.as_nanos().min(u128::from(u64::MAX)) as u64);
        half + Duration::from_nanos(jitter_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: StatusCode, code: ErrorCode) -> ClientError {
        ClientError::Api { status, code, message: String::new() }
    }

    #[test]
    fn what_is_retried() {
        let refused = ClientError::Transport { node: "n".into(), message: "refused".into(), connect: true };
        let reset = ClientError::Transport { node: "n".into(), message: "reset".into(), connect: false };
        let timeout = ClientError::Timeout { node: "n".into(), timeout: Duration::from_secs(1) };
        for s in [Safety::Idempotent, Safety::AtMostOnce] {
            assert!(retryable(&refused, s), "a request never sent is always retried");
        }
        assert!(retryable(&reset, Safety::Idempotent));
        assert!(retryable(&timeout, Safety::Idempotent));
        assert!(!retryable(&reset, Safety::AtMostOnce));
        assert!(!retryable(&timeout, Safety::AtMostOnce));
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        for code in [ErrorCode::Unavailable, ErrorCode::SegmentsNotReady, ErrorCode::ShuttingDown, ErrorCode::NotReady]
        {
            assert!(retryable(&api(unavailable, code), Safety::Idempotent), "{code}");
            assert!(!retryable(&api(unavailable, code), Safety::AtMostOnce), "{code}");
        }
        assert!(!retryable(&api(unavailable, ErrorCode::WorkerIdsExhausted), Safety::Idempotent));
        assert!(!retryable(&api(StatusCode::BAD_REQUEST, ErrorCode::InvalidCount), Safety::Idempotent));
        assert!(!retryable(&api(StatusCode::NOT_FOUND, ErrorCode::TagNotFound), Safety::Idempotent));
        assert!(!retryable(&api(StatusCode::CONFLICT, ErrorCode::TagExists), Safety::Idempotent));
        let proxy = ClientError::Decode { node: "n".into(), status: unavailable, message: "html".into() };
        assert!(retryable(&proxy, Safety::Idempotent));
    }

    #[test]
    fn a_tls_failure_moves_on_but_never_comes_back_round() {
        let tls = ClientError::Tls { node: "n".into(), failure: crate::TlsFailure::UnknownIssuer, message: "x".into() };
        for s in [Safety::Idempotent, Safety::AtMostOnce] {
            assert!(retryable(&tls, s), "the node processed nothing: another may be tried");
        }
        assert!(gives_up_on_tls(&tls, 1, 1), "one node: no second try");
        assert!(!gives_up_on_tls(&tls, 3, 2));
        assert!(gives_up_on_tls(&tls, 3, 3));
        let refused = ClientError::Transport { node: "n".into(), message: "refused".into(), connect: true };
        assert!(!gives_up_on_tls(&refused, 1, 5), "only TLS failures count");
    }

    #[test]
    fn backoff_grows_to_its_cap_with_jitter() {
        let b = Backoff { base: Duration::from_millis(10), cap: Duration::from_millis(100) };
        for _ in 0..100 {
            let d0 = b.delay(0);
            assert!(d0 >= Duration::from_millis(5) && d0 <= Duration::from_millis(10), "{d0:?}");
            let d2 = b.delay(2);
            assert!(d2 >= Duration::from_millis(20) && d2 <= Duration::from_millis(40), "{d2:?}");
            let big = b.delay(40);
            assert!(big >= Duration::from_millis(50) && big <= Duration::from_millis(100), "{big:?}");
        }
    }
}
