//! The `leaf` node: a Raft group member that hands out unique 64-bit IDs over HTTP and gRPC.
//!
//! The public surface is small: [`start`] runs a node inside the caller's tokio runtime and
//! returns a [`NodeHandle`], configured by one [`Config`]; the `leaf` binary ([`cli`]) wraps it
//! with configuration loading, signals and client commands. Everything else is `pub(crate)`
//! (a hidden `internals` module re-exports the few types the workspace's benches and wire-level
//! tests need).
//!
//! Layout:
//! - [`access`]: scoped tokens (checked against the replicated state, hashed secrets), their
//!   per-node quotas, and the principal an admin request acts as (the audit trail's actor).
//! - [`config`]: the one documented `Config` (defaults → TOML → `LEAF_*` env → flags).
//! - [`clock`]: the wall clock every time-of-day read goes through (fault injection skews it).
//! - [`clock_watch`]: the peers' clock offsets, read every 15 s while the node runs (metrics).
//! - [`raft`]: openraft wiring, peer RPC, routing to the leader, membership, status (the only
//!   module tree naming the openraft crate, checked by `layering.rs`), and the hooks by which
//!   the features below add to the leader's execution without `raft/` naming them.
//! - [`allocation`]: segment allocation through Raft (the tag actors' allocator, the leader's
//!   group commit of allocations, the allocation journal's view).
//! - [`regions`]: a region's leader keeping its cluster supplied from the global tier (joining,
//!   adopting its identity, blocks ahead of each tag's traffic); the global tier's side is an
//!   operation of [`service`] (`service/regions.rs`).
//! - [`gapless`]: gapless numbers through Raft (this node's issues sent in groups, the
//!   leader's group commit of them, lapsed reservations).
//! - [`group_commit`]: the shared tool behind every group commit: callers that arrive while an
//!   entry commits share the next one.
//! - [`segment`]: the lock-free double buffer (the per-ID hot path).
//! - [`tags`]: per-tag actix actors that own refills, and the tag registry.
//! - [`ticker`]: the periodic wake-up of background tasks, until shutdown.
//! - [`snowflake`]: the lock-free snowflake generator and the worker actor (registration and
//!   lease through Raft, durable time window, clock checks).
//! - [`error`]: [`error::ApiError`], the one error type, beneath every layer that refuses a
//!   request.
//! - [`service`]: the service core every edge calls: [`service::App`], the operations (IDs,
//!   tags, tokens and audit, cluster, health, dashboard), validation, and the one error type
//!   with its one rule for what a client may see.
//! - [`http`]: the axum edge: routes, OpenAPI document, tower layers, extractors, errors →
//!   statuses, the fast ID path, the built-in dashboard page (`/ui`).
//! - [`grpc`]: the tonic edge (`leaf.v1.IdService`, `AdminService`, health): services and
//!   `Status` mapping, over the same core operations as the HTTP routes.
//! - [`listener`]: the one port: accept loop, connection cap, TLS handshake, protocol sniffing,
//!   and dispatch to the gRPC edge, the HTTP fast path or the HTTP router.
//! - [`tls`]: HTTPS on the listener, mutual TLS between nodes, certificate reload.
//! - [`memory`]: the allocator, and giving freed memory back to the OS: after connection
//!   floods, after the idle sweep, and the tables of maps that emptied.
//! - [`private`]: data at rest is its owner's alone (the umask, and tightening at start).
//! - [`metrics`]: Prometheus metrics (OpenMetrics or text 0.0.4; request latency per route,
//!   process, Raft, snowflake and cluster gauges).
//! - [`profiles`]: how obfuscated tags are served (keys, the keyed bijection), and monotonic
//!   tags (the leader's windows, this node's grouped takes).
//! - [`forecast`]: exhaustion forecasts (IDs left and time to exhaustion per tag, the snowflake
//!   epoch and worker IDs) for `/cache`, `/health` and `/metrics`.
//! - [`backup`]: backups: taking one (on request or scheduled on the leader), age encryption,
//!   the scheduled files; `leaf restore` is in [`cli`].
//! - [`import`]: `leaf import`, Leaf's `leaf_alloc` (MySQL/MariaDB or CSV) into the cluster
//!   with the margin rule.
//! - [`certs`]: `leaf certs`, a development CA and the node and client certificates it signs.
//! - [`cli`]: the command-line interface (client commands go through `leaf-client`, `leaf bench`
//!   through `leaf-loadgen`).
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaf_raft_store::{ApplyError, NewTag};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub(crate) mod access;
pub(crate) mod allocation;
pub(crate) mod backup;
pub mod certs;
pub mod cli;
pub(crate) mod clock;
pub(crate) mod clock_watch;
pub mod config;
pub(crate) mod error;
pub(crate) mod forecast;
pub(crate) mod gapless;
pub(crate) mod group_commit;
pub(crate) mod grpc;
pub(crate) mod http;
pub(crate) mod import;
pub(crate) mod listener;
pub(crate) mod memory;
pub(crate) mod metrics;
pub(crate) mod private;
pub(crate) mod profiles;
pub(crate) mod raft;
pub(crate) mod regions;
pub(crate) mod segment;
pub(crate) mod service;
pub(crate) mod snowflake;
pub(crate) mod tags;
pub(crate) mod ticker;
pub(crate) mod tls;

