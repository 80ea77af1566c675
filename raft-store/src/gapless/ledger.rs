//! The ledger of every gapless series: each number with its key, caller, time, state and chain
//! links, and the indexes `apply` and the leader need (each key's number, each period's chain
//! head and open reservations, every open reservation by deadline). Only the numbers are
//! stored ([`NumberRecord`], one key each); the indexes are rebuilt from them on load, in any
//! order ([`Ledger::insert`]).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use leaf_api::audit::Actor;
use leaf_api::gapless::{NumberState, SeriesLimits, VoidCause};
use serde::{Deserialize, Serialize};

use super::chain::{ChainEvent, CHAIN_GENESIS};

/// A number's ledger entry. Stored without its `proof` field when it has none, as releases
/// before owned numbers stored it ([`NumberRecordV1`]): until the cluster activates owned
/// numbers ([`crate::version`]) no record has one, so a member of such a release reads every
/// record, in its tree and in the snapshots it is sent.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct NumberRecord {
    pub key: Arc<str>,
    /// Who issued or reserved it.
    pub actor: Actor,
    /// Leader time of the issue or reservation.
    pub at_ms: i64,
    /// A reservation's deadline; `None` for a number issued final at once.
    pub deadline_ms: Option<i64>,
    /// The issue's or reservation's place in its period's events.
    pub seq: u64,
    /// The issue's or reservation's chain link.
    pub hash: [u8; 32],
    /// How a reservation was settled, once it was.
    pub settled: Option<Settled>,
    /// The hash of the settlement secret of a caller without a token, for a number taken by
    /// an owned ask ([`super::OwnedAsk`]); `None` otherwise, and in earlier releases' records
    /// ([`NumberRecordV1`]).
    pub proof: Option<super::Proof>,
}

/// [`NumberRecord`] as releases before owned numbers stored it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct NumberRecordV1 {
    key: Arc<str>,
    actor: Actor,
    at_ms: i64,
    deadline_ms: Option<i64>,
    seq: u64,
    hash: [u8; 32],
    settled: Option<Settled>,
}

/// [`NumberRecord`]'s fields as stored, borrowed: `proof` only when there is one.
#[derive(Serialize)]
struct StoredRecord<'a> {
    key: &'a str,
    actor: &'a Actor,
    at_ms: i64,
    deadline_ms: Option<i64>,
    seq: u64,
    hash: &'a [u8; 32],
    settled: &'a Option<Settled>,
    #[serde(skip_serializing_if = "Option::is_none")]
    proof: Option<super::Proof>,
}

impl Serialize for NumberRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        StoredRecord {
            key: &self.key,
            actor: &self.actor,
            at_ms: self.at_ms,
            deadline_ms: self.deadline_ms,
            seq: self.seq,
            hash: &self.hash,
            settled: &self.settled,
            proof: self.proof,
        }
        .serialize(s)
    }
}

impl From<NumberRecordV1> for NumberRecord {
    fn from(r: NumberRecordV1) -> Self {
        let NumberRecordV1 { key, actor, at_ms, deadline_ms, seq, hash, settled } = r;
        NumberRecord { key, actor, at_ms, deadline_ms, seq, hash, settled, proof: None }
    }
}

/// A stored ledger entry of this release or of one before owned numbers.
pub fn decode_number_record(bytes: &[u8]) -> Result<NumberRecord, leaf_api::codec::CodecError> {
    leaf_api::codec::decode::<NumberRecord>(bytes)
        .or_else(|e| leaf_api::codec::decode::<NumberRecordV1>(bytes).map(Into::into).map_err(|_| e))
}

/// A reservation's settlement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    pub outcome: Outcome,
    pub actor: Actor,
    pub at_ms: i64,
    pub seq: u64,
    pub hash: [u8; 32],
}

/// A reservation confirmed or voided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Confirmed,
    Voided { cause: VoidCause, reason: Arc<str> },
}

impl NumberRecord {
    /// The number's state.
    pub fn state(&self) -> NumberState {
        match (&self.settled, self.deadline_ms) {
            (None, None) => NumberState::Issued,
            (None, Some(_)) => NumberState::Reserved,
            (Some(Settled { outcome: Outcome::Confirmed, .. }), _) => NumberState::Confirmed,
            (Some(Settled { outcome: Outcome::Voided { .. }, .. }), _) => NumberState::Voided,
        }
    }

    /// The void's cause and reason, if voided.
    pub fn void(&self) -> Option<(VoidCause, &str)> {
        match &self.settled {
            Some(Settled { outcome: Outcome::Voided { cause, reason }, .. }) => Some((*cause, reason)),
            _ => None,
        }
    }

