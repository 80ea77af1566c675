//! The deployment as an operator runs it: the FROM-scratch image from `deploy/build-image.sh`
//! and the 3-node `deploy/docker-compose.yml`, driven with docker and docker-compose.
//!
//! Runs when a Docker engine and docker-compose answer; otherwise it prints why and passes
//! (set `LEAF_REQUIRE_DOCKER=1` to make a missing engine a failure instead).
use std::collections::HashSet;
use std::process::Command;
use std::time::{Duration, Instant};

use leaf_cluster_tests::cluster::TOKEN;
use leaf_cluster_tests::docker::{self, Compose};
use tokio::task::block_in_place;

use super::*;

const IMAGE: &str = "leaf:latest";

/// Every path in the image's layers (`docker save`, then each layer's tar listing).
fn image_files(image: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let tar = dir.path().join("image.tar");
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?}");
    ok(Command::new("docker").args(["save", "-o"]).arg(&tar).arg(image));
    ok(Command::new("tar").arg("-xf").arg(&tar).arg("-C").arg(dir.path()));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("manifest.json")).unwrap()).unwrap();
    let mut files = Vec::new();
    for layer in manifest[0]["Layers"].as_array().unwrap() {
        let out = Command::new("tar").arg("-tf").arg(dir.path().join(layer.as_str().unwrap())).output().unwrap();
        assert!(out.status.success());
        files.extend(String::from_utf8_lossy(&out.stdout).lines().map(str::to_string));
    }
    files.sort();
    files
}

/// Retries `f` until it succeeds or `within` passes; returns the value.
async fn until_ok<T, F, Fut>(what: &str, within: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + within;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() >= deadline => panic!("{what}: still failing after {within:?}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_cluster_serves_unique_ids_and_survives_killing_the_leaders_container() {
    if let Some(why) = docker::unavailable() {
        assert!(std::env::var_os("LEAF_REQUIRE_DOCKER").is_none(), "LEAF_REQUIRE_DOCKER is set: {why}");
        println!("SKIPPED the Docker deployment test: {why}");
        return;
    }
    let _serial = SERIAL.lock().await;

    // The image: only the binary and the (non-root) data directory, running as non-root.
    block_in_place(|| docker::build_image(IMAGE)).unwrap();
    assert_eq!(image_files(IMAGE), ["data/", "leaf"], "the image holds more than the binary");
    let inspect = |f: &str| {
        let out = Command::new("docker").args(["image", "inspect", "-f", f, IMAGE]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(inspect("{{.Config.User}}"), "65532:65532");
    assert!(inspect("{{json .Config.Volumes}}").contains("/data"));

    let project = format!("leafci{}", std::process::id());
    let file = docker::compose_file(3).unwrap();
    let mut compose = Compose::new(&project, vec![file], 3, IMAGE).unwrap();
    block_in_place(|| compose.up()).unwrap();
    let took = block_in_place(|| compose.wait_healthy(&[1, 2, 3], Duration::from_secs(90))).unwrap();
    println!("3 containers healthy {took:?} after `docker-compose up`");

    let client = |id: u64| Client::new(&compose.url(id), Some(TOKEN.to_string())).with_timeout(Duration::from_secs(5));
    create_tag(&client(1), "docker-ci", 100).await;

    // Every node serves; batches of 150 cross segment boundaries.
    let mut segment = Vec::new();
    let mut snowflake = Vec::new();
    for id in 1..=3 {
        let c = client(id);
        segment.extend(until_ok("segment IDs", Duration::from_secs(20), || get_ids(&c, "docker-ci", Some(150))).await);
        snowflake.extend(
            until_ok("snowflake IDs", Duration::from_secs(20), || async {
                snowflake_get(&c, 100).await.map_err(|(s, e)| format!("{s} {e}"))
            })
            .await,
        );
    }
    let status = |id: u64| {
        let c = client(id);
        async move {
            let (s, b) = c.get("/cluster/status").await.map_err(|e| e.to_string())?;
            if s != StatusCode::OK {
                return Err(format!("HTTP {s}"));
            }
            serde_json::from_slice::<ClusterStatus>(&b).map_err(|e| e.to_string())
        }
    };
    let before = until_ok("a leader", Duration::from_secs(20), || async {
        let s = status(1).await?;
        s.leader_id.map(|l| (l, s)).ok_or_else(|| "no leader".to_string())
    })
    .await;
    let (leader, before) = before;
    let worker_of = |s: &ClusterStatus, node: u64| s.workers.iter().find(|w| w.node_id == node).map(|w| w.worker_id);
    let leader_worker = worker_of(&before, leader).expect("the leader holds a worker ID");

    // kill -9 the leader's container: the other two elect a leader and keep serving.
    block_in_place(|| compose.kill(leader)).unwrap();
    assert!(!block_in_place(|| compose.state(leader)).unwrap().0, "the killed container still runs");
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    for round in 0..20 {
        for &id in &others {
            let c = client(id);
            segment.extend(
                until_ok(
                    &format!("segment IDs from node {id} after the kill (round {round})"),
                    Duration::from_secs(30),
                    || get_ids(&c, "docker-ci", Some(50)),
                )
                .await,
            );
            snowflake.extend(
                until_ok("snowflake IDs after the kill", Duration::from_secs(30), || async {
                    snowflake_get(&c, 50).await.map_err(|(s, e)| format!("{s} {e}"))
                })
                .await,
            );
        }
    }
    let new_leader = until_ok("a new leader", Duration::from_secs(30), || async {
        status(others[0]).await?.leader_id.filter(|l| *l != leader).ok_or_else(|| "no new leader".to_string())
    })
    .await;
    assert!(others.contains(&new_leader));

    // Restarted, it rejoins from its volume: same worker ID, serves again.
    block_in_place(|| compose.start(leader)).unwrap();
    block_in_place(|| compose.wait_healthy(&[leader], Duration::from_secs(90))).unwrap();
    let c = client(leader);
    segment.extend(
        until_ok("segment IDs from the restarted node", Duration::from_secs(30), || {
            get_ids(&c, "docker-ci", Some(150))
        })
        .await,
    );
    snowflake.extend(
        until_ok("snowflake IDs from the restarted node", Duration::from_secs(30), || async {
            snowflake_get(&c, 100).await.map_err(|(s, e)| format!("{s} {e}"))
        })
        .await,
    );
    let after = status(leader).await.unwrap();
    assert_eq!(worker_of(&after, leader), Some(leader_worker), "the restarted node lost its worker ID");

    // Unique, and every segment ID inside an allocation committed through Raft.
    let allocations = journal(&client(new_leader), "docker-ci").await.allocations;
    let report = leaf_cluster_tests::checker::check_segment_ids(&segment, &allocations);
    assert!(report.is_valid(), "{report:?}");
    assert_eq!(segment.len(), 3 * 150 + 20 * 2 * 50 + 150);
    let unique: HashSet<i64> = snowflake.iter().copied().collect();
    assert_eq!(unique.len(), snowflake.len(), "duplicate snowflake IDs");
    assert_eq!(snowflake.len(), 3 * 100 + 20 * 2 * 50 + 100);

    // Down: nothing of the project is left.
    block_in_place(|| compose.down()).unwrap();
    let left = block_in_place(|| compose.leftovers()).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}
