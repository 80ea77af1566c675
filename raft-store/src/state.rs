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
    /// Give `node_id` a snowflake worker ID (its own again if it holds one) on a lease of
    /// `lease_ms` from the command's time.
    RegisterWorker {
        node_id: u64,
        lease_ms: i64,
    },
    /// Extend the lease of `worker_id`, held by `node_id`, and raise its time high-water mark.
    RenewWorker {
        node_id: u64,
        worker_id: u16,
        high_water_ms: i64,
        lease_ms: i64,
    },
}

impl Op {
    /// The tag the operation is about, if it is a segment-mode operation.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Op::CreateTag { tag, .. } | Op::UpdateTag { tag, .. } | Op::AllocateSegment { tag, .. } => Some(tag),
            Op::RegisterWorker { .. } | Op::RenewWorker { .. } => None,
        }
    }

    /// The worker ID the operation changes, if it is known before applying.
    pub fn worker_id(&self) -> Option<u16> {
        match self {
            Op::RenewWorker { worker_id, .. } => Some(*worker_id),
            _ => None,
        }
    }
}

/// Number of snowflake worker IDs (10 bits).
pub const WORKER_IDS: u16 = 1024;
/// Bounds of a worker lease: at least a second, at most an hour.
pub const MIN_LEASE_MS: i64 = 1_000;
pub const MAX_LEASE_MS: i64 = 3_600_000;

/// A snowflake worker ID as held by a node.
///
/// Fencing: the holder stops issuing IDs when its lease runs out by its own monotonic clock,
/// measured from *before* it proposed the renewal, so it stops no later than
/// `lease_expires_ms` (stamped later, by the leader). The ID is given to another node only
/// once its holder has left the membership (it can no longer renew) and the leader's clock is
/// past `lease_expires_ms + lease_ms`: the extra lease length absorbs clock differences
/// between leaders and the old holder up to the lease TTL. The new holder starts strictly
/// after `high_water_ms`, which is then at least the time of the handover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub node_id: u64,
    /// No ID of this worker ID has a timestamp above this (Unix ms) as far as the log knows;
    /// a new holder starts strictly after it.
    pub high_water_ms: i64,
    /// Leader time (Unix ms) at which the lease runs out unless renewed.
    pub lease_expires_ms: i64,
    /// The lease length of the last registration or renewal.
    pub lease_ms: i64,
    /// When the current holder got the ID.
    pub since_ms: i64,
    /// The node that held the ID before, if it was recycled.
    pub previous_node_id: Option<u64>,
}

impl WorkerRecord {
    /// Whether the ID may go to another node at leader time `at_ms`.
    pub fn reclaimable(&self, at_ms: i64, members: &BTreeSet<u64>) -> bool {
        !members.contains(&self.node_id) && at_ms > self.lease_expires_ms.saturating_add(self.lease_ms)
    }
}

/// A worker ID given to (or kept by) a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerGrant {
    pub worker_id: u16,
    /// The holder must only issue timestamps strictly above this (Unix ms).
    pub not_before_ms: i64,
    pub lease_expires_ms: i64,
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
    Worker(WorkerGrant),
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
    #[error("node {0} is not a member of the cluster, so it cannot hold a worker ID")]
    NotAMember(u64),
    #[error("all {WORKER_IDS} worker IDs are held by other nodes (an ID is recycled only after its node left the cluster and its lease expired)")]
    WorkersExhausted,
    #[error("worker ID {worker_id} is not held by node {node_id} any more")]
    WorkerLost { worker_id: u16, node_id: u64 },
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
    /// The node IDs of the current membership (voters and learners).
    pub members: BTreeSet<u64>,
    /// Snowflake worker IDs in use, by worker ID.
    pub workers: BTreeMap<u16, WorkerRecord>,
}

impl State {
    /// Whether `node_id` was a member once and is not in `current` any more.
    pub fn is_retired(&self, node_id: u64, current: impl IntoIterator<Item = u64>) -> bool {
        self.members_ever.contains(&node_id) && !current.into_iter().any(|id| id == node_id)
    }
}

