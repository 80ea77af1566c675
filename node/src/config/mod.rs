//! The one configuration of a `leaf` node.
//!
//! Sources, later ones winning: the defaults written on each field below (embedded, so
//! `leaf serve` needs no file), a TOML file (`--config`), environment variables `LEAF_*`
//! (nested keys with `__`, e.g. `LEAF_SEGMENT__MAX_STEP=500000`), then command-line flags.
//! [`Config::validate`] rejects nonsense before anything starts.
//!
//! Layout: this file holds [`Config`], its sections and the loading; [`tls`] the `[tls]`
//! section, [`grpc`] the `[grpc]` one, [`forecast`] the `[forecast]` one, `access` the `[auth]`
//! and `[audit]` ones, `worker_ids` the `snowflake.worker_ids` range.
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use leaf_api::tag::{validate_max_id, validate_step, validate_tag, MAX_STEP};
use serde::{Deserialize, Serialize};

mod access;
mod forecast;
mod grpc;
mod tls;
mod worker_ids;
pub use access::{AuditConfig, AuthConfig};
pub use forecast::ForecastConfig;
pub use grpc::GrpcConfig;
pub use tls::TlsConfig;
pub use worker_ids::WorkerIds;

/// Keys holding secrets: read from the environment as raw strings (never parsed as numbers),
/// and never shown in an error or a log line.
const SECRET_KEYS: &[&str] = &["admin_token", "cluster_secret"];

/// A secret (admin token, cluster secret). Its `Debug` and `Display` never show the value, so
/// neither an error nor a log line can leak it; [`Secret::expose`] is the one way to read it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret's value, for comparing or sending it; never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_string())
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret(s)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Top-level keys that environment variables may set; other `LEAF_*` variables (such as the
/// CLI's `LEAF_URL`) are ignored by the server.
const ENV_KEYS: &[&str] = &[
    "node_id",
    "data_dir",
    "http_addr",
    "advertise_addr",
    "admin_token",
    "cluster_secret",
    "peers",
    "bootstrap_tags",
    "segment",
    "raft",
    "http",
    "snowflake",
    "forecast",
    "fault",
    "tls",
    "grpc",
    "auth",
    "audit",
    "insecure_plaintext_peers",
];

/// Configuration of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Raft ID of this node, unique in its cluster and never reused (a worker's identity in
    /// later modes). Default `1`.
    pub node_id: u64,
    /// Directory of the Raft log, state machine and snapshots; reused on restart. Default
    /// `./leaf-data`.
    pub data_dir: PathBuf,
    /// Listener for the public API, monitor and admin endpoints. Port 0 picks a free port (tests).
    /// Default `127.0.0.1:8080`.
    pub http_addr: SocketAddr,
    /// `host:port` at which the other nodes reach this node, recorded in the Raft membership
    /// when this node initialises a new one-node cluster (a node listed in `peers` is reached at
    /// its listed address). Default: the bound `http_addr`, which is right for loopback and
    /// wrong for `0.0.0.0`.
    pub advertise_addr: Option<String>,
    /// Bearer token required by `/admin/*`. Default none: admin endpoints then answer only on
    /// loopback connections. Required when `http_addr` is not a loopback address (a node bound
    /// to `0.0.0.0` refuses to start without it). At least 16 visible ASCII characters; from
    /// the environment (`LEAF_ADMIN_TOKEN`) always taken as a string, never shown in logs.
    pub admin_token: Option<Secret>,
    /// Shared secret of the cluster-internal endpoints (`/internal/*`: Raft RPC, forwarded
    /// proposals, read index), sent by peers in the `x-leaf-cluster-secret` header. Required
    /// (at least 16 characters) when `peers` is set; without it the internal endpoints refuse
    /// every request, so a node cannot join or be joined. Default none. Like `admin_token`,
    /// taken from `LEAF_CLUSTER_SECRET` as a string and never shown.
    pub cluster_secret: Option<Secret>,
    /// The initial members of a multi-node cluster, `"1=host:port,2=host:port,3=host:port"`,
    /// identical on every node. A node listed here with a blank data dir initialises the
    /// cluster with exactly these members (doing so on several nodes at once is safe); a node
    /// not listed waits to be added as a learner. Ignored once the data dir holds a cluster.
    /// Default empty: a one-node cluster of this node.
    pub peers: Peers,
    /// Tags created when the cluster has a leader and they do not exist yet (a developer
    /// convenience, like Leaf's sample row). Default: `leaf-segment-test`, step 2000, max_id 1.
    /// Set to `[]` in production.
    pub bootstrap_tags: Vec<BootstrapTag>,
    /// Segment-mode behaviour (`[segment]`); defaults on each field of [`SegmentConfig`].
    pub segment: SegmentConfig,
    /// Raft timing and snapshots (`[raft]`); defaults on each field of [`RaftConfig`].
    pub raft: RaftConfig,
    /// HTTP limits (`[http]`); defaults on each field of [`HttpConfig`].
    pub http: HttpConfig,
    /// Snowflake mode (`[snowflake]`); defaults on each field of [`SnowflakeConfig`].
    pub snowflake: SnowflakeConfig,
    /// Sampling behind the exhaustion forecasts (`[forecast]`); see [`ForecastConfig`].
    pub forecast: ForecastConfig,
    /// Fault injection for chaos tests (`[fault]`); off by default.
    pub fault: FaultConfig,
    /// HTTPS and mutual TLS between nodes (`[tls]`); off unless its files are set. See
    /// [`TlsConfig`].
    pub tls: TlsConfig,
    /// The gRPC API on the same listener (`[grpc]`); on by default. See [`GrpcConfig`].
    pub grpc: GrpcConfig,
    /// Who may get IDs (`[auth]`): tokens required or not. See [`AuthConfig`].
    pub auth: AuthConfig,
    /// The audit trail's retention (`[audit]`). See [`AuditConfig`].
    pub audit: AuditConfig,
    /// Allow plaintext peer traffic on a non-loopback listener. Without TLS, a node that
    /// listens on a non-loopback address with a `cluster_secret` (so it takes part in a
    /// cluster) refuses to start: Raft traffic, the cluster secret and admin tokens would
    /// cross the network in clear. Set this (`--insecure-plaintext-peers`) only on a network
    /// you trust completely; the node logs a warning at start. Default `false`.
    pub insecure_plaintext_peers: bool,
}

