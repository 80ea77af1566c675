//! Gapless series in the replicated state: issuing, reserving and settling numbers, and the
//! ledger that keeps each one.
//!
//! A gapless tag's [`TagRecord::max_id`](crate::TagRecord) is the next number of its current
//! period, which its profile ([`StoredProfile::Gapless`]) records. [`apply_each`] applies the
//! asks of an [`Op::IssueNumbers`](crate::Op::IssueNumbers) entry in order, each as if alone:
//! - an issue or a reservation with a key the series has seen answers that key's number again
//!   (nothing changes); a new key gets the next number, final at once ([`NumberAct::Issue`]) or
//!   reserved until the entry's time plus its hold ([`NumberAct::Reserve`]);
//! - a reservation is settled once: confirmed by its caller before its deadline, or voided by
//!   its caller with a reason, or by the leader ([`NumberAct::Lapse`]) once its deadline has
//!   passed or, under `on_period_close: void`, once the series has moved past its period. A
//!   settled number keeps its place and is never issued again.
//!
//! The period switches to the leader's when that is later than the recorded one, and the
//! counter restarts at 1; it never goes back. So the numbers of a period are exactly 1..=N,
//! each once, on every node: that is the whole gapless argument, and it rests on the log alone.
//!
//! Layout:
//! - [`chain`]: the per-period hash chains over events, and the series' head.
//! - [`ledger`]: the numbers and the indexes rebuilt from them.
//! - [`limits`]: a series' limits as [`crate::Op::SetSeriesLimits`] sets them.
//! - [`lost`]: the numbers a restore voids as lost with the cluster.
//! - [`owners`]: who owns a number, and the owned asks' fields.
//! - this file: the asks and their rules, and retention ([`SeriesPolicy::retain_periods`]):
//!   after each change, a series keeps its newest periods, and an older one is dropped whole
//!   once none of its reservations is open.
//!
//! Owned numbers ([`crate::NumberRules::Owned`], what this release proposes): a number
//! belongs to the caller that took it. Only that caller repeats its issue or reservation (the
//! answer holds the number), and only it or a root caller (the admin token, an admin
//! certificate, a token-less loopback) confirms or voids it; anyone else is refused without a
//! word on the number's state. A caller without a token is known by its settlement secret,
//! whose hash ([`Proof`]) the number keeps. Owned asks also keep each series within its cap
//! ([`leaf_api::gapless::SeriesLimits`], set by [`crate::Op::SetSeriesLimits`]). The asks of
//! [`crate::Op::IssueNumbers`], which earlier releases logged, apply as they always did.
//!
//! The ledger is bounded by [`MAX_LEDGER_NUMBERS`] in all: an issue past it is refused, never
//! a number dropped.
pub mod chain;
pub mod ledger;
pub mod limits;
pub mod lost;
pub mod owners;

use std::sync::Arc;

use leaf_api::audit::Actor;
use leaf_api::gapless::{
    validate_hold, validate_key, validate_reason, NumberState, PeriodClose, SeriesPolicy, VoidCause,
};
use serde::{Deserialize, Serialize};

pub use self::chain::{chain_hash, heads_digest, ChainEvent, CHAIN_GENESIS};
pub use self::ledger::{Ledger, LedgerSlice, NumberRecord, Outcome, PeriodChain, SeriesLedger, Settled};
pub(crate) use self::limits::set_limits;
pub(crate) use self::owners::check_owned_asks;
use self::owners::{owns, settles_any};
pub use self::owners::{OwnedAsk, Proof};
use crate::apply::{invalid, Applied, ApplyError, ApplyResult, Changes};
use crate::command::NumberRules;
use crate::profile::StoredProfile;
use crate::state::State;

/// Most numbers the ledger holds across every series; an issue past it is refused.
pub const MAX_LEDGER_NUMBERS: usize = 1_000_000;

/// Most asks in one [`crate::Op::IssueNumbers`] entry: 256 asks with 128-byte tags and keys,
/// 1,024-byte reasons and the longest actors encode to under
/// [`crate::check::MAX_BATCH_COMMAND_BYTES`] (a test checks it).
pub const MAX_NUMBER_ASKS: usize = 256;

/// The reason a void by the leader at a reservation's deadline carries.
pub const EXPIRED_REASON: &str = "expired";
/// The reason a void by the leader at a period's close carries.
pub const PERIOD_CLOSED_REASON: &str = "period closed";

