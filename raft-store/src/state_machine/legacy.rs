//! The layouts of earlier releases, as they are still found on disk or sent by an older
//! leader, in release order, and how each is read into this release's: checkpointed tag and
//! token records ([`decode_tag_record`], [`decode_token_record`]), and snapshot data of every
//! release ([`decode_sm_data`]):
//! - V1, the first release: the membership and the tags;
//! - V2: and every node ID ever in a membership;
//! - V3: and the current members and the snowflake workers;
//! - V4: and tag profiles (tag records of this release);
//! - V5: and tokens (without limits in IDs and tags: [`decode_token_record`]) and the audit
//!   trail;
//! - this release's [`SmData`]: tokens with those limits, and archived tags (tag records
//!   before archiving: [`decode_tag_record`]).
use std::collections::{BTreeMap, BTreeSet};

use leaf_api::codec;
use serde::Deserialize;

use super::{member_ids, SmData};
use crate::apply::Changes;
use crate::audit::AuditLog;
use crate::profile::StoredProfile;
use crate::state::{record_members, State};
use crate::tags::TagRecord;
use crate::tokens::{SecretHash, TokenRecord};
use crate::types::{LogId, StoredMembership};
use crate::workers::WorkerRecord;

/// [`TagRecord`] as releases before tag profiles stored it: a segment tag with no bound.
#[derive(Deserialize)]
struct TagRecordV1 {
    max_id: i64,
    step: i64,
    description: String,
    created_ms: i64,
    updated_ms: i64,
}

impl From<TagRecordV1> for TagRecord {
    fn from(r: TagRecordV1) -> Self {
        let (max_id, step, description, created_ms, updated_ms) =
            (r.max_id, r.step, r.description, r.created_ms, r.updated_ms);
        let v2 = TagRecordV2 {
            max_id,
            step,
            description,
            created_ms,
            updated_ms,
            profile: StoredProfile::Segment,
            upper_bound: None,
        };
        v2.into()
    }
}

/// [`TagRecord`] as releases with tag profiles and before archiving stored it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize, Clone))]
struct TagRecordV2 {
    max_id: i64,
    step: i64,
    description: String,
    created_ms: i64,
    updated_ms: i64,
    profile: StoredProfile,
    upper_bound: Option<i64>,
}

impl From<TagRecordV2> for TagRecord {
    fn from(r: TagRecordV2) -> Self {
        let mut record = TagRecord::new(r.created_ms, r.step, r.max_id, &r.description)
            .with_profile(r.profile)
            .with_upper_bound(r.upper_bound);
        record.updated_ms = r.updated_ms;
        record
    }
}

/// Tags as releases before tag profiles stored them, by name.
type TagsV1 = BTreeMap<String, TagRecordV1>;
/// Tags as releases with profiles and before archiving stored them, by name.
type TagsV2 = BTreeMap<String, TagRecordV2>;

/// Tags of an earlier layout as this release's tag records.
fn upgrade_tags<R: Into<TagRecord>>(tags: BTreeMap<String, R>) -> BTreeMap<String, TagRecord> {
    tags.into_iter().map(|(t, r)| (t, r.into())).collect()
}

/// A checkpointed tag record of this release or of an earlier one (before archiving, before
/// tag profiles).
pub(super) fn decode_tag_record(bytes: &[u8]) -> Result<TagRecord, codec::CodecError> {
    codec::decode::<TagRecord>(bytes).or_else(|e| {
        codec::decode::<TagRecordV2>(bytes)
            .map(Into::into)
            .or_else(|_| codec::decode::<TagRecordV1>(bytes).map(Into::into))
            .map_err(|_| e)
    })
}

/// [`TokenRecord`] as releases before token limits in IDs and tags stored it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize, Clone))]
struct TokenRecordV1 {
    name: String,
    rights: BTreeSet<leaf_api::tokens::Right>,
    tags: Vec<leaf_api::tokens::TagPattern>,
    quota: Option<leaf_api::tokens::Quota>,
    secret_hash: SecretHash,
    previous: Option<(SecretHash, i64)>,
    created_ms: i64,
    created_by: leaf_api::audit::Actor,
    rotated_ms: Option<i64>,
}

impl From<TokenRecordV1> for TokenRecord {
    fn from(r: TokenRecordV1) -> Self {
        TokenRecord {
            name: r.name,
            rights: r.rights,
            tags: r.tags,
            quota: r.quota,
            secret_hash: r.secret_hash,
            previous: r.previous,
            created_ms: r.created_ms,
            created_by: r.created_by,
            rotated_ms: r.rotated_ms,
            limits: Default::default(),
            tags_created: 0,
        }
    }
}

