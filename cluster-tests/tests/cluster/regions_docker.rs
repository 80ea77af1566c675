//! The compose example of three regions (`deploy/regions/docker-compose.yml`) as an operator
//! starts it: a global tier of three containers, the one-shot that makes the regions' token,
//! and three one-node regions. Each region joins by itself and serves segment and snowflake IDs
//! of its own, none twice across regions; a second `up` keeps the token and changes nothing.
use std::collections::HashSet;
use std::time::Duration;

use leaf_cluster_tests::cluster::{node_client, TOKEN};
use leaf_cluster_tests::docker::{self, Compose};
use tokio::task::block_in_place;

use crate::support::*;
use crate::with_docker::{docker_answers, image, IMAGE};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_example_runs_three_regions_that_never_share_an_id() {
    if !docker_answers("the compose example of regions") {
        return;
    }
    let _lane = beside().await;
    image();
    let project = format!("leafrg{}", std::process::id());
    let file = docker::deploy_dir().join("regions/docker-compose.yml");
    let mut compose = Compose::new(&project, vec![file], 6, IMAGE).unwrap();
    block_in_place(|| compose.up()).unwrap();
    let took = block_in_place(|| compose.wait_healthy(&[1, 2, 3, 4, 5, 6], Duration::from_secs(120))).unwrap();
    println!("6 containers healthy {took:?} after `docker-compose up`");
    let ca = compose.ca().expect("the CA certificate was copied out of a container");
    let client =
        |service: u64| node_client(&compose.url(service), Some(TOKEN), Some(ca.as_path()), Duration::from_secs(5));

    // Each region joined the global tier by itself, with worker IDs of its own.
    let global = client(1);
    let regions = eventually("three regions joined", Duration::from_secs(60), || async {
        let list = global.regions().await.map_err(|e| e.to_string())?.regions;
        if list.len() == 3 {
            Ok(list)
        } else {
            Err(format!("{list:?}"))
        }
    })
    .await;
    assert_eq!(regions.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["ap", "eu", "us"]);
    for a in &regions {
        for b in regions.iter().filter(|b| b.name != a.name) {
            assert!(a.last_worker < b.first_worker || b.last_worker < a.first_worker, "{a:?} and {b:?} overlap");
        }
    }

    // Each region serves the sample tag from its blocks, and snowflake IDs: none twice.
    let (mut segment, mut snowflake) = (HashSet::new(), HashSet::new());
    for service in [4, 5, 6] {
        let c = client(service);
        for _ in 0..3 {
            let ids = eventually(&format!("IDs of region node {service}"), Duration::from_secs(60), || async {
                c.segment_ids("leaf-segment-test", 100).await.map_err(|e| e.to_string())
            })
            .await;
            for id in ids {
                assert!(segment.insert(id), "segment ID {id} handed out twice (the second time by node {service})");
            }
        }
        let ids = eventually(&format!("snowflake IDs of node {service}"), Duration::from_secs(60), || async {
            c.snowflake_ids("k", 100).await.map_err(|e| e.to_string())
        })
        .await;
        for id in ids {
            assert!(snowflake.insert(id), "snowflake ID {id} handed out twice");
        }
    }

    // A second `up` runs the token's one-shot again: it keeps the file and makes no token.
    block_in_place(|| compose.up()).unwrap();
    block_in_place(|| compose.wait_healthy(&[1, 2, 3, 4, 5, 6], Duration::from_secs(60))).unwrap();
    let tokens = global.tokens().await.unwrap();
    assert_eq!(tokens.iter().filter(|t| t.name == "regions").count(), 1, "{tokens:?}");

    block_in_place(|| compose.down()).unwrap();
    let left = block_in_place(|| compose.leftovers()).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}
