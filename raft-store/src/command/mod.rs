//! Commands proposed through Raft: a [`Command`] carries the proposer's time and an [`Op`],
//! what it does. Both are in the log as bincode, an [`Op`] through its wire form ([`wire`]):
//! the forms of every release before cluster versions, then one envelope per operation of a
//! later version ([`crate::version`]).
mod wire;

pub use wire::Envelope;

use leaf_api::audit::{Actor, AuditAction, AuditRetention};
use leaf_api::tokens::TokenId;
use serde::{Deserialize, Serialize};

use leaf_api::gapless::SeriesLimits;

pub use crate::audit::Trim;
use crate::gapless::OwnedAsk;
use crate::regions::{Block, Home, Identity};
use crate::tags::NewTag;
use crate::templates::NewTemplate;
use crate::tokens::{NewToken, SecretHash, TokenLimits};
use crate::version::{ClusterVersion, BASE};

/// A command proposed through Raft.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// Wall-clock milliseconds since the Unix epoch on the proposing node.
    pub at_ms: i64,
    pub op: Op,
}

/// What a command does: one variant per operation. Serialized through its wire form
/// ([`wire`]), which also reads every form earlier releases logged; where those forms apply
/// differently, a field here says how (`cap`, `limits`, `trim`, `rules`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Creates a tag, bounded by `cap`'s number of tags.
    CreateTag {
        tag: NewTag,
        cap: TagCap,
    },
    UpdateTag {
        tag: String,
        step: Option<i64>,
        description: Option<String>,
    },
    /// Reserve `[max_id, max_id + step)` for the proposing node, answered alone.
    AllocateSegment {
        tag: String,
        step: i64,
        node_id: u64,
    },
    /// Several [`Op::AllocateSegment`]s in one entry, applied in order, each as if alone and
    /// with its own result ([`crate::Applied::Segments`]): the leader's group commit of the
    /// allocations that arrive while it commits others. At most
    /// [`crate::tags::MAX_SEGMENT_ASKS`].
    AllocateSegments {
        asks: Vec<SegmentAsk>,
    },
    /// Give `node_id` a snowflake worker ID (its own again if it holds one) on a lease of
    /// `lease_ms` from the command's time; within the worker IDs `first..=last` when given (a
    /// cluster running beside old Leaf snowflake servers keeps to its own part of the 1024).
    RegisterWorker {
        node_id: u64,
        lease_ms: i64,
        within: Option<(u16, u16)>,
    },
    /// Extend the lease of `worker_id`, held by `node_id`, and raise its time high-water mark.
    RenewWorker {
        node_id: u64,
        worker_id: u16,
        high_water_ms: i64,
        lease_ms: i64,
    },
    /// Creates a scoped token (its secret only as a hash), with limits in IDs and tags; `None`:
    /// a token of the releases before limits (recorded in the trail as such).
    CreateToken {
        token: NewToken,
        limits: Option<TokenLimits>,
    },
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
    /// Records in the audit trail what is not a change of the replicated state: a membership
    /// change (made through openraft's own entries: `LearnerAdded`, `NodePromoted`,
    /// `NodeRemoved`), an obfuscated decode or a clock fault; nothing else.
    NoteMembership(AuditAction),
    /// An admin change (any operation that [`Op::is_admin`]) with who asked for it; the leader
    /// stamps its audit retention in. Recorded in the audit trail, which trims as `trim` says:
    /// each kind of record apart (tokens and membership apart from tags), or all together, as
    /// releases before the split did.
    Admin {
        actor: Actor,
        retention: AuditRetention,
        trim: Trim,
        op: Box<Op>,
    },
    /// Archives a tag: it allocates nothing more, and its name is never given to another tag.
    ArchiveTag {
        tag: String,
    },
    /// Brings an archived tag back, its counter where it stopped.
    RestoreTag {
        tag: String,
    },
    /// Creates every tag of `tags` that does not exist yet (the names are distinct); the
    /// existing ones are answered as such, so a batch is idempotent. All or nothing against
    /// the limits: the creator's tag budget and [`crate::tags::MAX_TAGS`].
    CreateTags {
        tags: Vec<NewTag>,
    },
    /// Creates a tag template, or replaces its pattern and settings.
    PutTemplate(NewTemplate),
    /// Deletes a tag template (the tags it made stay).
    DeleteTemplate {
        name: String,
    },
    /// Numbers of gapless series, one per ask, applied in order, each as if alone and with its
    /// own result ([`crate::Applied::Numbers`]): the leader's group commit of the issues that
    /// arrive while it commits others. At most [`crate::gapless::MAX_NUMBER_ASKS`]. Under
    /// [`NumberRules::Owned`] only the caller that took a number repeats, confirms or voids it,
    /// and each series keeps within its `max_numbers`; under [`NumberRules::Plain`] (cluster
    /// version 1) neither, and no ask carries a proof.
    IssueNumbers {
        asks: Vec<OwnedAsk>,
        rules: NumberRules,
    },
    /// Sets a gapless series' limits: its cap of numbers and each caller's rate.
    SetSeriesLimits {
        tag: String,
        limits: SeriesLimits,
    },
    /// Raises the cluster's active version ([`crate::version`]); a lower or equal one changes
    /// nothing. The leader proposes it once every member supports `version`.
    SetClusterVersion {
        version: ClusterVersion,
    },
    /// Registers region `name` with `workers` snowflake worker IDs of its own (global tier,
    /// [`crate::regions`]); a region that joined before gets its record again.
    JoinRegion {
        name: String,
        workers: u16,
    },
    /// Retires region `name` (global tier): it gets no block any more, and its name, ID and
    /// worker IDs are never given to another region.
    RetireRegion {
        name: String,
    },
    /// Grants region `region` a block of `size` IDs of `tag` (global tier), at or above
    /// `above`: an allocation of the tag's counter.
    GrantBlock {
        region: String,
        tag: String,
        size: i64,
        above: i64,
    },
    /// Makes this cluster the region the global tier registered (regional cluster).
    AdoptRegion(Identity),
    /// Adds a block the global tier granted to `tag`'s blocks (regional cluster).
    AdoptBlock {
        tag: String,
        block: Block,
    },
    /// Makes region `region` the home of the monotonic tag or gapless series `tag` if it has
    /// none (global tier, [`crate::regions::homes`]); answers the home.
    ClaimHome {
        region: String,
        tag: String,
    },
    /// Moves a monotonic tag's home to region `to` (global tier, an operator's change).
    MoveHome {
        tag: String,
        to: String,
    },
    /// Region `region` let go of `tag`, whose home moved away in `epoch` (global tier).
    ReleaseHome {
        region: String,
        tag: String,
        epoch: u32,
    },
    /// Renews region `region`'s lease on its homes (global tier).
    RenewLease {
        region: String,
    },
    /// Records `tag`'s home as the global tier answered it (regional cluster).
    AdoptHome {
        tag: String,
        home: Home,
    },
    /// An operation of a version this build does not support, kept whole as it arrived: the
    /// state machine stops at it rather than skip it. Never proposed.
    Undecodable(Envelope),
}

