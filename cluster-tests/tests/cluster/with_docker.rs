//! The deployment as an operator runs it: the FROM-scratch image from `deploy/build-image.sh`
//! and the 3-node `deploy/docker-compose.yml`, driven with docker and docker-compose, then
//! grown to 5 nodes and a lost node replaced with the commands of `deploy/README.md`. TLS is
//! on, as the compose files have it: the `certs` service makes the CA and the certificates
//! (nodes 4, 5 and the replacement's new ID included), host clients use the CA copied out of
//! a container, and the CLI inside the containers reads it from `LEAF_CA`. Then the compose
//! example of three regions, `deploy/regions/docker-compose.yml`, on the same image.
//!
//! Runs when a Docker engine and docker-compose answer; otherwise it prints why and passes
//! (set `LEAF_REQUIRE_DOCKER=1` to make a missing engine a failure instead).
use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::time::Duration;

use leaf_api::types::{ClusterStatus, MemberRole};
use leaf_client::{HealthMode, StatusCode};
use leaf_cluster_tests::chaos::schedule::FaultKind;
use leaf_cluster_tests::cluster::{node_client, TOKEN};
use leaf_cluster_tests::docker::{self, Compose};
use tokio::task::block_in_place;

use crate::chaos::{chaos_run, run_chaos};
use crate::support::*;

/// Its own tag, so the test never replaces an operator's `leaf:latest`.
const IMAGE: &str = "leaf:test";

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

