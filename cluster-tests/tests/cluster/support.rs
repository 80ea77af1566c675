//! What every cluster test shares: the machine's lanes, starting a cluster, failpoint arms,
//! and small helpers for journals, errors and snowflake state (the calls every suite makes
//! come from `leaf-test-support`).
use std::collections::BTreeMap;
use std::time::Duration;

use leaf_api::types::{AllocationJournal, AllocationView, Health, SnowflakeHealth, SnowflakeState};
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError, HealthMode, StatusCode};
use leaf_cluster_tests::cluster::{Cluster, NodeSpec, Options};
use leaf_cluster_tests::power::Power;

pub(crate) use leaf_test_support::{create_tag, error_of, eventually, tag_req, try_get_ids, until, until_holds};

/// The machine's two lanes. A test that starts nodes holds one lane ([`beside`]) or both
/// ([`alone`]) while they run:
/// - alone: a test whose verdict depends on how quickly the cluster reacts (a bound on a pause,
///   warm buffers or leases riding out an election, a forwarded write's timeout, an alert's
///   timing), a browser, a connection flood, and the network-namespace chaos run (iptables);
/// - beside one other: a test that checks what the cluster answered and stored (formation,
///   membership, TLS, tokens, backups, crash points, power cuts, data loss, the order and
///   gaplessness of IDs under leader kills), with waits long enough that a busy machine only
///   slows it. That includes the Docker tests (a compose project, network and ports of their
///   own each) and the chaos runs: one keeps about a fifth of the 2 cores busy
///   (18.9 busy core-seconds in 45 s, measured), so two at once leave the nodes idle time.
///
/// Each test starts its nodes on ports and in directories of its own, so two never share
/// state. libtest runs two tests at a time on this machine, so two lanes are all there is.
pub(crate) static LANES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

/// A test's hold on the machine (see [`LANES`]).
pub(crate) type Lane = tokio::sync::SemaphorePermit<'static>;

/// Both lanes: nothing else runs nodes meanwhile.
pub(crate) async fn alone() -> Lane {
    LANES.acquire_many(2).await.expect("the lanes are never closed")
}

/// One lane: at most one other test runs nodes meanwhile.
pub(crate) async fn beside() -> Lane {
    LANES.acquire().await.expect("the lanes are never closed")
}

/// How long a cluster may take to form (or re-form) and agree on a leader.
pub(crate) const FORM: Duration = Duration::from_secs(30);

/// The `leaf` binary the nodes run: `LEAF_BIN`, or this package's `leaf-test-node`.
pub(crate) fn bin() -> String {
    std::env::var("LEAF_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_leaf-test-node").to_string())
}

/// Starts an `n`-node cluster with `extra_toml` in every node's config, [`alone`], and waits
/// for its leader.
pub(crate) async fn cluster(n: u64, extra_toml: &str) -> (Lane, Cluster, u64) {
    start_cluster(alone().await, n, extra_toml).await
}

/// [`cluster`], [`beside`] one other test.
pub(crate) async fn cluster_beside(n: u64, extra_toml: &str) -> (Lane, Cluster, u64) {
    start_cluster(beside().await, n, extra_toml).await
}

async fn start_cluster(lane: Lane, n: u64, extra_toml: &str) -> (Lane, Cluster, u64) {
    let mut opts = Options::new(bin());
    opts.extra_toml = extra_toml.to_string();
    let cluster = Cluster::start(n, opts).unwrap();
    let leader = cluster.wait_leader(FORM).await.unwrap();
    // The leader raises the cluster's version once it has heard every member: wait for that
    // entry, so that it is not in a test's count of entries.
    let raised =
        || async { cluster.status(leader).await.is_ok_and(|s| s.version.is_some_and(|v| v.active == v.supported)) };
    until("the cluster raises its version", FORM, raised).await;
    (lane, cluster, leader)
}

