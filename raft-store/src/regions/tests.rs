use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};

use super::*;
use crate::apply::{apply, Applied, ApplyError, Changes};
use crate::command::{Command, Op};
use crate::profile::StoredProfile;
use crate::state::record_members;
use crate::testing::{ap, at, cmd, create, grant, register};
use crate::version::ClusterVersion;

/// A state at cluster version 3, with members 1 to 3.
fn v3() -> State {
    let mut s = State { version: ClusterVersion(3), ..State::default() };
    record_members(&mut s, [1, 2, 3], &mut Changes::default());
    s
}

fn join(s: &mut State, name: &str, workers: u16) -> Result<RegionRecord, ApplyError> {
    match ap(s, &cmd(Op::JoinRegion { name: name.into(), workers }))? {
        Applied::Region(RegionAnswer::Registered { record, .. }) => Ok(record),
        other => panic!("a join answers the region's record, not {other:?}"),
    }
}

fn block(s: &mut State, region: &str, tag: &str, size: i64, above: i64) -> Result<Block, ApplyError> {
    match ap(s, &cmd(Op::GrantBlock { region: region.into(), tag: tag.into(), size, above }))? {
        Applied::Segment(a) => Ok(Block { start: a.start, end: a.end }),
        other => panic!("a grant answers a range, not {other:?}"),
    }
}

fn identity(name: &str, r: &RegionRecord) -> Identity {
    Identity { name: name.into(), id: r.id, first_worker: r.first_worker, last_worker: r.last_worker }
}

/// A regional cluster that adopted `identity`, with segment tag `tag` from `max_id`.
fn region(identity: &Identity, tag: &str, max_id: i64) -> State {
    let mut s = v3();
    ap(&mut s, &create(tag, 100, max_id)).unwrap();
    ap(&mut s, &cmd(Op::AdoptRegion(identity.clone()))).unwrap();
    s
}

fn adopt(s: &mut State, tag: &str, b: Block) -> Result<Applied, ApplyError> {
    ap(s, &cmd(Op::AdoptBlock { tag: tag.into(), block: b }))
}

fn take(s: &mut State, tag: &str, step: i64) -> Result<(i64, i64), ApplyError> {
    match ap(s, &cmd(Op::AllocateSegment { tag: tag.into(), step, node_id: 1 }))? {
        Applied::Segment(a) => Ok((a.start, a.end)),
        other => panic!("an allocation answers a range, not {other:?}"),
    }
}

#[test]
fn regions_join_in_order_with_ranges_of_their_own_and_a_join_again_answers_the_same() {
    let mut g = v3();
    let eu = join(&mut g, "eu-west", 32).unwrap();
    let us = join(&mut g, "us-east", 64).unwrap();
    assert_eq!((eu.id, eu.first_worker, eu.last_worker), (1, 0, 31));
    assert_eq!((us.id, us.first_worker, us.last_worker), (2, 32, 95));
    assert_eq!(join(&mut g, "eu-west", 32).unwrap(), eu, "a join again answers the record");
    assert_eq!(join(&mut g, "eu-west", 8).unwrap(), eu, "whatever size it asks for now");
    for bad in ["", "EU", "1eu", "eu_west", &"a".repeat(MAX_REGION_NAME + 1)] {
        assert!(matches!(join(&mut g, bad, 8), Err(ApplyError::Invalid(_))), "{bad:?}");
    }
    assert!(matches!(join(&mut g, "ap", 0), Err(ApplyError::Invalid(_))));
    assert!(matches!(join(&mut g, "ap", WORKER_IDS + 1), Err(ApplyError::Invalid(_))));
    assert!(matches!(join(&mut g, "ap", WORKER_IDS), Err(ApplyError::RegionConflict(_))), "only 928 are left");
}

