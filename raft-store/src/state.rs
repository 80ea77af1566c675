//! The replicated state and the pure function that applies a command to it.
//!
//! [`apply`] touches no clock, disk or network: the same log yields the same state on every
//! node. Times come from the command, stamped by the proposer. It validates every field itself
//! (a peer holding the cluster secret can propose any operation, bypassing the HTTP checks),
//! bounds the state (so every snapshot stays encodable, see [`MAX_TAGS`]) and reports in
//! [`Changes`] exactly which keys it wrote, which is what the state machine checkpoints.
use std::collections::{BTreeMap, BTreeSet};

use leaf_api::audit::{Actor, AuditAction, AuditRetention};
use leaf_api::codec;
use leaf_api::tag::{validate_max_id, validate_step, validate_tag, ValidationError};
use leaf_api::tokens::TokenId;
use serde::{Deserialize, Serialize};

use crate::audit::AuditLog;
pub use crate::profile::StoredProfile;
use crate::tokens::{NewToken, SecretHash, TokenRecord};

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
    /// Creates a tag with a profile and an optional upper bound (inclusive). `CreateTag`
    /// stays for logs written by earlier releases (it creates a segment tag); new variants go
    /// last, so those logs still decode.
    CreateTagV2 {
        tag: String,
        step: i64,
        start_max_id: i64,
        description: String,
        profile: StoredProfile,
        upper_bound: Option<i64>,
    },
    /// Creates a scoped token (its secret only as a hash).
    CreateToken(NewToken),
    /// Replaces a token's secret; the old one keeps working for `grace_ms` of leader time.
    RotateToken {
        id: TokenId,
        secret_hash: SecretHash,
        grace_ms: i64,
    },
    /// Deletes a token: every node refuses it once it applied this.
    RevokeToken {
        id: TokenId,
    },
    /// Records a membership change (made through openraft's own entries) in the audit trail:
    /// a `LearnerAdded`, `NodePromoted` or `NodeRemoved` action, nothing else.
    NoteMembership(AuditAction),
    /// An admin change (any of the ops above it but allocations and workers) with who asked
    /// for it; the leader stamps its audit retention in. Recorded in the audit trail.
    Admin {
        actor: Actor,
        retention: AuditRetention,
        op: Box<Op>,
    },
    /// `RegisterWorker` within the worker IDs `first..=last` (a cluster running beside old
    /// Leaf snowflake servers keeps to its own part of the 1024).
    RegisterWorkerIn {
        node_id: u64,
        lease_ms: i64,
        first: u16,
        last: u16,
    },
}

impl Op {
    /// The tag the operation is about, if it is a segment-mode operation.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Op::CreateTag { tag, .. }
            | Op::CreateTagV2 { tag, .. }
            | Op::UpdateTag { tag, .. }
            | Op::AllocateSegment { tag, .. } => Some(tag),
            Op::Admin { op, .. } => op.tag(),
            Op::RegisterWorker { .. }
            | Op::RegisterWorkerIn { .. }
            | Op::RenewWorker { .. }
            | Op::CreateToken(_)
            | Op::RotateToken { .. }
            | Op::RevokeToken { .. }
            | Op::NoteMembership(_) => None,
        }
    }

    /// Whether the operation is an admin change: what the audit trail records and what
    /// [`Op::Admin`] may wrap.
    pub fn is_admin(&self) -> bool {
        match self {
            Op::CreateTag { .. }
            | Op::CreateTagV2 { .. }
            | Op::UpdateTag { .. }
            | Op::CreateToken(_)
            | Op::RotateToken { .. }
            | Op::RevokeToken { .. }
            | Op::NoteMembership(_) => true,
            Op::AllocateSegment { .. }
            | Op::RegisterWorker { .. }
            | Op::RegisterWorkerIn { .. }
            | Op::RenewWorker { .. }
            | Op::Admin { .. } => false,
        }
    }

    /// The operation an [`Op::Admin`] wraps, or this one.
    pub fn inner(&self) -> &Op {
        match self {
            Op::Admin { op, .. } => op,
            other => other,
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
/// Longest tag description, in bytes: the HTTP API's limit, enforced again by [`apply`].
pub const MAX_DESCRIPTION_BYTES: usize = 1024;
/// How far a worker's high-water mark may run ahead of the leader's time stamp of its renewal
/// (a day). A node proposes its clock plus the time window (at most a minute) and refuses to
/// serve with a clock a second off its peers; a mark far beyond that would keep the worker ID
/// from issuing IDs for as long, so it is refused.
pub const MAX_HIGH_WATER_AHEAD_MS: i64 = 86_400_000;

/// Most tags the replicated state holds; creating one more is refused.
///
/// It bounds the snapshot, which every node must be able to encode (the codec refuses payloads
/// above [`leaf_api::codec::MAX_PAYLOAD`], 64 MiB) and send. Worst case of one tag in a
/// snapshot (bincode, variable-length integers): the key, 1 + 128 bytes; `max_id` 9; `step`
/// (at most 10^9) 5; the description, 3 + 1,024; `created_ms` and `updated_ms` 9 each; the
/// profile, 1 + 32 (an obfuscated tag's key); `upper_bound` 1 + 9: 1,231 bytes. 40,000 tags:
/// 49,240,000 bytes (47.0 MiB). The rest is small and bounded: 1,024
/// worker records of at most 58 bytes (59 KiB), the node IDs ever in a membership (9 bytes
/// each) and the membership itself: about 47.1 MiB. Tokens ([`crate::tokens::MAX_TOKENS`] of
/// about 1.2 KB) and the audit trail ([`crate::audit::MAX_AUDIT_RECORDS`] of about 1.3 KB) add
/// about 7 MB, so the largest possible snapshot is 56.7 MB (54.0 MiB): under the codec's 64 MiB
/// (with the snapshot's envelope around it) and far below the 256 MiB a node accepts from a
/// peer. (The test `the_largest_possible_state_still_encodes` builds it.)
pub const MAX_TAGS: usize = 40_000;

/// Largest encoded [`Command`] (through [`leaf_api::codec`]) the leader proposes. The largest
/// valid command, a tag creation with a 128-byte tag and a 1,024-byte description, encodes to
/// about 1.2 KiB; anything beyond this bound is refused by [`check_command`] before it reaches
/// the log (a replication RPC carries up to 8 MiB of entries).
pub const MAX_COMMAND_BYTES: usize = 4096;

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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagRecord {
    /// The next counter value to allocate (for a daily tag, the counter within `day`).
    pub max_id: i64,
    pub step: i64,
    pub description: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub profile: StoredProfile,
    /// The largest ID the tag may hand out (inclusive); none: up to `i64::MAX − 1`.
    pub upper_bound: Option<i64>,
}

impl TagRecord {
    /// A new segment tag created at `at_ms`, with no bound.
    fn new(at_ms: i64, step: i64, max_id: i64, description: &str) -> Self {
        TagRecord {
            max_id,
            step,
            description: description.to_string(),
            created_ms: at_ms,
            updated_ms: at_ms,
            ..TagRecord::default()
        }
    }
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
    /// A token as created, rotated, or (revoked) as it was before.
    Token {
        id: TokenId,
        record: TokenRecord,
    },
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
    // New variants go last: answers cross the network between nodes of different releases.
    #[error("tag {tag:?} is exhausted: every ID up to its upper bound {upper_bound} has been allocated")]
    UpperBoundReached { tag: String, upper_bound: i64 },
    #[error(
        "daily tag {tag:?} has handed out every {digits}-digit number of day {day}; the next day starts a new counter"
    )]
    DayExhausted { tag: String, day: u32, digits: u8 },
    #[error("a token with ID {0} exists already")]
    TokenExists(TokenId),
    #[error("no token with ID {0}")]
    TokenNotFound(TokenId),
}

