//! Failover: the leader killed with `kill -9` under load; the survivors keep serving, a write
//! sent during the election commits once, and the restarted node catches up on its data.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaf_cluster_tests::checker::check_segment_ids;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_under_load_keeps_survivors_serving_and_the_restarted_node_catches_up() {
    let (_serial, mut cluster, leader) = cluster(3, "").await;
    create_tag(&cluster.client(1), "hot", 5000).await;
    for id in 1..=3 {
        get_ids(&cluster.client(id), "hot", None).await.unwrap();
    }

    // Load on every node; the requests to the survivors must all succeed.
    let killed = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let survivor_failures = Arc::new(AtomicU64::new(0));
    // IDs served by each node so far (index: node ID).
    let served: Arc<[AtomicU64; 4]> = Arc::default();
    let mut tasks = Vec::new();
    for id in 1..=3u64 {
        for _ in 0..2 {
            let c = cluster.client(id);
            let (killed, stop, failures, served) =
                (killed.clone(), stop.clone(), survivor_failures.clone(), served.clone());
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                let mut errors = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if id == leader && killed.load(Ordering::Relaxed) {
                        break;
                    }
                    match get_ids(&c, "hot", None).await {
                        Ok(ids) => {
                            served[id as usize].fetch_add(ids.len() as u64, Ordering::Relaxed);
                            got.extend(ids);
                        }
                        Err(e) if id != leader => {
                            failures.fetch_add(1, Ordering::Relaxed);
                            errors.push(e);
                        }
                        Err(_) => {}
                    }
                    tokio::time::sleep(Duration::from_micros(500)).await;
                }
                (id, got, errors)
            }));
        }
    }
    let count = |id: u64| served[id as usize].load(Ordering::Relaxed);
    wait_until("every node serving under load", FORM, || (1..=3).all(|id| count(id) >= 300)).await;
    cluster.kill(leader);
    killed.store(true, Ordering::Relaxed);
    let survivors: Vec<u64> = (1..=3).filter(|&id| id != leader).collect();
    // A write sent while there is no leader is retried by the node until the new leader commits
    // it; the client sees one success.
    create_tag(&cluster.client(survivors[0]), "created-during-election", 10).await;
    let new_leader = cluster.wait_leader_among(&survivors, FORM).await.unwrap();
    assert_ne!(new_leader, leader);
    // The survivors go on serving under the new leader.
    let elected: Vec<u64> = survivors.iter().map(|&id| count(id)).collect();
    wait_until("the survivors serving after the election", FORM, || {
        survivors.iter().zip(&elected).all(|(&id, &at)| count(id) >= at + 300)
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let mut before_restart = Vec::new();
    let mut per_node: BTreeMap<u64, usize> = BTreeMap::new();
    let mut errors = Vec::new();
    for t in tasks {
        let (id, got, errs) = t.await.unwrap();
        *per_node.entry(id).or_default() += got.len();
        before_restart.extend(got);
        errors.extend(errs);
    }
    assert_eq!(survivor_failures.load(Ordering::Relaxed), 0, "survivors failed requests: {errors:?}");
    assert!(survivors.iter().all(|id| per_node[id] > 100), "survivors kept serving: {per_node:?}");

    // Every ID, the killed node's included, lies inside a committed allocation: the survivors'
    // journals hold the allocations of every node.
    let survivor_allocs = all_allocations(&cluster, &survivors, "hot").await;
    let report = check_segment_ids(&before_restart, &survivor_allocs);
    assert!(report.is_valid(), "checker: {report:?}");

    // The killed node restarts on its data, catches up and serves IDs above all issued before.
    cluster.spawn(leader).unwrap();
    cluster.wait_leader(FORM).await.unwrap();
    let max_before = *before_restart.iter().max().unwrap();
    let after = get_ids(&cluster.client(leader), "hot", Some(100)).await.unwrap();
    assert!(after.iter().all(|&id| id > max_before), "restarted node served an old ID: {} <= {max_before}", after[0]);
    let mut all = before_restart.clone();
    all.extend(after.iter().copied());
    // The restarted node's journal survived kill -9: everything before the kill is still there.
    let report = check_segment_ids(&all, &all_allocations(&cluster, &[1, 2, 3], "hot").await);
    assert!(report.is_valid(), "after the restart: {report:?}");
    // (It replicates what the survivors committed meanwhile, so allow it a moment to apply.)
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let own = journal(&cluster.client(leader), "hot").await;
        assert_eq!(own.complete_from_index, 0);
        let report = check_segment_ids(&before_restart, &own.allocations);
        if report.is_valid() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "restarted node's journal: {report:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
