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

/// Most entries remembered: past it the oldest are forgotten (a node that neither snapshots
/// nor purges then bounds this at 16 MB). [`LogWeights::since`] an index below the first kept
/// record then also counts forgotten entries before that index: a snapshot may come early,
/// never late, and a purge point is only found among kept records.
const MAX_RECORDS: usize = 1_000_000;

/// The cumulative weight of the applied entries since the node started, by log index. Cheap to
/// clone; clones share the records. Memory only: after a restart, the log the node did not
/// re-apply (a batch is checkpointed with its entry) is not weighed, and counts by entries
/// again until the next snapshot.
#[derive(Debug, Clone, Default)]
pub struct LogWeights {
    records: Arc<Mutex<VecDeque<(u64, u64)>>>,
}

impl LogWeights {
    fn lock(&self) -> MutexGuard<'_, VecDeque<(u64, u64)>> {
        // Poisoned only by a panic between two plain pushes: the records are still ordered.
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the entry at `index` (above every recorded one) of `weight`.
    pub(crate) fn push(&self, index: u64, weight: u64) {
        let mut r = self.lock();
        if r.back().is_some_and(|(i, _)| *i >= index) {
            // A snapshot installed below what was applied: the records no longer describe
            // the log ahead.
            r.clear();
        }
        let total = r.back().map_or(0, |(_, w)| *w).saturating_add(weight);
        r.push_back((index, total));
        if r.len() > MAX_RECORDS {
            r.pop_front();
        }
    }

    /// The weight of the recorded entries after `index`.
    pub fn since(&self, index: u64) -> u64 {
        let r = self.lock();
        let Some(&(_, last)) = r.back() else { return 0 };
        let n = r.partition_point(|(i, _)| *i <= index);
        match n {
            0 => last,
            n => last - r[n - 1].1,
        }
    }

    /// The highest index `p` at most `through` such that the recorded entries in
    /// `(p, through]` weigh at least `keep`: purging the log through `p` keeps `keep` worth of
    /// entries behind a snapshot at `through`, as openraft keeps `keep` entries. `None` if
    /// the records do not reach back that far.
    pub fn purge_point(&self, through: u64, keep: u64) -> Option<u64> {
        let r = self.lock();
        let end = r.partition_point(|(i, _)| *i <= through);
        let top = r.get(end.checked_sub(1)?)?.1;
        // The last record whose cumulative weight leaves at least `keep` after it.
        let n = r.partition_point(|(_, w)| *w <= top && top - *w >= keep);
        Some(r.get(n.checked_sub(1)?)?.0)
    }

    /// Forgets the records through `index` (the log was purged through it).
    pub fn forget_through(&self, index: u64) {
        let mut r = self.lock();
        // Keep the last forgotten record: it is the base of the weights after it.
        while r.len() > 1 && r[1].0 <= index {
            r.pop_front();
        }
    }

    /// How many entries are recorded.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no entry is recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
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
}
