//! Multi-process cluster tests: real `leaf` processes on loopback forming 3- and 5-node Raft
//! groups. Formation, uniqueness across nodes, read-index visibility of new tags, forwarding,
//! `kill -9` of the leader under load, learners catching up from a snapshot, promotion,
//! removal, and the internal endpoints' authentication.
//!
//! The tests run one at a time (a shared lock): several clusters at once on a 2-core machine
//! would test the scheduler more than leaf.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaf_api::types::{
    AddLearnerRequest, AllocationJournal, AllocationView, ClusterStatus, CreateTagRequest, Health, MemberRole, Role,
    SnowflakeHealth, SnowflakeState, UpdateTagRequest,
};
use leaf_api::{ErrorBody, ErrorCode};
use leaf_client::{Client, ClientError, HealthMode, Method, StatusCode};
use leaf_cluster_tests::checker::check_segment_ids;
use leaf_cluster_tests::cluster::{node_client, Cluster, Options, SECRET};
use leaf_node::internals::ops::{ForwardRequest, OpKind, Remove, FORWARD_VERSION};
use serde_json::json;

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const FORM: Duration = Duration::from_secs(30);

fn bin() -> String {
    std::env::var("LEAF_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_leaf-test-node").to_string())
}

/// Starts an `n`-node cluster with `extra_toml` in every node's config, once the previous
/// test's cluster is gone, and waits for its leader.
async fn cluster(n: u64, extra_toml: &str) -> (tokio::sync::MutexGuard<'static, ()>, Cluster, u64) {
    let serial = SERIAL.lock().await;
    let mut opts = Options::new(bin());
    opts.extra_toml = extra_toml.to_string();
    let cluster = Cluster::start(n, opts).unwrap();
    let leader = cluster.wait_leader(FORM).await.unwrap();
    (serial, cluster, leader)
}

/// The files the nodes' failpoints are armed from (`LEAF_FAILPOINTS_FILE`), one per node.
struct Arms(tempfile::TempDir);

impl Arms {
    fn file(&self, id: u64) -> std::path::PathBuf {
        self.0.path().join(format!("failpoints-{id}"))
    }

    /// Arms node `id` with `spec` (empty: disarms it); a running node picks it up within 50 ms,
    /// a starting one at once.
    fn set(&self, id: u64, spec: &str) {
        std::fs::write(self.file(id), spec).unwrap();
    }
}

/// An `n`-node cluster whose nodes re-arm their failpoints from [`Arms`] while running (the
/// caller holds [`SERIAL`]).
fn armed_cluster(n: u64, extra_toml: &str) -> (Arms, Cluster) {
    let arms = Arms(tempfile::tempdir().unwrap());
    let specs = (1..=n)
        .map(|id| {
            arms.set(id, "");
            let mut spec = leaf_cluster_tests::cluster::NodeSpec::direct(id);
            spec.env = vec![("LEAF_FAILPOINTS_FILE".to_string(), arms.file(id).display().to_string())];
            spec
        })
        .collect();
    let mut opts = Options::new(bin());
    opts.extra_toml = extra_toml.to_string();
    (arms, Cluster::start_specs(specs, opts).unwrap())
}

fn tag_req(tag: &str, step: i64) -> CreateTagRequest {
    CreateTagRequest { tag: tag.into(), step, max_id: None, description: None, ..Default::default() }
}

async fn create_tag(c: &Client, tag: &str, step: i64) {
    c.create_tag(&tag_req(tag, step)).await.unwrap_or_else(|e| panic!("create {tag}: {e}"));
}

async fn get_ids(c: &Client, tag: &str, count: Option<u32>) -> Result<Vec<i64>, String> {
    let ids = match count {
        Some(n) => c.segment_ids(tag, n).await,
        None => c.segment_id(tag).await.map(|id| vec![id]),
    };
    ids.map_err(|e| format!("{tag} ({count:?}): {e}"))
}

/// The node's journal of `tag`'s committed allocations (every node's, as this node applied them).
async fn journal(c: &Client, tag: &str) -> AllocationJournal {
    c.allocations(Some(tag), None).await.unwrap()
}

