//! Checks on the leader's answer to a forwarded request, before anything acts on it.
//!
//! A follower installs a segment, or starts issuing under a worker ID, because the leader said
//! so. The answer crosses the network and a broken or malicious peer (it would need the
//! cluster secret) could send anything that decodes: a segment with `end <= start` would make a
//! release build serve from `start` with no end, overlapping other nodes. So every answer is
//! checked against what was asked, field by field; a failed check is refused, logged, counted
//! (`leaf_peer_answers_rejected`) and reported as 503 `unavailable`.
use leaf_api::tag::{validate_max_id, validate_step, validate_tag};
use leaf_raft_store::{Applied, Op, WORKER_IDS};

use super::{Forward, Forwarded};

/// Whether `answer` is a well-formed answer to `req`; `Err` says what is wrong.
pub(crate) fn check(req: &Forward, answer: &Forwarded) -> Result<(), String> {
    match (req, answer) {
        (Forward::Propose(op), Forwarded::Proposed { applied, .. }) => check_applied(op, applied),
        (Forward::ReadIndex, Forwarded::ReadIndex(_)) => Ok(()),
        (Forward::QuorumAge, Forwarded::QuorumAge(_)) => Ok(()),
        (Forward::AddLearner { .. } | Forward::Promote { .. } | Forward::Remove { .. }, Forwarded::Membership(m)) => {
            if m.voters.is_empty() {
                Err("a membership without voters".to_string())
            } else {
                Ok(())
            }
        }
        (req, answer) => Err(format!("{} answered to {}", answer_kind(answer), request_kind(req))),
    }
}

fn request_kind(req: &Forward) -> &'static str {
    match req {
        Forward::Propose(_) => "a proposal",
        Forward::ReadIndex => "a read index request",
        Forward::QuorumAge => "a quorum age request",
        Forward::AddLearner { .. } | Forward::Promote { .. } | Forward::Remove { .. } => "a membership change",
    }
}

fn answer_kind(answer: &Forwarded) -> &'static str {
    match answer {
        Forwarded::Proposed { .. } => "a proposal result",
        Forwarded::ReadIndex(_) => "a read index",
        Forwarded::QuorumAge(_) => "a quorum age",
        Forwarded::Membership(_) => "a membership",
    }
}

/// The state machine's result for `op`, checked against `op`.
pub(crate) fn check_applied(op: &Op, applied: &Applied) -> Result<(), String> {
    match (op, applied) {
        (Op::AllocateSegment { step, .. }, Applied::Segment(a)) => {
            if a.start < 0 || a.end <= a.start {
                return Err(format!("segment [{}, {}) is empty or negative", a.start, a.end));
            }
            if a.end.checked_sub(a.start) != Some(*step) {
                return Err(format!("segment [{}, {}) does not have the requested step {step}", a.start, a.end));
            }
            validate_step(a.stored_step).map_err(|e| format!("stored step: {e}"))
        }
        (Op::CreateTag { tag, .. } | Op::UpdateTag { tag, .. }, Applied::Tag { tag: got, record }) => {
            if got != tag {
                return Err(format!("result for tag {got:?}, asked for {tag:?}"));
            }
            validate_tag(got).map_err(|e| e.to_string())?;
            validate_step(record.step).map_err(|e| e.to_string())?;
            validate_max_id(record.max_id).map_err(|e| e.to_string())
        }
        (Op::RegisterWorker { .. }, Applied::Worker(g)) => check_worker(g.worker_id, g.lease_expires_ms),
        (Op::RenewWorker { worker_id, .. }, Applied::Worker(g)) => {
            if g.worker_id != *worker_id {
                return Err(format!("renewal answered for worker ID {}, asked for {worker_id}", g.worker_id));
            }
            check_worker(g.worker_id, g.lease_expires_ms)
        }
        (op, applied) => Err(format!("result {applied:?} does not answer {}", op_kind(op))),
    }
}

