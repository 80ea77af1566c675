use rand::{Rng, SeedableRng};

use super::*;
use crate::apply::{apply, ApplyError, Changes};
use crate::command::{Command, Op};
use crate::regions::{Block, Identity, RegionAnswer, RegionRecord};
use crate::state::record_members;
use crate::testing::{ap, at};
use crate::version::ClusterVersion;

const T0: i64 = 1_700_000_000_000;

fn v4() -> State {
    let mut s = State { version: ClusterVersion(4), ..State::default() };
    record_members(&mut s, [1, 2, 3], &mut Changes::default());
    s
}

fn monotonic(tag: &str) -> Command {
    let mut t = crate::tags::NewTag::segment(tag.into(), 10, 1, String::new());
    t.profile = StoredProfile::Monotonic;
    at(T0, Op::CreateTag { tag: t, cap: crate::TagCap::Full })
}

fn series(tag: &str) -> Command {
    crate::testing::create_series(tag, Default::default(), T0)
}

/// A global tier with regions `names` and the monotonic tag `m` and gapless series `inv`.
fn global(names: &[&str]) -> (State, Vec<Identity>) {
    let mut g = v4();
    ap(&mut g, &monotonic("m")).unwrap();
    ap(&mut g, &series("inv")).unwrap();
    let ids = names
        .iter()
        .map(|n| match ap(&mut g, &at(T0, Op::JoinRegion { name: n.to_string(), workers: 8 })).unwrap() {
            Applied::Region(RegionAnswer::Registered {
                record: RegionRecord { id, first_worker, last_worker, .. },
                ..
            }) => Identity { name: n.to_string(), id, first_worker, last_worker },
            other => panic!("a join answers a record, not {other:?}"),
        })
        .collect();
    (g, ids)
}

/// Region `identity` with the same two tags.
fn region(identity: &Identity) -> State {
    let mut r = v4();
    ap(&mut r, &monotonic("m")).unwrap();
    ap(&mut r, &series("inv")).unwrap();
    ap(&mut r, &at(T0, Op::AdoptRegion(identity.clone()))).unwrap();
    r
}

fn home_of(r: ApplyResult) -> Result<Home, ApplyError> {
    match r? {
        Applied::Region(RegionAnswer::Home { home, .. }) => Ok(home),
        other => panic!("a home answered, not {other:?}"),
    }
}

fn claim(g: &mut State, t: i64, region: &str, tag: &str) -> Result<Home, ApplyError> {
    home_of(ap(g, &at(t, Op::ClaimHome { region: region.into(), tag: tag.into() })))
}

fn renew(g: &mut State, t: i64, region: &str) -> Result<Lease, ApplyError> {
    match ap(g, &at(t, Op::RenewLease { region: region.into() }))? {
        Applied::Region(RegionAnswer::Lease(lease)) => Ok(lease),
        other => panic!("a lease answered, not {other:?}"),
    }
}

fn grant(g: &mut State, t: i64, region: &str, above: i64) -> Result<Block, ApplyError> {
    match ap(g, &at(t, Op::GrantBlock { region: region.into(), tag: "m".into(), size: 100, above }))? {
        Applied::Segment(a) => Ok(Block { start: a.start, end: a.end }),
        other => panic!("a grant answers a range, not {other:?}"),
    }
}

fn take(r: &mut State, t: i64, step: i64) -> Result<(i64, i64), ApplyError> {
    match ap(r, &at(t, Op::AllocateSegment { tag: "m".into(), step, node_id: 1 }))? {
        Applied::Segment(a) => Ok((a.start, a.end)),
        other => panic!("an allocation answers a range, not {other:?}"),
    }
}

fn issue(r: &mut State, key: &str) -> Result<u64, ApplyError> {
    let ask = crate::NumberAsk {
        tag: "inv".into(),
        key: key.into(),
        actor: leaf_api::audit::Actor::AdminToken,
        act: crate::NumberAct::Issue,
    };
    let op = Op::IssueNumbers { asks: vec![crate::OwnedAsk { ask, proof: None }], rules: crate::NumberRules::Owned };
    match ap(r, &at(T0, op))? {
        Applied::Numbers(mut results) => results.remove(0).map(|i| i.number),
        other => panic!("numbers answered, not {other:?}"),
    }
}

