//! leaf-client's `IdPool` on a 3-node TLS cluster: application threads take segment and
//! snowflake IDs with the synchronous `next_id()` while the leader is killed with `kill -9`,
//! then the node the pool's client talks to; the pool's node list starts with a dead address.
//! The application sees no error, every segment ID is unique and inside an allocation the
//! cluster committed (the checker), and every snowflake ID is unique.
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use leaf_client::pool::{IdPool, PoolOptions, TagPool};
use leaf_client::Client;
use leaf_cluster_tests::checker::check_segment_ids;
use leaf_cluster_tests::cluster::Cluster;

use crate::support::*;

/// What one application thread took, and the errors it saw.
struct Taken {
    ids: Vec<i64>,
    errors: Vec<String>,
}

/// An application thread: `next_id()` in a loop (paced to about 200,000 IDs/s, so the run
/// spans many leases), counting into `progress`, until `stop`.
fn app_thread(pool: TagPool, stop: Arc<AtomicBool>, progress: Arc<AtomicU64>) -> JoinHandle<Taken> {
    std::thread::spawn(move || {
        let mut taken = Taken { ids: Vec::new(), errors: Vec::new() };
        while !stop.load(Ordering::Relaxed) {
            for _ in 0..200 {
                match pool.next_id() {
                    Ok(id) => taken.ids.push(id),
                    Err(e) => taken.errors.push(e.to_string()),
                }
            }
            progress.fetch_add(200, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
        taken
    })
}

/// Waits until the application threads took `more` IDs beyond what they had.
async fn wait_progress(progress: &AtomicU64, more: u64, what: &str) {
    let from = progress.load(Ordering::Relaxed);
    let progressed = || progress.load(Ordering::Relaxed) >= from + more;
    until_holds(&format!("progress {what}"), Duration::from_secs(30), progressed).await;
}

/// `leaf_ids_served_total` of `tag` on node `id`.
async fn served(cluster: &Cluster, id: u64, tag: &str) -> u64 {
    let text = cluster.client(id).metrics().await.unwrap();
    let series = format!("leaf_ids_served_total{{mode=\"segment\",tag=\"{tag}\"}} ");
    text.lines().find_map(|l| l.strip_prefix(series.as_str())).map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_pool_rides_over_kill_9_of_the_leader_and_of_its_own_node_with_zero_errors() {
    let (_lane, mut cluster, leader) = cluster_beside(3, "").await;
    create_tag(&cluster.client(leader), "pooled", 1000).await;
    // The pool talks to a follower first, after a dead address at the head of its list.
    let talk = (1..=3).find(|&id| id != leader).unwrap();
    let other = (1..=3).find(|&id| id != leader && id != talk).unwrap();
    let dead = cluster
        .url(talk)
        .replace(&cluster.port(talk).to_string(), &leaf_cluster_tests::cluster::free_port().to_string());
    let urls = [dead, cluster.url(talk), cluster.url(leader), cluster.url(other)];
    let ca = cluster.ca().expect("the harness runs TLS clusters");
    let client = Client::builder(&urls)
        .ca_file(ca)
        .timeout(Duration::from_secs(2))
        .deadline(Duration::from_secs(8))
        .retries(10)
        .backoff(Duration::from_millis(20), Duration::from_millis(300))
        .build()
        .unwrap();
    // Short leases, so the kills land while leases are being fetched.
    let options = PoolOptions {
        lease_period: Duration::from_millis(300),
        initial_lease: 500,
        max_lease: 50_000,
        max_wait: Duration::from_secs(10),
        ..PoolOptions::default()
    };
    let pool = IdPool::new(client, options).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));
    let segment_threads: Vec<_> =
        (0..2).map(|_| app_thread(pool.segment("pooled").unwrap(), stop.clone(), progress.clone())).collect();
    let flakes = app_thread(pool.snowflake("pooled-key").unwrap(), stop.clone(), Arc::new(AtomicU64::new(0)));
    wait_progress(&progress, 50_000, "before the kills").await;

    // 1. kill -9 the leader: the follower the pool talks to forwards to the next leader.
    cluster.kill(leader);
    let survivors = [talk, other];
    let second = cluster.wait_leader_among(&survivors, FORM).await.unwrap();
    wait_progress(&progress, 100_000, "after the leader's kill").await;
    cluster.spawn(leader).unwrap();
    cluster.wait_leader(FORM).await.unwrap();
    wait_progress(&progress, 50_000, "after the old leader's restart").await;

    // 2. kill -9 the node the pool talks to: its client fails over to the others.
    assert!(served(&cluster, talk, "pooled").await > 0, "the pool talked to node {talk}");
    let before = served(&cluster, leader, "pooled").await + served(&cluster, other, "pooled").await;
    cluster.kill(talk);
    cluster.wait_leader_among(&[leader, other], FORM).await.unwrap();
    wait_progress(&progress, 100_000, "after its node's kill").await;
    let after = served(&cluster, leader, "pooled").await + served(&cluster, other, "pooled").await;
    assert!(after > before, "the pool moved to the surviving nodes ({before} -> {after})");

    stop.store(true, Ordering::Relaxed);
    let mut ids = Vec::new();
    let mut errors = Vec::new();
    for t in segment_threads {
        let taken = t.join().unwrap();
        ids.extend(taken.ids);
        errors.extend(taken.errors);
    }
    let flake_ids = flakes.join().unwrap();
    errors.extend(flake_ids.errors);
    assert!(errors.is_empty(), "the application saw {} errors, first: {:?}", errors.len(), errors.first());
    let stats = pool.stats();
    eprintln!("second leader {second}; {} segment IDs, {} snowflake IDs; {stats:?}", ids.len(), flake_ids.ids.len());

    // Every segment ID once, inside an allocation the cluster committed.
    let allocs = all_allocations(&cluster, &[leader, other], "pooled").await;
    let report = check_segment_ids(&ids, &allocs);
    assert!(report.is_valid(), "checker: {report:?}");
    let distinct: HashSet<i64> = flake_ids.ids.iter().copied().collect();
    assert_eq!(distinct.len(), flake_ids.ids.len(), "duplicate snowflake IDs");
    assert!(!flake_ids.ids.is_empty());
    let pooled = stats.tags.iter().find(|t| t.name == "pooled").unwrap();
    assert!(pooled.leases_ok >= 10, "{pooled:?}");
}
