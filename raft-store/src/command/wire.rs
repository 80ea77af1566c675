//! How an [`Op`] is written in the log and sent to peers ([`WireOp`]): every form a release has
//! written, in the order they were added (bincode numbers enum variants by position), then one
//! [`Envelope`] that names the cluster version of what it carries.
//!
//! - Operations of version 1 (every release before cluster versions) keep the variants those
//!   releases wrote, so they read what this one writes while the cluster runs at version 1.
//!   Each decodes into the one [`Op`] of its operation; where two forms apply differently, a
//!   field of the [`Op`] keeps the difference (a tag's cap, a token without limits, the audit
//!   trail's trim), and it encodes back into the same form.
//! - Every later operation travels in an envelope: `(version, codec record)`. A node that
//!   supports the version decodes the record; one that does not keeps the envelope whole as
//!   [`Op::Undecodable`] (its log stays intact) and its state machine stops at that entry,
//!   naming the version, rather than skipping it. New operations go last in [`Versioned`],
//!   with the version that adds them.
use leaf_api::audit::{Actor, AuditAction, AuditRetention};
use leaf_api::codec;
use leaf_api::gapless::SeriesLimits;
use leaf_api::tokens::TokenId;
use serde::{Deserialize, Serialize};

use super::{NumberRules, Op, SegmentAsk, TagCap, Trim};
use crate::gapless::{NumberAsk, OwnedAsk};
use crate::profile::StoredProfile;
use crate::regions::{Block, Home, Identity};
use crate::tags::NewTag;
use crate::templates::NewTemplate;
use crate::tokens::{NewToken, SecretHash, TokenLimits};
use crate::version::{ClusterVersion, SUPPORTED};

/// An operation of a version this node does not support, as it arrived: kept whole, so the
/// log holds what the leader wrote, and applied by no one here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The cluster version the operation needs.
    pub version: ClusterVersion,
    /// The operation, a [`codec`] record.
    pub body: Vec<u8>,
}

/// The forms of [`Op`] in the log. Variants are never removed or reordered.
#[derive(Serialize, Deserialize)]
pub(super) enum WireOp {
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
    AllocateSegment {
        tag: String,
        step: i64,
        node_id: u64,
    },
    RegisterWorker {
        node_id: u64,
        lease_ms: i64,
    },
    RenewWorker {
        node_id: u64,
        worker_id: u16,
        high_water_ms: i64,
        lease_ms: i64,
    },
    CreateTagV2 {
        tag: String,
        step: i64,
        start_max_id: i64,
        description: String,
        profile: StoredProfile,
        upper_bound: Option<i64>,
    },
    CreateToken(NewToken),
    RotateToken {
        id: TokenId,
        secret_hash: SecretHash,
        grace_ms: i64,
    },
    RevokeToken {
        id: TokenId,
    },
    NoteMembership(AuditAction),
    Admin {
        actor: Actor,
        retention: AuditRetention,
        op: Box<WireOp>,
    },
    RegisterWorkerIn {
        node_id: u64,
        lease_ms: i64,
        first: u16,
        last: u16,
    },
    AdminApart {
        actor: Actor,
        retention: AuditRetention,
        op: Box<WireOp>,
    },
    CreateTokenV2 {
        token: NewToken,
        limits: TokenLimits,
    },
    ArchiveTag {
        tag: String,
    },
    RestoreTag {
        tag: String,
    },
    CreateTags {
        tags: Vec<NewTag>,
    },
    CreateTagV3(NewTag),
    PutTemplate(NewTemplate),
    DeleteTemplate {
        name: String,
    },
    AllocateSegments {
        asks: Vec<SegmentAsk>,
    },
    IssueNumbers {
        asks: Vec<NumberAsk>,
    },
    // Version 1 ends here: releases before cluster versions read every variant above.
    /// Every operation of a later version.
    Versioned(Envelope),
}

/// What an [`Envelope`] carries. New operations go last.
#[derive(Serialize, Deserialize)]
enum Versioned {
    IssueOwnedNumbers { asks: Vec<OwnedAsk> },
    SetSeriesLimits { tag: String, limits: SeriesLimits },
    SetClusterVersion { version: ClusterVersion },
    JoinRegion { name: String, workers: u16 },
    RetireRegion { name: String },
    GrantBlock { region: String, tag: String, size: i64, above: i64 },
    AdoptRegion(Identity),
    AdoptBlock { tag: String, block: Block },
    ClaimHome { region: String, tag: String },
    MoveHome { tag: String, to: String },
    ReleaseHome { region: String, tag: String, epoch: u32 },
    RenewLease { region: String },
    AdoptHome { tag: String, home: Home },
}