/// The status, code and message of a call that must fail with an API error.
fn api_error<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (StatusCode, ErrorCode, String) {
    match r {
        Err(ClientError::Api { status, code, message }) => (status, code, message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Sends a request as given (deliberately malformed ones included) and reads the error body.
async fn error_of(c: &Client, method: Method, path: &str, body: Option<serde_json::Value>) -> (StatusCode, ErrorBody) {
    let r = c.raw(method, path, body.map(|v| bytes::Bytes::from(v.to_string()))).await.unwrap();
    let e = serde_json::from_slice(&r.body).unwrap_or_else(|_| panic!("{path}: not an error body: {:?}", r.body));
    (r.status, e)
}

/// `clients` tasks per node, each fetching `per_client` IDs (mostly single, some batches).
async fn load(cluster: &Cluster, nodes: &[u64], tag: &str, clients: usize, per_client: usize) -> Vec<i64> {
    let mut tasks = Vec::new();
    for &id in nodes {
        for k in 0..clients {
            let c = cluster.client(id);
            let tag = tag.to_string();
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::with_capacity(per_client);
                let mut n = 0u32;
                while got.len() < per_client {
                    n += 1;
                    let batch = if n.is_multiple_of(16) { Some(1 + (n + k as u32) % 40) } else { None };
                    got.extend(get_ids(&c, &tag, batch).await.unwrap_or_else(|e| panic!("node {id}: {e}")));
                }
                got
            }));
        }
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

/// The union of the nodes' journals; they must agree on every allocation both hold, and one of
/// them must be complete since the cluster began. (A node's journal holds what it has applied,
/// so a proposer may not list its newest allocation yet; the leader always does.)
async fn all_allocations(cluster: &Cluster, nodes: &[u64], tag: &str) -> Vec<AllocationView> {
    let mut all: BTreeMap<u64, AllocationView> = BTreeMap::new();
    let mut complete = false;
    for &id in nodes {
        let j = journal(&cluster.client(id), tag).await;
        complete |= j.complete_from_index == 0;
        for a in j.allocations {
            if let Some(prev) = all.insert(a.log_index, a.clone()) {
                assert_eq!(prev, a, "nodes disagree on the allocation at log index {}", a.log_index);
            }
        }
    }
    assert!(complete, "no journal among nodes {nodes:?} is complete");
    all.into_values().collect()
}

/// POSTs `body` to an internal endpoint of `url` as node `as_node` would (with its certificate
/// when the cluster has TLS), with `secret` in the secret header.
async fn post_internal(
    cluster: &Cluster,
    as_node: u64,
    url: &str,
    path: &str,
    secret: Option<&str>,
    body: impl Into<bytes::Bytes>,
) -> StatusCode {
    use http_body_util::Full;
    use hyper_util::client::legacy::Client as H;
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    let config = cluster.peer_tls_config(as_node).unwrap().expect("the test clusters run with TLS");
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config((*config).clone())
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let client: H<_, Full<bytes::Bytes>> = H::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    let mut req = hyper::Request::post(format!("{url}{path}"));
    if let Some(s) = secret {
        req = req.header("x-leaf-cluster-secret", s);
    }
    let resp = client.request(req.body(Full::new(body.into())).unwrap()).await.unwrap();
    resp.status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_form_serve_unique_ids_everywhere_and_guard_internal_endpoints() {
    // Snowflake off: its workers raise their high-water marks through Raft every half window,
    // which would write to the log during the unknown-tag flood below (CI saw 63 -> 66).
    let (_serial, cluster, leader) = cluster(3, "[snowflake]\nenabled = false\n").await;

    // Status on every node names the same members, leader and this node.
    for id in cluster.ids() {
        let s = cluster.status(id).await.unwrap();
        assert_eq!(s.node_id, id);
        assert_eq!(s.leader_id, Some(leader));
        let members: Vec<(u64, MemberRole, String)> =
            s.members.iter().map(|m| (m.node_id, m.role, m.addr.clone())).collect();
        let expected: Vec<_> = (1..=3).map(|i| (i, MemberRole::Voter, cluster.addr(i))).collect();
        assert_eq!(members, expected);
        assert_eq!(s.state == Role::Leader, id == leader, "{s:?}");
        assert_eq!(s.replication.is_some(), id == leader);
        assert!(s.health.segment_ready);
    }

    // A tag created through node 1 (forwarded if node 1 is a follower) works on node 3 at once:
    // node 3 confirms unknown tags with a read index.
    create_tag(&cluster.client(1), "orders", 50).await;
    let first = get_ids(&cluster.client(3), "orders", None).await.unwrap();
    assert_eq!(first.len(), 1);
    // The same when the node lags: frozen while the tag commits, it still answers 200 right
    // after it wakes (without the read index it would answer 404 from its stale state).
    let follower = if leader == 1 { 2 } else { 1 };
    for round in 0..5 {
        let tag = format!("fresh-{round}");
        cluster.pause(follower);
        create_tag(&cluster.client(leader), &tag, 10).await;
        cluster.resume(follower);
        let c = cluster.client(follower);
        let answer = if round == 0 { c.tag(&tag).await.map(|_| ()) } else { c.segment_id(&tag).await.map(|_| ()) };
        answer.unwrap_or_else(|e| panic!("{tag} on the lagging node: {e}"));
    }
    create_tag(&cluster.client(3), "payments", 1000).await;
    get_ids(&cluster.client(2), "payments", Some(10)).await.unwrap();
    let (s, code, _) = api_error(cluster.client(2).create_tag(&tag_req("orders", 5)).await);
    assert_eq!((s, code), (StatusCode::CONFLICT, ErrorCode::TagExists));

    // Concurrent clients on every node: unique IDs, each inside a committed allocation.
    let mut ids = load(&cluster, &[1, 2, 3], "orders", 3, 3000).await;
    ids.extend(first);
    let allocs = all_allocations(&cluster, &[1, 2, 3], "orders").await;
    let by_node: BTreeMap<u64, usize> = {
        let mut m = BTreeMap::new();
        for a in &allocs {
            *m.entry(a.node_id).or_default() += 1;
        }
        m
    };
    assert_eq!(by_node.len(), 3, "every node allocated segments: {by_node:?}");
    assert!(by_node.values().all(|&n| n > 0), "every node allocated segments: {by_node:?}");
    let report = check_segment_ids(&ids, &allocs);
    assert!(report.is_valid(), "checker: {report:?}");

    // A flood of unknown tags on a follower answers 404 and writes nothing to the Raft log
    // (first let in-flight preload refills land).
    let mut before = cluster.status(leader).await.unwrap().last_log_index;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = cluster.status(leader).await.unwrap().last_log_index;
        if now == before {
            break;
        }
        before = now;
    }
    let term = cluster.status(follower).await.unwrap().term;
    let flood = cluster.client(follower);
    for i in 0..200 {
        let (s, code, _) = api_error(flood.segment_id(&format!("nope-{i}")).await);
        assert_eq!((s, code), (StatusCode::NOT_FOUND, ErrorCode::TagNotFound));
    }
    assert_eq!(cluster.status(leader).await.unwrap().last_log_index, before);

    // Internal endpoints: no secret or a wrong one is 401 before anything reaches Raft; a
    // malformed body with the right secret is 400; only POST.
    let url = cluster.url(follower);
    let forward_paths = OpKind::ALL.map(OpKind::path);
    for path in
        ["/internal/raft/vote", "/internal/raft/append", "/internal/raft/snapshot"].into_iter().chain(forward_paths)
    {
        for secret in [None, Some("wrong-secret-0123456789abcd"), Some(&SECRET[..SECRET.len() - 1])] {
            assert_eq!(
                post_internal(&cluster, leader, &url, path, secret, &b"x"[..]).await,
                StatusCode::UNAUTHORIZED,
                "{path}"
            );
        }
        assert_eq!(
            post_internal(&cluster, leader, &url, path, Some(SECRET), &b"\x01garbage"[..]).await,
            StatusCode::BAD_REQUEST
        );
        // A well-formed envelope (version, checksum) around the wrong payload.
        let wrong = leaf_api::codec::encode(&vec![u64::MAX; 3]).unwrap();
        assert_eq!(
            post_internal(&cluster, leader, &url, path, Some(SECRET), wrong).await,
            StatusCode::BAD_REQUEST,
            "{path}"
        );
    }
    assert_eq!(
        post_internal(&cluster, leader, &url, "/internal/nope", Some(SECRET), &b""[..]).await,
        StatusCode::NOT_FOUND
    );
    // A forwarded request of a version this release does not speak is refused, not executed.
    let newer = ForwardRequest { version: FORWARD_VERSION + 1, budget_ms: 1000, op: Remove { node_id: follower } };
    let newer = leaf_api::codec::encode(&newer).unwrap();
    let path = OpKind::Remove.path();
    assert_eq!(
        post_internal(&cluster, follower, &cluster.url(leader), path, Some(SECRET), newer).await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(cluster.status(leader).await.unwrap().members.len(), 3);
    let (s, _) = error_of(&cluster.client(follower), Method::GET, "/internal/raft/vote", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "GET without the secret");
    // Neither the term nor the leader moved: nothing the refused requests carried reached Raft.
    let s = cluster.status(follower).await.unwrap();
    assert_eq!((s.term, s.leader_id), (term, Some(leader)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_form_and_serve_unique_ids_from_every_node() {
    let (_serial, mut cluster, _) = cluster(5, "").await;
    create_tag(&cluster.client(5), "five", 20).await;
    let ids = load(&cluster, &[1, 2, 3, 4, 5], "five", 2, 1500).await;
    let allocs = all_allocations(&cluster, &[1, 2, 3, 4, 5], "five").await;
    let report = check_segment_ids(&ids, &allocs);
    assert!(report.is_valid(), "checker: {report:?}");
    let s = cluster.status(1).await.unwrap();
    assert_eq!(s.members.iter().filter(|m| m.role == MemberRole::Voter).count(), 5);

    // Snowflake: five distinct worker IDs, registered through the log (every node sees the
    // same table), and IDs unique across all nodes.
    let mut workers = BTreeMap::new();
    for id in 1..=5 {
        workers.insert(id, wait_snowflake(&cluster, id, SnowflakeState::Serving).await.worker_id.unwrap());
    }
    let distinct: std::collections::BTreeSet<u16> = workers.values().copied().collect();
    assert_eq!(distinct.len(), 5, "{workers:?}");
    assert!(distinct.iter().all(|w| *w < 5), "the lowest free IDs are given: {workers:?}");
    let table: BTreeMap<u64, u16> =
        cluster.status(2).await.unwrap().workers.iter().map(|w| (w.node_id, w.worker_id)).collect();
    assert_eq!(table, workers);
    let mut all = snowflake_load(&cluster, &[1, 2, 3, 4, 5], 10, 500).await;
    // Stable across a crash: node 3 comes back with its worker ID and larger IDs.
    let before_crash = all.iter().copied().filter(|id| (id >> 12) & 0x3ff == workers[&3] as i64).max().unwrap();
    cluster.kill(3);
    cluster.spawn(3).unwrap();
    let h = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await;
    assert_eq!(h.worker_id, Some(workers[&3]), "worker ID changed across a restart");
    let after = snowflake_get(&cluster.client(3), 100).await.unwrap();
    assert!(after[0] > before_crash, "{} <= {before_crash}", after[0]);
    all.extend(after);
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate snowflake IDs across nodes");
}

async fn snowflake_health(cluster: &Cluster, id: u64) -> Option<SnowflakeHealth> {
    cluster.client(id).health(HealthMode::All).await.ok().map(|r| r.health.snowflake)
}

/// Waits until node `id`'s snowflake mode is in `state`.
async fn wait_snowflake(cluster: &Cluster, id: u64, state: SnowflakeState) -> SnowflakeHealth {
    let deadline = std::time::Instant::now() + FORM;
    loop {
        let h = snowflake_health(cluster, id).await;
        if let Some(h) = h.as_ref().filter(|h| h.state == state) {
            return h.clone();
        }
        assert!(std::time::Instant::now() < deadline, "node {id}: snowflake never {state}: {h:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn snowflake_get(c: &Client, count: u32) -> Result<Vec<i64>, (StatusCode, String)> {
    // No answer at all is reported as "200" so that a test expecting a refusal fails on it.
    c.snowflake_ids("test", count).await.map_err(|e| (e.status().unwrap_or(StatusCode::OK), e.to_string()))
}

/// `rounds` batches of `batch` snowflake IDs from each node, concurrently.
async fn snowflake_load(cluster: &Cluster, nodes: &[u64], rounds: usize, batch: u32) -> Vec<i64> {
    let tasks: Vec<_> = nodes
        .iter()
        .map(|&id| {
            let c = cluster.client(id);
            tokio::spawn(async move {
                let mut got = Vec::new();
                for _ in 0..rounds {
                    got.extend(snowflake_get(&c, batch).await.unwrap_or_else(|e| panic!("node {id}: {e:?}")));
                }
                got
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_expiry_fences_the_old_holder_before_its_worker_id_is_recycled() {
    // Short leases so the test sees expiry: 4 s lease, recyclable 8 s after the last renewal.
    // (With 2 s / 4 s, electing a new leader after freezing node 3 plus starting and adding node
    // 4 took longer than the grace once on a loaded machine, and node 4 then rightly got the
    // recycled ID.)
    let (_serial, mut cluster, _) = cluster(3, "[snowflake]\nlease_ttl_ms = 4000\ntime_window_ms = 500\n").await;
    for id in 1..=3 {
        wait_snowflake(&cluster, id, SnowflakeState::Serving).await;
    }
    let w3 = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await.worker_id.unwrap();
    let old_ids = snowflake_get(&cluster.client(3), 1000).await.unwrap();
    // Node 3 is cut off (frozen: it keeps its sockets, answers nothing, renews nothing) and
    // removed from the cluster by the others.
    cluster.pause(3);
    let leader = cluster.wait_leader_among(&[1, 2], FORM).await.unwrap();
    cluster.client(leader).remove(3).await.unwrap();
    // A new node joins before the lease and its grace ran out: it gets a fresh worker ID.
    cluster.start_extra(4).unwrap();
    cluster.client(1).add_learner(&AddLearnerRequest { node_id: 4, addr: cluster.addr(4) }).await.unwrap();
    let w4 = wait_snowflake(&cluster, 4, SnowflakeState::Serving).await.worker_id.unwrap();
    assert_ne!(w4, w3, "recycled before the old lease (plus grace) ran out");
    // Once it has, the next new node gets node 3's worker ID, starting above its high-water mark.
    tokio::time::sleep(Duration::from_millis(8500)).await;
    let hw3 = cluster.status(1).await.unwrap().workers.iter().find(|w| w.worker_id == w3).unwrap().high_water_ms;
    cluster.start_extra(5).unwrap();
    cluster.client(2).add_learner(&AddLearnerRequest { node_id: 5, addr: cluster.addr(5) }).await.unwrap();
    let h5 = wait_snowflake(&cluster, 5, SnowflakeState::Serving).await;
    assert_eq!(h5.worker_id, Some(w3), "node 3's worker ID is recycled");
    let status = cluster.status(5).await.unwrap();
    let rec = status.workers.iter().find(|w| w.worker_id == w3).unwrap();
    assert_eq!((rec.node_id, rec.previous_node_id), (5, Some(3)));
    let new_ids = snowflake_get(&cluster.client(5), 1000).await.unwrap();
    let epoch = 1_288_834_974_657;
    assert!(new_ids.iter().all(|id| (id >> 22) + epoch > hw3), "an ID at or below the old holder's mark");
    assert!(new_ids[0] > *old_ids.iter().max().unwrap());
    // The old holder wakes up: its lease is over, so it issues nothing under the recycled ID.
    cluster.resume(3);
    for _ in 0..20 {
        match snowflake_get(&cluster.client(3), 1).await {
            Ok(ids) => panic!("the fenced node issued {ids:?} under a recycled worker ID"),
            Err((s, body)) => assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let h3 = snowflake_health(&cluster, 3).await.unwrap();
    assert_ne!(h3.state, SnowflakeState::Serving, "{h3:?}");
}

/// `/health` of node `id`: whether it answered 200 (ready in `mode`), and the report.
async fn health_of(cluster: &Cluster, id: u64, mode: HealthMode) -> (bool, Health) {
    let r = cluster.client(id).health(mode).await.unwrap();
    (r.ready, r.health)
}

/// Both followers of a 3-node cluster die: the leader still calls itself leader (openraft 0.9
/// does not step down), but `/health` says it has no quorum contact, with a reason, within two
/// election timeouts; and it is ready again once a follower is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_its_quorum_says_so_within_two_election_timeouts() {
    let (_serial, mut cluster, leader) = cluster(3, "").await;
    let (ready, h) = health_of(&cluster, leader, HealthMode::Segment).await;
    assert!(ready, "{h:?}");
    assert!(h.segment_ready && h.quorum_ack_age_ms.is_some_and(|a| a < 2000), "{h:?}");
    // A follower's contact is probed from the leader.
    let follower = cluster.ids().into_iter().find(|id| *id != leader).unwrap();
    let (_, hf) = health_of(&cluster, follower, HealthMode::Segment).await;
    assert!(hf.segment_ready && hf.quorum_ack_age_ms.is_some_and(|a| a < 2000), "{hf:?}");
    let followers: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
    for f in &followers {
        cluster.kill(*f);
    }
    let killed = std::time::Instant::now();
    // Default election timeouts: 1-2 s; two of the longest: 4 s.
    let h = loop {
        let (ready, h) = health_of(&cluster, leader, HealthMode::Segment).await;
        if !ready {
            break h;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(4),
            "still ready {:?} after losing the quorum: {h:?}",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("the leader reported the lost quorum {:?} after the kill: {:?}", killed.elapsed(), h.reason);
    assert!(!h.segment_ready && !h.ready, "{h:?}");
    assert_eq!(h.leader_id, Some(leader), "openraft keeps the leader: {h:?}");
    assert!(h.reason.as_deref().is_some_and(|r| r.contains("quorum")), "{h:?}");
    assert!(h.quorum_ack_age_ms.is_some_and(|a| a > 2000), "{h:?}");
    // The default /health (both modes) agrees.
    assert!(!health_of(&cluster, leader, HealthMode::All).await.0);
    // One follower back: a quorum again.
    cluster.spawn(followers[0]).unwrap();
    let deadline = std::time::Instant::now() + FORM;
    loop {
        let answer = cluster.client(followers[0]).health(HealthMode::Segment).await;
        if let Ok(r) = &answer {
            if r.ready && r.health.quorum_ack_age_ms.is_some_and(|a| a < 2000) {
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "never ready again: {answer:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.wait_leader_among(&[leader, followers[0]], FORM).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_clock_keeps_snowflake_off_and_a_node_restarts_from_its_state_file_without_a_quorum() {
    let (_serial, mut cluster, _) = cluster(3, "").await;
    for id in 1..=3 {
        wait_snowflake(&cluster, id, SnowflakeState::Serving).await;
    }
    let w3 = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await.worker_id;
    // Node 3 restarts with its clock 5 s ahead of its peers: snowflake stays off with the
    // reason; segment mode is unaffected.
    assert!(cluster.stop(3));
    cluster.set_env(3, &[("LEAF_FAULT__ENABLED", "true"), ("LEAF_FAULT__CLOCK_OFFSET_MS", "5000")]);
    cluster.spawn(3).unwrap();
    let h = wait_snowflake(&cluster, 3, SnowflakeState::Off).await;
    let offset = h.peer_clock_offset_ms.unwrap();
    assert!((-6000..=-4000).contains(&offset), "{h:?}");
    assert!(h.reason.as_deref().unwrap().contains("max_peer_offset_ms"), "{h:?}");
    let (s, code, _) = api_error(cluster.client(3).snowflake_id("x").await);
    assert_eq!((s, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::SnowflakeUnavailable));
    let status = cluster.status(3).await.unwrap();
    assert_eq!(status.health.snowflake.state, SnowflakeState::Off, "reported in /cluster/status too");
    create_tag(&cluster.client(3), "still-works", 10).await;
    get_ids(&cluster.client(3), "still-works", Some(5)).await.unwrap();

    // With the clock fixed it serves again under the same worker ID.
    assert!(cluster.stop(3));
    cluster.set_env(3, &[]);
    cluster.spawn(3).unwrap();
    assert_eq!(wait_snowflake(&cluster, 3, SnowflakeState::Serving).await.worker_id, w3);
    let before = snowflake_get(&cluster.client(3), 100).await.unwrap();

    // Leaf's weak dependency: with the quorum gone, node 3 restarts and serves snowflake IDs
    // under its worker ID from the state file (its lease has not run out).
    cluster.kill(1);
    cluster.kill(2);
    assert!(cluster.stop(3));
    cluster.spawn(3).unwrap();
    let h = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await;
    assert_eq!(h.worker_id, w3);
    let after = snowflake_get(&cluster.client(3), 100).await.unwrap();
    assert!(after[0] > *before.last().unwrap());
    // The Raft log really is out of reach: a write fails.
    let (s, code, message) = api_error(cluster.client(3).create_tag(&tag_req("t", 1)).await);
    assert_eq!((s, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable), "{message}");
    let h = wait_snowflake(&cluster, 3, SnowflakeState::Serving).await;
    assert!(h.lease_remaining_ms.unwrap() > 0, "{h:?}");
}

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
    let mut tasks = Vec::new();
    for id in 1..=3u64 {
        for _ in 0..2 {
            let c = cluster.client(id);
            let (killed, stop, failures) = (killed.clone(), stop.clone(), survivor_failures.clone());
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                let mut errors = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if id == leader && killed.load(Ordering::Relaxed) {
                        break;
                    }
                    match get_ids(&c, "hot", None).await {
                        Ok(ids) => got.extend(ids),
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
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.kill(leader);
    killed.store(true, Ordering::Relaxed);
    let survivors: Vec<u64> = (1..=3).filter(|&id| id != leader).collect();
    // A write sent while there is no leader is retried by the node until the new leader commits
    // it; the client sees one success.
    create_tag(&cluster.client(survivors[0]), "created-during-election", 10).await;
    let new_leader = cluster.wait_leader_among(&survivors, FORM).await.unwrap();
    assert_ne!(new_leader, leader);
    tokio::time::sleep(Duration::from_millis(1500)).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_catches_up_from_a_snapshot_serves_ids_is_promoted_and_nodes_are_removed() {
    // Snapshot often and keep almost no log behind it, so a new node cannot catch up from the
    // log; a short propose timeout keeps the refused promotion below quick.
    let (_serial, mut cluster, leader) =
        cluster(3, "[raft]\nsnapshot_every = 20\nkeep_logs_after_snapshot = 2\npropose_timeout_ms = 2000\n").await;
    let token = leaf_api::tokens::CreateTokenRequest {
        name: "early".into(),
        rights: vec![leaf_api::tokens::Right::Tags],
        tags: vec![leaf_api::tokens::TagPattern::parse("tag-*").unwrap()],
        quota: None,
    };
    let early = cluster.client(1).create_token(&token).await.unwrap();
    for i in 0..60 {
        create_tag(&cluster.client(1 + i % 3), &format!("tag-{i}"), 10).await;
    }
    let taken = get_ids(&cluster.client(2), "tag-7", Some(25)).await.unwrap();
    // Snapshots are built and the log purged in the background.
    let deadline = tokio::time::Instant::now() + FORM;
    loop {
        let s = cluster.status(leader).await.unwrap();
        if s.purged_index.unwrap_or(0) > 10 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the leader never purged its log: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Node 4 starts outside the membership and waits; it is not ready until added.
    let port = cluster.start_extra(4).unwrap();
    let s = loop {
        match cluster.status(4).await {
            Ok(s) => break s,
            Err(_) if tokio::time::Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("node 4 never answered: {e}"),
        }
    };
    assert!(!s.health.ready && s.members.is_empty(), "{s:?}");

    // Added through a follower (forwarded to the leader).
    let follower = if leader == 1 { 2 } else { 1 };
    let add = AddLearnerRequest { node_id: 4, addr: format!("127.0.0.1:{port}") };
    let change = cluster.client(follower).add_learner(&add).await.unwrap();
    assert_eq!(change.learners, vec![4]);

    // It catches up from a snapshot: it holds every tag although the log behind them is gone.
    let deadline = tokio::time::Instant::now() + FORM;
    let s4 = loop {
        let s = cluster.status(4).await.unwrap();
        let l = cluster.status(leader).await.unwrap();
        if s.health.segment_ready && s.last_applied_index >= l.committed_index {
            break s;
        }
        assert!(tokio::time::Instant::now() < deadline, "learner did not catch up: {s:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(s4.state, Role::Learner);
    assert!(s4.snapshot_index.is_some(), "caught up without a snapshot: {s4:?}");
    // Its allocation journal says it lacks what the snapshot covered.
    let j4 = journal(&cluster.client(4), "tag-7").await;
    assert!(j4.complete_from_index > 0, "no gap marked after a snapshot install: {j4:?}");
    let tags = cluster.client(4).db().await.unwrap();
    assert_eq!(tags.len(), 60);
    // The audit trail came with the snapshot: the learner's is the leader's, the token made
    // before the purge included, and the learner accepts that token.
    let everything = leaf_api::audit::AuditFilter::default();
    let on_learner = cluster.client(4).audit(&everything, None, Some(1000)).await.unwrap().records;
    let on_leader = cluster.client(leader).audit(&everything, None, Some(1000)).await.unwrap().records;
    use leaf_api::audit::AuditKind;
    // The token, the 60 tags, then (once noted) the learner itself.
    assert!(on_learner.len() >= 61, "{on_learner:?}");
    assert_eq!(on_learner, on_leader[..on_learner.len()]);
    assert_eq!(on_learner[0].action.kind(), AuditKind::TokenCreated);
    assert!(on_learner[1..61].iter().all(|r| r.action.kind() == AuditKind::TagCreated), "{on_learner:?}");
    let t = cluster.client_with(4, Some(&early.bearer), Duration::from_secs(10));
    assert_eq!(t.tags().await.unwrap().len(), 60, "the learner knows the token from the snapshot");

    // The learner serves IDs, unique against those handed out before.
    let from_learner = get_ids(&cluster.client(4), "tag-7", Some(25)).await.unwrap();
    let mut all = taken.clone();
    all.extend(&from_learner);
    let report = check_segment_ids(&all, &all_allocations(&cluster, &[1, 2, 3, 4], "tag-7").await);
    assert!(report.is_valid(), "checker: {report:?}");

    // Promote it to voter (CLI, against a follower).
    let out = std::process::Command::new(bin())
        .args(["cluster", "promote", "4", "--node", &cluster.url(follower), "--token"])
        .arg(leaf_cluster_tests::cluster::TOKEN)
        .arg("--ca")
        .arg(cluster.ca().unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = cluster.status(leader).await.unwrap();
    assert_eq!(s.members.iter().filter(|m| m.role == MemberRole::Voter).count(), 4, "{s:?}");

    // Remove a follower that is not node 4; stop it; the rest keep working.
    let removed = (1..=3).find(|&id| id != leader && id != follower).unwrap();
    let change = cluster.client(leader).remove(removed).await.unwrap();
    assert!(!change.voters.contains(&removed) && !change.learners.contains(&removed), "{change:?}");
    assert!(cluster.stop(removed), "removed node exits cleanly");
    let rest: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|&id| id != removed).collect();
    cluster.wait_leader_among(&rest, FORM).await.unwrap();
    create_tag(&cluster.client(4), "after-removal", 10).await;
    for &id in &rest {
        get_ids(&cluster.client(id), "after-removal", None).await.unwrap();
    }
    let s: ClusterStatus = cluster.status(4).await.unwrap();
    assert!(s.members.iter().all(|m| m.node_id != removed), "{s:?}");

    // Node IDs are never reused; membership errors have clear statuses.
    let c = cluster.client(4);
    let add = |node_id: u64, addr: &str| AddLearnerRequest { node_id, addr: addr.into() };
    let (st, code, message) = api_error(c.add_learner(&add(removed, "127.0.0.1:1")).await);
    assert_eq!((st, code), (StatusCode::CONFLICT, ErrorCode::NodeIdRetired), "{message}");
    let (st, code, _) = api_error(c.add_learner(&add(4, "127.0.0.1:1")).await);
    assert_eq!((st, code), (StatusCode::CONFLICT, ErrorCode::MemberExists));
    let (st, code, _) = api_error(c.promote(99).await);
    assert_eq!((st, code), (StatusCode::NOT_FOUND, ErrorCode::MemberNotFound));
    let (st, code, _) = api_error(c.remove(99).await);
    assert_eq!((st, code), (StatusCode::NOT_FOUND, ErrorCode::MemberNotFound));
    let (st, e) = error_of(&c, Method::DELETE, "/admin/cluster/nodes/abc", None).await;
    assert_eq!((st, e.code), (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest));
    let (st, code, _) = api_error(c.add_learner(&add(9, "no port")).await);
    assert_eq!((st, code), (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest));
    let anonymous = cluster.client_with(4, None, Duration::from_secs(30));
    let (st, code, _) = api_error(anonymous.remove(1).await);
    assert_eq!((st, code), (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized));

    // A learner that never answers is not made a voter (503 after the bounded retry), and a
    // learner can be removed.
    let dead = format!("127.0.0.1:{}", leaf_cluster_tests::cluster::free_port());
    c.add_learner(&add(5, &dead)).await.unwrap();
    let (st, code, message) = api_error(c.promote(5).await);
    assert_eq!((st, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable), "{message}");
    let s = cluster.status(4).await.unwrap();
    assert!(s.members.iter().any(|m| m.node_id == 5 && m.role == MemberRole::Learner), "{s:?}");
    let change = c.remove(5).await.unwrap();
    assert!(change.learners.is_empty() && !change.voters.contains(&5), "{change:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_quorum_buffered_ids_are_served_and_writes_fail_with_a_clear_503() {
    let (_serial, mut cluster, _) = cluster(3, "[raft]\npropose_timeout_ms = 1500\n").await;
    create_tag(&cluster.client(1), "q", 100_000).await;
    let before = get_ids(&cluster.client(1), "q", Some(10)).await.unwrap();
    cluster.kill(2);
    cluster.kill(3);

    // Node 1 keeps serving from its committed buffers...
    let during = get_ids(&cluster.client(1), "q", Some(1000)).await.unwrap();
    assert!(during[0] > *before.last().unwrap());
    // ...while a write fails with 503 `unavailable` after the bounded retry, not a hang.
    let started = std::time::Instant::now();
    let (st, code, message) = api_error(cluster.client(1).create_tag(&tag_req("no-quorum", 1)).await);
    assert_eq!((st, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable), "{message}");
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    // An unknown tag cannot be confirmed absent without the leader: 503, not a wrong 404.
    let (st, code, message) = api_error(cluster.client(1).segment_id("unknown").await);
    assert_eq!((st, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::NotReady), "{message}");

    // With a quorum back, writes work again and IDs keep increasing.
    cluster.spawn(2).unwrap();
    cluster.wait_leader_among(&[1, 2], FORM).await.unwrap();
    create_tag(&cluster.client(1), "quorum-back", 10).await;
    let after = get_ids(&cluster.client(2), "q", None).await.unwrap();
    assert!(after[0] > *during.last().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_forwarded_to_a_hung_leader_moves_on_to_the_next_leader() {
    // The propose budget (10 s) is well above one forwarding attempt (2 × 2 s election timeout):
    // without the per-attempt cap the whole budget would wait on the frozen leader.
    let (_serial, cluster, leader) = cluster(3, "[raft]\npropose_timeout_ms = 10000\n").await;
    create_tag(&cluster.client(leader), "hang", 5).await;
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    // The frozen leader's kernel still accepts connections, so the forward hangs rather than
    // failing fast. An update may be retried after an uncertain attempt: it succeeds through
    // the next leader.
    cluster.pause(leader);
    let update = UpdateTagRequest { step: None, description: Some("after the hang".into()) };
    let c = cluster.client(follower);
    let outcome = tokio::time::timeout(Duration::from_secs(30), c.update_tag("hang", &update)).await;
    cluster.resume(leader);
    let info = outcome.expect("the client's own timeout").unwrap();
    assert_eq!(info.description, "after the hang");
    let new_leader = cluster.status(follower).await.unwrap().leader_id.unwrap();
    assert_ne!(new_leader, leader);

    // A create is not retried once it may have been delivered (a retry could turn its success
    // into `tag_exists`): the client gets an honest 503 saying the outcome is unknown.
    let other = (1..=3).find(|&id| id != new_leader && id != leader).unwrap();
    cluster.pause(new_leader);
    let answer = cluster.client(other).create_tag(&tag_req("during-hang", 5)).await;
    cluster.resume(new_leader);
    let (st, code, message) = api_error(answer);
    assert_eq!((st, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::Unavailable), "{message}");
    assert!(message.contains("may or may not"), "{message}");
}

/// Runs `leaf-chaos` with `args` and the seed `LEAF_CHAOS_SEED` or `default_seed`, as its own
/// process, as a user runs it; fails (keeping history, results and node logs) unless it exits 0.
/// Returns the seed, the output directory, the printed summary and `results.json`.
async fn run_chaos(default_seed: &str, args: &[&str]) -> (String, tempfile::TempDir, String, serde_json::Value) {
    let seed = std::env::var("LEAF_CHAOS_SEED").unwrap_or_else(|_| default_seed.to_string());
    let out = tempfile::Builder::new().prefix("leaf-chaos-ci-").tempdir().unwrap();
    println!("chaos seed {seed}, output in {}", out.path().display());
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_leaf-chaos"))
        .args(args)
        .args(["--seed", &seed, "--bin", &bin()])
        .arg("--out")
        .arg(out.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    println!("{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    if run.status.code() != Some(0) {
        let kept = out.keep();
        panic!("chaos run {args:?} with seed {seed} failed ({:?}); evidence in {}", run.status, kept.display());
    }
    let results = serde_json::from_slice(&std::fs::read(out.path().join("results.json")).unwrap()).unwrap();
    (seed, out, stdout, results)
}

/// The CI chaos run: 3 nodes, 75 s, every fault kind, a fixed seed (override with
/// `LEAF_CHAOS_SEED`). The harness runs as its own process, as a user runs it, and must find
/// the history valid (exit 0) with every fault kind injected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_chaos_run_with_every_fault_kind_passes_the_checker() {
    let _serial = SERIAL.lock().await;
    let (seed, _out, stdout, results) = run_chaos("20261121", &["--nodes", "3", "--duration", "75s"]).await;
    assert_eq!(results["valid"], "true");
    for kind in ["kill", "pause", "partition", "clock", "restart", "membership"] {
        assert!(
            results["faults"][kind].as_u64().unwrap_or(0) >= 1,
            "no {kind} fault was injected: {}",
            results["faults"]
        );
    }
    assert!(results["operations"]["ok"].as_u64().unwrap() > 5000, "too little traffic: {}", results["operations"]);
    // The partitions bit: Raft connections were blackholed or cut (with this seed's shapes).
    assert!(results["partition_connections_cut"].as_u64().unwrap() > 0, "partitions cut nothing");
    assert!(stdout.contains(&format!("seed {seed}")), "the run must print its seed");
}

/// The CI run of the namespace backend (root): 3 nodes in network namespaces of their own,
/// 60 s with iptables partitions (halves, isolated leader, ring; and one-way, flapping, clients
/// cut), and degraded links (`netem`), a fixed seed (override with `LEAF_CHAOS_SEED`; this one
/// plans three link faults, so every link shape runs). The history must be valid, the drop
/// rules must have dropped packets (the partitions bit), and degraded links must have delayed
/// packets. Without root it prints why and passes, unless `LEAF_REQUIRE_NETNS=1` (set by
/// `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_run_in_network_namespaces_drops_packets_and_passes_the_checker() {
    if let Some(why) = leaf_cluster_tests::chaos::netns::unavailable() {
        assert!(std::env::var("LEAF_REQUIRE_NETNS").is_err(), "LEAF_REQUIRE_NETNS is set, but {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let _serial = SERIAL.lock().await;
    let (_seed, out, _stdout, results) =
        run_chaos("20261149", &["--netns", "--nodes", "3", "--duration", "60s", "--faults", "partition,link,netem"])
            .await;
    assert_eq!(results["valid"], "true");
    for kind in ["partition", "link", "netem"] {
        assert!(results["faults"][kind].as_u64().unwrap_or(0) >= 1, "no {kind} fault: {}", results["faults"]);
    }
    // Every shape only packet filters make ran (the schedule cycles them; this seed plans three).
    let history = std::fs::read_to_string(out.path().join("history.jsonl")).unwrap();
    for shape in ["one-way", "flapping", "clients cut"] {
        assert!(history.contains(shape), "no {shape} partition in the history");
    }
    assert!(results["partition_connections_cut"].as_u64().unwrap() > 0, "the drop rules dropped no packet");
    // Without sch_netem the NFQUEUE delayer reports what it held at each heal.
    let delayed: u64 = history
        .lines()
        .filter_map(|l| {
            // "..., <delayed> of <all> packets were delayed and <n> reordered"
            let head = &l[..l.find(" packets were delayed")?];
            head[..head.rfind(" of ")?].rsplit(' ').next()?.parse::<u64>().ok()
        })
        .sum();
    let netem_kernel = history.contains("netem delay");
    assert!(netem_kernel || delayed > 0, "no degraded link delayed a packet");
}

fn planted_op(op: u64, node: u64, mode: &str, at_ms: u64, ids: &[i64]) -> [serde_json::Value; 2] {
    let tag = if mode == "segment" { json!("t") } else { serde_json::Value::Null };
    let base = json!({"op": op, "process": op, "mode": mode, "node": node, "count": ids.len()});
    let mut inv = base.clone();
    inv["type"] = json!("invoke");
    inv["time_ns"] = json!(at_ms * 1_000_000);
    let mut ok = base;
    ok["type"] = json!("ok");
    ok["time_ns"] = json!((at_ms + 1) * 1_000_000);
    ok["status"] = json!(200);
    ok["ids"] = json!(ids);
    if !tag.is_null() {
        inv["tag"] = tag.clone();
        ok["tag"] = tag;
    }
    [inv, ok]
}

/// `leaf-chaos check DIR` on hand-made histories: a clean one passes (exit 0); one with a
/// planted duplicate, an order violation and an ID outside its node's allocation is reported
/// item by item and exits 1.
#[test]
fn the_checker_reports_planted_violations_and_exits_1() {
    let write = |events: &[serde_json::Value]| {
        let dir = tempfile::tempdir().unwrap();
        let mut lines = vec![json!({"type": "meta", "seed": 5, "nodes": 2, "wall_start_ms": 1_800_000_000_000i64,
            "epoch_ms": 1_288_834_974_657i64, "faults": [], "warmup_ms": 0, "faults_ms": 0, "after_ms": 0})];
        lines.push(json!({"type": "phase", "time_ns": 0, "phase": "warmup"}));
        lines.extend(events.iter().cloned());
        let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        std::fs::write(dir.path().join("history.jsonl"), text.join("\n")).unwrap();
        // Node 1 owns [1, 100), node 2 owns [100, 200).
        let journal = json!([{"node_id": 1, "complete_from_index": 0, "complete_through_index": 4, "allocations": [
            {"tag": "t", "node_id": 1, "start": 1, "end": 100, "log_index": 3, "at_ms": 0},
            {"tag": "t", "node_id": 2, "start": 100, "end": 200, "log_index": 4, "at_ms": 0}]}]);
        std::fs::write(dir.path().join("allocations.json"), journal.to_string()).unwrap();
        dir
    };
    let check = |dir: &tempfile::TempDir| {
        let out =
            std::process::Command::new(env!("CARGO_BIN_EXE_leaf-chaos")).arg("check").arg(dir.path()).output().unwrap();
        let results: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("results.json")).unwrap()).unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string(), results)
    };
    let mut clean = Vec::new();
    clean.extend(planted_op(1, 1, "segment", 10, &[1, 2]));
    clean.extend(planted_op(2, 2, "segment", 10, &[100]));
    clean.extend(planted_op(3, 1, "segment", 20, &[5, 6]));
    let (code, stdout, results) = check(&write(&clean));
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(results["valid"], "true");

    let mut bad = clean.clone();
    // Duplicate: node 2 hands out 100 again, to a concurrent request (so no order is promised
    // between the two and only the duplicate is reported).
    bad.extend(planted_op(4, 2, "segment", 10, &[100]));
    // Order violation: node 1 gave 6 at 20 ms, then 4 to a request invoked at 40 ms.
    bad.extend(planted_op(5, 1, "segment", 40, &[4]));
    // Outside its allocation: node 1 hands out 150, which was committed to node 2.
    bad.extend(planted_op(6, 1, "segment", 50, &[150]));
    let (code, stdout, results) = check(&write(&bad));
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(results["valid"], "false");
    assert!(stdout.contains("duplicates 1  order violations 1  outside allocations 1"), "{stdout}");
    let dup = &results["duplicates"][0];
    assert_eq!(
        (dup["id"].as_i64(), dup["first"]["op"].as_u64(), dup["second"]["op"].as_u64()),
        (Some(100), Some(2), Some(4))
    );
    let order = &results["order_violations"][0];
    assert_eq!((order["earlier"]["op"].as_u64(), order["later"]["op"].as_u64()), (Some(3), Some(5)));
    assert_eq!(results["outside_allocations"][0]["id"], 150);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_lost_its_data_refuses_to_rejoin_under_its_old_id() {
    let (_serial, mut cluster, leader) = cluster(3, "").await;
    let victim = if leader == 2 { 3 } else { 2 };
    // Its snowflake worker registration is the evidence that it had state.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = cluster.status(leader).await.unwrap();
        if s.workers.iter().any(|w| w.node_id == victim) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "node {victim} registered no worker: {s:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cluster.kill(victim);
    let data = cluster.dir().join(format!("node{victim}"));
    std::fs::remove_dir_all(&data).unwrap();
    cluster.spawn(victim).unwrap();
    // It exits at start with the reason, instead of rejoining as a voter that forgot its votes.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while cluster.alive(victim) {
        assert!(std::time::Instant::now() < deadline, "node {victim} started on an empty data dir");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let log = std::fs::read_to_string(cluster.log_path(victim)).unwrap();
    assert!(log.contains("the data dir is empty") && log.contains("registered snowflake worker ID"), "{log}");
    // The others go on; the documented way back is a new node ID.
    let c = cluster.client(leader);
    create_tag(&c, "after-loss", 10).await;
    let survivor = (1..=3).find(|id| *id != victim && *id != leader).unwrap();
    get_ids(&cluster.client(survivor), "after-loss", Some(5)).await.unwrap();
}

#[path = "cluster/docker.rs"]
mod docker;

#[path = "cluster/disk_full.rs"]
mod disk_full;

#[path = "cluster/id_pool.rs"]
mod id_pool;

#[path = "cluster/snapshot_crash.rs"]
mod snapshot_crash;

#[path = "cluster/crash_points.rs"]
mod crash_points;

#[path = "cluster/disk_faults.rs"]
mod disk_faults;

#[path = "cluster/tls.rs"]
mod tls;

#[path = "cluster/alerts.rs"]
mod alerts;
#[path = "cluster/dashboard_ui.rs"]
mod dashboard_ui;
#[path = "cluster/governance.rs"]
mod governance;
#[path = "cluster/monotonic.rs"]
mod monotonic;
#[path = "cluster/pool_single.rs"]
mod pool_single;
