//! The check of IDs served by several regions: what each region's clients got, put together.
//!
//! Regions promise, per profile (the book's "Regions"):
//! - **no duplicate anywhere**: a tag's IDs are distinct whichever region served them, and so
//!   are all snowflake IDs, whatever their key ([`RegionViolation::Duplicate`]);
//! - **each region's order**: the IDs one node of a region hands one sequential client rise,
//!   for segment, daily and snowflake IDs ([`RegionViolation::NotRising`]; obfuscated IDs are
//!   unordered by design);
//! - **monotonic order at the home, across moves**: a call to a monotonic tag that completed
//!   before another was invoked got smaller IDs, whichever region served each
//!   ([`crate::order::check_real_time_order`]).
//!
//! Gapless series are checked by [`crate::gapless_check`] against the home's ledger.
use std::collections::{BTreeMap, HashMap};

use crate::order::{check_real_time_order, OrderViolation, TimedOp};

/// The profile a call asked for (its uniqueness space and order rule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Segment,
    Daily,
    Obfuscated,
    Monotonic,
    Snowflake,
}

/// One answered call of a sequential client of one node of a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionCall {
    pub region: String,
    pub node: u64,
    pub kind: Kind,
    /// The tag (a snowflake call's key).
    pub tag: String,
    pub op: TimedOp,
}

/// A broken promise of a set of regions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionViolation {
    /// `id` handed out twice in one space (a tag, or `snowflake`), by the regions named.
    Duplicate { space: String, id: i64, first: String, second: String },
    /// A node of `region` answered its client `after` once it had answered `before` (not below
    /// it) for `tag`.
    NotRising { region: String, node: u64, tag: String, before: i64, after: i64 },
    /// A monotonic tag's real-time order broken.
    Monotonic { tag: String, violation: OrderViolation },
}

