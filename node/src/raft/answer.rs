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
//! asked for, then `take`.
use leaf_api::tag::{validate_max_id, validate_step, validate_tag};
use leaf_api::types::MembershipChange;
use leaf_raft_store::{Allocation, Applied, ApplyError, Issued, NewTag, NumberAct, NumberAsk, Op, TagRecord};

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

/// One result per ask, in order, each [`check_issued`].
fn check_numbers<'a>(
    asks: impl ExactSizeIterator<Item = &'a NumberAsk>,
    results: &[Result<Issued, ApplyError>],
) -> Result<(), AnswerError> {
    if results.len() != asks.len() {
        return Err(invalid(format!("{} issues answered with {} numbers", asks.len(), results.len())));
    }
    asks.zip(results).filter_map(|(a, r)| r.as_ref().ok().map(|i| (a, i))).try_for_each(check_issued)
}

/// A gapless number: from 1, in a period that is 0 or a date (`yyyy`, `yyyyMM`, `yyyyMMdd`),
/// in a state that agrees with its fields and with what the ask did when it changed something.
fn check_issued((ask, i): (&NumberAsk, &Issued)) -> Result<(), AnswerError> {
    use leaf_api::gapless::{NumberState, MAX_REASON_BYTES};
    if i.number == 0 || i.number > i64::MAX as u64 {
        return Err(invalid(format!("gapless number {} is outside 1..2^63", i.number)));
    }
    if !leaf_api::gapless::is_any_period(i.period) {
        return Err(invalid(format!("gapless period {} is not a date", i.period)));
    }
    let consistent = match i.state {
        NumberState::Issued => i.deadline_ms.is_none() && i.void.is_none(),
        NumberState::Reserved | NumberState::Confirmed => i.deadline_ms.is_some() && i.void.is_none(),
        NumberState::Voided => {
            i.deadline_ms.is_some() && i.void.as_ref().is_some_and(|(_, r)| r.len() <= MAX_REASON_BYTES)
        }
    };
    let as_asked = i.replayed
        || matches!(
            (&ask.act, i.state),
            (NumberAct::Issue, NumberState::Issued)
                | (NumberAct::Reserve { .. }, NumberState::Reserved)
                | (NumberAct::Confirm, NumberState::Confirmed)
                | (NumberAct::Void { .. } | NumberAct::Lapse, NumberState::Voided)
        );
    if !consistent || !as_asked {
        return Err(invalid(format!("gapless number {} answered {:?} to {:?}", i.number, i.state, ask.act)));
    }
    Ok(())
}

