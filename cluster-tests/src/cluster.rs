//! A local cluster of real `leaf` processes on loopback, for tests and the benchmark tool.
//!
//! Each node gets its own data dir, TOML config and log file under one temporary directory;
//! nodes are started, stopped with SIGTERM, killed with SIGKILL and restarted on the same data.
//! By default the cluster runs with TLS, as deployments do: `leaf certs` makes a CA in
//! `tls/` and a certificate per node (for 127.0.0.1 and the address its peers dial), nodes
//! talk mutual TLS, and clients use `https://` with that CA ([`Cluster::ca`]).
//! When a test panics while a [`Cluster`] is alive, the tail of every node's log is printed.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use leaf_api::types::ClusterStatus;
use leaf_client::{Client, OwnCreates};
use tempfile::TempDir;

/// Cluster secret of every test cluster.
pub const SECRET: &str = "cluster-secret-for-tests-0123456789";
/// Admin token of every test cluster.
pub const TOKEN: &str = "admin-token-for-tests-0123456789";

/// How to run the nodes.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `leaf` binary.
    pub bin: PathBuf,
    /// Extra TOML appended to every node's config (e.g. a `[raft]` or `[segment]` table).
    pub extra_toml: String,
    /// `RUST_LOG` of the nodes.
    pub log_filter: String,
    /// HTTPS and mutual TLS between the nodes (the default); `false`: plaintext on loopback.
    pub tls: bool,
}

impl Options {
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        Options { bin: bin.into(), extra_toml: String::new(), log_filter: "info,openraft=warn".into(), tls: true }
    }
}

/// Lifetime of the test certificates, in days.
const CERT_DAYS: &str = "30";

/// How to start one node.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub id: u64,
    /// Port of its public (and internal) HTTP listener on 127.0.0.1.
    pub port: u16,
    /// The address its peers dial for it (its listener, or a proxy in front of it).
    pub peer_addr: String,
    /// Extra environment of its process (e.g. `LEAF_RAFT__SOURCE_IP`).
    pub env: Vec<(String, String)>,
    /// The address it listens on and clients dial (`127.0.0.1`, or its address in a network
    /// namespace).
    pub host: String,
    /// A command prefix its process runs under (e.g. `ip netns exec <ns>`); empty: none.
    pub wrapper: Vec<String>,
}

impl NodeSpec {
    /// A node on a fresh loopback port that peers dial directly.
    pub fn direct(id: u64) -> NodeSpec {
        let port = free_port();
        NodeSpec {
            id,
            port,
            peer_addr: format!("127.0.0.1:{port}"),
            env: Vec::new(),
            host: "127.0.0.1".into(),
            wrapper: Vec::new(),
        }
    }
}

/// One node process.
pub struct NodeProc {
    pub id: u64,
    pub port: u16,
    peer_addr: String,
    /// Extra environment of this node's process (e.g. `LEAF_FAULT__CLOCK_OFFSET_MS`).
    env: Vec<(String, String)>,
    host: String,
    wrapper: Vec<String>,
    /// Where its data lives, if not in the cluster's directory (e.g. on a power-cut file system).
    data_dir: Option<PathBuf>,
    /// The `leaf` binary it runs, if not the cluster's (a rolling upgrade swaps it).
    bin: Option<PathBuf>,
    child: Option<Child>,
}

/// A running local cluster. Dropping it kills every node.
pub struct Cluster {
    dir: TempDir,
    opts: Options,
    /// The `--peers` string every node got.
    pub peers: String,
    nodes: BTreeMap<u64, NodeProc>,
    /// What the clients of [`Cluster::client`] created: shared, so each reads the others'.
    created: OwnCreates,
}

/// The `leaf` binary next to the running program (`leaf`, or the tests' `leaf-test-node`),
/// for the tools in this package. Started by `cargo run` (which sets `CARGO`) before `leaf` was
/// built, it builds `leaf` with the same profile first.
pub fn default_bin() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe()?;
    let dir = me.parent().context("no parent dir")?;
    let find = || ["leaf", "leaf-test-node"].iter().map(|name| dir.join(name)).find(|p| p.is_file());
    if let Some(p) = find() {
        return Ok(p);
    }
    if let Ok(cargo) = std::env::var("CARGO") {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
        let mut build = Command::new(cargo);
        build.args(["build", "-p", "leaf-node", "--bin", "leaf", "--manifest-path"]).arg(&manifest);
        if dir.ends_with("release") {
            build.arg("--release");
        }
        eprintln!("no leaf binary next to {}; building it: {build:?}", me.display());
        if build.status().is_ok_and(|s| s.success()) {
            if let Some(p) = find() {
                return Ok(p);
            }
        }
    }
    bail!(
        "no leaf binary next to {}; build with `cargo build --release --workspace --bins` or pass --bin",
        me.display()
    )
}

