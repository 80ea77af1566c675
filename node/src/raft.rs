//! The node's Raft group member: the only module of the node that names openraft types.
//!
//! [`RaftNode`] opens the sled store, starts openraft, initialises a new single-node cluster on
//! first start, proposes commands with the proposer's wall-clock time stamped in, and reports
//! status. Peer networking for multi-node groups lives behind [`NetworkFactory`]; in a
//! single-node group openraft never calls it.
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leaf_api::types::AllocationView;
use leaf_raft_store::types::{Node, NodeId, Raft};
use leaf_raft_store::{open, Applied, ApplyError, Command, LogStore, Op, StateReader, StoreOptions, TypeConfig};
use openraft::error::{ClientWriteError, InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, ServerState, SnapshotPolicy};

use crate::config::Config;

/// Committed allocations this node received, newest last (bounded).
const JOURNAL_CAP: usize = 100_000;

/// Why a proposal did not produce a result.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProposeError {
    /// Committed, and the state machine rejected it (same answer on every node).
    #[error(transparent)]
    Rejected(#[from] ApplyError),
    #[error("this node is not the Raft leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    #[error("proposal not committed within {0:?}")]
    Timeout(Duration),
    #[error("raft stopped: {0}")]
    Fatal(String),
}

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
}

/// A point-in-time view of this member, for `/health`, `/metrics` and status pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaftStatus {
    pub node_id: NodeId,
    pub leader_id: Option<NodeId>,
    pub is_leader: bool,
    pub term: u64,
    pub last_log_index: Option<u64>,
    pub last_applied_index: Option<u64>,
    pub snapshot_index: Option<u64>,
    pub purged_index: Option<u64>,
    /// `None` when ready, otherwise why not.
    pub not_ready: Option<String>,
}