#[test]
fn a_retired_region_gets_nothing_and_its_name_id_and_workers_are_never_given_again() {
    let mut g = v3();
    ap(&mut g, &create("order", 1, 1)).unwrap();
    let eu = join(&mut g, "eu", 512).unwrap();
    block(&mut g, "eu", "order", 1000, 0).unwrap();
    let mut changes = Changes::default();
    let retire = apply(&mut g, &cmd(Op::RetireRegion { name: "eu".into() }), &mut changes).unwrap();
    assert!(changes.regions.contains("eu"));
    let Applied::Region(RegionAnswer::Registered { record, .. }) = retire else { panic!("{retire:?}") };
    assert!(record.retired_ms.is_some());
    assert_eq!(
        ap(&mut g, &cmd(Op::RetireRegion { name: "eu".into() })),
        Ok(Applied::Region(RegionAnswer::Registered { name: "eu".into(), record }))
    );
    assert_eq!(block(&mut g, "eu", "order", 1000, 0), Err(ApplyError::RegionRetired("eu".into())));
    assert_eq!(join(&mut g, "eu", 8), Err(ApplyError::RegionRetired("eu".into())));
    let us = join(&mut g, "us", 512).unwrap();
    assert_eq!((us.id, us.first_worker, us.last_worker), (2, 512, 1023), "eu's 0..=511 stay eu's");
    assert!(matches!(join(&mut g, "ap", 1), Err(ApplyError::RegionConflict(_))), "no worker ID is left");
    assert_eq!(eu.id, 1);
    assert_eq!(block(&mut g, "nowhere", "order", 1, 0), Err(ApplyError::RegionNotFound("nowhere".into())));
    assert_eq!(
        ap(&mut g, &cmd(Op::RetireRegion { name: "nowhere".into() })),
        Err(ApplyError::RegionNotFound("nowhere".into()))
    );
}

#[test]
fn the_global_tier_s_own_workers_and_the_regions_never_share_a_worker_id() {
    let mut g = v3();
    // The global tier's node 1 holds worker ID 0 before any region joins.
    assert_eq!(grant(register(&mut g, 1_000, 1)).worker_id, 0);
    let eu = join(&mut g, "eu", 4).unwrap();
    assert_eq!((eu.first_worker, eu.last_worker), (1, 4), "worker ID 0 is held");
    // Node 2 of the global tier gets the lowest ID no region holds.
    assert_eq!(grant(register(&mut g, 1_000, 2)).worker_id, 5);
    // Within a range that is all the region's, none.
    let within = Op::RegisterWorker { node_id: 3, lease_ms: 10_000, within: Some((1, 4)) };
    assert_eq!(ap(&mut g, &at(1_000, within)), Err(ApplyError::WorkersExhausted));
}

#[test]
fn blocks_are_disjoint_across_regions_and_start_above_what_a_region_had_before_it_joined() {
    let mut g = v3();
    ap(&mut g, &create("order", 1, 1)).unwrap();
    join(&mut g, "eu", 8).unwrap();
    join(&mut g, "us", 8).unwrap();
    let a = block(&mut g, "eu", "order", 1000, 0).unwrap();
    let b = block(&mut g, "us", "order", 1000, 0).unwrap();
    let c = block(&mut g, "eu", "order", 500, 5_000).unwrap();
    assert_eq!(
        (a, b, c),
        (Block { start: 1, end: 1001 }, Block { start: 1001, end: 2001 }, Block { start: 5000, end: 5500 })
    );
    let d = block(&mut g, "us", "order", 10, 0).unwrap();
    assert_eq!(d, Block { start: 5500, end: 5510 }, "`above` raised the counter for good");
    assert!(matches!(block(&mut g, "eu", "order", 0, 0), Err(ApplyError::Invalid(_))), "a block holds an ID");
    assert_eq!(block(&mut g, "eu", "none", 10, 0), Err(ApplyError::TagNotFound("none".into())));
}

/// A tag of `profile`, as a creation command.
fn create_profiled(tag: &str, profile: StoredProfile) -> Command {
    let mut t = crate::tags::NewTag::segment(tag.into(), 10, 1, String::new());
    if let StoredProfile::Daily { .. } = profile {
        t.start_max_id = leaf_api::profile::DAILY_FIRST;
    }
    t.profile = profile;
    cmd(Op::CreateTag { tag: t, cap: crate::TagCap::Full })
}

/// The profiles not cut from blocks and, before cluster version 5, served nowhere in a region.
fn unserved_profiles() -> Vec<StoredProfile> {
    let format = leaf_api::profile::DailyFormat { digits: 6, utc_offset_minutes: 0 };
    vec![StoredProfile::Obfuscated { key: [7; crate::OBFUSCATION_KEY_BYTES] }, StoredProfile::Daily { format, day: 0 }]
}

