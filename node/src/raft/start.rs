//! Start and stop: opening the sled store, building openraft, and the final checkpoint.
use std::sync::Arc;
use std::time::Duration;

use leaf_raft_store::types::{NodeId, Raft};
use leaf_raft_store::{open, LogStore, StoreOptions};
use openraft::SnapshotPolicy;

use super::network::{NetworkFactory, PeerClient, MAX_APPEND_ENTRIES, SNAPSHOT_CHUNK_BYTES};
use super::{coalesce, quorum, versions, RaftCounters, RaftNode};
use crate::clock::Clock;
use crate::config::Config;

/// Why the Raft member could not start.
#[derive(Debug, thiserror::Error)]
pub enum RaftStartError {
    #[error("create data dir {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] leaf_raft_store::OpenError),
    #[error("data dir {0} is in use by another process (its sled lock was not released within 10 s)")]
    Locked(String),
    #[error("raft config: {0}")]
    Config(String),
    #[error("raft: {0}")]
    Raft(String),
    /// The data dir is blank, yet the cluster shows this node ID took part in it: the node
    /// lost its data and would rejoin having forgotten its votes and log.
    #[error(
        "the data dir is empty, but node {node_id} already took part in this cluster ({evidence}, as node \
         {peer} sees it): it lost its data. Starting it again under the same ID could break Raft's \
         guarantees (it forgot its votes and log). Remove node {node_id} from the cluster and start this \
         node under a new, never used node ID (deploy/README.md, \"Replace a failed node\")"
    )]
    Forgotten { node_id: NodeId, peer: NodeId, evidence: String },
}

/// node restarted in-process) to release the data dir's lock.
async fn open_when_unlocked(
    dir: &std::path::Path,
    opts: &StoreOptions,
) -> Result<(LogStore, leaf_raft_store::StateMachineStore), RaftStartError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match open(dir, opts) {
            Err(leaf_raft_store::OpenError::Sled { source, .. })
                if source.to_string().contains("could not acquire lock") =>
            {
                if tokio::time::Instant::now() >= deadline {
                    return Err(RaftStartError::Locked(dir.display().to_string()));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return Ok(other?),
        }
    }
}

/// How long a shutdown waits for a snapshot build that is still running.
pub const BUILD_WAIT: Duration = Duration::from_secs(30);

