//! Elections only when they help (`raft/election.rs`, `raft/transfer.rs`):
//! - a follower back from an absence (cut off by a partition, or frozen) causes no election: it
//!   asks for a pre-vote first, and its peers, who hear the leader, refuse it;
//! - a leader stopped by SIGTERM hands leadership to a follower before its process exits.
use std::collections::BTreeSet;
use std::time::Duration;

use leaf_cluster_tests::chaos::proxy::{self, Proxies};
use leaf_cluster_tests::cluster::{Cluster, Options};

use crate::support::*;

/// How long each absence lasts: five leases of the default timings (`raft.election_timeout_min_ms`
/// 400), so an absent follower would have campaigned several times without the pre-vote.
const AWAY: Duration = Duration::from_millis(2000);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_back_from_a_partition_or_a_freeze_causes_no_election() {
    // Both lanes: the verdict rests on a follower hearing its leader every lease.
    let _lane = alone().await;
    let proxies = Proxies::default();
    let specs = proxy::proxied_specs(&proxies, &[1, 2, 3]).await.unwrap();
    let cluster = Cluster::start_specs(specs, Options::new(bin())).unwrap();
    let leader = cluster.wait_leader(FORM).await.unwrap();
    let c = cluster.client(leader);
    create_tag(&c, "before", 10).await;
    let term = cluster.status(leader).await.unwrap().term;
    let followers: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    for round in 0..6 {
        let away = followers[round % followers.len()];
        let partition = round % 3 != 2;
        if partition {
            // Cut off from both peers, both ways; clients still reach it.
            let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != away).collect();
            proxies.set_blocked(proxy::split(&[vec![away], others]));
        } else {
            cluster.pause(away);
        }
        // The others carry on meanwhile (the fault itself lasts AWAY, not a wait for a state).
        let tag = format!("while-away-{round}");
        create_tag(&c, &tag, 10).await;
        tokio::time::sleep(AWAY).await;
        if partition {
            proxies.set_blocked(BTreeSet::new());
        } else {
            cluster.resume(away);
        }
        // Back: it catches up with the leader (it serves the tag created meanwhile).
        let back = cluster.client(away);
        eventually(&format!("node {away} serves {tag}"), FORM, || back.segment_id(&tag)).await;
    }
    assert!(proxies.cut_connections() > 0, "the partitions never bit");
    for id in cluster.ids() {
        let s = cluster.status(id).await.unwrap();
        assert_eq!((s.leader_id, s.term), (Some(leader), term), "node {id}: an election happened");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_by_sigterm_hands_leadership_over_before_it_exits() {
    let (_lane, mut cluster, mut leader) = cluster_beside(3, "").await;
    for round in 0..2 {
        let term = cluster.status(leader).await.unwrap().term;
        create_tag(&cluster.client(leader), &format!("before-stop-{round}"), 10).await;
        // The second round stops a leader elected moments ago: it waits out its own lease
        // first, or it would refuse its successor's vote.
        assert!(cluster.stop(leader), "node {leader} did not stop cleanly");
        let log = std::fs::read_to_string(cluster.log_path(leader)).unwrap();
        let line = log
            .lines()
            .rfind(|l| l.contains("handed leadership over before stopping"))
            .unwrap_or_else(|| panic!("node {leader} logged no hand-over:\n{}", cluster.log_tail(leader, 30)));
        let successor: u64 = line
            .split("successor=")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no successor in {line:?}"));
        // The process has exited, and its successor already leads, one term later: no election
        // timeout ran out (that takes at least the lease after the last heartbeat).
        let s = cluster.status(successor).await.unwrap();
        assert_eq!((s.leader_id, s.term), (Some(successor), term + 1), "node {successor} after the hand-over");
        // The third node follows it in that same term: nobody campaigned again.
        let third = cluster.ids().into_iter().find(|id| *id != leader && *id != successor).unwrap();
        let follows = || async { cluster.status(third).await.is_ok_and(|s| s.leader_id == Some(successor)) };
        until(&format!("node {third} follows node {successor}"), FORM, follows).await;
        let t = cluster.status(third).await.unwrap().term;
        assert_eq!(t, term + 1, "node {third}: another election");
        // Writes go on through the new leader, and the old one comes back as a follower.
        create_tag(&cluster.client(successor), &format!("after-stop-{round}"), 10).await;
        cluster.spawn(leader).unwrap();
        let back = cluster.client(leader);
        let tag = format!("after-stop-{round}");
        eventually(&format!("node {leader} serves {tag}"), FORM, || back.segment_id(&tag)).await;
        leader = successor;
    }
}
