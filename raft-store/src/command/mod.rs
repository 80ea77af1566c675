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

use crate::gapless::{NumberAsk, OwnedAsk};
use crate::profile::StoredProfile;
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

/// What a command does. Serialized through its wire form ([`wire`]).
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Records in the audit trail what is not a change of the replicated state: a membership
    /// change (made through openraft's own entries: `LearnerAdded`, `NodePromoted`,
    /// `NodeRemoved`), an obfuscated decode or a clock fault; nothing else.
    NoteMembership(AuditAction),
    /// An admin change (any of the ops above it but allocations and workers) with who asked
    /// for it; the leader stamps its audit retention in. Recorded in the audit trail, which
    /// trims its records together (the newest `max_records` of every kind): what releases
    /// before [`Op::AdminApart`] wrote.
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
    /// [`Op::Admin`], recorded in a trail that keeps security records (tokens, membership)
    /// apart from tag records: each kind keeps its own newest `max_records`, so a tenant's tag
    /// changes never push a token or membership record out.
    AdminApart {
        actor: Actor,
        retention: AuditRetention,
        op: Box<Op>,
    },
    /// Creates a scoped token with limits in IDs and tags. `CreateToken` stays for logs of
    /// earlier releases (a token without them).
    CreateTokenV2 {
        token: NewToken,
        limits: TokenLimits,
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
    /// Creates one tag, as `CreateTagV2`, bounded by [`crate::tags::MAX_TAGS`] rather than
    /// [`crate::tags::LEGACY_MAX_TAGS`]: what the node proposes once the state holds that many
    /// (earlier releases cannot read it).
    CreateTagV3(NewTag),
    /// Creates a tag template, or replaces its pattern and settings.
    PutTemplate(NewTemplate),
    /// Deletes a tag template (the tags it made stay).
    DeleteTemplate {
        name: String,
    },
    /// Several [`Op::AllocateSegment`]s in one entry, applied in order, each as if alone and
    /// with its own result ([`crate::Applied::Segments`]): the leader's group commit of the
    /// allocations that arrive while it commits others. At most
    /// [`crate::tags::MAX_SEGMENT_ASKS`].
    AllocateSegments {
        asks: Vec<SegmentAsk>,
    },
    /// Numbers of gapless series, one per ask, applied in order, each as if alone and with its
    /// own result ([`crate::Applied::Numbers`]): the leader's group commit of the issues that
    /// arrive while it commits others. At most [`crate::gapless::MAX_NUMBER_ASKS`].
    IssueNumbers {
        asks: Vec<NumberAsk>,
    },
    /// [`Op::IssueNumbers`] with owners and caps ([`crate::gapless`]): only the caller that took
    /// a number repeats, confirms or voids it, and each series keeps within its
    /// `max_numbers`. What this release proposes.
    IssueOwnedNumbers {
        asks: Vec<OwnedAsk>,
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
    /// An operation of a version this build does not support, kept whole as it arrived: the
    /// state machine stops at it rather than skip it. Never proposed.
    Undecodable(Envelope),
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
    /// The tag the operation is about, if it is a segment-mode operation.
    pub fn tag(&self) -> Option<&str> {
        match self {
            Op::CreateTag { tag, .. }
            | Op::CreateTagV2 { tag, .. }
            | Op::UpdateTag { tag, .. }
            | Op::ArchiveTag { tag }
            | Op::RestoreTag { tag }
            | Op::SetSeriesLimits { tag, .. }
            | Op::AllocateSegment { tag, .. } => Some(tag),
            Op::CreateTagV3(t) => Some(&t.tag),
            Op::Admin { op, .. } | Op::AdminApart { op, .. } => op.tag(),
            Op::RegisterWorker { .. }
            | Op::RegisterWorkerIn { .. }
            | Op::RenewWorker { .. }
            | Op::CreateToken(_)
            | Op::CreateTokenV2 { .. }
            | Op::RotateToken { .. }
            | Op::RevokeToken { .. }
            | Op::CreateTags { .. }
            | Op::AllocateSegments { .. }
            | Op::IssueNumbers { .. }
            | Op::IssueOwnedNumbers { .. }
            | Op::PutTemplate(_)
            | Op::DeleteTemplate { .. }
            | Op::SetClusterVersion { .. }
            | Op::Undecodable(_)
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
            | Op::ArchiveTag { .. }
            | Op::RestoreTag { .. }
            | Op::CreateTags { .. }
            | Op::CreateTagV3(_)
            | Op::CreateToken(_)
            | Op::CreateTokenV2 { .. }
            | Op::RotateToken { .. }
            | Op::RevokeToken { .. }
            | Op::PutTemplate(_)
            | Op::DeleteTemplate { .. }
            | Op::SetSeriesLimits { .. }
            | Op::NoteMembership(_) => true,
            Op::AllocateSegment { .. }
            | Op::AllocateSegments { .. }
            | Op::IssueNumbers { .. }
            | Op::IssueOwnedNumbers { .. }
            | Op::RegisterWorker { .. }
            | Op::RegisterWorkerIn { .. }
            | Op::RenewWorker { .. }
            | Op::SetClusterVersion { .. }
            | Op::Undecodable(_)
            | Op::Admin { .. }
            | Op::AdminApart { .. } => false,
        }
    }

    /// Whether applying the operation may change a token's record: a token change, or a tag
    /// created with a token (which counts it).
    pub fn touches_tokens(&self) -> bool {
        match self {
            Op::CreateToken(_) | Op::CreateTokenV2 { .. } | Op::RotateToken { .. } | Op::RevokeToken { .. } => true,
            Op::Admin { actor, op, .. } | Op::AdminApart { actor, op, .. } => {
                op.touches_tokens()
                    || (actor.token().is_some()
                        && matches!(
                            **op,
                            Op::CreateTag { .. } | Op::CreateTagV2 { .. } | Op::CreateTagV3(_) | Op::CreateTags { .. }
                        ))
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
            Op::IssueNumbers { asks } => (asks.len() as u64).max(1),
            Op::IssueOwnedNumbers { asks } => (asks.len() as u64).max(1),
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
            | Op::RegisterWorkerIn { .. }
            | Op::RenewWorker { .. } => Repeat::Harmless,
            // Idempotent: the same fields, a batch answering the tags it made as existing,
            // the same template, the same limits, a note recorded twice.
            Op::UpdateTag { .. }
            | Op::CreateTags { .. }
            | Op::PutTemplate(_)
            | Op::SetSeriesLimits { .. }
            | Op::SetClusterVersion { .. }
            | Op::NoteMembership(_) => Repeat::Harmless,
            // A repeated issue answers the number its key has; a repeated settlement answers
            // the number as settled.
            Op::IssueNumbers { .. } | Op::IssueOwnedNumbers { .. } => Repeat::Harmless,
            // A repeat answers `tag_exists`: the caller would see a failure for its success.
            Op::CreateTag { .. } | Op::CreateTagV2 { .. } | Op::CreateTagV3(_) => Repeat::AnswersOtherwise,
            // A repeat answers `exists`, and the caller never sees the bearer it created.
            Op::CreateToken(_) | Op::CreateTokenV2 { .. } => Repeat::AnswersOtherwise,
            // A repeat makes the new secret the "previous" one: the old secret loses its grace.
            Op::RotateToken { .. } => Repeat::AnswersOtherwise,
            // A repeat answers `token_not_found`, `tag_archived`, "not archived", or
            // `template_not_found`.
            Op::RevokeToken { .. } | Op::ArchiveTag { .. } | Op::RestoreTag { .. } | Op::DeleteTemplate { .. } => {
                Repeat::AnswersOtherwise
            }
            Op::Admin { op, .. } | Op::AdminApart { op, .. } => op.repeat(),
            // Never proposed.
            Op::Undecodable(_) => Repeat::AnswersOtherwise,
        }
    }

    /// The cluster version the operation needs: what it is logged as ([`wire`]), and what the
    /// cluster must have activated before it is proposed or applied.
    pub fn version(&self) -> ClusterVersion {
        match self {
            Op::IssueOwnedNumbers { .. } | Op::SetSeriesLimits { .. } => ClusterVersion(2),
            Op::SetClusterVersion { version } => (*version).max(ClusterVersion(2)),
            Op::Undecodable(e) => e.version,
            Op::Admin { op, .. } | Op::AdminApart { op, .. } => op.version(),
            Op::CreateTag { .. }
            | Op::UpdateTag { .. }
            | Op::AllocateSegment { .. }
            | Op::RegisterWorker { .. }
            | Op::RenewWorker { .. }
            | Op::CreateTagV2 { .. }
            | Op::CreateToken(_)
            | Op::RotateToken { .. }
            | Op::RevokeToken { .. }
            | Op::NoteMembership(_)
            | Op::RegisterWorkerIn { .. }
            | Op::CreateTokenV2 { .. }
            | Op::ArchiveTag { .. }
            | Op::RestoreTag { .. }
            | Op::CreateTags { .. }
            | Op::CreateTagV3(_)
            | Op::PutTemplate(_)
            | Op::DeleteTemplate { .. }
            | Op::AllocateSegments { .. }
            | Op::IssueNumbers { .. } => BASE,
        }
    }

    /// What the operation is, in a few words (errors and logs).
    pub fn what(&self) -> &'static str {
        match self {
            Op::CreateTag { .. } | Op::CreateTagV2 { .. } | Op::CreateTagV3(_) => "a tag creation",
            Op::CreateTags { .. } => "a batch of tag creations",
            Op::UpdateTag { .. } => "a tag update",
            Op::ArchiveTag { .. } | Op::RestoreTag { .. } => "a tag archive or restore",
            Op::AllocateSegment { .. } => "a segment allocation",
            Op::AllocateSegments { .. } => "a group of segment allocations",
            Op::IssueNumbers { .. } => "an issue of gapless numbers",
            Op::IssueOwnedNumbers { .. } => "an issue of owned gapless numbers",
            Op::SetSeriesLimits { .. } => "a series' limits",
            Op::RegisterWorker { .. } | Op::RegisterWorkerIn { .. } => "a worker registration",
            Op::RenewWorker { .. } => "a worker renewal",
            Op::CreateToken(_) | Op::CreateTokenV2 { .. } | Op::RotateToken { .. } | Op::RevokeToken { .. } => {
                "a token change"
            }
            Op::PutTemplate(_) | Op::DeleteTemplate { .. } => "a template change",
            Op::NoteMembership(_) => "a membership note",
            Op::SetClusterVersion { .. } => "a cluster version raise",
            Op::Undecodable(_) => "an operation of a later release",
            Op::Admin { op, .. } | Op::AdminApart { op, .. } => op.what(),
        }
    }

    /// The operation an [`Op::Admin`] wraps, or this one.
    pub fn inner(&self) -> &Op {
        match self {
            Op::Admin { op, .. } | Op::AdminApart { op, .. } => op,
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
