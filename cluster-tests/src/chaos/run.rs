//! One chaos run: a cluster of real `leaf` processes behind per-link proxies or in network
//! namespaces of their own (or the containers of a docker-compose project, see
//! [`super::nodes`]), concurrent clients recording a history, the seeded fault schedule,
//! recovery, and the checker.
//!
//! Phases: `warmup` (no faults), `faults` (the schedule), `recovery` (heal everything; every
//! node must serve segment and snowflake IDs again within the bound), `after` (no faults),
//! then a final request of every kind on every node, the allocation journals are dumped and
//! the checker runs. With `--gapless`, the gapless workload ([`super::gapless`]) runs next to
//! the ID workload, and its series' ledgers are read from every node at the end.
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{bail, Context};
use leaf_api::profile::{DailyFormat, Profile};
use leaf_api::types::{
    AddLearnerRequest, AllocationJournal, ClockFault, ClusterStatus, CreateTagRequest, UpdateTagRequest,
};
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use super::check::{self, Recovery, Results};
use super::gapless::{self, Workload};
use super::history::{
    Event, FaultAction, FaultSubject, History, Meta, Mode, OpEvent, Phase, TagProfile, HARNESS_PROCESS,
};
use super::netns::{self, Netns};
use super::nodes::{LocalNet, Nodes, Slots};
use super::proxy::{self, Link, Proxies};
use super::schedule::{self, ClockMode, FaultKind, PlannedFault, Shape, Target};
use super::tags::ManyTags;
use crate::cluster::{free_port, node_client_sharing, Cluster, NodeSpec, Options, TOKEN};
use crate::docker::Compose;
use crate::power::Power;

/// Segment tags of the workload: (tag, step). The small step refills every few requests.
pub const TAGS: [(&str, i64); 3] = [("chaos-a", 1000), ("chaos-b", 100), ("chaos-small", 5)];

/// Tags of the other profiles (issue 19), with their step; a quarter of the segment-mode
/// requests go to them.
pub const PROFILE_TAGS: [(&str, i64, TagProfile); 4] = [
    ("chaos-mono", 20, TagProfile::Monotonic),
    ("chaos-obf", 50, TagProfile::Obfuscated),
    ("chaos-daily", 50, TagProfile::Daily(DailyFormat { digits: 8, utc_offset_minutes: 480 })),
    // Low enough that a run reaches it (restarts drop buffered segments): IDs up to the bound,
    // then `tag_exhausted`, across faults.
    ("chaos-bounded", 20, TagProfile::Bounded(BOUNDED_MAX)),
];

/// The upper bound of the workload's bounded tag.
pub const BOUNDED_MAX: i64 = 2_000;

/// The create request of a profile tag.
fn profile_request(tag: &str, step: i64, p: TagProfile) -> CreateTagRequest {
    let (profile, daily, upper_bound) = match p {
        TagProfile::Monotonic => (Profile::Monotonic, None, None),
        TagProfile::Obfuscated => (Profile::Obfuscated, None, None),
        TagProfile::Daily(f) => (Profile::Daily, Some(f.options()), None),
        TagProfile::Bounded(max) => (Profile::Segment, None, Some(max)),
    };
    CreateTagRequest { tag: tag.to_string(), step, profile: Some(profile), daily, upper_bound, ..Default::default() }
}

/// Whether `tag` is the workload's bounded tag.
fn is_bounded(tag: Option<&str>) -> bool {
    PROFILE_TAGS.iter().any(|(t, _, p)| Some(*t) == tag && matches!(p, TagProfile::Bounded(_)))
}

/// Every tag of the workload, for the recovery checks.
fn all_tags() -> impl Iterator<Item = &'static str> {
    TAGS.iter().map(|(t, _)| *t).chain(PROFILE_TAGS.iter().map(|(t, _, _)| *t))
}
/// Snowflake key of the workload.
pub const SNOWFLAKE_KEY: &str = "chaos";
/// Default snowflake epoch of the nodes (`snowflake.epoch_ms`).
const EPOCH_MS: i64 = 1_288_834_974_657;

/// Node configuration of a chaos run: fault injection on, the dynamic step capped so the
/// small tag keeps refilling, snapshots often enough that restarted and new nodes catch up from
/// them, and sled's files rewritten from 1 MiB, so that rewrites meet the faults.
const NODE_TOML: &str = "[fault]\nenabled = true\n[segment]\nmax_step = 50\n\
                         [raft]\nsnapshot_every = 1000\nkeep_logs_after_snapshot = 500\nrewrite_above_mib = 1\n\
                         [auth]\nanonymous_gapless = true\n";

/// [`NODE_TOML`] as a release before owned gapless numbers reads it (an upgrade run's start).
const NODE_TOML_EARLIER: &str = "[fault]\nenabled = true\n[segment]\nmax_step = 50\n\
                                 [raft]\nsnapshot_every = 1000\nkeep_logs_after_snapshot = 500\nrewrite_above_mib = 1\n";

/// The same settings for containers, as environment variables.
const NODE_ENV: [(&str, &str); 6] = [
    ("LEAF_FAULT__ENABLED", "true"),
    ("LEAF_SEGMENT__MAX_STEP", "50"),
    ("LEAF_RAFT__SNAPSHOT_EVERY", "1000"),
    ("LEAF_RAFT__KEEP_LOGS_AFTER_SNAPSHOT", "500"),
    ("LEAF_RAFT__REWRITE_ABOVE_MIB", "1"),
    ("LEAF_AUTH__ANONYMOUS_GAPLESS", "true"),
];