/// Snowflake mode: worker leases and clock safety.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SnowflakeConfig {
    /// Serve `/api/snowflake/get/*` on this node (registering a worker ID through Raft).
    /// Default `true`.
    pub enabled: bool,
    /// Epoch of the 41-bit timestamp, Unix ms; IDs run out 69 years after it. Must be the same
    /// on every node and never change: IDs made under two epochs can collide. Default
    /// `1288834974657` (Twitter's and Leaf's).
    pub epoch_ms: i64,
    /// Each new millisecond's sequence starts at a random value below this, like Leaf, so IDs
    /// of a quiet service are not all multiples of 4,096 plus 0 (which skews `id % n`
    /// sharding). Costs up to this many IDs of the 4,096 per millisecond. `0` or `1` start at 0.
    /// Default `100` (Leaf's).
    pub sequence_random_start: u16,
    /// How far ahead of the clock the durable high-water mark is kept (PD's TSO window): no ID
    /// is issued above a mark that is not yet fsynced, the mark is raised when less than half
    /// the window is left, and each raise is proposed through Raft. After a crash the node
    /// issues above the mark at once (timestamps run ahead of the clock until it catches up), so
    /// IDs can be up to this far ahead of the clock. Default `3000` ms.
    pub time_window_ms: u64,
    /// A clock that moved back at most this far waits twice the difference and retries (Leaf's
    /// 5 ms, #112); further, or still behind after waiting, the request gets 503
    /// `clock_moved_backwards`. Default `5` ms.
    pub max_backward_ms: u64,
    /// At start, a high-water mark at most this far ahead of the clock is served from at once
    /// (IDs above the mark, ahead of the clock until it catches up); further ahead, snowflake
    /// service stays off until the clock is fixed and the node restarted. Above the window so a
    /// quick restart serves instead of failing. IDs are never more than
    /// `max(time_window_ms, max_startup_wait_ms + 50)` ms ahead of the clock. Default `5000` ms.
    pub max_startup_wait_ms: u64,
    /// Lease of the worker ID, renewed through Raft with every raise of the high-water mark.
    /// A node that cannot renew for this long (cut off from the quorum) stops issuing
    /// snowflake IDs; a node's worker ID can go to another node only once the node has left the
    /// cluster and twice this has passed. Longer keeps a cut-off node serving longer, and lets
    /// a node restart from its cache file while the quorum is down for this long. Default
    /// `60000` ms.
    pub lease_ttl_ms: u64,
    /// At start the node compares its clock with every reachable peer (offsets compensated
    /// for half the round trip); if the average offset exceeds this, snowflake service stays
    /// off. NTP keeps healthy clocks within tens of ms; a second catches a misconfigured clock
    /// without failing on a busy network. Default `1000` ms.
    pub max_peer_offset_ms: u64,
    /// The worker IDs this node may take, `"first-last"`: the same on every node. Give a
    /// cluster that runs beside old Leaf snowflake servers (numbered from 0) the part they do
    /// not use, e.g. `"512-1023"` (deploy/README.md, "Moving from Leaf"). A node holding an ID
    /// outside the range gets a new one inside it at its next start. Default `"0-1023"`.
    pub worker_ids: WorkerIds,
}

/// Fault injection (chaos tests only).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultConfig {
    /// Exposes `POST /admin/fault/clock` (admin-authenticated) to skew this node's clock at
    /// runtime; logged loudly at start. Also `--enable-fault-injection`. Default `false`.
    pub enabled: bool,
    /// Skew of this node's clock from the start, in ms (needs `enabled`). Default `0`.
    pub clock_offset_ms: i64,
}

/// A tag to create at first start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BootstrapTag {
    /// Tag name, 1–128 characters of `[A-Za-z0-9_.:-]`. Required.
    pub tag: String,
    /// Stored step, 1..=1,000,000,000. Required.
    pub step: i64,
    /// First ID handed out. Default `1` (Leaf's column default).
    #[serde(default = "one")]
    pub max_id: i64,
    /// Free text for people. Default empty.
    #[serde(default)]
    pub description: String,
}

fn one() -> i64 {
    1
}

