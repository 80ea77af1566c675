//! `leaf_client::pool::IdPool` against one real node: segment IDs from several threads (unique,
//! each inside a committed allocation), async and non-blocking takes, snowflake IDs, a refused
//! lease for an unknown tag, and a node list whose first node is dead.
use std::collections::HashSet;
use std::time::Duration;

use leaf_client::pool::{IdKind, IdPool, PoolError, PoolOptions};
use leaf_client::Client;
use leaf_cluster_tests::checker::check_segment_ids;
use leaf_cluster_tests::cluster::{free_port, TOKEN};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_pool_on_one_node_hands_out_unique_committed_ids() {
    let (_lane, cluster, _leader) = cluster_beside(1, "").await;
    create_tag(&cluster.client(1), "pooled", 1000).await;
    // The first node in the list does not exist: the client fails over to the real one.
    let live = cluster.url(1);
    let scheme = live.split("://").next().unwrap_or("http");
    let dead = format!("{scheme}://127.0.0.1:{}", free_port());
    let builder = Client::builder([dead, live]).token(TOKEN).timeout(Duration::from_secs(2));
    let client = match cluster.ca() {
        Some(ca) => builder.ca_file(ca),
        None => builder,
    }
    .build()
    .unwrap();
    let options = PoolOptions { max_wait: Duration::from_secs(10), initial_lease: 100, ..PoolOptions::default() };
    let pool = IdPool::new(client, options).unwrap();
    let tag = pool.segment("pooled").unwrap();

    let threads: Vec<_> = (0..3)
        .map(|_| {
            let tag = tag.clone();
            tokio::task::spawn_blocking(move || (0..30_000).map(|_| tag.next_id().unwrap()).collect::<Vec<i64>>())
        })
        .collect();
    let mut ids = Vec::new();
    for t in threads {
        ids.extend(t.await.unwrap());
    }
    for _ in 0..1_000 {
        ids.push(tag.next_id_async().await.unwrap());
    }
    ids.extend((0..1_000).filter_map(|_| tag.try_next_id()));
    let allocs = all_allocations(&cluster, &[1], "pooled").await;
    let report = check_segment_ids(&ids, &allocs);
    assert!(report.is_valid(), "checker: {report:?}");
    let stats = tag.stats();
    assert_eq!(stats.ids_served, ids.len() as u64, "{stats:?}");
    assert_eq!((stats.exhausted, stats.rejected), (0, 0), "{stats:?}");
    assert!(stats.leases_ok >= 2 && stats.last_lease_size > 100, "the size adapted: {stats:?}");

    // Snowflake IDs through the pool: unique.
    let flakes = pool.snowflake("pooled-flakes").unwrap();
    let mut seen = HashSet::new();
    for _ in 0..5_000 {
        assert!(seen.insert(flakes.next_id_async().await.unwrap()));
    }
    assert_eq!(flakes.stats().kind, IdKind::Snowflake);

    // An unknown tag: refused at once, not after max_wait.
    let missing = pool.segment("no-such-pooled-tag").unwrap();
    match missing.next_id_async().await {
        Err(PoolError::Rejected { name, error, .. }) => {
            assert_eq!(name, "no-such-pooled-tag");
            assert!(error.contains("tag_not_found"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(pool.stats().tags.len(), 3);
}
