//! Integration tests of one `leaf` node over real HTTP: uniqueness under concurrency, restarts
//! (graceful and `kill -9`), every error status, admin authentication, exhaustion, snapshots
//! and the CLI.
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use leaf_api::types::{ClockFault, CreateTagRequest, Health, SnowflakeDecoded, SnowflakeState, UpdateTagRequest};
use leaf_api::{ErrorBody, ErrorCode};
use leaf_client::{Client, ClientError, HealthMode, Method, StatusCode};
use leaf_cluster_tests::checker::check_segment_ids;
use leaf_node::config::{BootstrapTag, Config};
use leaf_node::NodeHandle;
use serde_json::json;
use tempfile::TempDir;

#[path = "node/certs_cli.rs"]
mod certs_cli;
#[path = "node/edge.rs"]
mod edge;
#[path = "node/forecast.rs"]
mod forecast;
#[path = "node/grpc.rs"]
mod grpc;
#[path = "node/grpc_python.rs"]
mod grpc_python;
#[path = "node/leaf_import.rs"]
mod leaf_import;
#[path = "node/monitoring.rs"]
mod monitoring;
#[path = "node/profiles.rs"]
mod profiles;
#[path = "node/ranges.rs"]
mod ranges;
#[path = "node/snowflake_restart.rs"]
mod snowflake_restart;
#[path = "node/tls.rs"]
mod tls;
#[path = "node/tokens.rs"]
mod tokens;

const TOKEN: &str = "test-admin-token-0123456789";

fn config(dir: &TempDir) -> Config {
    Config { data_dir: dir.path().to_path_buf(), http_addr: "127.0.0.1:0".parse().unwrap(), ..Config::default() }
}

async fn start(cfg: Config) -> (NodeHandle, Client) {
    let token = cfg.admin_token().map(str::to_string);
    let node = leaf_node::start(cfg).await.expect("node starts");
    assert!(node.wait_ready(Duration::from_secs(10)).await, "node not ready");
    let client = client(&format!("http://{}", node.http_addr()), token);
    (node, client)
}

/// A client of one node: one attempt per call, so every answer is that node's.
fn client(url: &str, token: Option<String>) -> Client {
    let timeout = Duration::from_secs(30);
    Client::builder([url]).maybe_token(token).retries(0).timeout(timeout).deadline(timeout).build().unwrap()
}

async fn create_tag(c: &Client, tag: &str, step: i64, max_id: Option<i64>) {
    let req = CreateTagRequest { tag: tag.into(), step, max_id, description: None, ..Default::default() };
    c.create_tag(&req).await.unwrap_or_else(|e| panic!("create {tag}: {e}"));
}

async fn get_ids(c: &Client, tag: &str, count: Option<u32>) -> Vec<i64> {
    let ids = match count {
        Some(n) => c.segment_ids(tag, n).await,
        None => c.segment_id(tag).await.map(|id| vec![id]),
    };
    ids.unwrap_or_else(|e| panic!("{tag} ({count:?}): {e}"))
}

async fn snowflake_ids(c: &Client, count: Option<u32>) -> Vec<i64> {
    let ids = match count {
        Some(n) => c.snowflake_ids("audit-key", n).await,
        None => c.snowflake_id("audit-key").await.map(|id| vec![id]),
    };
    ids.unwrap_or_else(|e| panic!("snowflake ({count:?}): {e}"))
}

async fn health(c: &Client) -> Health {
    c.health(HealthMode::All).await.unwrap().health
}

