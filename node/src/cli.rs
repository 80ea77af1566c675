//! The `leaf` command line: `serve` runs a node; the other commands talk to a node's HTTP API.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use hyper::{Method, StatusCode};
use serde_json::json;

use crate::client::Client;
use crate::config::{Config, Overrides};

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
    /// percentiles (hdrhistogram, coordinated omission corrected).
    Bench(crate::bench::BenchArgs),
    /// Inspect or change the cluster's membership (admin API of any node).
    Cluster {
        #[command(subcommand)]
        cmd: ClusterCmd,
        #[command(flatten)]
        conn: ConnArgs,
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
}

#[derive(Args, Debug)]
struct ConnArgs {
    /// Base URL of a node.
    #[arg(long, visible_alias = "node", global = true, env = "LEAF_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Admin bearer token.
    #[arg(long, global = true, env = "LEAF_ADMIN_TOKEN", hide_env_values = true)]
    token: Option<String>,
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
    },
    /// List all tags.
    List,
    /// Show one tag.
    Show { tag: String },
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
        /// How many IDs (1–100,000), one per line.
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// Snowflake IDs (the key is only for auditing).
    Snowflake {
        #[arg(default_value = "leaf-snowflake")]
        key: String,
        /// How many IDs (1–100,000), one per line.
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// Decode a snowflake ID: timestamp, worker ID, sequence.
    Decode { id: String },
}

/// Entry point of the `leaf` binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Bench(args) => bench(args),
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

fn bench(args: crate::bench::BenchArgs) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads as usize)
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
    match rt.block_on(crate::bench::run(&args)) {
        Ok(report) if args.json => match serde_json::to_string_pretty(&report) {
            Ok(j) => {
                println!("{j}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Ok(report) => {
            println!("{}", crate::bench::render(&report));
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
    rt.block_on(async move {
        let node = match crate::start(config).await {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(error = %e, "failed to start");
                return ExitCode::FAILURE;
            }
        };
        wait_for_signal().await;
        tracing::info!("shutting down");
        node.shutdown().await;
        ExitCode::SUCCESS
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

/// `leaf health`: exit 0 only on a 200 from `/health` within 3 s.
async fn health(conn: ConnArgs, quiet: bool) -> ExitCode {
    let client = Client::new(&conn.url, conn.token).with_timeout(Duration::from_secs(3));
    match client.get("/health").await {
        Ok((StatusCode::OK, body)) => {
            if !quiet {
                println!("{}", String::from_utf8_lossy(&body));
            }
            ExitCode::SUCCESS
        }
        Ok((status, body)) => {
            eprintln!("not ready: HTTP {}: {}", status.as_u16(), String::from_utf8_lossy(&body));
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

async fn client_command(cmd: Command) -> ExitCode {
    let (client, method, path, body) = match cmd {
        Command::Serve(_) | Command::Bench(_) => return ExitCode::FAILURE,
        Command::Health { conn, quiet } => return health(conn, quiet).await,
        Command::Get { cmd: GetCmd::Segment { tag, count }, conn } => {
            let path = if count == 1 {
                format!("/api/segment/get/{tag}")
            } else {
                format!("/api/segment/get/{tag}?count={count}")
            };
            (Client::new(&conn.url, conn.token), Method::GET, path, None)
        }
        Command::Get { cmd: GetCmd::Snowflake { key, count }, conn } => {
            let path = if count == 1 {
                format!("/api/snowflake/get/{key}")
            } else {
                format!("/api/snowflake/get/{key}?count={count}")
            };
            (Client::new(&conn.url, conn.token), Method::GET, path, None)
        }
        Command::Get { cmd: GetCmd::Decode { id }, conn } => {
            (Client::new(&conn.url, conn.token), Method::GET, format!("/api/snowflake/decode/{id}"), None)
        }
        Command::Cluster { cmd, conn } => {
            let client = Client::new(&conn.url, conn.token);
            match cmd {
                ClusterCmd::Status => (client, Method::GET, "/cluster/status".to_string(), None),
                ClusterCmd::AddLearner { node_id, addr } => (
                    client,
                    Method::POST,
                    "/admin/cluster/learners".to_string(),
                    Some(json!({"node_id": node_id, "addr": addr})),
                ),
                ClusterCmd::Promote { node_id } => {
                    (client, Method::POST, format!("/admin/cluster/nodes/{node_id}/promote"), None)
                }
                ClusterCmd::Remove { node_id } => {
                    (client, Method::DELETE, format!("/admin/cluster/nodes/{node_id}"), None)
                }
            }
        }
        Command::Tag { cmd, conn } => {
            let client = Client::new(&conn.url, conn.token);
            match cmd {
                TagCmd::Create { tag, step, max_id, description } => (
                    client,
                    Method::POST,
                    "/admin/tags".to_string(),
                    Some(json!({"tag": tag, "step": step, "max_id": max_id, "description": description})),
                ),
                TagCmd::List => (client, Method::GET, "/admin/tags".to_string(), None),
                TagCmd::Show { tag } => (client, Method::GET, format!("/admin/tags/{tag}"), None),
                TagCmd::Update { tag, step, description } => (
                    client,
                    Method::PATCH,
                    format!("/admin/tags/{tag}"),
                    Some(json!({"step": step, "description": description})),
                ),
            }
        }
    };
    match client.request(method, &path, body.as_ref()).await {
        Ok((status, bytes)) => {
            let text = String::from_utf8_lossy(&bytes);
            if status.is_success() {
                println!("{text}");
                ExitCode::SUCCESS
            } else {
                eprintln!("error: HTTP {}: {text}", status.as_u16());
                if status == StatusCode::SERVICE_UNAVAILABLE {
                    ExitCode::from(1)
                } else {
                    ExitCode::from(2)
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Polls `url/health` until it answers ready or `timeout` passes.
pub async fn wait_healthy(url: &str, timeout: Duration) -> bool {
    let client = Client::new(url, None);
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if let Ok((StatusCode::OK, _)) = client.get("/health").await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::node_id_from_hostname;

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