/// Which bound on the number of tags a creation meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagCap {
    /// [`crate::tags::LEGACY_MAX_TAGS`]: what releases before a million tags could encode.
    Legacy,
    /// [`crate::tags::MAX_TAGS`]: what the node proposes once the state holds the legacy bound
    /// (earlier releases cannot read such an entry).
    Full,
}

/// How the asks of an [`Op::IssueNumbers`] apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberRules {
    /// As cluster version 1 applies them: no owner, no cap.
    Plain,
    /// With owners and series caps (cluster version 2).
    Owned,
}

/// What applying an operation a second time does ([`Op::repeat`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// The same state and the same answer (or a waste, such as a skipped range): a request
    /// whose first attempt may have been applied may be sent again.
    Harmless,
    /// A different answer or state: such a request is sent again only when its first attempt
    /// surely never reached the leader.
    AnswersOtherwise,
}

/// One allocation of an [`Op::AllocateSegments`]: what an [`Op::AllocateSegment`] carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentAsk {
    pub tag: String,
    pub step: i64,
    pub node_id: u64,
}

impl Op {
    /// A plain segment tag without a bound, under the legacy cap (what every release applies).
    pub fn create_segment_tag(tag: String, step: i64, start_max_id: i64, description: String) -> Op {
        Op::CreateTag { tag: NewTag::segment(tag, step, start_max_id, description), cap: TagCap::Legacy }
    }

