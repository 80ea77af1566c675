//! The replicated state and the pure function that applies a command to it.
//!
//! [`apply`] touches no clock, disk or network: the same log yields the same state on every
//! node. Times come from the command, stamped by the proposer.
use std::collections::{BTreeMap, BTreeSet};

use leaf_api::tag::{validate_max_id, validate_step, validate_tag, ValidationError};
use serde::{Deserialize, Serialize};

/// A command proposed through Raft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// Wall-clock milliseconds since the Unix epoch on the proposing node.
    pub at_ms: i64,
    pub op: Op,
}

/// What a command does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    CreateTag {
        tag: String,
        step: i64,
        start_max_id: i64,
        description: String,
    },
    UpdateTag {
        tag: String,
        step: Option<i64>,
        description: Option<String>,
    },
    /// Reserve `[max_id, max_id + step)` for the proposing node.
    AllocateSegment {
        tag: String,
        step: i64,
        node_id: u64,
    },
}

impl Op {
    /// The tag the operation is about.
    pub fn tag(&self) -> &str {
        match self {
            Op::CreateTag { tag, .. } | Op::UpdateTag { tag, .. } | Op::AllocateSegment { tag, .. } => tag,
        }
    }
}

/// A tag as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagRecord {
    pub max_id: i64,
    pub step: i64,
    pub description: String,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// A committed, half-open range of IDs `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub start: i64,
    pub end: i64,
    /// The tag's stored step at commit time (the floor for the dynamic step).
    pub stored_step: i64,
}

/// Successful outcome of applying one log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    /// A blank or membership entry: nothing for the application.
    Nothing,
    Tag {
        tag: String,
        record: TagRecord,
    },
    Segment(Allocation),
}

/// Why a command was rejected. Rejection is deterministic: every node rejects the same entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ApplyError {
    #[error("tag {0:?} already exists")]
    TagExists(String),
    #[error("tag {0:?} does not exist")]
    TagNotFound(String),
    #[error("tag {tag:?} is exhausted: max_id {max_id} + step {step} overflows a signed 64-bit integer")]
    TagExhausted { tag: String, max_id: i64, step: i64 },
    #[error("invalid command: {0}")]
    Invalid(String),
}

impl From<ValidationError> for ApplyError {
    fn from(e: ValidationError) -> Self {
        ApplyError::Invalid(e.to_string())
    }
}

/// What one log entry produced, as returned to the proposer.
pub type ApplyResult = Result<Applied, ApplyError>;

/// The whole replicated application state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub tags: BTreeMap<String, TagRecord>,
    /// Every node ID that has ever been in a membership, so a removed node's ID is never given
    /// to another node (its old log, votes and allocations must stay unambiguous).
    pub members_ever: BTreeSet<u64>,
}

impl State {
    /// Whether `node_id` was a member once and is not in `current` any more.
    pub fn is_retired(&self, node_id: u64, current: impl IntoIterator<Item = u64>) -> bool {
        self.members_ever.contains(&node_id) && !current.into_iter().any(|id| id == node_id)
    }
}

/// Records the node IDs of an applied membership entry; returns whether any was new.
pub fn record_members(state: &mut State, node_ids: impl IntoIterator<Item = u64>) -> bool {
    let mut changed = false;
    for id in node_ids {
        changed |= state.members_ever.insert(id);
    }
    changed
}

