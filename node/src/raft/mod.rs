//! The node's Raft group member: the only module tree of the node that names openraft types.
//!
//! [`RaftNode`] opens the sled store, starts openraft, forms the cluster on first start (a
//! one-node cluster, or the configured `peers`), routes proposals, membership changes and
//! read-index requests to the leader, and reports status.
//!
//! Layout:
//! - this file: start-up, routing to the leader ([`RaftNode::propose`], [`RaftNode::read_barrier`],
//!   membership changes) and what the leader executes ([`RaftNode::execute`]);
//! - [`answer`]: checks on the leader's answers before anything acts on them;
//! - [`chunks`]: admission of snapshot chunks (in order, bounded) before openraft sees them;
//! - [`coalesce`]: read-index rounds shared by concurrent callers (unknown-tag floods);
//! - [`network`]: the pooled peer client and openraft's `RaftNetwork` over it;
//! - [`quorum`]: quorum contact (the leader's last quorum acknowledgement, probed by followers);
//! - [`service`]: the internal endpoints' handlers.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use leaf_api::types::{
    AllocationJournal, AllocationView, ClusterStatus, Health, MemberView, MembershipChange, ReplicationView, WorkerView,
};
use leaf_raft_store::types::{NodeId, Raft};
use leaf_raft_store::{open, Applied, ApplyError, Command, Journal, LogStore, Op, StateReader, StoreOptions};
use openraft::error::{ChangeMembershipError, CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, ServerState, SnapshotPolicy};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::clock::Clock;
use crate::config::{check_host_port, Config};

mod answer;
mod chunks;
mod coalesce;
pub mod network;
mod quorum;
pub mod service;

use network::{NetworkFactory, PeerClient, PATH_FORWARD, PATH_PEER_STATUS, PATH_TIME, SNAPSHOT_CHUNK_BYTES};

/// A forwarding attempt with less time than this left is not started.
const MIN_ATTEMPT: Duration = Duration::from_millis(100);
/// How many entries a learner may lag behind the leader and still be promoted to voter.
const CATCH_UP_SLACK: u64 = 100;

/// Why a request to the leader (proposal, membership change, read index) did not succeed.
/// Travels between nodes, so a follower reports the leader's answer as its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum ProposeError {
    /// Committed, and the state machine rejected it (same answer on every node).
    #[error(transparent)]
    Rejected(#[from] ApplyError),
    /// A membership change that cannot be made as asked.
    #[error("{message}")]
    Member { kind: MemberErrorKind, message: String },
    #[error("this node is not the Raft leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    #[error("not done within {0:?}")]
    Timeout(Duration),
    /// The leader could not be reached or could not finish; retrying later may succeed.
    #[error("{0}")]
    Unavailable(String),
    #[error("raft stopped: {0}")]
    Fatal(String),
}

impl ProposeError {
    /// The message for an anonymous client (the ID endpoints): the kind of failure without
    /// peer addresses or a peer's error text, which [`RaftNode`] logs instead. State machine
    /// rejections and this node's own stop reason are shown as they are.
    pub fn public_message(&self) -> String {
        match self {
            ProposeError::Rejected(e) => e.to_string(),
            ProposeError::Member { message, .. } => message.clone(),
            ProposeError::NotLeader { .. } | ProposeError::Unavailable(_) => {
                "the cluster cannot commit right now (no Raft leader with a quorum is reachable from this node); \
                 retry later"
                    .to_string()
            }
            ProposeError::Timeout(d) => format!("not committed within {d:?}; retry later"),
            ProposeError::Fatal(e) => format!("raft stopped on this node: {e}"),
        }
    }
}

/// Kinds of refused membership changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberErrorKind {
    /// The node ID is already a member.
    Exists,
    /// The node ID was a member once; IDs are never reused.
    Retired,
    /// No member has this ID.
    NotFound,
    /// The request is malformed or would leave no voters.
    Invalid,
}

fn member_err(kind: MemberErrorKind, message: impl Into<String>) -> ProposeError {
    ProposeError::Member { kind, message: message.into() }
}

/// A request that only the leader can execute; followers forward it over [`PATH_FORWARD`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Forward {
    Propose(Op),
    /// The log index a linearizable read must wait for (leadership confirmed by a quorum).
    ReadIndex,
    AddLearner {
        node_id: NodeId,
        addr: String,
    },
    Promote {
        node_id: NodeId,
    },
    Remove {
        node_id: NodeId,
    },
    /// How long ago the leader last had a quorum acknowledgement (followers probe it, so their
    /// `/health` is truthful when the leader lost its quorum).
    QuorumAge,
}

/// A [`Forward`] on the wire, with how long the sender will wait for the answer: the leader
/// gives up when the sender has, instead of finishing work whose result nobody receives while
/// the sender already retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForwardRequest {
    pub budget_ms: u64,
    pub req: Forward,
}

