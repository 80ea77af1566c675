//! A region of three real nodes over a global tier, both with TLS: the region keeps serving
//! one ID space through a `kill -9` of its leader (the new leader's keeper goes on from the
//! replicated blocks) and through a `kill -9` of the global tier (what it holds lasts), and no
//! ID of either mode is handed out twice. A monotonic tag homed in the region rises across
//! the leader's death: the new leader renews the region's lease of its homes before it serves.
use std::collections::HashSet;

use leaf_api::profile::Profile;
use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::Client;
use leaf_cluster_tests::cluster::{Cluster, NodeSpec, Options};

use crate::support::*;

/// `count` segment IDs of `tag` from `c`, a batch at a time, waiting out a tag between blocks
/// or an election.
async fn ids(c: &Client, tag: &str, count: usize) -> Vec<i64> {
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let batch = eventually(&format!("IDs of {tag}"), FORM, || async {
            match c.segment_ids(tag, 50).await {
                Ok(ids) => Ok(ids),
                Err(e) if matches!(e.code(), Some(ErrorCode::TagNotFound)) => panic!("{tag}: {e}"),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
        out.extend(batch);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_serves_through_its_leader_s_death_and_the_global_tier_s() {
    let _lane = alone().await;
    let mut global = Cluster::start(1, Options::new(bin())).unwrap();
    global.wait_leader(FORM).await.unwrap();
    let bearer = leaf_test_support::create_regions_token(&global.client(1)).await;
    let token_file = global.dir().join("global.token");
    std::fs::write(&token_file, bearer).unwrap();
    let ca = global.ca().expect("the global tier runs TLS");
    let mut opts = Options::new(bin());
    opts.extra_toml = format!(
        "[region]\nname = \"eu\"\nglobal = [{url:?}]\nglobal_token_file = {token:?}\nglobal_ca_file = {ca:?}\n\
         workers = 8\nmin_block = 20000\ncheck_ms = 100\n",
        url = global.url(1),
        token = token_file.display().to_string(),
        ca = ca.display().to_string(),
    );
    let mut region = Cluster::prepare_specs((1..=3).map(NodeSpec::direct).collect(), opts).unwrap();
    for id in 1..=3 {
        region.spawn(id).unwrap();
    }
    let leader = region.wait_leader(FORM).await.unwrap();
    // The region's leader joins the global tier by itself; its record names its worker IDs.
    let eu = eventually("the region joins the global tier", FORM, || async {
        let regions = global.client(1).regions().await.map_err(|e| e.to_string())?.regions;
        regions.into_iter().find(|r| r.name == "eu").ok_or_else(|| "not yet".to_string())
    })
    .await;
    // The tag on both sides, as an operator may make it (the keeper would create it on the
    // global tier at its first block otherwise).
    create_tag(&global.client(1), "order", 100).await;
    create_tag(&region.client(leader), "order", 100).await;

    let mut seen = HashSet::new();
    let mut take = |got: Vec<i64>, who: &str| {
        for id in got {
            assert!(seen.insert(id), "ID {id} handed out twice (the second time by {who})");
        }
    };
    for id in 1..=3 {
        take(ids(&region.client(id), "order", 500).await, "a region node");
    }
    // The global tier serves its own IDs of the tag too: never one of the region's.
    take(ids(&global.client(1), "order", 200).await, "the global tier");

    // A monotonic tag (from cluster version 4, which the region reaches by itself), homed
    // here by its first ID.
    let mono = CreateTagRequest { profile: Some(Profile::Monotonic), ..tag_req("seq", 10) };
    eventually("a monotonic tag in the region", FORM, || async { region.client(leader).create_tag(&mono).await }).await;
    let before = ids(&region.client(leader), "seq", 300).await;
    assert!(before.windows(2).all(|w| w[0] < w[1]), "{before:?}");

    // The region's leader dies: the others elect one, whose keeper goes on from the blocks.
    region.kill(leader);
    let survivors: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let next = region.wait_leader_among(&survivors, FORM).await.unwrap();
    for id in &survivors {
        take(ids(&region.client(*id), "order", 2_000).await, "a survivor");
    }
    let after = ids(&region.client(next), "seq", 300).await;
    assert!(after.windows(2).all(|w| w[0] < w[1]), "{after:?}");
    assert!(after[0] > before[before.len() - 1], "{} after {}", after[0], before[before.len() - 1]);

    // The global tier dies: the region serves on from the blocks it holds.
    global.kill(1);
    for id in &survivors {
        take(ids(&region.client(*id), "order", 500).await, "a survivor without the global tier");
    }

    // Snowflake IDs of the region's nodes: distinct, each from the region's worker IDs.
    for id in &survivors {
        let c = region.client(*id);
        let got = eventually("snowflake IDs", FORM, || c.snowflake_ids("k", 20)).await;
        for sid in got {
            assert!(seen.insert(sid), "snowflake ID {sid} handed out twice");
            let worker = c.decode(sid).await.unwrap().worker_id;
            assert!((eu.first_worker..=eu.last_worker).contains(&worker), "worker {worker} is not eu's: {eu:?}");
        }
    }
    assert_ne!(next, leader);
}
