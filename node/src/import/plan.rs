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
//!
//! **Floors from business tables.** The margin rule only knows what Leaf handed out. IDs can be
//! in use that Leaf never issued for the tag: rows copied from another system, a tag that was
//! reset by hand, a table fed from two generators. `--check-column TAG=db.table.column` reads
//! `MAX(column)` of a table that stores the tag's IDs, and [`apply_floors`] raises the tag's
//! first ID to at least `MAX + 1`, so the cluster never restarts below an ID already in use.
use std::collections::{BTreeMap, BTreeSet};

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
    /// Create the tag with this first ID (and this description, cut to the limit). `checked`
    /// says what the `--check-column` floors did to the first ID (raised it, or found it above
    /// them), for the output; `None` when no column was checked for the tag.
    Create { first_id: i64, description: String, truncated: bool, checked: Option<String> },
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
    Planned::Create { first_id, description, truncated, checked: None }
}

/// A lower bound on one tag's first ID: the largest ID already in use in a column of a business
/// table that stores the tag's IDs (`--check-column TAG=db.table.column`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Floor {
    /// The Leaf `biz_tag` whose IDs the column holds.
    pub tag: String,
    /// The column as `db.table.column` (or `table.column`), for messages.
    pub column: String,
    /// `MAX(column)`; `None` for an empty table, which constrains nothing.
    pub max: Option<i64>,
}

/// The tags of `checked` that are not among `imported`, sorted and without repeats. A check on a
/// tag outside the import is a mistake (a typo, a tag left out by `--tags`) that would otherwise
/// pass silently and leave the tag it was meant for unguarded.
pub fn unknown_tags<'a>(
    imported: impl IntoIterator<Item = &'a str>,
    checked: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let imported: BTreeSet<&str> = imported.into_iter().collect();
    let unknown: BTreeSet<&str> = checked.into_iter().filter(|t| !imported.contains(t)).collect();
    unknown.into_iter().map(str::to_string).collect()
}

/// Raises each planned first ID to at least `MAX + 1` of every floor of its tag. Refused as a
/// whole (nothing may be created then): a floor whose tag is not in `plan`, and a negative MAX,
/// which is not a column of IDs this service hands out (they start at 0). A MAX so large that
/// `MAX + 1` overflows leaves the tag no ID: that row becomes invalid. Rows already invalid stay
/// so.
pub fn apply_floors(plan: Vec<PlanRow>, floors: &[Floor]) -> Result<Vec<PlanRow>, String> {
    let unknown = unknown_tags(plan.iter().map(|p| p.row.biz_tag.as_str()), floors.iter().map(|f| f.tag.as_str()));
    if !unknown.is_empty() {
        return Err(format!(
            "--check-column names tags that are not being imported: {} (not in the table, or left out by --tags)",
            unknown.join(", ")
        ));
    }
    if let Some(f) = floors.iter().find(|f| f.max.is_some_and(|m| m < 0)) {
        return Err(format!(
            "--check-column {}={}: MAX is {}, negative: not a column of this tag's IDs, which are never negative",
            f.tag,
            f.column,
            f.max.unwrap_or_default()
        ));
    }
    let mut by_tag: BTreeMap<&str, Vec<&Floor>> = BTreeMap::new();
    for f in floors {
        by_tag.entry(f.tag.as_str()).or_default().push(f);
    }
    Ok(plan
        .into_iter()
        .map(|p| match by_tag.get(p.row.biz_tag.as_str()) {
            Some(floors) => PlanRow { planned: raise(p.planned, floors), row: p.row },
            None => p,
        })
        .collect())
}