/// The leader's answer to a [`Forward`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Forwarded {
    Proposed {
        applied: Applied,
        log_index: u64,
    },
    ReadIndex(Option<u64>),
    Membership(MembershipChange),
    /// Milliseconds since the leader's last quorum acknowledgement (`None`: none yet).
    QuorumAge(Option<u64>),
}

/// What a starting node asks its peers over the authenticated internal API
/// ([`network::PATH_PEER_STATUS`]): whether they hold a cluster, and whether a node ID took part
/// in it. Bounded and bincode, unlike the public `/cluster/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerStatus {
    /// Wire version of this answer; a node refuses answers of a version it does not know.
    pub version: u16,
    pub node_id: NodeId,
    /// The members of the membership the peer knows (empty: it holds no cluster).
    pub members: BTreeSet<NodeId>,
    /// Node ID → the snowflake worker ID it registered.
    pub workers: BTreeMap<NodeId, u16>,
    /// Node ID → the log index the leader knows it stored (the leader only).
    pub matched: BTreeMap<NodeId, u64>,
}

/// The [`PeerStatus`] version this release speaks.
pub const PEER_STATUS_VERSION: u16 = 1;

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

/// Metrics the Raft member increments.
#[derive(Debug, Clone, Default)]
pub struct RaftCounters {
    /// Leader answers refused by the checks of [`answer`].
    pub rejected_answers: prometheus_client::metrics::counter::Counter,
    /// Read-index rounds started for this node's callers ([`coalesce`]).
    pub read_index_rounds: prometheus_client::metrics::counter::Counter,
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
    /// Milliseconds since this node last confirmed that a quorum follows its leader (the
    /// leader: its last quorum acknowledgement; others: the leader's, as of the last probe).
    /// `None` when unknown (no leader, or not confirmed yet).
    pub quorum_ack_age_ms: Option<u64>,
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
    peers: PeerClient,
    propose_timeout: Duration,
    /// Longest single forwarding attempt (twice the longest election timeout, at least 2 s).
    attempt_timeout: Duration,
    /// Log index this node had at start; it is not ready before applying up to it.
    startup_index: u64,
    /// Every committed allocation and its node, as this node applied them (audit record).
    journal: Journal,
    /// The state machine, for a final checkpoint at shutdown (the next start then has less to
    /// re-apply).
    sm: leaf_raft_store::StateMachineStore,
    /// The node's wall clock: the leader stamps it into every command.
    clock: Arc<dyn Clock>,
    /// A non-leader's last confirmed quorum contact ([`quorum`]).
    contact: Arc<quorum::Contact>,
    /// Quorum contact older than this makes the node not ready (the longest election timeout).
    contact_limit_ms: u64,
    /// How often a non-leader probes the leader's quorum contact (the heartbeat interval).
    probe_every: Duration,
    /// Answers refused by [`answer::check`].
    rejected_answers: prometheus_client::metrics::counter::Counter,
    /// Which snapshot chunks may reach openraft ([`chunks`]).
    chunks: Arc<chunks::ChunkGate>,
    /// Read-index rounds through the leader, shared by this node's callers ([`coalesce`]).
    barriers: Arc<coalesce::Coalescer>,
    /// The leader's own read-index (quorum) rounds, shared by every node's callers.
    leader_reads: Arc<coalesce::Coalescer>,
}