/// Waits until snowflake mode reaches `state` (`serving`, `off`, ...); returns the health.
async fn wait_snowflake(c: &Client, state: SnowflakeState, timeout: Duration) -> Health {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let h = health(c).await;
        if h.snowflake.state == state {
            return h;
        }
        assert!(std::time::Instant::now() < deadline, "snowflake never reached {state}: {:?}", h.snowflake);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends a request as given (deliberately malformed ones included) and reads the error body.
async fn error_of(c: &Client, method: Method, path: &str, body: Option<serde_json::Value>) -> (StatusCode, ErrorBody) {
    let reply = c.raw(method, path, body.map(|v| bytes::Bytes::from(v.to_string()))).await.unwrap();
    let (s, b) = (reply.status, reply.body);
    let e: ErrorBody = serde_json::from_slice(&b).unwrap_or_else(|_| panic!("{path}: not an error body: {b:?}"));
    (s, e)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_unique_ids_inside_committed_allocations() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    create_tag(&c, "orders", 100, None).await;
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
async fn ids_after_a_graceful_restart_are_greater() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    create_tag(&c, "t", 1000, None).await;
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

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn_leaf(dir: &TempDir, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_leaf"))
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .args(["--http-addr", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn leaf")
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
            create_tag(&c, "k", 50, None).await;
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
async fn error_statuses_and_codes() {
    let dir = TempDir::new().unwrap();
    let cfg =
        Config { http: leaf_node::config::HttpConfig { max_body_bytes: 2048, ..Default::default() }, ..config(&dir) };
    let (node, c) = start(cfg).await;
    let cases: Vec<(Method, String, Option<serde_json::Value>, StatusCode, ErrorCode)> = vec![
        (Method::GET, "/api/segment/get/nope".into(), None, StatusCode::NOT_FOUND, ErrorCode::TagNotFound),
        (Method::GET, "/api/segment/get/bad%20tag".into(), None, StatusCode::BAD_REQUEST, ErrorCode::InvalidTag),
        (Method::GET, "/api/segment/get/".into(), None, StatusCode::BAD_REQUEST, ErrorCode::InvalidTag),
        (Method::GET, "/api/segment/get/a/b".into(), None, StatusCode::BAD_REQUEST, ErrorCode::InvalidTag),
        (
            Method::GET,
            format!("/api/segment/get/{}", "x".repeat(129)),
            None,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidTag,
        ),
        (
            Method::GET,
            "/api/segment/get/leaf-segment-test?count=0".into(),
            None,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidCount,
        ),
        (
            Method::GET,
            "/api/segment/get/leaf-segment-test?count=100001".into(),
            None,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidCount,
        ),
        (
            Method::GET,
            "/api/segment/get/leaf-segment-test?count=ten".into(),
            None,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidCount,
        ),
        (
            Method::POST,
            "/api/segment/get/leaf-segment-test".into(),
            None,
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::MethodNotAllowed,
        ),
        (Method::DELETE, "/admin/tags".into(), None, StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed),
        (Method::POST, "/health".into(), None, StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed),
        (Method::GET, "/nothing/here".into(), None, StatusCode::NOT_FOUND, ErrorCode::NotFound),
        (Method::GET, "/admin/nothing".into(), None, StatusCode::NOT_FOUND, ErrorCode::NotFound),
        (Method::GET, "/admin/tags/nope".into(), None, StatusCode::NOT_FOUND, ErrorCode::TagNotFound),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "leaf-segment-test", "step": 5})),
            StatusCode::CONFLICT,
            ErrorCode::TagExists,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "bad tag", "step": 5})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidTag,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s0", "step": 0})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s1", "step": 5, "max_id": -1})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s2", "step": 5, "bogus": 1})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s3"})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s4", "step": 5, "description": "d".repeat(1500)})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s5", "step": 5, "description": "d".repeat(4000)})),
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
        ),
        (
            Method::PATCH,
            "/admin/tags/leaf-segment-test".into(),
            Some(json!({})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::PATCH,
            "/admin/tags/leaf-segment-test".into(),
            Some(json!({"step": -3})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::PATCH,
            "/admin/tags/nope".into(),
            Some(json!({"step": 3})),
            StatusCode::NOT_FOUND,
            ErrorCode::TagNotFound,
        ),
    ];
    for (method, path, body, status, code) in cases {
        let (s, e) = error_of(&c, method.clone(), &path, body).await;
        assert_eq!((s, e.code), (status, code), "{method} {path}: {}", e.message);
        assert_eq!(e.leaf_code, code.leaf_code());
        assert!(!e.message.is_empty());
    }
    // Malformed JSON (not representable as a serde_json::Value) through a raw request.
    let (s, e) = raw_post(node.http_addr(), "/admin/tags", "{not json").await;
    assert_eq!((s, e.code), (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest));
    // 405 names the allowed methods.
    let (s, _) = error_of(&c, Method::PUT, "/admin/tags", None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    // Nothing above changed the stored tags.
    let tags = c.db().await.unwrap();
    assert_eq!(tags.iter().map(|t| t.tag.as_str()).collect::<Vec<_>>(), ["leaf-segment-test"]);
    node.shutdown().await;
}

async fn raw_post(addr: SocketAddr, path: &str, body: &'static str) -> (StatusCode, ErrorBody) {
    use http_body_util::{BodyExt, Full};
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::post(path).header("host", "x").body(Full::new(bytes::Bytes::from(body))).unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status();
    let b = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&b).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_requires_the_token_when_configured() {
    let dir = TempDir::new().unwrap();
    let cfg = Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, good) = start(cfg).await;
    let base = format!("http://{}", node.http_addr());
    let (anonymous, wrong) = (client(&base, None), client(&base, Some("wrong-token-0123456789".into())));
    for c in [&anonymous, &wrong] {
        let req = CreateTagRequest { tag: "a".into(), step: 5, max_id: None, description: None, ..Default::default() };
        let e = c.create_tag(&req).await.unwrap_err();
        assert_eq!((e.status(), e.code()), (Some(StatusCode::UNAUTHORIZED), Some(ErrorCode::Unauthorized)));
        let e = c.tags().await.unwrap_err();
        assert_eq!(e.status(), Some(StatusCode::UNAUTHORIZED));
    }
    // The public API needs no token; a token that is given is checked, there too.
    assert_eq!(get_ids(&anonymous, "leaf-segment-test", None).await.len(), 1);
    let e = wrong.segment_id("leaf-segment-test").await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(StatusCode::UNAUTHORIZED), Some(ErrorCode::Unauthorized)));
    assert_eq!(get_ids(&good, "leaf-segment-test", None).await.len(), 1, "the admin token gets IDs");
    create_tag(&good, "a", 5, None).await;
    let info = good.update_tag("a", &UpdateTagRequest { step: Some(9), description: Some("x".into()) }).await.unwrap();
    assert_eq!((info.step, info.description.as_str()), (9, "x"));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_tag_gives_a_clear_error_and_never_wraps() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    create_tag(&c, "edge", 100, Some(i64::MAX - 150)).await;
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
    create_tag(&c, "b", 10, None).await;
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
    let status = node.raft().status();
    assert!(status.snapshot_index.unwrap_or(0) >= 300, "no snapshot: {status:?}");
    assert!(status.purged_index.is_some(), "log not purged: {status:?}");
    assert!(node.raft().log_len() < 150, "log holds {} entries", node.raft().log_len());
    node.shutdown().await;

    let (node, c) = start(cfg).await;
    let id = get_ids(&c, "one", None).await[0];
    assert!(id > last, "{id} after restart is not above {last}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_commands_work_against_a_node() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(Config { admin_token: Some(TOKEN.into()), ..config(&dir) }).await;
    // `leaf health` checks both modes.
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    let url = format!("http://{}", node.http_addr());
    let leaf_url = url.clone();
    let leaf = move |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_leaf"))
            .args(args)
            .args(["--url", &leaf_url])
            .env("LEAF_ADMIN_TOKEN", TOKEN)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, out) = tokio::task::spawn_blocking(move || {
        let log = [
            leaf(&["health"]),
            leaf(&["tag", "create", "cli", "--step", "10", "--description", "from the CLI"]),
            leaf(&["tag", "create", "cli", "--step", "10"]),
            leaf(&["tag", "update", "cli", "--step", "20"]),
            leaf(&["get", "segment", "cli", "--count", "3"]),
            leaf(&["tag", "show", "cli"]),
            leaf(&["get", "segment", "missing"]),
            leaf(&["get", "segment", "cli", "--count", "5", "--ranges"]),
        ];
        (log.iter().map(|l| l.0).collect::<Vec<_>>(), log.into_iter().map(|l| l.1).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    assert_eq!(code, [Some(0), Some(0), Some(2), Some(0), Some(0), Some(0), Some(2), Some(0)], "{out:?}");
    assert!(out[0].contains("\"ready\":true"));
    assert_eq!(out[4].trim(), "1\n2\n3");
    assert!(out[5].contains("\"step\":20"));
    // The first segment was 1..11 (step 10): 4..9 are what is left of it.
    assert_eq!(out[7].trim(), r#"{"ranges":[{"start":4,"end":9}]}"#);
    node.shutdown().await;
    // An unreachable node: health exits 1.
    let out = Command::new(env!("CARGO_BIN_EXE_leaf")).args(["health", "--url", &url]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

fn fault_config(dir: &TempDir) -> Config {
    let mut cfg = config(dir);
    cfg.fault.enabled = true;
    cfg
}

async fn set_clock_offset(c: &Client, offset_ms: i64) {
    let now = c.set_clock_fault(&ClockFault { offset_ms }).await.unwrap();
    assert_eq!(now.offset_ms, offset_ms);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snowflake_ids_are_unique_decodable_and_leaf_compatible() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let h = wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    let worker = h.snowflake.worker_id.unwrap();
    assert!(h.snowflake.high_water_ms.unwrap() > chrono_now_ms(), "the window runs ahead of the clock");
    // Leaf's wire form: 200, text/plain, the decimal ID and nothing else.
    let r = c.raw(Method::GET, "/api/snowflake/get/any.key-1", None).await.unwrap();
    assert_eq!(r.status, StatusCode::OK);
    let one: i64 = std::str::from_utf8(&r.body).unwrap().parse().unwrap();
    assert!(one > 0);
    // A batch larger than one millisecond's 4,096 sequence numbers moves on to later
    // milliseconds; every ID is unique and increasing.
    let ids = snowflake_ids(&c, Some(100_000)).await;
    assert_eq!(ids.len(), 100_000);
    assert!(ids[0] > one && ids.windows(2).all(|w| w[0] < w[1]), "not strictly increasing");
    let mut per_ms = std::collections::BTreeMap::<i64, usize>::new();
    for id in &ids {
        *per_ms.entry(id >> 22).or_default() += 1;
        assert_eq!((id >> 12) & 0x3ff, worker as i64);
    }
    assert!(per_ms.len() >= 25 && per_ms.values().all(|n| *n <= 4096), "{} ms", per_ms.len());
    // Decode round-trips, at our path and at Leaf's.
    for id in [one, ids[0], ids[99_999]] {
        // Leaf's path is not one the client calls: read it raw.
        let leaf = c.raw(Method::GET, &format!("/decodeSnowflakeId?snowflakeId={id}"), None).await.unwrap();
        assert_eq!(leaf.status, StatusCode::OK);
        let leaf: SnowflakeDecoded = serde_json::from_slice(&leaf.body).unwrap();
        for d in [c.decode(id).await.unwrap(), leaf] {
            let rebuilt =
                ((d.timestamp_ms - 1_288_834_974_657) << 22) | ((d.worker_id as i64) << 12) | d.sequence as i64;
            assert_eq!(rebuilt, id, "{d:?}");
            assert_eq!(d.worker_id, worker);
            assert!((d.timestamp_ms - chrono_now_ms()).abs() < 60_000, "{d:?}");
            assert_eq!(d.timestamp.len(), "2026-11-21T19:34:54.425Z".len(), "{d:?}");
            assert!(d.timestamp.ends_with('Z') && d.timestamp.contains('T'), "{d:?}");
        }
    }
    // Bad input: 400s with codes, never a 500.
    for (path, code) in [
        ("/api/snowflake/get/bad%20key", ErrorCode::InvalidTag),
        ("/api/snowflake/get/k?count=0", ErrorCode::InvalidCount),
        ("/api/snowflake/get/k?count=100001", ErrorCode::InvalidCount),
        ("/api/snowflake/decode/abc", ErrorCode::InvalidRequest),
        ("/api/snowflake/decode/-5", ErrorCode::InvalidRequest),
        ("/api/snowflake/decode/9223372036854775808", ErrorCode::InvalidRequest),
        ("/decodeSnowflakeId", ErrorCode::InvalidRequest),
        ("/decodeSnowflakeId?snowflakeId=x", ErrorCode::InvalidRequest),
    ] {
        let (s, e) = error_of(&c, Method::GET, path, None).await;
        assert_eq!((s, e.code), (StatusCode::BAD_REQUEST, code), "{path}: {}", e.message);
    }
    let (s, e) = error_of(&c, Method::POST, "/api/snowflake/get/k", None).await;
    assert_eq!((s, e.code), (StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed));
    // Fault injection is off unless enabled.
    let (s, e) = error_of(&c, Method::POST, "/admin/fault/clock", Some(json!({"offset_ms": -50}))).await;
    assert_eq!((s, e.code), (StatusCode::NOT_FOUND, ErrorCode::NotFound), "{}", e.message);
    // The key is counted in metrics.
    let m = c.metrics().await.unwrap();
    assert!(m.contains("leaf_ids_served_total{mode=\"snowflake\",tag=\"audit-key\"} 100000"), "{m}");
    node.shutdown().await;
}

fn chrono_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_clock_rollback_waits_when_small_and_errors_when_large() {
    let dir = TempDir::new().unwrap();
    let mut cfg = fault_config(&dir);
    cfg.admin_token = Some(TOKEN.into());
    // A tolerance far above the time two requests take on a loaded machine: with Leaf's 5 ms,
    // a set-offset call slower than the 3 ms rollback it injects let the clock catch up first
    // (CI saw "it did not wait").
    cfg.snowflake.max_backward_ms = 400;
    let (node, c) = start(cfg).await;
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    // Pin the last ID ahead of the real clock so the rollbacks below are measured from it.
    set_clock_offset(&c, 1000).await;
    let before = snowflake_ids(&c, None).await[0];
    // 300 ms back, less the time these calls take: the node waits twice the gap and issues a
    // larger ID, as Leaf does.
    let started = std::time::Instant::now();
    set_clock_offset(&c, 700).await;
    let after = snowflake_ids(&c, None).await[0];
    let waited = started.elapsed();
    assert!(after > before, "{after} <= {before}");
    // With d the time from `before` to the second ID's clock reading, the gap is 300 - d ms
    // and the call waits twice that: at least 300 ms from `before` in all, less the moment
    // between `before` and `started`.
    assert!(waited >= Duration::from_millis(200), "it did not wait: {waited:?}");
    // 1000 ms back: beyond the tolerance, a 503 with Leaf's -3, never an ID.
    set_clock_offset(&c, -300).await;
    let (s, e) = error_of(&c, Method::GET, "/api/snowflake/get/k?count=10", None).await;
    // (raw: the typed error has no leaf_code)
    assert_eq!((s, e.code, e.leaf_code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::ClockMovedBackwards, Some(-3)));
    assert!(e.message.contains("moved back"), "{}", e.message);
    // Once the clock has caught up, IDs resume above every earlier one.
    set_clock_offset(&c, 1000).await;
    let resumed = snowflake_ids(&c, Some(10)).await;
    assert!(resumed[0] > after);
    // The fault endpoint is admin-only and validates its body.
    let anon = client(&format!("http://{}", node.http_addr()), None);
    let e = anon.set_clock_fault(&ClockFault { offset_ms: 1 }).await.unwrap_err();
    assert_eq!(e.status(), Some(StatusCode::UNAUTHORIZED));
    let (s, _) = error_of(&c, Method::POST, "/admin/fault/clock", Some(json!({"offset": 1}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_the_clock_behind_the_high_water_mark_never_repeats_an_id() {
    let dir = TempDir::new().unwrap();
    // Issue IDs 2 s in the future, then come back with the true clock.
    let mut cfg = fault_config(&dir);
    cfg.fault.clock_offset_ms = 2000;
    let (node, c) = start(cfg).await;
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    let before = snowflake_ids(&c, Some(1000)).await;
    let max_before = *before.last().unwrap();
    let hw = health(&c).await.snowflake.high_water_ms.unwrap();
    node.shutdown().await;

    // Behind by more than max_startup_wait_ms: snowflake stays off with a clear reason, and
    // segment mode is unaffected.
    let mut cfg = config(&dir);
    cfg.snowflake.max_startup_wait_ms = 100;
    let (node, c) = start(cfg).await;
    let h = wait_snowflake(&c, SnowflakeState::Off, Duration::from_secs(10)).await;
    let reason = h.snowflake.reason.unwrap();
    assert!(reason.contains("behind the time high-water mark"), "{reason}");
    match c.snowflake_id("k").await {
        Err(ClientError::Api { status, code, message }) => {
            assert_eq!((status, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::SnowflakeUnavailable));
            assert!(message.contains("high-water mark"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(h.segment_ready && !h.ready, "segment mode stays ready (snowflake is not)");
    get_ids(&c, "leaf-segment-test", Some(3)).await;
    node.shutdown().await;

    // Behind by less than max_startup_wait_ms: the node serves at once, above the mark and
    // ahead of the clock, instead of waiting for the clock to pass the mark.
    let mut cfg = config(&dir);
    cfg.snowflake.max_startup_wait_ms = 10_000;
    let (node, c) = start(cfg).await;
    let h = wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(15)).await;
    assert!(chrono_now_ms() < hw, "serving only once the clock passed the mark");
    let after = snowflake_ids(&c, Some(1000)).await;
    assert!(after[0] > max_before, "{} <= {max_before}", after[0]);
    assert!(after[0] >> 22 > (hw - 1_288_834_974_657), "the first timestamp is above the high-water mark");
    assert_eq!(h.snowflake.worker_id, Some(0));
    node.shutdown().await;

    // A damaged state file keeps snowflake off instead of forgetting the mark (Leaf #97).
    let path = dir.path().join(leaf_node::internals::STATE_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&path, bytes).unwrap();
    let (node, c) = start(config(&dir)).await;
    let h = wait_snowflake(&c, SnowflakeState::Off, Duration::from_secs(10)).await;
    assert!(h.snowflake.reason.unwrap().contains("state file is unreadable"));
    get_ids(&c, "leaf-segment-test", None).await;
    node.shutdown().await;
}

/// A `raft.source_ip` that is not an address of this host stops the node at start with a clear
/// error, instead of leaving every peer silently unreachable.
#[tokio::test]
async fn a_source_ip_not_on_this_host_is_refused_at_start() {
    let dir = TempDir::new().unwrap();
    let mut cfg = config(&dir);
    cfg.raft.source_ip = Some("192.0.2.1".parse().unwrap());
    match leaf_node::start(cfg).await {
        Ok(_) => panic!("a node started with a foreign source_ip"),
        Err(e) => assert!(e.to_string().contains("raft.source_ip 192.0.2.1"), "{e}"),
    }
    let mut cfg = config(&dir);
    cfg.raft.source_ip = Some("127.0.0.12".parse().unwrap());
    let (_node, c) = start(cfg).await;
    assert_eq!(get_ids(&c, "leaf-segment-test", None).await.len(), 1);
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
        async move { peer.call::<_, Answer>(&addr, PATH_SNAPSHOT, &req, Duration::from_secs(5)).await }
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

/// Connections beyond `http.max_connections` get a 503 with `Retry-After` and are closed; once
/// a connection closes its slot serves again. Idle keep-alive connections count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_get_503_with_retry_after() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir);
    cfg.http.max_connections = 3;
    let (node, _c) = start(cfg).await;
    let addr = node.http_addr();
    async fn get(stream: &mut tokio::net::TcpStream) -> String {
        stream.write_all(b"GET /health?mode=segment HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.unwrap().unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        assert!(get(&mut s).await.starts_with("HTTP/1.1 200"), "a connection under the cap is served");
        open.push(s);
    }
    let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
    let answer = get(&mut extra).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
    assert!(answer.contains("\"code\":\"unavailable\""), "{answer}");
    // Closed by the node.
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), extra.read_to_end(&mut rest)).await.unwrap().unwrap_or(0);
    assert_eq!(n, 0, "the refused connection stays open");
    // A freed slot serves again.
    drop(open.pop());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        if get(&mut s).await.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the freed slot was never reused");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    node.shutdown().await;
}

/// A flood of random unknown tags shares read-index rounds (far fewer rounds than requests,
/// `leaf_read_index_rounds_total`), every one of them is a 404, and a known tag keeps serving
/// throughout. A tag created mid-flood is usable at once.
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
            create_tag(&c, "born-mid-flood", 10, None).await;
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