/// What an ask does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum NumberAct {
    /// The next number, final at once.
    Issue,
    /// The next number, reserved until the entry's time plus `hold_ms`.
    Reserve { hold_ms: u64 },
    /// The key's reservation made final, before its deadline.
    Confirm,
    /// The key's reservation voided by its caller.
    Void { reason: String },
    /// The leader's void of the key's reservation: its deadline is at or before the entry's
    /// time, or its period closed under `on_period_close: void`. Refused otherwise.
    Lapse,
}

/// One ask of an [`crate::Op::IssueNumbers`]: `act` on `tag`'s number for `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumberAsk {
    pub tag: String,
    pub key: String,
    pub actor: Actor,
    pub act: NumberAct,
}

/// How one ask applies ([`crate::NumberRules`]): as earlier releases did, or with its owner's
/// proof and series caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rules<'a> {
    Legacy,
    Owned { proof: Option<&'a Proof> },
}

/// A number as an ask answers it: its place, and its state after the ask.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    pub period: u32,
    pub number: u64,
    /// Leader time of the key's issue or reservation.
    pub at_ms: i64,
    pub state: NumberState,
    /// A reservation's deadline.
    pub deadline_ms: Option<i64>,
    /// A void's cause and reason.
    pub void: Option<(VoidCause, String)>,
    /// The ask changed nothing: the key had this number, in this state, already.
    pub replayed: bool,
}

impl Issued {
    fn of((period, number): (u32, u64), r: &NumberRecord, replayed: bool) -> Issued {
        Issued {
            period,
            number,
            at_ms: r.at_ms,
            state: r.state(),
            deadline_ms: r.deadline_ms,
            void: r.void().map(|(c, why)| (c, why.to_string())),
            replayed,
        }
    }
}

/// Applies the asks of a group in order, each as if alone: one that fails (an unknown tag,
/// one of another profile, a full ledger, a settled number) changes nothing and leaves the
/// others as they are.
pub(crate) fn apply_each(
    state: &mut State,
    at_ms: i64,
    asks: &[OwnedAsk],
    rules: NumberRules,
    changes: &mut Changes,
) -> ApplyResult {
    fn rules_of(rules: NumberRules, a: &OwnedAsk) -> Rules<'_> {
        match rules {
            NumberRules::Plain => Rules::Legacy,
            NumberRules::Owned => Rules::Owned { proof: a.proof.as_ref() },
        }
    }
    let results = asks.iter().map(|a| apply_retained(state, at_ms, &a.ask, rules_of(rules, a), changes)).collect();
    Ok(Applied::Numbers(results))
}

/// One ask, then the series' retention if it changed anything.
fn apply_retained(
    state: &mut State,
    at_ms: i64,
    ask: &NumberAsk,
    rules: Rules<'_>,
    changes: &mut Changes,
) -> Result<Issued, ApplyError> {
    crate::regions::homes::check_here(&state.regions, &ask.tag)?;
    let r = apply_one(state, at_ms, ask, rules, changes);
    if r.as_ref().is_ok_and(|i| !i.replayed) {
        retain(state, &ask.tag, changes);
    }
    r
}

fn apply_one(
    state: &mut State,
    at_ms: i64,
    ask: &NumberAsk,
    rules: Rules<'_>,
    changes: &mut Changes,
) -> Result<Issued, ApplyError> {
    let record = match state.tags.get(&ask.tag) {
        None => return Err(ApplyError::TagNotFound(ask.tag.clone())),
        Some(r) if r.archived_ms().is_some() => return Err(ApplyError::TagArchived(ask.tag.clone())),
        Some(r) => r,
    };
    let StoredProfile::Gapless { policy, period, .. } = record.profile() else {
        return Err(invalid(format!("tag {:?} is not gapless: it hands out IDs, not numbers", ask.tag)));
    };
    let (policy, current) = (policy.clone(), *period);
    let known = state.ledger.by_key(&ask.tag, &ask.key).map(|(at, r)| (at, r.clone()));
    // Another caller's number: refused before anything about it is looked at, so the refusal
    // says nothing of its state. A root caller may settle it, never repeat its issue.
    if let (Rules::Owned { proof }, Some((_, r))) = (rules, &known) {
        let settles = matches!(ask.act, NumberAct::Confirm | NumberAct::Void { .. }) && settles_any(&ask.actor);
        if !matches!(ask.act, NumberAct::Lapse) && !settles && !owns(r, &ask.actor, proof) {
            return Err(ApplyError::NumberConflict {
                tag: ask.tag.clone(),
                key: ask.key.clone(),
                why: "another caller took the key's number: only it repeats, confirms or voids it".into(),
            });
        }
    }
    match (&ask.act, known) {
        (NumberAct::Issue | NumberAct::Reserve { .. }, Some((at, r))) => Ok(Issued::of(at, &r, true)),
        (NumberAct::Issue, None) => new_number(state, at_ms, ask, None, rules, changes),
        (NumberAct::Reserve { hold_ms }, None) => {
            let deadline = at_ms.checked_add(*hold_ms as i64).ok_or_else(|| invalid("the deadline overflows"))?;
            new_number(state, at_ms, ask, Some(deadline), rules, changes)
        }
        (_, None) => Err(ApplyError::NumberNotFound { tag: ask.tag.clone(), key: ask.key.clone() }),
        (act, Some((at, r))) => settle(state, at_ms, ask, act, (at, r), (&policy, current), changes),
    }
}

