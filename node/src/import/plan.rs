//! The import plan: Leaf's `leaf_alloc` rows → the tags to create, each starting safely above
//! anything a Leaf server can have handed out. Pure: no I/O.
//!
//! **The margin rule.** A Leaf server allocates with `UPDATE leaf_alloc SET max_id = max_id +
//! step` and then hands out `[max_id - step, max_id)`, so every ID Leaf issued for a row is
//! below the `max_id` read from the table, *provided no Leaf server allocates after the read*.
//! The cut-over therefore fences Leaf first (stop its servers, or revoke their `UPDATE` right
//! on the table). For an allocation already in flight at the fence, the new tag starts
//! `margin_allocations` whole allocations further: Leaf's in-memory dynamic step can grow an
//! allocation to `max(step, 1,000,000)` (its `MAX_STEP`), so the margin is
//! `margin_allocations × max(step, 1,000,000)`. With the default of one allocation the
//! cluster's first ID is above anything one racing allocation can reach.
use std::collections::BTreeSet;

use leaf_api::tag::{validate_step, validate_tag};

/// Leaf's `SegmentIDGenImpl.MAX_STEP`: the largest step its dynamic step grows to.
pub const LEAF_MAX_STEP: i64 = 1_000_000;

/// One row of `leaf_alloc`, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafRow {
    pub biz_tag: String,
    pub max_id: i64,
    pub step: i64,
    pub description: Option<String>,
}

/// What the import does with one row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    /// Create the tag with this first ID (and this description, cut to the limit).
    Create { first_id: i64, description: String, truncated: bool },
    /// The row cannot be imported; the reason says why.
    Invalid(String),
}

/// One row and its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRow {
    pub row: LeafRow,
    pub planned: Planned,
}

/// The first ID of a row's new tag: `max_id + margin_allocations × max(step, LEAF_MAX_STEP)`.
pub fn first_id(max_id: i64, step: i64, margin_allocations: u32) -> Option<i64> {
    let per = step.max(LEAF_MAX_STEP);
    per.checked_mul(i64::from(margin_allocations)).and_then(|m| max_id.checked_add(m))
}

/// Plans every row. Duplicate tags (possible in a CSV) make every copy invalid.
pub fn plan(rows: Vec<LeafRow>, margin_allocations: u32) -> Vec<PlanRow> {
    let mut seen = BTreeSet::new();
    let dups: BTreeSet<String> =
        rows.iter().filter(|r| !seen.insert(r.biz_tag.clone())).map(|r| r.biz_tag.clone()).collect();
    rows.into_iter()
        .map(|row| {
            let planned = check(&row, margin_allocations, dups.contains(&row.biz_tag));
            PlanRow { row, planned }
        })
        .collect()
}

fn check(row: &LeafRow, margin_allocations: u32, duplicate: bool) -> Planned {
    if duplicate {
        return Planned::Invalid("the tag is listed more than once".into());
    }
    if let Err(e) = validate_tag(&row.biz_tag) {
        return Planned::Invalid(format!("not a valid tag name here: {e}"));
    }
    if let Err(e) = validate_step(row.step) {
        return Planned::Invalid(e.to_string());
    }
    if row.max_id < 0 {
        return Planned::Invalid(format!("max_id {} is negative", row.max_id));
    }
    let Some(first_id) = first_id(row.max_id, row.step, margin_allocations) else {
        return Planned::Invalid(format!("max_id {} plus the margin overflows a 64-bit ID", row.max_id));
    };
    let d = row.description.clone().unwrap_or_default();
    let description = leaf_api::tag::truncate_description(&d).to_string();
    let truncated = description.len() < d.len();
    Planned::Create { first_id, description, truncated }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn row(tag: &str, max_id: i64, step: i64) -> LeafRow {
        LeafRow { biz_tag: tag.into(), max_id, step, description: Some("d".into()) }
    }

    #[test]
    fn rows_become_tags_above_leafs_max_id() {
        let p = plan(vec![row("orders", 5_000, 2_000), row("big", 10, 5_000_000)], 1);
        assert_eq!(p[0].planned, Planned::Create { first_id: 1_005_000, description: "d".into(), truncated: false });
        assert_eq!(p[1].planned, Planned::Create { first_id: 5_000_010, description: "d".into(), truncated: false });
        let fenced = plan(vec![row("orders", 5_000, 2_000)], 0);
        assert!(matches!(fenced[0].planned, Planned::Create { first_id: 5_000, .. }));
    }

    #[test]
    fn what_the_cluster_cannot_hold_is_reported() {
        let long = "订".repeat(400);
        let rows = vec![
            row("has space", 1, 1),
            row("a/b", 1, 1),
            row("zero-step", 1, 0),
            row("huge-step", 1, 2_000_000_000),
            row("negative", -1, 10),
            row("overflow", i64::MAX - 5, 10),
            row("dup", 1, 1),
            row("dup", 2, 1),
            LeafRow { biz_tag: "long".into(), max_id: 1, step: 1, description: Some(long) },
            LeafRow { biz_tag: "null".into(), max_id: 1, step: 1, description: None },
        ];
        let p = plan(rows, 1);
        for r in &p[..8] {
            assert!(matches!(r.planned, Planned::Invalid(_)), "{r:?}");
        }
        match &p[8].planned {
            Planned::Create { description, truncated: true, .. } => assert_eq!(description.len(), 1023),
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(&p[9].planned, Planned::Create { description, truncated: false, .. } if description.is_empty())
        );
    }

    proptest! {
        /// Every ID a Leaf server can have handed out from a row — below its max_id, or in
        /// `margin` more allocations of up to max(step, MAX_STEP) — is below the first ID.
        #[test]
        fn the_first_id_clears_everything_leaf_can_have_issued(
            max_id in 0i64..(1 << 50), step in 1i64..=1_000_000_000, margin in 0u32..4, used in 0u32..4,
        ) {
            let first = first_id(max_id, step, margin).unwrap();
            prop_assert!(first >= max_id);
            let used = used.min(margin);
            // `used` racing allocations, each as large as Leaf can make one.
            let leaf_end = max_id + i64::from(used) * step.max(LEAF_MAX_STEP);
            prop_assert!(leaf_end <= first, "Leaf's IDs reach {leaf_end}, the tag starts at {first}");
        }
    }
}