/// The files the nodes' failpoints are armed from (`LEAF_FAILPOINTS_FILE`), one per node.
pub(crate) struct Arms(tempfile::TempDir);

impl Arms {
    pub(crate) fn file(&self, id: u64) -> std::path::PathBuf {
        self.0.path().join(format!("failpoints-{id}"))
    }

    /// Arms node `id` with `spec` (empty: disarms it); a running node picks it up within 50 ms,
    /// a starting one at once.
    pub(crate) fn set(&self, id: u64, spec: &str) {
        std::fs::write(self.file(id), spec).unwrap();
    }

    /// Arms running node `id` of `cluster` with `spec` and waits until it has (its log says
    /// it re-armed from the file).
    pub(crate) async fn arm(&self, cluster: &Cluster, id: u64, spec: &str) {
        let log_len = || std::fs::metadata(cluster.log_path(id)).map_or(0, |m| m.len() as usize);
        let from = log_len();
        self.set(id, spec);
        let armed = || {
            let log = std::fs::read(cluster.log_path(id)).unwrap_or_default();
            String::from_utf8_lossy(&log[from.min(log.len())..]).contains("leaf failpoints armed from")
        };
        until_holds(&format!("node {id} arms {spec:?}"), Duration::from_secs(10), armed).await;
    }
}

/// An `n`-node cluster whose nodes re-arm their failpoints from [`Arms`] while running (the
/// caller holds a [`Lane`]).
pub(crate) fn armed_cluster(n: u64, extra_toml: &str) -> (Arms, Cluster) {
    let (arms, specs, opts) = armed_specs(n, extra_toml);
    (arms, Cluster::start_specs(specs, opts).unwrap())
}

/// What [`armed_cluster`] starts, for a caller that starts it otherwise (on power-cut disks).
pub(crate) fn armed_specs(n: u64, extra_toml: &str) -> (Arms, Vec<NodeSpec>, Options) {
    let arms = Arms(tempfile::tempdir().unwrap());
    let specs = (1..=n)
        .map(|id| {
            arms.set(id, "");
            let mut spec = NodeSpec::direct(id);
            spec.env = vec![("LEAF_FAILPOINTS_FILE".to_string(), arms.file(id).display().to_string())];
            spec
        })
        .collect();
    let mut opts = Options::new(bin());
    opts.extra_toml = extra_toml.to_string();
    (arms, specs, opts)
}

/// The node's journal of `tag`'s committed allocations (every node's, as this node applied them).
pub(crate) async fn journal(c: &Client, tag: &str) -> AllocationJournal {
    c.allocations(Some(tag), None).await.unwrap()
}