/// A Raft write error as the caller sees it.
fn write_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ProposeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ProposeError::NotLeader { leader: f.leader_id },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => match c {
            ChangeMembershipError::InProgress(_) => ProposeError::Unavailable(c.to_string()),
            ChangeMembershipError::EmptyMembership(_) => member_err(MemberErrorKind::Invalid, c.to_string()),
            ChangeMembershipError::LearnerNotFound(_) => member_err(MemberErrorKind::NotFound, c.to_string()),
        },
        RaftError::Fatal(f) => ProposeError::Fatal(f.to_string()),
    }
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
    /// Opens the store under `config.data_dir` and starts Raft. Forming a new cluster is
    /// [`RaftNode::form_cluster`]'s job, once the HTTP listener answers peers.
    /// `counters` are the metrics this member increments.
    pub async fn start(
        config: &Config,
        clock: Arc<dyn Clock>,
        counters: RaftCounters,
    ) -> Result<RaftNode, RaftStartError> {
        let dir = config.data_dir.join("raft");
        std::fs::create_dir_all(&dir)
            .map_err(|source| RaftStartError::DataDir { path: dir.display().to_string(), source })?;
        let (log, sm) = open_when_unlocked(&dir).await?;
        let state = sm.reader();
        let journal = sm.journal();
        let r = &config.raft;
        let raft_config = openraft::Config {
            cluster_name: "leaf".into(),
            heartbeat_interval: r.heartbeat_ms,
            election_timeout_min: r.election_timeout_min_ms,
            election_timeout_max: r.election_timeout_max_ms,
            // Per snapshot chunk, including the receiver's fsync of the last one.
            install_snapshot_timeout: 5000,
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
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
        if let Some(ip) = config.raft.source_ip {
            // Fail at start, not with every peer silently unreachable later.
            std::net::TcpListener::bind((ip, 0)).map_err(|e| {
                RaftStartError::Config(format!("raft.source_ip {ip} is not an address of this host: {e}"))
            })?;
        }
        let peers = PeerClient::new(config.cluster_secret(), config.raft.source_ip);
        let network = NetworkFactory { node_id: config.node_id, client: peers.clone() };
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
            attempt_timeout: Duration::from_millis((2 * r.election_timeout_max_ms).max(2000)),
            startup_index,
            journal,
            sm: sm_handle,
            clock,
            contact: quorum::Contact::new(),
            contact_limit_ms: r.election_timeout_max_ms,
            probe_every: Duration::from_millis(r.heartbeat_ms),
            rejected_answers: counters.rejected_answers,
            chunks: Arc::default(),
            barriers: Arc::new(coalesce::Coalescer::counting(counters.read_index_rounds)),
            leader_reads: Arc::default(),
        })
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// Runs the quorum contact probe until aborted (spawn it once per node).
    pub async fn watch_quorum(self) {
        let every = self.probe_every;
        quorum::run(self, every).await
    }

    /// Refuses to start with a blank data dir under an ID the cluster already knows as a
    /// participant: a member of the peers' membership that registered a snowflake worker
    /// (only a node with applied state does) or that acknowledged log entries to the leader.
    /// A blank node that was merely listed (first formation) or added but never caught up
    /// passes. Best effort: peers that do not answer within ~3 s are not consulted, so it
    /// cannot catch a node that returns blank while the rest of the cluster is down too.
    pub async fn refuse_if_forgotten(&self, peers: &BTreeMap<NodeId, String>) -> Result<(), RaftStartError> {
        let m = self.raft.metrics().borrow().clone();
        if peers.is_empty() || m.last_log_index.is_some() || self.raft.is_initialized().await.unwrap_or(true) {
            return Ok(());
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        loop {
            let mut answered = false;
            for (&peer, addr) in peers.iter().filter(|(id, _)| **id != self.node_id) {
                let Some(s) = self.peer_status(peer, addr).await else { continue };
                answered = true;
                if !s.members.contains(&self.node_id) {
                    continue;
                }
                let evidence = if let Some(w) = s.workers.get(&self.node_id) {
                    format!("it registered snowflake worker ID {w}")
                } else if let Some(i) = s.matched.get(&self.node_id).filter(|i| **i > 0) {
                    format!("it acknowledged the log up to index {i}")
                } else {
                    continue;
                };
                return Err(RaftStartError::Forgotten { node_id: self.node_id, peer, evidence });
            }
            if answered || tokio::time::Instant::now() >= deadline {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Forms the cluster if this node's data dir is blank (run in the background; returns when
    /// done or when there is nothing to do):
    /// - no `peers`: a one-member cluster of this node, reachable at `advertise`;
    /// - not listed in `peers`: nothing; the node waits to be added as a learner;
    /// - listed: once a majority of the listed nodes (this one included) answer and none of
    ///   them holds a cluster, initialise with exactly the listed members. Several nodes doing
    ///   so at once with the same list is safe (openraft writes the same entry at index 0). If
    ///   any peer already holds a cluster, this node does not initialise: it is late, and the
    ///   leader replicates to it.
    pub async fn form_cluster(self, peers: BTreeMap<NodeId, String>, advertise: String) {
        let initialized = |raft: &Raft| {
            let raft = raft.clone();
            async move { raft.is_initialized().await.unwrap_or(true) }
        };
        if initialized(&self.raft).await {
            return;
        }
        let members: BTreeMap<NodeId, BasicNode> = if peers.is_empty() {
            tracing::info!(node_id = self.node_id, advertise, "initialising a new one-node cluster");
            if advertise.parse::<std::net::SocketAddr>().is_ok_and(|a| a.ip().is_unspecified()) {
                tracing::warn!(
                    advertise,
                    "recording an undialable address for this node; set advertise_addr before the first start \
                     if other nodes will ever join this cluster"
                );
            }
            BTreeMap::from([(self.node_id, BasicNode::new(advertise))])
        } else if !peers.contains_key(&self.node_id) {
            tracing::info!(
                node_id = self.node_id,
                "not among the initial peers: waiting to be added with `leaf cluster add-learner`"
            );
            return;
        } else {
            let majority = peers.len() / 2 + 1;
            let mut waited = 0u32;
            loop {
                if initialized(&self.raft).await {
                    return;
                }
                let mut blank = 1;
                for (id, addr) in peers.iter().filter(|(id, _)| **id != self.node_id) {
                    let Some(s) = self.peer_status(*id, addr).await else { continue };
                    if !s.members.is_empty() {
                        tracing::info!(
                            node_id = self.node_id,
                            peer = id,
                            "a peer already holds the cluster: not initialising; waiting for its leader"
                        );
                        return;
                    }
                    blank += 1;
                }
                if blank >= majority {
                    break;
                }
                if waited.is_multiple_of(20) {
                    tracing::info!(answered = blank, majority, "waiting for a majority of peers to form the cluster");
                }
                waited += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            tracing::info!(node_id = self.node_id, ?peers, "initialising the cluster from peers");
            peers.iter().map(|(id, addr)| (*id, BasicNode::new(addr))).collect()
        };
        if let Err(e) = self.raft.initialize(members).await {
            // Another listed node initialised at the same moment and already replicated to us.
            tracing::info!(error = %e, "cluster initialisation not needed");
        }
    }

    /// Asks peer `id` at `addr` for its [`PeerStatus`] over the authenticated internal API
    /// (bounded body, 1 s); `None` when it does not answer, or answers for another node ID or
    /// in an unknown version (logged).
    async fn peer_status(&self, id: NodeId, addr: &str) -> Option<PeerStatus> {
        let timeout = Duration::from_secs(1);
        match self.peers.call::<_, PeerStatus>(addr, PATH_PEER_STATUS, &PEER_STATUS_VERSION, timeout).await {
            Ok(s) if s.version == PEER_STATUS_VERSION && s.node_id == id => Some(s),
            Ok(s) => {
                tracing::warn!(peer = id, addr, version = s.version, answered_as = s.node_id, "ignoring a peer status");
                None
            }
            Err(e) => {
                tracing::debug!(peer = id, error = %e, "peer status");
                None
            }
        }
    }

    /// This node's [`PeerStatus`], for a starting peer.
    pub(crate) fn own_peer_status(&self) -> PeerStatus {
        let m = self.raft.metrics().borrow().clone();
        let members = m.membership_config.membership().nodes().map(|(id, _)| *id).collect();
        let workers = self.state.workers().into_iter().map(|(w, r)| (r.node_id, w)).collect();
        let matched = m.replication.iter().flatten().filter_map(|(id, l)| l.map(|l| (*id, l.index))).collect();
        PeerStatus { version: PEER_STATUS_VERSION, node_id: self.node_id, members, workers, matched }
    }

    /// The applied state (tags) on this node.
    pub fn state(&self) -> &StateReader {
        &self.state
    }

    /// When a request arriving now must be done by.
    fn deadline(&self) -> Instant {
        Instant::now() + self.propose_timeout
    }

    /// When a forwarded request must be done by: the sender's budget, at most ours.
    pub(crate) fn deadline_within(&self, budget: Duration) -> Instant {
        Instant::now() + budget.min(self.propose_timeout)
    }

    /// Commits `op` through the leader (this node or, forwarded, another) and returns its
    /// result and log index. The leader stamps its clock into the command. Retried across
    /// leader changes until `raft.propose_timeout_ms`.
    pub async fn propose(&self, op: Op) -> Result<(Applied, u64), ProposeError> {
        // A repeated allocation only wastes a range and a repeated update is idempotent; a
        // repeated create would turn a success into `tag_exists`, so it is not retried when
        // the first attempt may have been delivered.
        let retry_unknown = !matches!(op, Op::CreateTag { .. });
        match self.on_leader(Forward::Propose(op), retry_unknown).await? {
            Forwarded::Proposed { applied, log_index } => Ok((applied, log_index)),
            other => Err(ProposeError::Fatal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Waits until this node has applied everything committed before the call (a
    /// linearizable read barrier through the leader's read index): a tag created on any node
    /// is visible here afterwards. Writes nothing to the log.
    pub async fn read_barrier(&self) -> Result<(), ProposeError> {
        let deadline = self.deadline();
        let me = self.clone();
        let round = move || {
            let me = me.clone();
            async move {
                match me.on_leader(Forward::ReadIndex, true).await? {
                    Forwarded::ReadIndex(i) => Ok(i),
                    other => Err(ProposeError::Fatal(format!("unexpected answer {other:?}"))),
                }
            }
        };
        let index = match tokio::time::timeout_at(deadline, self.barriers.read(round)).await {
            Ok(r) => r?,
            Err(_) => return Err(ProposeError::Timeout(self.propose_timeout)),
        };
        if self.state.last_applied().map(|l| l.index) >= index {
            return Ok(());
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        self.raft
            .wait(Some(wait))
            .applied_index_at_least(index, "read index")
            .await
            .map_err(|_| ProposeError::Timeout(self.propose_timeout))?;
        Ok(())
    }

    /// Adds `node_id` at `addr` as a learner: it receives the log (or a snapshot) and serves
    /// IDs, but does not vote.
    pub async fn add_learner(&self, node_id: NodeId, addr: String) -> Result<MembershipChange, ProposeError> {
        self.membership(Forward::AddLearner { node_id, addr }).await
    }

    /// Makes the learner `node_id` a voter.
    pub async fn promote(&self, node_id: NodeId) -> Result<MembershipChange, ProposeError> {
        self.membership(Forward::Promote { node_id }).await
    }

    /// Removes `node_id` (voter or learner) from the cluster; its ID is never reused.
    pub async fn remove(&self, node_id: NodeId) -> Result<MembershipChange, ProposeError> {
        self.membership(Forward::Remove { node_id }).await
    }

    async fn membership(&self, req: Forward) -> Result<MembershipChange, ProposeError> {
        // Membership changes are idempotent at the leader (re-adding the same learner or
        // promoting a voter is a no-op), so an uncertain first attempt may be retried.
        match self.on_leader(req, true).await? {
            Forwarded::Membership(m) => Ok(m),
            other => Err(ProposeError::Fatal(format!("unexpected answer {other:?}"))),
        }
    }

    /// The current leader, if known, and its address, if the membership has it.
    fn leader_and_addr(&self) -> (Option<NodeId>, Option<String>) {
        let m = self.raft.metrics();
        let m = m.borrow();
        let leader = m.current_leader;
        let addr = leader.and_then(|l| m.membership_config.membership().get_node(&l).map(|n| n.addr.clone()));
        (leader, addr)
    }

    /// Runs `req` on the current leader, retrying across leader changes and unreachable
    /// leaders until the deadline. A request that may have reached the leader is retried only
    /// when `retry_unknown`.
    async fn on_leader(&self, req: Forward, retry_unknown: bool) -> Result<Forwarded, ProposeError> {
        let answer = self.on_leader_unchecked(&req, retry_unknown).await?;
        if let Err(why) = answer::check(&req, &answer) {
            self.rejected_answers.inc();
            tracing::error!(%why, ?req, ?answer, "refused the leader's answer");
            return Err(ProposeError::Unavailable(format!("refused the leader's answer: {why}")));
        }
        Ok(answer)
    }

    async fn on_leader_unchecked(&self, req: &Forward, retry_unknown: bool) -> Result<Forwarded, ProposeError> {
        let deadline = self.deadline();
        let mut last: Option<ProposeError>;
        loop {
            match self.leader_and_addr() {
                (Some(l), _) if l == self.node_id => match self.execute(req.clone(), deadline).await {
                    Err(e @ ProposeError::NotLeader { .. }) => last = Some(e),
                    // No quorum yet, a membership change in progress, a learner catching up.
                    Err(e @ ProposeError::Unavailable(_)) if retry_unknown => last = Some(e),
                    other => return other,
                },
                (Some(l), Some(addr)) => {
                    // One attempt may not eat the whole budget: a hung leader is replaced by an
                    // election well within `attempt_timeout`, and the new one must get a try.
                    let wait = deadline.saturating_duration_since(Instant::now()).min(self.attempt_timeout);
                    let wire = ForwardRequest { budget_ms: wait.as_millis() as u64, req: req.clone() };
                    let answer =
                        self.peers.call::<_, Result<Forwarded, ProposeError>>(&addr, PATH_FORWARD, &wire, wait);
                    match answer.await {
                        Ok(Err(e @ ProposeError::NotLeader { .. })) => last = Some(e),
                        Ok(Err(e @ ProposeError::Unavailable(_))) if retry_unknown => last = Some(e),
                        Ok(result) => return result,
                        Err(e) if e.surely_not_delivered() || retry_unknown => {
                            tracing::debug!(leader = l, error = %e, "forwarding to the leader failed; retrying");
                            last = Some(ProposeError::Unavailable(format!("leader {l}: {e}")));
                        }
                        Err(e) => {
                            return Err(ProposeError::Unavailable(format!(
                                "leader {l} may or may not have done it: {e}"
                            )))
                        }
                    }
                }
                (Some(l), None) => last = Some(ProposeError::Unavailable(format!("leader {l} has no address"))),
                (None, _) => last = Some(ProposeError::Unavailable("no raft leader".into())),
            }
            // Elections take a few hundred milliseconds; poll the leader at a modest pace. No
            // attempt starts with almost no budget left: it could only time out and would hide
            // why the earlier ones failed.
            let now = Instant::now();
            if now < deadline {
                tokio::time::sleep((deadline - now).min(Duration::from_millis(50))).await;
            }
            if Instant::now() + MIN_ATTEMPT >= deadline {
                return Err(match last {
                    Some(ProposeError::Unavailable(why)) => {
                        ProposeError::Unavailable(format!("gave up after {:?}: {why}", self.propose_timeout))
                    }
                    _ => ProposeError::Timeout(self.propose_timeout),
                });
            }
        }
    }

    /// Executes `req` on this node, which must be the leader ([`ProposeError::NotLeader`]
    /// otherwise; never forwarded again). Peers' forwarded requests land here.
    pub(crate) async fn execute(&self, req: Forward, deadline: Instant) -> Result<Forwarded, ProposeError> {
        let budget = deadline.saturating_duration_since(Instant::now());
        let timeout = ProposeError::Timeout(self.propose_timeout);
        match req {
            Forward::Propose(op) => {
                let cmd = Command { at_ms: self.clock.now_ms(), op };
                // Peers' forwarded operations skipped this node's HTTP checks: never log one
                // that apply would refuse for its fields or that is too big to replicate.
                leaf_raft_store::check_command(&cmd)?;
                let resp = match tokio::time::timeout(budget, self.raft.client_write(cmd)).await {
                    Err(_) => return Err(timeout),
                    Ok(r) => r.map_err(write_error)?,
                };
                Ok(Forwarded::Proposed { applied: resp.data?, log_index: resp.log_id.index })
            }
            Forward::QuorumAge => {
                let m = self.raft.metrics().borrow().clone();
                if m.state != ServerState::Leader {
                    return Err(ProposeError::NotLeader { leader: m.current_leader });
                }
                Ok(Forwarded::QuorumAge(m.millis_since_quorum_ack))
            }
            Forward::ReadIndex => {
                let raft = self.raft.clone();
                let round = move || {
                    let raft = raft.clone();
                    async move {
                        let (read, _applied) = raft.get_read_log_id().await.map_err(|e| match e {
                            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => {
                                ProposeError::NotLeader { leader: f.leader_id }
                            }
                            RaftError::APIError(e @ CheckIsLeaderError::QuorumNotEnough(_)) => {
                                ProposeError::Unavailable(e.to_string())
                            }
                            RaftError::Fatal(f) => ProposeError::Fatal(f.to_string()),
                        })?;
                        Ok(read.map(|l| l.index))
                    }
                };
                match tokio::time::timeout(budget, self.leader_reads.read(round)).await {
                    Err(_) => Err(timeout),
                    Ok(r) => Ok(Forwarded::ReadIndex(r?)),
                }
            }
            Forward::AddLearner { node_id, addr } => {
                if !self.peers.has_secret() {
                    return Err(member_err(
                        MemberErrorKind::Invalid,
                        "the leader has no cluster_secret, so it cannot replicate to other nodes",
                    ));
                }
                check_host_port(&addr).map_err(|e| member_err(MemberErrorKind::Invalid, e))?;
                if node_id == 0 {
                    return Err(member_err(MemberErrorKind::Invalid, "node IDs start at 1"));
                }
                let existing = self.members().get(&node_id).cloned();
                match existing {
                    Some((role, a)) if role == "learner" && a == addr => {
                        return Ok(Forwarded::Membership(self.membership_now()))
                    }
                    Some((role, a)) => {
                        return Err(member_err(
                            MemberErrorKind::Exists,
                            format!("node {node_id} is already a {role} at {a}"),
                        ))
                    }
                    None if self.state.is_retired_node(node_id) => {
                        return Err(member_err(
                            MemberErrorKind::Retired,
                            format!("node {node_id} was removed; node IDs are never reused, pick a new one"),
                        ))
                    }
                    None => {}
                }
                let change = self.raft.add_learner(node_id, BasicNode::new(addr), false);
                self.commit_membership(change, budget).await
            }
            Forward::Promote { node_id } => {
                match self.members().get(&node_id).map(|(role, _)| role.as_str()) {
                    None => {
                        return Err(member_err(MemberErrorKind::NotFound, format!("node {node_id} is not a member")))
                    }
                    Some("voter") => return Ok(Forwarded::Membership(self.membership_now())),
                    _ => {}
                }
                self.check_caught_up(node_id)?;
                let change = self.raft.change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([node_id])), false);
                self.commit_membership(change, budget).await
            }
            Forward::Remove { node_id } => {
                let change = match self.members().get(&node_id).map(|(role, _)| role.as_str()) {
                    // Already removed (a retried request whose first attempt succeeded).
                    None if self.state.is_retired_node(node_id) => {
                        return Ok(Forwarded::Membership(self.membership_now()))
                    }
                    None => {
                        return Err(member_err(MemberErrorKind::NotFound, format!("node {node_id} is not a member")))
                    }
                    Some("voter") => ChangeMembers::RemoveVoters(BTreeSet::from([node_id])),
                    Some(_) => ChangeMembers::RemoveNodes(BTreeSet::from([node_id])),
                };
                let change = self.raft.change_membership(change, false);
                self.commit_membership(change, budget).await
            }
        }
    }

    async fn commit_membership(
        &self,
        change: impl std::future::Future<
            Output = Result<
                openraft::raft::ClientWriteResponse<leaf_raft_store::TypeConfig>,
                RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>,
            >,
        >,
        budget: Duration,
    ) -> Result<Forwarded, ProposeError> {
        let resp = match tokio::time::timeout(budget, change).await {
            Err(_) => return Err(ProposeError::Timeout(self.propose_timeout)),
            Ok(r) => r.map_err(write_error)?,
        };
        let mut m = self.membership_now();
        m.log_index = resp.log_id.index;
        if let Some(new) = resp.membership {
            m.voters = new.voter_ids().collect();
            m.learners = new.learner_ids().collect();
        }
        Ok(Forwarded::Membership(m))
    }

    /// A voter may only be added once it holds nearly the whole log; otherwise the new
    /// quorum would need a node that cannot yet acknowledge anything.
    fn check_caught_up(&self, node_id: NodeId) -> Result<(), ProposeError> {
        let m = self.raft.metrics().borrow().clone();
        let last = m.last_log_index.unwrap_or(0);
        let matched = m.replication.as_ref().and_then(|r| r.get(&node_id).cloned()).flatten().map(|l| l.index);
        match matched {
            Some(i) if last.saturating_sub(i) <= CATCH_UP_SLACK => Ok(()),
            _ => Err(ProposeError::Unavailable(format!(
                "learner {node_id} has not caught up yet (it holds the log up to {matched:?} of {last}); retry once \
                 `leaf cluster status` shows its lag near 0"
            ))),
        }
    }

    /// Current members: ID → (`voter` | `learner`, address).
    fn members(&self) -> BTreeMap<NodeId, (String, String)> {
        let m = self.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        membership
            .nodes()
            .map(|(id, n)| {
                let role = if voters.contains(id) { "voter" } else { "learner" };
                (*id, (role.to_string(), n.addr.clone()))
            })
            .collect()
    }

    fn membership_now(&self) -> MembershipChange {
        let m = self.raft.metrics();
        let m = m.borrow();
        let membership = m.membership_config.membership();
        MembershipChange {
            log_index: m.membership_config.log_id().map_or(0, |l| l.index),
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
        }
    }

    /// The committed allocations this node has applied (all nodes', see
    /// [`AllocationJournal::complete_from_index`]), optionally one tag's and/or one node's.
    pub fn allocations(&self, tag: Option<&str>, node_id: Option<NodeId>) -> Result<AllocationJournal, String> {
        let dump = self.journal.dump(tag, node_id).map_err(|e| e.to_string())?;
        Ok(AllocationJournal {
            node_id: self.node_id,
            complete_from_index: dump.complete_from_index,
            complete_through_index: dump.complete_through_index,
            allocations: dump
                .records
                .into_iter()
                .map(|(log_index, r)| AllocationView {
                    tag: r.tag,
                    node_id: r.node_id,
                    start: r.start,
                    end: r.end,
                    log_index,
                    at_ms: r.at_ms,
                })
                .collect(),
        })
    }

    pub fn status(&self) -> RaftStatus {
        let m = self.raft.metrics().borrow().clone();
        let applied = m.last_applied.map(|l| l.index);
        let quorum_ack_age_ms = match m.current_leader {
            Some(_) if m.state == ServerState::Leader => m.millis_since_quorum_ack,
            Some(leader) => self.contact.age_ms(leader),
            None => None,
        };
        let not_ready = if let Err(e) = &m.running_state {
            Some(format!("raft stopped: {e}"))
        } else if m.membership_config.membership().get_node(&self.node_id).is_none() {
            Some("not a member of the cluster (waiting to be added, or removed)".to_string())
        } else if m.current_leader.is_none() {
            Some("no raft leader".to_string())
        } else if let Some(why) = self.quorum_problem(m.current_leader, m.state, quorum_ack_age_ms) {
            Some(why)
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
            quorum_ack_age_ms,
            not_ready,
        }
    }

    /// Why the quorum contact is not good enough to be ready, if it is not: the leader must
    /// have had a quorum acknowledgement within the longest election timeout (a follower: its
    /// leader, as probed), so a node cut off from the quorum reports it within two.
    fn quorum_problem(&self, leader: Option<NodeId>, state: ServerState, age: Option<u64>) -> Option<String> {
        let leader = leader?;
        let who = if state == ServerState::Leader { "this leader".to_string() } else { format!("leader {leader}") };
        match age {
            None => Some(format!("no quorum contact confirmed yet ({who})")),
            Some(a) if a > self.contact_limit_ms => {
                Some(format!("no quorum contact for {a} ms ({who}): new segments cannot be committed"))
            }
            Some(_) => None,
        }
    }

    /// The membership, progress and replication view of `GET /cluster/status`; `health` is
    /// the node's readiness as the HTTP layer computed it.
    pub fn cluster_status(&self, health: Health) -> ClusterStatus {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let mut members: Vec<MemberView> = membership
            .nodes()
            .map(|(id, n)| MemberView {
                node_id: *id,
                addr: n.addr.clone(),
                role: if voters.contains(id) { "voter" } else { "learner" }.to_string(),
            })
            .collect();
        members.sort_by_key(|v| (v.role != "voter", v.node_id));
        let last = m.last_log_index.unwrap_or(0);
        let replication = m.replication.as_ref().map(|r| {
            r.iter()
                .map(|(id, matched)| {
                    let matched_index = matched.map(|l| l.index);
                    ReplicationView {
                        node_id: *id,
                        matched_index,
                        lag: last.saturating_sub(matched_index.unwrap_or(0)),
                    }
                })
                .collect::<Vec<_>>()
        });
        // On the leader: the highest index stored on a majority of voters. Elsewhere the node
        // only knows what it applied.
        let committed_index = match &m.replication {
            Some(r) if m.state == ServerState::Leader => {
                let mut acked: Vec<u64> =
                    voters
                        .iter()
                        .map(|id| {
                            if *id == self.node_id {
                                last
                            } else {
                                r.get(id).copied().flatten().map_or(0, |l| l.index)
                            }
                        })
                        .collect();
                acked.sort_unstable_by(|a, b| b.cmp(a));
                acked.get(acked.len() / 2).copied()
            }
            _ => m.last_applied.map(|l| l.index),
        };
        let state = match m.state {
            ServerState::Leader => "leader",
            ServerState::Follower => "follower",
            ServerState::Candidate => "candidate",
            ServerState::Learner => "learner",
            ServerState::Shutdown => "shutdown",
        };
        ClusterStatus {
            node_id: self.node_id,
            leader_id: m.current_leader,
            state: state.to_string(),
            term: m.current_term,
            last_log_index: m.last_log_index,
            committed_index,
            last_applied_index: m.last_applied.map(|l| l.index),
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            members,
            replication,
            health,
            workers: self
                .state
                .workers()
                .into_iter()
                .map(|(worker_id, w)| WorkerView {
                    worker_id,
                    node_id: w.node_id,
                    high_water_ms: w.high_water_ms,
                    lease_expires_ms: w.lease_expires_ms,
                    previous_node_id: w.previous_node_id,
                })
                .collect(),
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

    /// This node's wall clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Whether this node knows a membership (it has formed or joined a cluster).
    pub fn has_membership(&self) -> bool {
        self.raft.metrics().borrow().membership_config.membership().nodes().next().is_some()
    }

    /// The other members and their addresses.
    pub fn peer_addrs(&self) -> Vec<(NodeId, String)> {
        self.members().into_iter().filter(|(id, _)| *id != self.node_id).map(|(id, (_, addr))| (id, addr)).collect()
    }

    /// Reads a peer's clock: `(local ms before, peer ms, local ms after)`.
    pub async fn peer_time(&self, addr: &str, timeout: Duration) -> Result<(i64, i64, i64), network::CallError> {
        let before = self.clock.now_ms();
        let peer: i64 = self.peers.call(addr, PATH_TIME, &(), timeout).await?;
        Ok((before, peer, self.clock.now_ms()))
    }

    /// Entries currently in the log (not yet purged behind a snapshot).
    pub fn log_len(&self) -> usize {
        self.log.len()
    }

    /// Stops Raft, then checkpoints the state machine; storage is flushed by then.
    pub async fn shutdown(&self) {
        // Read before stopping: a stopped Raft reports `Stopped` as its running state.
        let healthy = self.raft.metrics().borrow().running_state.is_ok();
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_clients_never_see_peer_addresses_or_peer_error_text() {
        let leaky = [
            ProposeError::Unavailable(
                "gave up after 5s: leader 2: cannot connect to 10.0.0.7:8080: Connection refused".into(),
            ),
            ProposeError::Unavailable(
                "leader 3 may or may not have done it: 10.0.0.8:8080 refused the request: \
                 HTTP 500: secret stack trace"
                    .into(),
            ),
            ProposeError::NotLeader { leader: Some(2) },
        ];
        for e in leaky {
            let m = e.public_message();
            assert!(!m.contains("10.0.0.") && !m.contains("refused") && !m.contains("secret"), "{m}");
            assert!(m.contains("retry"), "{m}");
        }
        // A rejection is the state machine's deterministic answer: shown as it is.
        let r = ProposeError::Rejected(ApplyError::TagNotFound("t".into()));
        assert_eq!(r.public_message(), r.to_string());
    }
}