#[test]
fn daily_and_obfuscated_tags_get_no_block_and_are_not_made_in_a_region() {
    let mut g = v3();
    join(&mut g, "eu", 8).unwrap();
    let series = crate::testing::create_series("inv", Default::default(), 1);
    ap(&mut g, &series).unwrap();
    let err = block(&mut g, "eu", "inv", 10, 0).unwrap_err();
    assert!(matches!(err, ApplyError::NotBlockable { .. }) && err.to_string().contains("not cut from blocks"), "{err}");
    for (i, profile) in unserved_profiles().into_iter().enumerate() {
        let tag = format!("t{i}");
        ap(&mut g, &create_profiled(&tag, profile.clone())).unwrap();
        let err = block(&mut g, "eu", &tag, 10, 0).unwrap_err();
        assert!(matches!(err, ApplyError::NotBlockable { .. }), "{profile:?}: {err}");
    }
    // A region refuses to make them, alone or in a batch, and to serve one made before it
    // adopted its region.
    let mut r = v3();
    ap(&mut r, &create_profiled("before", unserved_profiles().remove(0))).unwrap();
    ap(&mut r, &cmd(Op::AdoptRegion(Identity { name: "eu".into(), id: 1, first_worker: 0, last_worker: 7 }))).unwrap();
    for profile in unserved_profiles() {
        let err = ap(&mut r, &create_profiled("m", profile.clone())).unwrap_err();
        assert!(matches!(err, ApplyError::NotBlockable { .. }), "{profile:?}: {err}");
    }
    let mut daily = crate::tags::NewTag::segment("d".into(), 10, leaf_api::profile::DAILY_FIRST, String::new());
    daily.profile = unserved_profiles().remove(1);
    let batch = Op::CreateTags { tags: vec![crate::tags::NewTag::segment("s".into(), 10, 1, String::new()), daily] };
    assert!(matches!(ap(&mut r, &cmd(batch)), Err(ApplyError::NotBlockable { .. })));
    assert!(!r.tags.contains_key("s"), "all or nothing");
    assert!(matches!(take(&mut r, "before", 10), Err(ApplyError::NotBlockable { .. })));
    ap(&mut r, &create("s", 10, 1)).unwrap();
    // Nor, at cluster version 3, monotonic tags and gapless series: only a home serves one,
    // and homes come with version 4 (`homes::tests`).
    assert!(matches!(
        ap(&mut r, &create_profiled("m", StoredProfile::Monotonic)),
        Err(ApplyError::NotBlockable { .. })
    ));
    let series = crate::testing::create_series("inv", Default::default(), 1);
    assert!(matches!(ap(&mut r, &series), Err(ApplyError::NotBlockable { .. })));
}

#[test]
fn a_cluster_is_a_global_tier_or_a_region_never_both_and_a_region_adopts_once() {
    let mut g = v3();
    let eu = join(&mut g, "eu", 8).unwrap();
    let refused = ap(&mut g, &cmd(Op::AdoptRegion(identity("eu", &eu)))).unwrap_err();
    assert!(refused.to_string().contains("is a global tier"), "{refused}");
    let mut r = region(&identity("eu", &eu), "order", 1);
    assert_eq!(
        ap(&mut r, &cmd(Op::AdoptRegion(identity("eu", &eu)))),
        Ok(Applied::Region(RegionAnswer::Adopted(identity("eu", &eu))))
    );
    let other = ap(&mut r, &cmd(Op::AdoptRegion(Identity { id: 2, ..identity("us", &eu) }))).unwrap_err();
    assert!(other.to_string().contains("adopts one region, once"), "{other}");
    let joined = join(&mut r, "us", 8).unwrap_err();
    assert!(joined.to_string().contains("is a region"), "{joined}");
}