#[test]
fn the_first_claim_makes_the_home_and_later_ones_answer_it() {
    let (mut g, _) = global(&["eu", "us"]);
    let home = claim(&mut g, T0, "eu", "m").unwrap();
    assert_eq!((home.region.as_str(), home.epoch, home.ready_ms), ("eu", 1, T0));
    assert_eq!(claim(&mut g, T0 + 5, "us", "m").unwrap(), home, "a later claim answers the home");
    ap(&mut g, &crate::testing::create("plain", 10, 1)).unwrap();
    assert!(matches!(claim(&mut g, T0, "eu", "plain"), Err(ApplyError::RegionConflict(_))), "a plain tag has none");
    assert!(matches!(claim(&mut g, T0, "ap", "inv"), Err(ApplyError::RegionNotFound(_))));
    ap(&mut g, &at(T0, Op::RetireRegion { name: "us".into() })).unwrap();
    assert!(matches!(claim(&mut g, T0, "us", "inv"), Err(ApplyError::RegionRetired(_))));
}

#[test]
fn a_homed_tag_s_blocks_go_to_its_home_alone_while_its_lease_runs() {
    let (mut g, _) = global(&["eu", "us"]);
    assert!(matches!(grant(&mut g, T0, "eu", 0), Err(ApplyError::RegionConflict(_))), "no home yet");
    claim(&mut g, T0, "eu", "m").unwrap();
    let err = grant(&mut g, T0, "eu", 0).unwrap_err();
    assert!(err.to_string().contains("no lease"), "{err}");
    let lease = renew(&mut g, T0, "eu").unwrap();
    assert_eq!(lease.until_ms, T0 + HOME_LEASE_MS);
    assert_eq!(lease.homes.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), ["m"]);
    grant(&mut g, T0 + 1, "eu", 0).unwrap();
    let err = grant(&mut g, T0 + 1, "us", 0).unwrap_err();
    assert!(matches!(&err, ApplyError::NotHome { home, .. } if home == "eu"), "{err}");
    assert!(grant(&mut g, T0 + HOME_LEASE_MS, "eu", 0).is_err(), "the lease ran out");
}

#[test]
fn a_move_waits_for_the_old_home_s_release_or_its_lease_and_grace() {
    let (mut g, _) = global(&["eu", "us", "ap"]);
    claim(&mut g, T0, "eu", "m").unwrap();
    renew(&mut g, T0, "eu").unwrap();
    let eu_block = grant(&mut g, T0, "eu", 0).unwrap();
    let moved = home_of(ap(&mut g, &at(T0 + 100, Op::MoveHome { tag: "m".into(), to: "us".into() }))).unwrap();
    assert_eq!((moved.region.as_str(), moved.epoch, moved.from.as_deref()), ("us", 2, Some("eu")));
    assert_eq!(moved.ready_ms, T0 + HOME_LEASE_MS + HOME_GRACE_MS, "the old home's lease and grace");
    renew(&mut g, T0 + 200, "us").unwrap();
    assert!(grant(&mut g, T0 + 200, "us", 0).is_err(), "not before the old home let go");
    let again = ap(&mut g, &at(T0 + 300, Op::MoveHome { tag: "m".into(), to: "ap".into() }));
    assert!(matches!(again, Err(ApplyError::RegionConflict(_))), "one move at a time: {again:?}");
    // The old home's renewal lists the tag moving away; its release readies the new home.
    let lease = renew(&mut g, T0 + 400, "eu").unwrap();
    assert_eq!(lease.homes, vec![("m".to_string(), moved.clone())]);
    let stale = home_of(ap(&mut g, &at(T0 + 500, Op::ReleaseHome { region: "eu".into(), tag: "m".into(), epoch: 1 })));
    assert_eq!(stale.unwrap().ready_ms, moved.ready_ms, "a release of another epoch changes nothing");
    let released = ap(&mut g, &at(T0 + 500, Op::ReleaseHome { region: "eu".into(), tag: "m".into(), epoch: 2 }));
    assert_eq!(home_of(released).unwrap().ready_ms, T0 + 500);
    let us_block = grant(&mut g, T0 + 500, "us", 0).unwrap();
    assert!(us_block.start >= eu_block.end, "the new home's block lies above the old home's");
    // A gapless series never moves.
    claim(&mut g, T0, "eu", "inv").unwrap();
    let err = ap(&mut g, &at(T0 + 600, Op::MoveHome { tag: "inv".into(), to: "us".into() })).unwrap_err();
    assert!(err.to_string().contains("never moves"), "{err}");
}

