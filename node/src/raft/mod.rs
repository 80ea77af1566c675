//! The node's Raft group member: the only module tree of the node that names openraft types.
//!
//! [`RaftNode`] opens the sled store, starts openraft, forms the cluster on first start (a
//! one-node cluster, or the configured `peers`), routes proposals, membership changes and
//! read-index requests to the leader, and reports status.
//!
//! Layout:
//! - this file: the [`RaftNode`] type and its small accessors;
//! - [`start`]: opening the store, starting openraft ([`RaftStartError`]) and shutting down;
//! - [`bootstrap`]: forming the cluster on first start and refusing a node that forgot its
//!   data, from the peers' [`PeerStatus`];
//! - [`ops`]: the requests only the leader executes, each with its reply type, route and
//!   versioned wire form;
//! - [`forward`]: routing such a request to the leader (here or forwarded), retried across
//!   leader changes;
//! - [`propose`]: the typed proposal ([`RaftNode::propose`]), the read barrier and waits for
//!   the applied state;
//! - [`leader`]: what the leader executes for each request, and how it is retried and checked,
//!   with the primitives the features' hooks build on (write an entry here, a quorum-confirmed
//!   read index, the term this node leads in);
//! - [`hooks`]: what the features add to the leader's execution (a stamp, group commits, the
//!   monotonic takes it serves), given at start: no feature module is named here;
//! - [`membership`]: adding learners, promoting and removing members;
//! - [`learner_proof`]: a new learner's proof that it holds the cluster secret (clusters
//!   without TLS), asked before anything is sent to it;
//! - [`status`]: readiness ([`RaftStatus`]) and `/cluster/status`;
//! - [`error`]: why a request to the leader failed ([`ProposeError`]);
//! - [`answer`]: the `Answer` trait by which each result type checks the leader's answer to
//!   the ops it answers and takes itself out of it (implemented beside each feature);
//! - [`compaction`]: snapshots and log purges by what the log holds (a batch of tags counts
//!   each tag), beside openraft's own by entry count;
//! - [`chunks`]: admission of snapshot chunks (in order, bounded) before openraft sees them;
//! - [`caught_up`]: whether this node is caught up with a leader it heard from recently, so
//!   it may answer "no such tag" without a read-index round;
//! - [`coalesce`]: read-index rounds shared by concurrent callers (unknown-tag floods);
//! - [`gate`]: the leader's write gate, closed while it hands leadership over;
//! - [`election`]: campaigns only after a majority granted a pre-vote (openraft's own elections
//!   are off), so a node cut off from the rest never disturbs the leader on its return;
//! - [`network`]: the pooled peer client and openraft's `RaftNetwork` over it;
//! - [`peer_report`]: a peer Raft cannot reach, logged at WARN once and then now and then;
//! - [`quorum`]: quorum contact (the leader's last quorum acknowledgement, probed by followers);
//! - [`service`]: the internal endpoints' handlers;
//! - [`transfer`]: a leader stopping gracefully hands leadership to an up-to-date follower;
//! - [`versions`]: the version this node advertises, and the leader's raise of the cluster's
//!   version once every member supports a newer one.
use std::sync::Arc;
use std::time::Duration;

use leaf_raft_store::types::{NodeId, Raft};
use leaf_raft_store::{LogStore, StateReader};

use crate::clock::Clock;

pub(crate) mod answer;
mod bootstrap;
mod caught_up;
mod chunks;
mod coalesce;
mod compaction;
pub mod election;
mod error;
mod forward;
mod gate;
pub mod hooks;
mod leader;
pub mod learner_proof;
mod membership;
pub mod network;
pub mod ops;
mod peer_report;
mod propose;
mod quorum;
pub mod service;
mod start;
mod status;
pub mod transfer;
mod versions;

pub use error::{MemberErrorKind, ProposeError};
pub use start::RaftStartError;
pub use status::RaftStatus;

use network::{PeerClient, PATH_TIME};