#[test]
fn a_region_is_adopted_only_once_no_worker_outside_its_range_can_still_issue() {
    let mut r = v3();
    let eu = Identity { name: "eu".into(), id: 1, first_worker: 8, last_worker: 15 };
    // Node 1 holds worker ID 0, outside the region's IDs, on a 10 s lease from t = 1,000.
    assert_eq!(grant(register(&mut r, 1_000, 1)).worker_id, 0);
    let refused = ap(&mut r, &at(20_000, Op::AdoptRegion(eu.clone()))).unwrap_err();
    assert!(refused.to_string().contains("worker ID 0 (node 1)"), "{refused}");
    // Its node stops renewing; once lease and grace ran out (11,000 + 10,000) the region is adopted.
    let refused = ap(&mut r, &at(21_000, Op::AdoptRegion(eu.clone())));
    assert!(refused.is_err(), "at the end of the grace, not yet");
    let mut changes = Changes::default();
    apply(&mut r, &at(21_001, Op::AdoptRegion(eu.clone())), &mut changes).unwrap();
    assert!(changes.region);
    // Its workers now keep to the region's IDs: node 1 moves into them, and worker ID 0 no
    // longer renews.
    let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 21_001, lease_ms: 10_000 };
    assert_eq!(ap(&mut r, &at(21_002, renew)), Err(ApplyError::WorkerLost { worker_id: 0, node_id: 1 }));
    assert_eq!(grant(register(&mut r, 21_003, 1)).worker_id, 8);
    assert_eq!(grant(register(&mut r, 21_003, 2)).worker_id, 9);
    let outside = Op::RegisterWorker { node_id: 3, lease_ms: 10_000, within: Some((0, 7)) };
    let err = ap(&mut r, &at(21_003, outside)).unwrap_err();
    assert!(err.to_string().contains("hold none of region \"eu\""), "{err}");
}

#[test]
fn a_region_cuts_its_segments_from_its_blocks_and_waits_when_they_run_out() {
    let eu = Identity { name: "eu".into(), id: 1, first_worker: 0, last_worker: 7 };
    let mut r = region(&eu, "order", 50);
    assert_eq!(take(&mut r, "order", 10), Err(ApplyError::NoBlock("order".into())));
    let below = adopt(&mut r, "order", Block { start: 40, end: 60 }).unwrap_err();
    assert!(below.to_string().contains("starts below 50"), "IDs the tag had before: {below}");
    adopt(&mut r, "order", Block { start: 100, end: 125 }).unwrap();
    let Applied::Region(RegionAnswer::Blocks { blocks, .. }) =
        adopt(&mut r, "order", Block { start: 300, end: 310 }).unwrap()
    else {
        panic!()
    };
    assert_eq!(blocks.remaining(50), 35);
    assert_eq!(take(&mut r, "order", 10), Ok((100, 110)));
    assert_eq!(take(&mut r, "order", 10), Ok((110, 120)));
    assert_eq!(take(&mut r, "order", 10), Ok((120, 125)), "cut short at the block's end");
    assert_eq!(take(&mut r, "order", 10), Ok((300, 310)));
    assert_eq!(take(&mut r, "order", 1), Err(ApplyError::NoBlock("order".into())));
    let late = adopt(&mut r, "order", Block { start: 200, end: 250 }).unwrap_err();
    assert!(late.to_string().contains("starts below 310"), "a late grant is a gap: {late}");
    assert_eq!(r.regions.blocks["order"].remaining(r.tags["order"].max_id), 0);
    let mut changes = Changes::default();
    adopt(&mut r, "order", Block { start: 400, end: 401 }).unwrap();
    apply(&mut r, &cmd(Op::AllocateSegment { tag: "order".into(), step: 5, node_id: 1 }), &mut changes).unwrap();
    assert!(changes.blocks.contains("order") && changes.tags.contains("order"));
}

#[test]
fn a_region_s_refused_allocation_changes_nothing() {
    let eu = Identity { name: "eu".into(), id: 1, first_worker: 0, last_worker: 7 };
    let mut r = region(&eu, "order", 1);
    adopt(&mut r, "order", Block { start: 10, end: 20 }).unwrap();
    let before = r.clone();
    let mut changes = Changes::default();
    let archived = apply(&mut r, &cmd(Op::ArchiveTag { tag: "order".into() }), &mut changes);
    assert!(archived.is_ok());
    assert_eq!(take(&mut r, "order", 5), Err(ApplyError::TagArchived("order".into())));
    assert_eq!(r.regions, before.regions);
    // A refused adoption leaves no trace either, not even the tag's first (empty) blocks.
    ap(&mut r, &create("fresh", 10, 50)).unwrap();
    let before = r.regions.clone();
    assert!(adopt(&mut r, "fresh", Block { start: 40, end: 60 }).is_err());
    assert_eq!(r.regions, before);
}

