//! `leaf import`: moving tags from Leaf's MySQL table (or a CSV export of it) into the cluster.
//!
//! - [`plan`]: rows → tags, each starting above anything Leaf can have handed out (the margin
//!   rule), and what cannot be imported.
//! - [`mysql`]: reading `leaf_alloc` from MySQL/MariaDB (passwords never in a message).
//! - [`csv`]: reading a CSV export.
//! - this file: carrying a plan out through the admin API ([`import`]), idempotently: a tag
//!   that already starts at or above its planned first ID was imported before and is skipped.
use std::collections::BTreeMap;

use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError};
use serde::Serialize;

use plan::{LeafRow, PlanRow, Planned};

pub mod csv;
pub mod mysql;
pub mod plan;

/// What became of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tag was created.
    Created,
    /// The tag exists and already starts at or above the planned first ID (a re-run).
    AlreadyImported,
    /// `--dry-run`: would be created.
    Planned,
    /// The row cannot be imported (see the note).
    Invalid,
    /// Not attempted: other rows are invalid and `--skip-invalid` was not given.
    NotAttempted,
    /// The tag exists below the planned first ID: created by someone else, or imported from an
    /// older copy of the table. Nothing was changed.
    Conflict,
    /// The cluster refused or did not answer (see the note).
    Failed,
}

impl Status {
    /// Whether the row ended well.
    pub fn ok(self) -> bool {
        matches!(self, Status::Created | Status::AlreadyImported | Status::Planned)
    }
}

/// One row's outcome, as printed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub tag: String,
    pub leaf_max_id: i64,
    pub step: i64,
    /// The new tag's first ID (planned or created).
    pub first_id: Option<i64>,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How to carry the plan out.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub margin_allocations: u32,
    pub skip_invalid: bool,
    pub dry_run: bool,
    /// Only these tags (all when empty).
    pub only: Vec<String>,
}

fn outcome(row: &LeafRow, first_id: Option<i64>, status: Status, note: Option<String>) -> Outcome {
    Outcome { tag: row.biz_tag.clone(), leaf_max_id: row.max_id, step: row.step, first_id, status, note }
}

/// Plans `rows` and creates their tags through `client` (an admin client of one node).
pub async fn import(client: &Client, rows: Vec<LeafRow>, opts: &Options) -> Result<Vec<Outcome>, ClientError> {
    let rows: Vec<LeafRow> =
        rows.into_iter().filter(|r| opts.only.is_empty() || opts.only.contains(&r.biz_tag)).collect();
    let plan = plan::plan(rows, opts.margin_allocations);
    let blocked = !opts.skip_invalid && plan.iter().any(|p| matches!(p.planned, Planned::Invalid(_)));
    let existing: BTreeMap<String, i64> = client.tags().await?.into_iter().map(|t| (t.tag, t.max_id)).collect();
    let mut out = Vec::with_capacity(plan.len());
    for PlanRow { row, planned } in &plan {
        let (first_id, description, truncated) = match planned {
            Planned::Invalid(why) => {
                out.push(outcome(row, None, Status::Invalid, Some(why.clone())));
                continue;
            }
            Planned::Create { first_id, description, truncated } => (*first_id, description, *truncated),
        };
        let note = truncated.then(|| "description cut to 1024 bytes".to_string());
        if blocked {
            out.push(outcome(row, Some(first_id), Status::NotAttempted, note));
            continue;
        }
        if let Some(max_id) = existing.get(&row.biz_tag) {
            out.push(existing_outcome(row, first_id, *max_id));
            continue;
        }
        if opts.dry_run {
            out.push(outcome(row, Some(first_id), Status::Planned, note));
            continue;
        }
        let req = CreateTagRequest {
            tag: row.biz_tag.clone(),
            step: row.step,
            max_id: Some(first_id),
            description: Some(description.clone()),
            ..Default::default()
        };
        let done = match client.create_tag(&req).await {
            Ok(_) => outcome(row, Some(first_id), Status::Created, note),
            // Created meanwhile (another import, a retry): judge it like one found up front.
            Err(e) if e.code() == Some(ErrorCode::TagExists) => match client.tag(&row.biz_tag).await {
                Ok(t) => existing_outcome(row, first_id, t.max_id),
                Err(e) => outcome(row, Some(first_id), Status::Failed, Some(e.to_string())),
            },
            Err(e) => outcome(row, Some(first_id), Status::Failed, Some(e.to_string())),
        };
        out.push(done);
    }
    Ok(out)
}

/// A tag that exists: imported before if its next unallocated ID is at or above `first_id`.
fn existing_outcome(row: &LeafRow, first_id: i64, max_id: i64) -> Outcome {
    if max_id >= first_id {
        let note = format!("exists with its next ID {max_id}, at or above the planned {first_id}");
        outcome(row, Some(first_id), Status::AlreadyImported, Some(note))
    } else {
        let note = format!(
            "exists with its next ID {max_id}, below {first_id}: its IDs could collide with Leaf's; nothing changed"
        );
        outcome(row, Some(first_id), Status::Conflict, Some(note))
    }
}

/// Rows whose `max_id` differs between two reads of the table (a Leaf server allocated in
/// between), or that came or went.
pub fn changed_between(a: &[LeafRow], b: &[LeafRow]) -> Vec<String> {
    let first: BTreeMap<&str, i64> = a.iter().map(|r| (r.biz_tag.as_str(), r.max_id)).collect();
    let second: BTreeMap<&str, i64> = b.iter().map(|r| (r.biz_tag.as_str(), r.max_id)).collect();
    let tags: std::collections::BTreeSet<&str> =
        first.keys().chain(second.keys()).copied().filter(|t| first.get(t) != second.get(t)).collect();
    tags.into_iter().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(tag: &str, max_id: i64) -> LeafRow {
        LeafRow { biz_tag: tag.into(), max_id, step: 10, description: None }
    }

    #[test]
    fn changes_between_reads_are_found() {
        let a = [row("a", 1), row("b", 5), row("c", 9)];
        let b = [row("a", 1), row("b", 15), row("d", 1)];
        assert_eq!(changed_between(&a, &b), ["b", "c", "d"]);
        assert!(changed_between(&a, &a).is_empty());
    }

    #[test]
    fn an_existing_tag_is_a_rerun_or_a_conflict() {
        let r = row("a", 100);
        assert_eq!(existing_outcome(&r, 1_000_100, 1_000_100).status, Status::AlreadyImported);
        assert_eq!(existing_outcome(&r, 1_000_100, 2_000_000).status, Status::AlreadyImported);
        assert_eq!(existing_outcome(&r, 1_000_100, 1).status, Status::Conflict);
    }
}
