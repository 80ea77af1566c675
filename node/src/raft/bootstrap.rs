//! Forming the cluster on first start, and refusing to rejoin with a forgotten data dir; both
//! ask the peers for their [`PeerStatus`] over the authenticated internal API.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use leaf_raft_store::types::{NodeId, Raft};
use leaf_raft_store::version::{self, ClusterVersion};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};

use super::network::PATH_PEER_STATUS;
use super::{RaftNode, RaftStartError};

/// What a node asks its peers over the authenticated internal API
/// ([`super::network::PATH_PEER_STATUS`]): whether they hold a cluster, whether a node ID took
/// part in it (a starting node), and which cluster version they support (the leader, before it
/// raises the cluster's). Bounded and bincode, unlike the public `/cluster/status`.
///
/// A peer answers in the asker's version when it knows it: a member of a release before
/// cluster versions asks in version 1 and reads version 1, without `supports`. Such a member
/// answers version 1 to everyone, which reads as supporting [`version::BASE`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
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
    /// The newest cluster version the peer applies: its commands and its state's records
    /// (version 2 on; absent from version 1, which reads as [`version::BASE`]).
    pub supports: ClusterVersion,
}

/// The [`PeerStatus`] version this release speaks.
pub const PEER_STATUS_VERSION: u16 = 2;

/// The first version, which releases before cluster versions speak.
const PEER_STATUS_V1: u16 = 1;

impl PeerStatus {
    /// The answer to an asker of `asked`: in that version if this node speaks it, else in its
    /// own.
    pub(crate) fn encode_for(&self, asked: u16) -> Result<Vec<u8>, leaf_api::codec::CodecError> {
        if asked == PEER_STATUS_V1 {
            let v1 = (PEER_STATUS_V1, self.node_id, &self.members, &self.workers, &self.matched);
            return leaf_api::codec::encode(&v1);
        }
        leaf_api::codec::encode(self)
    }
}

/// Reads version 1 (five fields) and version 2 (six); later versions as far as this one knows
/// them, whose answer the asker then refuses by its `version`.
impl<'de> Deserialize<'de> for PeerStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = PeerStatus;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a peer status")
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<PeerStatus, A::Error> {
                let missing = |i| serde::de::Error::invalid_length(i, &"a peer status of 5 or 6 fields");
                let version: u16 = seq.next_element()?.ok_or_else(|| missing(0))?;
                let node_id = seq.next_element()?.ok_or_else(|| missing(1))?;
                let members = seq.next_element()?.ok_or_else(|| missing(2))?;
                let workers = seq.next_element()?.ok_or_else(|| missing(3))?;
                let matched = seq.next_element()?.ok_or_else(|| missing(4))?;
                let supports = match version {
                    PEER_STATUS_V1 => version::BASE,
                    _ => seq.next_element()?.ok_or_else(|| missing(5))?,
                };
                Ok(PeerStatus { version, node_id, members, workers, matched, supports })
            }
        }
        const FIELDS: &[&str] = &["version", "node_id", "members", "workers", "matched", "supports"];
        d.deserialize_struct("PeerStatus", FIELDS, Fields)
    }
}

/// How long a listed node waits for every listed peer to answer before a majority of them is
/// enough to form the cluster (see [`RaftNode::form_cluster`]).
const FORM_GRACE: Duration = Duration::from_secs(5);

impl RaftNode {
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
    /// - listed: once the listed nodes answer and none of them holds a cluster, the one with the
    ///   lowest ID initialises with exactly the listed members, and the others wait for its
    ///   leader. After [`FORM_GRACE`] without every answer, a majority (this one included) is
    ///   enough, and the lowest ID among those that answered initialises. Several nodes doing
    ///   so at once with the same list is safe (openraft writes the same entry at index 0), but
    ///   a node asked for its vote before it initialises refuses (openraft logs that at ERROR),
    ///   so one initialises where it can. If any peer already holds a cluster, this node does
    ///   not initialise: it is late, and the leader replicates to it.
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
            let started = tokio::time::Instant::now();
            let mut waited = 0u32;
            loop {
                if initialized(&self.raft).await {
                    return;
                }
                let mut blank = vec![self.node_id];
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
                    blank.push(*id);
                }
                let enough = blank.len() == peers.len() || (blank.len() >= majority && started.elapsed() >= FORM_GRACE);
                if enough && blank.iter().min() == Some(&self.node_id) {
                    break;
                }
                if waited.is_multiple_of(20) {
                    tracing::info!(
                        answered = blank.len(),
                        majority,
                        "waiting for the peers to form the cluster (the lowest ID among them initialises it)"
                    );
                }
                waited += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            // The peers' answers took a while: a vote may have come meanwhile.
            if initialized(&self.raft).await {
                return;
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
    pub(super) async fn peer_status(&self, id: NodeId, addr: &str) -> Option<PeerStatus> {
        let timeout = Duration::from_secs(1);
        match self.peers.call::<_, PeerStatus>(id, addr, PATH_PEER_STATUS, &PEER_STATUS_VERSION, timeout).await {
            Ok(s) if (s.version == PEER_STATUS_VERSION || s.version == PEER_STATUS_V1) && s.node_id == id => Some(s),
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
        let supports = self.versions.advertised();
        PeerStatus { version: PEER_STATUS_VERSION, node_id: self.node_id, members, workers, matched, supports }
    }
}
