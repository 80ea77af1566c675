//! Property: the `sm` tree is a faithful checkpoint. Random sequences of commands (valid and
//! invalid: tag creation, update, allocation, worker registration (in a range, too) and
//! renewal, token creation, rotation and revocation, admin changes wrapped with an actor and a
//! small audit retention, so the trail is trimmed, gapless series and their numbers, with random
//! leader times so leases expire and worker IDs are recycled), a global tier's and a region's
//! operations (joins, retirements, block grants and adoptions), membership changes and blank
//! entries go through the real [`StateMachineStore`] in random batches, with explicit
//! checkpoints, snapshot builds and the every-`CHECKPOINT_EVERY` checkpoints interleaved. The
//! store is then reopened *without* re-applying any log, and its state must equal an
//! independent in-memory apply of the same entries up to the checkpointed index: every key
//! [`apply`] wrote was in its [`Changes`](leaf_raft_store::Changes).
//!
//! proptest prints the minimal failing input; its seed is recorded in
//! `tests/store/checkpoint_prop.proptest-regressions` (kept out of git) and replayed first on the
//! next run.
use std::collections::BTreeMap;

use leaf_raft_store::state::record_members;
use leaf_raft_store::types::{Entry, LogId, StoredMembership};
use leaf_raft_store::version::ClusterVersion;
use leaf_raft_store::{apply, open, Changes, Command, Op, State, StoreOptions};
use openraft::storage::RaftStateMachine;
use openraft::{BasicNode, CommittedLeaderId, EntryPayload, Membership, RaftSnapshotBuilder};
use proptest::prelude::*;

use crate::support::{reopen, rt};

/// One log entry's payload, before it gets an index.
#[derive(Debug, Clone)]
enum Payload {
    Blank,
    Members(Vec<u64>),
    Cmd(Command),
}

/// What the test does next.
#[derive(Debug, Clone)]
enum Step {
    /// Apply these entries in one call.
    Apply(Vec<Payload>),
    /// An explicit (flushed) checkpoint, as at a clean shutdown.
    Checkpoint,
    /// Build a snapshot (which checkpoints the state it holds).
    Snapshot,
}

fn tag() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "c", "d"]).prop_map(String::from),
        1 => prop::sample::select(vec!["bad tag", "", "slash/tag"]).prop_map(String::from),
    ]
}

fn step_size() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => 1i64..50,
        1 => prop::sample::select(vec![-1, 0, 1_000_000_000, 1_000_000_001, i64::MAX]),
    ]
}

fn description() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z]{0,8}",
        1 => Just("x".repeat(1025)),
    ]
}

fn node() -> impl Strategy<Value = u64> {
    0u64..7
}

fn lease() -> impl Strategy<Value = i64> {
    prop_oneof![
        6 => prop::sample::select(vec![1_000, 5_000, 10_000]),
        1 => prop::sample::select(vec![0, 999, 3_600_001]),
    ]
}

fn token_op() -> impl Strategy<Value = Op> {
    use leaf_api::tokens::{Right, TagPattern, TokenId};
    let id = (0u64..4).prop_map(TokenId);
    prop_oneof![
        2 => (id.clone(), prop::sample::select(vec!["svc", "ops", "a b"]), any::<u8>()).prop_map(|(id, name, h)| {
            Op::CreateToken { token: leaf_raft_store::NewToken {
                id,
                name: name.into(),
                rights: [Right::Ids].into(),
                tags: vec![TagPattern::parse("a*").unwrap()],
                quota: None,
                secret_hash: [h; 32],
            }, limits: None }
        }),
        1 => (id.clone(), any::<u8>(), prop::sample::select(vec![0i64, 5_000, -1])).prop_map(|(id, h, grace_ms)| {
            Op::RotateToken { id, secret_hash: [h; 32], grace_ms }
        }),
        1 => id.prop_map(|id| Op::RevokeToken { id }),
    ]
}

