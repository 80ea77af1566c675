//! [`LogWeights`]: how much the applied, unpurged log holds, by what its entries changed
//! rather than by their count, for the node's snapshot and purge decisions.
//!
//! openraft snapshots every `snapshot_every` entries and keeps `keep_logs_after_snapshot`
//! entries behind a snapshot. A batch of tags is one entry of up to 5,000 tags (about 1 MiB), so
//! by count a million tags are 200 entries: no snapshot is due, and a new node replays the
//! whole batch log instead of receiving a snapshot (62.6 s and 966 MB of RSS, measured). Here
//! an entry weighs what it changes ([`crate::command::Op::weight`]: a batch counts each of its
//! tags; every other entry 1), so with ordinary entries the decisions are openraft's own.
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::EntryPayload;

use crate::types::Entry;

/// What `entry` weighs: its operation's [`crate::command::Op::weight`], or 1.
pub fn entry_weight(entry: &Entry) -> u64 {
    match &entry.payload {
        EntryPayload::Normal(cmd) => cmd.op.weight(),
        _ => 1,
    }
}

/// Most entries remembered: past it the oldest are forgotten (a node that neither snapshots
/// nor purges then bounds this at 16 MB).
const MAX_RECORDS: usize = 1_000_000;

/// `(log index, cumulative weight through it)`, by index; the weights strictly increase.
#[derive(Debug, Default)]
struct Records {
    list: VecDeque<(u64, u64)>,
    /// The cumulative weight of the last record dropped for [`MAX_RECORDS`] (the base of the
    /// first record kept).
    floor: u64,
}

/// The cumulative weight of the applied entries, by log index: those this node applied since
/// it started, and those of the log before them that [`LogWeights::seed`] read. Cheap to clone;
/// clones share the records.
#[derive(Debug, Clone, Default)]
pub struct LogWeights {
    records: Arc<Mutex<Records>>,
}

impl LogWeights {
    fn lock(&self) -> MutexGuard<'_, Records> {
        // Poisoned only by a panic between two plain pushes: the records are still ordered.
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first recorded index, if any.
    pub fn first(&self) -> Option<u64> {
        self.lock().list.front().map(|(i, _)| *i)
    }

    /// Records `entries` (`(index, weight)`, by index, each below every recorded index) before
    /// the recorded ones: the weights of the log a restarted node did not re-apply, read from
    /// its log store. Entries not below the first record are ignored.
    pub fn seed(&self, entries: &[(u64, u64)]) {
        let mut r = self.lock();
        let first = r.list.front().map_or(u64::MAX, |(i, _)| *i);
        let mut seeded = VecDeque::new();
        let mut total = 0u64;
        for &(index, weight) in entries {
            if index >= first || seeded.back().is_some_and(|(i, _)| *i >= index) {
                continue;
            }
            total = total.saturating_add(weight);
            seeded.push_back((index, total));
        }
        if seeded.is_empty() {
            return;
        }
        // The recorded entries now follow the seeded ones, whose weights start from 0.
        let floor = r.floor;
        for (_, w) in r.list.iter_mut() {
            *w = (*w - floor).saturating_add(total);
        }
        r.floor = 0;
        seeded.append(&mut r.list);
        r.list = seeded;
        r.list.truncate(MAX_RECORDS);
    }

    /// Records the entry at `index` (above every recorded one) of `weight`.
    pub(crate) fn push(&self, index: u64, weight: u64) {
        let mut r = self.lock();
        if r.list.back().is_some_and(|(i, _)| *i >= index) {
            // A snapshot installed below what was applied: the records no longer describe
            // the log ahead.
            r.list.clear();
            r.floor = 0;
        }
        let total = r.list.back().map_or(r.floor, |(_, w)| *w).saturating_add(weight);
        r.list.push_back((index, total));
        if r.list.len() > MAX_RECORDS {
            if let Some((_, w)) = r.list.pop_front() {
                r.floor = w;
            }
        }
    }

    /// The weight of the recorded entries after `index`.
    pub fn since(&self, index: u64) -> u64 {
        let r = self.lock();
        let Some(&(_, last)) = r.list.back() else { return 0 };
        let n = r.list.partition_point(|(i, _)| *i <= index);
        match n {
            0 => last - r.floor,
            n => last - r.list[n - 1].1,
        }
    }