/// The status, code and message of a call that must fail with an API error.
pub(crate) fn api_error<T: std::fmt::Debug>(r: Result<T, ClientError>) -> (StatusCode, ErrorCode, String) {
    match r {
        Err(ClientError::Api { status, code, message }) => (status, code, message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// `clients` tasks per node, each fetching `per_client` IDs (mostly single, some batches).
pub(crate) async fn load(cluster: &Cluster, nodes: &[u64], tag: &str, clients: usize, per_client: usize) -> Vec<i64> {
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
                    got.extend(try_get_ids(&c, &tag, batch).await.unwrap_or_else(|e| panic!("node {id}: {e}")));
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
pub(crate) async fn all_allocations(cluster: &Cluster, nodes: &[u64], tag: &str) -> Vec<AllocationView> {
    // One allocation per (log index, place in a group the leader committed as one entry).
    let mut all: BTreeMap<(u64, u32), AllocationView> = BTreeMap::new();
    let mut complete = false;
    for &id in nodes {
        let j = journal(&cluster.client(id), tag).await;
        complete |= j.complete_from_index == 0;
        for a in j.allocations {
            if let Some(prev) = all.insert((a.log_index, a.position), a.clone()) {
                assert_eq!(prev, a, "nodes disagree on the allocation at log index {} ({})", a.log_index, a.position);
            }
        }
    }
    assert!(complete, "no journal among nodes {nodes:?} is complete");
    all.into_values().collect()
}

pub(crate) async fn snowflake_health(cluster: &Cluster, id: u64) -> Option<SnowflakeHealth> {
    cluster.client(id).health(HealthMode::All).await.ok().map(|r| r.health.snowflake)
}

/// Waits until node `id`'s snowflake mode is in `state`.
pub(crate) async fn wait_snowflake(cluster: &Cluster, id: u64, state: SnowflakeState) -> SnowflakeHealth {
    leaf_test_support::wait_snowflake(&cluster.client(id), state, FORM).await.snowflake
}

pub(crate) async fn snowflake_get(c: &Client, count: u32) -> Result<Vec<i64>, (StatusCode, String)> {
    // No answer at all is reported as "200" so that a test expecting a refusal fails on it.
    c.snowflake_ids("test", count).await.map_err(|e| (e.status().unwrap_or(StatusCode::OK), e.to_string()))
}

/// `rounds` batches of `batch` snowflake IDs from each node, concurrently.
pub(crate) async fn snowflake_load(cluster: &Cluster, nodes: &[u64], rounds: usize, batch: u32) -> Vec<i64> {
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

/// `/health` of node `id`: whether it answered 200 (ready in `mode`), and the report.
pub(crate) async fn health_of(cluster: &Cluster, id: u64, mode: HealthMode) -> (bool, Health) {
    let r = cluster.client(id).health(mode).await.unwrap();
    (r.ready, r.health)
}

/// Waits until node `id` has applied at least `index`.
pub async fn applied(cluster: &Cluster, id: u64, index: u64) {
    eventually(&format!("node {id} applies {index}"), FORM, || async {
        let s = cluster.status(id).await.map_err(|e| e.to_string())?;
        if s.last_applied_index.unwrap_or(0) >= index {
            Ok(())
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await
}

/// Promotes learner `id` through node `via`, retrying while it catches up.
pub(crate) async fn until_promoted(cluster: &Cluster, via: u64, id: u64) {
    until_ok(&format!("promote {id}"), || async { cluster.client(via).promote(id).await.map(|_| ()) }).await;
}

/// Retries `f` until it succeeds, for up to [`FORM`].
pub(crate) async fn until_ok<F, Fut, E>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    eventually(what, FORM, || {
        let call = f();
        async move { call.await.map_err(|e| e.to_string()) }
    })
    .await
}

/// How a crash test's nodes go down: `kill -9`, and where this machine can (root and
/// `/dev/fuse`; CI requires them) a power cut of the node's disk as well, so that a node that
/// died at a crash point also loses what it wrote and did not sync. Make it before the
/// [`Cluster`] it starts: the nodes must die before their disks go.
pub(crate) struct Down(Option<Power>);

impl Down {
    pub(crate) fn new() -> Down {
        let down = Down(Power::available().unwrap().then(|| Power::new().unwrap()));
        println!("nodes go down with power cuts: {}", down.0.is_some());
        down
    }

    /// Starts the nodes of `specs`, on power-cut disks where there are any.
    pub(crate) fn start(&mut self, specs: Vec<NodeSpec>, opts: Options) -> Cluster {
        match &mut self.0 {
            Some(power) => power.start(specs, opts).unwrap(),
            None => Cluster::start_specs(specs, opts).unwrap(),
        }
    }

    /// Node `id` goes down (if it has not died already) and, with power-cut disks, loses what
    /// it had not synced. [`Cluster::spawn`] brings it back.
    pub(crate) fn down(&mut self, cluster: &mut Cluster, id: u64) {
        match &mut self.0 {
            Some(power) => {
                let cut = power.cut_off(cluster, &[id]).unwrap();
                println!("  power cut of node {id}: {} bytes not synced taken back", cut.bytes_lost());
            }
            None => cluster.kill(id),
        }
    }
}
