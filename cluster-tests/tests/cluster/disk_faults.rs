//! Disk faults at the fsync of the Raft store (`disk-fsync`, armed at run time through each
//! node's `LEAF_FAILPOINTS_FILE`): a slow fsync and an fsync that fails with EIO.
//!
//! - Slow (every node's fsync takes 2.5 s, above the 1 s `propose_timeout_ms`): writes are
//!   refused with a clear 503 (never a 500, never an acknowledgement before the fsync), IDs
//!   already buffered keep flowing, and once the disk is fast again the same processes commit
//!   again: no restart.
//! - EIO (on the leader): its Raft stops at the first failed fsync (after an fsync error the
//!   page cache cannot be trusted, so the node never retries it; PostgreSQL's lesson), it says
//!   so with 503s and in `/cluster/status`, counts it in `leaf_storage_errors_total`, the others
//!   elect a leader and go on; restarted on a healthy disk it catches up. Nothing acknowledged
//!   is lost and no ID repeats across the whole test.
//! - EIO under `raft.on_storage_failure = "exit"`: 503s until a `/metrics` scrape has counted
//!   the failure, then the process exits with status 75; restarted as a supervisor would, it
//!   catches up with the same checks.
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::time::Duration;

use leaf_api::types::ClusterStatus;
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError, StatusCode};
use leaf_cluster_tests::cluster::Cluster;

use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);

/// The node's answer to a write: 200, or the status and code of its refusal (a request that
/// got no answer at all fails the test: the node must answer).
async fn try_create(c: &Client, tag: &str) -> Result<(), (StatusCode, ErrorCode)> {
    match c.create_tag(&tag_req(tag, 1000)).await {
        Ok(_) => Ok(()),
        Err(ClientError::Api { status, code, .. }) => Err((status, code)),
        Err(e) => panic!("creating {tag}: no answer: {e}"),
    }
}

