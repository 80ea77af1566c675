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

/// `count` segment IDs of `tag`, a request at a time, waiting out a tag between blocks.
async fn ids(c: &Client, tag: &str, count: usize) -> Vec<i64> {
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let batch = eventually(&format!("IDs of {tag}"), WAIT, || async {
            match c.segment_ids(tag, 100).await {
                Err(e) if e.code() == Some(ErrorCode::SegmentsNotReady) => Err(e.to_string()),
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
    let mut cfg = config(&dirs[0]);
    cfg.admin_token = Some(TOKEN.into());
    let (global, g) = start(cfg).await;
    let bearer = leaf_test_support::create_regions_token(&g).await;
    let token_file = dirs[3].path().join("global.token");
    std::fs::write(&token_file, bearer).unwrap();
    let url = format!("http://{}", global.http_addr());
    let (eu_node, eu) = region(&dirs[1], "eu", &url, &token_file).await;
    let (us_node, us) = region(&dirs[2], "us", &url, &token_file).await;
    for (node, name) in [(&eu_node, "eu"), (&us_node, "us")] {
        let adopted = || async { node.raft().state().region_here().is_some_and(|i| i.name == name) };
        until(&format!("region {name} adopts its identity"), WAIT, adopted).await;
    }

    // Segment IDs of one tag, created in each region: none twice, each region's rising.
    for c in [&eu, &us] {
        create_tag(c, "order", 100).await;
    }
    // A monotonic tag promises order across regions, which needs a home region: refused.
    let monotonic = CreateTagRequest { profile: Some(Profile::Monotonic), ..tag_req("seq", 10) };
    let refused = eu.create_tag(&monotonic).await.unwrap_err();
    assert_eq!(refused.code(), Some(ErrorCode::WrongProfile), "{refused}");
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
    let listed = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_leaf"))
                .args(["region", "list", "--url", &url, "--token", TOKEN])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(listed.status.success(), "{listed:?}");
    let listed: leaf_api::regions::RegionList = serde_json::from_slice(&listed.stdout).unwrap();
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
