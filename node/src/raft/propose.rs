//! What callers ask of the leader: a typed proposal ([`RaftNode::propose`]: each result type
//! checks and takes its own answer, [`super::answer::Answer`], so no caller matches on the state
//! machine's [`leaf_raft_store::Applied`]), the linearizable read barrier, and waits for this
//! node's applied state.
use leaf_raft_store::{Applied, Op, StateReader};
use tokio::time::Instant;

use super::answer::{Answer, AnswerError};
use super::ops::{Propose, ReadIndex};
use super::{ProposeError, RaftNode};

/// The leader's answer to `op` as the caller's type: checked against what was asked by the
/// type that answers it ([`Answer::check`]), and only then taken out.
pub(crate) fn checked_answer<R: Answer>(op: &Op, applied: Applied) -> Result<R, AnswerError> {
    R::check(op.inner(), &applied)?;
    R::take(applied)
}

impl RaftNode {
    /// Commits `op` through the leader (this node or, forwarded, another) and returns its
    /// checked, typed result. The leader stamps its clock into the command. Retried across
    /// leader changes until `raft.propose_timeout_ms`.
    pub(crate) async fn propose<R: Answer>(&self, op: Op) -> Result<R, ProposeError> {
        // An operation newer than the cluster's version (as this node applied it) goes as it is
        // to a leader that reads it, which chooses its form by its own state; to a leader of an
        // earlier release, only in a form that release reads ([`leaf_raft_store::version::form`]).
        let active = self.state.cluster_version();
        let op = if op.version() > active && self.leader_supports(op.version()).await {
            op
        } else {
            leaf_raft_store::version::form(op, active)?
        };
        let mut op = op;
        // The proposer's own stamp ([`super::hooks`]); the leader puts its own in again.
        if let Some(stamp) = &self.hooks.stamp {
            stamp(&mut op);
        }
        let req = Propose { op };
        let applied = self.on_leader(&req).await?;
        let shown = format!("{applied:?}");
        checked_answer::<R>(&req.op, applied).map_err(|why| self.refuse_answer(&why, &req, Some(&shown)))
    }

    /// Waits until this node has applied everything committed before the call (a
    /// linearizable read barrier through the leader's read index): a tag created on any node
    /// is visible here afterwards. Writes nothing to the log.
    pub async fn read_barrier(&self) -> Result<(), ProposeError> {
        let deadline = self.deadline();
        let me = self.clone();
        let round = move || {
            let me = me.clone();
            async move { me.on_leader(&ReadIndex).await }
        };
        let index = match tokio::time::timeout_at(deadline, self.barriers.read(round)).await {
            Ok(r) => r?,
            Err(_) => return Err(ProposeError::Timeout(self.propose_timeout)),
        };
        if self.state.last_applied().map(|l| l.index) >= index {
            return Ok(());
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        self.raft
            .wait(Some(wait))
            .applied_index_at_least(index, "read index")
            .await
            .map_err(|_| ProposeError::Timeout(self.propose_timeout))?;
        Ok(())
    }

    /// Waits (up to the propose timeout) until `seen` holds of this node's applied state,
    /// checked at each change of Raft's metrics (an apply changes them), never with a leader
    /// round. Whether it held in time.
    pub(crate) async fn wait_applied(
        &self,
        what: &'static str,
        seen: impl Fn(&StateReader) -> bool + Send + Sync + 'static,
    ) -> bool {
        if seen(&self.state) {
            return true;
        }
        let state = self.state.clone();
        self.raft.wait(Some(self.propose_timeout)).metrics(move |_| seen(&state), what).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use leaf_raft_store::{Allocation, WorkerGrant};

    use super::*;

    /// What `propose` does with a leader's answer: a forged one is refused before anything
    /// acts on it, whatever its kind.
    #[test]
    fn a_forged_answer_is_refused_before_it_is_taken() {
        let ask = Op::AllocateSegment { tag: "t".into(), step: 10, node_id: 2 };
        let good = Applied::Segment(Allocation { start: 100, end: 110, stored_step: 10 });
        assert_eq!(checked_answer::<Allocation>(&ask, good), Ok(Allocation { start: 100, end: 110, stored_step: 10 }));
        // The right kind, a range that overlaps everything: taken as it is, it would be served.
        let forged = Applied::Segment(Allocation { start: 100, end: i64::MAX, stored_step: 10 });
        assert!(matches!(checked_answer::<Allocation>(&ask, forged), Err(AnswerError::Invalid(_))));
        let grant = Applied::Worker(WorkerGrant { worker_id: 1, not_before_ms: 0, lease_expires_ms: 1 });
        assert!(matches!(checked_answer::<Allocation>(&ask, grant), Err(AnswerError::WrongKind { .. })));
        // An admin wrapper is checked by what it wraps.
        let admin = Op::admin(
            leaf_api::audit::Actor::AdminToken,
            leaf_raft_store::audit::DEFAULT_RETENTION,
            Op::NoteMembership(leaf_api::audit::AuditAction::ClockFaultSet { node_id: 1, offset_ms: 0 }),
        );
        assert_eq!(checked_answer::<()>(&admin, Applied::Nothing), Ok(()));
    }
}
