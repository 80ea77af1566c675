//! The one configuration of a `leaf` node.
//!
//! Sources, later ones winning: the defaults written on each field (embedded, so `leaf serve`
//! needs no file), a TOML file (`--config`), environment variables `LEAF_*` (nested keys with
//! `__`, e.g. `LEAF_SEGMENT__MAX_STEP=500000`), then command-line flags ([`Overrides`]).
//! [`Config::validate`] rejects nonsense before anything starts.
//!
//! Layout: this file holds the section list, [`Config`], the loading and the secrets. Each
//! section has a file with its struct, its defaults (`impl Default`) and its checks
//! (`validate`): `segment`, `raft`, `http`, `snowflake` (with `worker_ids`), `forecast`,
//! `metrics`, `fault`, `tls`, `grpc`, `access` (`[auth]` and `[audit]`), `backup`, `region`, `bootstrap`
//! (`bootstrap_tags`) and `peers`. `validate` checks the top-level keys and what spans sections, and calls each
//! section's checks; `addr` has the address helpers, `overrides` the command-line layer,
//! `tests` the tests of the whole.
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod access;
mod addr;
mod backup;
mod bootstrap;
mod fault;
mod forecast;
mod grpc;
mod http;
mod metrics;
mod overrides;
mod peers;
mod raft;
#[cfg(test)]
mod reference;
mod region;
mod segment;
mod snowflake;
#[cfg(test)]
mod tests;
mod tls;
mod validate;
mod worker_ids;

pub use access::{AuditConfig, AuthConfig, PublicEndpoint};
pub use addr::{check_host_port, is_loopback};
pub use backup::BackupConfig;
pub use bootstrap::BootstrapTag;
pub use fault::FaultConfig;
pub use forecast::ForecastConfig;
pub use grpc::GrpcConfig;
pub use http::HttpConfig;
pub use metrics::{MetricsConfig, DEFAULT_MAX_TAG_SERIES};
pub use overrides::{FaultOverrides, Overrides, TlsOverrides};
pub use peers::Peers;
pub use raft::{OnStorageFailure, RaftConfig, UnknownTags, STORAGE_FAILURE_EXIT};
pub use region::RegionConfig;
pub use segment::SegmentConfig;
pub use snowflake::SnowflakeConfig;
pub use tls::TlsConfig;
pub use worker_ids::WorkerIds;

/// Keys holding secrets: read from the environment as raw strings (never parsed as numbers),
/// and never shown in an error or a log line.
const SECRET_KEYS: &[&str] = &["admin_token", "cluster_secret"];

/// A secret (admin token, cluster secret). Its `Debug` and `Display` never show the value, so
/// neither an error nor a log line can leak it; [`Secret::expose`] is the one way to read it.
/// In the schema, and so in the reference, a secret is a string marked `writeOnly`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
#[schemars(extend("writeOnly" = true))]
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