impl RaftNode {
    /// Opens the store under `config.data_dir` and starts Raft. Forming a new cluster is
    /// [`RaftNode::form_cluster`]'s job, once the HTTP listener answers peers.
    /// `counters` are the metrics this member increments; `hooks`, what the features add to
    /// the leader's execution of proposals.
    pub async fn start(
        config: &Config,
        clock: Arc<dyn Clock>,
        counters: RaftCounters,
        tls: Option<Arc<crate::tls::Tls>>,
        hooks: super::hooks::LeaderHooks,
    ) -> Result<RaftNode, RaftStartError> {
        let dir = config.data_dir.join("raft");
        leaf_raft_store::durable::create_dir_all(&dir)
            .map_err(|source| RaftStartError::DataDir { path: dir.display().to_string(), source })?;
        let (log, sm) = open_when_unlocked(&dir, &config.raft.store_options()).await?;
        let state = sm.reader();
        let r = &config.raft;
        let raft_config = openraft::Config {
            cluster_name: "leaf".into(),
            heartbeat_interval: r.heartbeat_ms,
            // openraft campaigns only when `raft/election.rs` says so, after a pre-vote. Its
            // `election_timeout_max` is then only the lease a follower honours before it votes
            // for anyone: our shortest wait without a leader. Its minimum must lie between the
            // heartbeat and that.
            enable_elect: false,
            election_timeout_min: r.heartbeat_ms + (r.election_timeout_min_ms - r.heartbeat_ms) / 2,
            election_timeout_max: r.election_timeout_min_ms,
            // Per snapshot chunk, including the receiver's install after the last one: it
            // reads and checks the whole file, writes its own and replaces the state (a few
            // seconds for a million tags). Only the replication to that follower waits.
            install_snapshot_timeout: 30_000,
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
            max_payload_entries: MAX_APPEND_ENTRIES,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(r.snapshot_every),
            // openraft's own purge after a snapshot is off: `raft/compaction.rs` is the only
            // purge (by weight, `keep_logs_after_snapshot`), because openraft's would be
            // scheduled below a purge by weight still held back, which it asserts against.
            max_in_snapshot_log_to_keep: u64::MAX,
            ..Default::default()
        }
        .validate()
        .map_err(|e| RaftStartError::Config(e.to_string()))?;
        let mut log_for_state = log.clone();
        let startup_index = {
            use openraft::storage::RaftLogStorage;
            let s = log_for_state.get_log_state().await.map_err(|e| RaftStartError::Raft(e.to_string()))?;
            s.last_log_id.map_or(0, |l| l.index)
        };
        if let Some(ip) = config.raft.source_ip {
            // Fail at start, not with every peer silently unreachable later.
            std::net::TcpListener::bind((ip, 0)).map_err(|e| {
                RaftStartError::Config(format!("raft.source_ip {ip} is not an address of this host: {e}"))
            })?;
        }
        let peers = match tls {
            Some(tls) => PeerClient::tls(config.cluster_secret(), config.raft.source_ip, tls),
            None => PeerClient::new(config.cluster_secret(), config.raft.source_ip),
        };
        let network = NetworkFactory { node_id: config.node_id, client: peers.clone(), reports: Default::default() };
        let sm_handle = sm.clone();
        let raft = Raft::new(config.node_id, Arc::new(raft_config), network, log.clone(), sm)
            .await
            .map_err(|e| RaftStartError::Raft(e.to_string()))?;
        Ok(RaftNode {
            raft,
            node_id: config.node_id,
            state,
            log,
            peers,
            propose_timeout: Duration::from_millis(r.propose_timeout_ms),
            versions: Arc::new(versions::Versions::from_env()),
            attempt_timeout: Duration::from_millis((2 * r.election_timeout_max_ms).max(2000)),
            startup_index,
            sm: sm_handle,
            clock,
            contact: quorum::Contact::new(),
            contact_limit_ms: r.election_timeout_max_ms,
            probe_every: Duration::from_millis(r.heartbeat_ms),
            rejected_answers: counters.rejected_answers,
            chunks: Arc::default(),
            heard: Arc::default(),
            local_reads_window: Duration::from_millis((2 * r.heartbeat_ms).min(r.election_timeout_min_ms)),
            local_misses: r.unknown_tags == crate::config::UnknownTags::Local,
            barriers: Arc::new(coalesce::Coalescer::counting(counters.read_index_rounds)),
            leader_reads: Arc::default(),
            hooks: Arc::new(hooks),
            elections: super::election::Timing {
                lease: Duration::from_millis(r.election_timeout_min_ms),
                max: Duration::from_millis(r.election_timeout_max_ms),
                tick: Duration::from_millis((r.heartbeat_ms / 2).max(10)),
                ask: Duration::from_millis(r.election_timeout_min_ms),
            },
            leadership: Default::default(),
            gate: Default::default(),
        })
    }

    /// Stops Raft, waits (up to [`BUILD_WAIT`]) for a snapshot build still running, then
    /// checkpoints the state machine; storage is flushed by then.
    pub async fn shutdown(&self) {
        // Read before stopping: a stopped Raft reports `Stopped` as its running state.
        let healthy = self.raft.metrics().borrow().running_state.is_ok();
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
        // A snapshot build goes on after Raft stopped: let it finish writing first (bounded:
        // a build stuck on its disk must not keep the process from ending).
        if tokio::time::timeout(BUILD_WAIT, self.sm.builds_finished()).await.is_err() {
            tracing::warn!(secs = BUILD_WAIT.as_secs(), "a snapshot build still runs; stopping without it");
        }
        // Not needed for safety (a start re-applies from the log), only to shorten it. Skipped
        // after a fatal error: an apply that failed halfway must not be recorded as applied.
        if !healthy {
            return;
        }
        if let Err(e) = self.sm.checkpoint().await {
            tracing::warn!(error = %e, "final state machine checkpoint");
        }
    }
}