/// Records the node IDs of an applied membership entry as the current members; returns
/// whether any was new.
pub fn record_members(state: &mut State, node_ids: impl IntoIterator<Item = u64>) -> bool {
    state.members = node_ids.into_iter().collect();
    let mut changed = false;
    for id in &state.members {
        changed |= state.members_ever.insert(*id);
    }
    changed
}

fn check_lease(lease_ms: i64) -> Result<(), ApplyError> {
    if (MIN_LEASE_MS..=MAX_LEASE_MS).contains(&lease_ms) {
        Ok(())
    } else {
        Err(ApplyError::Invalid(format!("lease of {lease_ms} ms is outside {MIN_LEASE_MS}..={MAX_LEASE_MS}")))
    }
}

fn register_worker(state: &mut State, at_ms: i64, node_id: u64, lease_ms: i64) -> ApplyResult {
    check_lease(lease_ms)?;
    if !state.members.contains(&node_id) {
        return Err(ApplyError::NotAMember(node_id));
    }
    let lease_expires_ms = at_ms.saturating_add(lease_ms);
    if let Some((id, rec)) = state.workers.iter_mut().find(|(_, r)| r.node_id == node_id) {
        rec.lease_expires_ms = rec.lease_expires_ms.max(lease_expires_ms);
        rec.lease_ms = lease_ms;
        return Ok(Applied::Worker(WorkerGrant {
            worker_id: *id,
            not_before_ms: rec.high_water_ms,
            lease_expires_ms: rec.lease_expires_ms,
        }));
    }
    let members = &state.members;
    let free = (0..WORKER_IDS).find(|id| state.workers.get(id).is_none_or(|r| r.reclaimable(at_ms, members)));
    let worker_id = free.ok_or(ApplyError::WorkersExhausted)?;
    let previous = state.workers.get(&worker_id);
    // A recycled ID starts after everything its previous holder may have issued: its recorded
    // high-water mark, and the handover time (the old lease ended before it).
    let high_water_ms = previous.map_or(i64::MIN, |r| r.high_water_ms.max(at_ms));
    let record = WorkerRecord {
        node_id,
        high_water_ms,
        lease_expires_ms,
        lease_ms,
        since_ms: at_ms,
        previous_node_id: previous.map(|r| r.node_id),
    };
    state.workers.insert(worker_id, record);
    Ok(Applied::Worker(WorkerGrant { worker_id, not_before_ms: high_water_ms, lease_expires_ms }))
}

