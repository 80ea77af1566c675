//! The real-time order check of `monotonic` tags: if one call completed before another was
//! invoked, all of the first's IDs are smaller than all of the second's; every ID is unique and
//! each call's IDs increase.
use std::collections::HashSet;

/// One completed call: when it was invoked and when it completed (any one monotonic clock, in
/// nanoseconds), and the IDs it returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedOp {
    pub invoked: u64,
    pub completed: u64,
    pub ids: Vec<i64>,
}

/// The first violation found, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderViolation {
    /// An ID returned twice.
    Duplicate(i64),
    /// A call whose IDs do not increase.
    NotIncreasing(TimedOp),
    /// `later` was invoked after `earlier` completed, yet got an ID not above all of
    /// `earlier`'s.
    RealTime { earlier: TimedOp, later: TimedOp },
}

/// Checks `ops` (in any order; calls without IDs are ignored). O(n log n): calls sorted by
/// invocation are swept while a second pointer over the calls sorted by completion keeps the
/// largest ID of every call that completed strictly before the current invocation.
pub fn check_real_time_order(ops: &[TimedOp]) -> Result<(), OrderViolation> {
    let ops: Vec<&TimedOp> = ops.iter().filter(|o| !o.ids.is_empty()).collect();
    let mut seen = HashSet::new();
    for op in &ops {
        if op.ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(OrderViolation::NotIncreasing((*op).clone()));
        }
        for id in &op.ids {
            if !seen.insert(*id) {
                return Err(OrderViolation::Duplicate(*id));
            }
        }
    }
    let mut by_invoke = ops.clone();
    by_invoke.sort_by_key(|o| o.invoked);
    let mut by_complete = ops.clone();
    by_complete.sort_by_key(|o| o.completed);
    // The completed call with the largest ID so far.
    let mut max: Option<&TimedOp> = None;
    let mut done = 0;
    for op in by_invoke {
        while done < by_complete.len() && by_complete[done].completed < op.invoked {
            let c = by_complete[done];
            if max.is_none_or(|m| c.ids[c.ids.len() - 1] > m.ids[m.ids.len() - 1]) {
                max = Some(c);
            }
            done += 1;
        }
        if let Some(m) = max {
            if op.ids[0] <= m.ids[m.ids.len() - 1] {
                return Err(OrderViolation::RealTime { earlier: m.clone(), later: op.clone() });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(invoked: u64, completed: u64, ids: &[i64]) -> TimedOp {
        TimedOp { invoked, completed, ids: ids.to_vec() }
    }

    #[test]
    fn overlapping_calls_may_come_in_any_order() {
        // b overlaps a and got smaller IDs: allowed. c follows both and is above both.
        let ops = [op(0, 10, &[5, 6]), op(5, 15, &[3]), op(20, 30, &[7, 8]), op(25, 26, &[])];
        assert_eq!(check_real_time_order(&ops), Ok(()));
    }

    #[test]
    fn a_later_call_below_an_earlier_one_is_caught() {
        let ops = [op(0, 10, &[5, 6]), op(11, 12, &[4, 9])];
        assert!(matches!(check_real_time_order(&ops), Err(OrderViolation::RealTime { .. })));
        // Even when the earlier call with the larger ID is not the last to complete.
        let ops = [op(0, 5, &[100]), op(1, 9, &[50]), op(10, 11, &[60])];
        match check_real_time_order(&ops) {
            Err(OrderViolation::RealTime { earlier, later }) => assert_eq!((earlier.ids[0], later.ids[0]), (100, 60)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn touching_times_are_concurrent_not_ordered() {
        // Completed at 10, invoked at 10: not strictly before, so no order is required.
        assert_eq!(check_real_time_order(&[op(0, 10, &[9]), op(10, 12, &[1])]), Ok(()));
    }

    #[test]
    fn duplicates_and_unordered_batches_are_caught() {
        assert_eq!(check_real_time_order(&[op(0, 1, &[1, 2]), op(0, 1, &[2])]), Err(OrderViolation::Duplicate(2)));
        assert!(matches!(check_real_time_order(&[op(0, 1, &[3, 2])]), Err(OrderViolation::NotIncreasing(_))));
    }
}