/// A client of the node at `url` alone: one attempt per call (no retry, no failover), so a
/// test sees exactly what that node answered. `ca`: the CA of an `https://` node. `timeout`
/// bounds each call.
pub fn node_client(url: &str, token: Option<&str>, ca: Option<&Path>, timeout: Duration) -> Client {
    node_client_sharing(url, token, ca, timeout, OwnCreates::default())
}

/// The settlement key of every harness client without a token: together they are one caller
/// of gapless series, whose retries through any node or client settle its own numbers.
pub const HARNESS_SETTLEMENT_KEY: [u8; 32] = [0x1f; 32];

/// [`node_client`], reading the creates of every client given the same `created` memory (a
/// tag created through one node is retried through a `tag_not_found` on another while that
/// node has not heard of it yet, as a `leaf-client` over several nodes does).
pub fn node_client_sharing(
    url: &str,
    token: Option<&str>,
    ca: Option<&Path>,
    timeout: Duration,
    created: OwnCreates,
) -> Client {
    let builder = Client::builder([url])
        .retries(0)
        .timeout(timeout)
        .deadline(timeout)
        .own_creates(created)
        .settlement_key(HARNESS_SETTLEMENT_KEY);
    let builder = match ca {
        Some(ca) => builder.ca_file(ca),
        None => builder,
    };
    let builder = match token {
        Some(t) => builder.token(t),
        None => builder,
    };
    // The harness builds its URLs itself (`http://127.0.0.1:port`): always valid.
    builder.build().unwrap_or_else(|e| panic!("client of {url}: {e}"))
}

/// A rustls client config trusting the CA certificate(s) in `ca`, presenting `identity` (a
/// certificate chain file and its key file) when given.
pub fn tls_client_config(
    ca: &Path,
    identity: Option<(&Path, &Path)>,
) -> anyhow::Result<std::sync::Arc<rustls::ClientConfig>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).with_context(|| format!("read {}", ca.display()))? {
        roots.add(cert?)?;
    }
    let builder =
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
    let config = match identity {
        Some((chain, key)) => {
            let chain = CertificateDer::pem_file_iter(chain)?.collect::<Result<Vec<_>, _>>()?;
            builder.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(key)?)?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(std::sync::Arc::new(config))
}