/// The compose override of a chaos run: [`NODE_ENV`] on every service, and no restart
/// policy, so a killed container stays down until the harness starts it. It also declares a
/// spare service `leaf<N+1>` (not started by `up`), where the first replacement node runs,
/// and lists it in the `certs` service, so the certificate of whatever node ID it gets is
/// issued when it starts; later replacements reuse the services of removed nodes.
fn compose_override(nodes: u64) -> String {
    let spare = nodes + 1;
    let mut s = String::from("version: \"3.8\"\nservices:\n");
    s.push_str("  certs:\n    command:\n      - certs\n      - bundle\n      - --dir=/tls\n      - --ca-dir=/ca\n");
    for i in 1..=spare {
        s.push_str(&format!("      - --node=${{LEAF{i}_NODE_ID:-{i}}}=leaf{i},127.0.0.1,localhost\n"));
    }
    for id in 1..=nodes {
        s.push_str(&format!("  leaf{id}:\n    restart: \"no\"\n    environment:\n"));
        for (k, v) in NODE_ENV {
            s.push_str(&format!("      {k}: \"{v}\"\n"));
        }
    }
    let peers: Vec<String> = (1..=nodes).map(|i| format!("{i}=leaf{i}:8080")).collect();
    s.push_str(&format!(
        "  leaf{spare}:
    image: ${{LEAF_IMAGE:-leaf:latest}}
    restart: \"no\"
    stop_grace_period: 15s
    hostname: leaf{spare}
    depends_on:
      certs:
        condition: service_completed_successfully
    environment:
      LEAF_NODE_ID: \"${{LEAF{spare}_NODE_ID:-{spare}}}\"
      LEAF_PEERS: \"{peers}\"
      LEAF_CLUSTER_SECRET: \"${{LEAF_CLUSTER_SECRET}}\"
      LEAF_ADMIN_TOKEN: \"${{LEAF_ADMIN_TOKEN}}\"
      LEAF_TLS__CERT: \"/tls/node-{{node_id}}.pem\"
      LEAF_TLS__KEY: \"/tls/node-{{node_id}}-key.pem\"
      LEAF_TLS__CA: \"/tls/ca.pem\"
      LEAF_URL: \"https://127.0.0.1:8080\"
      LEAF_CA: \"/tls/ca.pem\"
      LEAF_BOOTSTRAP_TAGS: \"[]\"
      RUST_LOG: \"${{RUST_LOG:-info,openraft=warn,sled=warn}}\"
",
        peers = peers.join(",")
    ));
    for (k, v) in NODE_ENV {
        s.push_str(&format!("      {k}: \"{v}\"\n"));
    }
    s.push_str(&format!(
        "    healthcheck:
      test: [\"CMD\", \"/leaf\", \"health\", \"--quiet\"]
      interval: 5s
      timeout: 4s
      retries: 3
      start_period: 20s
    ports:
      - \"127.0.0.1:${{LEAF{spare}_PORT}}:8080\"
    volumes:
      - leaf{spare}-data:/data
      - leaf-tls:/tls:ro
    networks:
      - leaf
volumes:
  leaf{spare}-data:
"
    ));
    s
}

/// A run against a docker-compose cluster instead of local processes.
#[derive(Debug, Clone)]
pub struct DockerTarget {
    /// The compose file (`deploy/docker-compose.yml` or `deploy/docker-compose.5.yml`).
    pub compose_file: PathBuf,
    /// The image the services run.
    pub image: String,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub nodes: u64,
    /// Warmup + fault phase + after phase (recovery comes on top).
    pub duration: Duration,
    pub seed: u64,
    pub faults: Vec<FaultKind>,
    /// Concurrent client workers (one outstanding request each).
    pub clients: u32,
    /// Target operations per second over all clients.
    pub rate: u32,
    /// Where history, results and logs go.
    pub out: PathBuf,
    /// The `leaf` binary (local runs).
    pub bin: PathBuf,
    /// Run against this docker-compose cluster instead of local processes.
    pub docker: Option<DockerTarget>,
    /// Local processes in network namespaces of their own (root) instead of behind proxies.
    pub netns: bool,
    /// How long every node may take to serve again after everything is healed.
    pub recovery_bound: Duration,
    /// Per-request timeout of the clients.
    pub request_timeout: Duration,
    /// With more than 0: that many further tags, created before the run, take half of the
    /// segment requests, picked by a Zipf distribution of exponent `zipf_s`
    /// ([`super::tags`]).
    pub tags: usize,
    pub zipf_s: f64,
    /// Adds the gapless workload ([`super::gapless`]): two series, [`gapless::workers`]
    /// dedicated workers.
    pub gapless: bool,
    /// Every power cut hits every node at once (else one node, a minority, a majority or all,
    /// as the schedule drew).
    pub power_cut_all: bool,
    /// A rolling upgrade run: the nodes start on this (earlier) `leaf`, and at the start of the
    /// fault phase each is replaced by [`RunConfig::bin`], the leader last ([`Harness::upgrade`]).
    /// The clients then carry the admin token: a release before owned gapless numbers refuses
    /// a settlement secret, and takes a token's settlements.
    pub upgrade_from: Option<PathBuf>,
}

/// Starts the local nodes of `specs`, on power-cut disks when the run has power cuts.
fn local_cluster(cfg: &RunConfig, specs: Vec<NodeSpec>) -> anyhow::Result<(Cluster, Option<Power>)> {
    let mut opts = Options::new(cfg.upgrade_from.as_ref().unwrap_or(&cfg.bin));
    opts.extra_toml = if cfg.upgrade_from.is_some() { NODE_TOML_EARLIER } else { NODE_TOML }.to_string();
    if !cfg.faults.contains(&FaultKind::PowerCut) {
        return Ok((Cluster::start_specs(specs, opts)?, None));
    }
    if !Power::available()? {
        bail!("power-cut faults need root and /dev/fuse");
    }
    let mut power = Power::new()?;
    let cluster = tokio::task::block_in_place(|| power.start(specs, opts))?;
    Ok((cluster, Some(power)))
}

/// The phase lengths of a run of `duration`: warmup, faults, after.
pub fn phases(duration: Duration) -> (Duration, Duration, Duration) {
    let edge = (duration / 10).clamp(Duration::from_secs(5), Duration::from_secs(15));
    let faults = duration.saturating_sub(2 * edge).max(Duration::from_secs(10));
    (edge, faults, edge)
}

/// The nodes the clients send requests to, with a client each.
type Targets = Arc<RwLock<BTreeMap<u64, Client>>>;

/// A membership change the harness makes while replacing a node.
enum Membership {
    AddLearner(AddLearnerRequest),
    Promote(u64),
    Remove(u64),
}

/// Issues one operation and records its invocation and completion.
struct Ops {
    history: Arc<History>,
    next: AtomicU64,
}

enum Outcome {
    Ok,
    Fail(String),
}

impl Ops {
    async fn run(
        &self,
        process: u32,
        node: u64,
        client: &Client,
        mode: Mode,
        tag: Option<&str>,
        count: u32,
    ) -> Outcome {
        let op = self.next.fetch_add(1, Ordering::Relaxed);
        let inv = OpEvent {
            op,
            process,
            time_ns: self.history.now_ns(),
            mode,
            tag: tag.map(str::to_string),
            node,
            count,
            status: None,
            ids: Vec::new(),
            error: None,
        };
        self.history.write(&Event::Invoke(inv.clone()));
        let res = match (mode, tag, count) {
            (Mode::Segment, Some(t), 1) => client.segment_id(t).await.map(|id| vec![id]),
            (Mode::Segment, Some(t), n) => client.segment_ids(t, n).await,
            (_, _, 1) => client.snowflake_id(SNOWFLAKE_KEY).await.map(|id| vec![id]),
            (_, _, n) => client.snowflake_ids(SNOWFLAKE_KEY, n).await,
        };
        let time_ns = self.history.now_ns();
        let (event, outcome) = match res {
            Ok(ids) => (Event::Ok(OpEvent { time_ns, status: Some(200), ids, ..inv }), Outcome::Ok),
            // An error answer: the request definitely failed.
            Err(ClientError::Api { status, code, message }) => {
                let error = format!("{}: {message}", code.as_str());
                (
                    Event::Fail(OpEvent { time_ns, status: Some(status.as_u16()), error: Some(error.clone()), ..inv }),
                    Outcome::Fail(format!("{status} {error}")),
                )
            }
            Err(ClientError::Decode { status, message, .. }) if !status.is_success() => (
                Event::Fail(OpEvent { time_ns, status: Some(status.as_u16()), error: Some(message.clone()), ..inv }),
                Outcome::Fail(format!("{status} {message}")),
            ),
            // A 200 with IDs that are not what was asked for.
            Err(e @ ClientError::Decode { .. }) => {
                let error = e.to_string();
                (
                    Event::Info(OpEvent { time_ns, status: Some(200), error: Some(error.clone()), ..inv }),
                    Outcome::Fail(error),
                )
            }
            // No answer (or one attempt's answer lost): the outcome is unknown.
            Err(e) => {
                let error = e.to_string();
                (Event::Info(OpEvent { time_ns, error: Some(error.clone()), ..inv }), Outcome::Fail(error))
            }
        };
        self.history.write(&event);
        outcome
    }
}

/// A client worker: one outstanding request at a time, to a random node, paced to its share
/// of the rate.
async fn worker(
    process: u32,
    seed: u64,
    period: Duration,
    ops: Arc<Ops>,
    targets: Targets,
    many: Option<Arc<ManyTags>>,
    stop: Arc<AtomicBool>,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(process) << 32));
    while !stop.load(Ordering::Relaxed) {
        let started = Instant::now();
        let pick = {
            let t = targets.read().unwrap_or_else(|e| e.into_inner());
            let nodes: Vec<(&u64, &Client)> = t.iter().collect();
            nodes.choose(&mut rng).map(|(id, c)| (**id, (*c).clone()))
        };
        if let Some((node, client)) = pick {
            let batch = rng.gen_bool(0.2);
            if rng.gen_bool(0.6) {
                let tag = match &many {
                    Some(m) if rng.gen_bool(0.5) => m.pick(&mut rng),
                    _ if rng.gen_bool(0.25) => PROFILE_TAGS[rng.gen_range(0..PROFILE_TAGS.len())].0.to_string(),
                    _ => TAGS[rng.gen_range(0..TAGS.len())].0.to_string(),
                };
                let count = if batch { rng.gen_range(2..=50) } else { 1 };
                ops.run(process, node, &client, Mode::Segment, Some(&tag), count).await;
            } else {
                let count = if batch { rng.gen_range(2..=100) } else { 1 };
                ops.run(process, node, &client, Mode::Snowflake, None, count).await;
            }
        }
        let jitter = period.mul_f64(rng.gen_range(0.5..1.5));
        tokio::time::sleep(jitter.saturating_sub(started.elapsed())).await;
    }
}

