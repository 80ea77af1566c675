//! The node's most recent error answers, for the dashboard: a ring of at most
//! [`MAX_RECENT_ERRORS`]. Recording never waits: under contention (an error flood on both cores)
//! a record is dropped rather than queued, and `leaf_errors_total` still counts every error.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use leaf_api::dashboard::{RecentError, MAX_RECENT_ERRORS};

/// What an error answer carries for the ring (set by [`super::ApiError`]'s response).
#[derive(Debug, Clone)]
pub struct ErrorNote {
    pub code: leaf_api::ErrorCode,
    pub message: Arc<str>,
}

#[derive(Debug, Default)]
pub struct RecentErrors(Mutex<VecDeque<RecentError>>);

impl RecentErrors {
    /// Records an error answer unless another thread is recording at this moment.
    pub fn record(&self, e: RecentError) {
        let Ok(mut ring) = self.0.try_lock() else { return };
        if ring.len() == MAX_RECENT_ERRORS {
            ring.pop_front();
        }
        ring.push_back(e);
    }

    /// Newest first.
    pub fn newest_first(&self) -> Vec<RecentError> {
        let ring = self.0.lock().unwrap_or_else(|e| e.into_inner());
        ring.iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leaf_api::ErrorCode;

    fn error(at_ms: i64) -> RecentError {
        RecentError {
            at_ms,
            status: 503,
            code: ErrorCode::SegmentsNotReady,
            route: "/api/segment/get/{tag}".into(),
            message: "m".into(),
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_and_is_bounded() {
        let r = RecentErrors::default();
        assert!(r.newest_first().is_empty());
        for at in 0..(MAX_RECENT_ERRORS as i64 + 10) {
            r.record(error(at));
        }
        let kept = r.newest_first();
        assert_eq!(kept.len(), MAX_RECENT_ERRORS);
        assert_eq!(kept[0].at_ms, MAX_RECENT_ERRORS as i64 + 9);
        assert_eq!(kept.last().unwrap().at_ms, 10);
        // A record while the ring is held elsewhere is dropped, not waited for.
        let held = r.0.lock().unwrap();
        r.record(error(-1));
        drop(held);
        assert_eq!(r.newest_first()[0].at_ms, MAX_RECENT_ERRORS as i64 + 9);
    }
}