#[test]
fn a_region_serves_a_homed_tag_only_at_its_home_and_names_the_home_elsewhere() {
    let (mut g, ids) = global(&["eu", "us"]);
    let (mut eu, mut us) = (region(&ids[0]), region(&ids[1]));
    assert!(matches!(take(&mut eu, T0, 10), Err(ApplyError::HomeUnknown(_))));
    assert!(matches!(issue(&mut eu, "k"), Err(ApplyError::HomeUnknown(_))));
    for tag in ["m", "inv"] {
        let home = claim(&mut g, T0, "eu", tag).unwrap();
        for r in [&mut eu, &mut us] {
            home_of(ap(r, &at(T0, Op::AdoptHome { tag: tag.into(), home: home.clone() }))).unwrap();
        }
    }
    let err = take(&mut us, T0, 10).unwrap_err();
    assert!(matches!(&err, ApplyError::NotHome { home, .. } if home == "eu"), "{err}");
    assert!(err.to_string().contains("\"eu\""), "the error names the home: {err}");
    assert!(matches!(issue(&mut us, "k"), Err(ApplyError::NotHome { .. })));
    assert_eq!(issue(&mut eu, "k").unwrap(), 1, "the home numbers its series");
    assert!(matches!(take(&mut eu, T0, 10), Err(ApplyError::NoBlock(_))), "the home waits for a block");
    renew(&mut g, T0, "eu").unwrap();
    let b = grant(&mut g, T0, "eu", 0).unwrap();
    ap(&mut eu, &at(T0, Op::AdoptBlock { tag: "m".into(), block: b })).unwrap();
    assert!(ap(&mut us, &at(T0, Op::AdoptBlock { tag: "m".into(), block: b })).is_err(), "not the home");
    let (start, end) = take(&mut eu, T0, 10).unwrap();
    assert!(b.start <= start && end <= b.end);
}

#[test]
fn a_newer_epoch_drops_the_tag_s_blocks_and_an_older_one_changes_nothing() {
    let (mut g, ids) = global(&["eu", "us"]);
    let mut eu = region(&ids[0]);
    let home = claim(&mut g, T0, "eu", "m").unwrap();
    ap(&mut eu, &at(T0, Op::AdoptHome { tag: "m".into(), home: home.clone() })).unwrap();
    renew(&mut g, T0, "eu").unwrap();
    let b = grant(&mut g, T0, "eu", 0).unwrap();
    ap(&mut eu, &at(T0, Op::AdoptBlock { tag: "m".into(), block: b })).unwrap();
    take(&mut eu, T0, 5).unwrap();
    // The home moved away and back while this region heard of neither: epoch 3 is here again,
    // and the rest of the epoch-1 block is never served.
    let back = Home { epoch: 3, from: Some("us".into()), ..home.clone() };
    let mut changes = Changes::default();
    apply(&mut eu, &at(T0, Op::AdoptHome { tag: "m".into(), home: back.clone() }), &mut changes).unwrap();
    assert!(changes.blocks.contains("m") && changes.homes.contains("m"), "{changes:?}");
    assert!(matches!(take(&mut eu, T0, 5), Err(ApplyError::NoBlock(_))));
    let stale = home_of(ap(&mut eu, &at(T0, Op::AdoptHome { tag: "m".into(), home: home.clone() }))).unwrap();
    assert_eq!(stale, back, "an older epoch changes nothing");
}

#[test]
fn a_region_at_version_4_makes_monotonic_tags_and_gapless_series() {
    let eu = Identity { name: "eu".into(), id: 1, first_worker: 0, last_worker: 7 };
    let mut r = region(&eu);
    ap(&mut r, &monotonic("m2")).unwrap();
    ap(&mut r, &series("inv2")).unwrap();
    assert!(r.tags.contains_key("m2") && r.tags.contains_key("inv2"));
    // Before its home is known it serves neither.
    assert!(matches!(take(&mut r, T0, 5), Err(ApplyError::HomeUnknown(_))));
}

#[test]
fn home_operations_need_cluster_version_4() {
    let mut s = State { version: ClusterVersion(3), ..State::default() };
    let r = ap(&mut s, &at(T0, Op::RenewLease { region: "eu".into() }));
    assert!(matches!(r, Err(ApplyError::FeatureNotActive { needs: ClusterVersion(4), .. })), "{r:?}");
}

