//! Failover: the leader killed with `kill -9` under load; the survivors keep serving, a write
//! sent during the election commits once, and the restarted node catches up on its data; warm
//! segment and snowflake clients of the survivors (each node alone, and an `IdPool`) see no
//! error and no pause while the leader is killed.
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leaf_api::types::SnowflakeState;
use leaf_client::pool::{IdPool, PoolOptions, TagPool};
use leaf_client::Client;
use leaf_cluster_tests::checker::check_segment_ids;
use leaf_cluster_tests::cluster::TOKEN;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_under_load_keeps_survivors_serving_and_the_restarted_node_catches_up() {
    let (_lane, mut cluster, leader) = cluster(3, "").await;
    create_tag(&cluster.client(1), "hot", 5000).await;
    for id in 1..=3 {
        try_get_ids(&cluster.client(id), "hot", None).await.unwrap();
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
                    match try_get_ids(&c, "hot", None).await {
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
    until_holds("every node serving under load", FORM, || (1..=3).all(|id| count(id) >= 300)).await;
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
    until_holds("the survivors serving after the election", FORM, || {
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
    let after = try_get_ids(&cluster.client(leader), "hot", Some(100)).await.unwrap();
    assert!(after.iter().all(|&id| id > max_before), "restarted node served an old ID: {} <= {max_before}", after[0]);
    let mut all = before_restart.clone();
    all.extend(after.iter().copied());
    // The restarted node's journal survived kill -9: everything before the kill is still there.
    let report = check_segment_ids(&all, &all_allocations(&cluster, &[1, 2, 3], "hot").await);
    assert!(report.is_valid(), "after the restart: {report:?}");
    // (It replicates what the survivors committed meanwhile, so allow it a moment to apply.)
    eventually("the restarted node's journal covers every ID from before", Duration::from_secs(5), || async {
        let own = journal(&cluster.client(leader), "hot").await;
        assert_eq!(own.complete_from_index, 0);
        let report = check_segment_ids(&before_restart, &own.allocations);
        if report.is_valid() {
            Ok(())
        } else {
            Err(report)
        }
    })
    .await;
}

/// Where the warm-client test takes IDs from.
#[derive(Clone)]
enum Source {
    /// One attempt at one node (no retry, no failover): what that node answers.
    Node { client: Client, snowflake: bool },
    /// A warm `IdPool` over the survivors.
    Pool(TagPool),
}

impl Source {
    async fn take(&self) -> Result<i64, String> {
        match self {
            Source::Node { client, snowflake: false } => client.segment_id("warm").await.map_err(|e| e.to_string()),
            Source::Node { client, snowflake: true } => client.snowflake_id("warm").await.map_err(|e| e.to_string()),
            Source::Pool(pool) => pool.next_id_async().await.map_err(|e| e.to_string()),
        }
    }
}

/// What one source's loop saw: the end time of each success, the IDs and the errors.
#[derive(Default)]
struct Seen {
    ok_at: Vec<Instant>,
    ids: Vec<i64>,
    errors: Vec<String>,
}

/// The longest time between the start of `seen`'s loop and its first success, between two
/// successes, or from the last success to `end`.
fn longest_gap(seen: &Seen, start: Instant, end: Instant) -> Duration {
    let mut last = start;
    let mut longest = Duration::ZERO;
    for &t in seen.ok_at.iter().chain([&end]) {
        longest = longest.max(t.saturating_duration_since(last));
        last = t;
    }
    longest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_segment_and_snowflake_clients_on_the_survivors_see_no_error_when_the_leader_is_killed() {
    let (_lane, mut cluster, leader) = cluster(3, "").await;
    create_tag(&cluster.client(leader), "warm", 1000).await;
    let survivors: Vec<u64> = (1..=3).filter(|&id| id != leader).collect();
    // Warm: every node has its snowflake worker ID before the load starts.
    for id in 1..=3 {
        wait_snowflake(&cluster, id, SnowflakeState::Serving).await;
    }
    // Sources: each survivor alone (segment and snowflake, one attempt per request), and an
    // IdPool over the survivors with leaf-client's default retries.
    let mut sources = Vec::new();
    for &id in &survivors {
        let client = cluster.client_with(id, Some(TOKEN), Duration::from_secs(5));
        sources.push((format!("node {id} segment"), Source::Node { client: client.clone(), snowflake: false }));
        sources.push((format!("node {id} snowflake"), Source::Node { client, snowflake: true }));
    }
    let ca = cluster.ca().expect("the harness runs TLS clusters");
    let client = Client::builder(survivors.iter().map(|&id| cluster.url(id))).token(TOKEN).ca_file(ca).build().unwrap();
    let pool = IdPool::new(client, PoolOptions::default()).unwrap();
    sources.push(("pool segment".into(), Source::Pool(pool.segment("warm").unwrap())));
    sources.push(("pool snowflake".into(), Source::Pool(pool.snowflake("warm").unwrap())));

    // Steady requests from every source, every 2 ms, counting successes.
    let stop = Arc::new(AtomicBool::new(false));
    let oks: Arc<Vec<AtomicU64>> = Arc::new(sources.iter().map(|_| AtomicU64::new(0)).collect());
    let start = Instant::now();
    let tasks: Vec<_> = sources
        .iter()
        .enumerate()
        .map(|(i, (_, source))| {
            let (source, stop, oks) = (source.clone(), stop.clone(), oks.clone());
            tokio::spawn(async move {
                let mut seen = Seen::default();
                while !stop.load(Ordering::Relaxed) {
                    match source.take().await {
                        Ok(id) => {
                            seen.ok_at.push(Instant::now());
                            seen.ids.push(id);
                            oks[i].fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => seen.errors.push(e),
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                seen
            })
        })
        .collect();
    let counts = || oks.iter().map(|n| n.load(Ordering::Relaxed)).collect::<Vec<u64>>();
    let more_than = |at: Vec<u64>, more: u64| move || counts().iter().zip(&at).all(|(n, at)| *n >= at + more);
    until_holds("every source warm", FORM, more_than(vec![0; sources.len()], 200)).await;

    cluster.kill(leader);
    let new_leader = cluster.wait_leader_among(&survivors, FORM).await.unwrap();
    // The survivors serve on under the new leader: a segment committed in its term, then more
    // requests from every source.
    let after_election = cluster.client(new_leader).tag("warm").await.unwrap().max_id;
    let committed = || async { cluster.client(new_leader).tag("warm").await.unwrap().max_id != after_election };
    until("a segment of warm committed under the new leader", FORM, committed).await;
    until_holds("every source serving after the election", FORM, more_than(counts(), 300)).await;
    stop.store(true, Ordering::Relaxed);
    let end = Instant::now();

    let mut segment_ids = Vec::new();
    for ((name, source), task) in sources.iter().zip(tasks) {
        let seen = task.await.unwrap();
        assert!(seen.errors.is_empty(), "{name}: {} errors, first: {:?}", seen.errors.len(), seen.errors.first());
        let gap = longest_gap(&seen, start, end);
        assert!(gap < Duration::from_secs(2), "{name}: no ID for {gap:?}");
        eprintln!("{name}: {} IDs, longest gap {gap:?}", seen.ids.len());
        let distinct: HashSet<i64> = seen.ids.iter().copied().collect();
        assert_eq!(distinct.len(), seen.ids.len(), "{name}: an ID twice");
        if matches!(source, Source::Node { snowflake: false, .. }) || name == "pool segment" {
            segment_ids.extend(seen.ids);
        }
    }
    let distinct: HashSet<i64> = segment_ids.iter().copied().collect();
    assert_eq!(distinct.len(), segment_ids.len(), "a segment ID served twice");
}