/// Segment-mode behaviour of every tag on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentConfig {
    /// Cap of the dynamic step when it doubles (Leaf's `MAX_STEP`). A tag whose stored step is
    /// larger uses its stored step. Default `1000000`.
    pub max_step: i64,
    /// How long a request waits for a committed segment when both buffers are empty, before a
    /// 503 `segments_not_ready`. Default `2000` ms.
    pub wait_timeout_ms: u64,
    /// A refill sooner than this after the previous one doubles the step (Leaf: 15 min).
    /// Default `900` s.
    pub double_below_secs: u64,
    /// A refill this long or longer after the previous one halves the step, never below the
    /// stored step (Leaf: 30 min). Default `1800` s.
    pub halve_after_secs: u64,
}

/// Raft timing, snapshots and proposals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RaftConfig {
    /// Leader heartbeat interval. openraft also uses it as the timeout of every append-entries
    /// and read-index round trip, so it must exceed a follower's worst fsync plus network
    /// time; too small and a slow disk looks like a dead follower. Default `250` ms.
    pub heartbeat_ms: u64,
    /// Lower end of the election timeout: a follower that hears no leader for a random time
    /// between min and max starts an election. Default `1000` ms.
    pub election_timeout_min_ms: u64,
    /// Upper end of the election timeout. Default `2000` ms.
    pub election_timeout_max_ms: u64,
    /// Build a snapshot after this many applied entries, then purge the log behind it.
    /// Default `10000`.
    pub snapshot_every: u64,
    /// Entries kept behind a snapshot so slightly lagging followers catch up from the log.
    /// Default `1000`.
    pub keep_logs_after_snapshot: u64,
    /// How long a proposal (segment allocation, tag change) may take before it fails with 503.
    /// Default `5000` ms.
    pub propose_timeout_ms: u64,
    /// Local IP address that connections to peers leave from. Set it on a host with several
    /// addresses so firewall rules, or the chaos harness's per-link proxies, can tell which node
    /// a connection comes from. Default unset: the OS picks.
    pub source_ip: Option<std::net::IpAddr>,
    /// What the node does once its Raft storage fails (a failed read, write or fsync of the
    /// log or state machine; after a failed fsync the page cache cannot be trusted, so Raft is
    /// never resumed in the same process). `"stay"`: keep running, answer 503 with
    /// `raft stopped: ...` until an operator restarts it. `"exit"`: the same until a `/metrics`
    /// scrape has counted the failure (`leaf_storage_errors_total`, so `LeafDiskErrors` fires;
    /// at most 30 s), then shut down and exit with status 75 (`EX_TEMPFAIL`), so a supervisor
    /// (`restart: unless-stopped`, systemd's `Restart=on-failure`, Kubernetes) restarts it and
    /// it recovers from its durable log.
    /// Default `"stay"`; `deploy/` sets `"exit"`, where a supervisor restarts the node. `leaf
    /// serve` acts on it; a program embedding the node awaits
    /// `NodeHandle::storage_failure_reported` itself.
    pub on_storage_failure: OnStorageFailure,
}

/// [`RaftConfig::on_storage_failure`]: stay up answering 503, or exit for a supervisor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnStorageFailure {
    /// Keep running and answer 503 until an operator restarts the node.
    #[default]
    Stay,
    /// Shut down and exit with [`STORAGE_FAILURE_EXIT`], for a supervisor to restart.
    Exit,
}

/// The exit status of `leaf serve` after a storage failure under `on_storage_failure = "exit"`
/// (`EX_TEMPFAIL` of sysexits.h: try again).
pub const STORAGE_FAILURE_EXIT: u8 = 75;

/// HTTP limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Largest accepted request body; larger ones get 413. Default `65536` bytes.
    pub max_body_bytes: usize,
    /// A client that has not sent a complete request head within this time is disconnected;
    /// this also closes a keep-alive connection idle for that long. Default `10000` ms.
    pub header_read_timeout_ms: u64,
    /// On shutdown, how long in-flight requests may take to finish. Default `10000` ms.
    pub shutdown_grace_ms: u64,
    /// Open client connections at most (idle keep-alive ones included). A connection beyond
    /// it is answered `503 unavailable` with `Retry-After: 1` and closed, so a connection flood
    /// costs a bounded amount of memory. Default `4096`; each open connection costs tens of KiB.
    pub max_connections: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node_id: 1,
            data_dir: PathBuf::from("./leaf-data"),
            http_addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            advertise_addr: None,
            admin_token: None,
            cluster_secret: None,
            peers: Peers::default(),
            bootstrap_tags: vec![BootstrapTag {
                tag: "leaf-segment-test".into(),
                step: 2000,
                max_id: 1,
                description: "Test leaf Segment Mode Get Id".into(),
            }],
            segment: SegmentConfig::default(),
            raft: RaftConfig::default(),
            http: HttpConfig::default(),
            snowflake: SnowflakeConfig::default(),
            forecast: ForecastConfig::default(),
            fault: FaultConfig::default(),
            tls: TlsConfig::default(),
            grpc: GrpcConfig::default(),
            auth: AuthConfig::default(),
            audit: AuditConfig::default(),
            insecure_plaintext_peers: false,
        }
    }
}