#[test]
fn a_repeated_move_is_audited_once() {
    let (mut g, _) = global(&["eu", "us"]);
    claim(&mut g, T0, "eu", "m").unwrap();
    let mv = |t| {
        let op = Op::MoveHome { tag: "m".into(), to: "us".into() };
        at(t, Op::admin(leaf_api::audit::Actor::AdminToken, crate::audit::DEFAULT_RETENTION, op))
    };
    let before = g.audit.records.len();
    ap(&mut g, &mv(T0 + 1)).unwrap();
    ap(&mut g, &mv(T0 + 2)).unwrap();
    let moved: Vec<_> = g.audit.records.iter().skip(before).map(|r| r.action.clone()).collect();
    assert_eq!(
        moved,
        [leaf_api::audit::AuditAction::HomeMoved { tag: "m".into(), from: "eu".into(), to: "us".into(), epoch: 2 }]
    );
}

/// Three regions serve a monotonic tag while its home moves among them, with lost answers,
/// late releases and regions that hear of moves late or never. A region hands out an ID only
/// at its home as it knows it, from its blocks, while the lease it measured (from before it
/// asked) runs, as the node's leader does. Every ID handed out is larger than every one handed
/// out before it, anywhere.
#[test]
fn monotonic_order_holds_across_moves_of_the_home() {
    let seed = std::env::var("LEAF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random::<u64>);
    println!("seed {seed} (LEAF_SEED={seed} repeats this run)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let names = ["eu", "us", "ap"];
    let (mut g, ids) = global(&names);
    let mut regions: Vec<State> = ids.iter().map(region).collect();
    // Each region's lease as it measured it: valid before this time.
    let mut valid_until = [i64::MIN; 3];
    let mut now = T0;
    let mut last_id = i64::MIN;
    let mut handed = 0usize;
    let mut moves = 0usize;
    for _ in 0..20_000 {
        now += rng.gen_range(0..400);
        let r = rng.gen_range(0..names.len());
        match rng.gen_range(0..12) {
            // Claim, renew and learn: the region's keeper round, its answer lost at times.
            0..=2 => {
                let asked_at = now;
                now += rng.gen_range(0..50);
                let _ = claim(&mut g, now, names[r], "m");
                let Ok(lease) = renew(&mut g, now, names[r]) else { continue };
                if rng.gen_bool(0.2) {
                    continue;
                }
                now += rng.gen_range(0..50);
                valid_until[r] = asked_at + HOME_LEASE_MS;
                let claimed = claim(&mut g, now, names[r], "m").unwrap();
                let known = lease.homes.into_iter().chain([("m".to_string(), claimed)]);
                for (tag, home) in known {
                    let _ = ap(&mut regions[r], &at(now, Op::AdoptHome { tag: tag.clone(), home: home.clone() }));
                    let moved_away = home.region != names[r] && home.from.as_deref() == Some(names[r]);
                    if moved_away && rng.gen_bool(0.7) {
                        let op = Op::ReleaseHome { region: names[r].into(), tag, epoch: home.epoch };
                        let _ = ap(&mut g, &at(now, op));
                    }
                }
            }
            // A block for the home, from the global tier, adopted (or lost).
            3..=4 => {
                let (counter, high) =
                    (regions[r].tags["m"].max_id, regions[r].regions.blocks.get("m").map_or(0, |b| b.high));
                if let Ok(b) = grant(&mut g, now, names[r], counter.max(high)) {
                    if rng.gen_bool(0.9) {
                        let _ = ap(&mut regions[r], &at(now, Op::AdoptBlock { tag: "m".into(), block: b }));
                    }
                }
            }
            // An operator moves the home.
            5 => {
                let to = names[rng.gen_range(0..names.len())];
                if ap(&mut g, &at(now, Op::MoveHome { tag: "m".into(), to: to.into() })).is_ok() {
                    moves += 1;
                }
            }
            // A take, handed out only within the lease.
            _ => {
                if let Ok((start, end)) = take(&mut regions[r], now, rng.gen_range(1..20)) {
                    if now < valid_until[r] {
                        assert!(start > last_id, "seed {seed}: region {} handed out {start} after {last_id}", names[r]);
                        last_id = end - 1;
                        handed += 1;
                    }
                }
            }
        }
    }
    assert!(handed > 300 && moves > 50, "seed {seed}: too little happened: {handed} takes, {moves} moves");
}

/// A tag of `profile`, as a creation command.
fn profiled(tag: &str, profile: &StoredProfile) -> Command {
    let mut t = crate::tags::NewTag::segment(tag.into(), 10, 1, String::new());
    if let StoredProfile::Daily { .. } = profile {
        t.start_max_id = leaf_api::profile::DAILY_FIRST;
    }
    t.profile = profile.clone();
    at(T0, Op::CreateTag { tag: t, cap: crate::TagCap::Full })
}

fn take_of(r: &mut State, tag: &str, step: i64) -> Result<(i64, i64), ApplyError> {
    match ap(r, &at(T0, Op::AllocateSegment { tag: tag.into(), step, node_id: 1 }))? {
        Applied::Segment(a) => Ok((a.start, a.end)),
        other => panic!("an allocation answers a range, not {other:?}"),
    }
}

/// Daily and obfuscated tags have homes from cluster version 5: made in a region, claimed as
/// any homed tag, served at the home from its own counter with no block, refused elsewhere with
/// the home's name, and never moved.
#[test]
fn daily_and_obfuscated_tags_are_served_at_their_home_from_its_own_counter_from_version_5() {
    let format = leaf_api::profile::DailyFormat { digits: 6, utc_offset_minutes: 0 };
    let profiles = [
        ("d", StoredProfile::Daily { format, day: 0 }),
        ("o", StoredProfile::Obfuscated { key: [7; crate::OBFUSCATION_KEY_BYTES] }),
    ];
    let (mut g, ids) = global(&["eu", "us"]);
    let (mut eu, mut us) = (region(&ids[0]), region(&ids[1]));
    // At version 4 a region makes neither, and the global tier gives neither a home.
    for (tag, p) in &profiles {
        assert!(matches!(ap(&mut eu, &profiled(tag, p)), Err(ApplyError::NotBlockable { .. })), "{tag}");
        ap(&mut g, &profiled(tag, p)).unwrap();
        let refused = claim(&mut g, T0, "eu", tag).unwrap_err();
        assert!(refused.to_string().contains("no home at this cluster version"), "{refused}");
    }
    for s in [&mut g, &mut eu, &mut us] {
        s.version = ClusterVersion(5);
    }
    for (tag, p) in &profiles {
        for r in [&mut eu, &mut us] {
            ap(r, &profiled(tag, p)).unwrap();
        }
        assert!(matches!(take_of(&mut eu, tag, 10), Err(ApplyError::HomeUnknown(_))), "{tag}");
        let home = claim(&mut g, T0, "eu", tag).unwrap();
        assert_eq!(claim(&mut g, T0, "us", tag).unwrap(), home, "the first claim wins");
        for r in [&mut eu, &mut us] {
            home_of(ap(r, &at(T0, Op::AdoptHome { tag: tag.to_string(), home: home.clone() }))).unwrap();
        }
        let err = take_of(&mut us, tag, 10).unwrap_err();
        assert!(matches!(&err, ApplyError::NotHome { home, .. } if home == "eu"), "{tag}: {err}");
        // The home's own counter, with no block: consecutive segments, rising.
        let (a, b) = take_of(&mut eu, tag, 10).unwrap();
        let (c, d) = take_of(&mut eu, tag, 10).unwrap();
        assert_eq!((b - a, c, d - c), (10, b, 10), "{tag}");
        assert!(!eu.regions.blocks.contains_key(*tag), "{tag}: no block");
        let grant = Op::GrantBlock { region: "eu".into(), tag: tag.to_string(), size: 100, above: 0 };
        assert!(matches!(ap(&mut g, &at(T0, grant)), Err(ApplyError::NotBlockable { .. })), "{tag}");
        let moved = ap(&mut g, &at(T0 + 1, Op::MoveHome { tag: tag.to_string(), to: "us".into() })).unwrap_err();
        assert!(moved.to_string().contains("never moves"), "{tag}: {moved}");
    }
    // A daily ID carries the day of the leader's time.
    let (first, _) = take_of(&mut eu, "d", 1).unwrap();
    let day = format.day_at(T0).unwrap();
    assert_eq!(first, format.compose(day, leaf_api::profile::DAILY_FIRST + 20).unwrap());
}
