//! Gapless series in the replicated state: issuing numbers and the ledger that keeps each one.
//!
//! A gapless tag's [`TagRecord::max_id`] is the next number of its current period, which its
//! profile ([`StoredProfile::Gapless`]) records. [`issue_each`] applies the asks of an
//! [`Op::IssueNumbers`](crate::Op::IssueNumbers) entry in order: a key the series has seen gets
//! its number again (nothing changes); a new key gets the next number and a ledger entry. The
//! period switches to the leader's when that is later than the recorded one, and the counter
//! restarts at 1; it never goes back. So the numbers of a period are exactly 1..=N, each once,
//! on every node: that is the whole gapless argument, and it rests on the log alone.
//!
//! The [`Ledger`] keeps every number with its key, actor and time, checkpointed one key each
//! (`n/<tag>\0<period BE><number BE>`) and shipped in snapshots and backups. It is bounded by
//! [`MAX_LEDGER_NUMBERS`] in all: an issue past it is refused, never a number dropped.
//!
//! Each number also carries a link of its series' hash chain ([`chain_hash`]): SHA-256 over the
//! previous number's link and this number's fields, in issue order, which is (period, number)
//! order. An auditor holding an export recomputes the chain (`leaf ledger verify`): a number
//! altered, removed or inserted breaks every link after it, and the last link is the series'
//! `head` that the cluster answers.
use std::collections::BTreeMap;
use std::sync::Arc;

use leaf_api::audit::Actor;
use leaf_api::gapless::{validate_key, NumberState};
use serde::{Deserialize, Serialize};

use crate::apply::{invalid, Applied, ApplyError, ApplyResult, Changes};
use crate::profile::StoredProfile;
use crate::state::State;

/// Most numbers the ledger holds across every series; an issue past it is refused.
pub const MAX_LEDGER_NUMBERS: usize = 1_000_000;

/// Most issues in one [`crate::Op::IssueNumbers`] entry: 256 asks with 128-byte tags and keys
/// encode to well under [`crate::check::MAX_BATCH_COMMAND_BYTES`].
pub const MAX_NUMBER_ASKS: usize = 256;

/// One issue of an [`crate::Op::IssueNumbers`]: the next number of `tag` for `key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumberAsk {
    pub tag: String,
    pub key: String,
    pub actor: Actor,
}

/// A number as [`issue_each`] answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    pub period: u32,
    pub number: u64,
    /// Leader time of the first issue of the key.
    pub at_ms: i64,
    /// The key had this number already.
    pub replayed: bool,
}

/// A number's ledger entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumberRecord {
    pub key: Arc<str>,
    pub actor: Actor,
    pub at_ms: i64,
    pub state: NumberState,
    /// This number's link of the series' hash chain ([`chain_hash`]).
    pub hash: [u8; 32],
}

/// The link before a series' first number.
pub const CHAIN_GENESIS: [u8; 32] = [0; 32];

/// The hash chain's link of number `number` of `period` of series `tag`, issued to `key` by
/// `actor` at leader time `at_ms`, after the link `prev` ([`CHAIN_GENESIS`] for the first):
/// SHA-256 of a domain tag, `prev`, and each field length-prefixed or fixed-width, so no two
/// different entries hash the same input.
pub fn chain_hash(
    prev: &[u8; 32],
    tag: &str,
    (period, number): (u32, u64),
    key: &str,
    actor: &Actor,
    at_ms: i64,
) -> [u8; 32] {
    let mut input = Vec::with_capacity(64 + tag.len() + key.len());
    input.extend_from_slice(b"leaf-gapless-chain-v1\0");
    input.extend_from_slice(prev);
    let mut field = |b: &[u8]| {
        input.extend_from_slice(&(b.len() as u32).to_be_bytes());
        input.extend_from_slice(b);
    };
    field(tag.as_bytes());
    field(key.as_bytes());
    field(actor_text(actor).as_bytes());
    input.extend_from_slice(&period.to_be_bytes());
    input.extend_from_slice(&number.to_be_bytes());
    input.extend_from_slice(&at_ms.to_be_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA256, &input);
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// An actor as the chain hashes it: its kind and fields, `:`-separated.
fn actor_text(actor: &Actor) -> String {
    match actor {
        Actor::AdminToken => "admin_token".into(),
        Actor::ClientCert { name } => format!("client_cert:{name}"),
        Actor::Loopback => "loopback".into(),
        Actor::Token { id, name } => format!("token:{}:{name}", id.0),
        Actor::Node { id } => format!("node:{id}"),
        Actor::Unattributed => "unattributed".into(),
    }
}

/// A series' numbers and its keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeriesLedger {
    /// By (period, number).
    pub numbers: BTreeMap<(u32, u64), NumberRecord>,
    /// Each key's number.
    pub keys: BTreeMap<Arc<str>, (u32, u64)>,
}

/// A page of one series' ledger, as [`crate::StateReader::ledger_page`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerSlice {
    /// The page's numbers, in (period, number) order.
    pub numbers: Vec<((u32, u64), NumberRecord)>,
    /// Numbers in the series, every period.
    pub count: usize,
    /// The series' last chain link.
    pub head: [u8; 32],
}

