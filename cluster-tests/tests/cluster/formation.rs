//! Formation: 3- and 5-node clusters elect a leader every node agrees on, name the same
//! members, serve unique IDs from every node (each inside an allocation the cluster committed),
//! see a tag created through any node at once (the harness's clients read each other's
//! creates, as one `leaf-client` over several nodes does), and give every node its own
//! snowflake worker ID.
use std::collections::BTreeMap;
use std::time::Duration;

use leaf_api::types::{MemberRole, Role, SnowflakeState};
use leaf_api::ErrorCode;
use leaf_client::StatusCode;
use leaf_cluster_tests::checker::check_segment_ids;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_form_serve_unique_ids_everywhere_and_guard_internal_endpoints() {
    // Snowflake off: its workers raise their high-water marks through Raft every half window,
    // which would write to the log during the unknown-tag flood below (CI saw 63 -> 66).
    let (_lane, cluster, leader) = cluster_beside(3, "[snowflake]\nenabled = false\n").await;

    // Status on every node names the same members, leader and this node.
    for id in cluster.ids() {
        let s = cluster.status(id).await.unwrap();
        assert_eq!(s.node_id, id);
        assert_eq!(s.leader_id, Some(leader));
        let members: Vec<(u64, MemberRole, String)> =
            s.members.iter().map(|m| (m.node_id, m.role, m.addr.clone())).collect();
        let expected: Vec<_> = (1..=3).map(|i| (i, MemberRole::Voter, cluster.addr(i))).collect();
        assert_eq!(members, expected);
        assert_eq!(s.state == Role::Leader, id == leader, "{s:?}");
        assert_eq!(s.replication.is_some(), id == leader);
        assert!(s.health.segment_ready);
    }

    // A tag created through node 1 (forwarded if node 1 is a follower) works on node 3 at once
    // for a client that knows it created it (a stranger's view: `local_misses.rs`).
    create_tag(&cluster.client(1), "orders", 50).await;
    let first = try_get_ids(&cluster.client(3), "orders", None).await.unwrap();
    assert_eq!(first.len(), 1);
    // The same when the node lags: frozen while the tag commits, it serves the tag as soon as
    // it has heard the commit after it wakes (until then it may answer 404 from its stale
    // state, and the client retries its own create).
    let follower = if leader == 1 { 2 } else { 1 };
    for round in 0..5 {
        let tag = format!("fresh-{round}");
        cluster.pause(follower);
        if round == 0 {
            // A wait the harness gives up on says why, node by node, and what the threads of
            // a node that did not answer were doing: this one's are stopped (`T`).
            let e = cluster.wait_leader_among(&[leader, follower], Duration::from_secs(1)).await.unwrap_err();
            let said = format!("{e:#}");
            let (_, node) = said.split_once(&format!("node {follower}: ")).unwrap_or_else(|| panic!("{said}"));
            assert!(node.contains("threads: ") && node.contains(" T "), "{said}");
            // Where gdb is installed, their stacks too: sled's flusher waits in its loop.
            if std::process::Command::new("gdb").arg("--version").output().is_ok_and(|o| o.status.success()) {
                let stacks = said.split_once(&format!("node {follower}'s threads (gdb):\n")).map(|(_, s)| s);
                assert!(
                    stacks.is_some_and(|s| s.contains("log flusher: ") && s.contains("sled::flusher::run")),
                    "{said}"
                );
            }
        }
        create_tag(&cluster.client(leader), &tag, 10).await;
        cluster.resume(follower);
        let c = cluster.client(follower);
        let answer = if round == 0 { c.tag(&tag).await.map(|_| ()) } else { c.segment_id(&tag).await.map(|_| ()) };
        answer.unwrap_or_else(|e| panic!("{tag} on the lagging node: {e}"));
    }
    create_tag(&cluster.client(3), "payments", 1000).await;
    try_get_ids(&cluster.client(2), "payments", Some(10)).await.unwrap();
    let (s, code, _) = api_error(cluster.client(2).create_tag(&tag_req("orders", 5)).await);
    assert_eq!((s, code), (StatusCode::CONFLICT, ErrorCode::TagExists));

    // Concurrent clients on every node: unique IDs, each inside a committed allocation.
    let mut ids = load(&cluster, &[1, 2, 3], "orders", 3, 3000).await;
    ids.extend(first);
    let allocs = all_allocations(&cluster, &[1, 2, 3], "orders").await;
    let by_node: BTreeMap<u64, usize> = {
        let mut m = BTreeMap::new();
        for a in &allocs {
            *m.entry(a.node_id).or_default() += 1;
        }
        m
    };
    assert_eq!(by_node.len(), 3, "every node allocated segments: {by_node:?}");
    assert!(by_node.values().all(|&n| n > 0), "every node allocated segments: {by_node:?}");
    let report = check_segment_ids(&ids, &allocs);
    assert!(report.is_valid(), "checker: {report:?}");

    // A flood of unknown tags on a follower answers 404 and writes nothing to the Raft log
    // (first let in-flight preload refills land).
    let mut before = cluster.status(leader).await.unwrap().last_log_index;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = cluster.status(leader).await.unwrap().last_log_index;
        if now == before {
            break;
        }
        before = now;
    }
    let term = cluster.status(follower).await.unwrap().term;
    let flood = cluster.client(follower);
    for i in 0..200 {
        let (s, code, _) = api_error(flood.segment_id(&format!("nope-{i}")).await);
        assert_eq!((s, code), (StatusCode::NOT_FOUND, ErrorCode::TagNotFound));
    }
    assert_eq!(cluster.status(leader).await.unwrap().last_log_index, before);
    let s = cluster.status(follower).await.unwrap();
    assert_eq!((s.term, s.leader_id), (term, Some(leader)), "the flood moved the term or the leader");

    // The same cluster serves the internal endpoints' checks.
    crate::internal_auth::refuses_unauthenticated_and_malformed_calls(&cluster, leader, follower).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_form_and_serve_unique_ids_from_every_node() {
    let (_lane, mut cluster, _) = cluster_beside(5, "").await;
    create_tag(&cluster.client(5), "five", 20).await;
    let ids = load(&cluster, &[1, 2, 3, 4, 5], "five", 2, 1500).await;
    let allocs = all_allocations(&cluster, &[1, 2, 3, 4, 5], "five").await;
    let report = check_segment_ids(&ids, &allocs);
    assert!(report.is_valid(), "checker: {report:?}");
    let s = cluster.status(1).await.unwrap();
    assert_eq!(s.members.iter().filter(|m| m.role == MemberRole::Voter).count(), 5);

    // Snowflake: five distinct worker IDs, registered through the log (every node sees the
    // same table), and IDs unique across all nodes.
    let mut workers = BTreeMap::new();
    for id in 1..=5 {
        workers.insert(id, wait_snowflake(&cluster, id, SnowflakeState::Serving).await.worker_id.unwrap());
    }
    let distinct: std::collections::BTreeSet<u16> = workers.values().copied().collect();
    assert_eq!(distinct.len(), 5, "{workers:?}");
    assert!(distinct.iter().all(|w| *w < 5), "the lowest free IDs are given: {workers:?}");
    let table: BTreeMap<u64, u16> =
        cluster.status(2).await.unwrap().workers.iter().map(|w| (w.node_id, w.worker_id)).collect();
    assert_eq!(table, workers);
    let mut all = snowflake_load(&cluster, &[1, 2, 3, 4, 5], 10, 500).await;
    // Stable across a crash: node 3 comes back with its worker ID and larger IDs.
    let before_crash = all.iter().copied().filter(|id| (id >> 12) & 0x3ff == workers[&3] as i64).max().unwrap();
    cluster.kill(3);
    cluster.spawn(3).unwrap();
    let h = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await;
    assert_eq!(h.worker_id, Some(workers[&3]), "worker ID changed across a restart");
    let after = snowflake_get(&cluster.client(3), 100).await.unwrap();
    assert!(after[0] > before_crash, "{} <= {before_crash}", after[0]);
    all.extend(after);
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate snowflake IDs across nodes");
}

