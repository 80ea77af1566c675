//! Segment allocation through Raft: how a tag actor's refill becomes a committed range.
//!
//! Layout:
//! - this file: [`RaftAllocator`], the tag actors' [`crate::tags::Allocator`], and the check of
//!   the leader's answer (a non-empty range of at most the step asked for);
//! - [`group`]: the leader's group commit of allocations (a flood of cold tags commits one
//!   entry per group, not one per tag), a hook of [`crate::raft::hooks`];
//! - [`journal`]: the allocation journal's view (`/admin/allocations`).
pub mod group;
pub mod journal;

use leaf_api::tag::validate_step;
use leaf_raft_store::{Allocation, Applied, ApplyError, Op};

use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};
use crate::raft::{ProposeError, RaftNode};
use crate::tags::{AllocError, Allocator, BoxFuture, CommitFailure};

/// Reserves the next `step` IDs of `tag` for `raft`'s node: a non-empty range of at most
/// `step` (less only where the tag's space ends).
pub async fn allocate(raft: &RaftNode, tag: String, step: i64) -> Result<Allocation, ProposeError> {
    raft.propose(Op::AllocateSegment { tag, step, node_id: raft.node_id() }).await
}

/// Commits segments through Raft on behalf of the tag actors. The proposal runs where the
/// actor awaits it, on the actors' thread: no hop to another runtime (ARCHITECTURE.md, "Which
/// thread runs what").
pub(crate) struct RaftAllocator {
    raft: RaftNode,
}

impl RaftAllocator {
    /// Allocations through `raft`.
    pub(crate) fn new(raft: RaftNode) -> Self {
        RaftAllocator { raft }
    }
}

impl Allocator for RaftAllocator {
    fn allocate(&self, tag: &str, step: i64) -> BoxFuture<Result<Allocation, AllocError>> {
        let raft = self.raft.clone();
        let tag = tag.to_string();
        Box::pin(async move {
            match allocate(&raft, tag.clone(), step).await {
                // `allocate` checked the answer (a non-empty range of at most `step`).
                Ok(a) => Ok(a),
                Err(ProposeError::Rejected(ApplyError::TagNotFound(t))) => Err(AllocError::TagNotFound(t)),
                Err(ProposeError::Rejected(e @ ApplyError::NotBlockable { .. })) => {
                    Err(AllocError::NotServed(e.to_string()))
                }
                Err(ProposeError::Rejected(e @ ApplyError::NotHome { .. })) => Err(AllocError::NotHome(e.to_string())),
                Err(
                    e @ ProposeError::Rejected(
                        ApplyError::TagExhausted { .. }
                        | ApplyError::UpperBoundReached { .. }
                        | ApplyError::DayExhausted { .. },
                    ),
                ) => Err(AllocError::TagExhausted(e.to_string())),
                // A stopped Raft (a storage error such as a full disk, or shutdown) is reported
                // with its reason, not as a plain shutdown: the operator needs to see which.
                // Peer addresses and peer error text go to the log, not to anonymous clients.
                Err(e) => {
                    tracing::warn!(%tag, error = %e, "segment allocation failed");
                    Err(AllocError::NotCommitted(commit_failure(e)))
                }
            }
        })
    }
}

/// Why a segment did not commit, as a client may read it (the leader's address and error text
/// stay in the log).
fn commit_failure(e: ProposeError) -> CommitFailure {
    match e {
        ProposeError::NotLeader { .. } | ProposeError::Unavailable(_) | ProposeError::Uncertain { .. } => {
            CommitFailure::NoQuorum
        }
        ProposeError::Timeout(d) => CommitFailure::Timeout(d),
        ProposeError::Fatal(why) => CommitFailure::Stopped(why),
        e @ ProposeError::Rejected(ApplyError::NoBlock(_) | ApplyError::HomeUnknown(_)) => {
            CommitFailure::NoBlock(e.public_message())
        }
        e @ (ProposeError::Rejected(_) | ProposeError::Member { .. }) => CommitFailure::Rejected(e.public_message()),
    }
}

impl Answer for Allocation {
    const ASKED: &'static str = "a segment allocation";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::AllocateSegment { step, .. }, Applied::Segment(a)) => {
                if a.start < 0 || a.end <= a.start {
                    return Err(invalid(format!("segment [{}, {}) is empty or negative", a.start, a.end)));
                }
                // Shorter than the step only where the tag's space ends (its upper bound, the
                // end of a daily tag's day, i64::MAX).
                if a.end.checked_sub(a.start).is_none_or(|len| len > *step) {
                    return Err(invalid(format!(
                        "segment [{}, {}) is longer than the requested step {step}",
                        a.start, a.end
                    )));
                }
                validate_step(a.stored_step).map_err(|e| invalid(format!("stored step: {e}")))
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Segment(a) => Ok(a),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use leaf_raft_store::WorkerGrant;

    use super::*;

    fn alloc(step: i64) -> Op {
        Op::AllocateSegment { tag: "t".into(), step, node_id: 2 }
    }

    fn segment(start: i64, end: i64) -> Applied {
        Applied::Segment(Allocation { start, end, stored_step: 10 })
    }

    #[test]
    fn segments_must_be_nonempty_and_at_most_the_requested_step() {
        assert!(Allocation::check(&alloc(10), &segment(100, 110)).is_ok());
        // Cut short where the tag's space ends (an upper bound, the end of a day).
        assert!(Allocation::check(&alloc(10), &segment(100, 109)).is_ok());
        for (start, end) in [(100, 100), (100, 99), (100, 111), (-5, 5), (i64::MIN, i64::MAX)] {
            assert!(Allocation::check(&alloc(10), &segment(start, end)).is_err(), "[{start}, {end}) accepted");
        }
        let bad_step = Applied::Segment(Allocation { start: 0, end: 10, stored_step: 0 });
        assert!(Allocation::check(&alloc(10), &bad_step).is_err());
        // The wrong kind of result.
        assert_eq!(
            Allocation::check(&alloc(10), &Applied::Nothing),
            Err(AnswerError::WrongKind { asked: "a segment allocation", got: "no result" })
        );
        let grant = Applied::Worker(WorkerGrant { worker_id: 1, not_before_ms: 0, lease_expires_ms: 1 });
        assert!(matches!(Allocation::check(&alloc(10), &grant), Err(AnswerError::WrongKind { .. })));
    }

    #[test]
    fn an_allocation_is_taken_only_from_a_segment() {
        let a = Allocation { start: 0, end: 10, stored_step: 10 };
        let g = WorkerGrant { worker_id: 2, not_before_ms: 5, lease_expires_ms: 60_000 };
        assert_eq!(Allocation::take(Applied::Segment(a)), Ok(a));
        assert_eq!(
            Allocation::take(Applied::Worker(g)),
            Err(AnswerError::WrongKind { asked: "a segment allocation", got: "a worker grant" })
        );
    }
}