/// A new number for `ask.key`: issued, or reserved until `deadline`.
fn new_number(
    state: &mut State,
    at_ms: i64,
    ask: &NumberAsk,
    deadline_ms: Option<i64>,
    rules: Rules<'_>,
    changes: &mut Changes,
) -> Result<Issued, ApplyError> {
    if state.ledger.len >= MAX_LEDGER_NUMBERS {
        return Err(ApplyError::LedgerFull { max_numbers: MAX_LEDGER_NUMBERS as u64 });
    }
    let proof = match rules {
        Rules::Legacy => None,
        Rules::Owned { proof } => {
            let max_numbers = state.ledger.limits_of(&ask.tag).max_numbers;
            let held = state.ledger.series.get(&ask.tag).map_or(0, |s| s.numbers.len() as u64);
            if held >= max_numbers {
                return Err(ApplyError::SeriesFull { tag: ask.tag.clone(), max_numbers });
            }
            proof.copied()
        }
    };
    let record = state.tags.get_mut(&ask.tag).ok_or_else(|| ApplyError::TagNotFound(ask.tag.clone()))?;
    let StoredProfile::Gapless { policy, period, pruned_through } = record.profile().clone() else {
        return Err(invalid(format!("tag {:?} is not gapless", ask.tag)));
    };
    let now = policy.period_at(at_ms).ok_or_else(|| invalid(format!("no calendar period at {at_ms} ms")))?;
    let (period, next) = if now > period { (now, 1) } else { (period, record.max_id) };
    let number = u64::try_from(next).map_err(|_| invalid(format!("series {:?} counts from 1", ask.tag)))?;
    if next == i64::MAX {
        return Err(ApplyError::TagExhausted { tag: ask.tag.clone(), max_id: next, step: 1 });
    }
    record.set_profile(StoredProfile::Gapless { policy, period, pruned_through });
    record.max_id = next + 1;
    changes.tag(&ask.tag);
    let (seq, prev) = state.ledger.series.get(&ask.tag).map_or((1, CHAIN_GENESIS), |s| s.next_event(period));
    let event = match deadline_ms {
        None => ChainEvent::Issue { key: &ask.key, actor: &ask.actor, at_ms },
        Some(deadline_ms) => ChainEvent::Reserve { key: &ask.key, actor: &ask.actor, at_ms, deadline_ms },
    };
    let hash = chain_hash(&prev, &ask.tag, (period, number), seq, &event);
    let key: Arc<str> = Arc::from(ask.key.as_str());
    let entry = NumberRecord { key, actor: ask.actor.clone(), at_ms, deadline_ms, seq, hash, settled: None, proof };
    let answer = Issued::of((period, number), &entry, false);
    state.ledger.insert(&ask.tag, (period, number), entry);
    changes.numbers.insert((ask.tag.clone(), period, number));
    Ok(answer)
}

