//! What the records of a failover run say, as pure functions: per request kind and client, the
//! longest time without a success at the nodes that stayed up (the *window*), the errors, and
//! the segment IDs a fault wasted.
//!
//! A window over `[from, to)` is the longest of: `from` to the first success, each success to
//! the next, the last success to `to` (successes by their end time). A retrying client's
//! requests all count; a plain client's only at the nodes other than the one the fault hit, and
//! its window is the worst of those nodes' (a client pinned to that node saw it).
use std::collections::BTreeMap;

use leaf_api::types::AllocationView;

use super::{Kind, Record, Via};

/// Which client a window or error count is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    /// `leaf-client` over every node with its retries.
    Retrying,
    /// One attempt at one node that stayed up (the worst of those nodes).
    Plain,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Retrying => "leaf-client (retries, failover)",
            Mode::Plain => "one attempt at one surviving node",
        }
    }
}

/// Whether `r` is a request of the survivors' view of a fault of node `victim`.
fn counts(r: &Record, victim: Option<u64>) -> bool {
    match r.via {
        Via::Retrying => true,
        Via::Plain(node) => Some(node) != victim,
    }
}

/// The longest gap between successes (end times, sorted) within `[from, to)`, counting from
/// `from` and to `to`.
pub fn longest_gap(ok_ends: &[u64], from: u64, to: u64) -> u64 {
    let mut last = from;
    let mut longest = 0;
    for &t in ok_ends.iter().filter(|&&t| t >= from && t < to) {
        longest = longest.max(t - last);
        last = t;
    }
    longest.max(to.saturating_sub(last))
}

/// The window of each kind and client over `[from, to)`, node `victim` (if any) excluded from
/// the plain clients, in nanoseconds. `records` sorted by end time.
pub fn windows(records: &[Record], from: u64, to: u64, victim: Option<u64>) -> BTreeMap<(Kind, Mode), u64> {
    let mut oks: BTreeMap<(Kind, Via), Vec<u64>> = BTreeMap::new();
    for r in records.iter().filter(|r| counts(r, victim)) {
        let list = oks.entry((r.kind, r.via)).or_default();
        if r.ok && r.end_ns >= from && r.end_ns < to {
            list.push(r.end_ns);
        }
    }
    let mut out = BTreeMap::new();
    for ((kind, via), ends) in oks {
        let mode = if via.is_plain() { Mode::Plain } else { Mode::Retrying };
        let gap = longest_gap(&ends, from, to);
        let w = out.entry((kind, mode)).or_insert(0);
        *w = (*w).max(gap);
    }
    out
}

/// Errors per kind and client and error class over `[from, to)` (by end time), node `victim`
/// excluded from the plain clients.
pub fn errors(
    records: &[Record],
    from: u64,
    to: u64,
    victim: Option<u64>,
) -> BTreeMap<(Kind, Mode), BTreeMap<String, u64>> {
    let mut out: BTreeMap<(Kind, Mode), BTreeMap<String, u64>> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.ok && r.end_ns >= from && r.end_ns < to && counts(r, victim)) {
        let mode = if r.via.is_plain() { Mode::Plain } else { Mode::Retrying };
        let class = r.error.clone().unwrap_or_default();
        *out.entry((r.kind, mode)).or_default().entry(class).or_default() += 1;
    }
    out
}

/// How many of `sorted` lie in `[start, end)` (none when the range is empty).
fn count_in(sorted: &[i64], start: i64, end: i64) -> u64 {
    if start >= end {
        return 0;
    }
    (sorted.partition_point(|&x| x < end) - sorted.partition_point(|&x| x < start)) as u64
}

/// IDs of `victim`'s allocations committed at log indexes in `(after, upto]` that were neither
/// served (`served`, sorted) nor are still in a node's buffers (`buffered`: `[position, end)`
/// ranges, from `/cache` at the end of the run): the IDs the fault that took `victim`'s
/// buffers wasted.
pub fn wasted(
    allocations: &[AllocationView],
    served: &[i64],
    buffered: &[(i64, i64)],
    victim: u64,
    after: u64,
    upto: u64,
) -> u64 {
    allocations
        .iter()
        .filter(|a| a.node_id == victim && a.log_index > after && a.log_index <= upto)
        .map(|a| {
            let len = (a.end - a.start).max(0) as u64;
            let kept: u64 = buffered
                .iter()
                .map(|&(s, e)| (e.min(a.end) - s.max(a.start)).max(0) as u64)
                .sum::<u64>()
                .saturating_sub(buffered.iter().map(|&(s, e)| count_in(served, s.max(a.start), e.min(a.end))).sum());
            len.saturating_sub(count_in(served, a.start, a.end)).saturating_sub(kept)
        })
        .sum()
}

