//! The audit trail: who ([`Actor`]) changed what ([`AuditAction`]) and when (leader time), as
//! recorded through Raft with the change itself ([`AuditRecord`]), and the query of
//! `GET /admin/audit` ([`AuditQuery`], [`AuditPage`]).
use serde::{Deserialize, Serialize};

use crate::profile::Profile;
use crate::tokens::{IdQuota, Quota, Right, TagPattern, TokenId};

/// Longest name of a client certificate an actor carries, in bytes (longer ones are cut).
pub const MAX_ACTOR_NAME: usize = 64;
/// Longest learner address an audit record carries, in bytes (longer ones are cut).
pub const MAX_AUDIT_ADDR: usize = 256;
/// Most records one `GET /admin/audit` returns.
pub const MAX_AUDIT_PAGE: u32 = 1_000;
/// Records a page holds when the query gives no `limit`.
pub const DEFAULT_AUDIT_PAGE: u32 = 100;

/// Who made a change. Variants are only ever added at the end: records cross the network
/// between nodes of different releases and live in snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Actor {
    /// The configured `admin_token`.
    AdminToken,
    /// A client certificate named in `tls.admin_clients`.
    ClientCert { name: String },
    /// A loopback connection to a node without an `admin_token`.
    Loopback,
    /// A scoped token.
    Token { id: TokenId, name: String },
    /// The node itself (the bootstrap tag of `leaf serve`).
    Node { id: u64 },
    /// A change proposed by a release before the audit trail, or by a node that did not say.
    Unattributed,
}

impl Actor {
    /// The token behind the change, if a scoped token made it.
    pub fn token(&self) -> Option<TokenId> {
        match self {
            Actor::Token { id, .. } => Some(*id),
            _ => None,
        }
    }

    /// Whether every field is within its bound (what `apply` checks of a proposal).
    pub fn is_bounded(&self) -> bool {
        match self {
            Actor::ClientCert { name } | Actor::Token { name, .. } => name.len() <= MAX_ACTOR_NAME,
            _ => true,
        }
    }

    /// A client certificate's actor, its name cut to [`MAX_ACTOR_NAME`] bytes.
    pub fn client_cert(name: &str) -> Actor {
        Actor::ClientCert { name: cut(name, MAX_ACTOR_NAME) }
    }
}