/// A checkpointed token record of this release or of one before token limits.
pub(super) fn decode_token_record(bytes: &[u8]) -> Result<TokenRecord, codec::CodecError> {
    codec::decode::<TokenRecord>(bytes)
        .or_else(|e| codec::decode::<TokenRecordV1>(bytes).map(Into::into).map_err(|_| e))
}

/// [`SmData`] as snapshots of the first release stored it, before `State::members_ever`.
#[derive(Deserialize)]
struct SmDataV1 {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    tags: TagsV1,
}

/// [`SmData`] as the second release stored it, before snowflake workers.
#[derive(Deserialize)]
struct SmDataV2 {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: StateV2,
}

/// The state in a V2 snapshot.
#[derive(Deserialize)]
struct StateV2 {
    tags: TagsV1,
    members_ever: BTreeSet<u64>,
}

/// The state in a V3 snapshot.
#[derive(Deserialize)]
struct StateV3 {
    tags: TagsV1,
    members_ever: BTreeSet<u64>,
    members: BTreeSet<u64>,
    workers: BTreeMap<u16, WorkerRecord>,
}

/// The state in a V4 snapshot.
#[derive(Deserialize)]
struct StateV4 {
    tags: TagsV2,
    members_ever: BTreeSet<u64>,
    members: BTreeSet<u64>,
    workers: BTreeMap<u16, WorkerRecord>,
}

/// The state in a V5 snapshot.
#[derive(Deserialize)]
struct StateV5 {
    tags: TagsV2,
    members_ever: BTreeSet<u64>,
    members: BTreeSet<u64>,
    workers: BTreeMap<u16, WorkerRecord>,
    tokens: BTreeMap<u64, TokenRecordV1>,
    audit: AuditLog,
}

/// [`SmData`] as a release from the third on stored it, with that release's state `S`.
#[derive(Deserialize)]
struct Old<S> {
    last_applied: Option<LogId>,
    membership: StoredMembership,
    state: S,
}

impl<S: Into<State>> Old<S> {
    fn upgrade(self) -> SmData {
        SmData { last_applied: self.last_applied, membership: self.membership, state: self.state.into() }
    }
}

impl From<StateV5> for State {
    fn from(s: StateV5) -> State {
        let tokens = s.tokens.into_iter().map(|(id, r)| (id, r.into())).collect();
        let (members_ever, members, workers) = (s.members_ever, s.members, s.workers);
        State {
            tags: upgrade_tags(s.tags),
            members_ever,
            members,
            workers,
            tokens,
            audit: s.audit,
            templates: Default::default(),
            lineage: Default::default(),
            ledger: Default::default(),
            version: Default::default(),
            regions: Default::default(),
        }
    }
}

impl From<StateV4> for State {
    fn from(s: StateV4) -> State {
        let (members_ever, members, workers) = (s.members_ever, s.members, s.workers);
        State { tags: upgrade_tags(s.tags), members_ever, members, workers, ..State::default() }
    }
}

impl From<StateV3> for State {
    fn from(s: StateV3) -> State {
        let (members_ever, members, workers) = (s.members_ever, s.members, s.workers);
        State { tags: upgrade_tags(s.tags), members_ever, members, workers, ..State::default() }
    }
}

