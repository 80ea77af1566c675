//! The pure function that applies a command to the replicated [`State`], and what it answers.
//!
//! [`apply`] touches no clock, disk or network: the same log yields the same state on every
//! node. Times come from the command, stamped by the proposer. It validates every field itself
//! ([`crate::check`]: a peer holding the cluster secret can propose any operation, bypassing the
//! HTTP checks), bounds the state (so every snapshot stays encodable, see
//! [`crate::tags::MAX_TAGS`]) and reports in [`Changes`] exactly which keys it wrote, which is
//! what the state machine checkpoints. Each kind of operation is in its own module:
//! [`crate::tags`], [`crate::workers`], [`crate::tokens`], and [`crate::audit`] records the
//! admin changes.
use std::collections::BTreeSet;

use leaf_api::audit::Actor;
use leaf_api::tag::ValidationError;
use leaf_api::tokens::TokenId;
use serde::{Deserialize, Serialize};

use crate::audit::Trim;
use crate::check::check_fields;
use crate::command::{Command, Op, TagCap};
use crate::gapless::Issued;
use crate::state::State;
use crate::tags::{self, Allocation, TagRecord};
use crate::templates::{self, TemplateRecord};
use crate::tokens::TokenRecord;
use crate::version::{ClusterVersion, SUPPORTED};
use crate::workers::{self, WorkerGrant, WORKER_IDS};

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
    // New variants go last: answers cross the network between nodes of different releases.
    /// A batch of tags: the names created, and those that existed already (left as they were),
    /// each in the batch's order.
    Tags {
        created: Vec<String>,
        existing: Vec<String>,
    },
    /// A template as put, or (deleted) as it was.
    Template {
        name: String,
        record: TemplateRecord,
    },
    /// The allocations of an [`Op::AllocateSegments`], each with its own outcome, in order.
    Segments(Vec<Result<Allocation, ApplyError>>),
    /// The numbers of an [`Op::IssueNumbers`], each with its own outcome, in order.
    Numbers(Vec<Result<Issued, ApplyError>>),
    /// A series' limits as set ([`Op::SetSeriesLimits`]).
    Limits(leaf_api::gapless::SeriesLimits),
    /// The cluster's active version after an [`Op::SetClusterVersion`].
    ClusterVersion(ClusterVersion),
    /// A region registered, adopted, or a tag's blocks ([`crate::regions`]).
    Region(crate::regions::RegionAnswer),
}

impl Applied {
    /// What kind of result this is, in words (for a refused answer of the wrong kind; the
    /// counterpart of [`Op::what`]).
    pub fn kind(&self) -> &'static str {
        match self {
            Applied::Nothing => "no result",
            Applied::Tag { .. } => "a tag",
            Applied::Segment(_) => "a segment",
            Applied::Segments(_) => "a group of segments",
            Applied::Worker(_) => "a worker grant",
            Applied::Token { .. } => "a token",
            Applied::Tags { .. } => "a batch of tags",
            Applied::Template { .. } => "a template",
            Applied::Numbers(_) => "gapless numbers",
            Applied::Limits(_) => "a series' limits",
            Applied::ClusterVersion(_) => "a cluster version",
            Applied::Region(_) => "a region or its blocks",
        }
    }
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
    /// What earlier releases answered for [`ApplyError::TokenTagBudget`] (kept so their
    /// answers decode).
    #[error("token {token} has created the {max_tags} tags its max_tags allows")]
    TokenTagLimit { token: TokenId, max_tags: u32 },
    #[error("tag {0:?} is archived: it hands out no ID until it is restored")]
    TagArchived(String),
    #[error("template {name:?} may make the tags template {other:?} makes: no two templates may match one tag")]
    TemplateOverlap { name: String, other: String },
    #[error("template {0:?} does not exist")]
    TemplateNotFound(String),
    #[error("gapless series {tag:?} has no number for key {key:?}")]
    NumberNotFound { tag: String, key: String },
    #[error("gapless series {tag:?}, key {key:?}: {why}")]
    NumberConflict { tag: String, key: String, why: String },
    #[error("gapless series {tag:?} holds {max_numbers} numbers, its max_numbers: raise it, or let retain_periods drop old periods")]
    SeriesFull { tag: String, max_numbers: u64 },
    #[error(
        "the ledger holds {max_numbers} numbers across every series, its most: drop old periods with retain_periods"
    )]
    LedgerFull { max_numbers: u64 },
    #[error(
        "token {token} may create {max_tags} tags (its max_tags) and has created {created}: {asked} more would pass that, so none was created"
    )]
    TokenTagBudget { token: TokenId, max_tags: u32, created: u32, asked: u64 },
    #[error("{what} needs cluster version {needs}, and the cluster runs version {active}: it is activated once every node runs a release that supports it")]
    FeatureNotActive { what: String, needs: ClusterVersion, active: ClusterVersion },
    /// Earlier releases answered this as [`ApplyError::Invalid`], with the same words.
    #[error("a token named {0:?} exists already")]
    TokenNameTaken(String),
    #[error("tag {0:?} has no block left in this region: its next block from the global tier has not arrived yet")]
    NoBlock(String),
    #[error("region {0:?} is not registered with the global tier")]
    RegionNotFound(String),
    #[error("region {0:?} is retired: it gets nothing more, and its name is never used again")]
    RegionRetired(String),
    /// A region's operation the regions as they stand refuse (the message says which rule).
    #[error("{0}")]
    RegionConflict(String),
    #[error("tag {tag:?} is {profile}: its IDs are not cut from blocks, and this release serves it in no region")]
    NotBlockable { tag: String, profile: String },
    #[error("tag {tag:?} is served by its home region, {home:?}: ask a node of that region")]
    NotHome { tag: String, home: String },
    #[error("tag {0:?} is served by its home region, which this region has not learnt yet: it asks the global tier")]
    HomeUnknown(String),
}