/// Stops the gapless workers at once when dropped.
struct AbortOnDrop(Arc<Workload>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sets the flag when dropped.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The harness's side of a run: the nodes and the bookkeeping of faults.
struct Harness {
    nodes: Nodes,
    history: Arc<History>,
    ops: Arc<Ops>,
    targets: Targets,
    /// Current voters, in the harness's view.
    members: Vec<u64>,
    next_id: u64,
    workers_seen: BTreeSet<(u64, u16)>,
    request_timeout: Duration,
    /// Allocation journals of removed nodes, taken just before they were stopped: with them,
    /// the journals still cover the whole log after every original node has been replaced.
    removed_journals: Vec<AllocationJournal>,
    /// Clock offset of each node as last set (a restart resets it to 0).
    offsets: BTreeMap<u64, i64>,
    /// The many-tags workload, if the run has one.
    many: Option<Arc<ManyTags>>,
    /// The gapless workload, if the run has one (from when its series exist).
    gapless: Option<Arc<Workload>>,
    /// What the harness's clients created: shared, so each reads the others' creates.
    created: leaf_client::OwnCreates,
    /// See [`RunConfig::power_cut_all`].
    power_cut_all: bool,
    /// The workload's clients carry the admin token (an upgrade run, [`RunConfig::upgrade_from`]).
    token_clients: bool,
}

impl Harness {
    fn admin(&self, id: u64) -> Client {
        self.admin_with(id, Duration::from_secs(2))
    }

    fn admin_with(&self, id: u64, timeout: Duration) -> Client {
        node_client_sharing(&self.nodes.url(id), Some(TOKEN), self.nodes.ca().as_deref(), timeout, self.created.clone())
    }

    fn fault(&self, kind: impl Into<FaultSubject>, action: FaultAction, nodes: &[u64], detail: impl Into<String>) {
        self.record_fault(kind, action, nodes, detail.into(), None);
    }

    fn record_fault(
        &self,
        kind: impl Into<FaultSubject>,
        action: FaultAction,
        nodes: &[u64],
        detail: String,
        cut: Option<u64>,
    ) {
        let kind = kind.into();
        println!("[{:7.1}s] {kind} {action} {nodes:?} {detail}", self.history.now_ns() as f64 / 1e9);
        self.history.write(&Event::Fault {
            time_ns: self.history.now_ns(),
            kind,
            action,
            nodes: nodes.to_vec(),
            detail,
            cut,
        });
    }

    fn phase(&self, phase: Phase) {
        println!("[{:7.1}s] phase {}", self.history.now_ns() as f64 / 1e9, phase.name());
        self.history.write(&Event::Phase { time_ns: self.history.now_ns(), phase });
    }

    async fn status(&self, id: u64) -> Option<ClusterStatus> {
        let status = self.admin(id).cluster_status().await.ok()?;
        // Another node answering at node `id`'s address (a port mix-up in the harness) would
        // make every later check wrong: it counts as no answer, and says so.
        if status.node_id != id {
            eprintln!("chaos: node {id}'s address was answered by node {}; not counted", status.node_id);
            return None;
        }
        Some(status)
    }

    /// The leader most running members agree on, if any.
    async fn leader(&self) -> Option<u64> {
        let mut votes: BTreeMap<u64, usize> = BTreeMap::new();
        for &id in &self.members {
            if let Some(l) = self.status(id).await.and_then(|s| s.leader_id) {
                *votes.entry(l).or_default() += 1;
            }
        }
        votes.into_iter().filter(|(l, _)| self.members.contains(l)).max_by_key(|(_, n)| *n).map(|(l, _)| l)
    }

    /// Waits until most members agree on a leader.
    async fn wait_leader(&self, bound: Duration) -> anyhow::Result<u64> {
        let deadline = Instant::now() + bound;
        loop {
            if let Some(leader) = self.leader().await {
                return Ok(leader);
            }
            if Instant::now() >= deadline {
                bail!("no leader after {bound:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Records the worker ID of every node that reports one.
    async fn record_workers(&mut self) {
        for &id in &self.members.clone() {
            let Some(s) = self.status(id).await else { continue };
            for w in s.workers {
                if self.workers_seen.insert((w.node_id, w.worker_id)) {
                    self.history.write(&Event::Worker {
                        time_ns: self.history.now_ns(),
                        node: w.node_id,
                        worker_id: w.worker_id,
                    });
                }
            }
        }
    }

    /// The nodes a role names now.
    async fn resolve(&self, target: Target, rng: &mut StdRng) -> Vec<u64> {
        let n = self.members.len();
        let mut shuffled = self.members.clone();
        shuffled.shuffle(rng);
        let leader = self.leader().await;
        match target {
            Target::Leader => vec![leader.unwrap_or(shuffled[0])],
            Target::Follower => {
                vec![shuffled.iter().copied().find(|id| Some(*id) != leader).unwrap_or(shuffled[0])]
            }
            Target::Minority => shuffled[..((n - 1) / 2).max(1)].to_vec(),
            Target::Majority => shuffled[..n / 2 + 1].to_vec(),
            Target::All => shuffled,
        }
    }

    fn spawn(&mut self, id: u64) -> anyhow::Result<()> {
        // A restarted node's injected clock offset is gone.
        self.history.write(&Event::Clock { time_ns: self.history.now_ns(), node: id, offset_ms: 0 });
        self.offsets.insert(id, 0);
        self.nodes.start(id)
    }

    /// Applies a container or process fault to each of `nodes`; a failure is recorded and the
    /// remaining nodes still get theirs. Returns the nodes it was applied to.
    fn each(&mut self, kind: FaultKind, nodes: &[u64], f: fn(&mut Nodes, u64) -> anyhow::Result<()>) -> Vec<u64> {
        let mut done = Vec::new();
        for &id in nodes {
            match f(&mut self.nodes, id) {
                Ok(()) => done.push(id),
                Err(e) => self.fault(kind, FaultAction::Error, &[id], format!("{e:#}")),
            }
        }
        done
    }

    /// Restarts each of `nodes`; a failure is recorded and the others are still restarted.
    fn spawn_each(&mut self, kind: impl Into<FaultSubject> + Copy, nodes: &[u64]) {
        for &id in nodes {
            if let Err(e) = self.spawn(id) {
                self.fault(kind, FaultAction::Error, &[id], format!("restart failed: {e:#}"));
            }
        }
    }

    /// Sets node `id`'s clock offset. The change is recorded before it is sent (it may land
    /// any time until the answer); if it fails, the previous offset is recorded again.
    async fn set_clock(&mut self, id: u64, offset_ms: i64) {
        self.history.write(&Event::Clock { time_ns: self.history.now_ns(), node: id, offset_ms });
        let res = self.admin(id).set_clock_fault(&ClockFault { offset_ms }).await;
        if res.is_ok() {
            self.offsets.insert(id, offset_ms);
        } else {
            let previous = self.offsets.get(&id).copied().unwrap_or(0);
            self.history.write(&Event::Clock { time_ns: self.history.now_ns(), node: id, offset_ms: previous });
            self.fault(
                FaultKind::Clock,
                FaultAction::Error,
                &[id],
                format!("setting offset {offset_ms} ms failed: {res:?}"),
            );
        }
    }

    /// Waits until node `id` reports ready.
    async fn wait_ready(&self, id: u64, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        while Instant::now() < deadline {
            if self.status(id).await.is_some_and(|s| s.health.ready) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Runs one planned fault to completion (injected, held, healed).
    async fn inject(&mut self, f: &PlannedFault) -> anyhow::Result<()> {
        if self.members.len() < 3 {
            bail!("only {} members left; not injecting", self.members.len());
        }
        let mut rng = StdRng::seed_from_u64(f.pick);
        let hold = Duration::from_millis(f.hold_ms);
        let kind = f.kind;
        match f.kind {
            FaultKind::Kill => {
                let nodes = self.resolve(f.target, &mut rng).await;
                // Only the nodes the fault reached are recorded as faulted.
                let nodes = self.each(kind, &nodes, Nodes::kill);
                if nodes.is_empty() {
                    return Ok(());
                }
                self.fault(kind, FaultAction::Start, &nodes, format!("kill -9 {:?} for {} ms", f.target, f.hold_ms));
                tokio::time::sleep(hold).await;
                self.spawn_each(kind, &nodes);
                self.fault(kind, FaultAction::Heal, &nodes, "restarted");
            }
            FaultKind::PowerCut => {
                let target = if self.power_cut_all { Target::All } else { f.target };
                let nodes = self.resolve(target, &mut rng).await;
                let lost = match self.nodes.power_cut(&nodes) {
                    Ok(lost) => lost,
                    Err(e) => {
                        self.fault(kind, FaultAction::Error, &nodes, format!("{e:#}"));
                        self.spawn_each(kind, &nodes);
                        return Ok(());
                    }
                };
                self.fault(
                    kind,
                    FaultAction::Start,
                    &nodes,
                    format!("power cut {target:?} for {} ms: {lost} unsynced bytes gone", f.hold_ms),
                );
                tokio::time::sleep(hold).await;
                self.spawn_each(kind, &nodes);
                self.fault(kind, FaultAction::Heal, &nodes, "power back, restarted");
            }
            FaultKind::Pause => {
                let nodes = self.resolve(f.target, &mut rng).await;
                let nodes = self.each(kind, &nodes, |n, id| n.pause(id));
                if nodes.is_empty() {
                    return Ok(());
                }
                self.fault(kind, FaultAction::Start, &nodes, format!("SIGSTOP {:?} for {} ms", f.target, f.hold_ms));
                tokio::time::sleep(hold).await;
                self.each(kind, &nodes, |n, id| n.resume(id));
                self.fault(kind, FaultAction::Heal, &nodes, "SIGCONT");
            }
            FaultKind::Partition => {
                let mut order = self.members.clone();
                order.shuffle(&mut rng);
                let shape = f.shape.unwrap_or(Shape::Halves);
                let leader = if shape == Shape::IsolateLeader { self.leader().await } else { None };
                let detail = match self.nodes.partition(&order, shape, leader) {
                    Ok(d) => d,
                    Err(e) => {
                        // Not recorded as a partition: undo whatever part of it was made.
                        self.fault(kind, FaultAction::Error, &order, format!("partition failed: {e:#}"));
                        self.nodes.heal_links()?;
                        return Ok(());
                    }
                };
                self.fault(kind, FaultAction::Start, &order, format!("{detail} for {} ms", f.hold_ms));
                tokio::time::sleep(hold).await;
                let cut = self.nodes.heal_links()?;
                let detail = match self.nodes {
                    Nodes::Local { net: LocalNet::Proxies { .. }, .. } => {
                        format!("all links open; {cut} connections were blackholed or cut")
                    }
                    Nodes::Local { net: LocalNet::Netns { .. }, .. } => {
                        format!("all links open; {cut} packets were dropped")
                    }
                    Nodes::Docker { .. } => {
                        format!("all connected again; a connected peer could not reach {cut} of the cut-off containers")
                    }
                };
                self.record_fault(kind, FaultAction::Heal, &order, detail, Some(cut));
            }
            FaultKind::Clock => {
                let nodes = self.resolve(f.target, &mut rng).await;
                match f.clock.unwrap_or(ClockMode::Skew { offset_ms: 100 }) {
                    ClockMode::Skew { offset_ms } => {
                        self.fault(
                            kind,
                            FaultAction::Start,
                            &nodes,
                            format!("skew {offset_ms} ms for {} ms", f.hold_ms),
                        );
                        for &id in &nodes {
                            self.set_clock(id, offset_ms).await;
                        }
                        tokio::time::sleep(hold).await;
                    }
                    ClockMode::Strobe { offset_ms, period_ms } => {
                        self.fault(
                            kind,
                            FaultAction::Start,
                            &nodes,
                            format!("strobe 0 <-> {offset_ms} ms every {period_ms} ms for {} ms", f.hold_ms),
                        );
                        let end = Instant::now() + hold;
                        let mut on = true;
                        while Instant::now() < end {
                            for &id in &nodes {
                                self.set_clock(id, if on { offset_ms } else { 0 }).await;
                            }
                            on = !on;
                            tokio::time::sleep(Duration::from_millis(period_ms)).await;
                        }
                    }
                }
                for &id in &nodes {
                    self.set_clock(id, 0).await;
                }
                self.fault(kind, FaultAction::Heal, &nodes, "offset 0");
            }
            FaultKind::Restart => {
                let mut order = self.members.clone();
                order.shuffle(&mut rng);
                self.fault(kind, FaultAction::Start, &order, "rolling restart (SIGTERM, start, wait until ready)");
                for &id in &order {
                    let clean = match self.nodes.stop(id) {
                        Ok(clean) => clean,
                        Err(e) => {
                            self.fault(kind, FaultAction::Error, &[id], format!("stop failed: {e:#}"));
                            false
                        }
                    };
                    self.spawn_each(kind, &[id]);
                    let ready = self.wait_ready(id, Duration::from_secs(30)).await;
                    self.fault(
                        kind,
                        FaultAction::Step,
                        &[id],
                        format!("restarted (clean exit {clean}, ready {ready})"),
                    );
                    if !ready {
                        self.fault(kind, FaultAction::Error, &[id], "not ready 30 s after restart");
                    }
                }
                self.fault(kind, FaultAction::Heal, &order, "every node restarted");
            }
            FaultKind::Link => {
                if !self.nodes.supports(FaultKind::Link) {
                    bail!("link faults need the namespace backend (--netns)");
                }
                let mut order = self.members.clone();
                order.shuffle(&mut rng);
                let shape = f.shape.unwrap_or(Shape::OneWay);
                let leader = self.leader().await;
                let detail = match self.nodes.partition(&order, shape, leader) {
                    Ok(d) => d,
                    Err(e) => {
                        self.fault(kind, FaultAction::Error, &order, format!("{e:#}"));
                        self.nodes.heal_links()?;
                        return Ok(());
                    }
                };
                self.fault(kind, FaultAction::Start, &order, format!("{detail} for {} ms", f.hold_ms));
                if let Shape::Flapping { period_ms } = shape {
                    let end = Instant::now() + hold;
                    let period = Duration::from_millis(period_ms);
                    loop {
                        tokio::time::sleep(period.min(end.saturating_duration_since(Instant::now()))).await;
                        self.nodes.open_links()?;
                        if Instant::now() + period >= end {
                            break;
                        }
                        tokio::time::sleep(period).await;
                        self.nodes.partition(&order, shape, leader)?;
                    }
                } else {
                    tokio::time::sleep(hold).await;
                }
                let dropped = self.nodes.heal_links()?;
                self.record_fault(
                    kind,
                    FaultAction::Heal,
                    &order,
                    format!("all links open; {dropped} packets were dropped"),
                    Some(dropped),
                );
            }
            FaultKind::Netem => {
                if !self.nodes.supports(FaultKind::Netem) {
                    bail!("netem faults need the namespace backend (--netns)");
                }
                let netem = f.netem.unwrap_or(netns::Netem {
                    delay_ms: 50,
                    jitter_ms: 10,
                    loss_pct: 5,
                    reorder_pct: 10,
                    rate_kbit: 2000,
                });
                // Every link from the leader (if known) and a random half of the others.
                let leader = self.leader().await;
                let mut links = BTreeSet::<Link>::new();
                for &a in &self.members {
                    for &b in &self.members {
                        if a != b && (Some(a) == leader || rng.gen_bool(0.5)) {
                            links.insert((a, b));
                        }
                    }
                }
                if let Err(e) = self.nodes.degrade(&links, &netem) {
                    self.fault(kind, FaultAction::Error, &self.members.clone(), format!("{e:#}"));
                    self.nodes.undegrade()?;
                    return Ok(());
                }
                let nodes: Vec<u64> = links.iter().map(|(a, _)| *a).collect::<BTreeSet<_>>().into_iter().collect();
                let has_netem = self.nodes.netns().is_some_and(|n| n.has_netem());
                self.fault(
                    kind,
                    FaultAction::Start,
                    &nodes,
                    format!(
                        "{} delay {} ms ± {} ms, reorder {}%, loss {}%, {} kbit/s on {links:?} for {} ms",
                        if has_netem { "netem" } else { "NFQUEUE" },
                        netem.delay_ms,
                        netem.jitter_ms,
                        netem.reorder_pct,
                        netem.loss_pct,
                        netem.rate_kbit,
                        f.hold_ms
                    ),
                );
                tokio::time::sleep(hold).await;
                let done = self.nodes.undegrade()?;
                let delayed = match has_netem {
                    true => String::new(),
                    false => format!(
                        ", {} of {} packets were delayed and {} reordered",
                        done.delay.delayed, done.delay.packets, done.delay.reordered
                    ),
                };
                self.fault(
                    kind,
                    FaultAction::Heal,
                    &nodes,
                    format!("links restored; the loss rules dropped {} packets{delayed}", done.lost),
                );
            }
            FaultKind::Membership => {
                if !self.nodes.supports(FaultKind::Membership) {
                    bail!("membership faults are not supported by this backend");
                }
                if let Some(&old) = self.resolve(f.target, &mut rng).await.first() {
                    self.replace(old).await?;
                }
            }
        }
        self.record_workers().await;
        Ok(())
    }

    /// Sends a membership change to the members in turn until one succeeds (or answers
    /// `also_done`, meaning it is already in effect), for up to 30 s.
    async fn admin_until(&self, change: &Membership, also_done: Option<ErrorCode>) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = String::new();
        while Instant::now() < deadline {
            for &id in &self.members {
                let c = self.admin_with(id, Duration::from_secs(12));
                let res = match change {
                    Membership::AddLearner(req) => c.add_learner(req).await,
                    Membership::Promote(node) => c.promote(*node).await,
                    Membership::Remove(node) => c.remove(*node).await,
                };
                match res {
                    Ok(_) => return Ok(()),
                    Err(e) if also_done.is_some() && e.code() == also_done => return Ok(()),
                    Err(e) => last = format!("node {id}: {e}"),
                }
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(last)
    }

    /// Replaces member `old` by a fresh node ID: start it, add it as learner, promote it,
    /// remove `old`, stop `old`.
    async fn replace(&mut self, old: u64) -> anyhow::Result<()> {
        let new = self.next_id;
        self.next_id += 1;
        let proxy_addr = match &mut self.nodes {
            Nodes::Local { cluster, net, power } => {
                let spec = match net {
                    LocalNet::Proxies { proxies, .. } => {
                        let port = free_port();
                        let proxy_addr = proxies.add(new, ([127, 0, 0, 1], port).into()).await?;
                        let env = vec![("LEAF_RAFT__SOURCE_IP".to_string(), proxy::source_ip(new)?.to_string())];
                        NodeSpec { port, peer_addr: proxy_addr.to_string(), env, ..NodeSpec::direct(new) }
                    }
                    LocalNet::Netns { net, .. } => {
                        tokio::task::block_in_place(|| net.add(new))?;
                        net.node_spec(new)
                    }
                };
                let proxy_addr = spec.peer_addr.clone();
                match power {
                    Some(power) => {
                        cluster.prepare_node(spec)?;
                        tokio::task::block_in_place(|| power.wire(cluster, &[new]))?;
                        cluster.spawn(new)?;
                    }
                    None => cluster.add_node(spec)?,
                }
                proxy_addr
            }
            Nodes::Docker { .. } => self.nodes.start_in_container(new)?,
        };
        self.history.write(&Event::Clock { time_ns: self.history.now_ns(), node: new, offset_ms: 0 });
        self.fault(
            FaultKind::Membership,
            FaultAction::Start,
            &[old, new],
            format!("replace node {old} by new node {new}"),
        );
        // A log purged before the new node is added can reach it only as a snapshot.
        let purged = match self.leader().await {
            Some(l) => self.status(l).await.and_then(|s| s.purged_index),
            None => None,
        };
        let joined = match purged {
            Some(p) if p > 0 => format!("joined from a snapshot: the leader's log was purged through {p}"),
            // A purge after this read may still send it a snapshot.
            _ => "the leader's log was not purged at the add".to_string(),
        };
        let add = Membership::AddLearner(AddLearnerRequest { node_id: new, addr: proxy_addr.to_string() });
        let steps = async {
            self.admin_until(&add, Some(ErrorCode::MemberExists)).await.map_err(|e| format!("add learner: {e}"))?;
            self.admin_until(&Membership::Promote(new), None).await.map_err(|e| format!("promote: {e}"))?;
            Ok::<(), String>(())
        };
        if let Err(e) = steps.await {
            self.fault(FaultKind::Membership, FaultAction::Error, &[new], format!("{e}; removing the new node again"));
            match self.admin_until(&Membership::Remove(new), Some(ErrorCode::MemberNotFound)).await {
                Ok(()) => {
                    self.nodes.retire(new)?;
                }
                Err(e) => {
                    // It may be a voter by now: keep it running and treat it as a member, so
                    // the heal restarts it and the final checks include it.
                    self.fault(
                        FaultKind::Membership,
                        FaultAction::Error,
                        &[new],
                        format!("removing it failed too ({e}); it stays"),
                    );
                    self.members.push(new);
                    self.targets.write().unwrap_or_else(|e| e.into_inner()).insert(new, self.client(new));
                }
            }
            return Ok(());
        }
        self.members.push(new);
        self.targets.write().unwrap_or_else(|e| e.into_inner()).insert(new, self.client(new));
        self.record_workers().await;
        if let Err(e) = self.admin_until(&Membership::Remove(old), Some(ErrorCode::MemberNotFound)).await {
            self.fault(FaultKind::Membership, FaultAction::Error, &[old], format!("remove: {e}; node {old} stays"));
            return Ok(());
        }
        self.members.retain(|id| *id != old);
        self.targets.write().unwrap_or_else(|e| e.into_inner()).remove(&old);
        match self.journal(old).await {
            Ok(j) => self.removed_journals.push(j),
            Err(e) => self.fault(
                FaultKind::Membership,
                FaultAction::Error,
                &[old],
                format!("journal of the removed node: {e:#}"),
            ),
        }
        self.nodes.retire(old)?;
        self.fault(
            FaultKind::Membership,
            FaultAction::Heal,
            &[old, new],
            format!("node {new} is a voter ({joined}), node {old} removed and stopped"),
        );
        Ok(())
    }

    fn client(&self, id: u64) -> Client {
        let (url, ca) = (self.nodes.url(id), self.nodes.ca());
        let token = self.token_clients.then_some(TOKEN);
        node_client_sharing(&url, token, ca.as_deref(), self.request_timeout, self.created.clone())
    }

    /// Stops node `id` (SIGTERM), starts it on `bin` and waits until it is ready.
    async fn restart_on(&mut self, id: u64, bin: &std::path::Path, what: &str) -> anyhow::Result<()> {
        let clean = self.nodes.stop(id)?;
        self.nodes.set_bin(id, bin)?;
        self.nodes.start(id)?;
        if !self.wait_ready(id, Duration::from_secs(60)).await {
            bail!("node {id} was not ready within 60 s of its {what}");
        }
        self.fault(FaultKind::Restart, FaultAction::Step, &[id], format!("{what} (clean exit {clean}, ready)"));
        Ok(())
    }

    /// Replaces every member's `leaf` (`old`) by `new`, one at a time and the leader last:
    /// SIGTERM, start on the same data, wait until ready. The first follower goes back to
    /// `old` once first (a downgrade before the cluster's version is raised works). Then it
    /// waits until every node runs the newest cluster version it supports, and uses a feature
    /// of that version: the gapless series' limits (`gapless`), set to the widest. Last, a
    /// follower started on `old` again must refuse to start, and comes back on `new`.
    /// Recorded as a rolling restart; any failure is the run's fault error.
    async fn upgrade(
        &mut self,
        (old, new): (&std::path::Path, &std::path::Path),
        gapless: &[String],
    ) -> anyhow::Result<()> {
        let kind = FaultKind::Restart;
        let leader = self.wait_leader(Duration::from_secs(30)).await?;
        let mut order: Vec<u64> = self.members.iter().copied().filter(|id| *id != leader).collect();
        order.push(leader);
        self.fault(
            kind,
            FaultAction::Start,
            &order,
            format!("rolling upgrade to {}, leader {leader} last", new.display()),
        );
        let first = order[0];
        self.restart_on(first, new, "upgrade").await?;
        self.restart_on(first, old, "downgrade before the version is raised").await?;
        for &id in &order {
            self.restart_on(id, new, "upgrade").await?;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        let version = loop {
            let mut versions = BTreeSet::new();
            for &id in &self.members {
                let v = self.admin(id).cluster_status().await.ok().and_then(|s| s.version);
                versions.insert(v.filter(|v| v.active == v.supported).map(|v| v.active));
            }
            match versions.into_iter().collect::<Vec<_>>().as_slice() {
                [Some(v)] => break *v,
                other if Instant::now() >= deadline => {
                    bail!("the cluster version was not raised on every node within 60 s: {other:?}")
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        self.fault(
            kind,
            FaultAction::Step,
            &self.members.clone(),
            format!("every node runs cluster version {version}"),
        );
        // Going back now is refused: the earlier release cannot read the raised state.
        let leader = self.wait_leader(Duration::from_secs(30)).await?;
        let follower = self.members.iter().copied().find(|id| *id != leader).context("no follower")?;
        self.nodes.stop(follower)?;
        self.nodes.set_bin(follower, old)?;
        self.nodes.start(follower)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.nodes.alive_and_thawed(follower)? {
            if Instant::now() >= deadline {
                bail!("node {follower} started on the earlier release after the version was raised, and kept running");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let why = self.nodes.log_tail(follower, 5);
        let line = why.lines().rev().find(|l| l.contains("error") || l.contains("Error")).unwrap_or(&why);
        let refusal: String = line.chars().map(|c| if c.is_control() { '?' } else { c }).collect();
        self.fault(kind, FaultAction::Step, &[follower], format!("the earlier release refused to start: {refusal}"));
        self.restart_on(follower, new, "upgrade again").await?;
        let leader = self.wait_leader(Duration::from_secs(30)).await?;
        for tag in gapless {
            let wide = super::gapless::unlimited();
            let req = UpdateTagRequest {
                max_numbers: wide.max_numbers,
                issues_per_sec: wide.issues_per_sec,
                ..Default::default()
            };
            self.admin_with(leader, Duration::from_secs(10))
                .update_tag(tag, &req)
                .await
                .with_context(|| format!("setting the limits of series {tag} (cluster version {version})"))?;
        }
        self.fault(
            kind,
            FaultAction::Heal,
            &self.members.clone(),
            format!("upgraded; series limits set on {gapless:?}"),
        );
        Ok(())
    }

    /// Heals everything: links, paused and dead nodes, clock offsets.
    async fn heal_all(&mut self) -> anyhow::Result<()> {
        self.nodes.heal_links()?;
        self.nodes.undegrade()?;
        for id in self.members.clone() {
            if self.nodes.alive_and_thawed(id)? {
                if self.offsets.get(&id).is_some_and(|o| *o != 0) {
                    self.set_clock(id, 0).await;
                }
            } else {
                self.fault(
                    FaultSubject::HealAll,
                    FaultAction::Step,
                    &[id],
                    "not running (exited or killed): restarting",
                );
                self.spawn_each(FaultSubject::HealAll, &[id]);
            }
        }
        self.fault(
            FaultSubject::HealAll,
            FaultAction::Heal,
            &self.members.clone(),
            "all links open, all nodes running, clocks at offset 0",
        );
        Ok(())
    }

    /// One request of every kind on every member, each retried until it succeeds or
    /// `bound` has passed since the call; with many tags, also the hottest and a cold one,
    /// another for each `round`. Returns the failures.
    async fn serve_everywhere(&self, bound: Duration, round: usize) -> Vec<String> {
        let deadline = Instant::now() + bound;
        let mut failures = Vec::new();
        for &id in &self.members {
            let client = self.client(id);
            let mut tags: Vec<String> = all_tags().map(str::to_string).collect();
            tags.extend(self.many.iter().flat_map(|m| m.probes(round)));
            let kinds = tags.iter().map(|t| (Mode::Segment, Some(t.as_str()))).chain([(Mode::Snowflake, None)]);
            for (mode, tag) in kinds {
                loop {
                    match self.ops.run(HARNESS_PROCESS, id, &client, mode, tag, 1).await {
                        Outcome::Ok => break,
                        // A bounded tag past its bound answers so, correctly.
                        Outcome::Fail(e) if e.contains("tag_exhausted") && is_bounded(tag) => break,
                        Outcome::Fail(e) if Instant::now() >= deadline => {
                            failures.push(format!("node {id} {mode:?} {}: {e}", tag.unwrap_or(SNOWFLAKE_KEY)));
                            break;
                        }
                        Outcome::Fail(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                }
            }
        }
        failures
    }

    /// Waits (up to 15 s) until every member has applied what the leader committed, then
    /// dumps every member's allocation journal. Returns the journals (with those of removed
    /// nodes) and what went wrong: a node that did not catch up or did not answer leaves the
    /// checker unable to verify everything.
    async fn journals(&self) -> (Vec<AllocationJournal>, Vec<String>) {
        let mut problems = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let mut statuses = Vec::new();
            for &id in &self.members {
                statuses.extend(self.status(id).await);
            }
            let committed = statuses.iter().filter_map(|s| s.committed_index).max().unwrap_or(0);
            let behind: Vec<u64> =
                statuses.iter().filter(|s| s.last_applied_index < Some(committed)).map(|s| s.node_id).collect();
            if statuses.len() == self.members.len() && behind.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                problems.push(format!(
                    "journals: {} of {} members answered, {behind:?} had not applied index {committed} after 15 s",
                    statuses.len(),
                    self.members.len()
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut out = self.removed_journals.clone();
        for &id in &self.members {
            match self.journal(id).await {
                Ok(j) => out.push(j),
                Err(e) => problems.push(format!("journals: {e:#}")),
            }
        }
        (out, problems)
    }

    /// Node `id`'s allocation journal.
    async fn journal(&self, id: u64) -> anyhow::Result<AllocationJournal> {
        let c = self.admin_with(id, Duration::from_secs(30));
        c.allocations(None, None).await.with_context(|| format!("node {id}: /admin/allocations"))
    }
}

/// Runs a chaos run and checks it; writes `history.jsonl`, `schedule.json`,
/// `allocations.json`, `recovery.json`, `results.json` and `logs/` into `cfg.out`.
pub async fn run(cfg: RunConfig) -> anyhow::Result<Results> {
    if !(3..=9).contains(&cfg.nodes) {
        bail!("--nodes must be 3 to 9");
    }
    std::fs::create_dir_all(&cfg.out).with_context(|| format!("create {}", cfg.out.display()))?;
    let (warmup, faults_len, after) = phases(cfg.duration);
    let plan = schedule::plan(cfg.seed, &cfg.faults, faults_len.as_millis() as u64);
    std::fs::write(cfg.out.join("schedule.json"), serde_json::to_string_pretty(&plan)?)?;
    println!(
        "leaf-chaos: seed {} · {} nodes · {} faults planned ({}) · out {}",
        cfg.seed,
        cfg.nodes,
        plan.len(),
        cfg.faults.iter().map(|k| k.name()).collect::<Vec<_>>().join(","),
        cfg.out.display()
    );
    let backend = match (&cfg.docker, cfg.netns) {
        (Some(_), _) => " --docker",
        (None, true) => " --netns",
        (None, false) => "",
    };
    let mut many = if cfg.tags > 0 { format!(" --tags {} --zipf-s {}", cfg.tags, cfg.zipf_s) } else { String::new() };
    if cfg.gapless {
        many.push_str(" --gapless");
    }
    if cfg.power_cut_all {
        many.push_str(" --power-cut-all");
    }
    let faults = if cfg.faults.is_empty() {
        "--no-faults".to_string()
    } else {
        format!("--faults {}", cfg.faults.iter().map(|k| k.name()).collect::<Vec<_>>().join(","))
    };
    println!(
        "replay with:{backend} --seed {} --nodes {} --duration {}ms {faults} --clients {} --rate {}{many}",
        cfg.seed,
        cfg.nodes,
        cfg.duration.as_millis(),
        cfg.clients,
        cfg.rate
    );

    let history = Arc::new(History::create(&cfg.out.join("history.jsonl"))?);
    history.write(&Event::Meta(Meta {
        seed: cfg.seed,
        nodes: cfg.nodes,
        wall_start_ms: history.wall_start_ms(),
        epoch_ms: EPOCH_MS,
        faults: cfg.faults.iter().map(|k| k.name().to_string()).collect(),
        warmup_ms: warmup.as_millis() as u64,
        faults_ms: faults_len.as_millis() as u64,
        after_ms: after.as_millis() as u64,
        profiles: PROFILE_TAGS.iter().map(|(t, _, p)| (t.to_string(), *p)).collect(),
    }));

    let nodes = match &cfg.docker {
        None if cfg.netns => {
            let ids: Vec<u64> = (1..=cfg.nodes).collect();
            let net = tokio::task::block_in_place(|| Netns::create(&ids))?;
            let specs = ids.iter().map(|id| net.node_spec(*id)).collect();
            let (cluster, power) = local_cluster(&cfg, specs)?;
            println!("network namespaces {}..: nodes at {}..{}", net.namespace(1), net.ip(1), net.ip(cfg.nodes));
            Nodes::Local { cluster, net: LocalNet::Netns { net, dropped: 0 }, power }
        }
        None => {
            let proxies = Proxies::default();
            let ids: Vec<u64> = (1..=cfg.nodes).collect();
            let specs = proxy::proxied_specs(&proxies, &ids).await?;
            let (cluster, power) = local_cluster(&cfg, specs)?;
            Nodes::Local { cluster, net: LocalNet::Proxies { proxies, cut_at_start: 0 }, power }
        }
        Some(d) => {
            // The deploy/ compose file as is, plus the chaos settings in an override file.
            let chaos = cfg.out.join("compose.chaos.yml");
            std::fs::write(&chaos, compose_override(cfg.nodes))?;
            let project = format!("leafchaos{}", std::process::id());
            let mut compose = Compose::new(&project, vec![d.compose_file.clone(), chaos], cfg.nodes, &d.image)?;
            compose.reserve_port(cfg.nodes + 1);
            println!("docker-compose project {project}: {} + compose.chaos.yml", d.compose_file.display());
            tokio::task::block_in_place(|| compose.up())?;
            Nodes::Docker { compose, detached: BTreeSet::new(), verified: 0, slots: Slots::new(cfg.nodes, 1) }
        }
    };
    let ops = Arc::new(Ops { history: history.clone(), next: AtomicU64::new(0) });
    let many = match cfg.tags {
        0 => None,
        n => Some(Arc::new(ManyTags::new(n, cfg.zipf_s)?)),
    };
    let mut h = Harness {
        nodes,
        history: history.clone(),
        ops: ops.clone(),
        targets: Targets::default(),
        members: (1..=cfg.nodes).collect(),
        next_id: cfg.nodes + 1,
        workers_seen: BTreeSet::new(),
        request_timeout: cfg.request_timeout,
        removed_journals: Vec::new(),
        offsets: BTreeMap::new(),
        many,
        gapless: None,
        created: Default::default(),
        power_cut_all: cfg.power_cut_all,
        token_clients: cfg.upgrade_from.is_some(),
    };
    let result = drive(&mut h, &cfg, &plan, (warmup, faults_len, after)).await;
    let finished = h.nodes.finish(&cfg.out);
    history.flush()?;
    if let Some(g) = &h.gapless {
        g.flush()?;
    }
    let (journals, recovery) = result?;
    finished?;
    std::fs::write(cfg.out.join("allocations.json"), serde_json::to_vec(&journals)?)?;
    std::fs::write(cfg.out.join("recovery.json"), serde_json::to_vec_pretty(&recovery)?)?;
    check_dir(&cfg.out)
}

async fn drive(
    h: &mut Harness,
    cfg: &RunConfig,
    plan: &[PlannedFault],
    (warmup, faults_len, after): (Duration, Duration, Duration),
) -> anyhow::Result<(Vec<AllocationJournal>, Recovery)> {
    let leader = h.wait_leader(Duration::from_secs(90)).await?;
    for (tag, step) in TAGS {
        let req =
            CreateTagRequest { tag: tag.to_string(), step, max_id: None, description: None, ..Default::default() };
        if let Err(e) = h.admin_with(leader, Duration::from_secs(10)).create_tag(&req).await {
            bail!("creating tag {tag} failed: {e}");
        }
    }
    for (tag, step, p) in PROFILE_TAGS {
        if let Err(e) = h.admin_with(leader, Duration::from_secs(10)).create_tag(&profile_request(tag, step, p)).await {
            bail!("creating tag {tag} ({p:?}) failed: {e}");
        }
    }
    if let Some(many) = &h.many {
        let took = many.create(&h.admin_with(leader, Duration::from_secs(120))).await?;
        println!("[{:7.1}s] created {} tags in {:.1} s", h.history.now_ns() as f64 / 1e9, cfg.tags, took.as_secs_f64());
    }
    if cfg.gapless {
        // The daily series' midnight on the whole minute nearest the middle of the fault
        // phase, when the run spans one: its numbers restart at 1 while faults hold.
        let now = h.history.wall_start_ms() + (h.history.now_ns() / 1_000_000) as i64;
        let ms = |d: Duration| d.as_millis() as i64;
        let midnight = gapless::midnight_offset(
            now + 2_000,
            now + ms(warmup + faults_len + after),
            now + ms(warmup) + ms(faults_len) / 2,
        );
        let series = gapless::series(midnight.unwrap_or(0), cfg.upgrade_from.is_none());
        gapless::create(&h.admin_with(leader, Duration::from_secs(10)), &series).await?;
        let tags: Vec<&str> = series.iter().map(|s| s.tag.as_str()).collect();
        let daily = series[1].options.utc_offset.clone().unwrap_or_default();
        println!(
            "[{:7.1}s] gapless series {tags:?}; the daily one's zone is {daily}{}",
            h.history.now_ns() as f64 / 1e9,
            if midnight.is_some() { ": its midnight falls in this run" } else { " (no midnight in this run)" }
        );
        h.gapless = Some(Arc::new(Workload::create(&cfg.out, series, h.history.clone())?));
    }
    let failures = h.serve_everywhere(Duration::from_secs(30), 0).await;
    if !failures.is_empty() {
        bail!("the cluster did not start serving: {failures:?}");
    }
    h.record_workers().await;
    for &id in &h.members {
        let c = h.client(id);
        h.targets.write().unwrap_or_else(|e| e.into_inner()).insert(id, c);
    }

    let stop = Arc::new(AtomicBool::new(false));
    // However `drive` ends, the clients stop.
    let _stop_clients = StopOnDrop(stop.clone());
    let period = Duration::from_secs_f64(f64::from(cfg.clients) / f64::from(cfg.rate.max(1)));
    let clients: Vec<_> = (0..cfg.clients)
        .map(|p| {
            let many = h.many.clone();
            tokio::spawn(worker(p, cfg.seed, period, h.ops.clone(), h.targets.clone(), many, stop.clone()))
        })
        .collect();
    // The gapless workers stop with the others, and at once if `drive` fails.
    let _stop_gapless = h.gapless.clone().map(AbortOnDrop);
    let gapless_workers: Vec<_> = match &h.gapless {
        None => Vec::new(),
        Some(g) => (0..gapless::workers(cfg.clients))
            .map(|w| tokio::spawn(gapless::worker(g.clone(), w, cfg.seed, period, h.targets.clone())))
            .collect(),
    };

    h.phase(Phase::Warmup);
    tokio::time::sleep(warmup).await;

    // A rolling upgrade's client of every node, with its own failover and retries.
    let probe_stop = Arc::new(AtomicBool::new(false));
    let probe = match cfg.upgrade_from {
        None => None,
        Some(_) => {
            let urls: Vec<String> = h.members.iter().map(|id| h.nodes.url(*id)).collect();
            let builder = Client::builder(urls).token(TOKEN).timeout(cfg.request_timeout);
            let builder = match h.nodes.ca() {
                Some(ca) => builder.ca_file(ca),
                None => builder,
            };
            let client = builder.build().context("a client of the run's nodes")?;
            Some(tokio::spawn(super::upgrade::run(client, TAGS[0].0.to_string(), probe_stop.clone())))
        }
    };

    h.phase(Phase::Faults);
    let start = Instant::now();
    if let Some(old) = &cfg.upgrade_from {
        let series: Vec<String> =
            h.gapless.as_ref().map(|g| g.series().iter().map(|s| s.tag.clone()).collect()).unwrap_or_default();
        if let Err(e) = h.upgrade((old, &cfg.bin), &series).await {
            h.fault(FaultKind::Restart, FaultAction::Error, &[], format!("upgrade: {e:#}"));
        }
    }
    for f in plan {
        let at = start + Duration::from_millis(f.at_ms);
        tokio::time::sleep_until(at).await;
        if start.elapsed() >= faults_len {
            break;
        }
        if let Err(e) = h.inject(f).await {
            h.fault(f.kind, FaultAction::Error, &[], e.to_string());
        }
    }
    tokio::time::sleep_until(start + faults_len).await;
    if let Some(probe) = probe {
        probe_stop.store(true, Ordering::Relaxed);
        let r = probe.await?;
        println!(
            "[{:7.1}s] the client of every node: {} IDs, {} errors, {} duplicates",
            h.history.now_ns() as f64 / 1e9,
            r.ok,
            r.errors.len(),
            r.duplicates
        );
        if !r.errors.is_empty() || r.duplicates > 0 || r.ok == 0 {
            let first: Vec<&String> = r.errors.iter().take(3).collect();
            let detail = format!(
                "the client of every node saw {} errors {first:?}, {} duplicates",
                r.errors.len(),
                r.duplicates
            );
            h.fault(FaultKind::Restart, FaultAction::Error, &[], detail);
        }
    }

    h.phase(Phase::Recovery);
    let rec_start = Instant::now();
    let in_flight = h.gapless.as_ref().map(|g| g.in_flight()).unwrap_or_default();
    h.heal_all().await?;
    let failures = h.serve_everywhere(cfg.recovery_bound, 1).await;
    let recovery_secs = rec_start.elapsed().as_secs_f64();
    println!("[{:7.1}s] recovered in {recovery_secs:.1} s; failures: {failures:?}", h.history.now_ns() as f64 / 1e9);
    if let Some(g) = &h.gapless {
        // Keys the faults left unanswered must be answered by the recovery deadline.
        let late = g.await_answered(&in_flight, rec_start + cfg.recovery_bound, "when the faults ended").await;
        println!(
            "[{:7.1}s] gapless: {} of the {} issues in flight when the faults ended answered, {late} not",
            h.history.now_ns() as f64 / 1e9,
            in_flight.len() - late,
            in_flight.len()
        );
    }
    h.record_workers().await;

    h.phase(Phase::After);
    tokio::time::sleep(after).await;
    stop.store(true, Ordering::Relaxed);
    if let Some(g) = &h.gapless {
        g.stop(Instant::now() + cfg.recovery_bound);
    }
    for c in clients.into_iter().chain(gapless_workers) {
        let _ = c.await;
    }
    // The final request of every kind on every node must succeed at once (within one
    // request timeout).
    let finals = h.serve_everywhere(Duration::ZERO, 2).await;
    h.record_workers().await;
    h.phase(Phase::Done);
    let (journals, journal_problems) = h.journals().await;
    if let Some(g) = &h.gapless {
        // Quiet now: every member has applied what was committed.
        let admin = |id| h.admin_with(id, Duration::from_secs(30));
        let mut ledgers = gapless::read_ledgers(g.series(), &h.members, admin, Duration::from_secs(30)).await;
        ledgers.notes.splice(0..0, g.notes());
        gapless::write_ledgers(&cfg.out, &ledgers)?;
    }
    let mut notes = failures.iter().map(|f| format!("recovery: {f}")).collect::<Vec<_>>();
    notes.extend(finals.iter().map(|f| format!("final request: {f}")));
    notes.extend(journal_problems.iter().cloned());
    let recovery = Recovery {
        ok: failures.is_empty() && finals.is_empty() && journal_problems.is_empty(),
        seconds: recovery_secs,
        bound_seconds: cfg.recovery_bound.as_secs_f64(),
        notes,
    };
    Ok((journals, recovery))
}

/// Checks the run in `dir` (history, journals, recovery) and writes `results.json`.
pub fn check_dir(dir: &std::path::Path) -> anyhow::Result<Results> {
    let events = super::history::read(&dir.join("history.jsonl"))?;
    let journals: Vec<AllocationJournal> = serde_json::from_slice(
        &std::fs::read(dir.join("allocations.json"))
            .with_context(|| format!("read {}/allocations.json", dir.display()))?,
    )?;
    let recovery = match std::fs::read(dir.join("recovery.json")) {
        Ok(b) => Some(serde_json::from_slice(&b)?),
        Err(_) => None,
    };
    let mut results = check::check(&events, &journals, recovery);
    if let Some(g) = gapless::check_dir(dir)? {
        results.valid = results.valid.and(g.valid.unwrap_or(check::Verdict::Unknown));
        results.gapless = Some(g);
    }
    std::fs::write(dir.join("results.json"), serde_json::to_vec_pretty(&results)?)?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The override merges with the deploy/ compose files into a valid project whose spare
    /// service takes its node ID, port and certificate from the variables the harness sets
    /// (checked with `docker-compose config` where it is installed).
    #[test]
    fn the_compose_override_declares_a_spare_with_its_certificate() {
        for (nodes, file) in [(3, "docker-compose.yml"), (5, "docker-compose.5.yml")] {
            let spare = nodes + 1;
            let yaml = compose_override(nodes);
            assert!(yaml.contains(&format!("  leaf{spare}:\n")), "{yaml}");
            assert!(yaml.contains(&format!("--node=${{LEAF{spare}_NODE_ID:-{spare}}}=leaf{spare},")), "{yaml}");
            assert!(yaml.contains(&format!("127.0.0.1:${{LEAF{spare}_PORT}}:8080")), "{yaml}");
            if std::process::Command::new("docker-compose").arg("version").output().is_err() {
                eprintln!("docker-compose is not installed: YAML not validated");
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            let over = dir.path().join("compose.chaos.yml");
            std::fs::write(&over, &yaml).unwrap();
            let env_file = dir.path().join("empty.env");
            std::fs::write(&env_file, "").unwrap();
            let mut cmd = std::process::Command::new("docker-compose");
            cmd.arg("--env-file").arg(&env_file).args(["-p", "leafoverridetest", "-f"]);
            cmd.arg(crate::docker::deploy_dir().join(file)).arg("-f").arg(&over).arg("config");
            cmd.env("LEAF_CLUSTER_SECRET", "s").env("LEAF_ADMIN_TOKEN", "t");
            cmd.env(format!("LEAF{spare}_NODE_ID"), "17").env(format!("LEAF{spare}_PORT"), "18017");
            for i in 1..=nodes {
                cmd.env(format!("LEAF{i}_PORT"), (18000 + i).to_string());
            }
            let out = cmd.output().unwrap();
            let config = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            assert!(config.contains("--node=17=leaf"), "the certs service does not issue node 17's: {config}");
            assert!(config.contains("LEAF_NODE_ID: '17'") || config.contains("LEAF_NODE_ID: \"17\""), "{config}");
            assert!(config.contains("18017"), "{config}");
        }
    }
}