#[test]
fn a_restore_turns_a_region_s_blocks_into_gaps() {
    let eu = Identity { name: "eu".into(), id: 1, first_worker: 0, last_worker: 7 };
    let mut r = region(&eu, "order", 1);
    adopt(&mut r, "order", Block { start: 10, end: 20 }).unwrap();
    adopt(&mut r, "order", Block { start: 30, end: 40 }).unwrap();
    assert_eq!(take(&mut r, "order", 5), Ok((10, 15)));
    let input = crate::restore::PlanInput::default();
    let plan = crate::restore::plan(&r, &input);
    let record = crate::restore::RestoreRecord { backup_id: 1, generation: 1, backup_taken_ms: 0, restored_ms: 0 };
    crate::restore::apply_plan(&mut r, &plan, record, leaf_api::audit::Actor::Unattributed);
    let max_id = r.tags["order"].max_id;
    assert!(max_id >= 15);
    assert_eq!(r.regions.blocks["order"].remaining(max_id), 0, "nothing adopted before is served again");
    assert_eq!(take(&mut r, "order", 1), Err(ApplyError::NoBlock("order".into())));
    assert!(adopt(&mut r, "order", Block { start: 39, end: 50 }).is_err(), "not below what was adopted");
}

#[test]
fn a_refused_grant_changes_nothing() {
    let mut g = v3();
    let mut bounded = crate::tags::NewTag::segment("b".into(), 10, 1, String::new());
    bounded.upper_bound = Some(100);
    ap(&mut g, &cmd(Op::CreateTag { tag: bounded, cap: crate::TagCap::Full })).unwrap();
    join(&mut g, "eu", 8).unwrap();
    let before = g.clone();
    let mut changes = Changes::default();
    let grant = Op::GrantBlock { region: "eu".into(), tag: "b".into(), size: 10, above: 1_000 };
    assert!(apply(&mut g, &cmd(grant), &mut changes).is_err(), "above the tag's bound");
    assert_eq!(g, before, "the counter was not raised");
    assert!(changes.is_empty());
}

#[test]
fn a_join_again_is_recorded_once_in_the_audit_trail() {
    let mut g = v3();
    let admin = |op| Op::admin(leaf_api::audit::Actor::AdminToken, crate::audit::DEFAULT_RETENTION, op);
    let joins = |g: &State| {
        g.audit.records.iter().filter(|r| matches!(r.action, leaf_api::audit::AuditAction::RegionJoined { .. })).count()
    };
    ap(&mut g, &at(1_000, admin(Op::JoinRegion { name: "eu".into(), workers: 8 }))).unwrap();
    ap(&mut g, &at(2_000, admin(Op::JoinRegion { name: "eu".into(), workers: 8 }))).unwrap();
    ap(&mut g, &at(3_000, admin(Op::JoinRegion { name: "us".into(), workers: 8 }))).unwrap();
    assert_eq!(joins(&g), 2, "eu once, us once");
}

#[test]
fn a_global_tier_is_restored_only_with_a_floor_for_every_tag() {
    let mut g = v3();
    ap(&mut g, &create("order", 10, 1)).unwrap();
    ap(&mut g, &create("user", 10, 1)).unwrap();
    let input = crate::restore::PlanInput::default();
    assert!(crate::restore::plan(&g, &input).unfloored.is_empty(), "no region: the usual margins");
    join(&mut g, "eu", 8).unwrap();
    assert_eq!(crate::restore::plan(&g, &input).unfloored, vec!["order".to_string(), "user".to_string()]);
    let mut floors = input.clone();
    floors.overrides.insert("order".into(), crate::restore::Override { margin: None, at_least: Some(1_000_000) });
    assert_eq!(crate::restore::plan(&g, &floors).unfloored, vec!["user".to_string()]);
    floors.overrides.insert("*".into(), crate::restore::Override { margin: None, at_least: Some(1_000_000) });
    assert!(crate::restore::plan(&g, &floors).unfloored.is_empty());
}