    /// The issue's or reservation's chain event.
    pub fn created_event(&self) -> ChainEvent<'_> {
        match self.deadline_ms {
            None => ChainEvent::Issue { key: &self.key, actor: &self.actor, at_ms: self.at_ms },
            Some(deadline_ms) => {
                ChainEvent::Reserve { key: &self.key, actor: &self.actor, at_ms: self.at_ms, deadline_ms }
            }
        }
    }

    /// The settlement's chain event, if settled.
    pub fn settled_event(&self) -> Option<(u64, ChainEvent<'_>, [u8; 32])> {
        let s = self.settled.as_ref()?;
        let event = match &s.outcome {
            Outcome::Confirmed => ChainEvent::Confirm { actor: &s.actor, at_ms: s.at_ms },
            Outcome::Voided { cause, reason } => {
                ChainEvent::Void { actor: &s.actor, at_ms: s.at_ms, cause: *cause, reason }
            }
        };
        Some((s.seq, event, s.hash))
    }

    /// The record's last event: (seq, link).
    fn last_event(&self) -> (u64, [u8; 32]) {
        match &self.settled {
            Some(s) if s.seq > self.seq => (s.seq, s.hash),
            _ => (self.seq, self.hash),
        }
    }
}

/// A period's chain: its count of events, its last link, its open reservations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeriodChain {
    pub events: u64,
    pub head: [u8; 32],
    pub open: u64,
}

/// A series' numbers, its keys and its periods' chains.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeriesLedger {
    /// By (period, number).
    pub numbers: BTreeMap<(u32, u64), NumberRecord>,
    /// Each key's number.
    pub keys: BTreeMap<Arc<str>, (u32, u64)>,
    /// Each kept period's chain.
    pub periods: BTreeMap<u32, PeriodChain>,
}

impl SeriesLedger {
    /// The digest of the kept periods' heads ([`super::chain::heads_digest`]).
    pub fn head(&self) -> [u8; 32] {
        super::chain::heads_digest(self.periods.iter().map(|(p, c)| (*p, c.events, c.head)))
    }

    /// Open reservations in every period.
    pub fn open(&self) -> u64 {
        self.periods.values().map(|c| c.open).sum()
    }

    /// The next event's place and the link before it, in `period`.
    pub fn next_event(&self, period: u32) -> (u64, [u8; 32]) {
        self.periods.get(&period).map_or((1, CHAIN_GENESIS), |c| (c.events + 1, c.head))
    }
}

/// A page of one series' ledger, as [`crate::StateReader::ledger_page`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerSlice {
    /// The page's numbers, in (period, number) order.
    pub numbers: Vec<((u32, u64), NumberRecord)>,
    /// Numbers in the series, every kept period.
    pub count: usize,
    /// Open reservations in the series.
    pub open: u64,
    /// The series' head ([`SeriesLedger::head`]).
    pub head: [u8; 32],
}

/// Every gapless series' ledger, by tag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    pub series: BTreeMap<String, SeriesLedger>,
    /// Numbers in every series.
    pub len: usize,
    /// Every open reservation: (deadline, tag, period, number).
    pub open: BTreeSet<(i64, String, u32, u64)>,
    /// The limits of the series that set theirs ([`crate::Op::SetSeriesLimits`]).
    pub limits: BTreeMap<String, SeriesLimits>,
}

impl Ledger {
    /// Puts a number, new or loaded from a checkpoint or a snapshot (in any order), and
    /// updates the indexes. A number already there is replaced.
    pub fn insert(&mut self, tag: &str, at: (u32, u64), record: NumberRecord) {
        self.remove(tag, at);
        let series = self.series.entry(tag.to_string()).or_default();
        // A number lost with a cluster has no key (no ask's key is empty).
        if !record.key.is_empty() {
            series.keys.insert(record.key.clone(), at);
        }
        let chain = series.periods.entry(at.0).or_default();
        let (seq, hash) = record.last_event();
        if seq > chain.events {
            (chain.events, chain.head) = (seq, hash);
        }
        if let (NumberState::Reserved, Some(deadline)) = (record.state(), record.deadline_ms) {
            chain.open += 1;
            self.open.insert((deadline, tag.to_string(), at.0, at.1));
        }
        series.numbers.insert(at, record);
        self.len += 1;
    }

    /// Takes a number out with its key and open reservation; its period's chain keeps its
    /// count and head (a record replaced by [`Ledger::insert`] only moves them forward).
    fn remove(&mut self, tag: &str, at: (u32, u64)) -> Option<NumberRecord> {
        let series = self.series.get_mut(tag)?;
        let record = series.numbers.remove(&at)?;
        if !record.key.is_empty() {
            series.keys.remove(&record.key);
        }
        if let (NumberState::Reserved, Some(deadline)) = (record.state(), record.deadline_ms) {
            if let Some(chain) = series.periods.get_mut(&at.0) {
                chain.open -= 1;
            }
            self.open.remove(&(deadline, tag.to_string(), at.0, at.1));
        }
        self.len -= 1;
        Some(record)
    }