/// Configuration of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Raft ID of this node, unique in its cluster and never reused (a worker's identity in later
    /// modes). At least 1; default `1`.
    pub node_id: u64,
    /// Directory of the Raft log, state machine and snapshots; reused on restart. Must not be
    /// empty; default `./leaf-data`.
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
    #[schemars(with = "String")]
    pub peers: Peers,
    /// Tags created when the cluster has a leader and they do not exist yet (a developer
    /// convenience, like Leaf's sample row). Default: `leaf-segment-test`, step 2000, max_id 1.
    /// Set to `[]` in production.
    pub bootstrap_tags: Vec<BootstrapTag>,
    /// Segment mode: the step of the ranges of IDs each tag takes, and how long a request waits for
    /// one.
    pub segment: SegmentConfig,
    /// Raft: heartbeat and election timing, snapshots, how long a proposal may take, the address
    /// connections to peers leave from, and what the node does when its storage fails.
    pub raft: RaftConfig,
    /// Limits of the HTTP listener: request bodies, slow clients, open connections, and the grace
    /// given to requests at shutdown.
    pub http: HttpConfig,
    /// Snowflake mode: the epoch, the margins that keep IDs unique when clocks misbehave, and the
    /// lease and range of worker IDs.
    pub snowflake: SnowflakeConfig,
    /// How the exhaustion forecasts of `/cache`, `/health` and `/metrics` sample each tag's
    /// consumption.
    pub forecast: ForecastConfig,
    /// How many tags get their own series in `/metrics`.
    pub metrics: MetricsConfig,
    /// Fault injection, for chaos tests only; off by default.
    pub fault: FaultConfig,
    /// HTTPS for clients and mutual TLS between nodes, on the node's one listener. Off unless
    /// `cert`, `key` and `ca` are all set (`leaf certs` makes a development CA and certificates).
    /// With TLS on, clients connect with `https://`; `/internal/*` is accepted only from a
    /// certificate that `ca` signed for a node (`urn:leaf:node:<id>`), and the cluster secret is
    /// still required; the node dials its peers with `https://`. The files are re-read when they
    /// change and on SIGHUP: new connections use the new files, and files that fail to load leave
    /// the old ones in use.
    pub tls: TlsConfig,
    /// The gRPC API (`leaf.v1.IdService`, `grpc.health.v1.Health`) on the HTTP listener: same port,
    /// same TLS (ALPN `h2`), HTTP/2 cleartext without TLS. On by default.
    pub grpc: GrpcConfig,
    /// Who may get IDs: whether ID requests (HTTP and gRPC) need a token.
    pub auth: AuthConfig,
    /// How long the audit trail of admin changes keeps its records. The leader's values are the
    /// ones in force: it stamps them into every change it records.
    pub audit: AuditConfig,
    /// Backups the cluster takes by itself: the leader writes one to `dir` every
    /// `interval_secs`, keeps the newest `keep`, and can encrypt them to an age `recipient`.
    pub backup: BackupConfig,
    /// This cluster as one region of several serving one ID space (book: Regions).
    pub region: RegionConfig,
    /// Allow plaintext peer traffic on a non-loopback listener. Without TLS, a node that
    /// listens on a non-loopback address with a `cluster_secret` (so it takes part in a
    /// cluster) refuses to start: Raft traffic, the cluster secret and admin tokens would
    /// cross the network in clear. Set this (`--insecure-plaintext-peers`) only on a network
    /// you trust completely; the node logs a warning at start. Default `false`.
    pub insecure_plaintext_peers: bool,
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
            bootstrap_tags: bootstrap::default_tags(),
            segment: SegmentConfig::default(),
            raft: RaftConfig::default(),
            http: HttpConfig::default(),
            snowflake: SnowflakeConfig::default(),
            forecast: ForecastConfig::default(),
            metrics: MetricsConfig::default(),
            fault: FaultConfig::default(),
            tls: TlsConfig::default(),
            grpc: GrpcConfig::default(),
            auth: AuthConfig::default(),
            audit: AuditConfig::default(),
            backup: BackupConfig::default(),
            region: RegionConfig::default(),
            insecure_plaintext_peers: false,
        }
    }
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

/// The JSON schema of [`Config`], every subschema inline: the keys deserializing accepts, with
/// the fields' doc comments as descriptions.
fn schema() -> serde_json::Value {
    let generator = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true).into_generator();
    generator.into_root_schema_for::<Config>().to_value()
}

/// The top-level keys of [`Config`]: the properties of its schema, so a new field is read from
/// the environment with no list to update.
fn top_level_keys() -> Vec<String> {
    schema()["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default()
}

/// The environment variables named `prefix` and a key: `__` nests (`LEAF_SEGMENT__MAX_STEP`).
/// Only top-level keys of [`Config`] count, so other `LEAF_*` variables (the CLI's `LEAF_URL`)
/// are ignored; secrets are left out, [`Config::load`] reads them as raw strings.
fn env_provider(prefix: &str) -> Env {
    let keys = top_level_keys();
    Env::prefixed(prefix).split("__").filter(move |k| {
        let k = k.as_str().to_ascii_lowercase();
        let top = k.split("__").next().and_then(|s| s.split('.').next()).unwrap_or("");
        keys.iter().any(|key| key == top) && !SECRET_KEYS.contains(&top)
    })
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
        fig = fig.merge(env_provider(prefix));
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
}
