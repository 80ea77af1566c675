//! The `leaf` command line: `serve` runs a node; the other commands talk to a node's HTTP API.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use leaf_api::types::{AddLearnerRequest, CreateTagRequest, UpdateTagRequest};
use leaf_client::{Client, ClientError, HealthMode, TlsOptions};
use serde::Serialize;

use crate::config::{Config, OnStorageFailure, Overrides, STORAGE_FAILURE_EXIT};

mod certs;
mod import;
mod tokens;

#[derive(Parser, Debug)]
#[command(name = "leaf", version, about = "Raft-replicated distributed ID service (a successor to Meituan's Leaf)")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a node. With no arguments: a one-node cluster on 127.0.0.1:8080, data in ./leaf-data.
    Serve(ServeArgs),
    /// Create, list, show or update tags (admin API).
    Tag {
        #[command(subcommand)]
        cmd: TagCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Scoped tokens: create, list, show, rotate, revoke (the admin token only).
    Token {
        #[command(subcommand)]
        cmd: tokens::TokenCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Move tags from Leaf: its MySQL table `leaf_alloc`, or a CSV export of it, each tag
    /// starting above anything Leaf can have handed out.
    /// (`--url` is the source database here; the cluster's node is `--node`.)
    Import {
        #[command(subcommand)]
        cmd: import::ImportCmd,
    },
    /// The audit trail: who changed tags, tokens and membership, and when.
    Audit {
        #[command(flatten)]
        args: tokens::AuditArgs,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Get IDs.
    Get {
        #[command(subcommand)]
        cmd: GetCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Print the node's health; exit 0 when ready, 1 when not ready, unreachable or slower
    /// than 3 s (for container healthchecks: the image has no curl).
    Health {
        /// Print nothing when healthy (failures still go to stderr).
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// HTTP load generator: N keep-alive connections, closed loop or a fixed rate, latency
    /// percentiles (hdrhistogram, coordinated omission corrected). `leaf bench grpc`: unary
    /// gRPC GetSegmentIds calls over HTTP/2 instead.
    Bench(BenchCmd),
    /// Inspect or change the cluster's membership (admin API of any node).
    Cluster {
        #[command(subcommand)]
        cmd: ClusterCmd,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Create development TLS certificates: a CA, and the node and client certificates it signs.
    ///
    /// For trying TLS out and for tests: the CA key lies unencrypted on disk. Production brings
    /// its own CA (deploy/README.md). First `leaf certs ca --dir D`, then `leaf certs node` per
    /// node and `leaf certs client` per client into the same D; or `leaf certs bundle` for
    /// whatever of all that is missing (what deploy/ runs on every start).
    Certs {
        #[command(subcommand)]
        cmd: certs::CertsCmd,
    },
}

#[derive(Subcommand, Debug)]
enum ClusterCmd {
    /// Membership, leader, term, log indexes and replication as the node sees them.
    Status,
    /// Add a node as a learner: it replicates the log and serves IDs but does not vote. Start
    /// it first with the same cluster_secret and a node ID never used before.
    AddLearner {
        node_id: u64,
        /// `host:port` where the other nodes reach the new node.
        addr: String,
    },
    /// Make a caught-up learner a voter.
    Promote { node_id: u64 },
    /// Remove a voter or learner; its ID is never reused.
    Remove { node_id: u64 },
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// TOML configuration file.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// This node's Raft ID.
    #[arg(long)]
    node_id: Option<u64>,
    /// Take the node ID from a hostname ending in `-<ordinal>` (a Kubernetes StatefulSet pod
    /// such as `leaf-0`): the ordinal plus one, since node IDs start at 1.
    #[arg(long, conflicts_with = "node_id")]
    node_id_from_hostname: bool,
    /// Data directory.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// HTTP listen address (port 0 picks a free one).
    #[arg(long)]
    http_addr: Option<SocketAddr>,
    /// Initial members of a multi-node cluster, the same on every node: "1=host:port,2=host:port,3=host:port".
    #[arg(long)]
    peers: Option<crate::config::Peers>,
    /// Expose `POST /admin/fault/clock` to skew this node's clock (chaos tests only).
    #[arg(long)]
    enable_fault_injection: bool,
    /// PEM certificate chain of this node (`tls.cert`; with --tls-key and --tls-ca turns TLS on).
    /// `{node_id}` in the path stands for the node's ID (as in --tls-key).
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert (`tls.key`).
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// PEM certificate of the cluster CA (`tls.ca`).
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Allow plaintext Raft traffic on a non-loopback listener (`insecure_plaintext_peers`):
    /// only on a network you trust completely.
    #[arg(long)]
    insecure_plaintext_peers: bool,
}

#[derive(Args, Debug)]
struct ConnArgs {
    /// Base URL of a node: http://host:port, or https://host:port for a node with TLS on.
    #[arg(long, visible_alias = "node", global = true, env = "LEAF_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Bearer token: the admin token, or a scoped token (`leaf_<id>_<secret>`).
    #[arg(long, global = true, env = "LEAF_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// PEM file of the CA that signed the node's certificate, for https:// URLs (default: the
    /// platform's root certificates).
    #[arg(long, global = true, env = "LEAF_CA")]
    ca: Option<PathBuf>,
    /// PEM certificate to present to a node that asks for one (mutual TLS; with --client-key).
    #[arg(long, global = true, env = "LEAF_CLIENT_CERT")]
    client_cert: Option<PathBuf>,
    /// PEM private key of --client-cert.
    #[arg(long, global = true, env = "LEAF_CLIENT_KEY")]
    client_key: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum TagCmd {
    /// Create a tag.
    Create {
        tag: String,
        /// Stored step (segment size and floor of the dynamic step).
        #[arg(long)]
        step: i64,
        /// First ID to hand out (default 1).
        #[arg(long)]
        max_id: Option<i64>,
        #[arg(long)]
        description: Option<String>,
        /// How the IDs are made: segment (default), monotonic (strictly increasing, served by
        /// the leader), obfuscated (not ordered, not countable) or daily (yyyyMMdd + counter).
        #[arg(long)]
        profile: Option<leaf_api::profile::Profile>,
        /// Daily tags: counter digits after the date (default 8).
        #[arg(long, requires = "profile")]
        digits: Option<u8>,
        /// Daily tags: the zone whose midnight starts a day, as +HH:MM / -HH:MM (default +00:00).
        #[arg(long, requires = "profile", allow_hyphen_values = true)]
        utc_offset: Option<String>,
        /// The largest ID the tag may hand out, e.g. 9007199254740991 for JavaScript.
        #[arg(long)]
        upper_bound: Option<i64>,
    },
    /// List all tags.
    List,
    /// Show one tag.
    Show { tag: String },
    /// An obfuscated tag's ID back to its sequence number.
    Decode { tag: String, id: i64 },
    /// Change a tag's step and/or description.
    Update {
        tag: String,
        #[arg(long)]
        step: Option<i64>,
        #[arg(long)]
        description: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
enum GetCmd {
    /// Segment-mode IDs for a tag.
    Segment {
        tag: String,
        /// How many IDs (1–100,000 one per line; 1–1,000,000 with --ranges).
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Print the IDs as JSON ranges `[start, end)` instead of one per line.
        #[arg(long)]
        ranges: bool,
    },
    /// Snowflake IDs (the key is only for auditing).
    Snowflake {
        #[arg(default_value = "leaf-snowflake")]
        key: String,
        /// How many IDs (1–100,000 one per line; 1–1,000,000 with --ranges).
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Print the IDs as JSON ranges `[start, end)` instead of one per line.
        #[arg(long)]
        ranges: bool,
    },
    /// Decode a snowflake ID: timestamp, worker ID, sequence.
    Decode { id: i64 },
}

/// `leaf bench [OPTIONS]` (HTTP) or `leaf bench grpc [OPTIONS]`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchCmd {
    #[command(subcommand)]
    mode: Option<BenchMode>,
    #[command(flatten)]
    http: leaf_loadgen::BenchArgs,
}

#[derive(Subcommand, Debug)]
enum BenchMode {
    /// gRPC load: unary leaf.v1.IdService/GetSegmentIds, closed loop, over --connections
    /// HTTP/2 connections with --concurrency calls in flight on each.
    Grpc(leaf_loadgen::grpc::GrpcBenchArgs),
}

/// Entry point of the `leaf` binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Bench(args) => bench(args),
        Command::Certs { cmd } => certs::run(cmd),
        other => {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            };
            rt.block_on(client_command(other))
        }
    }
}

fn bench(cmd: BenchCmd) -> ExitCode {
    let (threads, json) = match &cmd.mode {
        Some(BenchMode::Grpc(g)) => (g.threads, g.json),
        None => (cmd.http.threads, cmd.http.json),
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads as usize)
        .enable_all()
        .thread_name("leaf-bench")
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match &cmd.mode {
            Some(BenchMode::Grpc(g)) => {
                leaf_loadgen::grpc::run_grpc(g).await.map(|r| (leaf_loadgen::grpc::render_grpc(&r), r))
            }
            None => leaf_loadgen::run(&cmd.http).await.map(|r| (leaf_loadgen::render(&r), r)),
        }
    });
    match result {
        Ok((_, report)) if json => match serde_json::to_string_pretty(&report) {
            Ok(j) => {
                println!("{j}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Ok((text, _)) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn,sled=warn"));
    // Logs go to stderr so stdout stays clean for output a script reads.
    // Colours only on a terminal: redirected logs stay plain text.
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

fn serve(args: ServeArgs) -> ExitCode {
    init_tracing();
    let mut node_id = args.node_id;
    if args.node_id_from_hostname {
        match hostname().and_then(|h| node_id_from_hostname(&h)) {
            Ok(id) => node_id = Some(id),
            Err(e) => {
                eprintln!("error: --node-id-from-hostname: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let overrides = Overrides {
        node_id,
        data_dir: args.data_dir,
        http_addr: args.http_addr,
        peers: args.peers,
        fault: args.enable_fault_injection.then_some(crate::config::FaultOverrides { enabled: true }),
        tls: (args.tls_cert.is_some() || args.tls_key.is_some() || args.tls_ca.is_some())
            .then_some(crate::config::TlsOverrides { cert: args.tls_cert, key: args.tls_key, ca: args.tls_ca }),
        insecure_plaintext_peers: args.insecure_plaintext_peers.then_some(true),
    };
    let config = match Config::load(args.config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("leaf").build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let exit_on_storage_failure = config.raft.on_storage_failure == OnStorageFailure::Exit;
    rt.block_on(async move {
        let node = match crate::start(config).await {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(error = %e, "failed to start");
                return ExitCode::FAILURE;
            }
        };
        let code = tokio::select! {
            _ = wait_for_signal() => {
                tracing::info!("shutting down");
                ExitCode::SUCCESS
            }
            why = node.storage_failure_reported(crate::STORAGE_FAILURE_REPORT_WINDOW), if exit_on_storage_failure => {
                tracing::error!(
                    error = %why,
                    exit_status = STORAGE_FAILURE_EXIT,
                    "raft storage failed: shutting down and exiting (raft.on_storage_failure = \"exit\") so a \
                     supervisor restarts this node from its durable log"
                );
                ExitCode::from(STORAGE_FAILURE_EXIT)
            }
        };
        node.shutdown().await;
        code
    })
}

/// This host's name: the kernel's (`/proc/sys/kernel/hostname`), else `$HOSTNAME`.
fn hostname() -> Result<String, String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()));
    name.ok_or_else(|| "cannot read the hostname".to_string())
}

/// `leaf-2` → node 3: the StatefulSet ordinal after the last `-`, plus one.
fn node_id_from_hostname(host: &str) -> Result<u64, String> {
    // A fully qualified name's first label is the pod's name.
    let first = host.split('.').next().unwrap_or(host);
    let ordinal = first
        .rsplit_once('-')
        .map(|(_, n)| n)
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("hostname {host:?} does not end in -<ordinal>"))?;
    let ordinal: u64 = ordinal.parse().map_err(|_| format!("ordinal of {host:?} is too large"))?;
    ordinal.checked_add(1).ok_or_else(|| format!("ordinal of {host:?} is too large"))
}

/// `leaf health`: exit 0 only on a ready answer from `/health` within 3 s.
async fn health(conn: ConnArgs, quiet: bool) -> ExitCode {
    let client = match connect(conn, Duration::from_secs(3)) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match client.health(HealthMode::All).await {
        Ok(report) => {
            let text = serde_json::to_string(&report.health).unwrap_or_default();
            if !report.ready {
                eprintln!("not ready: HTTP 503: {text}");
                ExitCode::from(1)
            } else {
                if !quiet {
                    println!("{text}");
                }
                ExitCode::SUCCESS
            }
        }
        Err(e) if e.status().is_some() => {
            eprintln!("not ready: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("unreachable: {e}");
            ExitCode::from(1)
        }
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// A client of the one node `conn` names: one attempt per command (as a script expects), the
/// answer printed as the node sent it.
fn connect(conn: ConnArgs, timeout: Duration) -> Result<Client, ExitCode> {
    let usage = |e: &dyn std::fmt::Display| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    let tls = TlsOptions::from_files(conn.ca.as_deref(), conn.client_cert.as_deref(), conn.client_key.as_deref())
        .map_err(|e| usage(&e))?;
    Client::builder([conn.url])
        .maybe_token(conn.token)
        .tls(tls)
        .timeout(timeout)
        .deadline(timeout)
        .retries(0)
        .build()
        .map_err(|e| usage(&e))
}

/// Prints a typed answer as JSON (what the node sent) or the error; the exit code is 0, 1
/// when the node is unavailable, 2 when the request was refused.
fn print_json<T: Serialize>(result: Result<T, ClientError>) -> ExitCode {
    match result.and_then(|v| serde_json::to_string(&v).map_err(|e| ClientError::Request(e.to_string()))) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn print_ids(result: Result<Vec<i64>, ClientError>) -> ExitCode {
    match result {
        Ok(ids) => {
            let mut out = String::with_capacity(ids.len() * 20);
            for id in ids {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(itoa::Buffer::new().format(id));
            }
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn fail(e: &ClientError) -> ExitCode {
    eprintln!("error: {e}");
    if e.is_unavailable() {
        ExitCode::from(1)
    } else {
        ExitCode::from(2)
    }
}

async fn client_command(cmd: Command) -> ExitCode {
    const TIMEOUT: Duration = Duration::from_secs(30);
    match cmd {
        Command::Serve(_) | Command::Bench(_) | Command::Certs { .. } => ExitCode::FAILURE,
        Command::Health { conn, quiet } => health(conn, quiet).await,
        Command::Token { cmd, conn } => match connect(conn, TIMEOUT) {
            Ok(client) => tokens::token(&client, cmd).await,
            Err(code) => code,
        },
        Command::Import { cmd } => match connect(cmd.conn(), TIMEOUT) {
            Ok(client) => import::run(&client, cmd).await,
            Err(code) => code,
        },
        Command::Audit { args, conn } => match connect(conn, TIMEOUT) {
            Ok(client) => tokens::audit(&client, args).await,
            Err(code) => code,
        },
        Command::Get { cmd, conn } => {
            let client = match connect(conn, TIMEOUT) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match cmd {
                GetCmd::Segment { tag, count, ranges: true } => print_json(client.segment_ranges(&tag, count).await),
                GetCmd::Segment { tag, count: 1, .. } => print_ids(client.segment_id(&tag).await.map(|id| vec![id])),
                GetCmd::Segment { tag, count, .. } => print_ids(client.segment_ids(&tag, count).await),
                GetCmd::Snowflake { key, count, ranges: true } => {
                    print_json(client.snowflake_ranges(&key, count).await)
                }
                GetCmd::Snowflake { key, count: 1, .. } => {
                    print_ids(client.snowflake_id(&key).await.map(|id| vec![id]))
                }
                GetCmd::Snowflake { key, count, .. } => print_ids(client.snowflake_ids(&key, count).await),
                GetCmd::Decode { id } => print_json(client.decode(id).await),
            }
        }
        Command::Cluster { cmd, conn } => {
            let client = match connect(conn, TIMEOUT) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match cmd {
                ClusterCmd::Status => print_json(client.cluster_status().await),
                ClusterCmd::AddLearner { node_id, addr } => {
                    print_json(client.add_learner(&AddLearnerRequest { node_id, addr }).await)
                }
                ClusterCmd::Promote { node_id } => print_json(client.promote(node_id).await),
                ClusterCmd::Remove { node_id } => print_json(client.remove(node_id).await),
            }
        }
        Command::Tag { cmd, conn } => {
            let client = match connect(conn, TIMEOUT) {
                Ok(c) => c,
                Err(code) => return code,
            };
            match cmd {
                TagCmd::Create { tag, step, max_id, description, profile, digits, utc_offset, upper_bound } => {
                    let daily = (digits.is_some() || utc_offset.is_some())
                        .then_some(leaf_api::profile::DailyOptions { digits, utc_offset });
                    let req = CreateTagRequest { tag, step, max_id, description, profile, daily, upper_bound };
                    print_json(client.create_tag(&req).await)
                }
                TagCmd::List => print_json(client.tags().await),
                TagCmd::Show { tag } => print_json(client.tag(&tag).await),
                TagCmd::Decode { tag, id } => print_json(client.decode_obfuscated(&tag, id).await),
                TagCmd::Update { tag, step, description } => {
                    print_json(client.update_tag(&tag, &UpdateTagRequest { step, description }).await)
                }
            }
        }
    }
}

/// Polls `url/health` until it answers ready or `timeout` passes.
pub async fn wait_healthy(url: &str, timeout: Duration) -> bool {
    let Ok(client) = Client::builder([url]).retries(0).timeout(Duration::from_secs(5)).build() else { return false };
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if client.health(HealthMode::All).await.is_ok_and(|r| r.ready) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The connection arguments of a parsed `leaf` command line.
    fn conn_of(args: &[&str]) -> ConnArgs {
        match Cli::try_parse_from(args).unwrap().command {
            Command::Health { conn, .. } | Command::Get { conn, .. } => conn,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tls_flags_reach_the_client() {
        // Global flags: accepted after the subcommand's own arguments too.
        let conn = conn_of(&[
            "leaf",
            "get",
            "segment",
            "t",
            "--url",
            "https://10.0.0.1:8443",
            "--ca",
            "/etc/leaf/ca.pem",
            "--client-cert",
            "/etc/leaf/client-ops.pem",
            "--client-key",
            "/etc/leaf/client-ops-key.pem",
        ]);
        assert_eq!(conn.ca.as_deref(), Some(Path::new("/etc/leaf/ca.pem")));
        assert_eq!(conn.client_cert.as_deref(), Some(Path::new("/etc/leaf/client-ops.pem")));
        assert_eq!(conn.client_key.as_deref(), Some(Path::new("/etc/leaf/client-ops-key.pem")));
        // The files are read when the client is built: a missing CA is a usage error (exit 2).
        let conn = conn_of(&["leaf", "health", "--url", "https://127.0.0.1:1", "--ca", "/nonexistent/leaf-ca.pem"]);
        assert_eq!(connect(conn, Duration::from_secs(1)).unwrap_err(), ExitCode::from(2));
        // A certificate without its key.
        let conn = conn_of(&["leaf", "health", "--client-cert", "/nonexistent/c.pem"]);
        assert_eq!(connect(conn, Duration::from_secs(1)).unwrap_err(), ExitCode::from(2));
        // Plain http:// with no TLS flag still builds.
        assert!(connect(conn_of(&["leaf", "health", "--url", "http://127.0.0.1:1"]), Duration::from_secs(1)).is_ok());
    }

    #[test]
    fn node_ids_come_from_statefulset_ordinals() {
        assert_eq!(node_id_from_hostname("leaf-0"), Ok(1));
        assert_eq!(node_id_from_hostname("leaf-4"), Ok(5));
        assert_eq!(node_id_from_hostname("my-leaf-12.leaf-peers.default.svc.cluster.local"), Ok(13));
        for bad in ["leaf", "leaf-", "leaf-x", "leaf-1a", "", "leaf-99999999999999999999", "leaf-18446744073709551615"]
        {
            assert!(node_id_from_hostname(bad).is_err(), "{bad:?}");
        }
    }
}