pub(crate) fn wrong_kind<T: Answer>(applied: &Applied) -> AnswerError {
    AnswerError::WrongKind { asked: T::ASKED, got: applied.kind() }
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

impl Answer for Vec<Result<Issued, ApplyError>> {
    const ASKED: &'static str = "an issue of gapless numbers";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::IssueNumbers { asks, .. }, Applied::Numbers(results)) => {
                check_numbers(asks.iter().map(|a| &a.ask), results)
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Numbers(results) => Ok(results),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
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

impl Answer for leaf_api::gapless::SeriesLimits {
    const ASKED: &'static str = "a series' limits";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::SetSeriesLimits { limits, .. }, Applied::Limits(got)) => {
                if got != limits {
                    return Err(invalid(format!("limits answered {got:?}, asked for {limits:?}")));
                }
                Ok(())
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Limits(l) => Ok(l),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

/// What a batch of tag creations did: the names created and those that existed, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreatedTags {
    pub created: Vec<String>,
    pub existing: Vec<String>,
}

impl Answer for CreatedTags {
    const ASKED: &'static str = "a batch of tag creations";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::CreateTags { tags }, Applied::Tags { created, existing }) => {
                // Every name asked for, each once, as created or existing: nothing else.
                let asked: std::collections::BTreeSet<&str> = tags.iter().map(|t| t.tag.as_str()).collect();
                let mut seen = std::collections::BTreeSet::new();
                for name in created.iter().chain(existing) {
                    if !asked.contains(name.as_str()) || !seen.insert(name.as_str()) {
                        return Err(invalid(format!("batch answered tag {name:?} it did not ask for, or twice")));
                    }
                }
                if seen.len() != asked.len() {
                    return Err(invalid(format!("batch of {} tags answered for {}", asked.len(), seen.len())));
                }
                Ok(())
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Tags { created, existing } => Ok(CreatedTags { created, existing }),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

impl Answer for () {
    const ASKED: &'static str = "a membership note";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::NoteMembership(_), Applied::Nothing) => Ok(()),
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Nothing => Ok(()),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

impl Answer for TagRecord {
    const ASKED: &'static str = "a tag creation or update";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (
                Op::CreateTag { tag: NewTag { tag, .. }, .. }
                | Op::UpdateTag { tag, .. }
                | Op::ArchiveTag { tag }
                | Op::RestoreTag { tag },
                Applied::Tag { tag: got, record },
            ) => {
                if got != tag {
                    return Err(invalid(format!("result for tag {got:?}, asked for {tag:?}")));
                }
                validate_tag(got).map_err(|e| invalid(e.to_string()))?;
                validate_step(record.step).map_err(|e| invalid(e.to_string()))?;
                validate_max_id(record.max_id).map_err(|e| invalid(e.to_string()))
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Tag { record, .. } => Ok(record),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leaf_raft_store::WorkerGrant;

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
    fn tags_must_match_the_request() {
        let grant = |worker_id, lease_expires_ms| {
            Applied::Worker(WorkerGrant { worker_id, not_before_ms: 0, lease_expires_ms })
        };
        let record = TagRecord::plain(1, 10, 0, 0);
        let create = Op::create_segment_tag("a".into(), 10, 1, String::new());
        let tag = |t: &str, record: TagRecord| Applied::Tag { tag: t.into(), record };
        assert!(TagRecord::check(&create, &tag("a", record.clone())).is_ok());
        assert!(TagRecord::check(&create, &tag("b", record.clone())).is_err());
        assert!(TagRecord::check(&create, &tag("a", TagRecord::plain(-1, 10, 0, 0))).is_err());
        assert!(TagRecord::check(&create, &tag("a", TagRecord::plain(1, 0, 0, 0))).is_err());
        assert!(matches!(TagRecord::check(&create, &grant(3, 1)), Err(AnswerError::WrongKind { .. })));
        let update = Op::UpdateTag { tag: "a".into(), step: Some(20), description: None };
        assert!(TagRecord::check(&update, &tag("a", record)).is_ok());
        assert!(matches!(TagRecord::check(&update, &segment(0, 20)), Err(AnswerError::WrongKind { .. })));
    }

    #[test]
    fn memberships_must_have_voters() {
        assert!(check_membership(&MembershipChange { log_index: 1, voters: vec![1], learners: vec![4] }).is_ok());
        let none = MembershipChange { log_index: 1, voters: vec![], learners: vec![4] };
        assert!(matches!(check_membership(&none), Err(AnswerError::Invalid(_))));
    }

    #[test]
    fn each_caller_gets_its_own_kind_of_result_or_a_typed_error() {
        let a = Allocation { start: 0, end: 10, stored_step: 10 };
        let g = WorkerGrant { worker_id: 2, not_before_ms: 5, lease_expires_ms: 60_000 };
        let r = TagRecord::plain(1, 10, 1, 2).with_description("d".into());
        assert_eq!(Allocation::take(Applied::Segment(a)), Ok(a));
        assert_eq!(WorkerGrant::take(Applied::Worker(g)), Ok(g));
        assert_eq!(TagRecord::take(Applied::Tag { tag: "t".into(), record: r.clone() }), Ok(r.clone()));
        assert_eq!(
            Allocation::take(Applied::Worker(g)),
            Err(AnswerError::WrongKind { asked: "a segment allocation", got: "a worker grant" })
        );
        assert_eq!(
            WorkerGrant::take(Applied::Tag { tag: "t".into(), record: r }),
            Err(AnswerError::WrongKind { asked: "a worker registration or renewal", got: "a tag" })
        );
        assert_eq!(
            TagRecord::take(Applied::Nothing),
            Err(AnswerError::WrongKind { asked: "a tag creation or update", got: "no result" })
        );
    }
}