    /// The highest index `p` at most `through` such that the recorded entries in
    /// `(p, through]` weigh at least `keep`: purging the log through `p` keeps `keep` worth of
    /// entries behind a snapshot at `through`, as openraft keeps `keep` entries. `None` if
    /// the records do not reach back that far.
    pub fn purge_point(&self, through: u64, keep: u64) -> Option<u64> {
        let r = self.lock();
        let end = r.list.partition_point(|(i, _)| *i <= through);
        let top = r.list.get(end.checked_sub(1)?)?.1;
        // The last record whose cumulative weight leaves at least `keep` after it.
        let n = r.list.partition_point(|(_, w)| *w <= top && top - *w >= keep);
        Some(r.list.get(n.checked_sub(1)?)?.0)
    }

    /// Forgets the records through `index` (the log was purged through it).
    pub fn forget_through(&self, index: u64) {
        let mut r = self.lock();
        // Keep the last forgotten record: it is the base of the weights after it.
        while r.list.len() > 1 && r.list[1].0 <= index {
            if let Some((_, w)) = r.list.pop_front() {
                r.floor = w;
            }
        }
    }

    /// How many entries are recorded.
    pub fn len(&self) -> usize {
        self.lock().list.len()
    }

    /// Whether no entry is recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().list.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_after_an_index_and_find_the_purge_point() {
        let w = LogWeights::default();
        for i in 1..=10 {
            w.push(i, 1);
        }
        assert_eq!(w.since(4), 6);
        assert_eq!(w.since(0), 10);
        // Unit weights: openraft's rule, keep 3 entries behind a snapshot at 10.
        assert_eq!(w.purge_point(10, 3), Some(7));
        assert_eq!(w.purge_point(8, 3), Some(5));
        // A batch of 5,000 tags at 11: a snapshot at 11 keeping 3 purges through 10.
        w.push(11, 5_000);
        w.push(12, 1);
        assert_eq!(w.since(10), 5_001);
        assert_eq!(w.purge_point(11, 3), Some(10));
        // Entry 12 alone weighs less than 3: the batch stays too.
        assert_eq!(w.purge_point(12, 3), Some(10));
        assert_eq!(w.purge_point(12, 1), Some(11));
        assert_eq!(w.purge_point(12, 5_001), Some(10));
        // Entries after the snapshot do not count.
        assert_eq!(w.purge_point(10, 3), Some(7));
        assert_eq!(w.purge_point(10, 0), Some(10));
        // Not recorded that far back: nothing to say.
        assert_eq!(w.purge_point(12, 6_000), None);
        w.forget_through(10);
        assert_eq!((w.len(), w.since(10), w.since(11)), (3, 5_001, 1));
        assert_eq!(w.purge_point(12, 1), Some(11));
        // An install below what was recorded starts over.
        w.push(5, 1);
        assert_eq!((w.len(), w.since(0)), (1, 1));
        assert!(LogWeights::default().purge_point(10, 1).is_none());
    }

    #[test]
    fn a_restarted_node_seeds_the_weights_of_the_log_it_did_not_re_apply() {
        let w = LogWeights::default();
        // Applied since the start: 8 and 9.
        w.push(8, 1);
        w.push(9, 1);
        // Read from the log store: 5 to 7 (and 9 again, ignored), a batch at 6.
        w.seed(&[(5, 1), (6, 5_000), (7, 1), (9, 1)]);
        assert_eq!((w.first(), w.len()), (Some(5), 5));
        assert_eq!(w.since(4), 5_004);
        assert_eq!(w.since(5), 5_003);
        assert_eq!(w.since(6), 3);
        assert_eq!(w.purge_point(9, 3), Some(6));
        w.push(10, 1);
        assert_eq!(w.since(9), 1);
        // Forgotten through 6: the weights after it stay exact, and so does the total.
        w.forget_through(6);
        assert_eq!((w.since(6), w.since(0)), (4, 5_004));
        // Seeding an empty record set.
        let e = LogWeights::default();
        e.seed(&[(3, 2), (4, 3)]);
        assert_eq!((e.since(0), e.since(3)), (5, 3));
    }
}
