//! A `monotonic` tag on a 3-node TLS cluster: clients on every node (followers forward to the
//! leader) take single IDs, batches and ranges while the leader is killed with `kill -9`,
//! restarted, and the new leader killed too. Every call that completed before another was
//! invoked got smaller IDs (the real-time order of `leaf_cluster_tests::order`), every ID is
//! unique, and the calls kept succeeding around the kills.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leaf_api::profile::Profile;
use leaf_api::types::CreateTagRequest;
use leaf_client::Client;
use leaf_cluster_tests::order::{check_real_time_order, TimedOp};

use crate::support::*;

/// One client's loop: calls of 1, 3 or ranges of 5 IDs, recorded with invoke and complete
/// times from `base`, until `stop`; successful calls also count into `ok`. Failed calls (during
/// elections) are counted, not recorded: an answer never seen constrains nothing.
async fn caller(c: Client, base: Instant, stop: Arc<AtomicBool>, ok: Arc<AtomicU64>, seed: u64) -> (Vec<TimedOp>, u64) {
    let (mut ops, mut failed, mut i) = (Vec::new(), 0, seed);
    let nanos = |t: Instant| t.duration_since(base).as_nanos() as u64;
    while !stop.load(Ordering::Relaxed) {
        i = i.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let invoked = Instant::now();
        let got = match (i >> 33) % 3 {
            0 => c.segment_id("mono").await.map(|id| vec![id]),
            1 => c.segment_ids("mono", 3).await,
            _ => c.segment_ranges("mono", 5).await.map(|r| r.ids().collect()),
        };
        match got {
            Ok(ids) => {
                ops.push(TimedOp { invoked: nanos(invoked), completed: nanos(Instant::now()), ids });
                ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                failed += 1;
                // A dead node refuses at once: do not spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    (ops, failed)
}

/// Successful calls the test waits for between its steps.
const CALLS: u64 = 500;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monotonic_ids_keep_real_time_order_across_nodes_and_leader_kills() {
    let seed: u64 = std::env::var("LEAF_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("seed {seed} (LEAF_TEST_SEED={seed} reproduces the call mix)");
    let (_lane, mut cluster, leader) = cluster_beside(3, "").await;
    let req = CreateTagRequest { profile: Some(Profile::Monotonic), ..tag_req("mono", 20) };
    cluster.client(leader).create_tag(&req).await.unwrap();
    let base = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    // `more` successful calls beyond those so far, around each change of leader.
    let calls = |more: u64, what: &'static str| {
        let (ok, from) = (ok.clone(), ok.load(Ordering::Relaxed));
        async move { until_holds(what, FORM, || ok.load(Ordering::Relaxed) >= from + more).await }
    };
    // Two callers per node, each pinned to its node (so followers' forwarding is exercised).
    let callers: Vec<_> = (0..6u64)
        .map(|k| {
            let c = cluster.client_with(1 + k % 3, None, Duration::from_secs(3));
            tokio::spawn(caller(c, base, stop.clone(), ok.clone(), seed ^ k))
        })
        .collect();
    calls(CALLS, "calls before the first kill").await;
    cluster.kill(leader);
    let others: Vec<u64> = (1..=3).filter(|&id| id != leader).collect();
    let second = cluster.wait_leader_among(&others, FORM).await.unwrap();
    let after_first = Instant::now();
    calls(CALLS, "calls after the first kill").await;
    cluster.spawn(leader).unwrap();
    cluster.wait_leader(FORM).await.unwrap();
    calls(CALLS, "calls after the restart").await;
    cluster.kill(second);
    let third = cluster.wait_leader_among(&(1..=3).filter(|&id| id != second).collect::<Vec<_>>(), FORM).await.unwrap();
    let after_second = Instant::now();
    calls(CALLS, "calls after the second kill").await;
    stop.store(true, Ordering::Relaxed);
    let (mut ops, mut failed) = (Vec::new(), 0);
    for c in callers {
        let (o, f) = c.await.unwrap();
        ops.extend(o);
        failed += f;
    }
    let ids: usize = ops.iter().map(|o| o.ids.len()).sum();
    eprintln!("leaders {leader} -> {second} -> {third}: {} calls ({ids} IDs) ok, {failed} failed", ops.len());
    let nanos = |t: Instant| t.duration_since(base).as_nanos() as u64;
    for (what, t) in [("the first kill", after_first), ("the second kill", after_second)] {
        assert!(ops.iter().any(|o| o.invoked > nanos(t)), "no call succeeded after {what}");
    }
    assert!(ops.len() >= 200, "too few calls to mean anything: {}", ops.len());
    check_real_time_order(&ops).unwrap_or_else(|v| panic!("monotonic order violated (seed {seed}): {v:?}"));
}
