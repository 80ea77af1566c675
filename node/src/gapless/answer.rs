//! The check of the leader's answer to an issue of gapless numbers ([`crate::raft::answer`]):
//! one result per ask, in order, each a number consistent with what its ask did; and to a
//! series' limits.
use leaf_raft_store::{Applied, ApplyError, Issued, NumberAct, NumberAsk, Op};

use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};

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