#[cfg(test)]
mod layering;

pub use config::Config;
pub use raft::RaftStartError;

/// What this workspace's benchmarks and wire-level tests reach into below the facade: the
/// hot-path types the criterion benches measure, the clocks they drive, and the internal RPC
/// client the tests use to send forged or malformed peer messages. Not a stable API; nothing
/// outside this repository should use it.
#[doc(hidden)]
pub mod internals {
    pub use crate::clock::{Clock, ManualClock, SystemClock};
    pub use crate::http::status_of;
    pub use crate::raft::election::PATH_PRE_VOTE;
    pub use crate::raft::network::{
        CallError, PeerClient, PATH_APPEND, PATH_PEER_STATUS, PATH_SNAPSHOT, PATH_TIME, PATH_VOTE,
    };
    pub use crate::raft::ops;
    pub use crate::raft::transfer::PATH_TAKE_OVER;
    pub use crate::segment::{DoubleBuffer, Segment};
    pub use crate::snowflake::generator::{Generator, Layout, Stall};
    pub use crate::snowflake::STATE_FILE;
    pub use crate::tags::probe::Probe as TagsProbe;
}

use crate::clock::SystemClock;
use crate::forecast::sampler::Forecasts;
use crate::metrics::Metrics;
use crate::raft::{ProposeError, RaftNode};
use crate::service::App;
use crate::snowflake::Snowflake;
use crate::tags::{ActorSystem, TagLookup, Tags};

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Raft(#[from] RaftStartError),
    #[error("bind {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("start actor system: {0}")]
    Actors(std::io::Error),
    /// `[region]` names a global tier this node cannot reach as configured (its token file).
    #[error("[region]: {0}")]
    Region(String),
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The snowflake state file does not read back whole (bit rot, a bad copy).
    #[error(
        "the data directory is damaged: {0}. This node refuses to start rather than risk repeating \
         snowflake IDs; replace it from its peers under a new node ID (book: Docker and Compose, \"Replace a \
         failed node\"), or, once the clock is surely past every ID it issued, delete the file"
    )]
    Damaged(String),
}

/// A running node.
pub struct NodeHandle {
    http_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    server: JoinHandle<()>,
    bootstrap: JoinHandle<()>,
    form: JoinHandle<()>,
    quorum: JoinHandle<()>,
    elections: JoinHandle<()>,
    raft: RaftNode,
    metrics: Arc<Metrics>,
    actors: Option<ActorSystem>,
    bootstrapped: Arc<AtomicBool>,
}

/// How long a node whose Raft storage failed waits for a `/metrics` scrape to see the failure
/// before it exits under `raft.on_storage_failure = "exit"`: `leaf_storage_errors_total` dies
/// with the process, so without the wait `LeafDiskErrors` could never fire for a node that a
/// supervisor restarts at once.
pub const STORAGE_FAILURE_REPORT_WINDOW: Duration = Duration::from_secs(30);

