//! Checks on the leader's answer to a forwarded request, before anything acts on it.
//!
//! A follower installs a segment, or starts issuing under a worker ID, because the leader said
//! so. The answer crosses the network and a broken or malicious peer (it would need the
//! cluster secret) could send anything that decodes: a segment with `end <= start` would make a
//! release build serve from `start` with no end, overlapping other nodes. So every answer is
//! checked against what was asked, field by field; a failed check is refused, logged, counted
//! (`leaf_peer_answers_rejected`) and reported as 503 `unavailable`.
//!
//! The state machine's result ([`Applied`], one type for every command) becomes the caller's
//! typed result through [`Answer`], implemented by each result type: `check` against the op
//! asked for, then `take`. The features implement it beside their operations (allocations,
//! gapless numbers, worker grants, tags, tokens, templates); this file holds the trait and the
//! consensus' own answers (memberships, the cluster version).
use leaf_api::types::MembershipChange;
use leaf_raft_store::{Applied, Op};

/// Why an answer was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// A result of another kind than the request asked for.
    #[error("{got} answered to {asked}")]
    WrongKind { asked: &'static str, got: &'static str },
    /// A result of the right kind with a value that cannot be right.
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn invalid(why: impl Into<String>) -> AnswerError {
    AnswerError::Invalid(why.into())
}

/// A membership change's answer: a membership with voters.
pub(crate) fn check_membership(m: &MembershipChange) -> Result<(), AnswerError> {
    if m.voters.is_empty() {
        return Err(invalid("a membership without voters"));
    }
    Ok(())
}

/// A proposal's typed result: how the state machine's [`Applied`] for an op is checked against
/// that op, field by field, and taken out. Each result type checks the ops it answers; any
/// other pairing is a result of the wrong kind.
pub(crate) trait Answer: Sized {
    /// What the caller asked for, for the error.
    const ASKED: &'static str;

    /// `applied`, the result for `op` (unwrapped of `Op::Admin`), checked against it.
    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError>;

    /// The typed result out of `applied`.
    fn take(applied: Applied) -> Result<Self, AnswerError>;
}

/// A result of another kind than `op` is answered with.
pub(crate) fn mismatch(op: &Op, applied: &Applied) -> AnswerError {
    AnswerError::WrongKind { asked: op.what(), got: applied.kind() }
}

pub(crate) fn wrong_kind<T: Answer>(applied: &Applied) -> AnswerError {
    AnswerError::WrongKind { asked: T::ASKED, got: applied.kind() }
}

impl Answer for leaf_raft_store::version::ClusterVersion {
    const ASKED: &'static str = "a cluster version";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::SetClusterVersion { version }, Applied::ClusterVersion(active)) => {
                if active < version {
                    return Err(invalid(format!("cluster version {active} answered to a raise to {version}")));
                }
                Ok(())
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::ClusterVersion(v) => Ok(v),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memberships_must_have_voters() {
        assert!(check_membership(&MembershipChange { log_index: 1, voters: vec![1], learners: vec![4] }).is_ok());
        let none = MembershipChange { log_index: 1, voters: vec![], learners: vec![4] };
        assert!(matches!(check_membership(&none), Err(AnswerError::Invalid(_))));
    }

    #[test]
    fn a_cluster_version_is_taken_only_when_at_least_the_one_asked_for() {
        use leaf_raft_store::version::{ClusterVersion, BASE, SUPPORTED};
        let raise = |v| Op::SetClusterVersion { version: v };
        let (v1, v2) = (BASE, SUPPORTED);
        assert!(ClusterVersion::check(&raise(v1), &Applied::ClusterVersion(v2)).is_ok());
        if v1 < v2 {
            assert!(ClusterVersion::check(&raise(v2), &Applied::ClusterVersion(v1)).is_err());
        }
        assert!(matches!(ClusterVersion::check(&raise(v1), &Applied::Nothing), Err(AnswerError::WrongKind { .. })));
    }
}
