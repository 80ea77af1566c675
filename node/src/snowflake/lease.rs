//! A worker ID's lease through Raft: registering for an ID (the lowest free one of a range)
//! and renewing it with the time high-water mark, and the checks on the leader's answer before
//! the actor acts on it: a grant for the ID asked for, inside the range asked for, with a lease
//! end that is a time (a forged grant would start a node issuing under another's ID).
use leaf_raft_store::{Applied, Op, WorkerGrant, WORKER_IDS};

use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};
use crate::raft::{ProposeError, RaftNode};

/// Registers this node for a worker ID in `first..=last` (the lowest free one; its own if it
/// holds one there) on a lease of `lease_ms`. The whole range is proposed as `RegisterWorker`,
/// which nodes of earlier releases still apply (a rolling upgrade).
pub(crate) async fn register(
    raft: &RaftNode,
    lease_ms: i64,
    (first, last): (u16, u16),
) -> Result<WorkerGrant, ProposeError> {
    let node_id = raft.node_id();
    let within = ((first, last) != (0, WORKER_IDS - 1)).then_some((first, last));
    raft.propose(Op::RegisterWorker { node_id, lease_ms, within }).await
}

/// Extends the lease of this node's `worker_id` and raises its time high-water mark; the
/// grant is for `worker_id`.
pub(crate) async fn renew(
    raft: &RaftNode,
    worker_id: u16,
    high_water_ms: i64,
    lease_ms: i64,
) -> Result<WorkerGrant, ProposeError> {
    raft.propose(Op::RenewWorker { node_id: raft.node_id(), worker_id, high_water_ms, lease_ms }).await
}

impl Answer for WorkerGrant {
    const ASKED: &'static str = "a worker registration or renewal";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::RegisterWorker { within: None, .. }, Applied::Worker(g)) => {
                check_worker(g.worker_id, g.lease_expires_ms)
            }
            (Op::RegisterWorker { within: Some((first, last)), .. }, Applied::Worker(g)) => {
                if !(*first..=*last).contains(&g.worker_id) {
                    return Err(invalid(format!("worker ID {} is outside the asked {first}..={last}", g.worker_id)));
                }
                check_worker(g.worker_id, g.lease_expires_ms)
            }
            (Op::RenewWorker { worker_id, .. }, Applied::Worker(g)) => {
                if g.worker_id != *worker_id {
                    return Err(invalid(format!(
                        "renewal answered for worker ID {}, asked for {worker_id}",
                        g.worker_id
                    )));
                }
                check_worker(g.worker_id, g.lease_expires_ms)
            }

            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Worker(g) => Ok(g),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

fn check_worker(worker_id: u16, lease_expires_ms: i64) -> Result<(), AnswerError> {
    if worker_id >= WORKER_IDS {
        return Err(invalid(format!("worker ID {worker_id} is outside 0..{WORKER_IDS}")));
    }
    if lease_expires_ms <= 0 {
        return Err(invalid(format!("lease end {lease_expires_ms} is not a time")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_must_be_for_the_id_and_range_asked_with_a_lease_end() {
        let grant = |worker_id, lease_expires_ms| {
            Applied::Worker(WorkerGrant { worker_id, not_before_ms: 0, lease_expires_ms })
        };
        let register = Op::RegisterWorker { node_id: 1, lease_ms: 60_000, within: None };
        assert!(WorkerGrant::check(&register, &grant(3, 1_700_000_000_000)).is_ok());
        assert!(WorkerGrant::check(&register, &grant(1024, 1_700_000_000_000)).is_err());
        assert!(WorkerGrant::check(&register, &grant(3, -1)).is_err());
        let within = Op::RegisterWorker { node_id: 1, lease_ms: 60_000, within: Some((10, 20)) };
        assert!(WorkerGrant::check(&within, &grant(10, 1_700_000_000_000)).is_ok());
        assert!(WorkerGrant::check(&within, &grant(3, 1_700_000_000_000)).is_err());
        let renew = Op::RenewWorker { node_id: 1, worker_id: 3, high_water_ms: 1, lease_ms: 60_000 };
        assert!(WorkerGrant::check(&renew, &grant(3, 1_700_000_000_000)).is_ok());
        assert!(WorkerGrant::check(&renew, &grant(4, 1_700_000_000_000)).is_err());
        let other = Op::AllocateSegment { tag: "t".into(), step: 10, node_id: 1 };
        assert!(matches!(WorkerGrant::check(&other, &grant(3, 1)), Err(AnswerError::WrongKind { .. })));
    }
}
