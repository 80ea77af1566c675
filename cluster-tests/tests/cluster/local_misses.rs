//! Unknown tags answered locally (`raft.unknown_tags = "local"`, the default): a follower
//! caught up with a leader it heard from recently answers 404 for a tag that exists nowhere
//! from its own state, without a read-index round through the leader; a tag created through a
//! node is known on that node when the create is answered, and a client reads its own creates
//! through any node. Under `"leader"`, every miss is confirmed with the leader, so even a
//! stranger sees a create at once on a node that lagged while it committed.
use std::time::Duration;

use leaf_api::ErrorCode;
use leaf_client::Client;
use leaf_cluster_tests::cluster::{node_client, Cluster, TOKEN};

use crate::support::*;

/// A client of node `id` that did not create anything (it shares no memory of creates with
/// the cluster's other clients).
fn stranger(cluster: &Cluster, id: u64) -> Client {
    node_client(&cluster.url(id), Some(TOKEN), cluster.ca().as_deref(), Duration::from_secs(30))
}

/// `leaf_read_index_rounds_total` and `leaf_unknown_tags_answered_locally_total` of a node.
async fn miss_counters(c: &Client) -> (u64, u64) {
    let m = c.metrics().await.unwrap();
    let counter = |name: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix(' ')))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} in /metrics"))
    };
    (counter("leaf_read_index_rounds_total"), counter("leaf_unknown_tags_answered_locally_total"))
}

async fn not_found(c: &Client, tag: &str) {
    let e = c.segment_id(tag).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TagNotFound), "{tag}: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caught_up_follower_answers_unknown_tags_without_a_leader_round() {
    let (_lane, cluster, leader) = cluster_beside(3, "").await;
    let followers: Vec<u64> = (1..=3).filter(|&id| id != leader).collect();
    let f = followers[0];
    let c = stranger(&cluster, f);
    // Caught up once it has heard from the leader and probed its quorum contact.
    let answered_locally = || async {
        not_found(&c, "warm-up").await;
        miss_counters(&c).await.1 > 0
    };
    until("the follower answers a miss locally", Duration::from_secs(20), answered_locally).await;
    let (rounds0, local0) = miss_counters(&c).await;
    const N: u64 = 300;
    for i in 0..N {
        not_found(&c, &format!("nowhere-{i}")).await;
    }
    let (rounds1, local1) = miss_counters(&c).await;
    let (rounds, local) = (rounds1 - rounds0, local1 - local0);
    eprintln!("{N} unknown-tag requests on follower {f}: {local} answered locally, {rounds} read-index rounds");
    // One request at a time: without local answers each would cost its own round. A heartbeat
    // late on a loaded machine may send a few through the leader.
    assert!(local >= N * 9 / 10 && rounds <= N / 10, "{local} local answers, {rounds} rounds for {N} misses");

    // A tag created through a follower is known there as soon as the create is answered; a
    // node that did not answer it knows it once it has heard the commit.
    let other = followers[1];
    for i in 0..20 {
        let tag = format!("born-{i}");
        create_tag(&c, &tag, 10).await;
        assert_eq!(try_get_ids(&c, &tag, None).await.unwrap().len(), 1, "{tag} through the follower that created it");
    }
    let creator = stranger(&cluster, other);
    for i in 0..20 {
        let tag = format!("mine-{i}");
        create_tag(&creator, &tag, 10).await;
        assert_eq!(try_get_ids(&creator, &tag, Some(2)).await.unwrap().len(), 2, "{tag}");
        // Through the other follower, by a client that did not create it: found once that
        // node has heard the commit (at most two heartbeats).
        let stranger = stranger(&cluster, f);
        eventually(&format!("{tag} known on node {f}"), Duration::from_secs(5), || try_get_ids(&stranger, &tag, None))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_unknown_tags_leader_a_lagging_node_confirms_every_miss_with_the_leader() {
    let (_lane, cluster, leader) = cluster_beside(3, "[raft]\nunknown_tags = \"leader\"\n").await;
    let follower = if leader == 1 { 2 } else { 1 };
    let c = stranger(&cluster, follower);
    let (rounds0, local0) = miss_counters(&c).await;
    // Frozen while the tag commits, the follower still answers 200 right after it wakes, to a
    // client that did not create the tag (from its stale state it would answer 404).
    for round in 0..5 {
        let tag = format!("fresh-{round}");
        cluster.pause(follower);
        create_tag(&stranger(&cluster, leader), &tag, 10).await;
        cluster.resume(follower);
        let answer = if round == 0 { c.tag(&tag).await.map(|_| ()) } else { c.segment_id(&tag).await.map(|_| ()) };
        answer.unwrap_or_else(|e| panic!("{tag} on the lagging node: {e}"));
    }
    const N: u64 = 20;
    for i in 0..N {
        not_found(&c, &format!("nowhere-{i}")).await;
    }
    let (rounds1, local1) = miss_counters(&c).await;
    assert_eq!(local1, local0, "a miss answered locally under \"leader\"");
    // One miss at a time: each waits for a round that started after it came.
    assert!(rounds1 - rounds0 >= N, "{} read-index rounds for {N} misses", rounds1 - rounds0);
}