impl From<ValidationError> for ApplyError {
    fn from(e: ValidationError) -> Self {
        ApplyError::Invalid(e.to_string())
    }
}

/// The keys of the state that [`apply`] and [`crate::state::record_members`] wrote: exactly
/// what a checkpoint of the state must store (a key listed here whose record is gone was
/// removed). A rejected command writes nothing.
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
    /// Templates whose record was written or removed.
    pub templates: BTreeSet<String>,
    /// Ledger entries of gapless series written, by (tag, period, number).
    pub numbers: BTreeSet<(String, u32, u64)>,
    /// Gapless series whose limits were set.
    pub limits: BTreeSet<String>,
    /// The cluster's active version was raised.
    pub version: bool,
    /// Regions of the global tier's registry whose record was written, by name.
    pub regions: BTreeSet<String>,
    /// This cluster's region was adopted.
    pub region: bool,
    /// Tags whose blocks were written (regional cluster).
    pub blocks: BTreeSet<String>,
    /// Tags whose home was written (both sides).
    pub homes: BTreeSet<String>,
    /// Regions whose lease was written (global tier).
    pub leases: BTreeSet<String>,
}

impl Changes {
    /// Notes that `tag`'s record was written (without allocating when it already was).
    pub(crate) fn tag(&mut self, tag: &str) {
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
            && self.templates.is_empty()
            && self.numbers.is_empty()
            && self.limits.is_empty()
            && !self.version
            && self.regions.is_empty()
            && !self.region
            && self.blocks.is_empty()
            && self.homes.is_empty()
            && self.leases.is_empty()
    }
}

/// What one log entry produced, as returned to the proposer.
pub type ApplyResult = Result<Applied, ApplyError>;

/// Refuses an operation newer than the cluster's `active` version (deterministic: every node
/// holds the same active version at the same entry). Raising the version itself needs only
/// that every member supports the new one, which the leader checked.
pub fn check_version(op: &Op, active: ClusterVersion) -> Result<(), ApplyError> {
    let needs = op.version();
    if needs <= active || matches!(op.inner(), Op::SetClusterVersion { .. }) {
        return Ok(());
    }
    Err(ApplyError::FeatureNotActive { what: op.inner().what().to_string(), needs, active })
}

/// What this node answers for an operation of a version it does not support.
fn not_supported(version: ClusterVersion) -> ApplyError {
    invalid(format!("an operation of cluster version {version}, which this release (up to {SUPPORTED}) cannot apply"))
}

/// An [`ApplyError::Invalid`] saying `msg`.
pub(crate) fn invalid(msg: impl Into<String>) -> ApplyError {
    ApplyError::Invalid(msg.into())
}

