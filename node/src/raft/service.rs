//! Cluster-internal RPC, server side: decodes a peer's bincode request, hands it to Raft and
//! encodes the answer. The HTTP edge has already checked the cluster secret and the body size;
//! with TLS, it names the member node whose certificate made the call, and a Raft message that
//! claims to come from another node is refused.
use leaf_api::codec;
use leaf_raft_store::types::NodeId;
use leaf_raft_store::TypeConfig;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::Vote;
use std::time::Instant;

use super::leader::LeaderOp;
use super::network::{PATH_APPEND, PATH_PEER_STATUS, PATH_SNAPSHOT, PATH_TIME, PATH_VOTE};
use super::ops::{self, AddLearner, ForwardAnswer, OpKind, Promote, Propose, QuorumAge, ReadIndex, Remove};
use super::RaftNode;

/// Why an internal request was not handled.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("no internal endpoint {0}")]
    NotFound(String),
    #[error("malformed request body: {0}")]
    BadRequest(String),
    #[error("cannot encode the answer: {0}")]
    Encode(String),
    #[error("a Raft message from node {claimed} came with node {caller}'s certificate")]
    Impersonation { claimed: NodeId, caller: NodeId },
}

/// A Raft message names its sender in its vote (the leader of an append or snapshot, the
/// candidate of a vote request); with TLS that must be the node whose certificate called.
fn check_sender(vote: &Vote<NodeId>, caller: Option<NodeId>) -> Result<(), ServiceError> {
    match (caller, vote.leader_id().voted_for()) {
        (Some(caller), Some(claimed)) if claimed != caller => Err(ServiceError::Impersonation { claimed, caller }),
        _ => Ok(()),
    }
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ServiceError> {
    codec::decode(body).map_err(|e| ServiceError::BadRequest(e.to_string()))
}

fn encode<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, ServiceError> {
    codec::encode(value).map_err(|e| ServiceError::Encode(e.to_string()))
}

/// Whether `path` names an internal endpoint (so the edge applies the cluster secret).
pub fn is_internal(path: &str) -> bool {
    path == "/internal" || path.starts_with("/internal/")
}

/// Handles one authenticated internal request; `caller`: the node whose certificate made it
/// (with TLS).
pub async fn handle(node: &RaftNode, path: &str, body: &[u8], caller: Option<NodeId>) -> Result<Vec<u8>, ServiceError> {
    match path {
        PATH_APPEND => {
            let req: AppendEntriesRequest<TypeConfig> = decode(body)?;
            check_sender(&req.vote, caller)?;
            let (at, vote, commit) = (Instant::now(), req.vote, req.leader_commit.map(|l| l.index));
            let r: Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>> = node.raft.append_entries(req).await;
            if let (Ok(AppendEntriesResponse::Success), Some(leader)) = (&r, vote.leader_id().voted_for()) {
                // Accepted in full from the leader of `vote`: this node has heard from it.
                node.leader_heard(at, leader, vote.leader_id().term, commit);
            }
            encode(&r)
        }
        PATH_VOTE => {
            let req: VoteRequest<NodeId> = decode(body)?;
            check_sender(&req.vote, caller)?;
            let r: Result<VoteResponse<NodeId>, RaftError<NodeId>> = node.raft.vote(req).await;
            encode(&r)
        }
        PATH_SNAPSHOT => {
            let req: InstallSnapshotRequest<TypeConfig> = decode(body)?;
            check_sender(&req.vote, caller)?;
            let (id, offset, len, done) = (req.meta.snapshot_id.clone(), req.offset, req.data.len(), req.done);
            node.chunks.admit(&id, offset, len).map_err(ServiceError::BadRequest)?;
            let r: Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>> =
                node.raft.install_snapshot(req).await;
            if r.is_ok() {
                node.chunks.accepted(&id, offset, len, done);
            }
            encode(&r)
        }
        super::election::PATH_PRE_VOTE => {
            let asked: super::election::PreVote = decode(body)?;
            // A pre-vote changes nothing, but it speaks for the caller's ID all the same.
            if caller.is_some_and(|c| c != asked.candidate) {
                return Err(ServiceError::Impersonation {
                    claimed: asked.candidate,
                    caller: caller.unwrap_or_default(),
                });
            }
            encode(&node.answer_pre_vote(&asked).await)
        }
        super::transfer::PATH_TAKE_OVER => {
            let ask: super::transfer::TakeOver = decode(body)?;
            // Only the leader itself may ask (the handler also checks it is the leader followed).
            if caller.is_some_and(|c| c != ask.from) {
                return Err(ServiceError::Impersonation { claimed: ask.from, caller: caller.unwrap_or_default() });
            }
            encode(&node.take_over(&ask).await)
        }
        PATH_TIME => {
            let () = decode(body)?;
            encode(&node.clock.now_ms())
        }
        PATH_PEER_STATUS => {
            // The asker's version: answered in it when this node speaks it, else in its own,
            // which the asker checks.
            let asked: u16 = decode(body)?;
            node.own_peer_status().encode_for(asked).map_err(|e| ServiceError::Encode(e.to_string()))
        }
        other => match OpKind::from_path(other) {
            Some(OpKind::Propose) => forwarded::<Propose>(node, body).await,
            Some(OpKind::ReadIndex) => forwarded::<ReadIndex>(node, body).await,
            Some(OpKind::AddLearner) => forwarded::<AddLearner>(node, body).await,
            Some(OpKind::Promote) => forwarded::<Promote>(node, body).await,
            Some(OpKind::Remove) => forwarded::<Remove>(node, body).await,
            Some(OpKind::QuorumAge) => forwarded::<QuorumAge>(node, body).await,
            Some(OpKind::MonotonicTake) => forwarded::<super::ops::MonotonicTake>(node, body).await,
            None => Err(ServiceError::NotFound(other.to_string())),
        },
    }
}

/// Executes a follower's forwarded `O` (refused before anything is done when its version or
/// body is not this node's) and answers with the result, naming the operation.
async fn forwarded<O: LeaderOp>(node: &RaftNode, body: &[u8]) -> Result<Vec<u8>, ServiceError> {
    let (op, budget) = ops::accept::<O>(body).map_err(|e| ServiceError::BadRequest(e.to_string()))?;
    let result = op.execute(node, node.deadline_within(budget)).await;
    encode(&ForwardAnswer::<O::Reply> { op: O::KIND, result })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raft_message_must_come_from_the_node_it_names() {
        let leader = Vote::new_committed(3, 2);
        assert!(check_sender(&leader, Some(2)).is_ok());
        assert!(check_sender(&leader, None).is_ok(), "plaintext: no certificate to bind it to");
        assert!(matches!(check_sender(&leader, Some(3)), Err(ServiceError::Impersonation { claimed: 2, caller: 3 })));
        // A candidate's vote request, too.
        assert!(check_sender(&Vote::new(4, 5), Some(5)).is_ok());
        assert!(check_sender(&Vote::new(4, 5), Some(1)).is_err());
    }
}