impl Default for SnowflakeConfig {
    fn default() -> Self {
        SnowflakeConfig {
            enabled: true,
            epoch_ms: 1_288_834_974_657,
            sequence_random_start: 100,
            time_window_ms: 3000,
            max_backward_ms: 5,
            max_startup_wait_ms: 5000,
            lease_ttl_ms: 60_000,
            max_peer_offset_ms: 1000,
            worker_ids: WorkerIds::ALL,
        }
    }
}

impl Default for SegmentConfig {
    fn default() -> Self {
        SegmentConfig { max_step: 1_000_000, wait_timeout_ms: 2000, double_below_secs: 900, halve_after_secs: 1800 }
    }
}

impl Default for RaftConfig {
    fn default() -> Self {
        RaftConfig {
            heartbeat_ms: 250,
            election_timeout_min_ms: 1000,
            election_timeout_max_ms: 2000,
            snapshot_every: 10_000,
            keep_logs_after_snapshot: 1000,
            propose_timeout_ms: 5000,
            source_ip: None,
            on_storage_failure: OnStorageFailure::Stay,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_body_bytes: 64 * 1024,
            header_read_timeout_ms: 10_000,
            shutdown_grace_ms: 10_000,
            max_connections: 4096,
        }
    }
}

/// Command-line overrides; `None` leaves the lower layers' value.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_addr: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Peers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultOverrides>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsOverrides>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure_plaintext_peers: Option<bool>,
}

/// `--tls-cert`, `--tls-key`, `--tls-ca`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TlsOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
}

/// `--enable-fault-injection`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FaultOverrides {
    pub enabled: bool,
}

/// Initial cluster members: node ID → `host:port`. Written as `"1=host:port,2=host:port"` in
/// the file, the environment (`LEAF_PEERS`) and on the command line (`--peers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Peers(pub std::collections::BTreeMap<u64, String>);

impl Peers {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::str::FromStr for Peers {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut map = std::collections::BTreeMap::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (id, addr) =
                item.split_once('=').ok_or_else(|| format!("peer {item:?} is not of the form ID=host:port"))?;
            let id: u64 = id.trim().parse().map_err(|_| format!("peer {item:?}: {id:?} is not a node ID"))?;
            if id == 0 {
                return Err(format!("peer {item:?}: node IDs start at 1"));
            }
            let addr = addr.trim();
            check_host_port(addr).map_err(|e| format!("peer {item:?}: {e}"))?;
            if map.insert(id, addr.to_string()).is_some() {
                return Err(format!("node {id} is listed twice in peers"));
            }
        }
        Ok(Peers(map))
    }
}

impl TryFrom<String> for Peers {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Peers> for String {
    fn from(p: Peers) -> String {
        p.0.iter().map(|(id, addr)| format!("{id}={addr}")).collect::<Vec<_>>().join(",")
    }
}

/// Checks `host:port` (a DNS name, IPv4 or bracketed IPv6 host, and a non-zero port).
pub fn check_host_port(addr: &str) -> Result<(), String> {
    let (host, port) = addr.rsplit_once(':').ok_or_else(|| format!("{addr:?} is not host:port"))?;
    let port: u16 = port.parse().map_err(|_| format!("{addr:?} has no valid port"))?;
    if port == 0 {
        return Err(format!("{addr:?}: port 0 cannot be dialled"));
    }
    // An IPv6 host must be bracketed; a DNS name or IPv4 address has no colon.
    let (bare, colon_ok) = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => (v6, true),
        None => (host, false),
    };
    let ok = !bare.is_empty()
        && bare.len() <= 253
        && bare.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') || (colon_ok && c == ':'));
    if !ok {
        return Err(format!("{addr:?} has no valid host"));
    }
    Ok(())
}

