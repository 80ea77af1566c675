//! Checks IDs handed out against committed allocations.
use std::collections::{BTreeMap, HashMap};

use leaf_api::types::AllocationView;
use serde::Serialize;

/// What the checker found for one tag.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize)]
pub struct SegmentReport {
    /// IDs checked.
    pub ids: usize,
    /// IDs seen more than once, with how many times.
    pub duplicates: BTreeMap<i64, usize>,
    /// IDs that lie in no committed allocation.
    pub outside: Vec<i64>,
    /// Pairs of committed allocations that overlap.
    pub overlapping: Vec<(AllocationView, AllocationView)>,
}

impl SegmentReport {
    pub fn is_valid(&self) -> bool {
        self.duplicates.is_empty() && self.outside.is_empty() && self.overlapping.is_empty()
    }
}

/// Checks `ids` (one tag, in any order) against that tag's committed `allocations`.
pub fn check_segment_ids(ids: &[i64], allocations: &[AllocationView]) -> SegmentReport {
    let mut report = SegmentReport { ids: ids.len(), ..Default::default() };
    let mut counts: HashMap<i64, usize> = HashMap::with_capacity(ids.len());
    for &id in ids {
        *counts.entry(id).or_default() += 1;
    }
    report.duplicates = counts.into_iter().filter(|&(_, n)| n > 1).collect();

    let mut allocs = allocations.to_vec();
    allocs.sort_by_key(|a| (a.start, a.end));
    for w in allocs.windows(2) {
        if w[0].end > w[1].start {
            report.overlapping.push((w[0].clone(), w[1].clone()));
        }
    }
    for &id in ids {
        let i = allocs.partition_point(|a| a.start <= id);
        if i == 0 || id >= allocs[i - 1].end {
            report.outside.push(id);
        }
    }
    report.outside.sort_unstable();
    report.outside.dedup();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(start: i64, end: i64) -> AllocationView {
        AllocationView { tag: "t".into(), node_id: 1, start, end, log_index: start as u64, position: 0, at_ms: 0 }
    }

    #[test]
    fn clean_history_is_valid() {
        let r = check_segment_ids(&[5, 1, 2, 11, 12], &[alloc(10, 20), alloc(1, 10)]);
        assert!(r.is_valid(), "{r:?}");
        assert_eq!(r.ids, 5);
    }

    #[test]
    fn planted_duplicate_is_reported() {
        let r = check_segment_ids(&[1, 2, 3, 2, 2], &[alloc(1, 10)]);
        assert_eq!(r.duplicates, BTreeMap::from([(2, 3)]));
        assert!(!r.is_valid());
    }

    #[test]
    fn ids_outside_allocations_are_reported() {
        // 10 is the end of [1, 10): outside. 0 is below everything, 25 above.
        let r = check_segment_ids(&[1, 9, 10, 0, 25, 15], &[alloc(1, 10), alloc(15, 20)]);
        assert_eq!(r.outside, vec![0, 10, 25]);
        assert!(!r.is_valid());
    }

    #[test]
    fn overlapping_allocations_are_reported() {
        let r = check_segment_ids(&[], &[alloc(1, 10), alloc(9, 20)]);
        assert_eq!(r.overlapping.len(), 1);
        assert!(!r.is_valid());
    }
}