#[test]
fn a_grant_and_a_region_s_fields_are_held_to_what_can_be_right() {
    let b = |start, end| Block { start, end };
    assert!(check_grant(b(5, 15), 10, 5).is_ok());
    assert!(check_grant(b(100, 101), 10, 5).is_ok(), "shorter where the space ends");
    for (start, end) in [(4, 14), (5, 16), (5, 5), (9, 5), (i64::MIN, i64::MAX)] {
        assert!(check_grant(b(start, end), 10, 5).is_err(), "[{start}, {end})");
    }
    assert!(check_region_fields(1, 0, 7).is_ok());
    for (id, first, last) in [(0, 0, 7), (1, 8, 7), (1, 0, WORKER_IDS)] {
        assert!(check_region_fields(id, first, last).is_err(), "{id} {first}..={last}");
    }
}

#[test]
fn region_operations_need_cluster_version_3() {
    let mut s = State { version: ClusterVersion(2), ..State::default() };
    let r = ap(&mut s, &Command { at_ms: 1, op: Op::JoinRegion { name: "eu".into(), workers: 8 } });
    assert!(matches!(r, Err(ApplyError::FeatureNotActive { needs: ClusterVersion(3), .. })), "{r:?}");
}

/// Three regions take a tag's IDs from one global tier, with grants lost, late and repeated:
/// no ID is allocated twice anywhere, each region's allocations rise, and each lies within a
/// block the global tier granted to that region.
#[test]
fn no_two_regions_ever_allocate_the_same_id() {
    let seed = std::env::var("LEAF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    println!("seed {seed} (LEAF_SEED={seed} repeats this run)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut g = v3();
    ap(&mut g, &create("order", 1, 1)).unwrap();
    let names = ["eu", "us", "ap"];
    let mut regions: Vec<State> = names
        .iter()
        .map(|n| {
            let record = join(&mut g, n, 8).unwrap();
            region(&identity(n, &record), "order", rng.gen_range(0..5_000))
        })
        .collect();
    // Grants on their way to each region, not adopted yet (a late one may be adopted after a
    // later one).
    let mut in_flight: Vec<Vec<Block>> = vec![Vec::new(); names.len()];
    let mut granted: Vec<Vec<Block>> = vec![Vec::new(); names.len()];
    let mut taken: Vec<(i64, i64, usize)> = Vec::new();
    for _ in 0..5_000 {
        let r = rng.gen_range(0..names.len());
        match rng.gen_range(0..10) {
            0 | 1 => {
                let (counter, high) = {
                    let s = &regions[r];
                    (s.tags["order"].max_id, s.regions.blocks.get("order").map_or(0, |b| b.high))
                };
                let b = block(&mut g, names[r], "order", rng.gen_range(1..500), counter.max(high)).unwrap();
                granted[r].push(b);
                if rng.gen_bool(0.9) {
                    in_flight[r].push(b);
                }
            }
            2 | 3 if !in_flight[r].is_empty() => {
                let i = rng.gen_range(0..in_flight[r].len());
                let b = in_flight[r].remove(i);
                let _ = adopt(&mut regions[r], "order", b);
                if rng.gen_bool(0.1) {
                    let _ = adopt(&mut regions[r], "order", b);
                }
            }
            _ => match take(&mut regions[r], "order", rng.gen_range(1..200)) {
                Ok((start, end)) => {
                    assert!(start < end, "seed {seed}");
                    let last = taken.iter().rev().find(|t| t.2 == r);
                    assert!(last.is_none_or(|l| l.1 <= start), "seed {seed}: region {r} went back");
                    let within = granted[r].iter().any(|b| b.start <= start && end <= b.end);
                    assert!(within, "seed {seed}: [{start}, {end}) of region {r} is in no block granted to it");
                    taken.push((start, end, r));
                }
                Err(ApplyError::NoBlock(_)) => {}
                Err(e) => panic!("seed {seed}: {e}"),
            },
        }
    }
    let mut ranges: Vec<(i64, i64, usize)> = taken.clone();
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "seed {seed}: {:?} and {:?} overlap", w[0], w[1]);
    }
    let per_region: BTreeMap<usize, usize> = taken.iter().fold(BTreeMap::new(), |mut m, t| {
        *m.entry(t.2).or_default() += 1;
        m
    });
    assert_eq!(per_region.len(), names.len(), "seed {seed}: every region allocated: {per_region:?}");
}
