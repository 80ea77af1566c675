//! Forwarding: a write sent to a follower whose leader hangs (SIGSTOP) moves on to the next
//! leader when it may be retried, and answers an honest 503 when it may not.
use std::time::Duration;

use leaf_api::types::UpdateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::StatusCode;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_forwarded_to_a_hung_leader_moves_on_to_the_next_leader() {
    // The propose budget (10 s) is well above one forwarding attempt (2 s at the default timing):
    // without the per-attempt cap the whole budget would wait on the frozen leader.
    let (_lane, cluster, leader) = cluster(3, "[raft]\npropose_timeout_ms = 10000\n").await;
    create_tag(&cluster.client(leader), "hang", 5).await;
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    // The frozen leader's kernel still accepts connections, so the forward hangs rather than
    // failing fast. An update may be retried after an uncertain attempt: it succeeds through
    // the next leader.
    cluster.pause(leader);
    let update = UpdateTagRequest { step: None, description: Some("after the hang".into()), ..Default::default() };
    let c = cluster.client(follower);
    let outcome = tokio::time::timeout(Duration::from_secs(30), c.update_tag("hang", &update)).await;
    cluster.resume(leader);
    let info = outcome.expect("the client's own timeout").unwrap();
    assert_eq!(info.description, "after the hang");
    let new_leader = cluster.status(follower).await.unwrap().leader_id.unwrap();
    assert_ne!(new_leader, leader);

    // A create is not retried once it may have been delivered (a retry could turn its success
    // into `tag_exists`): the client gets an honest 503 saying the outcome is unknown.
    let other = (1..=3).find(|&id| id != new_leader && id != leader).unwrap();
    // A write forwarded through `other` first, so its connection to the leader is open: the
    // create below then surely reaches the frozen leader. (A connection still in its handshake
    // when the leader froze carried nothing: the create would rightly be retried, and succeed
    // through the next leader.)
    let warm = UpdateTagRequest { description: Some("warm".into()), ..Default::default() };
    cluster.client(other).update_tag("hang", &warm).await.unwrap();
    cluster.pause(new_leader);
    let answer = cluster.client(other).create_tag(&tag_req("during-hang", 5)).await;
    cluster.resume(new_leader);
    let (st, code, message) = api_error(answer);
    assert_eq!((st, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable), "{message}");
    assert!(message.contains("may or may not"), "{message}");
}