/// Applies `cmd` to `state` and notes in `changes` every key it wrote. On error the state and
/// `changes` are unchanged.
pub fn apply(state: &mut State, cmd: &Command, changes: &mut Changes) -> ApplyResult {
    check_fields(cmd)?;
    check_version(&cmd.op, state.version)?;
    let (actor, retention, op, trim) = match &cmd.op {
        Op::Admin { actor, retention, trim, op } => (actor, Some(*retention), &**op, *trim),
        op => (&Actor::Unattributed, None, op, Trim::Together),
    };
    let applied = change(state, cmd.at_ms, actor, op, changes)?;
    // Every admin change is recorded, also one from a release before the trail (unwrapped).
    if op.is_admin() {
        crate::audit::record(&mut state.audit, cmd.at_ms, (actor, retention, trim), (op, &applied), changes);
    }
    Ok(applied)
}

/// Applies one operation (not a wrapper) made by `actor` at leader time `at_ms`.
fn change(state: &mut State, at_ms: i64, actor: &Actor, op: &Op, changes: &mut Changes) -> ApplyResult {
    match op {
        Op::CreateTag { tag: t, cap } => {
            let max = match cap {
                TagCap::Legacy => tags::LEGACY_MAX_TAGS,
                TagCap::Full => tags::MAX_TAGS,
            };
            create_tag(state, actor, &t.tag, t.record(at_ms), max, changes)
        }
        Op::UpdateTag { tag, step, description } => {
            tags::update(state, at_ms, tag, (*step, description.as_deref()), changes)
        }
        Op::ArchiveTag { tag } => tags::archive(state, at_ms, tag, changes),
        Op::RestoreTag { tag } => tags::restore(state, at_ms, tag, changes),
        Op::AllocateSegment { tag, step, node_id: _ } => tags::allocate(state, at_ms, tag, *step, changes),
        Op::AllocateSegments { asks } => tags::allocate_each(state, at_ms, asks, changes),
        // In a region, each series only at its home (`crate::regions::homes`, checked per ask).
        Op::IssueNumbers { asks, rules } => crate::gapless::apply_each(state, at_ms, asks, *rules, changes),
        Op::SetSeriesLimits { tag, limits } => crate::gapless::set_limits(state, tag, *limits, changes),
        Op::SetClusterVersion { version } => {
            if *version > state.version {
                state.version = *version;
                changes.version = true;
            }
            Ok(Applied::ClusterVersion(state.version))
        }
        Op::JoinRegion { name, workers } => crate::regions::join(state, at_ms, name, *workers, changes),
        Op::RetireRegion { name } => crate::regions::retire(state, at_ms, name, changes),
        Op::GrantBlock { region, tag, size, above } => {
            crate::regions::grant(state, at_ms, (region, tag), (*size, *above), changes)
        }
        Op::AdoptRegion(identity) => crate::regions::adopt(state, at_ms, identity, changes),
        Op::AdoptBlock { tag, block } => crate::regions::adopt_block(state, tag, *block, changes),
        Op::ClaimHome { region, tag } => crate::regions::homes::claim(state, at_ms, (region, tag), changes),
        Op::MoveHome { tag, to } => crate::regions::homes::move_home(state, at_ms, (tag, to), changes),
        Op::ReleaseHome { region, tag, epoch } => {
            crate::regions::homes::release(state, at_ms, (region, tag, *epoch), changes)
        }
        Op::RenewLease { region } => crate::regions::homes::renew(state, at_ms, region, changes),
        Op::AdoptHome { tag, home } => crate::regions::homes::adopt(state, tag, home, changes),
        // The state machine stops before such an entry; refused here all the same.
        Op::Undecodable(e) => Err(not_supported(e.version)),
        Op::RegisterWorker { node_id, lease_ms, within } => {
            let (first, last) = within.unwrap_or((0, WORKER_IDS - 1));
            let range = crate::regions::worker_range(state, first..=last)?;
            workers::register(state, at_ms, (*node_id, *lease_ms), range, changes)
        }
        Op::RenewWorker { node_id, worker_id, .. } if !crate::regions::may_hold(state, *worker_id) => {
            Err(ApplyError::WorkerLost { worker_id: *worker_id, node_id: *node_id })
        }
        Op::RenewWorker { node_id, worker_id, high_water_ms, lease_ms } => {
            workers::renew(state, at_ms, (*node_id, *worker_id), *high_water_ms, *lease_ms, changes)
        }
        Op::CreateToken { token, limits } => {
            let record = crate::tokens::create(state, at_ms, actor, (token, limits.unwrap_or_default()), changes)?;
            Ok(Applied::Token { id: token.id, record })
        }
        Op::RotateToken { id, secret_hash, grace_ms } => {
            let record = crate::tokens::rotate(state, at_ms, (*id, *secret_hash, *grace_ms), changes)?;
            Ok(Applied::Token { id: *id, record })
        }
        Op::RevokeToken { id } => {
            let record = crate::tokens::revoke(state, *id, changes)?;
            Ok(Applied::Token { id: *id, record })
        }
        Op::CreateTags { tags } => create_tags(state, at_ms, actor, tags, changes),
        Op::PutTemplate(t) => templates::put(state, at_ms, t, changes),
        Op::DeleteTemplate { name } => templates::delete(state, name, changes),
        Op::NoteMembership(_) => Ok(Applied::Nothing),
        Op::Admin { .. } => Err(invalid("an admin wrapper cannot wrap another")),
    }
}

