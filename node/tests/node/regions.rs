//! Two regions over one global tier, each a node in-process: every region joins and adopts its
//! identity by itself, serves segment IDs from blocks the global tier granted it and snowflake
//! IDs from worker IDs of its own, and the two never hand out the same ID. With the global tier
//! stopped, both go on serving from what they hold.
use std::collections::HashSet;
use std::time::Duration;

use leaf_api::profile::Profile;
use leaf_api::regions::JoinRegionRequest;
use leaf_api::types::{CreateTagRequest, SnowflakeState};
use leaf_api::ErrorCode;
use leaf_client::Client;
use leaf_node::NodeHandle;
use leaf_test_support::gate::Gate;
use tempfile::TempDir;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);

/// A node of region `name` over the global tier at `global` with the token in `token_file`.
async fn region(dir: &TempDir, name: &str, global: &str, token_file: &std::path::Path) -> (NodeHandle, Client) {
    let mut cfg = config(dir);
    cfg.admin_token = Some(TOKEN.into());
    cfg.region.name = Some(name.into());
    cfg.region.global = vec![global.to_string()];
    cfg.region.global_token_file = Some(token_file.to_path_buf());
    cfg.region.workers = 4;
    cfg.region.min_block = 20_000;
    cfg.region.check_ms = 100;
    let node = leaf_node::start(cfg).await.expect("a region's node starts");
    assert!(node.wait_ready(WAIT).await, "region {name} not ready");
    let client = client(&format!("http://{}", node.http_addr()), Some(TOKEN.into()));
    (node, client)
}

/// A global tier (a node of its own) and regions `eu` and `us` over it, each adopted.
struct Regions {
    global: NodeHandle,
    g: Client,
    url: String,
    eu_node: NodeHandle,
    eu: Client,
    us_node: NodeHandle,
    us: Client,
}

/// [`Regions`] in `dirs` (four of them: the global tier, eu, us, and the token file).
async fn two_regions(dirs: &[TempDir]) -> Regions {
    two_regions_eu_gated(dirs, false).await.0
}

/// [`two_regions`], eu dialling the global tier through a [`Gate`] if `gated`.
async fn two_regions_eu_gated(dirs: &[TempDir], gated: bool) -> (Regions, Option<Gate>) {
    let mut cfg = config(&dirs[0]);
    cfg.admin_token = Some(TOKEN.into());
    let (global, g) = start(cfg).await;
    let bearer = leaf_test_support::create_regions_token(&g).await;
    let token_file = dirs[3].path().join("global.token");
    std::fs::write(&token_file, bearer).unwrap();
    let url = format!("http://{}", global.http_addr());
    let gate = match gated {
        true => Some(Gate::start(global.http_addr()).await.unwrap()),
        false => None,
    };
    let eu_url = gate.as_ref().map_or_else(|| url.clone(), |gate| format!("http://{}", gate.addr()));
    let (eu_node, eu) = region(&dirs[1], "eu", &eu_url, &token_file).await;
    let (us_node, us) = region(&dirs[2], "us", &url, &token_file).await;
    for (node, name) in [(&eu_node, "eu"), (&us_node, "us")] {
        let adopted = || async {
            let state = node.raft().state();
            state.region_here().is_some_and(|i| i.name == name) && state.cluster_version().0 >= 4
        };
        until(&format!("region {name} adopts its identity at cluster version 4"), WAIT, adopted).await;
    }
    (Regions { global, g, url, eu_node, eu, us_node, us }, gate)
}