/// A confirm, a void or a lapse of the key's number `r`, at `at` of a series of `policy` now
/// in period `current`.
fn settle(
    state: &mut State,
    at_ms: i64,
    ask: &NumberAsk,
    act: &NumberAct,
    (at, mut r): ((u32, u64), NumberRecord),
    (policy, current): (&SeriesPolicy, u32),
    changes: &mut Changes,
) -> Result<Issued, ApplyError> {
    let conflict = |why: String| ApplyError::NumberConflict { tag: ask.tag.clone(), key: ask.key.clone(), why };
    let state_now = r.state();
    let outcome = match (act, state_now) {
        (NumberAct::Confirm, NumberState::Issued | NumberState::Confirmed) => return Ok(Issued::of(at, &r, true)),
        (NumberAct::Void { .. } | NumberAct::Lapse, NumberState::Voided) => return Ok(Issued::of(at, &r, true)),
        (NumberAct::Lapse, NumberState::Issued | NumberState::Confirmed) => return Ok(Issued::of(at, &r, true)),
        (NumberAct::Confirm, NumberState::Voided) => {
            return Err(conflict(format!("number {} of period {} is voided: it cannot be confirmed", at.1, at.0)))
        }
        (NumberAct::Void { .. }, NumberState::Issued | NumberState::Confirmed) => {
            return Err(conflict(format!("number {} of period {} is final: it cannot be voided", at.1, at.0)))
        }
        (NumberAct::Confirm, _) => {
            let deadline = r.deadline_ms.unwrap_or(i64::MAX);
            if at_ms > deadline {
                return Err(conflict(format!(
                    "the reservation of number {} of period {} expired at {deadline} ms: it is voided, not confirmed",
                    at.1, at.0
                )));
            }
            if policy.on_period_close == PeriodClose::Void && at.0 < current {
                return Err(conflict(format!(
                    "period {} closed with number {} reserved, and the series voids those (on_period_close: void)",
                    at.0, at.1
                )));
            }
            Outcome::Confirmed
        }
        (NumberAct::Void { reason }, _) => {
            Outcome::Voided { cause: VoidCause::Caller, reason: Arc::from(reason.as_str()) }
        }
        (NumberAct::Lapse, _) => {
            if r.deadline_ms.is_some_and(|d| d <= at_ms) {
                Outcome::Voided { cause: VoidCause::Expired, reason: Arc::from(EXPIRED_REASON) }
            } else if policy.on_period_close == PeriodClose::Void && at.0 < current {
                Outcome::Voided { cause: VoidCause::PeriodClosed, reason: Arc::from(PERIOD_CLOSED_REASON) }
            } else {
                return Err(conflict(format!("the reservation of number {} of period {} is not due", at.1, at.0)));
            }
        }
        // A known key's issue or reservation is a replay (`apply_one` answers it before here).
        (NumberAct::Issue | NumberAct::Reserve { .. }, _) => return Ok(Issued::of(at, &r, true)),
    };
    let (seq, prev) = state.ledger.series.get(&ask.tag).map_or((1, CHAIN_GENESIS), |s| s.next_event(at.0));
    let event = match &outcome {
        Outcome::Confirmed => ChainEvent::Confirm { actor: &ask.actor, at_ms },
        Outcome::Voided { cause, reason } => ChainEvent::Void { actor: &ask.actor, at_ms, cause: *cause, reason },
    };
    let hash = chain_hash(&prev, &ask.tag, at, seq, &event);
    r.settled = Some(Settled { outcome, actor: ask.actor.clone(), at_ms, seq, hash });
    let answer = Issued::of(at, &r, false);
    state.ledger.insert(&ask.tag, at, r);
    changes.numbers.insert((ask.tag.clone(), at.0, at.1));
    Ok(answer)
}

/// Drops `tag`'s periods beyond its retention that have no open reservation.
fn retain(state: &mut State, tag: &str, changes: &mut Changes) {
    let Some(record) = state.tags.get_mut(tag) else { return };
    let StoredProfile::Gapless { policy, period, pruned_through } = record.profile().clone() else { return };
    let Some(keep) = policy.retain_periods else { return };
    let Some(series) = state.ledger.series.get(tag) else { return };
    let drop: Vec<u32> =
        series.periods.iter().rev().skip(keep as usize).filter(|(_, c)| c.open == 0).map(|(p, _)| *p).collect();
    if drop.is_empty() {
        return;
    }
    let through = drop.iter().copied().max().max(pruned_through);
    record.set_profile(StoredProfile::Gapless { policy, period, pruned_through: through });
    changes.tag(tag);
    for p in drop {
        for n in state.ledger.drop_period(tag, p) {
            changes.numbers.insert((tag.to_string(), p, n));
        }
    }
}

/// Checks the fields of the asks of a group without the state.
pub(crate) fn check_asks(asks: &[OwnedAsk]) -> Result<(), ApplyError> {
    if asks.is_empty() || asks.len() > MAX_NUMBER_ASKS {
        return Err(invalid(format!("a group holds 1 to {MAX_NUMBER_ASKS} asks, not {}", asks.len())));
    }
    if asks.iter().any(|a| a.proof.is_some()) {
        return Err(invalid("plain gapless asks carry no proof of ownership"));
    }
    asks.iter().try_for_each(|a| check_ask(&a.ask))
}