/// `s` cut to at most `max` bytes on a character boundary.
pub fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// What changed. Only successful changes are recorded. Variants are only ever added at the end.
/// Stored with bincode in the Raft state: no field may be skipped when serializing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuditAction {
    TagCreated {
        tag: String,
        profile: Profile,
        step: i64,
        /// The tag's first ID (counter value).
        first_id: i64,
        upper_bound: Option<i64>,
    },
    TagUpdated {
        tag: String,
        /// The new step, if it changed.
        step: Option<i64>,
        /// Whether the description was set.
        description: bool,
    },
    TokenCreated {
        token: TokenId,
        name: String,
        rights: Vec<Right>,
        tags: Vec<TagPattern>,
        quota: Option<Quota>,
    },
    TokenRotated {
        token: TokenId,
        name: String,
        grace_ms: i64,
    },
    TokenRevoked {
        token: TokenId,
        name: String,
    },
    LearnerAdded {
        node_id: u64,
        addr: String,
    },
    NodePromoted {
        node_id: u64,
    },
    NodeRemoved {
        node_id: u64,
    },
    /// An obfuscated tag's ID decoded back to its sequence number: whoever can decode can
    /// count the tag's IDs, so each decode is on record.
    ObfuscatedDecoded {
        tag: String,
        id: i64,
    },
    /// A node's clock skewed by fault injection (chaos tests only): its snowflake IDs and
    /// leases follow the skewed clock.
    ClockFaultSet {
        node_id: u64,
        offset_ms: i64,
    },
    /// A token created with its limits in IDs and tags (kind `token_created`; releases before
    /// those limits recorded `token_created`).
    TokenCreatedWithLimits {
        token: TokenId,
        name: String,
        rights: Vec<Right>,
        tags: Vec<TagPattern>,
        quota: Option<Quota>,
        id_quota: Option<IdQuota>,
        max_tags: Option<u32>,
    },
    /// A tag archived: it hands out nothing more, and its name is never reused.
    TagArchived {
        tag: String,
        /// Its counter when archived: no ID at or above it was handed out.
        max_id: i64,
    },
    /// An archived tag brought back, its counter where it stopped.
    TagRestored {
        tag: String,
    },
    /// A tag template created or replaced (a security record: it decides which tags tokens
    /// may make on their first ID request).
    TemplatePut {
        name: String,
        pattern: String,
        profile: Profile,
        step: i64,
    },
    /// A tag template deleted; the tags it made stay.
    TemplateDeleted {
        name: String,
        pattern: String,
    },
    /// The cluster was made from a backup by `leaf restore`: every tag's counter moved past
    /// what the lost cluster can have handed out, and snowflake IDs start above a time floor.
    ClusterRestored {
        /// The backup's ID (32 hex digits).
        backup_id: String,
        /// The cluster's restore generation from now on (the backup's plus one).
        generation: u32,
        /// When the backup was taken (Unix ms, the clock of the node that took it).
        backup_taken_ms: i64,
        /// Tags whose counter moved.
        tags_moved: u64,
        /// Tags with no room left past their margin: they hand out nothing more.
        tags_exhausted: u64,
        /// No snowflake ID has a timestamp at or below this (Unix ms).
        snowflake_floor_ms: i64,
    },
    /// A gapless series' limits set (kind `tag_updated`).
    SeriesLimitsSet {
        tag: String,
        max_numbers: u64,
        issues_per_sec: u32,
    },
    /// A region registered with the global tier (kind `region_changed`): its ID and worker IDs
    /// are its own for good.
    RegionJoined {
        name: String,
        region_id: u16,
        first_worker: u16,
        last_worker: u16,
    },
    /// A region retired on the global tier (kind `region_changed`): it gets no block any more.
    RegionRetired {
        name: String,
        region_id: u16,
    },
    /// This cluster became a region (kind `region_changed`): its segment IDs come from the
    /// global tier's blocks and its snowflake workers keep to the region's worker IDs.
    RegionAdopted {
        name: String,
        region_id: u16,
        first_worker: u16,
        last_worker: u16,
    },
    /// A monotonic tag's home moved on the global tier (kind `region_changed`): the new home
    /// serves it, above every ID the old one can have issued.
    HomeMoved {
        tag: String,
        from: String,
        to: String,
        epoch: u32,
    },
}

/// The kinds of [`AuditAction`], for filtering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    TagCreated,
    TagUpdated,
    TokenCreated,
    TokenRotated,
    TokenRevoked,
    LearnerAdded,
    NodePromoted,
    NodeRemoved,
    ObfuscatedDecoded,
    ClockFaultSet,
    TagArchived,
    TagRestored,
    TemplatePut,
    TemplateDeleted,
    ClusterRestored,
    RegionChanged,
}

impl AuditKind {
    pub const ALL: [AuditKind; 16] = [
        AuditKind::TagCreated,
        AuditKind::TagUpdated,
        AuditKind::TokenCreated,
        AuditKind::TokenRotated,
        AuditKind::TokenRevoked,
        AuditKind::LearnerAdded,
        AuditKind::NodePromoted,
        AuditKind::NodeRemoved,
        AuditKind::ObfuscatedDecoded,
        AuditKind::ClockFaultSet,
        AuditKind::TagArchived,
        AuditKind::TagRestored,
        AuditKind::TemplatePut,
        AuditKind::TemplateDeleted,
        AuditKind::ClusterRestored,
        AuditKind::RegionChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AuditKind::TagCreated => "tag_created",
            AuditKind::TagUpdated => "tag_updated",
            AuditKind::TokenCreated => "token_created",
            AuditKind::TokenRotated => "token_rotated",
            AuditKind::TokenRevoked => "token_revoked",
            AuditKind::LearnerAdded => "learner_added",
            AuditKind::NodePromoted => "node_promoted",
            AuditKind::NodeRemoved => "node_removed",
            AuditKind::ObfuscatedDecoded => "obfuscated_decoded",
            AuditKind::ClockFaultSet => "clock_fault_set",
            AuditKind::TagArchived => "tag_archived",
            AuditKind::TagRestored => "tag_restored",
            AuditKind::TemplatePut => "template_put",
            AuditKind::TemplateDeleted => "template_deleted",
            AuditKind::ClusterRestored => "cluster_restored",
            AuditKind::RegionChanged => "region_changed",
        }
    }
}

impl std::str::FromStr for AuditKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        AuditKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| {
            let all: Vec<&str> = AuditKind::ALL.iter().map(|k| k.as_str()).collect();
            format!("unknown audit kind {:?}: one of {}", s.chars().take(32).collect::<String>(), all.join(", "))
        })
    }
}