impl TryFrom<Op> for WireOp {
    type Error = String;

    fn try_from(op: Op) -> Result<Self, String> {
        let version = op.version();
        let versioned = match op {
            Op::CreateTag { tag, cap: TagCap::Full } => return Ok(WireOp::CreateTagV3(tag)),
            // A plain segment tag in the first form, which every release applies.
            Op::CreateTag {
                tag: NewTag { tag, step, start_max_id, description, profile, upper_bound },
                cap: TagCap::Legacy,
            } => {
                return Ok(match (profile, upper_bound) {
                    (StoredProfile::Segment, None) => WireOp::CreateTag { tag, step, start_max_id, description },
                    (profile, upper_bound) => {
                        WireOp::CreateTagV2 { tag, step, start_max_id, description, profile, upper_bound }
                    }
                })
            }
            Op::UpdateTag { tag, step, description } => return Ok(WireOp::UpdateTag { tag, step, description }),
            Op::AllocateSegment { tag, step, node_id } => return Ok(WireOp::AllocateSegment { tag, step, node_id }),
            Op::AllocateSegments { asks } => return Ok(WireOp::AllocateSegments { asks }),
            Op::RegisterWorker { node_id, lease_ms, within: None } => {
                return Ok(WireOp::RegisterWorker { node_id, lease_ms })
            }
            Op::RegisterWorker { node_id, lease_ms, within: Some((first, last)) } => {
                return Ok(WireOp::RegisterWorkerIn { node_id, lease_ms, first, last })
            }
            Op::RenewWorker { node_id, worker_id, high_water_ms, lease_ms } => {
                return Ok(WireOp::RenewWorker { node_id, worker_id, high_water_ms, lease_ms })
            }
            Op::CreateToken { token, limits: None } => return Ok(WireOp::CreateToken(token)),
            Op::CreateToken { token, limits: Some(limits) } => return Ok(WireOp::CreateTokenV2 { token, limits }),
            Op::RotateToken { id, secret_hash, grace_ms } => {
                return Ok(WireOp::RotateToken { id, secret_hash, grace_ms })
            }
            Op::RevokeToken { id } => return Ok(WireOp::RevokeToken { id }),
            Op::NoteMembership(a) => return Ok(WireOp::NoteMembership(a)),
            Op::Admin { actor, retention, trim, op } => {
                let op = Box::new(WireOp::try_from(*op)?);
                return Ok(match trim {
                    Trim::Together => WireOp::Admin { actor, retention, op },
                    Trim::Apart => WireOp::AdminApart { actor, retention, op },
                });
            }
            Op::ArchiveTag { tag } => return Ok(WireOp::ArchiveTag { tag }),
            Op::RestoreTag { tag } => return Ok(WireOp::RestoreTag { tag }),
            Op::CreateTags { tags } => return Ok(WireOp::CreateTags { tags }),
            Op::PutTemplate(t) => return Ok(WireOp::PutTemplate(t)),
            Op::DeleteTemplate { name } => return Ok(WireOp::DeleteTemplate { name }),
            Op::IssueNumbers { asks, rules: NumberRules::Plain } => {
                return Ok(WireOp::IssueNumbers { asks: asks.into_iter().map(|a| a.ask).collect() })
            }
            Op::Undecodable(envelope) => return Ok(WireOp::Versioned(envelope)),
            Op::IssueNumbers { asks, rules: NumberRules::Owned } => Versioned::IssueOwnedNumbers { asks },
            Op::SetSeriesLimits { tag, limits } => Versioned::SetSeriesLimits { tag, limits },
            Op::SetClusterVersion { version } => Versioned::SetClusterVersion { version },
            Op::JoinRegion { name, workers } => Versioned::JoinRegion { name, workers },
            Op::RetireRegion { name } => Versioned::RetireRegion { name },
            Op::GrantBlock { region, tag, size, above } => Versioned::GrantBlock { region, tag, size, above },
            Op::AdoptRegion(identity) => Versioned::AdoptRegion(identity),
            Op::AdoptBlock { tag, block } => Versioned::AdoptBlock { tag, block },
            Op::ClaimHome { region, tag } => Versioned::ClaimHome { region, tag },
            Op::MoveHome { tag, to } => Versioned::MoveHome { tag, to },
            Op::ReleaseHome { region, tag, epoch } => Versioned::ReleaseHome { region, tag, epoch },
            Op::RenewLease { region } => Versioned::RenewLease { region },
            Op::AdoptHome { tag, home } => Versioned::AdoptHome { tag, home },
        };
        let body = codec::encode(&versioned).map_err(|e| format!("an operation of cluster version {version}: {e}"))?;
        Ok(WireOp::Versioned(Envelope { version, body }))
    }
}

