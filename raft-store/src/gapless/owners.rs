//! Who owns a gapless number ([`crate::NumberRules::Owned`]): the caller that took it, known
//! by its token, its root credential, or (without a token) the hash of its settlement secret
//! ([`Proof`]). `apply` refuses another caller's repeat, confirm or void before it looks at the
//! number, so the refusal tells nothing of its state; a root caller may settle any number.
use leaf_api::audit::Actor;
use serde::{Deserialize, Serialize};

use super::{check_ask, NumberAsk, NumberRecord, MAX_NUMBER_ASKS};
use crate::apply::{invalid, ApplyError};

/// SHA-256 of a settlement secret: what an anonymous caller's number keeps to know its owner.
pub type Proof = [u8; 32];

/// One ask of an [`crate::Op::IssueNumbers`]: a [`NumberAsk`] that keeps numbers owned,
/// with the proof of a caller without a token (present exactly when the actor is
/// [`Actor::Unattributed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OwnedAsk {
    pub ask: NumberAsk,
    pub proof: Option<Proof>,
}

/// Whether `actor` may settle any number: the root callers.
pub(super) fn settles_any(actor: &Actor) -> bool {
    matches!(actor, Actor::AdminToken | Actor::ClientCert { .. } | Actor::Loopback)
}

/// Whether the caller of an owned ask is the one that took `r`: the same token, the same root
/// credential, or, without a token, the same settlement secret. A number an earlier release
/// issued without a token has no proof, so no caller without a token owns it.
pub(super) fn owns(r: &NumberRecord, actor: &Actor, proof: Option<&Proof>) -> bool {
    match (&r.actor, actor) {
        (Actor::Unattributed, Actor::Unattributed) => match (&r.proof, proof) {
            (Some(kept), Some(given)) => bool::from(subtle::ConstantTimeEq::ct_eq(&kept[..], &given[..])),
            _ => false,
        },
        (Actor::Token { id: a, .. }, Actor::Token { id: b, .. }) => a == b,
        (a, b) => a == b,
    }
}