/// `count` segment IDs of `tag`, a request at a time, waiting out a tag between blocks (or,
/// for a monotonic tag, before this region knows it is the home and holds its lease).
async fn ids(c: &Client, tag: &str, count: usize) -> Vec<i64> {
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let batch = eventually(&format!("IDs of {tag}"), WAIT, || async {
            match c.segment_ids(tag, 100).await {
                Err(e) if e.status().map(|s| s.as_u16()) == Some(503) => Err(e.to_string()),
                Err(e) if e.code() == Some(ErrorCode::RegionConflict) => Err(e.to_string()),
                other => Ok(other.unwrap_or_else(|e| panic!("{tag}: {e}"))),
            }
        })
        .await;
        out.extend(batch);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_regions_serve_one_id_space_and_go_on_without_the_global_tier() {
    let dirs: Vec<TempDir> = (0..4).map(|_| TempDir::new().unwrap()).collect();
    let Regions { global, g, url, eu_node, eu, us_node, us } = two_regions(&dirs).await;

    // Segment IDs of one tag, created in each region: none twice, each region's rising.
    for c in [&eu, &us] {
        create_tag(c, "order", 100).await;
    }
    let mut seen = HashSet::new();
    for _ in 0..3 {
        for (c, name) in [(&eu, "eu"), (&us, "us")] {
            let got = ids(c, "order", 1_000).await;
            assert!(got.windows(2).all(|w| w[0] < w[1]), "region {name}'s IDs rise");
            for id in got {
                assert!(seen.insert(id), "ID {id} handed out twice (the second time by {name})");
            }
        }
    }

    // Each region's leader says it adopted its region and was granted blocks.
    for c in [&eu, &us] {
        let text = c.metrics().await.unwrap();
        assert!(text.lines().any(|l| l == "leaf_region_adopted 1"), "{text}");
        let granted = text
            .lines()
            .find_map(|l| l.strip_prefix("leaf_region_block_grants_total{outcome=\"granted\"} "))
            .and_then(|n| n.parse::<u64>().ok());
        assert!(granted.is_some_and(|n| n >= 1), "{granted:?}");
    }

    // The dashboards: each region's identity and blocks, and the global tier's registry.
    for (c, name) in [(&eu, "eu"), (&us, "us")] {
        let view = c.dashboard().await.unwrap().region.expect("a region's dashboard shows its region");
        assert_eq!(view.here.as_ref().map(|h| h.name.as_str()), Some(name), "{view:?}");
        let order = view.blocks.iter().find(|b| b.tag == "order").expect("order holds blocks");
        assert!(order.remaining > 0 && view.blocks_total >= 1, "{view:?}");
        assert!(view.registry.is_empty(), "a region holds no registry: {view:?}");
    }
    let global_view = g.dashboard().await.unwrap().region.expect("a global tier's dashboard shows its regions");
    assert_eq!(global_view.registry.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["eu", "us"]);
    assert!(global_view.here.is_none() && global_view.blocks.is_empty(), "{global_view:?}");

    // Snowflake IDs from worker IDs of each region's own, as the global tier registered them.
    let regions = g.regions().await.unwrap().regions;
    assert_eq!(regions.len(), 2, "{regions:?}");
    for (c, name) in [(&eu, "eu"), (&us, "us")] {
        wait_snowflake(c, SnowflakeState::Serving, WAIT).await;
        let r = regions.iter().find(|r| r.name == name).unwrap();
        for id in c.snowflake_ids("k", 50).await.unwrap() {
            assert!(seen.insert(id), "snowflake ID {id} handed out twice");
            let worker = c.decode(id).await.unwrap().worker_id;
            assert!(
                (r.first_worker..=r.last_worker).contains(&worker),
                "{name}'s worker {worker} is not its own: {r:?}"
            );
        }
    }
    let (a, b) = (&regions[0], &regions[1]);
    assert!(a.last_worker < b.first_worker || b.last_worker < a.first_worker, "{a:?} and {b:?} overlap");
    // A region's join again answers its record; a retired name is never taken again.
    let again = g.join_region(&JoinRegionRequest { name: "eu".into(), workers: 99 }).await.unwrap();
    assert_eq!(&again, regions.iter().find(|r| r.name == "eu").unwrap());

    // `leaf region list` shows both, as the API does (the blocking call off the runtime).
    let listed = leaf_cli(&["region", "list", "--url", &url, "--token", TOKEN]).await;
    let listed: leaf_api::regions::RegionList = serde_json::from_slice(&listed).unwrap();
    assert_eq!(listed.regions, regions);

    // The global tier stops: both regions serve on from the blocks they hold.
    global.shutdown().await;
    for (c, name) in [(&eu, "eu"), (&us, "us")] {
        for id in ids(c, "order", 500).await {
            assert!(seen.insert(id), "ID {id} handed out twice (by {name}, without the global tier)");
        }
    }
    eu_node.shutdown().await;
    us_node.shutdown().await;
}

/// A monotonic tag has one home at a time, and its IDs rise across regions: the home serves
/// it, the other region refuses naming the home, and after an operator moves the home every ID
/// the new home serves is above every ID the old one served, even one served under load while
/// the move happened. A gapless series is numbered at its home alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monotonic_tag_rises_across_a_move_of_its_home() {
    let dirs: Vec<TempDir> = (0..4).map(|_| TempDir::new().unwrap()).collect();
    let Regions { global, g, url, eu_node, eu, us_node, us } = two_regions(&dirs).await;
    let monotonic = CreateTagRequest { profile: Some(Profile::Monotonic), ..tag_req("seq", 10) };
    for c in [&eu, &us] {
        c.create_tag(&monotonic).await.unwrap();
    }
    // The first region to serve it claims its home.
    let first = ids(&eu, "seq", 300).await;
    assert!(first.windows(2).all(|w| w[0] < w[1]), "{first:?}");
    let refused = refusal(&us, "seq", "eu").await;
    assert!(refused.contains("eu"), "{refused}");
    let homes = g.homes(&Default::default()).await.unwrap().homes;
    assert_eq!(
        homes.iter().map(|h| (h.tag.as_str(), h.region.as_str(), h.epoch)).collect::<Vec<_>>(),
        [("seq", "eu", 1)]
    );
    // Both dashboards show the home: the global tier's as decided, eu's as it learnt it.
    for c in [&g, &eu] {
        let view = c.dashboard().await.unwrap().region.unwrap();
        assert_eq!(view.homes.iter().map(|h| (h.tag.as_str(), h.region.as_str())).collect::<Vec<_>>(), [("seq", "eu")]);
    }
    // `leaf region homes` shows it as the API does.
    let listed = leaf_cli(&["region", "homes", "--url", &url, "--token", TOKEN]).await;
    assert_eq!(serde_json::from_slice::<leaf_api::regions::HomeList>(&listed).unwrap().homes, homes);

    // Under load at eu, the operator moves it to us.
    let at_eu = move_under_load(&g, "seq", (&eu, &us, "us"), || {}).await;
    let eu_max = first.iter().chain(at_eu.served.iter().flat_map(|c| &c.ids)).max().copied().unwrap();
    assert!(eu_max < at_eu.first_at_new_home, "us served {} after eu served {eu_max}", at_eu.first_at_new_home);
    refusal(&eu, "seq", "us").await;

    // A gapless series: numbered at the region that claimed it, refused at the other.
    let series = CreateTagRequest { profile: Some(Profile::Gapless), ..tag_req("inv", 1) };
    for c in [&eu, &us] {
        c.create_tag(&series).await.unwrap();
    }
    let n = eventually("eu numbers inv", WAIT, || async {
        match eu.gapless("inv").issue("order-1").await {
            Err(e) if e.status().map(|s| s.as_u16()) == Some(503) => Err(e.to_string()),
            other => Ok(other.unwrap_or_else(|e| panic!("inv at eu: {e}"))),
        }
    })
    .await;
    assert_eq!(n.number, 1, "{n:?}");
    let refused = eventually("us refuses inv", WAIT, || async {
        match us.gapless("inv").issue("order-2").await {
            Err(e) if e.code() == Some(ErrorCode::RegionConflict) => Ok(e.to_string()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    assert!(refused.contains("eu"), "{refused}");
    global.shutdown().await;
    eu_node.shutdown().await;
    us_node.shutdown().await;
}

/// From cluster version 5 a daily or an obfuscated tag has a home too, and is served there
/// alone from the home's own counter (its format and key are the home's): the other region
/// refuses it naming the home, and the global tier refuses to move it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_and_obfuscated_tags_are_served_at_their_home_alone() {
    let dirs: Vec<TempDir> = (0..4).map(|_| TempDir::new().unwrap()).collect();
    let Regions { global, g, eu_node, eu, us_node, us, .. } = two_regions(&dirs).await;
    for node in [&eu_node, &us_node] {
        until("cluster version 5", WAIT, || async { node.raft().state().cluster_version().0 >= 5 }).await;
    }
    let daily = CreateTagRequest { profile: Some(Profile::Daily), ..tag_req("day", 10) };
    let obfuscated = CreateTagRequest { profile: Some(Profile::Obfuscated), ..tag_req("obf", 10) };
    for c in [&eu, &us] {
        c.create_tag(&daily).await.unwrap();
        c.create_tag(&obfuscated).await.unwrap();
    }
    // The first region to serve each claims its home; the other refuses, naming it.
    let days = ids(&eu, "day", 300).await;
    assert!(days.windows(2).all(|w| w[0] < w[1]), "{days:?}");
    let hidden = ids(&us, "obf", 300).await;
    assert_eq!(hidden.iter().collect::<HashSet<_>>().len(), hidden.len(), "an obfuscated ID twice");
    refusal(&us, "day", "eu").await;
    refusal(&eu, "obf", "us").await;
    let mut homes: Vec<_> = g.homes(&Default::default()).await.unwrap().homes;
    homes.sort_by(|a, b| a.tag.cmp(&b.tag));
    assert_eq!(
        homes.iter().map(|h| (h.tag.as_str(), h.region.as_str(), h.epoch)).collect::<Vec<_>>(),
        [("day", "eu", 1), ("obf", "us", 1)]
    );
    // Their counters never leave their home.
    for (tag, to) in [("day", "us"), ("obf", "eu")] {
        let refused = g.move_home(tag, to).await.unwrap_err();
        assert_eq!(refused.code(), Some(ErrorCode::RegionConflict), "{refused}");
        assert!(refused.to_string().contains("never moves"), "{refused}");
    }
    // The homes serve on; the counters continue where they were.
    let more = ids(&eu, "day", 100).await;
    assert!(more[0] > days[days.len() - 1], "{more:?} after {days:?}");
    for id in ids(&us, "obf", 100).await {
        assert!(!hidden.contains(&id), "obfuscated ID {id} handed out twice");
    }
    global.shutdown().await;
    eu_node.shutdown().await;
    us_node.shutdown().await;
}

/// What the old home served while its tag moved.
struct Moved {
    /// Its calls that were answered.
    served: Vec<Timed>,
    /// How often it answered 503 for want of its lease (not of a block).
    unavailable: usize,
    /// The first ID the new home served.
    first_at_new_home: i64,
}

/// Moves `tag`'s home from region `from` to region `to` (named `to_name`) while `from` serves it
/// under load, calling `cut` just before the move; then takes IDs at `to`. Every call is timed,
/// and an ID returned before another call was sent must be below every ID that call returns,
/// whichever region served each.
async fn move_under_load(
    g: &Client,
    tag: &str,
    (from, to, to_name): (&Client, &Client, &str),
    cut: impl FnOnce(),
) -> Moved {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    let (stop, calls) = (std::sync::Arc::new(AtomicBool::new(false)), std::sync::Arc::new(AtomicUsize::new(0)));
    let load = tokio::spawn({
        let (from, tag, stop, calls) = (from.clone(), tag.to_string(), stop.clone(), calls.clone());
        async move {
            let (mut served, mut unavailable) = (Vec::new(), 0);
            while !stop.load(Relaxed) {
                match timed(&from, &tag).await {
                    // Paced (not a wait for a condition) so that the old home's block outlasts
                    // its lease: a home serving past its lease would be seen doing so.
                    Ok(call) => {
                        served.push(call);
                        calls.fetch_add(1, Relaxed);
                        tokio::time::sleep(Duration::from_millis(10)).await
                    }
                    Err(e) if matches!(e.status().map(|s| s.as_u16()), Some(409 | 503)) => {
                        let lapsed = e.status().map(|s| s.as_u16()) == Some(503)
                            && e.code() != Some(ErrorCode::SegmentsNotReady);
                        unavailable += usize::from(lapsed);
                        tokio::time::sleep(Duration::from_millis(10)).await
                    }
                    Err(e) => panic!("the old home under load: {e}"),
                }
            }
            (served, unavailable)
        }
    });
    leaf_test_support::until_holds("the old home serves under load", WAIT, || calls.load(Relaxed) >= 20).await;
    cut();
    let moved = g.move_home(tag, to_name).await.unwrap();
    assert_eq!((moved.region.as_str(), moved.epoch), (to_name, 2), "{moved:?}");
    let first = eventually("the new home serves", WAIT, || async {
        match timed(to, tag).await {
            Err(e) if matches!(e.status().map(|s| s.as_u16()), Some(409 | 503)) => Err(e.to_string()),
            other => Ok(other.unwrap_or_else(|e| panic!("the new home: {e}"))),
        }
    })
    .await;
    let first_at_new_home = first.ids[0];
    let mut at_to = vec![first];
    for _ in 0..30 {
        at_to.push(timed(to, tag).await.unwrap());
    }
    stop.store(true, Relaxed);
    let (served, unavailable) = load.await.unwrap();
    let calls: Vec<&Timed> = served.iter().chain(&at_to).collect();
    for a in &calls {
        for b in calls.iter().filter(|b| a.returned < b.sent) {
            assert!(a.ids.iter().max() < b.ids.iter().min(), "{a:?} returned before {b:?} was sent");
        }
    }
    Moved { served, unavailable, first_at_new_home }
}

/// The standard output of `leaf args…`, which must succeed (the blocking call off the runtime).
async fn leaf_cli(args: &[&str]) -> Vec<u8> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_leaf")).args(&args).output().unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    out.stdout
}

/// One call for 10 IDs: when it was sent, when it returned, and what it got.
#[derive(Debug)]
struct Timed {
    sent: std::time::Instant,
    returned: std::time::Instant,
    ids: Vec<i64>,
}

async fn timed(c: &Client, tag: &str) -> Result<Timed, leaf_client::ClientError> {
    let sent = std::time::Instant::now();
    let ids = c.segment_ids(tag, 10).await?;
    Ok(Timed { sent, returned: std::time::Instant::now(), ids })
}

/// The refusal of `tag` at `c` once it knows the tag is homed at `home`: a 409
/// `region_conflict`, or the test fails.
async fn refusal(c: &Client, tag: &str, home: &str) -> String {
    eventually(&format!("{tag} refused, homed at {home}"), WAIT, || async {
        match c.segment_ids(tag, 1).await {
            Err(e) if e.code() == Some(ErrorCode::RegionConflict) && e.to_string().contains(home) => Ok(e.to_string()),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// A home cut off from the global tier stops serving once its lease runs out, and the new home
/// starts only after that (the lease and its grace): IDs still rise across the move. Healed,
/// the old home learns of the move and refuses naming the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_home_cut_off_from_the_global_tier_stops_before_the_new_one_starts() {
    let dirs: Vec<TempDir> = (0..4).map(|_| TempDir::new().unwrap()).collect();
    let (Regions { global, g, eu_node, eu, us_node, us, .. }, gate) = two_regions_eu_gated(&dirs, true).await;
    let gate = gate.unwrap();
    let monotonic = CreateTagRequest { profile: Some(Profile::Monotonic), ..tag_req("seq", 10) };
    for c in [&eu, &us] {
        c.create_tag(&monotonic).await.unwrap();
    }
    let first = ids(&eu, "seq", 100).await;

    let at_eu = move_under_load(&g, "seq", (&eu, &us, "us"), || gate.close()).await;
    assert!(at_eu.unavailable > 0, "eu never stopped: its lease cannot have run out");
    let eu_max = first.iter().chain(at_eu.served.iter().flat_map(|c| &c.ids)).max().copied().unwrap();
    assert!(eu_max < at_eu.first_at_new_home, "us served {} after eu served {eu_max}", at_eu.first_at_new_home);

    gate.open();
    refusal(&eu, "seq", "us").await;
    global.shutdown().await;
    eu_node.shutdown().await;
    us_node.shutdown().await;
}

/// A region's node whose global tier cannot be reached has no identity: it serves no segment
/// ID from its own counter (another region's blocks may hold it), only 503s, until it adopted
/// its region; nor does it take a snowflake worker ID.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_serves_nothing_before_it_adopted_its_region() {
    let dir = TempDir::new().unwrap();
    let token_file = dir.path().join("global.token");
    std::fs::write(&token_file, "leaf_0000000000000001_nobody").unwrap();
    // A port nothing listens on: the global tier is unreachable.
    let unreachable = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let data = TempDir::new().unwrap();
    let (node, c) = region(&data, "eu", &format!("http://{unreachable}"), &token_file).await;
    create_tag(&c, "order", 100).await;
    for _ in 0..3 {
        let refused = c.segment_ids("order", 1).await.unwrap_err();
        assert_eq!(refused.code(), Some(ErrorCode::SegmentsNotReady), "{refused}");
    }
    let refused = c.snowflake_id("k").await.unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::SnowflakeUnavailable), "{refused}");
    assert!(node.raft().state().region_here().is_none());
    node.shutdown().await;
}