fn renew_worker(
    state: &mut State,
    at_ms: i64,
    node_id: u64,
    worker_id: u16,
    high_water_ms: i64,
    lease_ms: i64,
) -> ApplyResult {
    check_lease(lease_ms)?;
    let member = state.members.contains(&node_id);
    let rec = match state.workers.get_mut(&worker_id) {
        Some(r) if r.node_id == node_id && member => r,
        _ => return Err(ApplyError::WorkerLost { worker_id, node_id }),
    };
    rec.lease_expires_ms = rec.lease_expires_ms.max(at_ms.saturating_add(lease_ms));
    rec.lease_ms = lease_ms;
    rec.high_water_ms = rec.high_water_ms.max(high_water_ms);
    Ok(Applied::Worker(WorkerGrant {
        worker_id,
        not_before_ms: rec.high_water_ms,
        lease_expires_ms: rec.lease_expires_ms,
    }))
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
        Op::RegisterWorker { node_id, lease_ms } => register_worker(state, cmd.at_ms, *node_id, *lease_ms),
        Op::RenewWorker { node_id, worker_id, high_water_ms, lease_ms } => {
            renew_worker(state, cmd.at_ms, *node_id, *worker_id, *high_water_ms, *lease_ms)
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

    fn at(at_ms: i64, op: Op) -> Command {
        Command { at_ms, op }
    }

    fn grant(r: ApplyResult) -> WorkerGrant {
        match r {
            Ok(Applied::Worker(g)) => g,
            other => panic!("expected a worker grant, got {other:?}"),
        }
    }

    fn register(s: &mut State, at_ms: i64, node_id: u64) -> ApplyResult {
        apply(s, &at(at_ms, Op::RegisterWorker { node_id, lease_ms: 10_000 }))
    }

    #[test]
    fn workers_get_the_lowest_free_id_and_keep_it() {
        let mut s = State::default();
        record_members(&mut s, [1, 2, 3]);
        assert_eq!(grant(register(&mut s, 1000, 2)).worker_id, 0);
        assert_eq!(grant(register(&mut s, 1000, 1)).worker_id, 1);
        assert_eq!(grant(register(&mut s, 1000, 3)).worker_id, 2);
        // Re-registering (a restart) gives the same ID back, with the recorded high-water mark.
        let renew = Op::RenewWorker { node_id: 1, worker_id: 1, high_water_ms: 5000, lease_ms: 10_000 };
        assert_eq!(grant(apply(&mut s, &at(2000, renew))).not_before_ms, 5000);
        let again = grant(register(&mut s, 3000, 1));
        assert_eq!((again.worker_id, again.not_before_ms, again.lease_expires_ms), (1, 5000, 13_000));
        assert_eq!(register(&mut s, 3000, 9), Err(ApplyError::NotAMember(9)));
        assert!(matches!(
            apply(&mut s, &at(0, Op::RegisterWorker { node_id: 1, lease_ms: 5 })),
            Err(ApplyError::Invalid(_))
        ));
    }

    #[test]
    fn an_id_is_recycled_only_after_its_node_left_and_its_lease_and_grace_ran_out() {
        let mut s = State::default();
        record_members(&mut s, [1, 2]);
        assert_eq!(grant(register(&mut s, 0, 1)).worker_id, 0);
        let renew = |hw| Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: hw, lease_ms: 10_000 };
        apply(&mut s, &at(1000, renew(4000))).unwrap();
        // Lease runs to 11,000; grace to 21,000.
        record_members(&mut s, [2, 3]);
        // Node 1 left, but the lease plus grace has not run out: node 3 gets a new ID.
        assert_eq!(grant(register(&mut s, 21_000, 3)).worker_id, 1);
        record_members(&mut s, [2, 4]);
        // Node 1 still a member? No. Lease + grace over: ID 0 is recycled, starting after the
        // handover time (which is past the old high-water mark).
        let g = grant(register(&mut s, 21_001, 4));
        assert_eq!((g.worker_id, g.not_before_ms), (0, 21_001));
        assert_eq!(s.workers[&0].previous_node_id, Some(1));
        // The old holder is fenced: its renewals fail.
        assert_eq!(apply(&mut s, &at(21_002, renew(30_000))), Err(ApplyError::WorkerLost { worker_id: 0, node_id: 1 }));
        assert_eq!(s.workers[&0].node_id, 4);
    }

    #[test]
    fn a_member_keeps_its_id_however_late_it_renews() {
        let mut s = State::default();
        record_members(&mut s, [1, 2]);
        grant(register(&mut s, 0, 1));
        // Node 1 is silent far beyond its lease but is still a member: nobody else gets ID 0.
        assert_eq!(grant(register(&mut s, 1_000_000, 2)).worker_id, 1);
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 7, lease_ms: 10_000 };
        assert!(apply(&mut s, &at(1_000_001, renew)).is_ok());
        // A removed node cannot renew even if nobody took its ID yet.
        record_members(&mut s, [2]);
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 8, lease_ms: 10_000 };
        assert!(matches!(apply(&mut s, &at(1_000_002, renew)), Err(ApplyError::WorkerLost { .. })));
    }

    #[test]
    fn high_water_marks_only_rise() {
        let mut s = State::default();
        record_members(&mut s, [1]);
        grant(register(&mut s, 0, 1));
        let renew = |hw| Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: hw, lease_ms: 10_000 };
        apply(&mut s, &at(1, renew(500))).unwrap();
        assert_eq!(grant(apply(&mut s, &at(2, renew(100)))).not_before_ms, 500);
    }

    #[test]
    fn exhaustion_is_an_error() {
        let mut s = State::default();
        record_members(&mut s, 1..=1025);
        for n in 1..=1024u64 {
            assert_eq!(grant(register(&mut s, 0, n)).worker_id, (n - 1) as u16);
        }
        let before = s.clone();
        assert_eq!(register(&mut s, 0, 1025), Err(ApplyError::WorkersExhausted));
        assert_eq!(s, before);
    }
}