impl AuditAction {
    pub fn kind(&self) -> AuditKind {
        match self {
            AuditAction::TagCreated { .. } => AuditKind::TagCreated,
            AuditAction::TagUpdated { .. } | AuditAction::SeriesLimitsSet { .. } => AuditKind::TagUpdated,
            AuditAction::TokenCreated { .. } | AuditAction::TokenCreatedWithLimits { .. } => AuditKind::TokenCreated,
            AuditAction::TokenRotated { .. } => AuditKind::TokenRotated,
            AuditAction::TokenRevoked { .. } => AuditKind::TokenRevoked,
            AuditAction::LearnerAdded { .. } => AuditKind::LearnerAdded,
            AuditAction::NodePromoted { .. } => AuditKind::NodePromoted,
            AuditAction::NodeRemoved { .. } => AuditKind::NodeRemoved,
            AuditAction::ObfuscatedDecoded { .. } => AuditKind::ObfuscatedDecoded,
            AuditAction::ClockFaultSet { .. } => AuditKind::ClockFaultSet,
            AuditAction::TagArchived { .. } => AuditKind::TagArchived,
            AuditAction::TagRestored { .. } => AuditKind::TagRestored,
            AuditAction::TemplatePut { .. } => AuditKind::TemplatePut,
            AuditAction::TemplateDeleted { .. } => AuditKind::TemplateDeleted,
            AuditAction::ClusterRestored { .. } => AuditKind::ClusterRestored,
            AuditAction::RegionJoined { .. }
            | AuditAction::RegionRetired { .. }
            | AuditAction::RegionAdopted { .. }
            | AuditAction::HomeMoved { .. } => AuditKind::RegionChanged,
        }
    }

    /// Whether the record is a security record (tokens, membership, clock faults), kept apart
    /// from the tag records (created, updated, decoded), which tenants write at will, so that no
    /// number of tag records pushes one out.
    pub fn is_security(&self) -> bool {
        !matches!(
            self,
            AuditAction::TagCreated { .. }
                | AuditAction::TagUpdated { .. }
                | AuditAction::SeriesLimitsSet { .. }
                | AuditAction::ObfuscatedDecoded { .. }
                | AuditAction::TagArchived { .. }
                | AuditAction::TagRestored { .. }
        )
    }

    /// The tag the change is about, if any.
    pub fn tag(&self) -> Option<&str> {
        match self {
            AuditAction::TagCreated { tag, .. }
            | AuditAction::TagUpdated { tag, .. }
            | AuditAction::SeriesLimitsSet { tag, .. }
            | AuditAction::ObfuscatedDecoded { tag, .. }
            | AuditAction::TagArchived { tag, .. }
            | AuditAction::TagRestored { tag } => Some(tag),
            _ => None,
        }
    }

    /// The token the change is about, if any.
    pub fn token(&self) -> Option<TokenId> {
        match self {
            AuditAction::TokenCreated { token, .. }
            | AuditAction::TokenCreatedWithLimits { token, .. }
            | AuditAction::TokenRotated { token, .. }
            | AuditAction::TokenRevoked { token, .. } => Some(*token),
            _ => None,
        }
    }
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditRecord {
    /// Position in the trail: 1, 2, 3… on every node alike, never reused.
    pub seq: u64,
    /// Leader time (Unix ms) stamped into the change.
    pub at_ms: i64,
    pub actor: Actor,
    pub action: AuditAction,
}

impl AuditRecord {
    /// Whether the record passes `q`'s filters (not its paging).
    pub fn matches(&self, q: &AuditFilter) -> bool {
        q.kind.is_none_or(|k| self.action.kind() == k)
            && q.tag.as_deref().is_none_or(|t| self.action.tag() == Some(t))
            && q.token.is_none_or(|t| self.actor.token() == Some(t) || self.action.token() == Some(t))
            && q.since_ms.is_none_or(|s| self.at_ms >= s)
            && q.until_ms.is_none_or(|u| self.at_ms < u)
    }
}

/// The filters of `GET /admin/audit`, every one optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilter {
    pub kind: Option<AuditKind>,
    pub tag: Option<String>,
    /// Changes made by this token, or made to it.
    pub token: Option<TokenId>,
    /// Leader time at or after (Unix ms).
    pub since_ms: Option<i64>,
    /// Leader time before (Unix ms).
    pub until_ms: Option<i64>,
}