impl From<ValidationError> for ApplyError {
    fn from(e: ValidationError) -> Self {
        ApplyError::Invalid(e.to_string())
    }
}

/// The keys of the state that [`apply`] and [`record_members`] wrote: exactly what a
/// checkpoint of the state must store (a key listed here whose record is gone was removed).
/// A rejected command writes nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Tags whose record was written.
    pub tags: BTreeSet<String>,
    /// Worker IDs whose record was written, including one recycled from another node.
    pub workers: BTreeSet<u16>,
    /// `members` or `members_ever` changed.
    pub members: bool,
    /// Tokens whose record was written or removed.
    pub tokens: BTreeSet<u64>,
    /// Audit records appended or trimmed, by `seq`.
    pub audit: BTreeSet<u64>,
    /// The audit trail's retention or next number changed.
    pub audit_meta: bool,
}

impl Changes {
    /// Notes that `tag`'s record was written (without allocating when it already was).
    fn tag(&mut self, tag: &str) {
        if !self.tags.contains(tag) {
            self.tags.insert(tag.to_string());
        }
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
            && self.workers.is_empty()
            && !self.members
            && self.tokens.is_empty()
            && self.audit.is_empty()
            && !self.audit_meta
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
    /// Scoped tokens, by ID.
    pub tokens: BTreeMap<u64, TokenRecord>,
    /// The audit trail of admin changes.
    pub audit: AuditLog,
}

impl State {
    /// Whether `node_id` was a member once and is not in `current` any more.
    pub fn is_retired(&self, node_id: u64, current: impl IntoIterator<Item = u64>) -> bool {
        self.members_ever.contains(&node_id) && !current.into_iter().any(|id| id == node_id)
    }
}

/// Records the node IDs of an applied membership entry as the current members; returns
/// whether any was new. Notes in `changes` that the members were written.
pub fn record_members(state: &mut State, node_ids: impl IntoIterator<Item = u64>, changes: &mut Changes) -> bool {
    state.members = node_ids.into_iter().collect();
    changes.members = true;
    let mut changed = false;
    for id in &state.members {
        changed |= state.members_ever.insert(*id);
    }
    changed
}

fn invalid(msg: impl Into<String>) -> ApplyError {
    ApplyError::Invalid(msg.into())
}

fn check_lease(lease_ms: i64) -> Result<(), ApplyError> {
    if (MIN_LEASE_MS..=MAX_LEASE_MS).contains(&lease_ms) {
        Ok(())
    } else {
        Err(invalid(format!("lease of {lease_ms} ms is outside {MIN_LEASE_MS}..={MAX_LEASE_MS}")))
    }
}

fn check_node_id(node_id: u64) -> Result<(), ApplyError> {
    if node_id == 0 {
        return Err(invalid("node IDs start at 1"));
    }
    Ok(())
}

fn check_description(description: &str) -> Result<(), ApplyError> {
    if description.len() > MAX_DESCRIPTION_BYTES {
        return Err(invalid(format!(
            "description is {} bytes long; the limit is {MAX_DESCRIPTION_BYTES}",
            description.len()
        )));
    }
    Ok(())
}

/// Checks every field of `cmd` on its own (no state needed): what [`apply`] checks first and
/// [`check_command`] checks before proposing.
fn check_fields(cmd: &Command) -> Result<(), ApplyError> {
    match &cmd.op {
        Op::CreateTag { tag, step, start_max_id, description } => {
            validate_tag(tag)?;
            validate_step(*step)?;
            validate_max_id(*start_max_id)?;
            check_description(description)
        }
        Op::CreateTagV2 { tag, step, start_max_id, description, profile, upper_bound } => {
            validate_tag(tag)?;
            validate_step(*step)?;
            validate_max_id(*start_max_id)?;
            check_description(description)?;
            profile.check_create(*start_max_id, *upper_bound)
        }
        Op::UpdateTag { tag, step, description } => {
            validate_tag(tag)?;
            if let Some(step) = step {
                validate_step(*step)?;
            }
            if let Some(d) = description {
                check_description(d)?;
            }
            Ok(())
        }
        Op::AllocateSegment { tag, step, node_id } => {
            validate_tag(tag)?;
            validate_step(*step)?;
            check_node_id(*node_id)
        }
        Op::RegisterWorker { node_id, lease_ms } => {
            check_node_id(*node_id)?;
            check_lease(*lease_ms)
        }
        Op::RegisterWorkerIn { node_id, lease_ms, first, last } => {
            check_node_id(*node_id)?;
            check_lease(*lease_ms)?;
            if first > last || *last >= WORKER_IDS {
                return Err(invalid(format!("worker IDs {first}..={last} are not a range within 0..{WORKER_IDS}")));
            }
            Ok(())
        }
        Op::CreateToken(t) => crate::tokens::check_new(t),
        Op::RotateToken { grace_ms, .. } => crate::tokens::check_grace(*grace_ms),
        Op::RevokeToken { .. } => Ok(()),
        Op::NoteMembership(action) => crate::audit::check_note(action),
        Op::Admin { actor, retention, op } => {
            if !op.is_admin() {
                return Err(invalid("only an admin change may be wrapped with its actor"));
            }
            if !actor.is_bounded() {
                return Err(invalid("the actor's name is too long"));
            }
            crate::audit::check_retention(retention)?;
            check_fields(&Command { at_ms: cmd.at_ms, op: (**op).clone() })
        }
        Op::RenewWorker { node_id, worker_id, high_water_ms, lease_ms } => {
            check_node_id(*node_id)?;
            if *worker_id >= WORKER_IDS {
                return Err(invalid(format!("worker ID {worker_id} is not below {WORKER_IDS}")));
            }
            check_lease(*lease_ms)?;
            let ahead = cmd.at_ms.saturating_add(MAX_HIGH_WATER_AHEAD_MS);
            if !(0..=ahead).contains(high_water_ms) {
                return Err(invalid(format!(
                    "high-water mark {high_water_ms} ms is outside 0..={ahead} (at most \
                     {MAX_HIGH_WATER_AHEAD_MS} ms after the command's time {})",
                    cmd.at_ms
                )));
            }
            Ok(())
        }
    }
}

/// What the leader checks before proposing `cmd`: every field as [`apply`] checks it, and its
/// encoded size against [`MAX_COMMAND_BYTES`]. A command that passes can still be rejected by
/// [`apply`] for the state it meets (an existing tag, the [`MAX_TAGS`] bound, a lost worker).
pub fn check_command(cmd: &Command) -> Result<(), ApplyError> {
    check_fields(cmd)?;
    let len = codec::encode(cmd).map_err(|e| invalid(format!("command does not encode: {e}")))?.len();
    if len > MAX_COMMAND_BYTES {
        return Err(invalid(format!("command encodes to {len} bytes; the limit is {MAX_COMMAND_BYTES}")));
    }
    Ok(())
}

/// The node ID a worker record gets when its holder moved to an ID inside a new range: no
/// node has it (IDs start at 1), so the record is reclaimable once its lease and grace ran
/// out, and the next holder starts after its high-water mark.
pub const RELEASED: u64 = 0;

fn register_worker(
    state: &mut State,
    at_ms: i64,
    (node_id, lease_ms): (u64, i64),
    range: std::ops::RangeInclusive<u16>,
    changes: &mut Changes,
) -> ApplyResult {
    if !state.members.contains(&node_id) {
        return Err(ApplyError::NotAMember(node_id));
    }
    let lease_expires_ms = at_ms.saturating_add(lease_ms);
    let held = state.workers.iter_mut().find(|(_, r)| r.node_id == node_id);
    let outside = match held {
        Some((id, rec)) if range.contains(id) => {
            rec.lease_expires_ms = rec.lease_expires_ms.max(lease_expires_ms);
            rec.lease_ms = lease_ms;
            changes.workers.insert(*id);
            return Ok(Applied::Worker(WorkerGrant {
                worker_id: *id,
                not_before_ms: rec.high_water_ms,
                lease_expires_ms: rec.lease_expires_ms,
            }));
        }
        Some((id, _)) => Some(*id),
        None => None,
    };
    let members = &state.members;
    let free = range.clone().find(|id| state.workers.get(id).is_none_or(|r| r.reclaimable(at_ms, members)));
    let worker_id = free.ok_or(ApplyError::WorkersExhausted)?;
    if let Some(old) = outside.and_then(|id| state.workers.get_mut(&id).map(|r| (id, r))) {
        // The node's ID is outside the range it keeps to now: let the old one go, fenced like
        // the ID of a node that left (its lease and grace must run out before anyone gets it,
        // and the next holder starts after its high-water mark).
        old.1.node_id = RELEASED;
        changes.workers.insert(old.0);
    }
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
    changes.workers.insert(worker_id);
    Ok(Applied::Worker(WorkerGrant { worker_id, not_before_ms: high_water_ms, lease_expires_ms }))
}

fn renew_worker(
    state: &mut State,
    at_ms: i64,
    (node_id, worker_id): (u64, u16),
    high_water_ms: i64,
    lease_ms: i64,
    changes: &mut Changes,
) -> ApplyResult {
    let member = state.members.contains(&node_id);
    let rec = match state.workers.get_mut(&worker_id) {
        Some(r) if r.node_id == node_id && member => r,
        _ => return Err(ApplyError::WorkerLost { worker_id, node_id }),
    };
    rec.lease_expires_ms = rec.lease_expires_ms.max(at_ms.saturating_add(lease_ms));
    rec.lease_ms = lease_ms;
    rec.high_water_ms = rec.high_water_ms.max(high_water_ms);
    changes.workers.insert(worker_id);
    Ok(Applied::Worker(WorkerGrant {
        worker_id,
        not_before_ms: rec.high_water_ms,
        lease_expires_ms: rec.lease_expires_ms,
    }))
}

fn create_tag(state: &mut State, tag: &str, record: TagRecord, changes: &mut Changes) -> ApplyResult {
    if state.tags.contains_key(tag) {
        return Err(ApplyError::TagExists(tag.to_string()));
    }
    if state.tags.len() >= MAX_TAGS {
        return Err(invalid(format!("the cluster holds {MAX_TAGS} tags, the most it may")));
    }
    state.tags.insert(tag.to_string(), record.clone());
    changes.tag(tag);
    Ok(Applied::Tag { tag: tag.to_string(), record })
}

/// Applies `cmd` to `state` and notes in `changes` every key it wrote. On error the state and
/// `changes` are unchanged.
pub fn apply(state: &mut State, cmd: &Command, changes: &mut Changes) -> ApplyResult {
    check_fields(cmd)?;
    let (actor, retention, op) = match &cmd.op {
        Op::Admin { actor, retention, op } => (actor, Some(*retention), &**op),
        op => (&Actor::Unattributed, None, op),
    };
    let applied = change(state, cmd.at_ms, actor, op, changes)?;
    // Every admin change is recorded, also one from a release before the trail (unwrapped).
    if op.is_admin() {
        crate::audit::record(&mut state.audit, cmd.at_ms, (actor, retention), (op, &applied), changes);
    }
    Ok(applied)
}

/// Applies one operation (not a wrapper) made by `actor` at leader time `at_ms`.
fn change(state: &mut State, at_ms: i64, actor: &Actor, op: &Op, changes: &mut Changes) -> ApplyResult {
    match op {
        Op::CreateTag { tag, step, start_max_id, description } => {
            let record = TagRecord::new(at_ms, *step, *start_max_id, description);
            create_tag(state, tag, record, changes)
        }
        Op::CreateTagV2 { tag, step, start_max_id, description, profile, upper_bound } => {
            let record = TagRecord {
                profile: profile.clone(),
                upper_bound: *upper_bound,
                ..TagRecord::new(at_ms, *step, *start_max_id, description)
            };
            create_tag(state, tag, record, changes)
        }
        Op::UpdateTag { tag, step, description } => {
            let record = state.tags.get_mut(tag).ok_or_else(|| ApplyError::TagNotFound(tag.clone()))?;
            if let Some(step) = step {
                record.step = *step;
            }
            if let Some(d) = description {
                record.description = d.clone();
            }
            record.updated_ms = at_ms;
            changes.tag(tag);
            Ok(Applied::Tag { tag: tag.clone(), record: record.clone() })
        }
        Op::AllocateSegment { tag, step, node_id: _ } => {
            let record = state.tags.get_mut(tag).ok_or_else(|| ApplyError::TagNotFound(tag.clone()))?;
            let allocation = crate::profile::allocate(tag, record, *step, at_ms)?;
            record.updated_ms = at_ms;
            changes.tag(tag);
            Ok(Applied::Segment(allocation))
        }
        Op::RegisterWorker { node_id, lease_ms } => {
            register_worker(state, at_ms, (*node_id, *lease_ms), 0..=WORKER_IDS - 1, changes)
        }
        Op::RegisterWorkerIn { node_id, lease_ms, first, last } => {
            register_worker(state, at_ms, (*node_id, *lease_ms), *first..=*last, changes)
        }
        Op::RenewWorker { node_id, worker_id, high_water_ms, lease_ms } => {
            renew_worker(state, at_ms, (*node_id, *worker_id), *high_water_ms, *lease_ms, changes)
        }
        Op::CreateToken(t) => {
            let record = crate::tokens::create(state, at_ms, actor, t, changes)?;
            Ok(Applied::Token { id: t.id, record })
        }
        Op::RotateToken { id, secret_hash, grace_ms } => {
            let record = crate::tokens::rotate(state, at_ms, (*id, *secret_hash, *grace_ms), changes)?;
            Ok(Applied::Token { id: *id, record })
        }
        Op::RevokeToken { id } => {
            let record = crate::tokens::revoke(state, *id, changes)?;
            Ok(Applied::Token { id: *id, record })
        }
        Op::NoteMembership(_) => Ok(Applied::Nothing),
        Op::Admin { .. } => Err(invalid("an admin wrapper cannot wrap another")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies without looking at the changes.
    fn ap(s: &mut State, c: &Command) -> ApplyResult {
        apply(s, c, &mut Changes::default())
    }

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
        ap(&mut s, &create("t", 10, 1)).unwrap();
        let a = ap(&mut s, &alloc("t", 10)).unwrap();
        let b = ap(&mut s, &alloc("t", 25)).unwrap();
        assert_eq!(a, Applied::Segment(Allocation { start: 1, end: 11, stored_step: 10 }));
        assert_eq!(b, Applied::Segment(Allocation { start: 11, end: 36, stored_step: 10 }));
        assert_eq!(s.tags["t"].max_id, 36);
    }

    #[test]
    fn overflow_is_exhaustion_not_wrap() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, i64::MAX - 15)).unwrap();
        assert!(ap(&mut s, &alloc("t", 10)).is_ok());
        // The last five IDs come as a range cut short at i64::MAX (exclusive).
        let last = ap(&mut s, &alloc("t", 10)).unwrap();
        assert_eq!(last, Applied::Segment(Allocation { start: i64::MAX - 5, end: i64::MAX, stored_step: 10 }));
        let before = s.clone();
        let err = ap(&mut s, &alloc("t", 1)).unwrap_err();
        assert!(matches!(err, ApplyError::TagExhausted { max_id: i64::MAX, step: 1, .. }), "{err:?}");
        assert_eq!(s, before, "a failed allocation must not change the state");
    }

    #[test]
    fn unknown_tag() {
        let mut s = State::default();
        assert_eq!(ap(&mut s, &alloc("nope", 1)), Err(ApplyError::TagNotFound("nope".into())));
        let upd = cmd(Op::UpdateTag { tag: "nope".into(), step: Some(5), description: None });
        assert_eq!(ap(&mut s, &upd), Err(ApplyError::TagNotFound("nope".into())));
        assert_eq!(s, State::default());
    }

    #[test]
    fn duplicate_create_keeps_the_original() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, 1)).unwrap();
        ap(&mut s, &alloc("t", 10)).unwrap();
        assert_eq!(ap(&mut s, &create("t", 99, 0)), Err(ApplyError::TagExists("t".into())));
        assert_eq!(s.tags["t"].max_id, 11);
        assert_eq!(s.tags["t"].step, 10);
    }

    #[test]
    fn update_changes_only_given_fields_and_stamps_time() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, 1)).unwrap();
        let upd = Command {
            at_ms: 1_800_000_000_000,
            op: Op::UpdateTag { tag: "t".into(), step: Some(20), description: None },
        };
        ap(&mut s, &upd).unwrap();
        let r = &s.tags["t"];
        assert_eq!((r.step, r.description.as_str(), r.max_id), (20, "d", 1));
        assert_eq!((r.created_ms, r.updated_ms), (1_700_000_000_000, 1_800_000_000_000));
        let a = ap(&mut s, &alloc("t", 7)).unwrap();
        assert_eq!(a, Applied::Segment(Allocation { start: 1, end: 8, stored_step: 20 }));
    }

    #[test]
    fn members_ever_remembers_removed_nodes() {
        let mut s = State::default();
        assert!(record_members(&mut s, [1, 2, 3], &mut Changes::default()));
        assert!(!record_members(&mut s, [1, 2, 3], &mut Changes::default()));
        assert!(record_members(&mut s, [1, 2, 4], &mut Changes::default()));
        assert!(s.is_retired(3, [1, 2, 4]));
        assert!(!s.is_retired(4, [1, 2, 4]));
        assert!(!s.is_retired(9, [1, 2, 4]), "never a member");
    }

    #[test]
    fn invalid_commands_are_rejected() {
        let mut s = State::default();
        assert!(matches!(ap(&mut s, &create("bad tag", 10, 1)), Err(ApplyError::Invalid(_))));
        assert!(matches!(ap(&mut s, &create("t", 0, 1)), Err(ApplyError::Invalid(_))));
        assert!(matches!(ap(&mut s, &create("t", 10, -1)), Err(ApplyError::Invalid(_))));
        ap(&mut s, &create("t", 10, 1)).unwrap();
        assert!(matches!(ap(&mut s, &alloc("t", 0)), Err(ApplyError::Invalid(_))));
        assert!(matches!(ap(&mut s, &alloc("t", -10)), Err(ApplyError::Invalid(_))));
        let upd = cmd(Op::UpdateTag { tag: "t".into(), step: Some(0), description: None });
        assert!(matches!(ap(&mut s, &upd), Err(ApplyError::Invalid(_))));
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
        ap(s, &at(at_ms, Op::RegisterWorker { node_id, lease_ms: 10_000 }))
    }

    #[test]
    fn workers_get_the_lowest_free_id_and_keep_it() {
        let mut s = State::default();
        record_members(&mut s, [1, 2, 3], &mut Changes::default());
        assert_eq!(grant(register(&mut s, 1000, 2)).worker_id, 0);
        assert_eq!(grant(register(&mut s, 1000, 1)).worker_id, 1);
        assert_eq!(grant(register(&mut s, 1000, 3)).worker_id, 2);
        // Re-registering (a restart) gives the same ID back, with the recorded high-water mark.
        let renew = Op::RenewWorker { node_id: 1, worker_id: 1, high_water_ms: 5000, lease_ms: 10_000 };
        assert_eq!(grant(ap(&mut s, &at(2000, renew))).not_before_ms, 5000);
        let again = grant(register(&mut s, 3000, 1));
        assert_eq!((again.worker_id, again.not_before_ms, again.lease_expires_ms), (1, 5000, 13_000));
        assert_eq!(register(&mut s, 3000, 9), Err(ApplyError::NotAMember(9)));
        assert!(matches!(
            ap(&mut s, &at(0, Op::RegisterWorker { node_id: 1, lease_ms: 5 })),
            Err(ApplyError::Invalid(_))
        ));
    }

    #[test]
    fn an_id_is_recycled_only_after_its_node_left_and_its_lease_and_grace_ran_out() {
        let mut s = State::default();
        record_members(&mut s, [1, 2], &mut Changes::default());
        assert_eq!(grant(register(&mut s, 0, 1)).worker_id, 0);
        let renew = |hw| Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: hw, lease_ms: 10_000 };
        ap(&mut s, &at(1000, renew(4000))).unwrap();
        // Lease runs to 11,000; grace to 21,000.
        record_members(&mut s, [2, 3], &mut Changes::default());
        // Node 1 left, but the lease plus grace has not run out: node 3 gets a new ID.
        assert_eq!(grant(register(&mut s, 21_000, 3)).worker_id, 1);
        record_members(&mut s, [2, 4], &mut Changes::default());
        // Node 1 still a member? No. Lease + grace over: ID 0 is recycled, starting after the
        // handover time (which is past the old high-water mark).
        let g = grant(register(&mut s, 21_001, 4));
        assert_eq!((g.worker_id, g.not_before_ms), (0, 21_001));
        assert_eq!(s.workers[&0].previous_node_id, Some(1));
        // The old holder is fenced: its renewals fail.
        assert_eq!(ap(&mut s, &at(21_002, renew(30_000))), Err(ApplyError::WorkerLost { worker_id: 0, node_id: 1 }));
        assert_eq!(s.workers[&0].node_id, 4);
    }

    #[test]
    fn a_member_keeps_its_id_however_late_it_renews() {
        let mut s = State::default();
        record_members(&mut s, [1, 2], &mut Changes::default());
        grant(register(&mut s, 0, 1));
        // Node 1 is silent far beyond its lease but is still a member: nobody else gets ID 0.
        assert_eq!(grant(register(&mut s, 1_000_000, 2)).worker_id, 1);
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 7, lease_ms: 10_000 };
        assert!(ap(&mut s, &at(1_000_001, renew)).is_ok());
        // A removed node cannot renew even if nobody took its ID yet.
        record_members(&mut s, [2], &mut Changes::default());
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 8, lease_ms: 10_000 };
        assert!(matches!(ap(&mut s, &at(1_000_002, renew)), Err(ApplyError::WorkerLost { .. })));
    }

    #[test]
    fn high_water_marks_only_rise() {
        let mut s = State::default();
        record_members(&mut s, [1], &mut Changes::default());
        grant(register(&mut s, 0, 1));
        let renew = |hw| Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: hw, lease_ms: 10_000 };
        ap(&mut s, &at(1, renew(500))).unwrap();
        assert_eq!(grant(ap(&mut s, &at(2, renew(100)))).not_before_ms, 500);
    }

    #[test]
    fn exhaustion_is_an_error() {
        let mut s = State::default();
        record_members(&mut s, 1..=1025, &mut Changes::default());
        for n in 1..=1024u64 {
            assert_eq!(grant(register(&mut s, 0, n)).worker_id, (n - 1) as u16);
        }
        let before = s.clone();
        assert_eq!(register(&mut s, 0, 1025), Err(ApplyError::WorkersExhausted));
        assert_eq!(s, before);
    }

    /// Every field a forwarded operation carries is checked by `apply` itself, with
    /// `Invalid`, and a rejected operation changes nothing.
    #[test]
    fn apply_rejects_every_invalid_field_and_changes_nothing() {
        let mut s = State::default();
        record_members(&mut s, [1, 2], &mut Changes::default());
        ap(&mut s, &create("t", 10, 1)).unwrap();
        grant(register(&mut s, 0, 1));
        let long = "x".repeat(MAX_DESCRIPTION_BYTES + 1);
        let renew = |node_id, worker_id, high_water_ms, lease_ms| Op::RenewWorker {
            node_id,
            worker_id,
            high_water_ms,
            lease_ms,
        };
        let bad: Vec<(&str, Op)> = vec![
            ("create: tag", Op::CreateTag { tag: "a/b".into(), step: 1, start_max_id: 0, description: String::new() }),
            (
                "create: empty tag",
                Op::CreateTag { tag: String::new(), step: 1, start_max_id: 0, description: String::new() },
            ),
            (
                "create: step",
                Op::CreateTag {
                    tag: "u".into(),
                    step: leaf_api::tag::MAX_STEP + 1,
                    start_max_id: 0,
                    description: String::new(),
                },
            ),
            (
                "create: max_id",
                Op::CreateTag { tag: "u".into(), step: 1, start_max_id: -1, description: String::new() },
            ),
            (
                "create: description",
                Op::CreateTag { tag: "u".into(), step: 1, start_max_id: 0, description: long.clone() },
            ),
            ("update: tag", Op::UpdateTag { tag: "x".repeat(129), step: None, description: None }),
            ("update: step", Op::UpdateTag { tag: "t".into(), step: Some(-1), description: None }),
            ("update: description", Op::UpdateTag { tag: "t".into(), step: None, description: Some(long.clone()) }),
            ("allocate: tag", Op::AllocateSegment { tag: "t t".into(), step: 1, node_id: 1 }),
            ("allocate: step", Op::AllocateSegment { tag: "t".into(), step: 0, node_id: 1 }),
            ("allocate: node", Op::AllocateSegment { tag: "t".into(), step: 1, node_id: 0 }),
            ("register: node", Op::RegisterWorker { node_id: 0, lease_ms: 10_000 }),
            ("register: lease low", Op::RegisterWorker { node_id: 2, lease_ms: MIN_LEASE_MS - 1 }),
            ("register: lease high", Op::RegisterWorker { node_id: 2, lease_ms: MAX_LEASE_MS + 1 }),
            ("renew: node", renew(0, 0, 5, 10_000)),
            ("renew: worker ID", renew(1, WORKER_IDS, 5, 10_000)),
            ("renew: worker ID max", renew(1, u16::MAX, 5, 10_000)),
            ("renew: lease", renew(1, 0, 5, 0)),
            ("renew: negative high water", renew(1, 0, -1, 10_000)),
            ("renew: high water far ahead", renew(1, 0, 1_000 + MAX_HIGH_WATER_AHEAD_MS + 1, 10_000)),
            ("renew: high water at the end of time", renew(1, 0, i64::MAX, 10_000)),
        ];
        for (what, op) in bad {
            let before = s.clone();
            let mut changes = Changes::default();
            let c = at(1_000, op);
            let r = apply(&mut s, &c, &mut changes);
            assert!(matches!(r, Err(ApplyError::Invalid(_))), "{what}: {r:?}");
            assert_eq!(s, before, "{what}: a rejected command changed the state");
            assert!(changes.is_empty(), "{what}: a rejected command noted changes: {changes:?}");
            assert!(matches!(check_command(&c), Err(ApplyError::Invalid(_))), "{what}: check_command let it through");
        }
        // The limits themselves are accepted.
        let at_limit = Op::CreateTag {
            tag: "x".repeat(leaf_api::tag::MAX_TAG_LEN),
            step: leaf_api::tag::MAX_STEP,
            start_max_id: i64::MAX,
            description: "d".repeat(MAX_DESCRIPTION_BYTES),
        };
        assert!(check_command(&at(1_000, at_limit.clone())).is_ok());
        assert!(ap(&mut s, &at(1_000, at_limit)).is_ok());
        assert!(ap(&mut s, &at(1_000, renew(1, 0, 1_000 + MAX_HIGH_WATER_AHEAD_MS, MAX_LEASE_MS))).is_ok());
    }

    /// The largest valid command stays far below `MAX_COMMAND_BYTES`; a bigger one (which no
    /// valid field set produces) is refused by its encoded size alone.
    #[test]
    fn check_command_bounds_the_encoded_size() {
        let largest = at(
            i64::MIN,
            Op::CreateTagV2 {
                tag: "x".repeat(leaf_api::tag::MAX_TAG_LEN),
                step: leaf_api::tag::MAX_STEP,
                start_max_id: i64::MAX - 1,
                description: "d".repeat(MAX_DESCRIPTION_BYTES),
                profile: StoredProfile::Obfuscated { key: [0xff; crate::OBFUSCATION_KEY_BYTES] },
                upper_bound: Some(i64::MAX - 1),
            },
        );
        let len = codec::encode(&largest).unwrap().len();
        assert!(len <= MAX_COMMAND_BYTES / 2, "the largest valid command is {len} bytes");
        assert!(check_command(&largest).is_ok());
        let mut s = State::default();
        let huge = at(0, Op::UpdateTag { tag: "t".into(), step: None, description: Some("d".repeat(8 << 20)) });
        assert!(matches!(check_command(&huge), Err(ApplyError::Invalid(_))));
        ap(&mut s, &create("t", 10, 1)).unwrap();
        let before = s.clone();
        assert!(matches!(ap(&mut s, &huge), Err(ApplyError::Invalid(_))), "apply refuses an 8 MiB description");
        assert_eq!(s, before);
    }

    #[test]
    fn the_tag_count_is_bounded() {
        let mut s = State::default();
        for i in 0..MAX_TAGS {
            s.tags.insert(
                format!("t{i}"),
                TagRecord {
                    max_id: 0,
                    step: 1,
                    description: String::new(),
                    created_ms: 0,
                    updated_ms: 0,
                    profile: StoredProfile::Segment,
                    upper_bound: None,
                },
            );
        }
        let before = s.clone();
        let mut changes = Changes::default();
        let r = apply(&mut s, &create("one-more", 10, 1), &mut changes);
        assert!(matches!(r, Err(ApplyError::Invalid(ref m)) if m.contains("tags")), "{r:?}");
        assert_eq!(s, before);
        assert!(changes.is_empty());
        // Existing tags still work at the bound; an existing name is still "exists".
        assert!(ap(&mut s, &alloc("t7", 5)).is_ok());
        assert_eq!(ap(&mut s, &create("t7", 10, 1)), Err(ApplyError::TagExists("t7".into())));
        s.tags.remove("t0");
        assert!(ap(&mut s, &create("one-more", 10, 1)).is_ok());
    }

    /// `Changes` lists exactly the keys each operation wrote.
    #[test]
    fn changes_name_every_written_key() {
        let mut s = State::default();
        let mut c = Changes::default();
        record_members(&mut s, [1, 2], &mut c);
        assert_eq!(c, Changes { members: true, ..Changes::default() });
        let run = |s: &mut State, cmd: Command| {
            let mut c = Changes::default();
            let r = apply(s, &cmd, &mut c);
            (r, c)
        };
        let tags = |t: &[&str]| Changes { tags: t.iter().map(|t| t.to_string()).collect(), ..Changes::default() };
        let workers = |w: &[u16]| Changes { workers: w.iter().copied().collect(), ..Changes::default() };
        // An admin change also writes its audit record and the trail's counters.
        let audited = |t: &[&str], seq: u64| Changes { audit: [seq].into(), audit_meta: true, ..tags(t) };
        assert_eq!(run(&mut s, create("t", 10, 1)).1, audited(&["t"], 1));
        assert_eq!(run(&mut s, alloc("t", 10)).1, tags(&["t"]));
        let upd = cmd(Op::UpdateTag { tag: "t".into(), step: None, description: Some("x".into()) });
        assert_eq!(run(&mut s, upd).1, audited(&["t"], 2));
        let token = Op::CreateToken(crate::tokens::NewToken {
            id: TokenId(9),
            name: "svc".into(),
            rights: [leaf_api::tokens::Right::Cluster].into(),
            tags: vec![],
            quota: None,
            secret_hash: [1; 32],
        });
        let c = run(&mut s, cmd(token)).1;
        assert_eq!(c, Changes { tokens: [9].into(), audit: [3].into(), audit_meta: true, ..Changes::default() });
        assert_eq!(run(&mut s, alloc("nope", 10)).1, Changes::default());
        assert_eq!(run(&mut s, create("t", 10, 1)).1, Changes::default());
        // A new worker, the same node again (re-registration), a renewal.
        assert_eq!(run(&mut s, at(0, Op::RegisterWorker { node_id: 1, lease_ms: 10_000 })).1, workers(&[0]));
        assert_eq!(run(&mut s, at(5, Op::RegisterWorker { node_id: 1, lease_ms: 10_000 })).1, workers(&[0]));
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 9, lease_ms: 10_000 };
        assert_eq!(run(&mut s, at(6, renew.clone())).1, workers(&[0]));
        // Node 1 leaves; after its lease and grace, node 3 gets its ID: the recycled key.
        record_members(&mut s, [2, 3], &mut Changes::default());
        let (r, c) = run(&mut s, at(100_000, Op::RegisterWorker { node_id: 3, lease_ms: 10_000 }));
        assert!(matches!(r, Ok(Applied::Worker(g)) if g.worker_id == 0), "{r:?}");
        assert_eq!(c, workers(&[0]));
        assert_eq!(s.workers[&0].previous_node_id, Some(1));
        // The fenced holder's renewal writes nothing.
        assert_eq!(run(&mut s, at(100_001, renew)).1, Changes::default());
    }

    fn admin(actor: Actor, op: Op) -> Op {
        Op::Admin { actor, retention: crate::audit::DEFAULT_RETENTION, op: Box::new(op) }
    }

    fn create_op(tag: &str) -> Op {
        Op::CreateTag { tag: tag.into(), step: 10, start_max_id: 1, description: "d".into() }
    }

    /// Every successful admin change is in the trail with its actor and the command's time;
    /// a refused one, an allocation or a worker lease is not.
    #[test]
    fn admin_changes_are_audited_with_their_actor() {
        let mut s = State::default();
        record_members(&mut s, [1], &mut Changes::default());
        let token = Actor::Token { id: TokenId(5), name: "svc".into() };
        ap(&mut s, &at(100, admin(token.clone(), create_op("t")))).unwrap();
        ap(&mut s, &at(101, create_op("u"))).unwrap();
        assert_eq!(
            ap(&mut s, &at(102, admin(Actor::AdminToken, create_op("t")))),
            Err(ApplyError::TagExists("t".into()))
        );
        ap(&mut s, &alloc("t", 5)).unwrap();
        grant(register(&mut s, 103, 1));
        let upd = Op::UpdateTag { tag: "t".into(), step: Some(20), description: None };
        ap(&mut s, &at(104, admin(Actor::Loopback, upd))).unwrap();
        let note = Op::NoteMembership(AuditAction::NodeRemoved { node_id: 2 });
        ap(&mut s, &at(105, admin(Actor::client_cert("ops"), note))).unwrap();
        let got: Vec<(u64, i64, Actor, leaf_api::audit::AuditKind)> =
            s.audit.records.iter().map(|r| (r.seq, r.at_ms, r.actor.clone(), r.action.kind())).collect();
        use leaf_api::audit::AuditKind::*;
        assert_eq!(
            got,
            vec![
                (1, 100, token, TagCreated),
                (2, 101, Actor::Unattributed, TagCreated),
                (3, 104, Actor::Loopback, TagUpdated),
                (4, 105, Actor::client_cert("ops"), NodeRemoved),
            ]
        );
        assert!(matches!(
            &s.audit.records[2].action,
            AuditAction::TagUpdated { step: Some(20), description: false, .. }
        ));
    }

    #[test]
    fn admin_wrappers_are_checked() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, 1)).unwrap();
        let before = s.clone();
        let bad = [
            ("allocation", admin(Actor::AdminToken, Op::AllocateSegment { tag: "t".into(), step: 1, node_id: 1 })),
            ("nested", admin(Actor::AdminToken, admin(Actor::AdminToken, create_op("x")))),
            ("long name", admin(Actor::ClientCert { name: "x".repeat(65) }, create_op("x"))),
            (
                "retention",
                Op::Admin {
                    actor: Actor::AdminToken,
                    retention: AuditRetention { max_records: 0, max_age_ms: 86_400_000 },
                    op: Box::new(create_op("x")),
                },
            ),
            (
                "forged note",
                Op::NoteMembership(AuditAction::TagUpdated { tag: "t".into(), step: None, description: true }),
            ),
            (
                "inner field",
                admin(
                    Actor::AdminToken,
                    Op::CreateTag { tag: "a b".into(), step: 1, start_max_id: 0, description: String::new() },
                ),
            ),
        ];
        for (what, op) in bad {
            let mut c = Changes::default();
            let r = apply(&mut s, &at(5, op), &mut c);
            assert!(matches!(r, Err(ApplyError::Invalid(_))), "{what}: {r:?}");
            assert_eq!(s, before, "{what}");
            assert!(c.is_empty(), "{what}");
        }
    }

    /// A cluster beside old Leaf snowflake servers keeps to its range; a node whose ID lies
    /// outside a new range gets one inside, and its old ID stays fenced until its lease and
    /// grace ran out.
    #[test]
    fn worker_ids_stay_in_their_range() {
        let mut s = State::default();
        record_members(&mut s, [1, 2, 3], &mut Changes::default());
        let reg = |node_id, first, last| Op::RegisterWorkerIn { node_id, lease_ms: 10_000, first, last };
        assert_eq!(grant(register(&mut s, 0, 1)).worker_id, 0);
        let g = grant(ap(&mut s, &at(1_000, reg(2, 512, 513))));
        assert_eq!(g.worker_id, 512);
        // Node 1 moves into the range: a new ID, and ID 0 is released but not free yet.
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 5_000, lease_ms: 10_000 };
        ap(&mut s, &at(2_000, renew)).unwrap();
        assert_eq!(grant(ap(&mut s, &at(3_000, reg(1, 512, 513)))).worker_id, 513);
        assert_eq!(s.workers[&0].node_id, RELEASED);
        // The range is full now: node 3 is refused and nothing changes.
        let before = s.clone();
        assert_eq!(ap(&mut s, &at(3_000, reg(3, 512, 513))), Err(ApplyError::WorkersExhausted));
        assert_eq!(s, before);
        // Re-registering inside the range keeps the ID.
        assert_eq!(grant(ap(&mut s, &at(4_000, reg(1, 512, 513)))).worker_id, 513);
        // ID 0 goes to someone else only after its lease (12,000) and grace (22,000), and
        // starts after its high-water mark.
        assert_eq!(grant(register(&mut s, 21_000, 3)).worker_id, 1);
        record_members(&mut s, [1, 2, 4], &mut Changes::default());
        let g = grant(register(&mut s, 22_001, 4));
        assert_eq!((g.worker_id, g.not_before_ms), (0, 22_001));
        assert!(matches!(ap(&mut s, &at(0, reg(1, 600, 599))), Err(ApplyError::Invalid(_))));
        assert!(matches!(ap(&mut s, &at(0, reg(1, 0, WORKER_IDS))), Err(ApplyError::Invalid(_))));
    }
}