/// Segment IDs of `tag`, each new to `seen` (the IDs handed out per tag).
fn unique(seen: &mut BTreeSet<(&'static str, i64)>, tag: &'static str, ids: Vec<i64>, what: &str) {
    for id in ids {
        assert!(seen.insert((tag, id)), "{what}: ID {id} of {tag} was handed out before");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_failing_fsync_gets_503s_and_the_node_recovers() {
    let _lane = alone().await;
    let (arms, mut cluster) = armed_cluster(3, "[raft]\npropose_timeout_ms = 1000\n");
    let set = |id: u64, spec: &str| arms.set(id, spec);
    let (_, mut acked, mut seen) = with_disk_tag(&cluster).await;

    // Slow fsync everywhere: no write commits within the propose timeout.
    for id in cluster.ids() {
        arms.arm(&cluster, id, "disk-fsync=sleep(2500)").await;
    }
    // What each round acknowledged and how many writes it refused, kept across the rounds.
    let (acked_slow, refusals) = (RefCell::new(Vec::new()), Cell::new(0));
    let mut i = 0;
    eventually("slow fsync: 3 writes refused", WAIT, || {
        i += 1;
        let (round, cluster, acked_slow, refusals) = (i, &cluster, &acked_slow, &refusals);
        async move {
            for id in cluster.ids() {
                // A name per request: a refused write may still commit later.
                let tag = format!("slow-{round}-{id}");
                match try_create(&cluster.client(id), &tag).await {
                    Ok(()) => {
                        acked_slow.borrow_mut().push(tag);
                    }
                    Err((status, code)) => {
                        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "slow fsync: {code:?}");
                        refusals.set(refusals.get() + 1);
                    }
                }
            }
            if refusals.get() >= 3 {
                Ok(())
            } else {
                Err(format!("{} refused", refusals.get()))
            }
        }
    })
    .await;
    acked.extend(acked_slow.into_inner());
    let refusals = refusals.get();
    // Buffered IDs still flow while the disk is slow.
    for id in cluster.ids() {
        unique(&mut seen, "disk", try_get_ids(&cluster.client(id), "disk", Some(5)).await.unwrap(), "slow fsync");
    }
    // The disk is fast again: the same processes commit again.
    for id in cluster.ids() {
        set(id, "");
    }
    let mut n = 0;
    let tag = eventually("slow fsync: a write committed after the disk recovered", WAIT, || {
        let (cluster, tag) = (&cluster, format!("after-slow-{n}"));
        n += 1;
        async move {
            let leader = cluster.wait_leader(WAIT).await.unwrap();
            try_create(&cluster.client(leader), &tag).await.map(|()| tag)
        }
    })
    .await;
    acked.insert(tag);
    assert!(cluster.ids().into_iter().all(|id| cluster.alive(id)), "a node died of a slow disk");
    println!("slow fsync: {refusals} writes refused with 503, recovered without a restart");

    // EIO on the leader's fsync: its Raft stops, the others take over.
    let leader = cluster.wait_leader(WAIT).await.unwrap();
    let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    arms.arm(&cluster, leader, "disk-fsync=return").await;
    let c = cluster.client(leader);
    // The next write through it needs an fsync that fails.
    let (status, code) = try_create(&c, "eio-0").await.expect_err("a write was acknowledged over a failed fsync");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{code:?}");
    let status = raft_stopped(&cluster, leader).await;
    assert!(!status.health.ready);
    let (status, _) = try_create(&c, "eio-1").await.expect_err("a write was acknowledged after a failed fsync");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let metrics = c.metrics().await.unwrap();
    assert!(
        metrics.lines().any(|l| l.starts_with("leaf_storage_errors_total{store=\"raft\"}") && !l.ends_with(" 0")),
        "EIO: not counted in leaf_storage_errors_total:\n{}",
        metrics.lines().filter(|l| l.contains("storage")).collect::<Vec<_>>().join("\n")
    );
    // The others elect a leader and go on.
    let new_leader = cluster.wait_leader_among(&others, WAIT).await.unwrap();
    create_tag(&cluster.client(new_leader), "after-eio", 10).await;
    acked.insert("after-eio".to_string());
    for &id in &others {
        unique(&mut seen, "disk", try_get_ids(&cluster.client(id), "disk", Some(5)).await.unwrap(), "EIO, the others");
    }
    // Restarted on a healthy disk, the old leader catches up.
    set(leader, "");
    comes_back(&mut cluster, leader, &acked, &mut seen).await;
    println!("EIO: node {leader}'s Raft stopped with 503s, node {new_leader} took over, node {leader} came back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_on_storage_failure_exit_an_eio_ends_the_process_and_a_restart_recovers() {
    let _lane = alone().await;
    let (arms, mut cluster) = armed_cluster(3, "[raft]\non_storage_failure = \"exit\"\n");
    let (leader, mut acked, mut seen) = with_disk_tag(&cluster).await;
    let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    arms.arm(&cluster, leader, "disk-fsync=return").await;
    // The write that needs the failing fsync is refused: the node stays up, answering 503,
    // until a scrape has seen the failure.
    let c = cluster.client(leader);
    let (status, code) = try_create(&c, "eio-0").await.expect_err("a write was acknowledged over a failed fsync");
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{code:?}");
    raft_stopped(&cluster, leader).await;
    let metrics = c.metrics().await.expect("the node exited before a scrape saw its storage failure");
    assert!(
        metrics.lines().any(|l| l.starts_with("leaf_storage_errors_total{store=\"raft\"}") && !l.ends_with(" 0")),
        "EIO: not counted in leaf_storage_errors_total before the exit"
    );
    // Then it exits, well within the 30 s report window.
    let what = format!("EIO with on_storage_failure = exit: node {leader} exits");
    let status =
        eventually(&what, Duration::from_secs(15), || std::future::ready(cluster.exited(leader).ok_or("still runs")))
            .await;
    assert_eq!(status.code(), Some(i32::from(leaf_node::config::STORAGE_FAILURE_EXIT)), "node {leader}: {status}");
    let new_leader = cluster.wait_leader_among(&others, WAIT).await.unwrap();
    create_tag(&cluster.client(new_leader), "after-eio", 10).await;
    acked.insert("after-eio".to_string());
    for &id in &others {
        unique(&mut seen, "disk", try_get_ids(&cluster.client(id), "disk", Some(5)).await.unwrap(), "EIO, the others");
    }
    // What a supervisor does (`restart: unless-stopped`, `Restart=on-failure`), the disk healthy.
    arms.set(leader, "");
    comes_back(&mut cluster, leader, &acked, &mut seen).await;
    println!("EIO: node {leader} exited with {status}, node {new_leader} took over, node {leader} came back");
}

/// The leader once the cluster formed, with the tag `disk` created (the acknowledged tags)
/// and every node's buffers of it loaded (the IDs seen so far).
async fn with_disk_tag(cluster: &Cluster) -> (u64, BTreeSet<String>, BTreeSet<(&'static str, i64)>) {
    let leader = cluster.wait_leader(FORM).await.unwrap();
    create_tag(&cluster.client(leader), "disk", 100_000).await;
    let mut seen = BTreeSet::new();
    for id in cluster.ids() {
        unique(&mut seen, "disk", try_get_ids(&cluster.client(id), "disk", Some(10)).await.unwrap(), "before");
    }
    (leader, BTreeSet::from(["disk".to_string()]), seen)
}

/// Waits until node `id` reports its Raft stopped (its status, over HTTP: the node must be up).
async fn raft_stopped(cluster: &Cluster, id: u64) -> ClusterStatus {
    eventually(&format!("EIO: node {id} reports raft stopped"), WAIT, || async {
        let s = cluster.status(id).await.expect("the node answers its status after a storage failure");
        if s.health.reason.as_deref().is_some_and(|r| r.contains("raft stopped")) {
            Ok(s)
        } else {
            Err(s)
        }
    })
    .await
}

/// Restarts node `id` (killing it first if it still runs) and checks that it catches up with
/// the leader's commit index, that every node holds every acknowledged tag, and that no ID of
/// `disk` or `after-eio` repeats.
async fn comes_back(
    cluster: &mut Cluster,
    id: u64,
    acked: &BTreeSet<String>,
    seen: &mut BTreeSet<(&'static str, i64)>,
) {
    cluster.kill(id);
    cluster.spawn(id).unwrap();
    let ids = cluster.ids();
    let l = cluster.wait_leader_among(&ids, WAIT).await.unwrap();
    let target = cluster.status(l).await.unwrap().committed_index;
    eventually(&format!("node {id} catches up after its restart"), WAIT, || async {
        let s = cluster.status(id).await.ok();
        if s.as_ref().is_some_and(|s| s.health.ready && s.last_applied_index >= target) {
            Ok(())
        } else {
            Err(s)
        }
    })
    .await;
    for n in cluster.ids() {
        let have: BTreeSet<String> = cluster.client(n).tags().await.unwrap().into_iter().map(|t| t.tag).collect();
        let lost: Vec<&String> = acked.difference(&have).collect();
        assert!(lost.is_empty(), "node {n} lost acknowledged tags {lost:?}");
        unique(seen, "disk", try_get_ids(&cluster.client(n), "disk", Some(5)).await.unwrap(), "after the restart");
        unique(
            seen,
            "after-eio",
            try_get_ids(&cluster.client(n), "after-eio", Some(5)).await.unwrap(),
            "after the restart",
        );
    }
}