/// This node's membership in its Raft group.
#[derive(Clone)]
pub struct RaftNode {
    raft: Raft,
    node_id: NodeId,
    state: StateReader,
    log: LogStore,
    propose_timeout: Duration,
    /// Log index this node had at start; it is not ready before applying up to it.
    startup_index: u64,
    journal: Arc<Mutex<VecDeque<AllocationView>>>,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Opens the store, waiting up to 10 s for a previous owner (a process still exiting, or a
/// node restarted in-process) to release the data dir's lock.
async fn open_when_unlocked(
    dir: &std::path::Path,
) -> Result<(LogStore, leaf_raft_store::StateMachineStore), RaftStartError> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match open(dir, &StoreOptions::default()) {
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

impl RaftNode {
    /// Opens the store under `config.data_dir`, starts Raft and, on a blank data dir,
    /// initialises a one-member cluster.
    pub async fn start(config: &Config) -> Result<RaftNode, RaftStartError> {
        let dir = config.data_dir.join("raft");
        std::fs::create_dir_all(&dir)
            .map_err(|source| RaftStartError::DataDir { path: dir.display().to_string(), source })?;
        let (log, sm) = open_when_unlocked(&dir).await?;
        let state = sm.reader();
        let r = &config.raft;
        let raft_config = openraft::Config {
            cluster_name: "leaf".into(),
            heartbeat_interval: r.heartbeat_ms,
            election_timeout_min: r.election_timeout_min_ms,
            election_timeout_max: r.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(r.snapshot_every),
            max_in_snapshot_log_to_keep: r.keep_logs_after_snapshot,
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
        let raft = Raft::new(config.node_id, Arc::new(raft_config), NetworkFactory, log.clone(), sm)
            .await
            .map_err(|e| RaftStartError::Raft(e.to_string()))?;
        let initialized = raft.is_initialized().await.map_err(|e| RaftStartError::Raft(e.to_string()))?;
        if !initialized {
            let members = BTreeMap::from([(config.node_id, BasicNode::new(config.http_addr.to_string()))]);
            tracing::info!(node_id = config.node_id, "initialising a new single-node cluster");
            if let Err(e) = raft.initialize(members).await {
                tracing::warn!(error = %e, "cluster initialisation refused");
            }
        }
        Ok(RaftNode {
            raft,
            node_id: config.node_id,
            state,
            log,
            propose_timeout: Duration::from_millis(r.propose_timeout_ms),
            startup_index,
            journal: Arc::default(),
        })
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The applied state (tags) on this node.
    pub fn state(&self) -> &StateReader {
        &self.state
    }

    /// Proposes `op`, stamped with this node's clock, and waits for its committed result and
    /// log index.
    pub async fn propose(&self, op: Op) -> Result<(Applied, u64), ProposeError> {
        let cmd = Command { at_ms: now_ms(), op };
        let tag = cmd.op.tag().to_string();
        let write = self.raft.client_write(cmd);
        let resp = match tokio::time::timeout(self.propose_timeout, write).await {
            Err(_) => return Err(ProposeError::Timeout(self.propose_timeout)),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                return Err(ProposeError::NotLeader { leader: f.leader_id })
            }
            Ok(Err(e)) => return Err(ProposeError::Fatal(e.to_string())),
            Ok(Ok(resp)) => resp,
        };
        let applied = resp.data?;
        if let Applied::Segment(a) = &applied {
            let mut j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
            if j.len() == JOURNAL_CAP {
                j.pop_front();
            }
            j.push_back(AllocationView { tag, start: a.start, end: a.end, log_index: resp.log_id.index });
        }
        Ok((applied, resp.log_id.index))
    }

    /// Committed allocations received by this node since it started (newest last, at most
    /// 100,000), optionally for one tag.
    pub fn allocations(&self, tag: Option<&str>) -> Vec<AllocationView> {
        let j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        j.iter().filter(|a| tag.is_none_or(|t| a.tag == t)).cloned().collect()
    }

    pub fn status(&self) -> RaftStatus {
        let m = self.raft.metrics().borrow().clone();
        let applied = m.last_applied.map(|l| l.index);
        let not_ready = if let Err(e) = &m.running_state {
            Some(format!("raft stopped: {e}"))
        } else if m.current_leader.is_none() {
            Some("no raft leader".to_string())
        } else if applied.unwrap_or(0) < self.startup_index {
            // Only the log present at startup gates readiness: entries appended later are
            // applied within a commit round trip, and gating on them would flap `/health`
            // on every segment allocation.
            Some(format!("applying the log: {} of {}", applied.unwrap_or(0), self.startup_index))
        } else {
            None
        };
        RaftStatus {
            node_id: self.node_id,
            leader_id: m.current_leader,
            is_leader: m.state == ServerState::Leader,
            term: m.current_term,
            last_log_index: m.last_log_index,
            last_applied_index: applied,
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            not_ready,
        }
    }

    /// Waits until the node is ready or `timeout` passes; returns readiness.
    pub async fn wait_ready(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rx = self.raft.metrics();
        loop {
            if self.status().not_ready.is_none() {
                return true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return self.status().not_ready.is_none(),
            }
        }
    }

    /// Entries currently in the log (not yet purged behind a snapshot).
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Stops Raft; storage is flushed by then.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}

/// Connections to peers. A single-node group has none; any RPC to another node is reported
/// unreachable so openraft backs off.
pub struct NetworkFactory;

/// A peer this build cannot reach.
pub struct NoRoute {
    target: NodeId,
}

impl NoRoute {
    fn err<E: std::error::Error>(&self) -> RPCError<NodeId, Node, E> {
        let msg = format!("no route to node {}: this node runs a single-node group", self.target);
        RPCError::Unreachable(Unreachable::new(&std::io::Error::other(msg)))
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = NoRoute;

    async fn new_client(&mut self, target: NodeId, _node: &Node) -> NoRoute {
        NoRoute { target }
    }
}

impl RaftNetwork<TypeConfig> for NoRoute {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        Err(self.err())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId, InstallSnapshotError>>> {
        Err(self.err())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        Err(self.err())
    }
}