/// Puts and deletes of a few templates whose patterns sometimes overlap (refused puts).
fn template_op() -> impl Strategy<Value = Op> {
    use leaf_api::template::TemplatePattern;
    let name = prop::sample::select(vec!["inv", "ord", "all"]);
    let pattern = prop::sample::select(vec!["tenant-*-inv", "tenant-*-ord", "t*", "x-*"]);
    prop_oneof![
        3 => (name.clone(), pattern, step_size()).prop_map(|(name, pattern, step)| {
            let settings = leaf_raft_store::TemplateSettings {
                step,
                max_id: Some(1),
                description: String::new(),
                profile: leaf_api::profile::Profile::Segment,
                daily: None,
                upper_bound: None,
            };
            Op::PutTemplate(leaf_raft_store::NewTemplate {
                name: name.into(),
                pattern: TemplatePattern::parse(pattern).unwrap(),
                settings,
            })
        }),
        1 => name.prop_map(|name| Op::DeleteTemplate { name: name.into() }),
    ]
}

/// A gapless series that never resets or resets daily (leader times stay in one day, so the
/// counter runs on).
fn gapless_tag() -> impl Strategy<Value = Op> {
    use leaf_api::gapless::PeriodClose;
    use leaf_api::gapless::{Reset, SeriesPolicy};
    let close = prop::sample::select(vec![PeriodClose::Wait, PeriodClose::Void]);
    (tag(), prop::sample::select(vec![Reset::Never, Reset::Day]), close).prop_map(|(tag, reset, on_period_close)| {
        // A daily series keeps one period: a later day drops the settled earlier ones.
        let retain_periods = (reset == Reset::Day).then_some(1);
        let policy = SeriesPolicy { reset, on_period_close, retain_periods, ..Default::default() };
        Op::CreateTag {
            tag: leaf_raft_store::NewTag {
                tag,
                step: 1,
                start_max_id: 1,
                description: String::new(),
                profile: leaf_raft_store::StoredProfile::Gapless { policy, period: 0, pruned_through: None },
                upper_bound: None,
            },
            cap: leaf_raft_store::TagCap::Full,
        }
    })
}

/// Issues, reservations and settlements of numbers: keys repeat (replays), tags may be of
/// another profile or unknown.
fn issue_op() -> impl Strategy<Value = Op> {
    use leaf_raft_store::NumberAct;
    let key = prop::sample::select(vec!["k1", "k2", "k3", "k4", "k5", "k6", ""]);
    let act = prop_oneof![
        3 => Just(NumberAct::Issue),
        2 => prop::sample::select(vec![1_000u64, 60_000]).prop_map(|hold_ms| NumberAct::Reserve { hold_ms }),
        1 => Just(NumberAct::Confirm),
        1 => Just(NumberAct::Void { reason: "cancelled".into() }),
        1 => Just(NumberAct::Lapse),
    ];
    let ask = (tag(), key, act)
        .prop_map(|(tag, key, act)| leaf_raft_store::NumberAsk {
            tag,
            key: key.into(),
            actor: leaf_api::audit::Actor::Unattributed,
            act,
        })
        .boxed();
    let legacy = prop::collection::vec(ask.clone(), 1..5).prop_map(Op::plain_numbers);
    // Owned asks: two tokens and two anonymous secrets, so owners refuse each other.
    let owner = prop::sample::select(vec![0u8, 1, 2, 3]);
    let owned = (ask, owner).prop_map(|(mut ask, owner)| {
        use leaf_api::audit::Actor;
        let proof = match owner {
            0 | 1 => {
                ask.actor = Actor::Token { id: leaf_api::tokens::TokenId(u64::from(owner)), name: "t".into() };
                None
            }
            n => Some([n; 32]),
        };
        leaf_raft_store::OwnedAsk { ask, proof }
    });
    let owned = prop::collection::vec(owned, 1..5)
        .prop_map(|asks| Op::IssueNumbers { asks, rules: leaf_raft_store::NumberRules::Owned });
    prop_oneof![1 => legacy, 2 => owned]
}

