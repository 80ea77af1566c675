//! `leaf import`: moving tags from Leaf's MySQL table (or a CSV export of it) into the cluster.
//!
//! - [`plan`]: rows → tags, each starting above anything Leaf can have handed out (the margin
//!   rule) and above the IDs in use in the business tables checked (`--check-column`), and what
//!   cannot be imported.
//! - [`mysql`]: reading `leaf_alloc`, and `MAX` of the checked columns, from MySQL/MariaDB
//!   (passwords never in a message).
//! - [`csv`]: reading a CSV export.
//! - this file: carrying a plan out through the admin API ([`import`]), idempotently: a tag
//!   that already starts at or above its planned first ID was imported before and is skipped.
use std::collections::BTreeMap;

use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError};
use serde::Serialize;

use plan::{Floor, LeafRow, PlanRow, Planned};

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
    /// The `--check-column` floors: each tag's first ID is raised to above its columns' MAX.
    /// Every floor's tag must be among the imported rows.
    pub floors: Vec<Floor>,
}

impl Options {
    /// Whether the tag is among those to import (`--tags`).
    pub fn selects(&self, tag: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|t| t == tag)
    }
}

/// Why an import did not run to the end.
#[derive(Debug)]
pub enum ImportError {
    /// The plan cannot be carried out as asked (a `--check-column` on a tag not imported, a
    /// negative MAX); found before anything was created.
    Refused(String),
    /// The cluster refused or did not answer the first request (listing its tags).
    Cluster(ClientError),
}

impl From<ClientError> for ImportError {
    fn from(e: ClientError) -> Self {
        ImportError::Cluster(e)
    }
}

fn outcome(row: &LeafRow, first_id: Option<i64>, status: Status, note: Option<String>) -> Outcome {
    Outcome { tag: row.biz_tag.clone(), leaf_max_id: row.max_id, step: row.step, first_id, status, note }
}

/// `a; b` of the notes there are.
fn join_notes(a: Option<String>, b: Option<&String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or_else(|| b.cloned()),
    }
}

/// Plans `rows` and creates their tags through `client` (an admin client of one node). The
/// floors are applied before the cluster is asked anything, so a refused plan creates nothing.
pub async fn import(client: &Client, rows: Vec<LeafRow>, opts: &Options) -> Result<Vec<Outcome>, ImportError> {
    let rows: Vec<LeafRow> = rows.into_iter().filter(|r| opts.selects(&r.biz_tag)).collect();
    let plan =
        plan::apply_floors(plan::plan(rows, opts.margin_allocations), &opts.floors).map_err(ImportError::Refused)?;
    let blocked = !opts.skip_invalid && plan.iter().any(|p| matches!(p.planned, Planned::Invalid(_)));
    let existing: BTreeMap<String, i64> = client.tags().await?.into_iter().map(|t| (t.tag, t.max_id)).collect();
    let mut out = Vec::with_capacity(plan.len());
    for PlanRow { row, planned } in &plan {
        let (first_id, description, truncated, checked) = match planned {
            Planned::Invalid(why) => {
                out.push(outcome(row, None, Status::Invalid, Some(why.clone())));
                continue;
            }
            Planned::Create { first_id, description, truncated, checked } => {
                (*first_id, description, *truncated, checked.as_ref())
            }
        };
        let note = join_notes(truncated.then(|| "description cut to 1024 bytes".to_string()), checked);
        if blocked {
            out.push(outcome(row, Some(first_id), Status::NotAttempted, note));
            continue;
        }
        if let Some(max_id) = existing.get(&row.biz_tag) {
            out.push(existing_outcome(row, first_id, *max_id, checked));
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
                Ok(t) => existing_outcome(row, first_id, t.max_id, checked),
                Err(e) => outcome(row, Some(first_id), Status::Failed, Some(e.to_string())),
            },
            Err(e) => outcome(row, Some(first_id), Status::Failed, Some(e.to_string())),
        };
        out.push(done);
    }
    Ok(out)
}

/// A tag that exists: imported before if its next unallocated ID is at or above `first_id`.
/// `checked` (what the column checks did to `first_id`) is kept in the note: a tag imported
/// before a business table was checked can be a conflict now, and the note says why.
fn existing_outcome(row: &LeafRow, first_id: i64, max_id: i64, checked: Option<&String>) -> Outcome {
    if max_id >= first_id {
        let note = format!("exists with its next ID {max_id}, at or above the planned {first_id}");
        outcome(row, Some(first_id), Status::AlreadyImported, join_notes(Some(note), checked))
    } else {
        let note = format!(
            "exists with its next ID {max_id}, below {first_id}: its IDs could collide with IDs in use; nothing changed"
        );
        outcome(row, Some(first_id), Status::Conflict, join_notes(Some(note), checked))
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
        assert_eq!(existing_outcome(&r, 1_000_100, 1_000_100, None).status, Status::AlreadyImported);
        assert_eq!(existing_outcome(&r, 1_000_100, 2_000_000, None).status, Status::AlreadyImported);
        assert_eq!(existing_outcome(&r, 1_000_100, 1, None).status, Status::Conflict);
        // Raised by a business table above what was imported before: a conflict that says why.
        let raised = "raised to MAX(shop.o.id)+1 = 9000001".to_string();
        let o = existing_outcome(&r, 9_000_001, 1_000_100, Some(&raised));
        assert_eq!(o.status, Status::Conflict);
        assert!(o.note.is_some_and(|n| n.contains("9000001") && n.ends_with(&raised)));
    }
}
