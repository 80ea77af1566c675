//! `leaf serve`: loads the one configuration (file, environment, flags), runs a node until
//! SIGTERM or Ctrl-C, and — with `raft.on_storage_failure = "exit"` — exits with
//! [`STORAGE_FAILURE_EXIT`] once a storage failure was reported, for a supervisor to restart it.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::config::{Config, OnStorageFailure, Overrides, STORAGE_FAILURE_EXIT};

#[derive(Args, Debug)]
pub struct ServeArgs {
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

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn,sled=warn"));
    // Logs go to stderr so stdout stays clean for output a script reads.
    // Colours only on a terminal: redirected logs stay plain text.
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .finish()
        .with(tracing_subscriber::filter::filter_fn(|m| {
            loggable(m.target(), *m.level())
                && !openraft_peer_failure(m.target(), *m.level(), |f| m.fields().field(f).is_some())
        }))
        .try_init();
}

/// Whether an event is one of openraft 0.9's ERROR lines for a call to a peer that failed: a
/// replication RPC (`RPCError`, its field `err`), a vote request or a leadership confirmation
/// (fields `target` and `error`). A peer that restarts or is cut off is not an error of this
/// node, and these come at every retry; `raft::network` reports the peer at WARN instead, once
/// as it becomes unreachable and every 30 s after (`raft/peer_report.rs`).
/// openraft's other ERROR lines (storage, its own channels) stay.
fn openraft_peer_failure(target: &str, level: tracing::Level, has_field: impl Fn(&str) -> bool) -> bool {
    level == tracing::Level::ERROR
        && match target {
            "openraft::replication" => has_field("err"),
            "openraft::core::raft_core" => has_field("target") && has_field("error"),
            _ => false,
        }
}

/// Whether an event may be logged whatever `RUST_LOG` says: never rustls's trace level, which
/// prints handshake messages, session tickets included, in hex.
fn loggable(target: &str, level: tracing::Level) -> bool {
    level != tracing::Level::TRACE || !(target == "rustls" || target.starts_with("rustls::"))
}

pub fn serve(args: ServeArgs) -> ExitCode {
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn rustls_never_logs_at_trace_level() {
        use tracing::Level;
        assert!(!super::loggable("rustls::server::tls13", Level::TRACE), "tickets in the log");
        assert!(!super::loggable("rustls", Level::TRACE));
        assert!(super::loggable("rustls::server::tls13", Level::DEBUG));
        assert!(super::loggable("rustls_pemfile", Level::TRACE));
        assert!(super::loggable("leaf_node::tls", Level::TRACE));
    }

    /// openraft's ERROR lines for a failed call to a peer are left out (the network layer
    /// reports the peer at WARN); its others, and lower levels, stay.
    #[test]
    fn openraft_peer_call_failures_are_not_errors_and_its_other_errors_stay() {
        use tracing::Level;
        let fields = |names: &'static [&'static str]| move |f: &str| names.contains(&f);
        let gone = |target, level, names| super::openraft_peer_failure(target, level, fields(names));
        // replication/mod.rs: `error!(err = ..., "RPCError")`; core: vote and read-index calls.
        assert!(gone("openraft::replication", Level::ERROR, &["err", "message"]));
        assert!(gone("openraft::core::raft_core", Level::ERROR, &["error", "target", "message"]));
        // A storage error of replication (`error`, no `err`), engine and core errors without a
        // peer, a warning: kept.
        assert!(!gone("openraft::replication", Level::ERROR, &["error", "message"]));
        assert!(!gone("openraft::engine::engine_impl", Level::ERROR, &["last_log_id", "vote", "message"]));
        assert!(!gone("openraft::core::raft_core", Level::ERROR, &["error", "message"]));
        assert!(!gone("openraft::replication", Level::WARN, &["err", "message"]));
        assert!(!gone("leaf_node::raft::network", Level::ERROR, &["err", "target", "error"]));
    }
}