/// One row's plan under its tag's floors (at least one).
fn raise(planned: Planned, floors: &[&Floor]) -> Planned {
    let Planned::Create { first_id, description, truncated, .. } = planned else { return planned };
    // The highest floor binds; an empty table (NULL) constrains nothing.
    let Some((column, max)) = floors.iter().filter_map(|f| f.max.map(|m| (&f.column, m))).max_by_key(|(_, m)| *m)
    else {
        let empty: Vec<&str> = floors.iter().map(|f| f.column.as_str()).collect();
        let checked = Some(format!("{} empty: no floor", empty.join(", ")));
        return Planned::Create { first_id, description, truncated, checked };
    };
    let Some(above) = max.checked_add(1) else {
        return Planned::Invalid(format!("MAX({column}) = {max} leaves no 64-bit ID above it"));
    };
    let (first_id, checked) = if above > first_id {
        (above, format!("raised to MAX({column})+1 = {above}"))
    } else {
        (first_id, format!("above MAX({column}) = {max}"))
    };
    Planned::Create { first_id, description, truncated, checked: Some(checked) }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn row(tag: &str, max_id: i64, step: i64) -> LeafRow {
        LeafRow { biz_tag: tag.into(), max_id, step, description: Some("d".into()) }
    }

    fn create(first_id: i64, checked: Option<&str>) -> Planned {
        Planned::Create { first_id, description: "d".into(), truncated: false, checked: checked.map(str::to_string) }
    }

    fn floor(tag: &str, column: &str, max: Option<i64>) -> Floor {
        Floor { tag: tag.into(), column: column.into(), max }
    }

    /// The first ID of `tag` in `plan` (panics if it is not planned for creation).
    fn first_of(plan: &[PlanRow], tag: &str) -> i64 {
        match plan.iter().find(|p| p.row.biz_tag == tag).map(|p| &p.planned) {
            Some(Planned::Create { first_id, .. }) => *first_id,
            other => panic!("{tag}: {other:?}"),
        }
    }

    #[test]
    fn a_business_table_raises_the_first_id_to_its_max_plus_one() {
        // orders: max_id 5,000 + one allocation of 1,000,000 → 1,005,000 from the margin rule.
        let planned = || plan(vec![row("orders", 5_000, 2_000), row("users", 10, 100)], 1);
        let p = apply_floors(planned(), &[floor("orders", "shop.orders.id", Some(2_000_000))]).unwrap();
        assert_eq!(p[0].planned, create(2_000_001, Some("raised to MAX(shop.orders.id)+1 = 2000001")));
        assert_eq!(p[1].planned, create(1_000_010, None), "a tag without a check is untouched");

        // At the boundary: MAX one below the planned first ID needs nothing; MAX equal to it
        // must move it up by exactly one (the ID MAX is taken, MAX + 1 is free).
        let p = apply_floors(planned(), &[floor("orders", "o.id", Some(1_004_999))]).unwrap();
        assert_eq!(p[0].planned, create(1_005_000, Some("above MAX(o.id) = 1004999")));
        let p = apply_floors(planned(), &[floor("orders", "o.id", Some(1_005_000))]).unwrap();
        assert_eq!(p[0].planned, create(1_005_001, Some("raised to MAX(o.id)+1 = 1005001")));

        // Several columns for one tag: the highest binds, wherever it is listed; an empty
        // table constrains nothing.
        let floors = [
            floor("orders", "a.x.id", Some(3_000_000)),
            floor("orders", "a.empty.id", None),
            floor("orders", "a.y.order_id", Some(7_000_000)),
            floor("orders", "a.z.id", Some(4_000_000)),
        ];
        let p = apply_floors(planned(), &floors).unwrap();
        assert_eq!(p[0].planned, create(7_000_001, Some("raised to MAX(a.y.order_id)+1 = 7000001")));
        let p = apply_floors(planned(), &[floor("orders", "a.empty.id", None)]).unwrap();
        assert_eq!(p[0].planned, create(1_005_000, Some("a.empty.id empty: no floor")));

        // With no margin (Leaf stopped for certain) the floor still holds.
        let p = apply_floors(plan(vec![row("orders", 5_000, 2_000)], 0), &[floor("orders", "o.id", Some(5_000))]);
        assert_eq!(first_of(&p.unwrap(), "orders"), 5_001);
    }

    #[test]
    fn floors_that_cannot_be_honoured_are_refused_or_make_the_row_invalid() {
        let planned = || plan(vec![row("orders", 5_000, 2_000), row("bad tag", 1, 1)], 1);
        // A tag that is not in the import: refused as a whole, naming it.
        let e = apply_floors(planned(), &[floor("orders", "o.id", Some(1)), floor("oders", "o.id", Some(1))]);
        assert!(e.as_ref().is_err_and(|e| e.contains("oders") && !e.contains("orders,")), "{e:?}");
        // A negative MAX: refused as a whole.
        let e = apply_floors(planned(), &[floor("orders", "o.id", Some(-1))]).unwrap_err();
        assert!(e.contains("o.id") && e.contains("negative"), "{e}");
        // MAX at the top of the ID space: no ID is left for the tag.
        let p = apply_floors(planned(), &[floor("orders", "o.id", Some(i64::MAX))]).unwrap();
        assert!(matches!(&p[0].planned, Planned::Invalid(why) if why.contains("o.id")), "{p:?}");
        // A row already invalid stays invalid, floor or not.
        let p = apply_floors(planned(), &[floor("bad tag", "o.id", Some(1))]).unwrap();
        assert!(matches!(p[1].planned, Planned::Invalid(_)), "{p:?}");
        assert_eq!(unknown_tags(["a", "b"], ["b", "c", "c", "a", "d"]), ["c", "d"]);
    }

    #[test]
    fn rows_become_tags_above_leafs_max_id() {
        let p = plan(vec![row("orders", 5_000, 2_000), row("big", 10, 5_000_000)], 1);
        assert_eq!(p[0].planned, create(1_005_000, None));
        assert_eq!(p[1].planned, create(5_000_010, None));
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

        /// With floors, the first ID is the margin rule's or one above the highest MAX,
        /// whichever is larger: above every ID in use, and no higher than it needs to be.
        #[test]
        fn the_first_id_clears_every_checked_column(
            max_id in 0i64..(1 << 50), step in 1i64..=1_000_000, margin in 0u32..3,
            maxes in proptest::collection::vec(proptest::option::of(0i64..(1 << 52)), 1..4),
        ) {
            let floors: Vec<Floor> =
                maxes.iter().enumerate().map(|(i, m)| floor("t", &format!("d.t{i}.id"), *m)).collect();
            let p = apply_floors(plan(vec![row("t", max_id, step)], margin), &floors).unwrap();
            let first = first_of(&p, "t");
            let highest = maxes.iter().flatten().max().copied();
            prop_assert!(highest.iter().all(|m| *m < first), "MAX {highest:?}, first ID {first}");
            let want = first_id(max_id, step, margin).unwrap().max(highest.map_or(i64::MIN, |m| m + 1));
            prop_assert_eq!(first, want);
        }
    }
}
