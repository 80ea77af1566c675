//! The allocation journal: every committed segment allocation and the node it was committed to,
//! as this node applied them, newest `cap` kept.
//!
//! It is an audit record for checkers (`GET /admin/allocations`), not replicated state: it is
//! not in snapshots and nothing in [`crate::apply::apply`] reads it. Every node writes the
//! allocations it applies, so a node that never installed a snapshot holds all of them since
//! the cluster began (up to `cap`); [`JournalDump::complete_from_index`] says from which log
//! index on a node's journal is known to be complete.
//!
//! Tree `journal`: `<log index, 8 bytes BE>` → [`JournalRecord`], and for the second and later
//! allocations of a group ([`crate::Op::AllocateSegments`]) `<log index, 8 bytes BE><position,
//! 4 bytes BE>`, which sorts after its entry's first and before the next entry; tree `journal_meta`:
//! `complete_from` → the first log index from which the journal is complete. Records are
//! written in the same `apply` call as the state they describe, before any checkpoint of that
//! state, so a crash between the two re-applies the entry and rewrites the same key.
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use leaf_api::codec;
use serde::{Deserialize, Serialize};

const KEY_COMPLETE_FROM: &[u8] = b"complete_from";

/// Where an allocation is in the log: its entry's index, and its place in the entry (0 but in
/// a group of allocations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    pub index: u64,
    pub position: u32,
}

impl Place {
    /// The only allocation of the entry at `index`.
    pub fn at(index: u64) -> Place {
        Place { index, position: 0 }
    }

    fn key(self) -> Vec<u8> {
        let mut k = self.index.to_be_bytes().to_vec();
        if self.position > 0 {
            k.extend_from_slice(&self.position.to_be_bytes());
        }
        k
    }

    fn of_key(key: &[u8]) -> Result<Place, JournalError> {
        let bad = || JournalError::Key(key.to_vec());
        let (index, position) = match key.len() {
            8 => (key, None),
            12 => (&key[..8], Some(&key[8..])),
            _ => return Err(bad()),
        };
        let index = u64::from_be_bytes(index.try_into().map_err(|_| bad())?);
        let position = match position {
            Some(p) => u32::from_be_bytes(p.try_into().map_err(|_| bad())?),
            None => 0,
        };
        Ok(Place { index, position })
    }
}

/// One committed allocation: `[start, end)` of `tag`, reserved for `node_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalRecord {
    pub tag: String,
    pub node_id: u64,
    pub start: i64,
    pub end: i64,
    /// Leader time of the committing entry.
    pub at_ms: i64,
}

/// What a node's journal holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalDump {
    /// Every allocation committed at this log index or later is in `records` (unless
    /// filtered out). Allocations before it may be missing: trimmed past `cap`, or inside a
    /// snapshot this node installed instead of applying the entries.
    pub complete_from_index: u64,
    /// ...and up to this log index (everything this node had applied when the dump began).
    pub complete_through_index: u64,
    /// `(where in the log, record)`, oldest first.
    pub records: Vec<(Place, JournalRecord)>,
}

/// What [`Journal::moved_since`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// Every allocation applied up to this log index is covered.
    pub through: u64,
    /// Tag → its counter before the first allocation in the range; `None` when some
    /// allocations of the range may be missing.
    pub moved: Option<std::collections::HashMap<String, i64>>,
}