/// Every gapless series' ledger, by tag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    pub series: BTreeMap<String, SeriesLedger>,
    /// Numbers in every series.
    pub len: usize,
}

impl Ledger {
    /// Puts a number loaded from a checkpoint or a snapshot.
    pub fn insert(&mut self, tag: &str, (period, number): (u32, u64), record: NumberRecord) {
        let series = self.series.entry(tag.to_string()).or_default();
        series.keys.insert(record.key.clone(), (period, number));
        if series.numbers.insert((period, number), record).is_none() {
            self.len += 1;
        }
    }

    /// The record of a number, if the ledger has it.
    pub fn get(&self, tag: &str, at: (u32, u64)) -> Option<&NumberRecord> {
        self.series.get(tag)?.numbers.get(&at)
    }

    /// The last link of `tag`'s chain ([`CHAIN_GENESIS`] before its first number).
    pub fn head(&self, tag: &str) -> [u8; 32] {
        self.series.get(tag).and_then(|s| s.numbers.values().next_back()).map_or(CHAIN_GENESIS, |r| r.hash)
    }
}

/// Applies the issues of a group in order, each as if alone: one that fails (an unknown tag,
/// one of another profile, a full ledger) changes nothing and leaves the others as they are.
pub(crate) fn issue_each(state: &mut State, at_ms: i64, asks: &[NumberAsk], changes: &mut Changes) -> ApplyResult {
    let results = asks.iter().map(|a| issue(state, at_ms, a, changes)).collect();
    Ok(Applied::Numbers(results))
}

/// Issues `ask.tag`'s next number to `ask.key` at leader time `at_ms`, or answers the number
/// the key has.
fn issue(state: &mut State, at_ms: i64, ask: &NumberAsk, changes: &mut Changes) -> Result<Issued, ApplyError> {
    let record = match state.tags.get_mut(&ask.tag) {
        None => return Err(ApplyError::TagNotFound(ask.tag.clone())),
        Some(r) if r.archived_ms().is_some() => return Err(ApplyError::TagArchived(ask.tag.clone())),
        Some(r) => r,
    };
    let StoredProfile::Gapless { policy, period } = record.profile().clone() else {
        return Err(invalid(format!("tag {:?} is not gapless: it hands out IDs, not numbers", ask.tag)));
    };
    if let Some(&(p, n)) = state.ledger.series.get(&ask.tag).and_then(|s| s.keys.get(ask.key.as_str())) {
        let at_ms = state.ledger.get(&ask.tag, (p, n)).map_or(0, |r| r.at_ms);
        return Ok(Issued { period: p, number: n, at_ms, replayed: true });
    }
    if state.ledger.len >= MAX_LEDGER_NUMBERS {
        return Err(invalid(format!("the ledger holds {MAX_LEDGER_NUMBERS} numbers, its most")));
    }
    let now = policy.period_at(at_ms).ok_or_else(|| invalid(format!("no calendar period at {at_ms} ms")))?;
    let (period, next) = if now > period { (now, 1) } else { (period, record.max_id) };
    let number = u64::try_from(next).map_err(|_| invalid(format!("series {:?} counts from 1", ask.tag)))?;
    if next == i64::MAX {
        return Err(ApplyError::TagExhausted { tag: ask.tag.clone(), max_id: next, step: 1 });
    }
    record.set_profile(StoredProfile::Gapless { policy, period });
    record.max_id = next + 1;
    changes.tag(&ask.tag);
    let hash = chain_hash(&state.ledger.head(&ask.tag), &ask.tag, (period, number), &ask.key, &ask.actor, at_ms);
    let key: Arc<str> = Arc::from(ask.key.as_str());
    let entry = NumberRecord { key, actor: ask.actor.clone(), at_ms, state: NumberState::Issued, hash };
    state.ledger.insert(&ask.tag, (period, number), entry);
    changes.numbers.insert((ask.tag.clone(), period, number));
    Ok(Issued { period, number, at_ms, replayed: false })
}