/// Runs `bin certs <cmd...> <dir> <args...>` (the `leaf certs` command operators use).
fn certs(bin: &Path, cmd: &[&str], dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new(bin)
        .arg("certs")
        .args(cmd)
        .arg(dir)
        .args(args)
        .output()
        .with_context(|| format!("run {} certs", bin.display()))?;
    if !out.status.success() {
        bail!("leaf certs {cmd:?} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// A free loopback port, never one this process handed out before: the kernel may give a
/// port it just released to the next bind, and two nodes of one cluster on the same port is
/// a broken cluster (seen in CI: node 3 could not bind, and its requests reached node 1). Every
/// listener the harness opens takes its port from here too (the chaos proxies do).
///
/// It is chosen below the kernel's ephemeral range (`ip_local_port_range`), where outgoing
/// connections take their local ports: a port from that range, handed to a node that binds it
/// seconds later (a spare Docker container, added by a membership fault), was once taken in
/// between by one of the many client connections (seen in CI: "Bind for 127.0.0.1:33565
/// failed: port is already allocated"). Below it, only an explicit bind can take it.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    const LOWEST: u32 = 10_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next().and_then(|p| p.parse::<u32>().ok()))
        .unwrap_or(32_768);
    let span = ephemeral_low.saturating_sub(LOWEST);
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    if span >= 1_000 {
        // A start of this process's own, so that test binaries run side by side rarely probe
        // the same ports.
        let start = (std::process::id().wrapping_mul(7_919) + given.len() as u32) % span;
        for i in 0..span {
            let port = (LOWEST + (start + i) % span) as u16;
            if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
                given.insert(port);
                return port;
            }
        }
    }
    for _ in 0..1000 {
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or(0);
        if port != 0 && given.insert(port) {
            return port;
        }
    }
    0
}

impl Cluster {
    /// Starts nodes `1..=n` as the initial members. Does not wait for a leader.
    pub fn start(n: u64, opts: Options) -> anyhow::Result<Cluster> {
        Cluster::start_specs((1..=n).map(NodeSpec::direct).collect(), opts)
    }

    /// Starts the given nodes as the initial members (their `peer_addr`s form `peers`).
    pub fn start_specs(specs: Vec<NodeSpec>, opts: Options) -> anyhow::Result<Cluster> {
        let ids: Vec<u64> = specs.iter().map(|s| s.id).collect();
        let mut cluster = Cluster::prepare_specs(specs, opts)?;
        for id in ids {
            cluster.spawn(id)?;
        }
        Ok(cluster)
    }

    /// Sets up the given nodes as the initial members (certificates, configs) without starting
    /// them: for a test that fills a data directory first (`leaf restore`), then [`Cluster::spawn`]s.
    pub fn prepare_specs(specs: Vec<NodeSpec>, opts: Options) -> anyhow::Result<Cluster> {
        let dir = tempfile::Builder::new().prefix("leaf-cluster-").tempdir()?;
        let peers = specs.iter().map(|s| format!("{}={}", s.id, s.peer_addr)).collect::<Vec<_>>().join(",");
        if opts.tls {
            certs(&opts.bin, &["ca", "--dir"], &dir.path().join("tls"), &["--days", "3650"])?;
        }
        let mut cluster = Cluster { dir, opts, peers, nodes: BTreeMap::new(), created: OwnCreates::default() };
        for spec in specs {
            cluster.prepare_node(spec)?;
        }
        Ok(cluster)
    }

    /// Starts a node that is not among the initial peers (it waits to be added as a learner).
    pub fn start_extra(&mut self, id: u64) -> anyhow::Result<u16> {
        let spec = NodeSpec::direct(id);
        let port = spec.port;
        self.add_node(spec)?;
        Ok(port)
    }

    /// Starts the node `spec` describes; unless it is among the initial peers it waits to be
    /// added as a learner.
    pub fn add_node(&mut self, spec: NodeSpec) -> anyhow::Result<()> {
        let id = spec.id;
        self.prepare_node(spec)?;
        self.spawn(id)
    }

    /// Makes the node `spec` describes (its certificate and config) without starting it (then
    /// [`Cluster::spawn`] it).
    pub fn prepare_node(&mut self, spec: NodeSpec) -> anyhow::Result<()> {
        if self.nodes.contains_key(&spec.id) {
            bail!("node {} exists", spec.id);
        }
        let NodeSpec { id, port, peer_addr, env, host, wrapper } = spec;
        if self.opts.tls {
            // Clients dial `host`; peers dial `peer_addr` (a proxy's address in chaos runs).
            let mut hosts = vec![host.clone()];
            if let Some((host, _)) = peer_addr.rsplit_once(':') {
                if !hosts.iter().any(|h| h == host) {
                    hosts.push(host.to_string());
                }
            }
            let extra: Vec<String> = hosts.into_iter().flat_map(|h| ["--host".to_string(), h]).collect();
            let id_arg = id.to_string();
            let mut args = vec!["--id", id_arg.as_str()];
            args.extend(extra.iter().map(String::as_str));
            args.extend(["--days", CERT_DAYS]);
            certs(&self.opts.bin, &["node", "--dir"], &self.tls_dir(), &args)?;
        }
        self.nodes
            .insert(id, NodeProc { id, port, peer_addr, env, host, wrapper, data_dir: None, bin: None, child: None });
        self.write_config(id)?;
        Ok(())
    }

    fn tls_dir(&self) -> PathBuf {
        self.dir.path().join("tls")
    }

    /// The cluster CA's certificate (`None` for a plaintext cluster).
    pub fn ca(&self) -> Option<PathBuf> {
        self.opts.tls.then(|| self.tls_dir().join("ca.pem"))
    }

    /// A rustls client config that trusts the cluster CA and presents node `as_node`'s
    /// certificate: what a member node dials its peers with (`None` for a plaintext cluster).
    pub fn peer_tls_config(&self, as_node: u64) -> anyhow::Result<Option<std::sync::Arc<rustls::ClientConfig>>> {
        let Some(ca) = self.ca() else { return Ok(None) };
        let dir = self.tls_dir();
        let chain = dir.join(format!("node-{as_node}.pem"));
        let key = dir.join(format!("node-{as_node}-key.pem"));
        tls_client_config(&ca, Some((&chain, &key))).map(Some)
    }

    /// Makes a client certificate `name` of the cluster CA; returns `(certificate, key)`.
    pub fn client_cert(&self, name: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        certs(&self.opts.bin, &["client", "--dir"], &self.tls_dir(), &["--name", name, "--days", CERT_DAYS])?;
        let dir = self.tls_dir();
        Ok((dir.join(format!("client-{name}.pem")), dir.join(format!("client-{name}-key.pem"))))
    }

    /// The address peers dial for node `id`.
    pub fn peer_addr(&self, id: u64) -> Option<String> {
        self.nodes.get(&id).map(|n| n.peer_addr.clone())
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn ids(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// Nodes whose process is running (started and not stopped or killed by the harness).
    pub fn running(&self) -> Vec<u64> {
        self.nodes.values().filter(|n| n.child.is_some()).map(|n| n.id).collect()
    }

    /// Whether node `id`'s process is alive; a process that exited on its own is reaped and
    /// counts as not running from then on.
    pub fn alive(&mut self, id: u64) -> bool {
        let Some(node) = self.nodes.get_mut(&id) else { return false };
        match node.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => true,
            Some(_) => {
                node.child = None;
                false
            }
            None => false,
        }
    }

    /// How node `id`'s process ended, once it has ended by itself (`None` while it runs, and
    /// for a node never started or already reaped by [`Cluster::kill`] or [`Cluster::alive`]).
    pub fn exited(&mut self, id: u64) -> Option<std::process::ExitStatus> {
        let node = self.nodes.get_mut(&id)?;
        let status = node.child.as_mut()?.try_wait().ok()??;
        node.child = None;
        Some(status)
    }

    pub fn port(&self, id: u64) -> u16 {
        self.nodes[&id].port
    }

    pub fn addr(&self, id: u64) -> String {
        let n = &self.nodes[&id];
        format!("{}:{}", n.host, n.port)
    }

    pub fn url(&self, id: u64) -> String {
        let scheme = if self.opts.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.addr(id))
    }

    /// An admin client of node `id` alone (see [`node_client`]), 30 s per request. The
    /// clients of one cluster read each other's creates ([`node_client_sharing`]).
    pub fn client(&self, id: u64) -> Client {
        self.client_with(id, Some(TOKEN), Duration::from_secs(30))
    }

    /// A client of node `id` alone with this token (none: anonymous) and per-call timeout.
    pub fn client_with(&self, id: u64, token: Option<&str>, timeout: Duration) -> Client {
        node_client_sharing(&self.url(id), token, self.ca().as_deref(), timeout, self.created.clone())
    }

    /// Node `id`'s log file (stdout and stderr of every run of it).
    pub fn log_path(&self, id: u64) -> PathBuf {
        self.dir.path().join(format!("node{id}.log"))
    }

    /// Writes node `id`'s config file (what [`Cluster::spawn`] starts it with) and returns its
    /// path; its data directory is [`Cluster::data_dir`].
    pub fn write_config(&self, id: u64) -> anyhow::Result<PathBuf> {
        let addr = self.addr(id);
        let data = self.data_dir(id);
        let config = self.dir.path().join(format!("node{id}.toml"));
        let mut toml = format!(
            "node_id = {id}\nhttp_addr = {addr:?}\ndata_dir = {data:?}\npeers = {peers:?}\n\
             cluster_secret = {SECRET:?}\nadmin_token = {TOKEN:?}\nbootstrap_tags = []\n{extra}\n",
            data = data.display().to_string(),
            peers = self.peers,
            extra = self.opts.extra_toml,
        );
        if self.opts.tls {
            let dir = self.tls_dir();
            let path = |name: String| dir.join(name).display().to_string();
            toml.push_str(&format!(
                "\n[tls]\ncert = {:?}\nkey = {:?}\nca = {:?}\n",
                path(format!("node-{id}.pem")),
                path(format!("node-{id}-key.pem")),
                path("ca.pem".into()),
            ));
        }
        std::fs::write(&config, toml)?;
        Ok(config)
    }

    /// Node `id`'s data directory: `node<id>` in the cluster's directory unless
    /// [`Cluster::set_data_dir`] moved it.
    pub fn data_dir(&self, id: u64) -> PathBuf {
        match self.nodes.get(&id).and_then(|n| n.data_dir.clone()) {
            Some(dir) => dir,
            None => self.dir.path().join(format!("node{id}")),
        }
    }

    /// Moves node `id`'s data directory to `dir` from its next (re)start on (the
    /// [`crate::power`] file system's mount, for power cuts).
    pub fn set_data_dir(&mut self, id: u64, dir: PathBuf) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.data_dir = Some(dir);
        }
    }

    /// Starts (or restarts) node `id` with the config [`Cluster::write_config`] writes.
    pub fn spawn(&mut self, id: u64) -> anyhow::Result<()> {
        let config = self.write_config(id)?;
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.log_path(id))?;
        let (env, wrapper, bin) =
            self.nodes.get(&id).map(|n| (n.env.clone(), n.wrapper.clone(), n.bin.clone())).unwrap_or_default();
        let bin = bin.unwrap_or_else(|| self.opts.bin.clone());
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&bin);
                c
            }
            None => Command::new(&bin),
        };
        let child = cmd
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", &self.opts.log_filter)
            .env_remove("LEAF_ADMIN_TOKEN")
            .env_remove("LEAF_CLUSTER_SECRET")
            .env_remove("LEAF_PEERS")
            // After the removals: a test may set `LEAF_PEERS` for one node.
            .envs(env)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("spawn {}", bin.display()))?;
        self.nodes.get_mut(&id).ok_or_else(|| anyhow!("no node {id}"))?.child = Some(child);
        Ok(())
    }

    /// Sets the `leaf` binary node `id` runs from its next (re)start.
    pub fn set_bin(&mut self, id: u64, bin: impl Into<PathBuf>) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.bin = Some(bin.into());
        }
    }

    /// Sets the extra environment of node `id` for its next (re)start; empty clears it.
    pub fn set_env(&mut self, id: u64, env: &[(&str, &str)]) {
        if let Some(n) = self.nodes.get_mut(&id) {
            n.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        }
    }

    /// `kill -9` node `id`.
    pub fn kill(&mut self, id: u64) {
        if let Some(mut child) = self.nodes.get_mut(&id).and_then(|n| n.child.take()) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The process ID of node `id`, while it runs.
    pub fn pid(&self, id: u64) -> Option<u32> {
        self.nodes.get(&id)?.child.as_ref().map(Child::id)
    }

    /// Freezes node `id` (SIGSTOP): it keeps its sockets but answers nothing, like a node in
    /// a long GC pause or a partition that drops no connections.
    pub fn pause(&self, id: u64) {
        self.signal(id, libc::SIGSTOP);
    }

    /// Resumes a paused node (SIGCONT).
    pub fn resume(&self, id: u64) {
        self.signal(id, libc::SIGCONT);
    }

    fn signal(&self, id: u64, sig: libc::c_int) {
        if let Some(child) = self.nodes.get(&id).and_then(|n| n.child.as_ref()) {
            // SAFETY: kill(2) on a child we own and have not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        }
    }

    /// SIGTERM node `id` and wait for it to exit; returns whether it exited with status 0.
    pub fn stop(&mut self, id: u64) -> bool {
        let Some(mut child) = self.nodes.get_mut(&id).and_then(|n| n.child.take()) else { return false };
        // SAFETY: kill(2) on a child we own and have not reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return false;
                }
            }
        }
    }

    /// `GET /cluster/status` of node `id`.
    pub async fn status(&self, id: u64) -> anyhow::Result<ClusterStatus> {
        self.status_within(id, Duration::from_secs(30)).await
    }

    /// [`Cluster::status`], given up after `timeout`.
    pub async fn status_within(&self, id: u64, timeout: Duration) -> anyhow::Result<ClusterStatus> {
        let client = self.client_with(id, Some(TOKEN), timeout);
        let status = client.cluster_status().await.with_context(|| format!("node {id}: /cluster/status"))?;
        // A harness whose addresses got mixed up (a port taken twice) must not pass for a cluster.
        anyhow::ensure!(status.node_id == id, "node {id}'s address was answered by node {}", status.node_id);
        Ok(status)
    }

    /// Waits until every node in `ids` is ready and they agree on one leader among them;
    /// returns the leader. Giving up, it says what each node last answered, and what the
    /// threads of a node that did not answer were doing ([`crate::threads`]: their states, and
    /// their stacks where `gdb` is installed).
    pub async fn wait_leader_among(&self, ids: &[u64], timeout: Duration) -> anyhow::Result<u64> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut last: BTreeMap<u64, String> = BTreeMap::new();
        let mut silent = Vec::new();
        loop {
            silent.clear();
            let mut leaders = Vec::new();
            for &id in ids {
                // One slow node must not use up the whole wait: each call gets a few seconds.
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                let call = left.clamp(Duration::from_millis(500), Duration::from_secs(5));
                let outcome = match self.status_within(id, call).await {
                    Ok(s) if s.health.segment_ready => {
                        leaders.push(s.leader_id);
                        format!("node {id}: leader {:?}", s.leader_id)
                    }
                    Ok(s) => format!("node {id}: not ready: {:?}", s.health.reason),
                    // The error names the node.
                    Err(e) => {
                        silent.push(id);
                        format!("{e:#}; {}", self.pid(id).map_or("not running".into(), crate::threads::summary))
                    }
                };
                last.insert(id, outcome);
            }
            if leaders.len() == ids.len() {
                if let Some(Some(l)) = leaders.first() {
                    if leaders.iter().all(|x| *x == Some(*l)) && ids.contains(l) {
                        return Ok(*l);
                    }
                }
            }
            if tokio::time::Instant::now() >= deadline {
                let each: Vec<&str> = last.values().map(String::as_str).collect();
                let mut said = format!("no common leader within {timeout:?}: {}", each.join("; "));
                for id in &silent {
                    if let Some(stacks) = self.pid(*id).and_then(crate::threads::stacks) {
                        said.push_str(&format!("\nnode {id}'s threads (gdb):\n{stacks}"));
                    }
                }
                bail!(said);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// [`Cluster::wait_leader_among`] over all running nodes.
    pub async fn wait_leader(&self, timeout: Duration) -> anyhow::Result<u64> {
        self.wait_leader_among(&self.running(), timeout).await
    }

    /// The last `lines` lines of node `id`'s log.
    pub fn log_tail(&self, id: u64, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log_path(id)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let ids = self.ids();
        // Before the kill: whether each node still ran, and if so what its threads were doing.
        let states: Vec<String> = match std::thread::panicking() {
            true => ids.iter().filter_map(|&id| self.state_of(id)).collect(),
            false => Vec::new(),
        };
        for id in &ids {
            self.kill(*id);
        }
        if std::thread::panicking() {
            for &id in &ids {
                eprintln!("----- node {id} log (last 40 lines) -----\n{}", self.log_tail(id, 40));
            }
            // Last, where an output cut in the middle still shows them: the nodes' own panics,
            // which explain the rest wherever they are in a log, and their states.
            for &id in &ids {
                let text = std::fs::read_to_string(self.log_path(id)).unwrap_or_default();
                let lines: Vec<&str> = text.lines().collect();
                let panics: Vec<String> = (0..lines.len())
                    .filter(|&i| lines[i].contains("panicked at"))
                    .take(3)
                    .map(|i| lines[i..(i + 3).min(lines.len())].join("\n"))
                    .collect();
                if !panics.is_empty() {
                    eprintln!("----- node {id} panicked -----\n{}", panics.join("\n"));
                }
            }
            eprintln!("----- the nodes when the test gave up -----\n{}", states.join("\n"));
            // The nodes' data and whole logs, for whoever reruns this on their machine.
            self.dir.disable_cleanup(true);
            eprintln!("----- the cluster's directory is kept: {} -----", self.dir.path().display());
        }
    }
}

impl Cluster {
    /// Whether node `id` still runs and what its threads are doing, or how it exited by itself;
    /// `None` for a node the test stopped.
    fn state_of(&mut self, id: u64) -> Option<String> {
        let child = self.nodes.get_mut(&id)?.child.as_mut()?;
        Some(match child.try_wait() {
            Ok(Some(status)) => format!("node {id} had exited by itself: {status}"),
            _ => format!("node {id} ran; {}", crate::threads::summary(child.id())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::free_port;

    #[test]
    fn free_ports_are_never_handed_out_twice() {
        // Plain bind-to-0 ports repeat within a few hundred draws (the ephemeral range is
        // ~28,000 wide); these must not.
        let ports: Vec<u16> = (0..2000).map(|_| free_port()).collect();
        assert!(ports.iter().all(|p| *p != 0));
        let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len());
        // None from the range outgoing connections take their local ports from.
        let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
        let low: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
        assert!(ports.iter().all(|p| *p < low), "a port at or above {low}");
    }
}