/// Why the journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal storage: {0}")]
    Sled(#[from] sled::Error),
    #[error("journal record: {0}")]
    Codec(#[from] codec::CodecError),
    #[error("malformed journal key {0:?}")]
    Key(Vec<u8>),
}

/// Handle on the journal trees. Cheap to clone.
#[derive(Clone)]
pub struct Journal {
    records: crate::Tree,
    meta: crate::Tree,
    cap: usize,
    len: Arc<AtomicUsize>,
    /// Highest applied log index whose allocations are recorded.
    through: Arc<AtomicU64>,
}

impl Journal {
    /// Opens the journal in `db`, keeping at most `cap` records (at least 1). `applied` is the
    /// state machine's last applied index: its allocations were recorded before it was saved.
    /// A journal created on a store that has already applied entries (written by a release
    /// without the journal) is complete only after them.
    pub fn open(db: &crate::Disk, cap: usize, applied: u64) -> Result<Journal, JournalError> {
        let records = db.tree("journal")?;
        let meta = db.tree("journal_meta")?;
        if meta.get(KEY_COMPLETE_FROM)?.is_none() {
            let from = if applied == 0 { 0 } else { applied + 1 };
            meta.insert(KEY_COMPLETE_FROM, codec::encode(&from)?)?;
        }
        let len = Arc::new(AtomicUsize::new(records.len()));
        let through = Arc::new(AtomicU64::new(applied));
        let journal = Journal { records, meta, cap: cap.max(1), len, through };
        journal.trim()?;
        Ok(journal)
    }

    /// Records allocations committed at the given log indexes.
    pub fn record(&self, entries: &[(Place, JournalRecord)]) -> Result<(), JournalError> {
        for (place, record) in entries {
            if self.records.insert(place.key(), codec::encode(record)?)?.is_none() {
                self.len.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.trim()
    }

    /// Notes that every allocation up to `index` has been recorded (call after [`record`]ing
    /// an applied batch, with its last index).
    ///
    /// [`record`]: Journal::record
    pub fn applied_through(&self, index: u64) {
        self.through.fetch_max(index, Ordering::Release);
    }

    /// The highest applied log index whose allocations are recorded.
    pub fn through(&self) -> u64 {
        self.through.load(Ordering::Acquire)
    }

    /// Notes that allocations up to `index` may be missing (a snapshot was installed there).
    pub fn mark_gap(&self, index: u64) -> Result<(), JournalError> {
        // The mark first: a concurrent dump must never see the new `through` with the old mark.
        self.raise_complete_from(index.saturating_add(1))?;
        self.applied_through(index);
        Ok(())
    }

    fn complete_from(&self) -> Result<u64, JournalError> {
        match self.meta.get(KEY_COMPLETE_FROM)? {
            Some(v) => Ok(codec::decode(&v)?),
            None => Ok(0),
        }
    }

    fn raise_complete_from(&self, index: u64) -> Result<(), JournalError> {
        if index > self.complete_from()? {
            self.meta.insert(KEY_COMPLETE_FROM, codec::encode(&index)?)?;
        }
        Ok(())
    }

    /// Drops the oldest records beyond `cap`. The completeness mark is raised before each
    /// record goes, so a dump that misses a record also sees the raised mark.
    fn trim(&self) -> Result<(), JournalError> {
        while self.len.load(Ordering::Relaxed) > self.cap {
            let Some((k, _)) = self.records.first()? else {
                self.len.store(0, Ordering::Relaxed);
                break;
            };
            self.raise_complete_from(Place::of_key(&k)?.index.saturating_add(1))?;
            if self.records.remove(&k)?.is_some() {
                self.len.fetch_sub(1, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// The tags allocated after log index `after`, each with the counter before the first of
    /// those allocations (its `start`), and the index the answer is complete through: what a
    /// reader that follows the tags' rates asks, so it never scans every tag. `moved` is
    /// `None` when allocations after `after` may be missing (trimmed, or inside a snapshot
    /// this node installed); the caller goes on from `through`.
    pub fn moved_since(&self, after: u64) -> Result<Moved, JournalError> {
        let through = self.through.load(Ordering::Acquire);
        if self.complete_from()? > after.saturating_add(1) {
            return Ok(Moved { through, moved: None });
        }
        let mut moved = std::collections::HashMap::new();
        if through > after {
            // Every place of `through` too: a group's later keys sort after its 8-byte one.
            for item in self.records.range(after.saturating_add(1).to_be_bytes()..) {
                let (k, v) = item?;
                if Place::of_key(&k)?.index > through {
                    break;
                }
                let record: JournalRecord = codec::decode(&v)?;
                moved.entry(record.tag).or_insert(record.start);
            }
        }
        // A record trimmed under the walk has raised the mark by now.
        if self.complete_from()? > after.saturating_add(1) {
            return Ok(Moved { through, moved: None });
        }
        Ok(Moved { through, moved: Some(moved) })
    }

    /// The records, optionally only one tag's and/or one node's.
    pub fn dump(&self, tag: Option<&str>, node_id: Option<u64>) -> Result<JournalDump, JournalError> {
        // `through` before the walk (everything up to it is in the tree by then), the mark
        // after it (any record trimmed under the walk has raised it by then).
        let complete_through_index = self.through.load(Ordering::Acquire);
        let mut records = Vec::new();
        for item in self.records.iter() {
            let (k, v) = item?;
            let record: JournalRecord = codec::decode(&v)?;
            if tag.is_none_or(|t| t == record.tag) && node_id.is_none_or(|n| n == record.node_id) {
                records.push((Place::of_key(&k)?, record));
            }
        }
        let complete_from_index = self.complete_from()?;
        Ok(JournalDump { complete_from_index, complete_through_index, records })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(tag: &str, node_id: u64, start: i64) -> JournalRecord {
        JournalRecord { tag: tag.into(), node_id, start, end: start + 10, at_ms: 7 }
    }

    fn db() -> (tempfile::TempDir, crate::Disk) {
        crate::testing::disk()
    }

    #[test]
    fn records_filter_and_stay_complete_from_the_start() {
        let (_d, db) = db();
        let j = Journal::open(&db, 100, 0).unwrap();
        j.record(&[(Place::at(3), rec("a", 1, 1)), (Place::at(5), rec("b", 2, 1)), (Place::at(9), rec("a", 2, 11))])
            .unwrap();
        j.applied_through(10);
        let all = j.dump(None, None).unwrap();
        assert_eq!((all.complete_from_index, all.complete_through_index), (0, 10));
        assert_eq!(all.records.iter().map(|(p, _)| p.index).collect::<Vec<_>>(), vec![3, 5, 9]);
        assert_eq!(j.dump(Some("a"), None).unwrap().records.len(), 2);
        assert_eq!(j.dump(Some("a"), Some(2)).unwrap().records, vec![(Place::at(9), rec("a", 2, 11))]);
        // Re-applying an entry (crash between journal and state) does not count twice.
        j.record(&[(Place::at(9), rec("a", 2, 11))]).unwrap();
        assert_eq!(j.len.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn the_tags_moved_since_an_index_come_with_their_first_start() {
        let (_d, db) = db();
        let j = Journal::open(&db, 3, 0).unwrap();
        j.record(&[(Place::at(3), rec("a", 1, 1)), (Place::at(5), rec("b", 2, 1)), (Place::at(9), rec("a", 2, 11))])
            .unwrap();
        j.applied_through(10);
        let m = j.moved_since(0).unwrap();
        assert_eq!((m.through, m.moved), (10, Some([("a".to_string(), 1), ("b".to_string(), 1)].into())));
        assert_eq!(j.moved_since(5).unwrap().moved, Some([("a".to_string(), 11)].into()));
        assert_eq!(j.moved_since(10).unwrap().moved, Some(Default::default()));
        // Index 3 trimmed: from 0 the answer may miss it; from 3 on it is whole.
        j.record(&[(Place::at(12), rec("c", 1, 1))]).unwrap();
        j.applied_through(12);
        assert_eq!(j.moved_since(0).unwrap().moved, None);
        assert_eq!(j.moved_since(3).unwrap().moved.map(|m| m.len()), Some(3));
        // A snapshot installed at 20: nothing before 21 is known.
        j.mark_gap(20).unwrap();
        assert_eq!(j.moved_since(12).unwrap(), Moved { through: 20, moved: None });
        assert_eq!(j.moved_since(20).unwrap().moved, Some(Default::default()));
    }

    #[test]
    fn trimming_and_snapshots_move_the_completeness_mark() {
        let (_d, db) = db();
        let j = Journal::open(&db, 2, 0).unwrap();
        j.record(&[(Place::at(1), rec("a", 1, 1)), (Place::at(2), rec("a", 1, 11)), (Place::at(4), rec("a", 1, 21))])
            .unwrap();
        let d = j.dump(None, None).unwrap();
        assert_eq!(d.records.iter().map(|(p, _)| p.index).collect::<Vec<_>>(), vec![2, 4]);
        assert_eq!(d.complete_from_index, 2, "index 1 was trimmed");
        j.mark_gap(10).unwrap();
        let d = j.dump(None, None).unwrap();
        assert_eq!((d.complete_from_index, d.complete_through_index), (11, 10), "nothing known to be complete");
        j.mark_gap(5).unwrap();
        assert_eq!(j.dump(None, None).unwrap().complete_from_index, 11, "the mark never goes back");
        drop(j);
        // Reopening with a smaller cap trims; the mark survives.
        let j = Journal::open(&db, 1, 11).unwrap();
        let d = j.dump(None, None).unwrap();
        assert_eq!((d.complete_from_index, d.complete_through_index, d.records.len()), (11, 11, 1));
    }

    #[test]
    fn a_group_of_allocations_keeps_each_in_its_place_between_its_neighbours() {
        let (_d, db) = db();
        let j = Journal::open(&db, 100, 0).unwrap();
        let at = |index, position| Place { index, position };
        j.record(&[(at(4, 0), rec("a", 1, 1)), (at(5, 2), rec("c", 2, 1)), (at(6, 0), rec("a", 1, 11))]).unwrap();
        j.record(&[(at(5, 0), rec("a", 2, 21)), (at(5, 1), rec("b", 1, 1))]).unwrap();
        j.applied_through(5);
        let d = j.dump(None, None).unwrap();
        let places: Vec<(u64, u32)> = d.records.iter().map(|(p, _)| (p.index, p.position)).collect();
        assert_eq!(places, vec![(4, 0), (5, 0), (5, 1), (5, 2), (6, 0)]);
        assert_eq!(d.records[3].1, rec("c", 2, 1));
        // Everything of the group at `through`, nothing of the entry after it.
        let moved = j.moved_since(4).unwrap().moved.unwrap();
        assert_eq!(moved, [("a".to_string(), 21), ("b".to_string(), 1), ("c".to_string(), 1)].into());
        assert!(Place::of_key(&[0; 9]).is_err() && Place::of_key(&[0; 13]).is_err());
    }

    #[test]
    fn a_journal_new_to_a_store_that_applied_entries_claims_nothing_before_them() {
        let (_d, db) = db();
        let j = Journal::open(&db, 10, 40).unwrap();
        let d = j.dump(None, None).unwrap();
        assert_eq!((d.complete_from_index, d.complete_through_index), (41, 40));
        drop(j);
        // Reopened later, the mark stays where it was set.
        let j = Journal::open(&db, 10, 45).unwrap();
        assert_eq!(j.dump(None, None).unwrap().complete_from_index, 41);
    }
}