impl NodeHandle {
    /// Where the HTTP API listens (the real port when configured with port 0).
    pub fn http_addr(&self) -> SocketAddr {
        self.http_addr
    }

    pub fn raft(&self) -> &RaftNode {
        &self.raft
    }

    /// Waits until the node is ready to serve (leader known, log applied, bootstrap tags
    /// created).
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        if !self.raft.wait_ready(timeout).await {
            return false;
        }
        while !self.bootstrapped.load(Ordering::Acquire) {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Resolves once Raft has stopped on a storage error and a `/metrics` render has counted
    /// it (`leaf_storage_errors_total{store="raft"}`), or `window` after the failure without
    /// one, with the error's text. Until then the node answers 503 as under `"stay"`. Never
    /// resolves while Raft runs or after a normal shutdown.
    pub async fn storage_failure_reported(&self, window: Duration) -> String {
        let why = self.raft.storage_failure().await;
        tracing::error!(
            error = %why,
            window_ms = window.as_millis() as u64,
            "raft storage failed: answering 503 until a /metrics scrape has counted it (or the window ends), then exiting"
        );
        let deadline = tokio::time::Instant::now() + window;
        while !self.metrics.raft_storage_failure_reported() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        why
    }

    /// Graceful shutdown: a leader hands leadership to an up-to-date follower first (while this
    /// node still answers its vote), then stop accepting, let in-flight requests finish, stop
    /// Raft (its storage is flushed on every acknowledged write) and the actors.
    pub async fn shutdown(mut self) {
        self.raft.hand_over().await;
        let _ = self.shutdown.send(true);
        let _ = (&mut self.server).await;
        self.form.abort();
        self.quorum.abort();
        self.elections.abort();
        self.bootstrap.abort();
        let _ = (&mut self.bootstrap).await;
        self.raft.shutdown().await;
        if let Some(actors) = self.actors.take() {
            let _ = tokio::task::spawn_blocking(move || actors.stop()).await;
        }
        tracing::info!("node stopped");
    }
}

/// Starts a node on the current tokio runtime (which must be multi-threaded).
pub async fn start(config: Config) -> Result<NodeHandle, StartError> {
    config.validate()?;
    // Before anything is written: the data directory and the TLS key are the owner's alone.
    private::restrict_umask();
    let private_paths: Vec<&std::path::Path> =
        std::iter::once(config.data_dir.as_path()).chain(config.tls.key.as_deref()).collect();
    private::tighten_at_start(&private_paths);
    if config.snowflake.enabled {
        snowflake::StateFile::check_at_start(&config.data_dir.join(snowflake::STATE_FILE))
            .map_err(StartError::Damaged)?;
    }
    // The global tier's client of a region's node, before anything starts: a token file that
    // cannot be read is a configuration error.
    let global = match config.region.name {
        Some(_) => Some(regions::keeper::global_client(&config.region).map_err(StartError::Region)?),
        None => None,
    };
    let config = Arc::new(config);
    let listener = tokio::net::TcpListener::bind(config.http_addr)
        .await
        .map_err(|source| StartError::Bind { addr: config.http_addr, source })?;
    let http_addr = listener.local_addr().map_err(|source| StartError::Bind { addr: config.http_addr, source })?;
    let advertise = config.advertise_addr.clone().unwrap_or_else(|| http_addr.to_string());
    let clock = Arc::new(SystemClock::new(config.fault.clock_offset_ms));
    if config.fault.enabled {
        tracing::warn!(
            clock_offset_ms = config.fault.clock_offset_ms,
            "FAULT INJECTION IS ENABLED: POST /admin/fault/clock can skew this node's clock. Never in production"
        );
    }
    if config.auth.anonymous_gapless {
        tracing::warn!(
            "ANONYMOUS GAPLESS IS ON (auth.anonymous_gapless): anyone who reaches this node may take numbers \
             of every gapless series, each recorded as unattributed; only their settlement secrets protect them"
        );
    }
    let metrics = Arc::new(Metrics::new());
    metrics.set_max_tag_series(config.metrics.max_tag_series);
    metrics.set_heap_stats(config.metrics.heap_stats);
    let tls = if config.tls.enabled() {
        Some(tls::Tls::load(&config.tls, config.node_id, metrics.tls_counters())?)
    } else {
        if !config::is_loopback(http_addr.ip()) {
            tracing::warn!(
                %http_addr,
                insecure_plaintext_peers = config.insecure_plaintext_peers,
                "TLS IS OFF on a non-loopback listener: requests, admin tokens and any peer traffic cross the \
                 network in plaintext. Configure [tls] (deploy/README.md)"
            );
        }
        None
    };
    // What the features add to the leader's execution of proposals ([`raft::hooks`]).
    // A region's node tells its leader's tasks of the tags it could not serve: the keeper of
    // those without a block, the homes task of those without a home here.
    let (wanted, homeless) = (regions::Wanted::default(), regions::Wanted::default());
    let lease = Arc::new(regions::lease::HomeLease::new(homeless.clone(), wanted.clone()));
    let (monotonic, numbers, segments) = match config.region.name {
        Some(_) => (
            profiles::monotonic::Monotonic::in_region(lease.clone()),
            gapless::Numbers::in_region(homeless.teller()),
            allocation::group::Segments::in_region(wanted.teller(), homeless.teller()),
        ),
        None => (
            profiles::monotonic::Monotonic::default(),
            gapless::Numbers::default(),
            allocation::group::Segments::default(),
        ),
    };
    let (monotonic, numbers) = (Arc::new(monotonic), Arc::new(numbers));
    let hooks = raft::hooks::LeaderHooks {
        stamp: Some(service::tag_admin::stamp(config.audit.retention())),
        groups: vec![Arc::new(segments), numbers.clone()],
        served: Some(Arc::new(monotonic.clone())),
    };
    let raft = RaftNode::start(&config, clock.clone(), metrics.raft_counters(), tls.clone(), hooks).await?;
    // Before the listener accepts Raft traffic: a node that lost its data must not rejoin.
    if let Err(e) = raft.refuse_if_forgotten(&config.peers.0).await {
        raft.shutdown().await;
        return Err(e.into());
    }
    let actors = ActorSystem::start().map_err(StartError::Actors)?;
    let allocator = Arc::new(allocation::RaftAllocator::new(raft.clone()));
    let state = raft.state().clone();
    // An archived tag is not served: it is never loaded, and unloaded once archived.
    let lookup: TagLookup = Arc::new(move |tag| {
        state.tag(tag).filter(|r| r.archived_ms().is_none()).map(|r| (r.step, r.profile().clone(), r.upper_bound()))
    });
    let archives = raft.state().archives();
    let tags = Tags::new(&actors, allocator, (lookup, archives), config.segment.clone(), metrics.clone());
    let snowflake = if config.snowflake.enabled {
        let file_errors = metrics.snowflake_state_errors();
        let awaits_region = config.region.name.is_some();
        Snowflake::start(
            &config.snowflake,
            &config.data_dir,
            raft.clone(),
            actors.arbiter(),
            file_errors,
            awaits_region,
        )
    } else {
        Snowflake::disabled(&config.snowflake, clock.clone())
    };
    let bootstrapped = Arc::new(AtomicBool::new(false));
    let forecasts = Arc::new(Forecasts::new(
        raft.state().clone(),
        raft.store().journal(),
        snowflake.layout(),
        config.snowflake.worker_ids,
    ));
    let access = access::Access::new(raft.state().clone(), clock.clone(), &config, metrics.clone());
    let peer_clocks = Arc::new(clock_watch::PeerClocks::default());
    let backups = backup::Backups::new(raft.clone(), forecasts.clone(), config.segment.max_step, &config.data_dir);
    let app = Arc::new(App::new(service::Parts {
        access,
        config: config.clone(),
        raft: raft.clone(),
        tags: tags.clone(),
        snowflake,
        clock,
        metrics: metrics.clone(),
        bootstrapped: bootstrapped.clone(),
        tls: tls.clone(),
        forecasts: forecasts.clone(),
        peer_clocks: peer_clocks.clone(),
        backups: backups.clone(),
        monotonic,
        numbers,
    }));
    let (shutdown, rx) = watch::channel(false);
    tokio::spawn(forecasts.clone().run(config.forecast.clone(), metrics.clone(), rx.clone()));
    tokio::spawn(tags.clone().unload_idle(Duration::from_secs(config.segment.idle_unload_secs), rx.clone()));
    tokio::spawn(peer_clocks.run(raft.clone(), rx.clone()));
    tokio::spawn(service::reservations::run(raft.clone(), metrics.clone(), rx.clone()));
    let encryption = match config.backup.recipient.as_deref().map(backup::crypt::parse_recipient) {
        Some(Ok(r)) => backup::crypt::Encryption::Recipient(Box::new(r)),
        // `validate` refused a bad one.
        _ => backup::crypt::Encryption::None,
    };
    tokio::spawn(backup::schedule::run(backups, config.backup.clone(), encryption, rx.clone()));
    let r = &config.raft;
    tokio::spawn(raft.clone().compact_by_weight(r.snapshot_every, r.keep_logs_after_snapshot, rx.clone()));
    tokio::spawn(raft.clone().raise_cluster_version(rx.clone()));
    if let Some(global) = global {
        let global_homes = global.clone();
        let keeper =
            regions::keeper::Keeper::new(raft.clone(), config.region.clone(), global, forecasts.clone(), wanted)
                .with_metrics(metrics.region());
        tokio::spawn(keeper.run(rx.clone()));
        if let Some(name) = config.region.name.clone() {
            let homes = regions::homes::Homes::new(raft.clone(), name, global_homes, lease, homeless);
            tokio::spawn(homes.run(rx.clone()));
        }
    }
    if let Some(tls) = tls {
        tokio::spawn(tls::reload::run(tls, rx.clone()));
    }
    let server = tokio::spawn(listener::serve(listener, app, rx));
    // After the listener answers: forming a cluster asks the peers' `/cluster/status`.
    let form = tokio::spawn(raft.clone().form_cluster(config.peers.0.clone(), advertise));
    let quorum = tokio::spawn(raft.clone().watch_quorum());
    let elections = tokio::spawn(raft.clone().watch_elections());
    let bootstrap = tokio::spawn(bootstrap_tags(raft.clone(), config.clone(), bootstrapped.clone()));
    tracing::info!(
        node_id = config.node_id,
        %http_addr,
        data_dir = %config.data_dir.display(),
        allocator = crate::memory::ALLOCATOR,
        "leaf node started"
    );
    Ok(NodeHandle {
        http_addr,
        shutdown,
        server,
        bootstrap,
        form,
        quorum,
        elections,
        raft,
        metrics,
        actors: Some(actors),
        bootstrapped,
    })
}

/// Creates the configured bootstrap tags that do not exist yet, once the node is ready.
async fn bootstrap_tags(raft: RaftNode, config: Arc<Config>, done: Arc<AtomicBool>) {
    for b in &config.bootstrap_tags {
        loop {
            if !raft.wait_ready(Duration::from_secs(5)).await {
                // Also covers a stopped Raft, whose status never changes again: no hot loop.
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            if raft.state().tag(&b.tag).is_some() {
                break;
            }
            let me = leaf_api::audit::Actor::Node { id: raft.node_id() };
            let new = NewTag::segment(b.tag.clone(), b.step, b.max_id, b.description.clone());
            match service::tag_admin::create_tag(&raft, new, me).await {
                Ok(_) => {
                    tracing::info!(tag = %b.tag, step = b.step, "created bootstrap tag");
                    break;
                }
                Err(ProposeError::Rejected(ApplyError::TagExists(_))) => break,
                Err(e) => {
                    tracing::warn!(tag = %b.tag, error = %e, "creating bootstrap tag failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    }
    done.store(true, Ordering::Release);
}
