//! Why a request to the leader did not succeed ([`ProposeError`]), and how openraft's write
//! errors become one.
use std::time::Duration;

use leaf_raft_store::types::NodeId;
use leaf_raft_store::ApplyError;
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};

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
    /// A forwarded write reached the leader, and no answer came back: it may or may not have
    /// been done (`detail` may name the leader's address: logged, never shown).
    #[error("leader {leader} may or may not have done it: {detail}")]
    Uncertain { leader: NodeId, detail: String },
}

impl ProposeError {
    /// The message for an anonymous client (the ID endpoints): the kind of failure without
    /// peer addresses or a peer's error text, which [`super::RaftNode`] logs instead. State machine
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
            ProposeError::Uncertain { leader, .. } => format!(
                "leader {leader} may or may not have done it: the request reached it and no answer came back; \
                 check before retrying"
            ),
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
    /// The request is malformed.
    Invalid,
    /// The change does not fit the cluster as it stands (it would leave no voter, the leader
    /// has no cluster secret, the node's release cannot apply the log).
    Conflict,
}

pub(super) fn member_err(kind: MemberErrorKind, message: impl Into<String>) -> ProposeError {
    ProposeError::Member { kind, message: message.into() }
}

/// A Raft write error as the caller sees it.
pub(super) fn write_error(e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> ProposeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ProposeError::NotLeader { leader: f.leader_id },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(c)) => match c {
            ChangeMembershipError::InProgress(_) => ProposeError::Unavailable(c.to_string()),
            ChangeMembershipError::EmptyMembership(_) => member_err(MemberErrorKind::Conflict, c.to_string()),
            ChangeMembershipError::LearnerNotFound(_) => member_err(MemberErrorKind::NotFound, c.to_string()),
        },
        RaftError::Fatal(f) => ProposeError::Fatal(f.to_string()),
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
            ProposeError::Uncertain {
                leader: 3,
                detail: "10.0.0.8:8080 refused the request: HTTP 500: secret stack trace".into(),
            },
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