/// Checks `calls` (in any order), collecting every violation.
pub fn check(calls: &[RegionCall]) -> Vec<RegionViolation> {
    let mut out = Vec::new();
    // Uniqueness: a tag's IDs, or every snowflake ID, with the region that served each first.
    let mut seen: HashMap<(String, i64), &str> = HashMap::new();
    for c in calls {
        let space = match c.kind {
            Kind::Snowflake => "snowflake".to_string(),
            _ => c.tag.clone(),
        };
        for &id in &c.op.ids {
            if let Some(first) = seen.insert((space.clone(), id), &c.region) {
                out.push(RegionViolation::Duplicate {
                    space: space.clone(),
                    id,
                    first: first.to_string(),
                    second: c.region.clone(),
                });
            }
        }
    }
    // Each region's order: per (region, node, tag), in the order the client invoked them; the
    // first step back of each.
    let mut streams: BTreeMap<(&str, u64, &str), Vec<&RegionCall>> = BTreeMap::new();
    for c in calls.iter().filter(|c| matches!(c.kind, Kind::Segment | Kind::Daily | Kind::Snowflake)) {
        streams.entry((&c.region, c.node, &c.tag)).or_default().push(c);
    }
    for ((region, node, tag), mut stream) in streams {
        stream.sort_by_key(|c| c.op.invoked);
        let mut last: Option<i64> = None;
        for id in stream.iter().flat_map(|c| &c.op.ids) {
            if let Some(before) = last.filter(|before| id <= before) {
                out.push(RegionViolation::NotRising {
                    region: region.to_string(),
                    node,
                    tag: tag.to_string(),
                    before,
                    after: *id,
                });
                break;
            }
            last = Some(last.map_or(*id, |l| l.max(*id)));
        }
    }
    // Monotonic tags: real-time order across every region.
    let mut monotonic: BTreeMap<&str, Vec<TimedOp>> = BTreeMap::new();
    for c in calls.iter().filter(|c| c.kind == Kind::Monotonic) {
        monotonic.entry(&c.tag).or_default().push(c.op.clone());
    }
    for (tag, ops) in monotonic {
        if let Err(violation) = check_real_time_order(&ops) {
            out.push(RegionViolation::Monotonic { tag: tag.to_string(), violation });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(
        region: &str,
        node: u64,
        kind: Kind,
        tag: &str,
        (invoked, completed): (u64, u64),
        ids: &[i64],
    ) -> RegionCall {
        RegionCall {
            region: region.into(),
            node,
            kind,
            tag: tag.into(),
            op: TimedOp { invoked, completed, ids: ids.to_vec() },
        }
    }

    #[test]
    fn distinct_rising_ids_in_order_pass() {
        let calls = [
            call("eu", 11, Kind::Segment, "order", (0, 1), &[1, 2]),
            call("us", 21, Kind::Segment, "order", (0, 1), &[101, 102]),
            call("eu", 11, Kind::Segment, "order", (2, 3), &[3, 4]),
            // Another tag may hold the same numbers.
            call("eu", 11, Kind::Daily, "day", (0, 1), &[1, 2]),
            call("eu", 11, Kind::Obfuscated, "obf", (0, 1), &[9, 5]),
            call("eu", 11, Kind::Snowflake, "k", (0, 1), &[1000, 1001]),
            call("us", 21, Kind::Snowflake, "j", (0, 1), &[2000]),
            call("eu", 11, Kind::Monotonic, "seq", (0, 1), &[1, 2]),
            call("us", 21, Kind::Monotonic, "seq", (2, 3), &[3]),
        ];
        assert_eq!(check(&calls), vec![]);
    }

    #[test]
    fn an_id_twice_across_regions_is_caught() {
        let calls = [
            call("eu", 11, Kind::Segment, "order", (0, 1), &[1, 2]),
            call("us", 21, Kind::Segment, "order", (0, 1), &[2, 3]),
        ];
        assert_eq!(
            check(&calls),
            vec![RegionViolation::Duplicate { space: "order".into(), id: 2, first: "eu".into(), second: "us".into() }]
        );
        // Snowflake IDs share one space across keys.
        let calls =
            [call("eu", 11, Kind::Snowflake, "k", (0, 1), &[7]), call("us", 21, Kind::Snowflake, "j", (0, 1), &[7])];
        assert!(matches!(check(&calls)[..], [RegionViolation::Duplicate { id: 7, .. }]));
    }

    #[test]
    fn a_node_going_back_is_caught_but_two_nodes_may_interleave() {
        let calls = [
            call("eu", 11, Kind::Segment, "order", (2, 3), &[3, 4]),
            call("eu", 11, Kind::Segment, "order", (0, 1), &[5, 6]),
            call("eu", 12, Kind::Segment, "order", (0, 1), &[1, 2]),
        ];
        assert_eq!(
            check(&calls),
            vec![RegionViolation::NotRising {
                region: "eu".into(),
                node: 11,
                tag: "order".into(),
                before: 6,
                after: 3
            }]
        );
        let calls =
            [call("eu", 11, Kind::Snowflake, "k", (0, 1), &[9]), call("eu", 11, Kind::Snowflake, "k", (2, 3), &[8])];
        assert!(matches!(check(&calls)[..], [RegionViolation::NotRising { before: 9, after: 8, .. }]));
    }

    #[test]
    fn a_monotonic_tag_out_of_real_time_order_across_regions_is_caught() {
        let calls = [
            call("eu", 11, Kind::Monotonic, "seq", (0, 1), &[10]),
            call("us", 21, Kind::Monotonic, "seq", (2, 3), &[5]),
        ];
        assert!(matches!(
            &check(&calls)[..],
            [RegionViolation::Monotonic { violation: OrderViolation::RealTime { .. }, .. }]
        ));
        // Overlapping calls may come in either order.
        let calls = [
            call("eu", 11, Kind::Monotonic, "seq", (0, 3), &[10]),
            call("us", 21, Kind::Monotonic, "seq", (2, 4), &[5]),
        ];
        assert_eq!(check(&calls), vec![]);
    }
}