/// `leaf ARGS...` inside service `leaf<service>`'s container (`docker-compose exec`). A
/// membership change is retried when it fails; a 409 means an earlier attempt that seemed to
/// fail (a timeout) did commit, so it counts as done.
async fn cli(compose: &Compose, service: u64, args: Vec<&str>) -> Result<String, String> {
    match block_in_place(|| compose.exec(service, &args)) {
        Ok(out) => Ok(out),
        Err(e) if format!("{e:#}").contains("HTTP 409") => Ok(String::new()),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// Whether Docker answers; if not, prints why `test` is skipped (a failure instead with
/// `LEAF_REQUIRE_DOCKER`).
fn docker_answers(test: &str) -> bool {
    let Some(why) = docker::unavailable() else { return true };
    assert!(std::env::var_os("LEAF_REQUIRE_DOCKER").is_none(), "LEAF_REQUIRE_DOCKER is set: {why}");
    println!("SKIPPED {test}: {why}");
    false
}

/// Builds the test image, once for this process.
fn image() {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| block_in_place(|| docker::build_image(IMAGE)).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_cluster_serves_unique_ids_survives_a_killed_leader_container_grows_to_5_and_replaces_a_node() {
    if !docker_answers("the Docker deployment test") {
        return;
    }
    let _lane = beside().await;
    image();

    // The image: only the binary and the (non-root) data, certificate, CA and secrets directories,
    // running as non-root.
    assert_eq!(
        image_files(IMAGE),
        ["ca/", "data/", "leaf", "secrets/", "tls/"],
        "the image holds more than the binary"
    );
    let inspect = |f: &str| {
        let out = Command::new("docker").args(["image", "inspect", "-f", f, IMAGE]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(inspect("{{.Config.User}}"), "65532:65532");
    assert!(inspect("{{json .Config.Volumes}}").contains("/data"));
    assert!(inspect("{{json .Config.Env}}").contains("\"LEAF_URL=http://127.0.0.1:8080\""));
    assert_eq!(inspect("{{json .Config.Healthcheck.Test}}"), r#"["CMD","/leaf","health","--quiet"]"#);

    let project = format!("leafci{}", std::process::id());
    // The 3-node file, plus nodes 4 and 5 for later (started only when the cluster grows), and
    // the healthcheck every second instead of every 5 s: the same check, which the test waits
    // for after each `up` and `start`.
    let checks = tempfile::tempdir().unwrap();
    let every_second = checks.path().join("healthcheck-1s.yml");
    let services: String = (1..=5).map(|i| format!("  leaf{i}:\n    healthcheck:\n      interval: 1s\n")).collect();
    std::fs::write(&every_second, format!("version: \"3.8\"\nservices:\n{services}")).unwrap();
    let files =
        vec![docker::compose_file(3).unwrap(), docker::deploy_dir().join("docker-compose.add-4-5.yml"), every_second];
    let mut compose = Compose::new(&project, files, 5, IMAGE).unwrap();
    block_in_place(|| compose.up_only(&[1, 2, 3])).unwrap();
    let took = block_in_place(|| compose.wait_healthy(&[1, 2, 3], Duration::from_secs(90))).unwrap();
    println!("3 containers healthy {took:?} after `docker-compose up`");

    // TLS: host clients trust the CA copied out of a node container.
    let ca = compose.ca().expect("the CA certificate was copied out of a node container");
    let urls: BTreeMap<u64, String> = (1..=5).map(|i| (i, compose.url(i))).collect();
    assert!(urls[&1].starts_with("https://127.0.0.1:"), "{}", urls[&1]);
    let client = |service: u64| node_client(&urls[&service], Some(TOKEN), Some(ca.as_path()), Duration::from_secs(5));
    create_tag(&client(1), "docker-ci", 100).await;
    // Plain http to a node's port gets a 400 saying to use https.
    let plain = urls[&2].replace("https://", "http://");
    match node_client(&plain, None, None, Duration::from_secs(5)).health(HealthMode::All).await {
        Err(e) if e.status() == Some(StatusCode::BAD_REQUEST) => {
            assert!(e.to_string().contains("https"), "{e}")
        }
        other => panic!("plain http to a TLS node: {other:?}"),
    }
    // The CA key stays in the certs service's volume: the nodes mount the certificates
    // read-only, and no CA directory.
    for id in 1..=3 {
        let mounts = block_in_place(|| compose.mounts(id)).unwrap();
        assert!(mounts.contains(&("/tls".to_string(), false)), "node {id}: {mounts:?}");
        assert!(!mounts.iter().any(|(path, _)| path == "/ca"), "node {id}: {mounts:?}");
    }
    let tls_files = block_in_place(|| compose.files(1, "/tls")).unwrap();
    assert!(tls_files.contains(&"ca.pem".to_string()) && tls_files.contains(&"node-3-key.pem".to_string()));
    assert!(!tls_files.iter().any(|f| f.contains("ca-key")), "{tls_files:?}");

    // Every node serves; batches of 150 cross segment boundaries.
    let mut segment = Vec::new();
    let mut snowflake = Vec::new();
    for id in 1..=3 {
        let c = client(id);
        segment.extend(
            eventually("segment IDs", Duration::from_secs(20), || try_get_ids(&c, "docker-ci", Some(150))).await,
        );
        snowflake.extend(
            eventually("snowflake IDs", Duration::from_secs(20), || async {
                snowflake_get(&c, 100).await.map_err(|(s, e)| format!("{s} {e}"))
            })
            .await,
        );
    }
    let status = |id: u64| {
        let c = client(id);
        async move { c.cluster_status().await.map_err(|e| e.to_string()) }
    };
    let before = eventually("a leader", Duration::from_secs(20), || async {
        let s = status(1).await?;
        s.leader_id.map(|l| (l, s)).ok_or_else(|| "no leader".to_string())
    })
    .await;
    let (leader, before) = before;
    let worker_of = |s: &ClusterStatus, node: u64| s.workers.iter().find(|w| w.node_id == node).map(|w| w.worker_id);
    let leader_worker = worker_of(&before, leader).expect("the leader holds a worker ID");

    // kill -9 the leader's container: the other two elect a leader and keep serving.
    block_in_place(|| compose.kill(leader)).unwrap();
    assert!(!block_in_place(|| compose.state(leader)).unwrap().running, "the killed container still runs");
    let others: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    for round in 0..20 {
        for &id in &others {
            let c = client(id);
            segment.extend(
                eventually(
                    &format!("segment IDs from node {id} after the kill (round {round})"),
                    Duration::from_secs(30),
                    || try_get_ids(&c, "docker-ci", Some(50)),
                )
                .await,
            );
            snowflake.extend(
                eventually("snowflake IDs after the kill", Duration::from_secs(30), || async {
                    snowflake_get(&c, 50).await.map_err(|(s, e)| format!("{s} {e}"))
                })
                .await,
            );
        }
    }
    let new_leader = eventually("a new leader", Duration::from_secs(30), || async {
        status(others[0]).await?.leader_id.filter(|l| *l != leader).ok_or_else(|| "no new leader".to_string())
    })
    .await;
    assert!(others.contains(&new_leader));

    // Restarted, it rejoins from its volume: same worker ID, serves again.
    block_in_place(|| compose.start(leader)).unwrap();
    block_in_place(|| compose.wait_healthy(&[leader], Duration::from_secs(90))).unwrap();
    let c = client(leader);
    segment.extend(
        eventually("segment IDs from the restarted node", Duration::from_secs(30), || {
            try_get_ids(&c, "docker-ci", Some(150))
        })
        .await,
    );
    snowflake.extend(
        eventually("snowflake IDs from the restarted node", Duration::from_secs(30), || async {
            snowflake_get(&c, 100).await.map_err(|(s, e)| format!("{s} {e}"))
        })
        .await,
    );
    let after = status(leader).await.unwrap();
    assert_eq!(worker_of(&after, leader), Some(leader_worker), "the restarted node lost its worker ID");

    // Scale 3 -> 5 (deploy/README.md): start leaf4 and leaf5, add them as learners, promote.
    block_in_place(|| compose.up_only(&[4, 5])).unwrap();
    for (node, addr) in [("4", "leaf4:8080"), ("5", "leaf5:8080")] {
        eventually("add-learner", Duration::from_secs(30), || {
            cli(&compose, 1, vec!["/leaf", "cluster", "add-learner", node, addr])
        })
        .await;
        eventually("promote", Duration::from_secs(30), || cli(&compose, 1, vec!["/leaf", "cluster", "promote", node]))
            .await;
    }
    block_in_place(|| compose.wait_healthy(&[1, 2, 3, 4, 5], Duration::from_secs(90))).unwrap();
    let voters = |s: &ClusterStatus| {
        let mut v: Vec<u64> = s.members.iter().filter(|m| m.role == MemberRole::Voter).map(|m| m.node_id).collect();
        v.sort();
        v
    };
    assert_eq!(voters(&status(1).await.unwrap()), [1, 2, 3, 4, 5]);
    for service in [4, 5] {
        let c = client(service);
        segment.extend(
            eventually("segment IDs from a new node", Duration::from_secs(30), || {
                try_get_ids(&c, "docker-ci", Some(150))
            })
            .await,
        );
    }

    // Node 2 loses its volume. Started again under its old ID, it refuses to rejoin (the
    // restart policy keeps retrying; it keeps refusing).
    block_in_place(|| compose.destroy(2)).unwrap();
    block_in_place(|| compose.up_only(&[2])).unwrap();
    eventually("node 2 refusing to start on an empty volume", Duration::from_secs(30), || async {
        let logs = block_in_place(|| compose.logs(2)).map_err(|e| e.to_string())?;
        if logs.contains("the data dir is empty, but node 2 already took part") {
            Ok(())
        } else {
            Err(logs)
        }
    })
    .await;
    let answer = client(2).health(HealthMode::All).await;
    assert!(answer.is_err_and(|e| e.status().is_none()), "node 2 serves on an empty volume");

    // Replace it by node 6 under the same service and address (deploy/README.md).
    eventually("remove 2", Duration::from_secs(30), || cli(&compose, 1, vec!["/leaf", "cluster", "remove", "2"])).await;
    block_in_place(|| compose.destroy(2)).unwrap();
    compose.set_env("LEAF2_NODE_ID", "6");
    block_in_place(|| compose.up_only(&[2])).unwrap();
    eventually("add-learner 6", Duration::from_secs(30), || {
        cli(&compose, 1, vec!["/leaf", "cluster", "add-learner", "6", "leaf2:8080"])
    })
    .await;
    eventually("promote 6", Duration::from_secs(30), || cli(&compose, 1, vec!["/leaf", "cluster", "promote", "6"]))
        .await;
    if let Err(e) = block_in_place(|| compose.wait_healthy(&[2], Duration::from_secs(90))) {
        // Seen once in CI (and not again in a rerun): say why, next time.
        let logs = block_in_place(|| compose.logs(2)).unwrap_or_else(|e| e.to_string());
        let tail: Vec<&str> = logs.lines().rev().take(60).collect();
        let leader = block_in_place(|| compose.logs(1)).unwrap_or_else(|e| e.to_string());
        let leader_tail: Vec<&str> = leader.lines().rev().take(30).collect();
        // Seen again (2026-11-27): its log ended at its start; its own words on why not ready.
        let health = client(2).health(HealthMode::All).await;
        panic!(
            "node 6 (service leaf2): {e}\n--- its /health ---\n{health:?}\n--- its log, newest first ---\n{}\n--- leaf1's log, newest first ---\n{}",
            tail.join("\n"),
            leader_tail.join("\n")
        );
    }
    let r = client(2).health(HealthMode::All).await.unwrap();
    assert!(r.ready);
    assert_eq!(r.health.node_id, 6, "service leaf2 is node 6 now");
    assert_eq!(voters(&status(1).await.unwrap()), [1, 3, 4, 5, 6]);
    let c = client(2);
    segment.extend(
        eventually("segment IDs from node 6", Duration::from_secs(30), || try_get_ids(&c, "docker-ci", Some(150)))
            .await,
    );
    snowflake.extend(
        eventually("snowflake IDs from node 6", Duration::from_secs(30), || async {
            snowflake_get(&c, 100).await.map_err(|(s, e)| format!("{s} {e}"))
        })
        .await,
    );

    // Unique, and every segment ID inside an allocation committed through Raft: in node 1's
    // journal once node 1 has applied the newest allocations (node 6's last one may still be
    // on its way to node 1 when node 6 serves from it).
    eventually("every segment ID inside node 1's journal", Duration::from_secs(30), || async {
        let allocations = journal(&client(1), "docker-ci").await.allocations;
        let report = leaf_cluster_tests::checker::check_segment_ids(&segment, &allocations);
        if report.is_valid() {
            Ok(())
        } else {
            Err(format!("{report:?}"))
        }
    })
    .await;
    assert_eq!(segment.len(), 3 * 150 + 20 * 2 * 50 + 150 + 2 * 150 + 150);
    let unique: HashSet<i64> = snowflake.iter().copied().collect();
    assert_eq!(unique.len(), snowflake.len(), "duplicate snowflake IDs");
    assert_eq!(snowflake.len(), 3 * 100 + 20 * 2 * 50 + 100 + 100);

    // Down: nothing of the project is left.
    block_in_place(|| compose.down()).unwrap();
    let left = block_in_place(|| compose.leftovers()).unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// `leaf-chaos --docker` replaces nodes of the compose cluster: each membership fault starts a
/// fresh node ID in a free service (the override's spare first, then a removed node's), adds,
/// promotes and removes as in local runs, and deletes the old container and volume. A fixed
/// seed (override with `LEAF_CHAOS_SEED`), and a run as long as its schedule needs for three
/// replacements (46 s), so at least one reuses a freed service; kills run in between (a
/// container's kill and start, and a replacement's container start, overrun their planned
/// slots by seconds: hence the wider margin). The history must be valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_docker_chaos_run_replaces_nodes_and_passes_the_checker() {
    if !docker_answers("the Docker chaos run") {
        return;
    }
    let _lane = beside().await;
    image();
    let kinds = [FaultKind::Membership, FaultKind::Kill];
    let run = chaos_run(20261536, &kinds, &[(FaultKind::Membership, 3), (FaultKind::Kill, 1)], Duration::from_secs(10));
    let (out, _stdout, results) =
        run_chaos(&run, &["--docker", "--image", IMAGE, "--nodes", "3", "--faults", "membership,kill"]).await;
    assert_eq!(results["valid"], "true");
    let replaced = results["faults"]["membership"].as_u64().unwrap_or(0);
    assert!(replaced >= 3, "{replaced} membership faults: {}", results["faults"]);
    let history = std::fs::read_to_string(out.path().join("history.jsonl")).unwrap();
    let done = history.lines().filter(|l| l.contains("is a voter") && l.contains("removed and stopped")).count();
    assert!(done >= 3, "only {done} replacements completed");
    // Every node's log was kept, the removed ones' too, although their containers are gone.
    for id in 1..=6 {
        assert!(out.path().join(format!("logs/node{id}.log")).exists(), "no log of node {id}");
    }
}

/// The compose example of three regions (`deploy/regions/docker-compose.yml`) as an operator
/// starts it: a global tier of three containers, the one-shot that makes the regions' token,
/// and three one-node regions. Each region joins by itself and serves segment and snowflake IDs
/// of its own, none twice across regions; a second `up` keeps the token and changes nothing.
/// (Here, after the image is built, not beside a test that needs both lanes meanwhile.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_regions_compose_example_runs_three_regions_that_never_share_an_id() {
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
