//! Snowflake worker IDs across processes: a lease that ran out fences its old holder before
//! its worker ID is recycled, a skewed clock keeps snowflake off, and a node restarts from its
//! state file without a quorum.
use std::time::Duration;

use leaf_api::types::{AddLearnerRequest, SnowflakeState};
use leaf_api::ErrorCode;
use leaf_client::StatusCode;

use crate::support::*;

/// `snowflake.lease_ttl_ms` of the lease expiry test.
const LEASE_TTL_MS: i64 = 4000;

/// Waits until this machine's wall clock reads past `unix_ms`.
async fn wait_for_wall_clock(unix_ms: i64) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let left = u64::try_from(unix_ms - now).unwrap_or(0);
    assert!(left < 30_000, "waiting {left} ms for the wall clock: the lease is far longer than configured");
    tokio::time::sleep(Duration::from_millis(left)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expiry_fences_the_old_holder_before_its_worker_id_is_recycled() {
    // Short leases so the test sees expiry: 4 s lease, recyclable 8 s after the last renewal.
    // (With 2 s / 4 s, electing a new leader after freezing node 3 plus starting and adding node
    // 4 took longer than the grace once on a loaded machine, and node 4 then rightly got the
    // recycled ID.)
    let (_lane, mut cluster, _) =
        cluster(3, &format!("[snowflake]\nlease_ttl_ms = {LEASE_TTL_MS}\ntime_window_ms = 500\n")).await;
    for id in 1..=3 {
        wait_snowflake(&cluster, id, SnowflakeState::Serving).await;
    }
    let w3 = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await.worker_id.unwrap();
    let old_ids = snowflake_get(&cluster.client(3), 1000).await.unwrap();
    // Node 3 is cut off (frozen: it keeps its sockets, answers nothing, renews nothing) and
    // removed from the cluster by the others.
    cluster.pause(3);
    let leader = cluster.wait_leader_among(&[1, 2], FORM).await.unwrap();
    cluster.client(leader).remove(3).await.unwrap();
    // A new node joins before the lease and its grace ran out: it gets a fresh worker ID.
    cluster.start_extra(4).unwrap();
    cluster.client(1).add_learner(&AddLearnerRequest { node_id: 4, addr: cluster.addr(4) }).await.unwrap();
    let w4 = wait_snowflake(&cluster, 4, SnowflakeState::Serving).await.worker_id.unwrap();
    assert_ne!(w4, w3, "recycled before the old lease (plus grace) ran out");
    // Once it has, the next new node gets node 3's worker ID, starting above its high-water mark.
    // The state machine recycles it `lease_ttl_ms` after the lease ran out, in leader time
    // (this machine's clock): wait for that moment.
    let rec3 = cluster.status(1).await.unwrap().workers.into_iter().find(|w| w.worker_id == w3).unwrap();
    let hw3 = rec3.high_water_ms;
    wait_for_wall_clock(rec3.lease_expires_ms + LEASE_TTL_MS + 250).await;
    cluster.start_extra(5).unwrap();
    cluster.client(2).add_learner(&AddLearnerRequest { node_id: 5, addr: cluster.addr(5) }).await.unwrap();
    let h5 = wait_snowflake(&cluster, 5, SnowflakeState::Serving).await;
    assert_eq!(h5.worker_id, Some(w3), "node 3's worker ID is recycled");
    // Node 5 learns its worker ID from the leader's answer; its own state machine may apply
    // that registration a moment later, so wait for it before reading its record.
    let rec = eventually("node 5 applies its registration of node 3's worker ID", FORM, || async {
        let status = cluster.status(5).await.unwrap();
        let rec = status.workers.into_iter().find(|w| w.worker_id == w3).unwrap();
        if rec.node_id == 5 {
            Ok(rec)
        } else {
            Err(rec)
        }
    })
    .await;
    assert_eq!((rec.node_id, rec.previous_node_id), (5, Some(3)));
    let new_ids = snowflake_get(&cluster.client(5), 1000).await.unwrap();
    let epoch = 1_288_834_974_657;
    assert!(new_ids.iter().all(|id| (id >> 22) + epoch > hw3), "an ID at or below the old holder's mark");
    assert!(new_ids[0] > *old_ids.iter().max().unwrap());
    // The old holder wakes up: its lease is over, so it issues nothing under the recycled ID.
    cluster.resume(3);
    for _ in 0..20 {
        match snowflake_get(&cluster.client(3), 1).await {
            Ok(ids) => panic!("the fenced node issued {ids:?} under a recycled worker ID"),
            Err((s, body)) => assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let h3 = snowflake_health(&cluster, 3).await.unwrap();
    assert_ne!(h3.state, SnowflakeState::Serving, "{h3:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_clock_keeps_snowflake_off_and_a_node_restarts_from_its_state_file_without_a_quorum() {
    let (_lane, mut cluster, _) = cluster(3, "").await;
    for id in 1..=3 {
        wait_snowflake(&cluster, id, SnowflakeState::Serving).await;
    }
    let w3 = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await.worker_id;
    // Node 3 restarts with its clock 5 s ahead of its peers: snowflake stays off with the
    // reason; segment mode is unaffected.
    assert!(cluster.stop(3));
    cluster.set_env(3, &[("LEAF_FAULT__ENABLED", "true"), ("LEAF_FAULT__CLOCK_OFFSET_MS", "5000")]);
    cluster.spawn(3).unwrap();
    let h = wait_snowflake(&cluster, 3, SnowflakeState::Off).await;
    let offset = h.peer_clock_offset_ms.unwrap();
    assert!((-6000..=-4000).contains(&offset), "{h:?}");
    assert!(h.reason.as_deref().unwrap().contains("max_peer_offset_ms"), "{h:?}");
    let (s, code, _) = api_error(cluster.client(3).snowflake_id("x").await);
    assert_eq!((s, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::SnowflakeUnavailable));
    let status = cluster.status(3).await.unwrap();
    assert_eq!(status.health.snowflake.state, SnowflakeState::Off, "reported in /cluster/status too");
    create_tag(&cluster.client(3), "still-works", 10).await;
    try_get_ids(&cluster.client(3), "still-works", Some(5)).await.unwrap();

    // With the clock fixed it serves again under the same worker ID.
    assert!(cluster.stop(3));
    cluster.set_env(3, &[]);
    cluster.spawn(3).unwrap();
    assert_eq!(wait_snowflake(&cluster, 3, SnowflakeState::Serving).await.worker_id, w3);
    let before = snowflake_get(&cluster.client(3), 100).await.unwrap();

    // Leaf's weak dependency: with the quorum gone, node 3 restarts and serves snowflake IDs
    // under its worker ID from the state file (its lease has not run out).
    cluster.kill(1);
    cluster.kill(2);
    assert!(cluster.stop(3));
    cluster.spawn(3).unwrap();
    let h = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await;
    assert_eq!(h.worker_id, w3);
    let after = snowflake_get(&cluster.client(3), 100).await.unwrap();
    assert!(after[0] > *before.last().unwrap());
    // The Raft log really is out of reach: a write fails.
    let (s, code, message) = api_error(cluster.client(3).create_tag(&tag_req("t", 1)).await);
    assert_eq!((s, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable), "{message}");
    let h = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await;
    assert!(h.lease_remaining_ms.unwrap() > 0, "{h:?}");
}