fn admin_op() -> impl Strategy<Value = Op> {
    use leaf_api::audit::{Actor, AuditRetention};
    let inner = prop_oneof![
        2 => (tag(), step_size()).prop_map(|(tag, step)| Op::create_segment_tag(tag, step, 1, String::new())),
        1 => (tag(), step_size()).prop_map(|(tag, step)| Op::CreateTag { tag: leaf_raft_store::NewTag::segment(tag, step, 1, String::new()), cap: leaf_raft_store::TagCap::Full }),
        1 => (tag(), prop::option::of(step_size())).prop_map(|(tag, step)| Op::UpdateTag { tag, step, description: None }),
        2 => token_op(),
        2 => template_op(),
        1 => gapless_tag(),
        1 => (tag(), prop::sample::select(vec![0u64, 2, 4, 1_000])).prop_map(|(tag, max_numbers)| Op::SetSeriesLimits {
            tag,
            limits: leaf_api::gapless::SeriesLimits { max_numbers, issues_per_sec: 10 },
        }),
        1 => (1u64..7).prop_map(|node_id| Op::NoteMembership(leaf_api::audit::AuditAction::NodePromoted { node_id })),
    ];
    let retention =
        (prop::sample::select(vec![3u32, 10, 5_000]), prop::sample::select(vec![60_000i64, 100_000, 86_400_000]))
            .prop_map(|(max_records, max_age_ms)| AuditRetention { max_records, max_age_ms });
    // Both trims: together (earlier releases' entries) and apart.
    (inner, retention, any::<bool>()).prop_map(|(op, retention, apart)| {
        let (actor, op) = (Actor::AdminToken, Box::new(op));
        if apart {
            Op::Admin { actor, retention, trim: leaf_raft_store::Trim::Apart, op }
        } else {
            Op::Admin { actor, retention, trim: leaf_raft_store::Trim::Together, op }
        }
    })
}

/// A global tier's and a region's operations, mixed: a state takes one side's and refuses the
/// other's.
fn region_op() -> impl Strategy<Value = Op> {
    use leaf_raft_store::regions::{Block, Identity};
    let name = prop::sample::select(vec!["eu", "us", "Bad"]);
    let identity = prop::sample::select(vec![(1u16, 0u16, 3u16), (2, 8, 15), (0, 5, 4)]);
    let block =
        (prop::sample::select(vec![-1i64, 0, 10, 40, 500, 10_000]), prop::sample::select(vec![5i64, 30, 1_000]));
    prop_oneof![
        1 => (name.clone(), prop::sample::select(vec![0u16, 1, 4, 2_000])).prop_map(|(name, workers)| Op::JoinRegion { name: name.into(), workers }),
        1 => name.clone().prop_map(|name| Op::RetireRegion { name: name.into() }),
        2 => (name.clone(), tag(), step_size(), prop::sample::select(vec![0i64, 100, 5_000])).prop_map(|(region, tag, size, above)| {
            Op::GrantBlock { region: region.into(), tag, size, above }
        }),
        1 => (name, identity).prop_map(|(name, (id, first_worker, last_worker))| {
            Op::AdoptRegion(Identity { name: name.into(), id, first_worker, last_worker })
        }),
        3 => (tag(), block).prop_map(|(tag, (start, len))| Op::AdoptBlock { tag, block: Block { start, end: start.saturating_add(len) } }),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => region_op(),
        // Raised early in most runs: the operations of version 2 are refused before it.
        1 => prop::sample::select(vec![1u32, 2, 3]).prop_map(|v| Op::SetClusterVersion { version: ClusterVersion(v) }),
        3 => admin_op(),
        2 => token_op(),
        3 => issue_op(),
        1 => (node(), lease(), prop::sample::select(vec![(0u16, 1u16), (2, 3), (5, 4)])).prop_map(
            |(node_id, lease_ms, (first, last))| Op::RegisterWorker { node_id, lease_ms, within: Some((first, last)) }
        ),
        2 => (tag(), step_size(), prop::sample::select(vec![-5, 0, 1, 1_000, i64::MAX - 3]), description())
            .prop_map(|(tag, step, start_max_id, description)| Op::create_segment_tag(tag, step, start_max_id, description)),
        2 => (tag(), prop::option::of(step_size()), prop::option::of(description()))
            .prop_map(|(tag, step, description)| Op::UpdateTag { tag, step, description }),
        5 => (tag(), step_size(), node()).prop_map(|(tag, step, node_id)| Op::AllocateSegment { tag, step, node_id }),
        3 => (node(), lease()).prop_map(|(node_id, lease_ms)| Op::RegisterWorker { node_id, lease_ms, within: None }),
        3 => (node(), prop::sample::select(vec![0u16, 1, 2, 3, 1023, 1024]), -10i64..400_000, lease()).prop_map(
            |(node_id, worker_id, high_water_ms, lease_ms)| Op::RenewWorker { node_id, worker_id, high_water_ms, lease_ms }
        ),
    ]
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        1 => Just(Payload::Blank),
        1 => prop::sample::subsequence(vec![1u64, 2, 3, 4, 5, 6], 1..=4).prop_map(Payload::Members),
        // Leader times jump around (leases run out, worker IDs get recycled).
        16 => (0i64..300_000, op()).prop_map(|(at_ms, op)| Payload::Cmd(Command { at_ms, op })),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => prop::collection::vec(payload(), 1..120).prop_map(Step::Apply),
        1 => Just(Step::Checkpoint),
        1 => Just(Step::Snapshot),
    ]
}

