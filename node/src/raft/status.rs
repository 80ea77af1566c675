//! Status: readiness ([`RaftStatus`]) and the `/cluster/status` view.
use std::collections::BTreeSet;
use std::time::Duration;

use leaf_api::types::{ClusterStatus, Health, MemberRole, MemberView, ReplicationView, Role, VersionView, WorkerView};
use leaf_raft_store::types::NodeId;
use openraft::ServerState;

use super::RaftNode;

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
    pub not_ready: Option<NotReady>,
    /// Raft stopped on a storage error (a failed read, write or fsync of its log or state
    /// machine): the node needs its disk fixed and a restart.
    pub storage_failed: bool,
}

/// Why a node's Raft side is not ready to serve new segments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotReady {
    /// Raft stopped (a storage error, or shutdown).
    #[error("raft stopped: {0}")]
    Stopped(String),
    #[error("not a member of the cluster (waiting to be added, or removed)")]
    NotAMember,
    #[error("no raft leader")]
    NoLeader,
    /// No quorum acknowledgement confirmed yet (`leader` is this node, or the leader).
    #[error("no quorum contact confirmed yet ({0})")]
    NoQuorumContactYet(LeaderName),
    /// The last quorum acknowledgement is older than the longest election timeout.
    #[error("no quorum contact for {age_ms} ms ({leader}): new segments cannot be committed")]
    QuorumContactLost { age_ms: u64, leader: LeaderName },
    /// The log present at startup is not applied yet.
    #[error("applying the log: {applied} of {of}")]
    ApplyingLog { applied: u64, of: u64 },
}

/// The leader a readiness reason names: this node, or another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderName {
    ThisNode,
    Other(NodeId),
}

impl std::fmt::Display for LeaderName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaderName::ThisNode => f.write_str("this leader"),
            LeaderName::Other(id) => write!(f, "leader {id}"),
        }
    }
}

impl RaftNode {
    pub fn status(&self) -> RaftStatus {
        let m = self.raft.metrics().borrow().clone();
        let applied = m.last_applied.map(|l| l.index);
        let quorum_ack_age_ms = match m.current_leader {
            Some(_) if m.state == ServerState::Leader => m.millis_since_quorum_ack,
            Some(leader) => self.contact.age_ms(leader),
            None => None,
        };
        let not_ready = if let Err(e) = &m.running_state {
            Some(NotReady::Stopped(e.to_string()))
        } else if m.membership_config.membership().get_node(&self.node_id).is_none() {
            Some(NotReady::NotAMember)
        } else if m.current_leader.is_none() {
            Some(NotReady::NoLeader)
        } else if let Some(why) = self.quorum_problem(m.current_leader, m.state, quorum_ack_age_ms) {
            Some(why)
        } else if applied.unwrap_or(0) < self.startup_index {
            // Only the log present at startup gates readiness: entries appended later are
            // applied within a commit round trip, and gating on them would flap `/health`
            // on every segment allocation.
            Some(NotReady::ApplyingLog { applied: applied.unwrap_or(0), of: self.startup_index })
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
            storage_failed: matches!(m.running_state, Err(openraft::error::Fatal::StorageError(_))),
        }
    }

    /// Why the quorum contact is not good enough to be ready, if it is not: the leader must
    /// have had a quorum acknowledgement within the longest election timeout (a follower: its
    /// leader, as probed), so a node cut off from the quorum reports it within two.
    fn quorum_problem(&self, leader: Option<NodeId>, state: ServerState, age: Option<u64>) -> Option<NotReady> {
        let leader = leader?;
        let who = if state == ServerState::Leader { LeaderName::ThisNode } else { LeaderName::Other(leader) };
        match age {
            None => Some(NotReady::NoQuorumContactYet(who)),
            Some(a) if a > self.contact_limit_ms => Some(NotReady::QuorumContactLost { age_ms: a, leader: who }),
            Some(_) => None,
        }
    }

    /// The membership, progress and replication view of `GET /cluster/status`; `health` is
    /// the node's readiness as the HTTP layer computed it.
    pub fn cluster_status(&self, health: Health) -> ClusterStatus {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let seen = self.versions.seen();
        let mut members: Vec<MemberView> = membership
            .nodes()
            .map(|(id, n)| MemberView {
                node_id: *id,
                addr: n.addr.clone(),
                role: if voters.contains(id) { MemberRole::Voter } else { MemberRole::Learner },
                supports_version: seen.get(id).map(|v| v.0),
            })
            .collect();
        members.sort_by_key(|v| (v.role != MemberRole::Voter, v.node_id));
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
        ClusterStatus {
            node_id: self.node_id,
            leader_id: m.current_leader,
            state: role(m.state),
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
            version: Some(VersionView {
                active: self.state.cluster_version().0,
                supported: self.versions.advertised().0,
            }),
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

    /// Resolves once Raft has stopped on a storage error, with that error's text; never
    /// resolves while Raft runs or after it stopped for another reason (shutdown).
    pub async fn storage_failure(&self) -> String {
        let mut rx = self.raft.metrics();
        loop {
            let failed = match &rx.borrow_and_update().running_state {
                Err(openraft::error::Fatal::StorageError(e)) => Some(e.to_string()),
                _ => None,
            };
            if let Some(why) = failed {
                return why;
            }
            if rx.changed().await.is_err() {
                // Raft's core is gone: its last metrics were read above.
                if let Err(openraft::error::Fatal::StorageError(e)) = &rx.borrow().running_state {
                    return e.to_string();
                }
                return std::future::pending().await;
            }
        }
    }
}

/// openraft's server state as `/cluster/status` shows it.
fn role(state: ServerState) -> Role {
    match state {
        ServerState::Leader => Role::Leader,
        ServerState::Follower => Role::Follower,
        ServerState::Candidate => Role::Candidate,
        ServerState::Learner => Role::Learner,
        ServerState::Shutdown => Role::Shutdown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_keep_their_json_names() {
        let cases = [
            (ServerState::Leader, "\"leader\""),
            (ServerState::Follower, "\"follower\""),
            (ServerState::Candidate, "\"candidate\""),
            (ServerState::Learner, "\"learner\""),
            (ServerState::Shutdown, "\"shutdown\""),
        ];
        for (state, json) in cases {
            assert_eq!(serde_json::to_string(&role(state)).unwrap(), json);
            assert_eq!(serde_json::from_str::<Role>(json).unwrap(), role(state));
        }
        assert_eq!(serde_json::to_string(&MemberRole::Voter).unwrap(), "\"voter\"");
        assert_eq!(serde_json::to_string(&MemberRole::Learner).unwrap(), "\"learner\"");
        assert_eq!(MemberRole::Learner.to_string(), "learner");
        assert!(serde_json::from_str::<Role>("\"Leader\"").is_err());
    }
}