/// Checks one ask's fields.
pub(crate) fn check_ask(a: &NumberAsk) -> Result<(), ApplyError> {
    leaf_api::tag::validate_tag(&a.tag)?;
    validate_key(&a.key).map_err(|e| invalid(e.to_string()))?;
    if !a.actor.is_bounded() {
        return Err(invalid("an ask's actor is out of bounds"));
    }
    match &a.act {
        NumberAct::Reserve { hold_ms } => {
            if hold_ms % 1000 != 0 {
                return Err(invalid("a hold is whole seconds"));
            }
            validate_hold(hold_ms / 1000).map_err(|e| invalid(e.to_string()))
        }
        NumberAct::Void { reason } => validate_reason(reason).map_err(|e| invalid(e.to_string())),
        NumberAct::Issue | NumberAct::Confirm | NumberAct::Lapse => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::inconsistent_digit_grouping)]
mod tests {
    use leaf_api::gapless::{Reset, SeriesPolicy};

    use super::*;
    use crate::command::{Command, Op};

    const NOV28_2026_UTC: i64 = 1_795_824_000_000;
    const JAN1_2027_UTC: i64 = 1_798_761_600_000;
    const HOUR: i64 = 3_600_000;

    fn gapless_with(tag: &str, policy: SeriesPolicy) -> Command {
        crate::testing::create_series(tag, policy, NOV28_2026_UTC)
    }

    fn gapless(tag: &str, reset: Reset) -> Command {
        gapless_with(tag, SeriesPolicy { reset, format: Some("INV-{seq}".into()), ..Default::default() })
    }

    fn ask_to(tag: &str, key: &str, act: NumberAct) -> NumberAsk {
        NumberAsk { tag: tag.into(), key: key.into(), actor: Actor::Unattributed, act }
    }

    fn ask(tag: &str, key: &str) -> NumberAsk {
        ask_to(tag, key, NumberAct::Issue)
    }

    fn reserve(key: &str, hours: i64) -> NumberAsk {
        ask_to("inv", key, NumberAct::Reserve { hold_ms: (hours * HOUR) as u64 })
    }