/// The lines of node `id`'s log at ERROR level.
fn error_lines(cluster: &leaf_cluster_tests::cluster::Cluster, id: u64) -> Vec<String> {
    let log = std::fs::read_to_string(cluster.log_path(id)).unwrap_or_default();
    log.lines().filter(|l| l.split_whitespace().nth(1) == Some("ERROR")).map(str::to_owned).collect()
}

/// An ERROR line is something for an operator to act on: a one-node cluster's start and
/// restart, a three-node cluster's first formation, its work and a follower's restart log none.
/// The leader reports the follower it cannot reach at WARN, once, and its return.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_start_and_restart_log_no_error_line() {
    let (_lane, mut one, leader) = cluster_beside(1, "").await;
    create_tag(&one.client(leader), "solo", 10).await;
    assert!(one.stop(1), "node 1 did not stop cleanly");
    one.spawn(1).unwrap();
    one.wait_leader(FORM).await.unwrap();
    try_get_ids(&one.client(1), "solo", Some(20)).await.unwrap();
    let errors = error_lines(&one, 1);
    assert!(errors.is_empty(), "a one-node cluster logged ERROR lines:\n{}", errors.join("\n"));
    drop(one);

    let mut opts = leaf_cluster_tests::cluster::Options::new(bin());
    opts.extra_toml = String::new();
    let mut cluster = leaf_cluster_tests::cluster::Cluster::start(3, opts).unwrap();
    let leader = cluster.wait_leader(FORM).await.unwrap();
    create_tag(&cluster.client(leader), "trio", 10).await;
    let follower = if leader == 1 { 2 } else { 1 };
    try_get_ids(&cluster.client(follower), "trio", Some(50)).await.unwrap();
    assert!(cluster.stop(follower), "node {follower} did not stop cleanly");
    cluster.spawn(follower).unwrap();
    cluster.wait_leader(FORM).await.unwrap();
    try_get_ids(&cluster.client(follower), "trio", Some(50)).await.unwrap();
    for id in cluster.ids() {
        let errors = error_lines(&cluster, id);
        assert!(errors.is_empty(), "node {id} of three logged ERROR lines:\n{}", errors.join("\n"));
    }
    // The leader said, at WARN, that the follower was away, and that it came back (once its
    // replication to it, backing off, calls again).
    let said = |what: &str| {
        let log = std::fs::read_to_string(cluster.log_path(leader)).unwrap_or_default();
        log.lines().any(|l| l.contains(what) && l.contains(&format!("peer={follower} ")))
    };
    assert!(said(" WARN a Raft peer does not answer"), "no WARN for the stopped follower");
    until_holds("the leader says the follower answers again", FORM, || said("a Raft peer answers again")).await;
}