    /// Plain gapless asks (cluster version 1: no owner, no cap).
    pub fn plain_numbers(asks: Vec<crate::gapless::NumberAsk>) -> Op {
        let asks = asks.into_iter().map(|ask| OwnedAsk { ask, proof: None }).collect();
        Op::IssueNumbers { asks, rules: NumberRules::Plain }
    }

    /// `op` as an admin change by `actor`, recorded in the trail that keeps each kind apart.
    pub fn admin(actor: Actor, retention: AuditRetention, op: Op) -> Op {
        Op::Admin { actor, retention, trim: Trim::Apart, op: Box::new(op) }
    }

    /// The tag the operation is about, if it is a segment-mode operation.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Op::UpdateTag { tag, .. }
            | Op::ArchiveTag { tag }
            | Op::RestoreTag { tag }
            | Op::SetSeriesLimits { tag, .. }
            | Op::AllocateSegment { tag, .. }
            | Op::GrantBlock { tag, .. }
            | Op::AdoptBlock { tag, .. }
            | Op::ClaimHome { tag, .. }
            | Op::MoveHome { tag, .. }
            | Op::ReleaseHome { tag, .. }
            | Op::AdoptHome { tag, .. } => Some(tag),
            Op::CreateTag { tag, .. } => Some(&tag.tag),
            Op::Admin { op, .. } => op.tag(),
            Op::RegisterWorker { .. }
            | Op::RenewWorker { .. }
            | Op::CreateToken { .. }
            | Op::RotateToken { .. }
            | Op::RevokeToken { .. }
            | Op::CreateTags { .. }
            | Op::AllocateSegments { .. }
            | Op::IssueNumbers { .. }
            | Op::PutTemplate(_)
            | Op::DeleteTemplate { .. }
            | Op::SetClusterVersion { .. }
            | Op::JoinRegion { .. }
            | Op::RetireRegion { .. }
            | Op::AdoptRegion(_)
            | Op::RenewLease { .. }
            | Op::Undecodable(_)
            | Op::NoteMembership(_) => None,
        }
    }

    /// Whether the operation is an admin change: what the audit trail records and what
    /// [`Op::Admin`] may wrap.
    pub fn is_admin(&self) -> bool {
        match self {
            Op::CreateTag { .. }
            | Op::UpdateTag { .. }
            | Op::ArchiveTag { .. }
            | Op::RestoreTag { .. }
            | Op::CreateTags { .. }
            | Op::CreateToken { .. }
            | Op::RotateToken { .. }
            | Op::RevokeToken { .. }
            | Op::PutTemplate(_)
            | Op::DeleteTemplate { .. }
            | Op::SetSeriesLimits { .. }
            | Op::JoinRegion { .. }
            | Op::RetireRegion { .. }
            | Op::AdoptRegion(_)
            | Op::MoveHome { .. }
            | Op::NoteMembership(_) => true,
            Op::AllocateSegment { .. }
            | Op::GrantBlock { .. }
            | Op::AdoptBlock { .. }
            | Op::ClaimHome { .. }
            | Op::ReleaseHome { .. }
            | Op::RenewLease { .. }
            | Op::AdoptHome { .. }
            | Op::AllocateSegments { .. }
            | Op::IssueNumbers { .. }
            | Op::RegisterWorker { .. }
            | Op::RenewWorker { .. }
            | Op::SetClusterVersion { .. }
            | Op::Undecodable(_)
            | Op::Admin { .. } => false,
        }
    }

    /// Whether applying the operation may change a token's record: a token change, or a tag
    /// created with a token (which counts it).
    pub fn touches_tokens(&self) -> bool {
        match self {
            Op::CreateToken { .. } | Op::RotateToken { .. } | Op::RevokeToken { .. } => true,
            Op::Admin { actor, op, .. } => {
                op.touches_tokens()
                    || (actor.token().is_some() && matches!(**op, Op::CreateTag { .. } | Op::CreateTags { .. }))
            }
            _ => false,
        }
    }

    /// What the operation weighs in the log for snapshot and purge decisions
    /// ([`crate::LogWeights`]): a batch of tags counts each tag, a group of allocations each
    /// allocation, any other operation 1.
    pub fn weight(&self) -> u64 {
        match self.inner() {
            Op::CreateTags { tags } => (tags.len() as u64).max(1),
            Op::AllocateSegments { asks } => (asks.len() as u64).max(1),
            Op::IssueNumbers { asks, .. } => (asks.len() as u64).max(1),
            _ => 1,
        }
    }

    /// What applying the operation a second time does, for a request whose first attempt may
    /// have been applied (its answer was lost): every operation declares it here, so a new one
    /// cannot be retried by omission.
    pub fn repeat(&self) -> Repeat {
        match self {
            // A repeated allocation only wastes a range; a worker registration answers the
            // worker ID the node holds; a renewal moves the same lease again.
            Op::AllocateSegment { .. }
            | Op::AllocateSegments { .. }
            | Op::RegisterWorker { .. }
            | Op::RenewWorker { .. } => Repeat::Harmless,
            // Idempotent: the same fields, a batch answering the tags it made as existing,
            // the same template, the same limits, a note recorded twice.
            Op::UpdateTag { .. }
            | Op::CreateTags { .. }
            | Op::PutTemplate(_)
            | Op::SetSeriesLimits { .. }
            | Op::SetClusterVersion { .. }
            | Op::NoteMembership(_) => Repeat::Harmless,
            // A join answers the region's record, a retirement the retired record, an
            // adoption of the same region that region; a repeated grant leaves a gap.
            Op::JoinRegion { .. } | Op::RetireRegion { .. } | Op::AdoptRegion(_) | Op::GrantBlock { .. } => {
                Repeat::Harmless
            }
            // A repeat is refused: the block starts below where the tag's blocks now end.
            Op::AdoptBlock { .. } => Repeat::AnswersOtherwise,
            // A claim answers the home as it is, a move to where it is the same, a release or an
            // adoption of the same epoch the home unchanged, a renewal a later lease.
            Op::ClaimHome { .. }
            | Op::MoveHome { .. }
            | Op::ReleaseHome { .. }
            | Op::RenewLease { .. }
            | Op::AdoptHome { .. } => Repeat::Harmless,
            // A repeated issue answers the number its key has; a repeated settlement answers
            // the number as settled.
            Op::IssueNumbers { .. } => Repeat::Harmless,
            // A repeat answers `tag_exists`: the caller would see a failure for its success.
            Op::CreateTag { .. } => Repeat::AnswersOtherwise,
            // A repeat answers `exists`, and the caller never sees the bearer it created.
            Op::CreateToken { .. } => Repeat::AnswersOtherwise,
            // A repeat makes the new secret the "previous" one: the old secret loses its grace.
            Op::RotateToken { .. } => Repeat::AnswersOtherwise,
            // A repeat answers `token_not_found`, `tag_archived`, "not archived", or
            // `template_not_found`.
            Op::RevokeToken { .. } | Op::ArchiveTag { .. } | Op::RestoreTag { .. } | Op::DeleteTemplate { .. } => {
                Repeat::AnswersOtherwise
            }
            Op::Admin { op, .. } => op.repeat(),
            // Never proposed.
            Op::Undecodable(_) => Repeat::AnswersOtherwise,
        }
    }

    /// The cluster version the operation needs: what it is logged as ([`wire`]), and what the
    /// cluster must have activated before it is proposed or applied.
    pub fn version(&self) -> ClusterVersion {
        match self {
            Op::IssueNumbers { rules: NumberRules::Owned, .. } | Op::SetSeriesLimits { .. } => ClusterVersion(2),
            Op::SetClusterVersion { version } => (*version).max(ClusterVersion(2)),
            // A right older releases cannot read in a token record.
            Op::CreateToken { token, .. } if token.rights.contains(&leaf_api::tokens::Right::Regions) => {
                ClusterVersion(3)
            }
            Op::JoinRegion { .. }
            | Op::RetireRegion { .. }
            | Op::GrantBlock { .. }
            | Op::AdoptRegion(_)
            | Op::AdoptBlock { .. } => ClusterVersion(3),
            Op::ClaimHome { .. }
            | Op::MoveHome { .. }
            | Op::ReleaseHome { .. }
            | Op::RenewLease { .. }
            | Op::AdoptHome { .. } => ClusterVersion(4),
            Op::Undecodable(e) => e.version,
            Op::Admin { op, .. } => op.version(),
            Op::CreateTag { .. }
            | Op::UpdateTag { .. }
            | Op::AllocateSegment { .. }
            | Op::AllocateSegments { .. }
            | Op::RegisterWorker { .. }
            | Op::RenewWorker { .. }
            | Op::CreateToken { .. }
            | Op::RotateToken { .. }
            | Op::RevokeToken { .. }
            | Op::NoteMembership(_)
            | Op::ArchiveTag { .. }
            | Op::RestoreTag { .. }
            | Op::CreateTags { .. }
            | Op::PutTemplate(_)
            | Op::DeleteTemplate { .. }
            | Op::IssueNumbers { rules: NumberRules::Plain, .. } => BASE,
        }
    }

    /// What the operation is, in a few words (errors and logs).
    pub fn what(&self) -> &'static str {
        match self {
            Op::CreateTag { .. } => "a tag creation",
            Op::CreateTags { .. } => "a batch of tag creations",
            Op::UpdateTag { .. } => "a tag update",
            Op::ArchiveTag { .. } | Op::RestoreTag { .. } => "a tag archive or restore",
            Op::AllocateSegment { .. } => "a segment allocation",
            Op::AllocateSegments { .. } => "a group of segment allocations",
            Op::IssueNumbers { rules: NumberRules::Plain, .. } => "an issue of gapless numbers",
            Op::IssueNumbers { rules: NumberRules::Owned, .. } => "an issue of owned gapless numbers",
            Op::SetSeriesLimits { .. } => "a series' limits",
            Op::RegisterWorker { .. } => "a worker registration",
            Op::RenewWorker { .. } => "a worker renewal",
            Op::CreateToken { .. } | Op::RotateToken { .. } | Op::RevokeToken { .. } => "a token change",
            Op::PutTemplate(_) | Op::DeleteTemplate { .. } => "a template change",
            Op::NoteMembership(_) => "a membership note",
            Op::SetClusterVersion { .. } => "a cluster version raise",
            Op::JoinRegion { .. } => "a region's join",
            Op::RetireRegion { .. } => "a region's retirement",
            Op::GrantBlock { .. } => "a block grant to a region",
            Op::AdoptRegion(_) => "a region adoption",
            Op::AdoptBlock { .. } => "a block adoption",
            Op::ClaimHome { .. } => "a home region's claim",
            Op::MoveHome { .. } => "a home region's move",
            Op::ReleaseHome { .. } => "a home region's release",
            Op::RenewLease { .. } => "a region's lease renewal",
            Op::AdoptHome { .. } => "a home region's adoption",
            Op::Undecodable(_) => "an operation of a later release",
            Op::Admin { op, .. } => op.what(),
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