/// Creates a tag within its creator's tag budget (a token's `max_tags`) and `max` tags in all,
/// and counts it.
fn create_tag(
    state: &mut State,
    actor: &Actor,
    tag: &str,
    record: TagRecord,
    max: usize,
    changes: &mut Changes,
) -> ApplyResult {
    crate::tokens::check_tag_budget(state, actor, 1)?;
    crate::regions::check_new_tag(state, tag, record.profile())?;
    let applied = tags::create(state, tag, record, max, changes)?;
    crate::tokens::count_tags(state, actor, 1, changes);
    Ok(applied)
}

/// Creates the tags of a batch that do not exist yet, all or none: the new ones must fit the
/// creator's tag budget and [`tags::MAX_TAGS`] together. The names are distinct
/// ([`check_fields`]).
fn create_tags(
    state: &mut State,
    at_ms: i64,
    actor: &Actor,
    batch: &[tags::NewTag],
    changes: &mut Changes,
) -> ApplyResult {
    let (existing, new): (Vec<&tags::NewTag>, Vec<&tags::NewTag>) =
        batch.iter().partition(|t| state.tags.contains_key(&t.tag));
    crate::tokens::check_tag_budget(state, actor, new.len())?;
    tags::check_room(state, new.len(), tags::MAX_TAGS)?;
    for t in &new {
        crate::regions::check_new_tag(state, &t.tag, &t.profile)?;
    }
    let mut created = Vec::with_capacity(new.len());
    for t in new {
        tags::create(state, &t.tag, t.record(at_ms), tags::MAX_TAGS, changes)?;
        created.push(t.tag.clone());
    }
    crate::tokens::count_tags(state, actor, created.len(), changes);
    Ok(Applied::Tags { created, existing: existing.into_iter().map(|t| t.tag.clone()).collect() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::record_members;
    use crate::testing::{alloc, at, cmd, create};

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
        let token = Op::CreateToken {
            token: crate::tokens::NewToken {
                id: TokenId(9),
                name: "svc".into(),
                rights: [leaf_api::tokens::Right::Cluster].into(),
                tags: vec![],
                quota: None,
                secret_hash: [1; 32],
            },
            limits: None,
        };
        let c = run(&mut s, cmd(token)).1;
        assert_eq!(c, Changes { tokens: [9].into(), audit: [3].into(), audit_meta: true, ..Changes::default() });
        assert_eq!(run(&mut s, alloc("nope", 10)).1, Changes::default());
        assert_eq!(run(&mut s, create("t", 10, 1)).1, Changes::default());
        // A new worker, the same node again (re-registration), a renewal.
        assert_eq!(
            run(&mut s, at(0, Op::RegisterWorker { node_id: 1, lease_ms: 10_000, within: None })).1,
            workers(&[0])
        );
        assert_eq!(
            run(&mut s, at(5, Op::RegisterWorker { node_id: 1, lease_ms: 10_000, within: None })).1,
            workers(&[0])
        );
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 9, lease_ms: 10_000 };
        assert_eq!(run(&mut s, at(6, renew.clone())).1, workers(&[0]));
        // Node 1 leaves; after its lease and grace, node 3 gets its ID: the recycled key.
        record_members(&mut s, [2, 3], &mut Changes::default());
        let (r, c) = run(&mut s, at(100_000, Op::RegisterWorker { node_id: 3, lease_ms: 10_000, within: None }));
        assert!(matches!(r, Ok(Applied::Worker(g)) if g.worker_id == 0), "{r:?}");
        assert_eq!(c, workers(&[0]));
        assert_eq!(s.workers[&0].previous_node_id, Some(1));
        // The fenced holder's renewal writes nothing.
        assert_eq!(run(&mut s, at(100_001, renew)).1, Changes::default());
    }
}