    /// Drops period `period` of `tag` whole: its numbers, keys and chain. The numbers dropped.
    pub(crate) fn drop_period(&mut self, tag: &str, period: u32) -> Vec<u64> {
        let Some(series) = self.series.get(tag) else { return Vec::new() };
        let numbers: Vec<u64> = series.numbers.range((period, 0)..=(period, u64::MAX)).map(|((_, n), _)| *n).collect();
        for n in &numbers {
            self.remove(tag, (period, *n));
        }
        if let Some(series) = self.series.get_mut(tag) {
            series.periods.remove(&period);
        }
        numbers
    }

    /// The record of a number, if the ledger has it.
    pub fn get(&self, tag: &str, at: (u32, u64)) -> Option<&NumberRecord> {
        self.series.get(tag)?.numbers.get(&at)
    }

    /// The number `key` has in `tag`, with its record.
    pub fn by_key(&self, tag: &str, key: &str) -> Option<((u32, u64), &NumberRecord)> {
        let series = self.series.get(tag)?;
        let at = *series.keys.get(key)?;
        Some((at, series.numbers.get(&at)?))
    }

    /// `tag`'s limits: its own, or the defaults.
    pub fn limits_of(&self, tag: &str) -> SeriesLimits {
        self.limits.get(tag).copied().unwrap_or_default()
    }

    /// `tag`'s head ([`SeriesLedger::head`]; [`CHAIN_GENESIS`] before its first number).
    pub fn head(&self, tag: &str) -> [u8; 32] {
        self.series.get(tag).map_or(CHAIN_GENESIS, SeriesLedger::head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &str, seq: u64, deadline_ms: Option<i64>, settled_seq: Option<u64>) -> NumberRecord {
        NumberRecord {
            key: key.into(),
            actor: Actor::Unattributed,
            at_ms: 1,
            deadline_ms,
            seq,
            hash: [seq as u8; 32],
            settled: settled_seq.map(|seq| Settled {
                outcome: Outcome::Confirmed,
                actor: Actor::Unattributed,
                at_ms: 2,
                seq,
                hash: [seq as u8; 32],
            }),
            proof: None,
        }
    }

    #[test]
    fn records_of_earlier_releases_load_without_a_proof() {
        let r = record("a", 1, Some(10), Some(2));
        let old = NumberRecordV1 {
            key: r.key.clone(),
            actor: r.actor.clone(),
            at_ms: r.at_ms,
            deadline_ms: r.deadline_ms,
            seq: r.seq,
            hash: r.hash,
            settled: r.settled.clone(),
        };
        let bytes = leaf_api::codec::encode(&old).unwrap();
        assert_eq!(decode_number_record(&bytes).unwrap(), r);
        // Without a proof it is stored as those releases stored it, so they read it.
        assert_eq!(leaf_api::codec::encode(&r).unwrap(), bytes);
        let owned = NumberRecord { proof: Some([7; 32]), ..r };
        let bytes = leaf_api::codec::encode(&owned).unwrap();
        assert_eq!(decode_number_record(&bytes).unwrap(), owned);
    }

    #[test]
    fn indexes_rebuild_in_any_order() {
        let records = [
            ((2026, 1), record("a", 1, Some(10), Some(4))),
            ((2026, 2), record("b", 2, None, None)),
            ((2026, 3), record("c", 3, Some(20), None)),
            ((2027, 1), record("d", 1, Some(30), None)),
        ];
        let mut forward = Ledger::default();
        for (at, r) in records.clone() {
            forward.insert("inv", at, r);
        }
        let mut backward = Ledger::default();
        for (at, r) in records.into_iter().rev() {
            backward.insert("inv", at, r);
        }
        assert_eq!(forward, backward);
        let s = &forward.series["inv"];
        assert_eq!(s.periods[&2026], PeriodChain { events: 4, head: [4; 32], open: 1 });
        assert_eq!(s.periods[&2027], PeriodChain { events: 1, head: [1; 32], open: 1 });
        assert_eq!(forward.open.iter().map(|o| o.0).collect::<Vec<_>>(), [20, 30]);
        assert_eq!((forward.len, s.open()), (4, 2));
        // Dropping a period takes its numbers, keys, open reservations and chain.
        assert_eq!(forward.drop_period("inv", 2026), [1, 2, 3]);
        let s = &forward.series["inv"];
        assert_eq!((forward.len, s.keys.len(), s.periods.len(), forward.open.len()), (1, 1, 1, 1));
    }
}