/// Applies `cmd` to `state`. On error the state is unchanged.
pub fn apply(state: &mut State, cmd: &Command) -> ApplyResult {
    match &cmd.op {
        Op::CreateTag { tag, step, start_max_id, description } => {
            validate_tag(tag)?;
            validate_step(*step)?;
            validate_max_id(*start_max_id)?;
            if state.tags.contains_key(tag) {
                return Err(ApplyError::TagExists(tag.clone()));
            }
            let record = TagRecord {
                max_id: *start_max_id,
                step: *step,
                description: description.clone(),
                created_ms: cmd.at_ms,
                updated_ms: cmd.at_ms,
            };
            state.tags.insert(tag.clone(), record.clone());
            Ok(Applied::Tag { tag: tag.clone(), record })
        }
        Op::UpdateTag { tag, step, description } => {
            if let Some(step) = step {
                validate_step(*step)?;
            }
            let record = state.tags.get_mut(tag).ok_or_else(|| ApplyError::TagNotFound(tag.clone()))?;
            if let Some(step) = step {
                record.step = *step;
            }
            if let Some(d) = description {
                record.description = d.clone();
            }
            record.updated_ms = cmd.at_ms;
            Ok(Applied::Tag { tag: tag.clone(), record: record.clone() })
        }
        Op::AllocateSegment { tag, step, node_id: _ } => {
            validate_step(*step)?;
            let record = state.tags.get_mut(tag).ok_or_else(|| ApplyError::TagNotFound(tag.clone()))?;
            let start = record.max_id;
            let end = start.checked_add(*step).ok_or_else(|| ApplyError::TagExhausted {
                tag: tag.clone(),
                max_id: start,
                step: *step,
            })?;
            record.max_id = end;
            record.updated_ms = cmd.at_ms;
            Ok(Applied::Segment(Allocation { start, end, stored_step: record.step }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(op: Op) -> Command {
        Command { at_ms: 1_700_000_000_000, op }
    }

    fn create(tag: &str, step: i64, max_id: i64) -> Command {
        cmd(Op::CreateTag { tag: tag.into(), step, start_max_id: max_id, description: "d".into() })
    }

    fn alloc(tag: &str, step: i64) -> Command {
        cmd(Op::AllocateSegment { tag: tag.into(), step, node_id: 1 })
    }

    #[test]
    fn allocations_are_contiguous_and_disjoint() {
        let mut s = State::default();
        apply(&mut s, &create("t", 10, 1)).unwrap();
        let a = apply(&mut s, &alloc("t", 10)).unwrap();
        let b = apply(&mut s, &alloc("t", 25)).unwrap();
        assert_eq!(a, Applied::Segment(Allocation { start: 1, end: 11, stored_step: 10 }));
        assert_eq!(b, Applied::Segment(Allocation { start: 11, end: 36, stored_step: 10 }));
        assert_eq!(s.tags["t"].max_id, 36);
    }

    #[test]
    fn overflow_is_exhaustion_not_wrap() {
        let mut s = State::default();
        apply(&mut s, &create("t", 10, i64::MAX - 15)).unwrap();
        assert!(apply(&mut s, &alloc("t", 10)).is_ok());
        let before = s.clone();
        let err = apply(&mut s, &alloc("t", 10)).unwrap_err();
        assert!(matches!(err, ApplyError::TagExhausted { max_id, step: 10, .. } if max_id == i64::MAX - 5));
        assert_eq!(s, before, "a failed allocation must not change the state");
        // The last five IDs are still reachable with a step that fits exactly.
        let last = apply(&mut s, &alloc("t", 5)).unwrap();
        assert_eq!(last, Applied::Segment(Allocation { start: i64::MAX - 5, end: i64::MAX, stored_step: 10 }));
        assert!(matches!(apply(&mut s, &alloc("t", 1)), Err(ApplyError::TagExhausted { .. })));
    }

    #[test]
    fn unknown_tag() {
        let mut s = State::default();
        assert_eq!(apply(&mut s, &alloc("nope", 1)), Err(ApplyError::TagNotFound("nope".into())));
        let upd = cmd(Op::UpdateTag { tag: "nope".into(), step: Some(5), description: None });
        assert_eq!(apply(&mut s, &upd), Err(ApplyError::TagNotFound("nope".into())));
        assert_eq!(s, State::default());
    }

    #[test]
    fn duplicate_create_keeps_the_original() {
        let mut s = State::default();
        apply(&mut s, &create("t", 10, 1)).unwrap();
        apply(&mut s, &alloc("t", 10)).unwrap();
        assert_eq!(apply(&mut s, &create("t", 99, 0)), Err(ApplyError::TagExists("t".into())));
        assert_eq!(s.tags["t"].max_id, 11);
        assert_eq!(s.tags["t"].step, 10);
    }

    #[test]
    fn update_changes_only_given_fields_and_stamps_time() {
        let mut s = State::default();
        apply(&mut s, &create("t", 10, 1)).unwrap();
        let upd = Command {
            at_ms: 1_800_000_000_000,
            op: Op::UpdateTag { tag: "t".into(), step: Some(20), description: None },
        };
        apply(&mut s, &upd).unwrap();
        let r = &s.tags["t"];
        assert_eq!((r.step, r.description.as_str(), r.max_id), (20, "d", 1));
        assert_eq!((r.created_ms, r.updated_ms), (1_700_000_000_000, 1_800_000_000_000));
        let a = apply(&mut s, &alloc("t", 7)).unwrap();
        assert_eq!(a, Applied::Segment(Allocation { start: 1, end: 8, stored_step: 20 }));
    }

    #[test]
    fn members_ever_remembers_removed_nodes() {
        let mut s = State::default();
        assert!(record_members(&mut s, [1, 2, 3]));
        assert!(!record_members(&mut s, [1, 2, 3]));
        assert!(record_members(&mut s, [1, 2, 4]));
        assert!(s.is_retired(3, [1, 2, 4]));
        assert!(!s.is_retired(4, [1, 2, 4]));
        assert!(!s.is_retired(9, [1, 2, 4]), "never a member");
    }

    #[test]
    fn invalid_commands_are_rejected() {
        let mut s = State::default();
        assert!(matches!(apply(&mut s, &create("bad tag", 10, 1)), Err(ApplyError::Invalid(_))));
        assert!(matches!(apply(&mut s, &create("t", 0, 1)), Err(ApplyError::Invalid(_))));
        assert!(matches!(apply(&mut s, &create("t", 10, -1)), Err(ApplyError::Invalid(_))));
        apply(&mut s, &create("t", 10, 1)).unwrap();
        assert!(matches!(apply(&mut s, &alloc("t", 0)), Err(ApplyError::Invalid(_))));
        assert!(matches!(apply(&mut s, &alloc("t", -10)), Err(ApplyError::Invalid(_))));
        let upd = cmd(Op::UpdateTag { tag: "t".into(), step: Some(0), description: None });
        assert!(matches!(apply(&mut s, &upd), Err(ApplyError::Invalid(_))));
        assert_eq!(s.tags["t"].max_id, 1);
    }
}