/// Metrics the Raft member increments.
#[derive(Debug, Clone, Default)]
pub struct RaftCounters {
    /// Leader answers refused by the checks of [`answer`].
    pub rejected_answers: prometheus_client::metrics::counter::Counter,
    /// Read-index rounds started for this node's callers ([`coalesce`]).
    pub read_index_rounds: prometheus_client::metrics::counter::Counter,
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
    /// Answers refused by the checks of [`answer`] (and garbled or mismatched ones).
    rejected_answers: prometheus_client::metrics::counter::Counter,
    /// Which snapshot chunks may reach openraft ([`chunks`]).
    chunks: Arc<chunks::ChunkGate>,
    /// The last append-entries request accepted from a leader ([`caught_up`]).
    heard: Arc<caught_up::LeaderHeard>,
    /// How stale a local "no such tag" may be ([`caught_up`]).
    local_reads_window: Duration,
    /// Whether misses may be answered locally at all (`raft.unknown_tags = "local"`).
    local_misses: bool,
    /// Read-index rounds through the leader, shared by this node's callers ([`coalesce`]).
    barriers: Arc<coalesce::Coalescer>,
    /// The leader's own read-index (quorum) rounds, shared by every node's callers.
    leader_reads: Arc<coalesce::Coalescer>,
    /// What the features add to the leader's execution of proposals ([`hooks`]).
    hooks: Arc<hooks::LeaderHooks>,
    /// The cluster version this node advertises and what the members advertised ([`versions`]).
    versions: Arc<versions::Versions>,
    /// When a voter without a leader asks for pre-votes, and grants them ([`election`]).
    elections: election::Timing,
    /// Since when this node leads ([`transfer`]: it refuses a successor's vote before its lease).
    leadership: transfer::Leadership,
    /// Closed while this leader hands over: writes wait, then go to the new leader.
    gate: gate::Gate,
}

impl RaftNode {
    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// The state machine, for a backup of it ([`crate::backup`]).
    pub fn store(&self) -> &leaf_raft_store::StateMachineStore {
        &self.sm
    }

    /// The applied state (tags) on this node.
    pub fn state(&self) -> &StateReader {
        &self.state
    }

    /// Whether this node is the Raft leader now.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().state == openraft::ServerState::Leader
    }

    /// How long a proposal may take (`raft.propose_timeout_ms`).
    pub fn propose_timeout(&self) -> Duration {
        self.propose_timeout
    }

    /// This node's wall clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Whether this node knows a membership (it has formed or joined a cluster).
    pub fn has_membership(&self) -> bool {
        self.raft.metrics().borrow().membership_config.membership().nodes().next().is_some()
    }

    /// Whether node `id` is in this node's membership (a voter or a learner).
    pub fn knows_node(&self, id: NodeId) -> bool {
        self.raft.metrics().borrow().membership_config.membership().get_node(&id).is_some()
    }

    /// The other members and their addresses.
    pub fn peer_addrs(&self) -> Vec<(NodeId, String)> {
        self.members().into_iter().filter(|(id, _)| *id != self.node_id).map(|(id, (_, addr))| (id, addr)).collect()
    }

    /// Reads a peer's clock: `(local ms before, peer ms, local ms after)`.
    pub async fn peer_time(
        &self,
        id: NodeId,
        addr: &str,
        timeout: Duration,
    ) -> Result<(i64, i64, i64), network::CallError> {
        let before = self.clock.now_ms();
        let peer: i64 = self.peers.call(id, addr, PATH_TIME, &(), timeout).await?;
        Ok((before, peer, self.clock.now_ms()))
    }

    /// One internal call to member `id` at `addr` (cluster secret, mutual TLS, bincode).
    pub async fn call_peer<Q: serde::Serialize, A: serde::de::DeserializeOwned>(
        &self,
        id: NodeId,
        addr: &str,
        path: &str,
        req: &Q,
        timeout: Duration,
    ) -> Result<A, network::CallError> {
        self.peers.call(id, addr, path, req, timeout).await
    }

    /// Entries currently in the log (not yet purged behind a snapshot).
    pub fn log_len(&self) -> usize {
        self.log.len()
    }
}