/// Checks the fields of the owned asks of a group without the state: those of
/// [`check_asks`], and a proof exactly for a caller without a token.
pub(crate) fn check_owned_asks(asks: &[OwnedAsk]) -> Result<(), ApplyError> {
    if asks.is_empty() || asks.len() > MAX_NUMBER_ASKS {
        return Err(invalid(format!("a group holds 1 to {MAX_NUMBER_ASKS} asks, not {}", asks.len())));
    }
    for a in asks {
        check_ask(&a.ask)?;
        if (a.ask.actor == Actor::Unattributed) != a.proof.is_some() {
            return Err(invalid("an ask carries a proof exactly when its caller has no token"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use leaf_api::gapless::{NumberState, SeriesLimits, SeriesPolicy};
    use leaf_api::tokens::TokenId;

    use super::*;
    use crate::apply::{apply, Applied, Changes};
    use crate::command::{Command, Op};
    use crate::gapless::{Issued, NumberAct};
    use crate::state::State;

    const HOUR: u64 = 3_600_000;

    fn series(s: &mut State, tag: &str) {
        apply(s, &crate::testing::create_series(tag, SeriesPolicy::default(), 1), &mut Changes::default()).unwrap();
    }

    fn token(id: u64) -> Actor {
        Actor::Token { id: TokenId(id), name: format!("t{id}") }
    }

    /// An owned ask of `key` in `inv` by `actor`, with `proof` for a caller without a token.
    fn owned(actor: Actor, proof: Option<u8>, key: &str, act: NumberAct) -> OwnedAsk {
        OwnedAsk { ask: NumberAsk { tag: "inv".into(), key: key.into(), actor, act }, proof: proof.map(|p| [p; 32]) }
    }

    fn run(s: &mut State, at_ms: i64, asks: Vec<OwnedAsk>) -> Vec<Result<Issued, ApplyError>> {
        match apply(
            s,
            &Command { at_ms, op: Op::IssueNumbers { asks, rules: crate::NumberRules::Owned } },
            &mut Changes::default(),
        ) {
            Ok(Applied::Numbers(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    fn one(s: &mut State, ask: OwnedAsk) -> Result<Issued, ApplyError> {
        run(s, 10, vec![ask]).pop().unwrap()
    }

    fn refused_as_not_theirs(r: Result<Issued, ApplyError>) {
        match r {
            Err(ApplyError::NumberConflict { why, .. }) => assert!(why.contains("another caller"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_the_taker_repeats_confirms_or_voids_a_number() {
        let mut s = State { version: crate::version::ClusterVersion(2), ..State::default() };
        series(&mut s, "inv");
        let void = || NumberAct::Void { reason: "x".into() };
        let reserve = NumberAct::Reserve { hold_ms: HOUR };
        // Token 1 reserves k-A1; an anonymous caller and token 2 may neither void nor confirm it,
        // nor read it back by reserving or issuing the key again.
        assert_eq!(one(&mut s, owned(token(1), None, "k-A1", reserve.clone())).unwrap().number, 1);
        for ask in [
            owned(Actor::Unattributed, Some(9), "k-A1", void()),
            owned(Actor::Unattributed, Some(9), "k-A1", NumberAct::Confirm),
            owned(Actor::Unattributed, Some(9), "k-A1", NumberAct::Issue),
            owned(token(2), None, "k-A1", NumberAct::Confirm),
            owned(token(2), None, "k-A1", reserve.clone()),
            owned(Actor::AdminToken, None, "k-A1", NumberAct::Issue),
        ] {
            refused_as_not_theirs(one(&mut s, ask));
        }
        assert_eq!(s.ledger.by_key("inv", "k-A1").unwrap().1.state(), NumberState::Reserved, "nothing changed");
        // Its taker repeats and confirms it.
        assert!(one(&mut s, owned(token(1), None, "k-A1", reserve.clone())).unwrap().replayed);
        assert_eq!(
            one(&mut s, owned(token(1), None, "k-A1", NumberAct::Confirm)).unwrap().state,
            NumberState::Confirmed
        );

        // An anonymous reservation is its secret's: a caller with another secret is refused.
        assert_eq!(one(&mut s, owned(Actor::Unattributed, Some(1), "k-B", reserve.clone())).unwrap().number, 2);
        assert_eq!(s.ledger.by_key("inv", "k-B").unwrap().1.proof, Some([1; 32]));
        refused_as_not_theirs(one(&mut s, owned(Actor::Unattributed, Some(2), "k-B", void())));
        refused_as_not_theirs(one(&mut s, owned(Actor::Unattributed, Some(2), "k-B", reserve.clone())));
        refused_as_not_theirs(one(&mut s, owned(token(1), None, "k-B", void())));
        assert!(one(&mut s, owned(Actor::Unattributed, Some(1), "k-B", reserve.clone())).unwrap().replayed);
        assert_eq!(one(&mut s, owned(Actor::Unattributed, Some(1), "k-B", void())).unwrap().state, NumberState::Voided);

        // A root caller settles anyone's reservation.
        one(&mut s, owned(token(3), None, "k-C", reserve.clone())).unwrap();
        one(&mut s, owned(Actor::Unattributed, Some(4), "k-D", reserve)).unwrap();
        assert_eq!(one(&mut s, owned(Actor::AdminToken, None, "k-C", void())).unwrap().state, NumberState::Voided);
        let admin_cert = Actor::ClientCert { name: "ops".into() };
        assert_eq!(
            one(&mut s, owned(admin_cert, None, "k-D", NumberAct::Confirm)).unwrap().state,
            NumberState::Confirmed
        );
    }

    #[test]
    fn an_earlier_releases_anonymous_number_is_no_anonymous_callers() {
        let mut s = State { version: crate::version::ClusterVersion(2), ..State::default() };
        series(&mut s, "inv");
        let legacy = NumberAsk {
            tag: "inv".into(),
            key: "old".into(),
            actor: Actor::Unattributed,
            act: NumberAct::Reserve { hold_ms: HOUR },
        };
        apply(&mut s, &Command { at_ms: 1, op: Op::plain_numbers(vec![legacy]) }, &mut Changes::default()).unwrap();
        assert_eq!(s.ledger.by_key("inv", "old").unwrap().1.proof, None);
        refused_as_not_theirs(one(&mut s, owned(Actor::Unattributed, Some(1), "old", NumberAct::Confirm)));
        assert_eq!(
            one(&mut s, owned(Actor::AdminToken, None, "old", NumberAct::Confirm)).unwrap().state,
            NumberState::Confirmed
        );
        // The legacy op keeps its rules: anyone settles there, as earlier releases applied it.
        let legacy_issue = NumberAsk { tag: "inv".into(), key: "k".into(), actor: token(1), act: NumberAct::Issue };
        let cmd = Command { at_ms: 2, op: Op::plain_numbers(vec![legacy_issue.clone()]) };
        apply(&mut s, &cmd, &mut Changes::default()).unwrap();
        let replay = NumberAsk { actor: Actor::Unattributed, ..legacy_issue };
        let cmd = Command { at_ms: 3, op: Op::plain_numbers(vec![replay]) };
        assert!(
            matches!(apply(&mut s, &cmd, &mut Changes::default()), Ok(Applied::Numbers(r)) if r[0].as_ref().is_ok_and(|i| i.replayed))
        );
    }

    #[test]
    fn a_series_stops_at_its_cap_and_the_others_go_on() {
        let mut s = State { version: crate::version::ClusterVersion(2), ..State::default() };
        series(&mut s, "inv");
        series(&mut s, "other");
        let limits = SeriesLimits { max_numbers: 3, issues_per_sec: 1 };
        let mut c = Changes::default();
        apply(&mut s, &Command { at_ms: 2, op: Op::SetSeriesLimits { tag: "inv".into(), limits } }, &mut c).unwrap();
        assert!(c.limits.contains("inv"));
        let asks = (0..5).map(|i| owned(Actor::Unattributed, Some(i), &format!("k{i}"), NumberAct::Issue)).collect();
        let r = run(&mut s, 10, asks);
        assert_eq!(r.iter().filter(|r| r.is_ok()).count(), 3);
        assert!(matches!(&r[3], Err(ApplyError::SeriesFull { max_numbers: 3, .. })), "{:?}", r[3]);
        // A repeat is no new number: answered at the cap.
        assert!(one(&mut s, owned(Actor::Unattributed, Some(0), "k0", NumberAct::Issue)).unwrap().replayed);
        let other = OwnedAsk {
            ask: NumberAsk { tag: "other".into(), key: "k9".into(), actor: token(1), act: NumberAct::Issue },
            proof: None,
        };
        assert_eq!(run(&mut s, 11, vec![other]).pop().unwrap().unwrap().number, 1);
        // Limits are only for a gapless series, and within their bounds.
        let bad = SeriesLimits { max_numbers: 0, issues_per_sec: 1 };
        assert!(apply(
            &mut s,
            &Command { at_ms: 3, op: Op::SetSeriesLimits { tag: "inv".into(), limits: bad } },
            &mut c
        )
        .is_err());
        let nope = Op::SetSeriesLimits { tag: "nope".into(), limits };
        assert!(apply(&mut s, &Command { at_ms: 3, op: nope }, &mut c).is_err());
    }

    #[test]
    fn a_proof_comes_exactly_with_a_caller_without_a_token() {
        for (actor, proof) in [(Actor::Unattributed, None), (token(1), Some(1))] {
            let asks = vec![owned(actor, proof, "k", NumberAct::Issue)];
            assert!(check_owned_asks(&asks).is_err());
        }
        assert!(check_owned_asks(&[owned(Actor::Unattributed, Some(1), "k", NumberAct::Issue)]).is_ok());
        assert!(check_owned_asks(&[]).is_err());
    }
}