/// Checks the fields of the asks of an issue group without the state.
pub(crate) fn check_asks(asks: &[NumberAsk]) -> Result<(), ApplyError> {
    if asks.is_empty() || asks.len() > MAX_NUMBER_ASKS {
        return Err(invalid(format!("a group holds 1 to {MAX_NUMBER_ASKS} issues, not {}", asks.len())));
    }
    for a in asks {
        leaf_api::tag::validate_tag(&a.tag)?;
        validate_key(&a.key).map_err(|e| invalid(e.to_string()))?;
        if !a.actor.is_bounded() {
            return Err(invalid("an issue's actor is out of bounds"));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::inconsistent_digit_grouping)]
mod tests {
    use leaf_api::gapless::{Reset, SeriesPolicy};

    use super::*;
    use crate::command::{Command, Op};
    use crate::tags::NewTag;

    const NOV28_2026_UTC: i64 = 1_795_824_000_000;
    const JAN1_2027_UTC: i64 = 1_798_761_600_000;

    fn gapless(tag: &str, reset: Reset) -> Command {
        let profile = StoredProfile::Gapless {
            policy: SeriesPolicy { reset, utc_offset_minutes: 0, format: Some("INV-{seq}".into()) },
            period: 0,
        };
        let t = NewTag {
            tag: tag.into(),
            step: 1,
            start_max_id: 1,
            description: String::new(),
            profile,
            upper_bound: None,
        };
        Command { at_ms: NOV28_2026_UTC, op: Op::CreateTagV3(t) }
    }

    fn ask(tag: &str, key: &str) -> NumberAsk {
        NumberAsk { tag: tag.into(), key: key.into(), actor: Actor::Unattributed }
    }

    fn issue_at(s: &mut State, at_ms: i64, asks: Vec<NumberAsk>) -> Vec<Result<Issued, ApplyError>> {
        match crate::apply::apply(s, &Command { at_ms, op: Op::IssueNumbers { asks } }, &mut Changes::default()) {
            Ok(Applied::Numbers(r)) => r,
            other => panic!("{other:?}"),
        }
    }

    fn numbers(r: &[Result<Issued, ApplyError>]) -> Vec<(u32, u64, bool)> {
        r.iter().map(|i| i.as_ref().map(|i| (i.period, i.number, i.replayed)).unwrap()).collect()
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
    }

    #[test]
    fn refusals_change_nothing() {
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        crate::apply::apply(&mut s, &crate::testing::create("seg", 10, 1), &mut Changes::default()).unwrap();
        let before = s.clone();
        let mut c = Changes::default();
        let cmd = Command { at_ms: 1, op: Op::IssueNumbers { asks: vec![ask("nope", "a"), ask("seg", "a")] } };
        let r = crate::apply::apply(&mut s, &cmd, &mut c).unwrap();
        let Applied::Numbers(r) = r else { panic!() };
        assert_eq!(r[0], Err(ApplyError::TagNotFound("nope".into())));
        assert!(matches!(&r[1], Err(ApplyError::Invalid(m)) if m.contains("not gapless")), "{r:?}");
        assert_eq!((s, c), (before, Changes::default()));
        // A segment allocation of a gapless tag is refused: it would leave a gap.
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        assert!(crate::apply::apply(&mut s, &crate::testing::alloc("inv", 10), &mut Changes::default()).is_err());
        // Fields are checked before the state.
        for bad in [vec![], vec![ask("inv", "")], vec![ask("in v", "a")], vec![ask("inv", "k"); MAX_NUMBER_ASKS + 1]] {
            let cmd = Command { at_ms: 1, op: Op::IssueNumbers { asks: bad } };
            assert!(matches!(crate::apply::apply(&mut s, &cmd, &mut Changes::default()), Err(ApplyError::Invalid(_))));
        }
    }

    #[test]
    fn each_number_links_the_chain_from_the_one_before() {
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Year), &mut Changes::default()).unwrap();
        issue_at(&mut s, NOV28_2026_UTC, vec![ask("inv", "a"), ask("inv", "b")]);
        issue_at(&mut s, JAN1_2027_UTC, vec![ask("inv", "c")]);
        let mut prev = CHAIN_GENESIS;
        for ((period, number), r) in &s.ledger.series["inv"].numbers {
            assert_eq!(r.hash, chain_hash(&prev, "inv", (*period, *number), &r.key, &r.actor, r.at_ms));
            prev = r.hash;
        }
        assert_eq!(s.ledger.head("inv"), prev);
        // Any field changes the link.
        let base = chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), "a", &Actor::Unattributed, 5);
        for other in [
            chain_hash(&[1; 32], "inv", (2026, 1), "a", &Actor::Unattributed, 5),
            chain_hash(&CHAIN_GENESIS, "inw", (2026, 1), "a", &Actor::Unattributed, 5),
            chain_hash(&CHAIN_GENESIS, "inv", (2027, 1), "a", &Actor::Unattributed, 5),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 2), "a", &Actor::Unattributed, 5),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), "b", &Actor::Unattributed, 5),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), "a", &Actor::AdminToken, 5),
            chain_hash(&CHAIN_GENESIS, "inv", (2026, 1), "a", &Actor::Unattributed, 6),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn changes_name_the_tag_and_each_new_number() {
        let mut s = State::default();
        crate::apply::apply(&mut s, &gapless("inv", Reset::Never), &mut Changes::default()).unwrap();
        let mut c = Changes::default();
        let cmd = Command { at_ms: 1, op: Op::IssueNumbers { asks: vec![ask("inv", "a"), ask("inv", "b")] } };
        crate::apply::apply(&mut s, &cmd, &mut c).unwrap();
        assert_eq!(c.tags, ["inv".to_string()].into());
        assert_eq!(c.numbers, [("inv".to_string(), 0, 1), ("inv".to_string(), 0, 2)].into());
        let mut c = Changes::default();
        let cmd = Command { at_ms: 2, op: Op::IssueNumbers { asks: vec![ask("inv", "a")] } };
        crate::apply::apply(&mut s, &cmd, &mut c).unwrap();
        assert!(c.is_empty(), "a replay writes nothing: {c:?}");
    }
}
