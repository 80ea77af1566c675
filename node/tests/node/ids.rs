//! Segment IDs on one node: uniqueness under concurrent clients inside committed allocations,
//! exhaustion, big batches, and unknown tags that share read-index rounds.
use std::time::Duration;

use crate::support::*;
use leaf_api::ErrorCode;
use leaf_client::{ClientError, HealthMode, Method, StatusCode};
use leaf_cluster_tests::checker::check_segment_ids;
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_unique_ids_inside_committed_allocations() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    create_tag(&c, "orders", 100).await;
    const CLIENTS: usize = 8;
    const PER_CLIENT: usize = 50_000;
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move {
                let mut got = Vec::with_capacity(PER_CLIENT);
                let mut n = 0u32;
                while got.len() < PER_CLIENT {
                    // Mostly single IDs (Leaf's call), with batches of varying size mixed in.
                    n += 1;
                    let batch = if n.is_multiple_of(10) { Some(1 + (n * 7 + i as u32) % 50) } else { None };
                    let ids = get_ids(&c, "orders", batch).await;
                    assert!(ids.windows(2).all(|w| w[0] < w[1]), "a batch is not increasing");
                    got.extend(ids);
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert!(all.len() >= CLIENTS * PER_CLIENT);

    let journal = c.allocations(Some("orders"), None).await.unwrap();
    assert_eq!(journal.complete_from_index, 0);
    assert!(journal.allocations.iter().all(|a| a.node_id == 1 && a.tag == "orders"));
    let allocs = journal.allocations;
    assert!(allocs.len() > 10, "a step of 100 must refill often ({} allocations)", allocs.len());
    let report = check_segment_ids(&all, &allocs);
    assert!(report.is_valid(), "checker: {report:?}");
    // Filtered by node: nothing was committed to node 2. A malformed node is a 400.
    assert!(c.allocations(Some("orders"), Some(2)).await.unwrap().allocations.is_empty());
    let (s, _) = error_of(&c, Method::GET, "/admin/allocations?node=two", None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let e = c.allocations(Some("no spaces"), None).await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(StatusCode::BAD_REQUEST), Some(ErrorCode::InvalidTag)), "{e}");
    // The stored max_id covers everything handed out.
    let info = c.tag("orders").await.unwrap();
    assert!(all.iter().all(|&id| id < info.max_id));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_tag_gives_a_clear_error_and_never_wraps() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    create_bounded_tag(&c, "edge", 100, i64::MAX - 150).await;
    let ids = get_ids(&c, "edge", Some(100)).await;
    assert_eq!(ids.first(), Some(&(i64::MAX - 150)));
    // The next segment is cut short at i64::MAX (exclusive): the last 50 IDs are served...
    let last = get_ids(&c, "edge", Some(50)).await;
    assert_eq!(last, ((i64::MAX - 50)..i64::MAX).collect::<Vec<_>>());
    // ...and then the tag is exhausted, never wrapped.
    match c.segment_ids("edge", 100).await {
        Err(ClientError::Api { status, code, message }) => {
            assert_eq!((status, code), (StatusCode::CONFLICT, ErrorCode::TagExhausted), "{message}");
            assert!(message.contains("exhausted"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let info = c.tag("edge").await.unwrap();
    // The failed allocations changed nothing: max_id is where the last committed segment ended.
    assert_eq!(info.max_id, i64::MAX);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_batches_monitor_and_health() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    create_tag(&c, "b", 10).await;
    let ids = get_ids(&c, "b", Some(100_000)).await;
    assert_eq!(ids.len(), 100_000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    let single = get_ids(&c, "b", None).await[0];
    assert!(single > ids[99_999]);

    let r = c.health(HealthMode::Segment).await.unwrap();
    let h = r.health;
    assert_eq!((r.ready, h.segment_ready, h.leader_id), (true, true, Some(1)), "{h:?}");
    let cache = c.cache().await.unwrap();
    let e = cache.iter().find(|e| e.tag == "b").expect("b is loaded");
    assert!(e.initialised);
    let cur = e.current.as_ref().unwrap();
    assert!(cur.start <= single && single < cur.position && cur.position <= cur.end);
    let m = c.metrics().await.unwrap();
    assert!(m.contains("leaf_ids_served_total{mode=\"segment\",tag=\"b\"} 100001"), "{m}");
    assert!(m.contains("leaf_raft_is_leader 1"));
    assert!(m.contains("leaf_errors_total{code=\"tag_not_found\"}"));
    node.shutdown().await;
}

/// A flood of random unknown tags costs far fewer read-index rounds than requests
/// (`leaf_read_index_rounds_total`: a lone leader with a recent quorum acknowledgement answers
/// them from its state, and rounds are shared otherwise), every one of them is a 404, and a
/// known tag keeps serving throughout. A tag created mid-flood is usable at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tag_flood_shares_read_index_rounds_and_does_not_stop_known_tags() {
    let dir = tempfile::tempdir().unwrap();
    let (node, c) = start(config(&dir)).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut flood = Vec::new();
    for w in 0..32u64 {
        let (c, stop) = (c.clone(), stop.clone());
        flood.push(tokio::spawn(async move {
            let (mut n, mut not_404) = (0u64, 0u64);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let e = c.segment_id(&format!("unknown-{w}-{n}")).await.unwrap_err();
                n += 1;
                not_404 += u64::from(e.code() != Some(ErrorCode::TagNotFound));
            }
            (n, not_404)
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut known = 0;
    for i in 0..200 {
        assert_eq!(get_ids(&c, "leaf-segment-test", None).await.len(), 1);
        known += 1;
        if i == 100 {
            create_tag(&c, "born-mid-flood", 10).await;
            assert_eq!(get_ids(&c, "born-mid-flood", Some(2)).await.len(), 2);
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut requests, mut not_404) = (0, 0);
    for f in flood {
        let (n, bad) = f.await.unwrap();
        requests += n;
        not_404 += bad;
    }
    let m = c.metrics().await.unwrap();
    let rounds: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("leaf_read_index_rounds_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("leaf_read_index_rounds_total in /metrics");
    eprintln!("{requests} unknown-tag requests took {rounds} read-index rounds; {known} known-tag requests served");
    assert_eq!(not_404, 0, "unknown tags must be 404");
    assert!(requests > 500, "the flood barely ran: {requests}");
    assert!(rounds * 4 < requests, "{rounds} rounds for {requests} requests: not shared");
    node.shutdown().await;
}
