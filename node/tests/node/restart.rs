//! Restarts and snapshots: IDs after a graceful restart, `kill -9` and SIGTERM are above every
//! ID before; snapshots purge the log and a restart loads them; malformed snapshot chunks are
//! refused.
use std::time::Duration;

use crate::support::*;
use leaf_api::types::SnowflakeState;
use leaf_client::HealthMode;
use leaf_node::config::{BootstrapTag, Config};
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_after_a_graceful_restart_are_greater() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    create_tag(&c, "t", 1000).await;
    let mut before = get_ids(&c, "t", Some(10)).await;
    before.extend(get_ids(&c, "leaf-segment-test", None).await);
    node.shutdown().await;

    let (node, c) = start(config(&dir)).await;
    let after_t = get_ids(&c, "t", None).await[0];
    let after_test = get_ids(&c, "leaf-segment-test", None).await[0];
    assert!(after_t > before[..10].iter().copied().max().unwrap());
    assert!(after_test > before[10]);
    // Unused IDs of the discarded buffer are skipped: the next segment starts at the old max_id.
    assert_eq!(after_t, 1001);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_after_kill_9_or_sigterm_are_greater_than_every_id_before() {
    let dir = TempDir::new().unwrap();
    let mut max_seen = 0;
    let (mut max_snowflake, mut worker_seen) = (0i64, None);
    for round in 0..3 {
        let port = free_port();
        let mut child = spawn_leaf(&dir, port);
        let url = format!("http://127.0.0.1:{port}");
        assert!(leaf_node::cli::wait_healthy(&url, Duration::from_secs(15)).await, "round {round}: not healthy");
        let c = client(&url, None);
        if round == 0 {
            create_tag(&c, "k", 50).await;
        }
        // Snowflake: right after a crash the clock is inside the old time window; the node
        // issues above the durable high-water mark at once, ahead of the clock (Leaf #216), and
        // keeps its worker ID although it listens on another port now.
        let h = wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(15)).await;
        let worker = *worker_seen.get_or_insert(h.snowflake.worker_id.unwrap());
        assert_eq!(h.snowflake.worker_id, Some(worker), "round {round}: worker ID changed");
        let mut sf = snowflake_ids(&c, None).await;
        sf.extend(snowflake_ids(&c, Some(5000)).await);
        assert!(sf[0] > max_snowflake, "round {round}: snowflake ID {} is not above {max_snowflake}", sf[0]);
        assert!(sf.windows(2).all(|w| w[0] < w[1]));
        max_snowflake = *sf.last().unwrap();
        // Wait for the bootstrap tag too, then take IDs from both while refills happen.
        let mut ids = Vec::new();
        for i in 0..300 {
            ids.extend(get_ids(&c, "k", if i % 3 == 0 { Some(7) } else { None }).await);
        }
        let first = *ids.iter().min().unwrap();
        assert!(first > max_seen, "round {round}: ID {first} is not above {max_seen}, issued before the crash");
        max_seen = *ids.iter().max().unwrap();
        if round == 1 {
            // Graceful: SIGTERM finishes in-flight work and exits 0.
            // SAFETY: kill(2) on our own child's PID.
            assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
            let status = child.wait().unwrap();
            assert_eq!(status.code(), Some(0), "round {round}: SIGTERM exit {status:?}");
        } else {
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_purge_the_log_and_restart_from_them() {
    let dir = TempDir::new().unwrap();
    let mut cfg = config(&dir);
    cfg.raft.snapshot_every = 50;
    cfg.raft.keep_logs_after_snapshot = 10;
    cfg.segment.max_step = 1; // every refill is one Raft entry for one ID
    cfg.bootstrap_tags = vec![BootstrapTag { tag: "one".into(), step: 1, max_id: 1, description: String::new() }];
    let (node, c) = start(cfg.clone()).await;
    // A health checker polls while every request commits a Raft entry: readiness must not flap.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let checker = {
        let (c, stop) = (c.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut polls, mut not_ok) = (0, 0);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                polls += 1;
                // Segment readiness: snowflake may still be starting in the first milliseconds.
                let r = c.health(HealthMode::Segment).await.unwrap();
                if !r.ready {
                    if not_ok == 0 {
                        eprintln!("first not-ready /health: {:?}", r.health);
                    }
                    not_ok += 1;
                }
            }
            (polls, not_ok)
        })
    };
    let mut last = 0;
    for _ in 0..400 {
        let id = get_ids(&c, "one", None).await[0];
        assert!(id > last);
        last = id;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (polls, not_ok) = checker.await.unwrap();
    assert!(polls > 50, "the health checker barely ran ({polls} polls)");
    assert_eq!(not_ok, 0, "/health was not 200 in {not_ok} of {polls} polls during refills");
    // Snapshots and purges follow (the purge by the node's compaction task, once a second).
    crate::support::eventually("snapshotted and purged", Duration::from_secs(20), || async {
        let status = node.raft().status();
        let len = node.raft().log_len();
        if status.snapshot_index.unwrap_or(0) >= 300 && status.purged_index.is_some() && len < 150 {
            Ok(())
        } else {
            Err(format!("{status:?}, {len} entries"))
        }
    })
    .await;
    node.shutdown().await;

    let (node, c) = start(cfg).await;
    let id = get_ids(&c, "one", None).await[0];
    assert!(id > last, "{id} after restart is not above {last}");
    node.shutdown().await;
}

/// A peer with the cluster secret sends snapshot chunks that would make openraft reserve a
/// terabyte (offset 2^40), skip ahead, or pass the size cap: each gets 400 and the node lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_chunks_out_of_order_or_too_large_get_400_and_the_node_lives() {
    use leaf_node::internals::{CallError, PeerClient, PATH_SNAPSHOT};
    use leaf_raft_store::TypeConfig;
    use openraft::raft::{InstallSnapshotRequest, InstallSnapshotResponse};
    const SECRET: &str = "snapshot-test-secret-0123456789";
    let dir = tempfile::tempdir().unwrap();
    let (node, c) = start(Config { cluster_secret: Some(SECRET.into()), ..config(&dir) }).await;
    let peer = PeerClient::new(Some(SECRET), None);
    let addr = node.http_addr().to_string();
    let chunk = |offset: u64, len: usize| InstallSnapshotRequest::<TypeConfig> {
        vote: openraft::Vote::new(0, 9),
        meta: openraft::SnapshotMeta { snapshot_id: "forged-1".into(), ..Default::default() },
        offset,
        data: vec![7; len],
        done: false,
    };
    type Answer =
        Result<InstallSnapshotResponse<u64>, openraft::error::RaftError<u64, openraft::error::InstallSnapshotError>>;
    let send = |req: InstallSnapshotRequest<TypeConfig>| {
        let (peer, addr) = (peer.clone(), addr.clone());
        async move { peer.call::<_, Answer>(1, &addr, PATH_SNAPSHOT, &req, Duration::from_secs(5)).await }
    };
    for (what, req) in [
        ("offset 2^40 first", chunk(1 << 40, 16)),
        ("a middle chunk without its start", chunk(4096, 16)),
        ("past the size cap", chunk(256 * 1024 * 1024 - 8, 16)),
    ] {
        match send(req).await {
            Err(CallError::Refused { status: 400, .. }) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    // Alive and serving.
    assert_eq!(health(&c).await.node_id, 1);
    assert_eq!(get_ids(&c, "leaf-segment-test", None).await.len(), 1);
    node.shutdown().await;
}