impl TryFrom<WireOp> for Op {
    type Error = String;

    fn try_from(w: WireOp) -> Result<Self, String> {
        let legacy = |tag| Op::CreateTag { tag, cap: TagCap::Legacy };
        Ok(match w {
            WireOp::CreateTag { tag, step, start_max_id, description } => {
                legacy(NewTag::segment(tag, step, start_max_id, description))
            }
            WireOp::CreateTagV2 { tag, step, start_max_id, description, profile, upper_bound } => {
                legacy(NewTag { tag, step, start_max_id, description, profile, upper_bound })
            }
            WireOp::CreateTagV3(tag) => Op::CreateTag { tag, cap: TagCap::Full },
            WireOp::UpdateTag { tag, step, description } => Op::UpdateTag { tag, step, description },
            WireOp::AllocateSegment { tag, step, node_id } => Op::AllocateSegment { tag, step, node_id },
            WireOp::AllocateSegments { asks } => Op::AllocateSegments { asks },
            WireOp::RegisterWorker { node_id, lease_ms } => Op::RegisterWorker { node_id, lease_ms, within: None },
            WireOp::RegisterWorkerIn { node_id, lease_ms, first, last } => {
                Op::RegisterWorker { node_id, lease_ms, within: Some((first, last)) }
            }
            WireOp::RenewWorker { node_id, worker_id, high_water_ms, lease_ms } => {
                Op::RenewWorker { node_id, worker_id, high_water_ms, lease_ms }
            }
            WireOp::CreateToken(token) => Op::CreateToken { token, limits: None },
            WireOp::CreateTokenV2 { token, limits } => Op::CreateToken { token, limits: Some(limits) },
            WireOp::RotateToken { id, secret_hash, grace_ms } => Op::RotateToken { id, secret_hash, grace_ms },
            WireOp::RevokeToken { id } => Op::RevokeToken { id },
            WireOp::NoteMembership(a) => Op::NoteMembership(a),
            WireOp::Admin { actor, retention, op } => {
                Op::Admin { actor, retention, trim: Trim::Together, op: Box::new(Op::try_from(*op)?) }
            }
            WireOp::AdminApart { actor, retention, op } => {
                Op::Admin { actor, retention, trim: Trim::Apart, op: Box::new(Op::try_from(*op)?) }
            }
            WireOp::ArchiveTag { tag } => Op::ArchiveTag { tag },
            WireOp::RestoreTag { tag } => Op::RestoreTag { tag },
            WireOp::CreateTags { tags } => Op::CreateTags { tags },
            WireOp::PutTemplate(t) => Op::PutTemplate(t),
            WireOp::DeleteTemplate { name } => Op::DeleteTemplate { name },
            WireOp::IssueNumbers { asks } => Op::IssueNumbers {
                asks: asks.into_iter().map(|ask| OwnedAsk { ask, proof: None }).collect(),
                rules: NumberRules::Plain,
            },
            WireOp::Versioned(e) if e.version > SUPPORTED => Op::Undecodable(e),
            WireOp::Versioned(e) => {
                let op = match codec::decode::<Versioned>(&e.body) {
                    Ok(Versioned::IssueOwnedNumbers { asks }) => Op::IssueNumbers { asks, rules: NumberRules::Owned },
                    Ok(Versioned::SetSeriesLimits { tag, limits }) => Op::SetSeriesLimits { tag, limits },
                    Ok(Versioned::SetClusterVersion { version }) => Op::SetClusterVersion { version },
                    Ok(Versioned::JoinRegion { name, workers }) => Op::JoinRegion { name, workers },
                    Ok(Versioned::RetireRegion { name }) => Op::RetireRegion { name },
                    Ok(Versioned::GrantBlock { region, tag, size, above }) => {
                        Op::GrantBlock { region, tag, size, above }
                    }
                    Ok(Versioned::AdoptRegion(identity)) => Op::AdoptRegion(identity),
                    Ok(Versioned::AdoptBlock { tag, block }) => Op::AdoptBlock { tag, block },
                    Ok(Versioned::ClaimHome { region, tag }) => Op::ClaimHome { region, tag },
                    Ok(Versioned::MoveHome { tag, to }) => Op::MoveHome { tag, to },
                    Ok(Versioned::ReleaseHome { region, tag, epoch }) => Op::ReleaseHome { region, tag, epoch },
                    Ok(Versioned::RenewLease { region }) => Op::RenewLease { region },
                    Ok(Versioned::AdoptHome { tag, home }) => Op::AdoptHome { tag, home },
                    Err(err) => {
                        return Err(format!("an operation of cluster version {} does not decode: {err}", e.version))
                    }
                };
                // The envelope must name the version the operation needs: a lower one would let
                // a node that cannot apply it take it.
                if op.version() != e.version {
                    return Err(format!(
                        "an operation of cluster version {} came in an envelope of version {}",
                        op.version(),
                        e.version
                    ));
                }
                op
            }
        })
    }
}