fn membership(ids: &[u64]) -> Membership<u64, BasicNode> {
    let nodes: BTreeMap<u64, BasicNode> = ids.iter().map(|id| (*id, BasicNode::new(format!("n{id}:1")))).collect();
    Membership::new(vec![ids.iter().copied().collect()], nodes)
}

fn to_entry(index: u64, p: &Payload) -> Entry {
    let log_id = LogId::new(CommittedLeaderId::new(1, 1), index);
    let payload = match p {
        Payload::Blank => EntryPayload::Blank,
        Payload::Members(ids) => EntryPayload::Membership(membership(ids)),
        Payload::Cmd(c) => EntryPayload::Normal(c.clone()),
    };
    Entry { log_id, payload }
}

/// The independent model: the pure functions over the entries, nothing stored.
fn model(entries: &[Entry]) -> (Option<LogId>, StoredMembership, State) {
    let mut state = State::default();
    let mut members = StoredMembership::default();
    let mut last = None;
    for e in entries {
        last = Some(e.log_id);
        match &e.payload {
            EntryPayload::Blank => {}
            EntryPayload::Normal(c) => {
                let _ = apply(&mut state, c, &mut Changes::default());
            }
            EntryPayload::Membership(m) => {
                record_members(&mut state, m.nodes().map(|(id, _)| *id), &mut Changes::default());
                members = StoredMembership::new(Some(e.log_id), m.clone());
            }
        }
    }
    (last, members, state)
}

fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    rt().block_on(async {
        let dir = tempfile::TempDir::new().unwrap();
        let mut all = Vec::new();
        {
            let (log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
            for step in steps {
                match step {
                    Step::Apply(batch) => {
                        let first = all.len() as u64 + 1;
                        let entries: Vec<Entry> =
                            batch.iter().enumerate().map(|(i, p)| to_entry(first + i as u64, p)).collect();
                        all.extend(entries.iter().cloned());
                        sm.apply(entries).await.unwrap();
                    }
                    Step::Checkpoint => sm.checkpoint().await.unwrap(),
                    Step::Snapshot => {
                        sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
                    }
                }
            }
            drop((log, sm));
        }
        // Reopen without any log replay: exactly what the checkpoint holds.
        let (_log, sm) = reopen(dir.path());
        let got = sm.reader().data();
        let at = got.last_applied.map_or(0, |l| l.index) as usize;
        let (last, membership, state) = model(&all[..at]);
        prop_assert_eq!(got.last_applied, last, "checkpointed index");
        prop_assert_eq!(&got.membership, &membership, "membership at index {}", at);
        prop_assert_eq!(&got.state.members, &state.members, "members at index {}", at);
        prop_assert_eq!(&got.state.members_ever, &state.members_ever, "members_ever at index {}", at);
        prop_assert_eq!(&got.state.workers, &state.workers, "workers at index {}", at);
        prop_assert_eq!(&got.state.tags, &state.tags, "tags at index {}", at);
        prop_assert_eq!(&got.state.tokens, &state.tokens, "tokens at index {}", at);
        prop_assert_eq!(&got.state.audit, &state.audit, "audit trail at index {}", at);
        prop_assert_eq!(&got.state.templates, &state.templates, "templates at index {}", at);
        prop_assert_eq!(&got.state.ledger, &state.ledger, "gapless ledger at index {}", at);
        prop_assert_eq!(&got.state.regions, &state.regions, "regions at index {}", at);
        prop_assert_eq!(&got.state, &state, "the whole state at index {}", at);
        prop_assert_eq!(&**sm.reader().tokens(), &state.tokens, "published tokens at index {}", at);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn a_reopened_store_holds_exactly_the_state_at_its_checkpoint(
        steps in prop::collection::vec(step(), 1..14)
    ) {
        run(&steps)?;
    }
}