/// How long the trail keeps records: the newest `max_records`, none older than `max_age_ms`
/// (leader time). Set by the leader from its `[audit]` configuration into every change it
/// records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditRetention {
    pub max_records: u32,
    pub max_age_ms: i64,
}

/// `GET /admin/audit`: the matching records, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuditPage {
    pub records: Vec<AuditRecord>,
    /// Pass as `after_seq` for the next page; absent when this page reached the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after_seq: Option<u64>,
    /// The oldest record still kept (older ones fell out of the retention); absent when the
    /// trail is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest_seq: Option<u64>,
    pub retention: AuditRetention,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(at_ms: i64, actor: Actor, action: AuditAction) -> AuditRecord {
        AuditRecord { seq: 1, at_ms, actor, action }
    }

    #[test]
    fn filters_combine() {
        let tok = TokenId(7);
        let created = record(
            100,
            Actor::Token { id: tok, name: "svc".into() },
            AuditAction::TagCreated {
                tag: "orders".into(),
                profile: Profile::Segment,
                step: 10,
                first_id: 1,
                upper_bound: None,
            },
        );
        let all = AuditFilter::default();
        assert!(created.matches(&all));
        assert!(created.matches(&AuditFilter { kind: Some(AuditKind::TagCreated), ..all.clone() }));
        assert!(!created.matches(&AuditFilter { kind: Some(AuditKind::TagUpdated), ..all.clone() }));
        assert!(created.matches(&AuditFilter { tag: Some("orders".into()), token: Some(tok), ..all.clone() }));
        assert!(!created.matches(&AuditFilter { tag: Some("order".into()), ..all.clone() }));
        assert!(!created.matches(&AuditFilter { token: Some(TokenId(8)), ..all.clone() }));
        assert!(created.matches(&AuditFilter { since_ms: Some(100), until_ms: Some(101), ..all.clone() }));
        assert!(!created.matches(&AuditFilter { since_ms: Some(101), ..all.clone() }));
        assert!(!created.matches(&AuditFilter { until_ms: Some(100), ..all.clone() }));
        // A token is found both as the actor and as what was changed.
        let revoked = record(5, Actor::AdminToken, AuditAction::TokenRevoked { token: tok, name: "svc".into() });
        assert!(revoked.matches(&AuditFilter { token: Some(tok), ..all }));
    }

    #[test]
    fn kinds_round_trip_and_json_is_snake_case() {
        for k in AuditKind::ALL {
            assert_eq!(k.as_str().parse::<AuditKind>().unwrap(), k);
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{}\"", k.as_str()));
        }
        assert!("nope".parse::<AuditKind>().is_err());
        let a = Actor::Token { id: TokenId(1), name: "n".into() };
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"token":{"id":"0000000000000001","name":"n"}}"#);
        assert_eq!(serde_json::to_string(&Actor::AdminToken).unwrap(), r#""admin_token""#);
        let bytes = crate::codec::encode(&a).unwrap();
        assert_eq!(crate::codec::decode::<Actor>(&bytes).unwrap(), a);
        // Records live in the Raft state as bincode: absent options must round-trip too.
        for action in [
            AuditAction::TagCreated {
                tag: "t".into(),
                profile: Profile::Daily,
                step: 1,
                first_id: 1,
                upper_bound: None,
            },
            AuditAction::TagUpdated { tag: "t".into(), step: None, description: false },
            AuditAction::TokenCreated {
                token: TokenId(3),
                name: "n".into(),
                rights: vec![],
                tags: vec![],
                quota: None,
            },
            AuditAction::TokenCreatedWithLimits {
                token: TokenId(4),
                name: "n".into(),
                rights: vec![],
                tags: vec![],
                quota: None,
                id_quota: None,
                max_tags: Some(3),
            },
        ] {
            let r = AuditRecord { seq: 9, at_ms: -1, actor: a.clone(), action };
            assert_eq!(crate::codec::decode::<AuditRecord>(&crate::codec::encode(&r).unwrap()).unwrap(), r);
        }
    }

    #[test]
    fn names_are_cut_on_character_boundaries() {
        assert_eq!(cut("abc", 2), "ab");
        assert_eq!(cut("ééé", 3), "é");
        let long = Actor::client_cert(&"x".repeat(100));
        assert!(long.is_bounded());
        assert!(!Actor::ClientCert { name: "x".repeat(65) }.is_bounded());
    }
}