/// Whether `ip` is a loopback address, counting IPv4-mapped loopback (`::ffff:127.0.0.1`, as
/// an IPv4 client appears on a `[::]` listener).
pub fn is_loopback(ip: std::net::IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// A figment error, with the value left out when it concerns a secret (a secret that failed
/// to parse must not be printed).
fn redact(e: figment::Error) -> ConfigError {
    let secret = e.path.first().is_some_and(|k| SECRET_KEYS.contains(&k.to_ascii_lowercase().as_str()));
    if secret {
        let key = e.path.join(".");
        return ConfigError::Invalid(vec![format!(
            "{key} must be a string of at least 16 visible ASCII characters (value not shown: it is a secret)"
        )]);
    }
    // A syntax error quotes the offending line of the file, which may hold a secret: keep the
    // position and the reason, drop the quoted source (the lines drawn with `|`).
    let text = e.to_string();
    if text.contains('\n') {
        let kept: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.contains('|')).collect();
        return ConfigError::Syntax(kept.join(": "));
    }
    ConfigError::Parse(Box::new(e))
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {0} does not exist")]
    MissingFile(PathBuf),
    #[error("config: {0}")]
    Parse(#[from] Box<figment::Error>),
    /// A syntax error, without the quoted source line (it may hold a secret).
    #[error("config: {0}")]
    Syntax(String),
    #[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
    Invalid(Vec<String>),
}

impl Config {
    /// Merges defaults, `file`, the environment and `overrides`, then validates.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        Self::load_with_env(file, overrides, "LEAF_")
    }

    fn load_with_env(file: Option<&Path>, overrides: &Overrides, prefix: &str) -> Result<Config, ConfigError> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        if let Some(path) = file {
            if !path.is_file() {
                return Err(ConfigError::MissingFile(path.to_path_buf()));
            }
            fig = fig.merge(Toml::file(path));
        }
        let env = Env::prefixed(prefix).split("__").filter(|k| {
            let k = k.as_str().to_ascii_lowercase();
            let top = k.split("__").next().and_then(|s| s.split('.').next()).unwrap_or("");
            ENV_KEYS.contains(&top) && !SECRET_KEYS.contains(&top)
        });
        fig = fig.merge(env);
        // Secrets bypass figment's value parsing: `LEAF_ADMIN_TOKEN=0123...` must stay the exact
        // string (parsed, it would become a number, and an error would print it).
        for key in SECRET_KEYS {
            if let Ok(v) = std::env::var(format!("{prefix}{}", key.to_ascii_uppercase())) {
                fig = fig.merge(Serialized::default(key, v));
            }
        }
        fig = fig.merge(Serialized::defaults(overrides));
        let mut config: Config = fig.extract().map_err(redact)?;
        config.tls.expand_node_id(config.node_id);
        config.validate()?;
        Ok(config)
    }

    /// The admin token's value, if one is configured.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_ref().map(Secret::expose)
    }

    /// The cluster secret's value, if one is configured.
    pub fn cluster_secret(&self) -> Option<&str> {
        self.cluster_secret.as_ref().map(Secret::expose)
    }

    /// Checks every field; reports all problems at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errs = Vec::new();
        if self.node_id == 0 {
            errs.push("node_id must be at least 1".to_string());
        }
        if self.data_dir.as_os_str().is_empty() {
            errs.push("data_dir must not be empty".to_string());
        }
        // Visible ASCII: both travel in HTTP headers.
        let secret_ok = |t: &str| t.len() >= 16 && t.bytes().all(|b| b.is_ascii_graphic());
        if self.admin_token().is_some_and(|t| !secret_ok(t)) {
            errs.push("admin_token must be at least 16 visible ASCII characters".to_string());
        }
        if self.admin_token.is_none() && !is_loopback(self.http_addr.ip()) {
            errs.push(format!(
                "admin_token is required because http_addr {} is not a loopback address: without it, anything \
                 that reaches this node (a reverse proxy or sidecar on the host included) could change tags and \
                 membership. Set admin_token (LEAF_ADMIN_TOKEN, e.g. `openssl rand -hex 24`) or listen on 127.0.0.1",
                self.http_addr
            ));
        }
        match self.cluster_secret() {
            Some(t) if !secret_ok(t) => {
                errs.push("cluster_secret must be at least 16 visible ASCII characters".to_string())
            }
            None if !self.peers.is_empty() => {
                errs.push("cluster_secret is required when peers are set (it authenticates Raft traffic)".to_string())
            }
            _ => {}
        }
        self.tls.validate(&mut errs);
        self.grpc.validate(&mut errs);
        self.forecast.validate(&mut errs);
        self.audit.validate(&mut errs);
        if self.cluster_secret.is_some()
            && !self.tls.enabled()
            && !is_loopback(self.http_addr.ip())
            && !self.insecure_plaintext_peers
        {
            errs.push(format!(
                "http_addr {} is not a loopback address and TLS is off: Raft traffic, the cluster secret and admin \
                 tokens would cross the network in clear. Configure [tls] (`leaf certs` makes a CA and \
                 certificates; deploy/README.md) or, on a network you trust completely, pass \
                 --insecure-plaintext-peers",
                self.http_addr
            ));
        }
        if let Some(a) = &self.advertise_addr {
            if let Err(e) = check_host_port(a) {
                errs.push(format!("advertise_addr: {e}"));
            }
        }
        let mut seen = std::collections::HashSet::new();
        for b in &self.bootstrap_tags {
            for r in [validate_tag(&b.tag), validate_step(b.step), validate_max_id(b.max_id)] {
                if let Err(e) = r {
                    errs.push(format!("bootstrap tag {:?}: {e}", b.tag));
                }
            }
            if !seen.insert(&b.tag) {
                errs.push(format!("bootstrap tag {:?} is listed twice", b.tag));
            }
        }
        let s = &self.segment;
        if !(1..=MAX_STEP).contains(&s.max_step) {
            errs.push(format!("segment.max_step must be from 1 to {MAX_STEP}"));
        }
        if !(1..=60_000).contains(&s.wait_timeout_ms) {
            errs.push("segment.wait_timeout_ms must be from 1 to 60000".to_string());
        }
        if s.double_below_secs > s.halve_after_secs {
            errs.push("segment.double_below_secs must not exceed segment.halve_after_secs".to_string());
        }
        let r = &self.raft;
        if !(10..=10_000).contains(&r.heartbeat_ms) {
            errs.push("raft.heartbeat_ms must be from 10 to 10000".to_string());
        }
        if r.election_timeout_min_ms <= r.heartbeat_ms {
            errs.push("raft.election_timeout_min_ms must exceed raft.heartbeat_ms".to_string());
        }
        if r.election_timeout_max_ms <= r.election_timeout_min_ms {
            errs.push("raft.election_timeout_max_ms must exceed raft.election_timeout_min_ms".to_string());
        }
        if r.snapshot_every == 0 {
            errs.push("raft.snapshot_every must be at least 1".to_string());
        }
        if !(100..=600_000).contains(&r.propose_timeout_ms) {
            errs.push("raft.propose_timeout_ms must be from 100 to 600000".to_string());
        }
        if let Some(ip) = r.source_ip {
            let broadcast = matches!(ip, std::net::IpAddr::V4(v4) if v4.is_broadcast());
            if ip.is_unspecified() || ip.is_multicast() || broadcast {
                errs.push(format!(
                    "raft.source_ip {ip} is not a unicast address of this host (leave it unset to let the OS pick)"
                ));
            }
        }
        let h = &self.http;
        if !(1024..=16 * 1024 * 1024).contains(&h.max_body_bytes) {
            errs.push("http.max_body_bytes must be from 1024 to 16777216".to_string());
        }
        if !(100..=600_000).contains(&h.header_read_timeout_ms) {
            errs.push("http.header_read_timeout_ms must be from 100 to 600000".to_string());
        }
        if !(1..=1_000_000).contains(&h.max_connections) {
            errs.push("http.max_connections must be from 1 to 1000000".to_string());
        }
        if h.shutdown_grace_ms > 600_000 {
            errs.push("http.shutdown_grace_ms must be at most 600000".to_string());
        }
        let sf = &self.snowflake;
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        if !(0..=now_ms).contains(&sf.epoch_ms) {
            errs.push("snowflake.epoch_ms must be from 0 to now".to_string());
        }
        if sf.sequence_random_start > 1024 {
            errs.push("snowflake.sequence_random_start must be at most 1024".to_string());
        }
        if !(100..=60_000).contains(&sf.time_window_ms) {
            errs.push("snowflake.time_window_ms must be from 100 to 60000".to_string());
        }
        if sf.max_backward_ms > 1000 {
            errs.push("snowflake.max_backward_ms must be at most 1000".to_string());
        }
        if sf.max_startup_wait_ms > 600_000 {
            errs.push("snowflake.max_startup_wait_ms must be at most 600000".to_string());
        }
        let lease = sf.lease_ttl_ms as i64;
        if !(leaf_raft_store::state::MIN_LEASE_MS..=leaf_raft_store::state::MAX_LEASE_MS).contains(&lease) {
            errs.push("snowflake.lease_ttl_ms must be from 1000 to 3600000".to_string());
        }
        if sf.lease_ttl_ms < 2 * sf.time_window_ms {
            errs.push("snowflake.lease_ttl_ms must be at least twice snowflake.time_window_ms".to_string());
        }
        if !(1..=3_600_000).contains(&sf.max_peer_offset_ms) {
            errs.push("snowflake.max_peer_offset_ms must be from 1 to 3600000".to_string());
        }
        if self.fault.clock_offset_ms != 0 && !self.fault.enabled {
            errs.push("fault.clock_offset_ms needs fault.enabled (--enable-fault-injection)".to_string());
        }
        if self.fault.clock_offset_ms.unsigned_abs() > 365 * 24 * 3_600_000 {
            errs.push("fault.clock_offset_ms must be within a year".to_string());
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(errs))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env() -> &'static str {
        "LEAF_TEST_UNSET_PREFIX_"
    }

    #[test]
    fn defaults_are_valid_and_documented_values() {
        let c = Config::load_with_env(None, &Overrides::default(), no_env()).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.http_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.data_dir, PathBuf::from("./leaf-data"));
        assert_eq!(c.bootstrap_tags[0].tag, "leaf-segment-test");
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure signature
    fn file_then_env_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leaf.toml");
        std::fs::write(
            &path,
            "node_id = 3\nhttp_addr = \"127.0.0.1:0\"\nbootstrap_tags = []\n[segment]\nmax_step = 5000\n",
        )
        .unwrap();
        figment::Jail::expect_with(|jail| {
            jail.set_env("LEAF_SEGMENT__WAIT_TIMEOUT_MS", "250");
            jail.set_env("LEAF_NODE_ID", "4");
            jail.set_env("LEAF_URL", "http://ignored");
            jail.set_env("LEAF_CLUSTER_SECRET", "0123456789abcdef");
            jail.set_env("LEAF_PEERS", "1=a:1,2=b:2");
            jail.set_env("LEAF_SNOWFLAKE__WORKER_IDS", "512-1023");
            jail.set_env("LEAF_AUTH__REQUIRE_TOKEN_FOR_IDS", "true");
            jail.set_env("LEAF_AUDIT__MAX_RECORDS", "100");
            jail.set_env("LEAF_RAFT__ON_STORAGE_FAILURE", "exit");
            let peers = "1=127.0.0.1:8081, 2=leaf2:8080,3=[::1]:8083".parse().unwrap();
            let over = Overrides { data_dir: Some("/tmp/x".into()), peers: Some(peers), ..Default::default() };
            let c = Config::load_with_env(Some(&path), &over, "LEAF_").unwrap();
            assert_eq!(c.node_id, 4);
            assert_eq!(c.segment.max_step, 5000);
            assert_eq!(c.segment.wait_timeout_ms, 250);
            assert_eq!(c.data_dir, PathBuf::from("/tmp/x"));
            assert!(c.bootstrap_tags.is_empty());
            assert_eq!(c.peers.0.len(), 3);
            assert_eq!(c.peers.0[&2], "leaf2:8080");
            assert_eq!(c.cluster_secret(), Some("0123456789abcdef"));
            assert_eq!(c.snowflake.worker_ids, WorkerIds { first: 512, last: 1023 });
            assert!(c.auth.require_token_for_ids);
            assert_eq!(c.audit.max_records, 100);
            assert_eq!(c.raft.on_storage_failure, OnStorageFailure::Exit);
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure signature
    fn an_unknown_storage_failure_policy_is_refused() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("LEAF_RAFT__ON_STORAGE_FAILURE", "reboot");
            let e = Config::load_with_env(None, &Overrides::default(), "LEAF_").unwrap_err().to_string();
            assert!(e.contains("reboot") && e.contains("stay") && e.contains("exit"), "{e}");
            Ok(())
        });
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure signature
    fn tls_paths_name_the_node_from_the_environment() {
        figment::Jail::expect_with(|jail| {
            // One setting for every pod of a StatefulSet: the ID comes from the hostname.
            jail.set_env("LEAF_TLS__CERT", "/tls/node-{node_id}.pem");
            jail.set_env("LEAF_TLS__KEY", "/tls/node-{node_id}-key.pem");
            jail.set_env("LEAF_TLS__CA", "/tls/ca.pem");
            let over = Overrides { node_id: Some(3), ..Default::default() };
            let c = Config::load_with_env(None, &over, "LEAF_").unwrap();
            assert_eq!(c.tls.cert, Some(PathBuf::from("/tls/node-3.pem")));
            assert_eq!(c.tls.key, Some(PathBuf::from("/tls/node-3-key.pem")));
            assert_eq!(c.tls.ca, Some(PathBuf::from("/tls/ca.pem")));
            Ok(())
        });
    }

    #[test]
    fn the_systemd_config_parses_and_exits_on_storage_failure() {
        // Secrets come from the unit's environment file, so only the parse is checked here.
        let c: Config = Figment::from(Serialized::defaults(Config::default()))
            .merge(Toml::string(include_str!("../../../deploy/systemd/leaf.toml")))
            .extract()
            .unwrap();
        assert_eq!(c.node_id, 1);
        assert_eq!(c.raft.on_storage_failure, OnStorageFailure::Exit);
        assert!(c.bootstrap_tags.is_empty());
    }

    #[test]
    fn the_example_file_documents_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leaf.toml");
        std::fs::write(&path, include_str!("../../../deploy/leaf.example.toml")).unwrap();
        let c = Config::load_with_env(Some(&path), &Overrides::default(), no_env()).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn typos_and_nonsense_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leaf.toml");
        std::fs::write(&path, "node_idd = 3\n").unwrap();
        assert!(matches!(
            Config::load_with_env(Some(&path), &Overrides::default(), no_env()),
            Err(ConfigError::Parse(_))
        ));
        assert!(matches!(
            Config::load_with_env(Some(&dir.path().join("missing.toml")), &Overrides::default(), no_env()),
            Err(ConfigError::MissingFile(_))
        ));
        let mut c = Config { node_id: 0, admin_token: Some("short".into()), ..Config::default() };
        c.segment.max_step = 0;
        c.raft.election_timeout_max_ms = 10;
        c.bootstrap_tags.push(c.bootstrap_tags[0].clone());
        let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted") };
        assert_eq!(errs.len(), 5, "{errs:?}");
    }

    #[test]
    fn snowflake_and_fault_nonsense_is_rejected() {
        let mut c = Config::default();
        c.snowflake.epoch_ms = -1;
        c.snowflake.sequence_random_start = 4096;
        c.snowflake.time_window_ms = 10;
        c.snowflake.max_backward_ms = 5000;
        c.snowflake.max_startup_wait_ms = 1_000_000;
        c.snowflake.lease_ttl_ms = 500;
        c.snowflake.max_peer_offset_ms = 0;
        c.fault.clock_offset_ms = 10;
        let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted") };
        assert_eq!(errs.len(), 8, "{errs:?}");
        let mut c = Config::default();
        c.snowflake.epoch_ms = i64::MAX;
        c.snowflake.lease_ttl_ms = 5000;
        c.fault.enabled = true;
        c.fault.clock_offset_ms = -i64::MAX;
        let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted") };
        assert_eq!(errs.len(), 3, "{errs:?}");
        let mut c = Config::default();
        c.fault.enabled = true;
        c.fault.clock_offset_ms = 5000;
        c.validate().unwrap();
    }

    #[test]
    fn peers_syntax_and_the_secret_they_need() {
        for bad in ["1", "x=a:1", "0=a:1", "1=a", "1=a:0", "1=a:1,1=b:2", "1=:80", "1=a b:80", "1=::1:80", "1=a:b:80"] {
            assert!(bad.parse::<Peers>().is_err(), "{bad:?} accepted");
        }
        let p: Peers = "2=b:2,1=a:1".parse().unwrap();
        assert_eq!(String::from(p.clone()), "1=a:1,2=b:2");
        let c = Config { peers: p, ..Config::default() };
        let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("accepted without a secret") };
        assert!(errs[0].contains("cluster_secret"), "{errs:?}");
        let c = Config { cluster_secret: Some("0123456789abcdef".into()), ..c };
        c.validate().unwrap();
        let c = Config { advertise_addr: Some("nohost".into()), ..c };
        assert!(c.validate().is_err());
    }

    #[test]
    fn source_ip_must_be_a_unicast_address() {
        for bad in ["0.0.0.0", "::", "224.0.0.1", "255.255.255.255", "ff02::1"] {
            let mut c = Config::default();
            c.raft.source_ip = Some(bad.parse().unwrap());
            let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("{bad} accepted") };
            assert!(errs.iter().any(|e| e.contains("raft.source_ip")), "{errs:?}");
        }
        let mut c = Config::default();
        c.raft.source_ip = Some("127.0.0.12".parse().unwrap());
        c.validate().unwrap();
    }

    #[test]
    #[allow(clippy::result_large_err)] // figment::Jail's closure signature
    fn secrets_from_env_are_exact_strings_and_never_shown() {
        figment::Jail::expect_with(|jail| {
            // All digits, with a leading zero: parsed as a number it would lose the zero, and the
            // old error printed it.
            jail.set_env("LEAF_ADMIN_TOKEN", "01234567890123456789");
            jail.set_env("LEAF_CLUSTER_SECRET", "98765432109876543210");
            let c = Config::load_with_env(None, &Overrides::default(), "LEAF_").unwrap();
            assert_eq!(c.admin_token(), Some("01234567890123456789"));
            assert_eq!(c.cluster_secret(), Some("98765432109876543210"));
            let debug = format!("{c:?}");
            assert!(!debug.contains("0123456789") && !debug.contains("9876543210"), "{debug}");
            // Too short: refused without echoing the value.
            jail.set_env("LEAF_ADMIN_TOKEN", "12345678");
            jail.set_env("LEAF_CLUSTER_SECRET", "87654321");
            let e = Config::load_with_env(None, &Overrides::default(), "LEAF_").unwrap_err().to_string();
            assert!(e.contains("admin_token") && e.contains("cluster_secret"), "{e}");
            assert!(!e.contains("12345678") && !e.contains("87654321"), "{e}");
            Ok(())
        });
        // A secret of the wrong type in the file: the error names the key, not the value.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leaf.toml");
        std::fs::write(&path, "admin_token = 1234567890123456789\n").unwrap();
        let e = Config::load_with_env(Some(&path), &Overrides::default(), no_env()).unwrap_err().to_string();
        assert!(e.contains("admin_token"), "{e}");
        assert!(!e.contains("1234567890"), "{e}");
        // Not even TOML: the error quotes no source line.
        std::fs::write(&path, "node_id = 1\ncluster_secret = [9876543210987654321]\n").unwrap();
        let e = Config::load_with_env(Some(&path), &Overrides::default(), no_env()).unwrap_err().to_string();
        assert!(e.contains("line 2"), "{e}");
        assert!(!e.contains("9876543210"), "{e}");
    }

    #[test]
    fn a_routable_plaintext_peer_listener_needs_the_insecure_flag() {
        let token = Some("0123456789abcdef".into());
        let secret = Some("fedcba9876543210".into());
        for addr in ["0.0.0.0:8080", "10.1.2.3:8080", "[::]:8080"] {
            let c = Config { http_addr: addr.parse().unwrap(), admin_token: token.clone(), ..Config::default() };
            c.validate().expect("no cluster secret: no peer traffic, nothing to refuse");
            let c = Config { cluster_secret: secret.clone(), ..c };
            let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("{addr}: plaintext peers accepted") };
            assert!(errs.iter().any(|e| e.contains("--insecure-plaintext-peers")), "{addr}: {errs:?}");
            Config { insecure_plaintext_peers: true, ..c.clone() }.validate().unwrap();
            let tls = TlsConfig {
                cert: Some("n.pem".into()),
                key: Some("n-key.pem".into()),
                ca: Some("ca.pem".into()),
                ..TlsConfig::default()
            };
            Config { tls, ..c }.validate().unwrap();
        }
        let local = Config { cluster_secret: secret, peers: "1=127.0.0.1:1".parse().unwrap(), ..Config::default() };
        local.validate().expect("loopback clusters (tests, local-cluster.sh) may stay plaintext");
    }

    #[test]
    fn a_non_loopback_listener_needs_an_admin_token() {
        for addr in ["0.0.0.0:8080", "10.1.2.3:8080", "[::]:8080", "[2001:db8::1]:8080"] {
            let c = Config { http_addr: addr.parse().unwrap(), ..Config::default() };
            let Err(ConfigError::Invalid(errs)) = c.validate() else { panic!("{addr} accepted without a token") };
            assert!(errs.iter().any(|e| e.contains("admin_token is required")), "{addr}: {errs:?}");
            let c = Config { admin_token: Some("0123456789abcdef".into()), ..c };
            assert!(c.validate().is_ok(), "{addr}");
        }
        for addr in ["127.0.0.1:8080", "127.0.0.2:0", "[::1]:8080", "[::ffff:127.0.0.1]:8080"] {
            let c = Config { http_addr: addr.parse().unwrap(), ..Config::default() };
            assert!(c.validate().is_ok(), "{addr}");
        }
        assert!(is_loopback("::ffff:127.0.0.1".parse().unwrap()));
        assert!(!is_loopback("::ffff:10.0.0.1".parse().unwrap()));
        assert!(!is_loopback("::".parse().unwrap()));
    }
}