    fn issue_at(s: &mut State, at_ms: i64, asks: Vec<NumberAsk>) -> Vec<Result<Issued, ApplyError>> {
        match crate::apply::apply(s, &Command { at_ms, op: Op::plain_numbers(asks) }, &mut Changes::default()) {
            Ok(Applied::Numbers(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    fn numbers(r: &[Result<Issued, ApplyError>]) -> Vec<(u32, u64, bool)> {
        r.iter().map(|i| i.as_ref().map(|i| (i.period, i.number, i.replayed)).unwrap()).collect()
    }

    fn states(r: &[Result<Issued, ApplyError>]) -> Vec<Result<(u64, NumberState, bool), String>> {
        r.iter().map(|i| i.as_ref().map(|i| (i.number, i.state, i.replayed)).map_err(|e| e.to_string())).collect()
    }

    /// Recomputes every period's chain from the records, as an auditor would, and checks the
    /// series' head.
    fn assert_chains_hold(s: &State, tag: &str) {
        let series = &s.ledger.series[tag];
        type Event<'a> = (u64, (u32, u64), ChainEvent<'a>, [u8; 32]);
        let mut events: std::collections::BTreeMap<u32, Vec<Event>> = Default::default();
        for (at, r) in &series.numbers {
            events.entry(at.0).or_default().push((r.seq, *at, r.created_event(), r.hash));
            if let Some((seq, e, h)) = r.settled_event() {
                events.entry(at.0).or_default().push((seq, *at, e, h));
            }
        }
        let mut heads = Vec::new();
        for (period, mut list) in events {
            list.sort_by_key(|e| e.0);
            let mut prev = CHAIN_GENESIS;
            for (i, (seq, at, e, h)) in list.iter().enumerate() {
                assert_eq!(*seq, i as u64 + 1, "period {period}: events numbered 1..");
                assert_eq!(chain_hash(&prev, tag, *at, *seq, e), *h, "period {period} event {seq}");
                prev = *h;
            }
            heads.push((period, list.len() as u64, prev));
        }
        assert_eq!(heads_digest(heads), s.ledger.head(tag));
    }

    #[test]
    fn each_key_gets_the_next_number_once() {
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        let r = issue_at(&mut s, NOV28_2026_UTC, vec![ask("inv", "a"), ask("inv", "b"), ask("inv", "a")]);
        assert_eq!(numbers(&r), [(0, 1, false), (0, 2, false), (0, 1, true)]);
        let r = issue_at(&mut s, NOV28_2026_UTC + 1, vec![ask("inv", "b"), ask("inv", "c")]);
        assert_eq!(numbers(&r), [(0, 2, true), (0, 3, false)]);
        assert_eq!(r[0].as_ref().unwrap().at_ms, NOV28_2026_UTC, "a replay answers the first issue's time");
        assert_eq!(s.tags["inv"].max_id, 4);
        assert_eq!(s.ledger.len, 3);
        let ledger = &s.ledger.series["inv"];
        let keys: Vec<&str> = ledger.numbers.values().map(|r| &*r.key).collect();
        assert_eq!(keys, ["a", "b", "c"]);
        assert_chains_hold(&s, "inv");
    }

    #[test]
    fn a_yearly_series_restarts_at_one_and_never_goes_back() {
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Year), &mut Changes::default()).unwrap();
        let r = issue_at(&mut s, NOV28_2026_UTC, vec![ask("inv", "a"), ask("inv", "b")]);
        assert_eq!(numbers(&r), [(2026, 1, false), (2026, 2, false)]);
        let r = issue_at(&mut s, JAN1_2027_UTC, vec![ask("inv", "c")]);
        assert_eq!(numbers(&r), [(2027, 1, false)]);
        // A leader whose clock is still in 2026 numbers in 2027.
        let r = issue_at(&mut s, JAN1_2027_UTC - 1, vec![ask("inv", "d"), ask("inv", "a")]);
        assert_eq!(numbers(&r), [(2027, 2, false), (2026, 1, true)]);
        assert_chains_hold(&s, "inv");
    }

    #[test]
    fn a_reservation_is_settled_once() {
        use NumberState::*;
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        let t = NOV28_2026_UTC;
        let r = issue_at(&mut s, t, vec![reserve("a", 1), reserve("b", 1), ask("inv", "c"), reserve("a", 5)]);
        assert_eq!(
            states(&r),
            [Ok((1, Reserved, false)), Ok((2, Reserved, false)), Ok((3, Issued, false)), Ok((1, Reserved, true))]
        );
        assert_eq!(r[0].as_ref().unwrap().deadline_ms, Some(t + HOUR), "a replay keeps the first hold");
        let void = |key: &str, why: &str| ask_to("inv", key, NumberAct::Void { reason: why.into() });
        let confirm = |key: &str| ask_to("inv", key, NumberAct::Confirm);
        let r = issue_at(
            &mut s,
            t + 1,
            vec![confirm("a"), confirm("a"), void("a", "x"), void("b", "typo"), void("b", "other"), confirm("b")],
        );
        let st = states(&r);
        assert_eq!(st[0], Ok((1, Confirmed, false)));
        assert_eq!(st[1], Ok((1, Confirmed, true)));
        assert!(st[2].as_ref().is_err_and(|e| e.contains("final")), "{st:?}");
        assert_eq!(st[3], Ok((2, Voided, false)));
        assert_eq!(st[4], Ok((2, Voided, true)));
        assert_eq!(r[4].as_ref().unwrap().void, Some((VoidCause::Caller, "typo".into())), "the first reason stays");
        assert!(st[5].as_ref().is_err_and(|e| e.contains("voided")), "{st:?}");
        // An issued number is final: a confirm answers it, a void is refused; an unknown key is 404.
        let r = issue_at(&mut s, t + 2, vec![confirm("c"), void("c", "x"), confirm("zz")]);
        assert_eq!(states(&r)[0], Ok((3, Issued, true)));
        assert!(matches!(r[1], Err(ApplyError::NumberConflict { .. })));
        assert!(matches!(r[2], Err(ApplyError::NumberNotFound { .. })));
        assert_eq!(s.ledger.series["inv"].open(), 0);
        assert!(s.ledger.open.is_empty());
        assert_chains_hold(&s, "inv");
    }

    #[test]
    fn the_leader_voids_a_reservation_only_when_due() {
        use NumberState::*;
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        let t = NOV28_2026_UTC;
        issue_at(&mut s, t, vec![reserve("a", 1), reserve("b", 2)]);
        let lapse = |key: &str| NumberAsk {
            tag: "inv".into(),
            key: key.into(),
            actor: Actor::Node { id: 1 },
            act: NumberAct::Lapse,
        };
        let r = issue_at(&mut s, t + HOUR - 1, vec![lapse("a")]);
        assert!(states(&r)[0].as_ref().is_err_and(|e| e.contains("not due")));
        // Past its deadline a confirm is refused and the leader's lapse voids it.
        let r = issue_at(&mut s, t + HOUR + 1, vec![ask_to("inv", "a", NumberAct::Confirm), lapse("a"), lapse("a")]);
        let st = states(&r);
        assert!(st[0].as_ref().is_err_and(|e| e.contains("expired")), "{st:?}");
        assert_eq!((st[1].clone(), st[2].clone()), (Ok((1, Voided, false)), Ok((1, Voided, true))));
        assert_eq!(r[1].as_ref().unwrap().void, Some((VoidCause::Expired, EXPIRED_REASON.into())));
        let (due, open) = (s.ledger.open.len(), s.ledger.series["inv"].open());
        assert_eq!((due, open), (1, 1));
        assert_chains_hold(&s, "inv");
    }

    #[test]
    fn a_closed_period_voids_or_waits_by_policy() {
        for close in [PeriodClose::Wait, PeriodClose::Void] {
            let mut s = State::default();
            let policy = SeriesPolicy { reset: Reset::Year, on_period_close: close, ..Default::default() };
            crate::apply::apply(&mut s, &gapless_with("inv", policy), &mut Changes::default()).unwrap();
            issue_at(&mut s, JAN1_2027_UTC - 240 * HOUR, vec![reserve("a", 24 * 30)]);
            let lapse =
                NumberAsk { tag: "inv".into(), key: "a".into(), actor: Actor::Node { id: 2 }, act: NumberAct::Lapse };
            assert!(issue_at(&mut s, JAN1_2027_UTC - 1, vec![lapse.clone()])[0].is_err(), "2026 is still open");
            issue_at(&mut s, JAN1_2027_UTC, vec![ask("inv", "b")]);
            // A confirm of the closed year's reservation: refused where the series voids them.
            let confirm = issue_at(&mut s, JAN1_2027_UTC + 1, vec![ask_to("inv", "a", NumberAct::Confirm)]);
            assert_eq!(confirm[0].is_err(), close == PeriodClose::Void, "{close:?}: {confirm:?}");
            if close == PeriodClose::Wait {
                continue;
            }
            let r = issue_at(&mut s, JAN1_2027_UTC + 1, vec![lapse]);
            match close {
                PeriodClose::Wait => assert!(r[0].is_err(), "{r:?}"),
                PeriodClose::Void => {
                    let i = r[0].as_ref().unwrap();
                    assert_eq!((i.period, i.state), (2026, NumberState::Voided));
                    assert_eq!(i.void, Some((VoidCause::PeriodClosed, PERIOD_CLOSED_REASON.into())));
                }
            }
            assert_chains_hold(&s, "inv");
        }
    }

    #[test]
    fn retention_drops_old_settled_periods_whole() {
        let mut s = State::default();
        let policy = SeriesPolicy { reset: Reset::Day, retain_periods: Some(2), ..Default::default() };
        crate::apply::apply(&mut s, &gapless_with("inv", policy), &mut Changes::default()).unwrap();
        let day = 24 * HOUR;
        let t = NOV28_2026_UTC;
        issue_at(&mut s, t, vec![ask("inv", "d1-a"), ask("inv", "d1-b")]);
        issue_at(&mut s, t + day, vec![reserve("d2-open", 72)]);
        issue_at(&mut s, t + 2 * day, vec![ask("inv", "d3")]);
        // Day 1 is beyond the two kept and settled: dropped. Day 2 holds an open reservation.
        let periods: Vec<u32> = s.ledger.series["inv"].periods.keys().copied().collect();
        assert_eq!(periods, [2026_11_29, 2026_11_30]);
        issue_at(&mut s, t + 3 * day, vec![ask("inv", "d4")]);
        let periods: Vec<u32> = s.ledger.series["inv"].periods.keys().copied().collect();
        assert_eq!(periods, [2026_11_29, 2026_11_30, 2026_12_01], "a period with an open reservation waits");
        let mut c = Changes::default();
        let cmd = Command {
            at_ms: t + 3 * day + 1,
            op: Op::plain_numbers(vec![ask_to("inv", "d2-open", NumberAct::Void { reason: "late".into() })]),
        };
        crate::apply::apply(&mut s, &cmd, &mut c).unwrap();
        let periods: Vec<u32> = s.ledger.series["inv"].periods.keys().copied().collect();
        assert_eq!(periods, [2026_11_30, 2026_12_01]);
        assert!(c.numbers.contains(&("inv".to_string(), 2026_11_29, 1)), "the drop is checkpointed: {c:?}");
        let StoredProfile::Gapless { pruned_through, .. } = s.tags["inv"].profile() else { panic!() };
        assert_eq!(*pruned_through, Some(2026_11_29));
        assert_eq!(s.ledger.len, 2);
        assert!(!s.ledger.series["inv"].keys.contains_key("d1-a"));
        assert_chains_hold(&s, "inv");
    }

    #[test]
    fn refusals_change_nothing() {
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        crate::apply::apply(&mut s, &crate::testing::create("seg", 10, 1), &mut Changes::default()).unwrap();
        let before = s.clone();
        let mut c = Changes::default();
        let asks = vec![ask("nope", "a"), ask("seg", "a"), ask_to("inv", "a", NumberAct::Confirm)];
        let cmd = Command { at_ms: 1, op: Op::plain_numbers(asks) };
        let r = crate::apply::apply(&mut s, &cmd, &mut c).unwrap();
        let Applied::Numbers(r) = r else { panic!() };
        assert_eq!(r[0], Err(ApplyError::TagNotFound("nope".into())));
        assert!(matches!(&r[1], Err(ApplyError::Invalid(m)) if m.contains("not gapless")), "{r:?}");
        assert!(matches!(&r[2], Err(ApplyError::NumberNotFound { .. })), "{r:?}");
        assert_eq!((s, c), (before, Changes::default()));
        // A segment allocation of a gapless tag is refused: it would leave a gap.
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        assert!(crate::apply::apply(&mut s, &crate::testing::alloc("inv", 10), &mut Changes::default()).is_err());
        // Fields are checked before the state.
        let void = |why: &str| ask_to("inv", "k", NumberAct::Void { reason: why.into() });
        let hold = |ms: u64| ask_to("inv", "k", NumberAct::Reserve { hold_ms: ms });
        for bad in [
            vec![],
            vec![ask("inv", "")],
            vec![ask("in v", "a")],
            vec![ask("inv", "k"); MAX_NUMBER_ASKS + 1],
            vec![void("")],
            vec![void("a\u{7}b")],
            vec![hold(0)],
            vec![hold(1500)],
            vec![hold((leaf_api::gapless::MAX_HOLD_SECONDS + 1) * 1000)],
        ] {
            let cmd = Command { at_ms: 1, op: Op::plain_numbers(bad) };
            assert!(matches!(crate::apply::apply(&mut s, &cmd, &mut Changes::default()), Err(ApplyError::Invalid(_))));
        }
    }

    #[test]
    fn a_group_of_the_largest_asks_fits_a_command() {
        let actor =
            Actor::Token { id: leaf_api::tokens::TokenId(u64::MAX), name: "n".repeat(leaf_api::audit::MAX_ACTOR_NAME) };
        // Four bytes a character, the most UTF-8 takes.
        let reason = "𝄞".repeat(leaf_api::gapless::MAX_REASON_CHARS);
        assert!(validate_reason(&reason).is_ok() && reason.len() == leaf_api::gapless::MAX_REASON_BYTES);
        let ask = NumberAsk { tag: "t".repeat(128), key: "k".repeat(128), actor, act: NumberAct::Void { reason } };
        let cmd = Command { at_ms: i64::MAX, op: Op::plain_numbers(vec![ask; MAX_NUMBER_ASKS]) };
        crate::check::check_command(&cmd).unwrap();
    }

    #[test]
    fn changes_name_the_tag_and_each_new_number() {
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        let mut c = Changes::default();
        let cmd = Command { at_ms: 1, op: Op::plain_numbers(vec![ask("inv", "a"), ask("inv", "b")]) };
        crate::apply::apply(&mut s, &cmd, &mut c).unwrap();
        assert_eq!(c.tags, ["inv".to_string()].into());
        assert_eq!(c.numbers, [("inv".to_string(), 0, 1), ("inv".to_string(), 0, 2)].into());
        let mut c = Changes::default();
        let cmd = Command { at_ms: 2, op: Op::plain_numbers(vec![ask("inv", "a")]) };
        crate::apply::apply(&mut s, &cmd, &mut c).unwrap();
        assert!(c.is_empty(), "a replay writes nothing: {c:?}");
    }
}