/// Decodes snapshot data of this release or of an earlier one (the first held only tags, and
/// the nodes of its membership are the best record of past members it has; the second had no
/// workers). Each layout is tried newest first; the codec refuses short and trailing bytes, so
/// a record never decodes as the wrong layout.
pub(super) fn decode_sm_data(bytes: &[u8]) -> Result<SmData, codec::CodecError> {
    let e = match codec::decode::<SmData>(bytes) {
        Ok(d) => return Ok(d),
        Err(e) => e,
    };
    if let Ok(old) = codec::decode::<Old<StateV5>>(bytes) {
        return Ok(old.upgrade());
    }
    if let Ok(old) = codec::decode::<Old<StateV4>>(bytes) {
        return Ok(old.upgrade());
    }
    if let Ok(old) = codec::decode::<Old<StateV3>>(bytes) {
        return Ok(old.upgrade());
    }
    if let Ok(old) = codec::decode::<SmDataV2>(bytes) {
        let mut state =
            State { tags: upgrade_tags(old.state.tags), members_ever: old.state.members_ever, ..State::default() };
        record_members(&mut state, member_ids(&old.membership), &mut Changes::default());
        return Ok(SmData { last_applied: old.last_applied, membership: old.membership, state });
    }
    if let Ok(old) = codec::decode::<SmDataV1>(bytes) {
        let mut state = State { tags: upgrade_tags(old.tags), ..State::default() };
        record_members(&mut state, member_ids(&old.membership), &mut Changes::default());
        return Ok(SmData { last_applied: old.last_applied, membership: old.membership, state });
    }
    Err(e)
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::*;

    /// A tag record as releases before profiles wrote it.
    #[derive(Serialize, Clone)]
    struct OldRecord {
        max_id: i64,
        step: i64,
        description: String,
        created_ms: i64,
        updated_ms: i64,
    }

    fn old_record() -> (OldRecord, TagRecord) {
        let old = OldRecord { max_id: 7, step: 2, description: "d".into(), created_ms: 1, updated_ms: 2 };
        let new = TagRecord { max_id: 7, step: 2, created_ms: 1, updated_ms: 2, ..TagRecord::default() }
            .with_description("d".into());
        (old, new)
    }

    /// A tag record with a profile and a bound, as releases before archiving wrote it.
    fn v2_record() -> (TagRecordV2, TagRecord) {
        let profile = StoredProfile::Obfuscated { key: [3; crate::OBFUSCATION_KEY_BYTES] };
        let old = TagRecordV2 {
            max_id: 70,
            step: 5,
            description: "v2".into(),
            created_ms: 1,
            updated_ms: 2,
            profile: profile.clone(),
            upper_bound: Some(900),
        };
        let new = TagRecord { max_id: 70, step: 5, created_ms: 1, updated_ms: 2, ..TagRecord::default() }
            .with_description("v2".into())
            .with_profile(profile)
            .with_upper_bound(Some(900));
        (old, new)
    }

    fn old_token() -> (TokenRecordV1, TokenRecord) {
        let old = TokenRecordV1 {
            name: "svc".into(),
            rights: [leaf_api::tokens::Right::Ids].into(),
            tags: vec![leaf_api::tokens::TagPattern::parse("o-*").unwrap()],
            quota: Some(leaf_api::tokens::Quota { rate_per_sec: 5, burst: 6 }),
            secret_hash: [7; 32],
            previous: Some(([8; 32], 99)),
            created_ms: 1,
            created_by: leaf_api::audit::Actor::Loopback,
            rotated_ms: Some(2),
        };
        let new = TokenRecord {
            name: old.name.clone(),
            rights: old.rights.clone(),
            tags: old.tags.clone(),
            quota: old.quota,
            secret_hash: old.secret_hash,
            previous: old.previous,
            created_ms: 1,
            created_by: old.created_by.clone(),
            rotated_ms: Some(2),
            limits: Default::default(),
            tags_created: 0,
        };
        (old, new)
    }

    #[test]
    fn checkpointed_tokens_of_releases_before_limits_still_decode() {
        let (old, new) = old_token();
        assert_eq!(decode_token_record(&codec::encode(&old).unwrap()).unwrap(), new);
        let limited = TokenRecord {
            limits: crate::tokens::TokenLimits {
                id_quota: Some(leaf_api::tokens::IdQuota { ids_per_sec: 10, burst_ids: 100 }),
                max_tags: Some(3),
            },
            tags_created: 2,
            ..new
        };
        assert_eq!(decode_token_record(&codec::encode(&limited).unwrap()).unwrap(), limited);
        assert!(decode_token_record(b"garbage").is_err());
    }

    #[test]
    fn checkpointed_tags_of_releases_before_profiles_still_decode() {
        let (old, new) = old_record();
        assert_eq!(decode_tag_record(&codec::encode(&old).unwrap()).unwrap(), new);
        let daily = new.clone().with_profile(StoredProfile::Daily {
            format: leaf_api::profile::DailyFormat { digits: 6, utc_offset_minutes: 480 },
            day: 20261123,
        });
        assert_eq!(decode_tag_record(&codec::encode(&daily).unwrap()).unwrap(), daily);
        let (v2, upgraded) = v2_record();
        assert_eq!(decode_tag_record(&codec::encode(&v2).unwrap()).unwrap(), upgraded);
        let archived = upgraded.with_archived_ms(Some(9));
        assert_eq!(decode_tag_record(&codec::encode(&archived).unwrap()).unwrap(), archived);
        assert!(decode_tag_record(b"garbage").is_err());
    }

    #[test]
    fn snapshots_of_earlier_releases_still_decode() {
        #[derive(Serialize)]
        struct V1 {
            last_applied: Option<LogId>,
            membership: StoredMembership,
            tags: std::collections::BTreeMap<String, OldRecord>,
        }
        let nodes = std::collections::BTreeMap::from([(1, openraft::BasicNode::new("a:1"))]);
        let membership = StoredMembership::new(None, openraft::Membership::new(vec![[1].into()], nodes));
        let (old_rec, record) = old_record();
        let old = V1 {
            last_applied: None,
            membership,
            tags: [("t".to_string(), old_rec.clone()), ("u".into(), old_rec)].into(),
        };
        let bytes = codec::encode(&old).unwrap();
        let d = decode_sm_data(&bytes).unwrap();
        assert_eq!(d.state.tags["t"], record);
        assert!(d.state.members_ever.contains(&1));
        assert!(d.state.members.contains(&1));
        // The second release's layout: tags and members_ever, no workers.
        #[derive(Serialize)]
        struct V2State {
            tags: std::collections::BTreeMap<String, OldRecord>,
            members_ever: std::collections::BTreeSet<u64>,
        }
        #[derive(Serialize)]
        struct V2 {
            last_applied: Option<LogId>,
            membership: StoredMembership,
            state: V2State,
        }
        let v2 = V2 {
            last_applied: None,
            membership: old.membership.clone(),
            state: V2State { tags: old.tags.clone(), members_ever: [1, 7].into() },
        };
        let d2 = decode_sm_data(&codec::encode(&v2).unwrap()).unwrap();
        assert_eq!(d2.state.members_ever, [1, 7].into());
        assert_eq!(d2.state.members, [1].into());
        assert_eq!(d2.state.tags["t"], record);
        assert!(d2.state.workers.is_empty());
        // The third release's: members and workers, tags without profiles.
        #[derive(Serialize)]
        struct V3State {
            tags: std::collections::BTreeMap<String, OldRecord>,
            members_ever: std::collections::BTreeSet<u64>,
            members: std::collections::BTreeSet<u64>,
            workers: std::collections::BTreeMap<u16, WorkerRecord>,
        }
        #[derive(Serialize)]
        struct V3 {
            last_applied: Option<LogId>,
            membership: StoredMembership,
            state: V3State,
        }
        let worker = WorkerRecord {
            node_id: 1,
            high_water_ms: 5,
            lease_expires_ms: 6,
            lease_ms: 1000,
            since_ms: 1,
            previous_node_id: None,
        };
        let v3 = V3 {
            last_applied: None,
            membership: old.membership.clone(),
            state: V3State {
                tags: old.tags.clone(),
                members_ever: [1, 7].into(),
                members: [1].into(),
                workers: [(3, worker.clone())].into(),
            },
        };
        let d3 = decode_sm_data(&codec::encode(&v3).unwrap()).unwrap();
        assert_eq!((d3.state.tags["t"].clone(), d3.state.tags["u"].clone()), (record.clone(), record.clone()));
        assert_eq!(d3.state.workers[&3], worker);
        assert_eq!(d3.state.members_ever, [1, 7].into());
        // The fifth release's: tokens without limits, and the audit trail.
        #[derive(Serialize)]
        struct V5State {
            tags: std::collections::BTreeMap<String, TagRecordV2>,
            members_ever: std::collections::BTreeSet<u64>,
            members: std::collections::BTreeSet<u64>,
            workers: std::collections::BTreeMap<u16, WorkerRecord>,
            tokens: std::collections::BTreeMap<u64, TokenRecordV1>,
            audit: AuditLog,
        }
        #[derive(Serialize)]
        struct V5 {
            last_applied: Option<LogId>,
            membership: StoredMembership,
            state: V5State,
        }
        let (old_token, token) = old_token();
        let mut audit = AuditLog::default();
        let action = leaf_api::audit::AuditAction::NodePromoted { node_id: 7 };
        audit.push(3, leaf_api::audit::Actor::AdminToken, action, crate::audit::Trim::Apart, &mut Changes::default());
        let v5 = V5 {
            last_applied: None,
            membership: old.membership.clone(),
            state: V5State {
                tags: [("t".to_string(), v2_record().0)].into(),
                members_ever: [1, 7].into(),
                members: [1].into(),
                workers: [(3, worker.clone())].into(),
                tokens: [(9, old_token)].into(),
                audit: audit.clone(),
            },
        };
        let d5 = decode_sm_data(&codec::encode(&v5).unwrap()).unwrap();
        assert_eq!(d5.state.tokens[&9], token);
        assert_eq!(d5.state.tags["t"], v2_record().1);
        assert_eq!(d5.state.audit, audit);
        assert_eq!(d5.state.workers[&3], worker);
        // And the current layout round-trips.
        let again = decode_sm_data(&codec::encode(&d).unwrap()).unwrap();
        assert_eq!(again, d);
        assert!(decode_sm_data(b"garbage").is_err());
    }
}
