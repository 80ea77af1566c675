//! Losing the quorum: a leader cut off from its followers says so in `/health` within two
//! election timeouts and then refuses writes at once, buffered IDs keep flowing while writes
//! fail with a clear 503, and a follower's return brings writes back.
use std::time::Duration;

use leaf_api::ErrorCode;
use leaf_client::{HealthMode, StatusCode};

use crate::support::*;

/// Both followers of a 3-node cluster die: the leader still calls itself leader (openraft 0.9
/// does not step down), but `/health` says it has no quorum contact, with a reason, within two
/// election timeouts; and it is ready again once a follower is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_its_quorum_says_so_within_two_election_timeouts() {
    let (_lane, mut cluster, leader) = cluster(3, "").await;
    let (ready, h) = health_of(&cluster, leader, HealthMode::Segment).await;
    assert!(ready, "{h:?}");
    assert!(h.segment_ready && h.quorum_ack_age_ms.is_some_and(|a| a < 2000), "{h:?}");
    // A follower's contact is probed from the leader.
    let follower = cluster.ids().into_iter().find(|id| *id != leader).unwrap();
    let (_, hf) = health_of(&cluster, follower, HealthMode::Segment).await;
    assert!(hf.segment_ready && hf.quorum_ack_age_ms.is_some_and(|a| a < 2000), "{hf:?}");
    let followers: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    for f in &followers {
        cluster.kill(*f);
    }
    let killed = std::time::Instant::now();
    // Default election timeouts: 0.4-0.8 s, and the leader calls its quorum contact lost past the
    // longest; the bound is generous for a busy machine.
    let h = loop {
        let (ready, h) = health_of(&cluster, leader, HealthMode::Segment).await;
        if !ready {
            break h;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(4),
            "still ready {:?} after losing the quorum: {h:?}",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("the leader reported the lost quorum {:?} after the kill: {:?}", killed.elapsed(), h.reason);
    assert!(!h.segment_ready && !h.ready, "{h:?}");
    assert_eq!(h.leader_id, Some(leader), "openraft keeps the leader: {h:?}");
    assert!(h.reason.as_deref().is_some_and(|r| r.contains("quorum")), "{h:?}");
    assert!(h.quorum_ack_age_ms.is_some_and(|a| a > 800), "{h:?}");
    // The default /health (both modes) agrees.
    assert!(!health_of(&cluster, leader, HealthMode::All).await.0);
    // A write to it is refused at once, retryable, and never logged: not held for the propose
    // timeout (5 s), which would answer "not committed within 5s" instead.
    let (st, code, message) = api_error(cluster.client(leader).create_tag(&tag_req("cut-off", 1)).await);
    assert_eq!((st, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable), "{message}");
    assert!(message.contains("cannot commit right now"), "refused at once, not timed out: {message}");
    // One follower back: a quorum again.
    cluster.spawn(followers[0]).unwrap();
    eventually("ready again with a quorum", FORM, || async {
        let answer = cluster.client(followers[0]).health(HealthMode::Segment).await;
        if answer.as_ref().is_ok_and(|r| r.ready && r.health.quorum_ack_age_ms.is_some_and(|a| a < 2000)) {
            Ok(())
        } else {
            Err(answer)
        }
    })
    .await;
    cluster.wait_leader_among(&[leader, followers[0]], FORM).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_quorum_buffered_ids_are_served_and_writes_fail_with_a_clear_503() {
    let (_lane, mut cluster, _) = cluster(3, "[raft]\npropose_timeout_ms = 1500\n").await;
    create_tag(&cluster.client(1), "q", 100_000).await;
    let before = try_get_ids(&cluster.client(1), "q", Some(10)).await.unwrap();
    cluster.kill(2);
    cluster.kill(3);

    // Node 1 keeps serving from its committed buffers...
    let during = try_get_ids(&cluster.client(1), "q", Some(1000)).await.unwrap();
    assert!(during[0] > *before.last().unwrap());
    // ...while a write fails with 503 `unavailable` after the bounded retry, not a hang.
    let started = std::time::Instant::now();
    let (st, code, message) = api_error(cluster.client(1).create_tag(&tag_req("no-quorum", 1)).await);
    assert_eq!((st, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable), "{message}");
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    // An unknown tag cannot be confirmed absent without the leader: 503, not a wrong 404.
    let (st, code, message) = api_error(cluster.client(1).segment_id("unknown").await);
    assert_eq!((st, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::NotReady), "{message}");

    // With a quorum back, writes work again and IDs keep increasing.
    cluster.spawn(2).unwrap();
    cluster.wait_leader_among(&[1, 2], FORM).await.unwrap();
    create_tag(&cluster.client(1), "quorum-back", 10).await;
    let after = try_get_ids(&cluster.client(2), "q", None).await.unwrap();
    assert!(after[0] > *during.last().unwrap());
}