fn check_worker(worker_id: u16, lease_expires_ms: i64) -> Result<(), String> {
    if worker_id >= WORKER_IDS {
        return Err(format!("worker ID {worker_id} is outside 0..{WORKER_IDS}"));
    }
    if lease_expires_ms <= 0 {
        return Err(format!("lease end {lease_expires_ms} is not a time"));
    }
    Ok(())
}

fn op_kind(op: &Op) -> &'static str {
    match op {
        Op::CreateTag { .. } => "a tag creation",
        Op::UpdateTag { .. } => "a tag update",
        Op::AllocateSegment { .. } => "a segment allocation",
        Op::RegisterWorker { .. } => "a worker registration",
        Op::RenewWorker { .. } => "a worker renewal",
    }
}

#[cfg(test)]
mod tests {
    use leaf_api::types::MembershipChange;
    use leaf_raft_store::{Allocation, TagRecord, WorkerGrant};

    use super::*;

    fn alloc(step: i64) -> Forward {
        Forward::Propose(Op::AllocateSegment { tag: "t".into(), step, node_id: 2 })
    }

    fn segment(start: i64, end: i64) -> Forwarded {
        Forwarded::Proposed { applied: Applied::Segment(Allocation { start, end, stored_step: 10 }), log_index: 5 }
    }

    #[test]
    fn segments_must_be_the_requested_nonempty_range() {
        assert!(check(&alloc(10), &segment(100, 110)).is_ok());
        for (start, end) in [(100, 100), (100, 99), (100, 111), (100, 109), (-5, 5), (i64::MIN, i64::MAX)] {
            assert!(check(&alloc(10), &segment(start, end)).is_err(), "[{start}, {end}) accepted");
        }
        let bad_step = Forwarded::Proposed {
            applied: Applied::Segment(Allocation { start: 0, end: 10, stored_step: 0 }),
            log_index: 1,
        };
        assert!(check(&alloc(10), &bad_step).is_err());
        // The wrong kind of answer.
        assert!(check(&alloc(10), &Forwarded::ReadIndex(Some(3))).is_err());
        let nothing = Forwarded::Proposed { applied: Applied::Nothing, log_index: 1 };
        assert!(check(&alloc(10), &nothing).is_err());
    }

    #[test]
    fn workers_and_tags_must_match_the_request() {
        let grant = |worker_id, lease_expires_ms| Forwarded::Proposed {
            applied: Applied::Worker(WorkerGrant { worker_id, not_before_ms: 0, lease_expires_ms }),
            log_index: 1,
        };
        let register = Forward::Propose(Op::RegisterWorker { node_id: 1, lease_ms: 60_000 });
        assert!(check(&register, &grant(3, 1_700_000_000_000)).is_ok());
        assert!(check(&register, &grant(1024, 1_700_000_000_000)).is_err());
        assert!(check(&register, &grant(3, -1)).is_err());
        let renew = Forward::Propose(Op::RenewWorker { node_id: 1, worker_id: 3, high_water_ms: 1, lease_ms: 60_000 });
        assert!(check(&renew, &grant(3, 1_700_000_000_000)).is_ok());
        assert!(check(&renew, &grant(4, 1_700_000_000_000)).is_err());
        let record = TagRecord { max_id: 1, step: 10, description: String::new(), created_ms: 0, updated_ms: 0 };
        let create =
            Forward::Propose(Op::CreateTag { tag: "a".into(), step: 10, start_max_id: 1, description: String::new() });
        let tag = |t: &str, record: TagRecord| Forwarded::Proposed {
            applied: Applied::Tag { tag: t.into(), record },
            log_index: 1,
        };
        assert!(check(&create, &tag("a", record.clone())).is_ok());
        assert!(check(&create, &tag("b", record.clone())).is_err());
        assert!(check(&create, &tag("a", TagRecord { max_id: -1, ..record.clone() })).is_err());
        assert!(check(&create, &tag("a", TagRecord { step: 0, ..record })).is_err());
        let member = Forwarded::Membership(MembershipChange { log_index: 1, voters: vec![], learners: vec![] });
        assert!(check(&Forward::Promote { node_id: 2 }, &member).is_err());
        assert!(check(&Forward::ReadIndex, &member).is_err());
    }
}