/// The nearest-rank `p` quantile (0 < p ≤ 1) of `values` (any order); 0 for none.
pub fn quantile(values: &[u64], p: f64) -> u64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return 0;
    }
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: Kind, via: Via, end_ns: u64, ok: bool) -> Record {
        let error = (!ok).then(|| "503 unavailable".to_string());
        Record { kind, via, start_ns: end_ns.saturating_sub(1), end_ns, ok, id: None, error }
    }

    #[test]
    fn the_longest_gap_counts_from_the_fault_and_to_the_end() {
        assert_eq!(longest_gap(&[], 100, 500), 400);
        assert_eq!(longest_gap(&[50, 150, 160, 400], 100, 500), 240);
        assert_eq!(longest_gap(&[50, 110, 480], 100, 500), 370);
        // Never recovered: from the last success to the end.
        assert_eq!(longest_gap(&[110, 120], 100, 1000), 880);
    }

    #[test]
    fn plain_windows_are_the_worst_surviving_node_and_ignore_the_victim() {
        let mut rs = Vec::new();
        for t in (0..1000).step_by(10) {
            rs.push(rec(Kind::Segment, Via::Plain(1), t, true));
            // Node 2 stops for 300 ns after the fault at 200.
            rs.push(rec(Kind::Segment, Via::Plain(2), t, !(200..500).contains(&t)));
            // Node 3 is the victim: never succeeds after the fault.
            rs.push(rec(Kind::Segment, Via::Plain(3), t, t < 200));
            rs.push(rec(Kind::Segment, Via::Retrying, t, !(200..260).contains(&t)));
        }
        rs.sort_by_key(|r| r.end_ns);
        let w = windows(&rs, 200, 1000, Some(3));
        assert_eq!(w[&(Kind::Segment, Mode::Plain)], 300);
        assert_eq!(w[&(Kind::Segment, Mode::Retrying)], 60);
        let e = errors(&rs, 200, 1000, Some(3));
        assert_eq!(e[&(Kind::Segment, Mode::Plain)]["503 unavailable"], 30);
        assert_eq!(e[&(Kind::Segment, Mode::Retrying)]["503 unavailable"], 6);
    }

    fn alloc(node_id: u64, start: i64, end: i64, log_index: u64) -> AllocationView {
        AllocationView { tag: "t".into(), node_id, start, end, log_index, position: 0, at_ms: 0 }
    }

    #[test]
    fn wasted_ids_are_the_victims_unserved_unbuffered_ones_in_its_index_range() {
        let allocs = [alloc(1, 0, 100, 5), alloc(2, 100, 200, 6), alloc(1, 200, 300, 7), alloc(1, 300, 400, 9)];
        let served: Vec<i64> = (0..60).chain(200..210).chain(300..320).collect();
        // [0,100): 40 wasted; [200,300): 90 wasted; [300,400) is after `upto`.
        assert_eq!(wasted(&allocs, &served, &[], 1, 0, 8), 130);
        // Node 1 still buffers [250, 300): those are not wasted.
        assert_eq!(wasted(&allocs, &served, &[(250, 300)], 1, 0, 8), 80);
        // Only the allocations after index 5.
        assert_eq!(wasted(&allocs, &served, &[], 1, 5, 9), 170);
        assert_eq!(wasted(&allocs, &served, &[], 2, 0, 9), 100);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v = [5, 1, 4, 2, 3, 10, 9, 8, 7, 6];
        assert_eq!(quantile(&v, 0.5), 5);
        assert_eq!(quantile(&v, 0.99), 10);
        assert_eq!(quantile(&v, 1.0), 10);
        assert_eq!(quantile(&[], 0.5), 0);
    }
}
