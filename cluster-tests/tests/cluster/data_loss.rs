//! A node that lost its data dir refuses to rejoin under its old node ID.
use std::time::Duration;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_data_refuses_to_rejoin_under_its_old_id() {
    let (_lane, mut cluster, leader) = cluster_beside(3, "").await;
    let victim = if leader == 2 { 3 } else { 2 };
    // Its snowflake worker registration is the evidence that it had state.
    eventually(&format!("node {victim} registers a worker"), Duration::from_secs(30), || async {
        let s = cluster.status(leader).await.unwrap();
        if s.workers.iter().any(|w| w.node_id == victim) {
            Ok(())
        } else {
            Err(s)
        }
    })
    .await;
    cluster.kill(victim);
    let data = cluster.dir().join(format!("node{victim}"));
    std::fs::remove_dir_all(&data).unwrap();
    cluster.spawn(victim).unwrap();
    // It exits at start with the reason, instead of rejoining as a voter that forgot its votes.
    let what = format!("node {victim} refuses to start on an empty data dir");
    until_holds(&what, Duration::from_secs(20), || !cluster.alive(victim)).await;
    let log = std::fs::read_to_string(cluster.log_path(victim)).unwrap();
    assert!(log.contains("the data dir is empty") && log.contains("registered snowflake worker ID"), "{log}");
    // The others go on; the documented way back is a new node ID.
    let c = cluster.client(leader);
    create_tag(&c, "after-loss", 10).await;
    let survivor = (1..=3).find(|id| *id != victim && *id != leader).unwrap();
    try_get_ids(&cluster.client(survivor), "after-loss", Some(5)).await.unwrap();
}