impl Serialize for Op {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        WireOp::try_from(self.clone()).map_err(serde::ser::Error::custom)?.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Op::try_from(WireOp::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::Actor;

    use super::*;
    use crate::apply::{apply, ApplyError, Changes};
    use crate::audit::DEFAULT_RETENTION;
    use crate::command::Command;
    use crate::gapless::NumberAct;
    use crate::state::State;
    use crate::version::{form, ClusterVersion, BASE};

    fn ask(key: &str) -> NumberAsk {
        NumberAsk { tag: "inv".into(), key: key.into(), actor: Actor::Unattributed, act: NumberAct::Issue }
    }

    fn owned(key: &str) -> OwnedAsk {
        OwnedAsk { ask: ask(key), proof: Some([3; 32]) }
    }

    fn bytes(op: &Op) -> Vec<u8> {
        codec::encode(&Command { at_ms: 1, op: op.clone() }).unwrap()
    }

    fn decoded(b: &[u8]) -> Op {
        codec::decode::<Command>(b).unwrap().op
    }

    /// A command written in `w`, a form of the log, as a release wrote it.
    fn logged(w: WireOp) -> Vec<u8> {
        codec::encode(&(1i64, w)).unwrap()
    }

    /// The position of the operation's variant in the log (bincode's first byte after the
    /// record header and `at_ms` = 1).
    fn variant(op: &Op) -> u8 {
        bytes(op)[codec::HEADER + 1]
    }

    fn token() -> NewToken {
        NewToken {
            id: TokenId(7),
            name: "ci".into(),
            rights: Default::default(),
            tags: vec![],
            quota: None,
            secret_hash: [1; 32],
        }
    }

    /// Every form a release before cluster versions logged, one of each.
    fn every_version_one_form() -> Vec<WireOp> {
        let inner = || Box::new(WireOp::ArchiveTag { tag: "t".into() });
        let new_tag = NewTag::segment("t".into(), 10, 1, "d".into());
        vec![
            WireOp::CreateTag { tag: "t".into(), step: 10, start_max_id: 1, description: "d".into() },
            WireOp::UpdateTag { tag: "t".into(), step: Some(20), description: None },
            WireOp::AllocateSegment { tag: "t".into(), step: 10, node_id: 1 },
            WireOp::RegisterWorker { node_id: 1, lease_ms: 10_000 },
            WireOp::RenewWorker { node_id: 1, worker_id: 3, high_water_ms: 5, lease_ms: 10_000 },
            WireOp::CreateTagV2 {
                tag: "t".into(),
                step: 10,
                start_max_id: 1,
                description: "d".into(),
                profile: StoredProfile::Monotonic,
                upper_bound: Some(1_000),
            },
            WireOp::CreateToken(token()),
            WireOp::RotateToken { id: TokenId(7), secret_hash: [2; 32], grace_ms: 60_000 },
            WireOp::RevokeToken { id: TokenId(7) },
            WireOp::NoteMembership(AuditAction::NodePromoted { node_id: 2 }),
            WireOp::Admin { actor: Actor::AdminToken, retention: DEFAULT_RETENTION, op: inner() },
            WireOp::RegisterWorkerIn { node_id: 1, lease_ms: 10_000, first: 2, last: 9 },
            WireOp::AdminApart { actor: Actor::AdminToken, retention: DEFAULT_RETENTION, op: inner() },
            WireOp::CreateTokenV2 { token: token(), limits: TokenLimits { id_quota: None, max_tags: Some(3) } },
            WireOp::ArchiveTag { tag: "t".into() },
            WireOp::RestoreTag { tag: "t".into() },
            WireOp::CreateTags { tags: vec![new_tag.clone()] },
            WireOp::CreateTagV3(new_tag),
            WireOp::DeleteTemplate { name: "x".into() },
            WireOp::AllocateSegments { asks: vec![SegmentAsk { tag: "t".into(), step: 10, node_id: 1 }] },
            WireOp::IssueNumbers { asks: vec![ask("a")] },
        ]
    }

    /// Each legacy form decodes into the one `Op` of its operation and encodes back into the
    /// same bytes: a node of this release stores and forwards what an older one wrote as that
    /// one wrote it, and what it writes for version 1 an older one reads.
    #[test]
    fn every_form_of_version_one_decodes_into_one_op_and_encodes_back_the_same() {
        for w in every_version_one_form() {
            let b = logged(w);
            let op = decoded(&b);
            assert_eq!(op.version(), BASE, "{op:?}");
            assert_eq!(bytes(&op), b, "{op:?} does not encode back into its form");
        }
        // Positions earlier releases read.
        assert_eq!(variant(&Op::create_segment_tag("t".into(), 1, 0, String::new())), 0);
        assert_eq!(variant(&Op::RevokeToken { id: TokenId(1) }), 8);
        assert_eq!(variant(&Op::DeleteTemplate { name: "x".into() }), 19);
        assert_eq!(variant(&Op::plain_numbers(vec![ask("a")])), 21);
    }

    #[test]
    fn the_forms_of_one_operation_keep_what_they_apply_differently() {
        let tag = |w| decoded(&logged(w));
        let Op::CreateTag { cap, .. } = tag(WireOp::CreateTagV3(NewTag::segment("t".into(), 1, 1, String::new())))
        else {
            panic!()
        };
        assert_eq!(cap, TagCap::Full);
        assert!(matches!(tag(WireOp::CreateToken(token())), Op::CreateToken { limits: None, .. }));
        let apart = tag(WireOp::AdminApart {
            actor: Actor::AdminToken,
            retention: DEFAULT_RETENTION,
            op: Box::new(WireOp::ArchiveTag { tag: "t".into() }),
        });
        assert!(matches!(apart, Op::Admin { trim: Trim::Apart, .. }));
        assert!(matches!(
            tag(WireOp::IssueNumbers { asks: vec![ask("a")] }),
            Op::IssueNumbers { rules: NumberRules::Plain, .. }
        ));
    }

    #[test]
    fn every_later_operation_is_one_envelope_after_the_forms_of_version_one() {
        let limits = SeriesLimits::default();
        assert_eq!(variant(&Op::SetSeriesLimits { tag: "inv".into(), limits }), 22);
        assert_eq!(variant(&Op::IssueNumbers { asks: vec![owned("a")], rules: NumberRules::Owned }), 22);
        assert_eq!(variant(&Op::SetClusterVersion { version: ClusterVersion(2) }), 22);
        let wrapped = Op::admin(
            Actor::AdminToken,
            DEFAULT_RETENTION,
            Op::SetSeriesLimits { tag: "inv".into(), limits: SeriesLimits::default() },
        );
        let identity = crate::regions::Identity { name: "eu".into(), id: 1, first_worker: 0, last_worker: 7 };
        let block = crate::regions::Block { start: 1, end: 2 };
        for op in [
            Op::IssueNumbers { asks: vec![owned("a")], rules: NumberRules::Owned },
            wrapped,
            Op::SetClusterVersion { version: ClusterVersion(2) },
            Op::JoinRegion { name: "eu".into(), workers: 8 },
            Op::RetireRegion { name: "eu".into() },
            Op::GrantBlock { region: "eu".into(), tag: "t".into(), size: 10, above: 5 },
            Op::AdoptRegion(identity),
            Op::AdoptBlock { tag: "t".into(), block },
            Op::ClaimHome { region: "eu".into(), tag: "t".into() },
            Op::MoveHome { tag: "t".into(), to: "us".into() },
            Op::ReleaseHome { region: "eu".into(), tag: "t".into(), epoch: 2 },
            Op::RenewLease { region: "eu".into() },
            Op::AdoptHome {
                tag: "t".into(),
                home: crate::regions::Home {
                    region: "us".into(),
                    epoch: 2,
                    from: Some("eu".into()),
                    since_ms: 5,
                    ready_ms: 7,
                },
            },
        ] {
            assert!(matches!(op, Op::Admin { .. }) || variant(&op) == 22, "{op:?}");
            assert_eq!(decoded(&bytes(&op)), op);
        }
    }

    #[test]
    fn an_operation_of_a_later_version_is_kept_whole_and_named() {
        let later = Op::Undecodable(Envelope { version: ClusterVersion(SUPPORTED.0 + 1), body: vec![1, 2, 3] });
        let b = bytes(&later);
        let op = decoded(&b);
        assert_eq!(op, later, "kept as it came");
        assert_eq!(bytes(&op), b, "and written back byte for byte");
        assert_eq!(op.version(), ClusterVersion(SUPPORTED.0 + 1));
        // Inside an admin wrapper too.
        let wrapped = Op::admin(Actor::AdminToken, DEFAULT_RETENTION, later);
        assert_eq!(decoded(&bytes(&wrapped)), wrapped);
    }

    #[test]
    fn an_envelope_that_understates_its_operations_version_is_refused() {
        let owned = Op::IssueNumbers { asks: vec![], rules: NumberRules::Owned };
        let Ok(WireOp::Versioned(mut e)) = WireOp::try_from(owned) else {
            panic!("an owned issue travels in an envelope")
        };
        e.version = BASE;
        let err = codec::decode::<Command>(&logged(WireOp::Versioned(e))).unwrap_err().to_string();
        assert!(err.contains("envelope of version 1"), "{err}");
    }

    #[test]
    fn a_cluster_below_a_version_refuses_its_operations_and_takes_the_earlier_form() {
        let mut s = State::default();
        let limits = Op::SetSeriesLimits { tag: "inv".into(), limits: SeriesLimits::default() };
        let refused = apply(&mut s, &Command { at_ms: 1, op: limits.clone() }, &mut Changes::default());
        assert!(
            matches!(refused, Err(ApplyError::FeatureNotActive { needs: ClusterVersion(2), active: BASE, .. })),
            "{refused:?}"
        );
        assert!(matches!(form(limits.clone(), BASE), Err(ApplyError::FeatureNotActive { .. })));
        // An owned issue is proposed as the plain issue of version 1.
        let owned = Op::IssueNumbers { asks: vec![owned("a")], rules: NumberRules::Owned };
        assert_eq!(form(owned.clone(), BASE).unwrap(), Op::plain_numbers(vec![ask("a")]));
        // Raised, never lowered.
        let raise = |s: &mut State, v| {
            let mut c = Changes::default();
            let r = apply(s, &Command { at_ms: 1, op: Op::SetClusterVersion { version: ClusterVersion(v) } }, &mut c);
            (r, c.version)
        };
        assert_eq!(raise(&mut s, 2), (Ok(crate::Applied::ClusterVersion(ClusterVersion(2))), true));
        assert_eq!(s.version, ClusterVersion(2));
        assert!(matches!(raise(&mut s, 1).0, Err(ApplyError::Invalid(_))), "1 is not a version to raise to");
        assert_eq!(raise(&mut s, 2), (Ok(crate::Applied::ClusterVersion(ClusterVersion(2))), false));
        assert!(matches!(raise(&mut s, SUPPORTED.0 + 1).0, Err(ApplyError::Invalid(_))), "beyond this release");
        assert_eq!(form(owned.clone(), s.version).unwrap(), owned);
        let later = apply(&mut s, &Command { at_ms: 1, op: limits }, &mut Changes::default());
        assert!(
            later.is_err_and(|e| !matches!(e, ApplyError::FeatureNotActive { .. })),
            "refused for the missing series now, not the version"
        );
    }
}
