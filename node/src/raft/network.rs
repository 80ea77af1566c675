//! Cluster-internal RPC, client side: one pooled hyper client that carries Raft's append,
//! vote and snapshot messages and forwarded requests to peers as bincode bodies.
//!
//! Every request carries the cluster secret in [`SECRET_HEADER`]; the receiving side is
//! [`super::service`]. Failures are classified by whether the request may have been delivered
//! ([`CallError::surely_not_delivered`]), which decides whether a forwarded proposal may be
//! retried, and become openraft's `Unreachable` (connect failures, so it backs off), `Timeout`
//! or `Network` errors.
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client as HyperClient};
use hyper_util::rt::TokioExecutor;
use leaf_api::codec;
use leaf_raft_store::types::{Node, NodeId};
use leaf_raft_store::TypeConfig;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable};
use openraft::network::{RPCOption, RPCTypes, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Header carrying the cluster secret on every internal request.
pub const SECRET_HEADER: &str = "x-leaf-cluster-secret";
/// Largest internal request or response body. Append batches are at most a few hundred small
/// entries and snapshots travel in [`SNAPSHOT_CHUNK_BYTES`] chunks, so this is generous.
pub const MAX_RPC_BODY: usize = 8 * 1024 * 1024;
/// Size of the chunks a snapshot is sent in.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1024 * 1024;
/// Paths of the internal endpoints.
pub const PATH_APPEND: &str = "/internal/raft/append";
pub const PATH_VOTE: &str = "/internal/raft/vote";
pub const PATH_SNAPSHOT: &str = "/internal/raft/snapshot";
/// A peer's wall clock (the snowflake startup clock check).
pub const PATH_TIME: &str = "/internal/time";
/// Whether a peer holds a cluster and who took part in it (a starting node asks).
pub const PATH_PEER_STATUS: &str = "/internal/peer-status";

/// Why an internal call produced no decodable answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("no cluster_secret is configured on this node")]
    NoSecret,
    #[error("cannot connect to {addr}: {message}")]
    Unreachable { addr: String, message: String },
    #[error("{addr} did not answer within {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("request to {addr} failed: {message}")]
    Transport { addr: String, message: String },
    #[error("{addr} refused the request: HTTP {status}: {body}")]
    Refused { addr: String, status: u16, body: String },
    #[error("{addr} sent an undecodable answer: {message}")]
    Decode { addr: String, message: String },
}

impl CallError {
    /// True when the peer cannot have acted on the request: it was never sent, or the peer
    /// refused it before handling it (bad secret, bad body, shutting down).
    pub fn surely_not_delivered(&self) -> bool {
        match self {
            CallError::NoSecret | CallError::Unreachable { .. } => true,
            // Refusals before any handling: bad secret, bad path or method, bad or large body.
            CallError::Refused { status, .. } => matches!(status, 400 | 401 | 404 | 405 | 413),
            CallError::Timeout { .. } | CallError::Transport { .. } | CallError::Decode { .. } => false,
        }
    }
}

/// A pooled, keep-alive HTTP client for peer traffic, shared by every peer connection.
#[derive(Clone)]
pub struct PeerClient {
    http: HyperClient<HttpConnector, Full<Bytes>>,
    secret: Option<Arc<HeaderValue>>,
}

impl PeerClient {
    /// `source_ip`: the local address peer connections leave from (`raft.source_ip`).
    pub fn new(secret: Option<&str>, source_ip: Option<std::net::IpAddr>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_local_address(source_ip);
        // A peer that does not accept within a second is down for Raft's purposes; openraft
        // then backs off instead of piling up connection attempts.
        connector.set_connect_timeout(Some(Duration::from_secs(1)));
        let http = HyperClient::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(8)
            .build(connector);
        let secret = secret.and_then(|s| HeaderValue::from_str(s).ok()).map(|mut v| {
            v.set_sensitive(true);
            Arc::new(v)
        });
        PeerClient { http, secret }
    }

    /// Whether this node can authenticate to peers at all.
    pub fn has_secret(&self) -> bool {
        self.secret.is_some()
    }

    /// POSTs `req` to `http://{addr}{path}` and decodes the answer, all within `timeout`.
    pub async fn call<Q: Serialize, A: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        req: &Q,
        timeout: Duration,
    ) -> Result<A, CallError> {
        let secret = self.secret.as_ref().ok_or(CallError::NoSecret)?;
        let body =
            codec::encode(req).map_err(|e| CallError::Transport { addr: addr.into(), message: e.to_string() })?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(format!("http://{addr}{path}"))
            .header(CONTENT_TYPE, "application/octet-stream")
            .header(SECRET_HEADER, secret.as_ref().clone())
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| CallError::Unreachable { addr: addr.into(), message: format!("bad address: {e}") })?;
        let exchange = async {
            let resp = self.http.request(request).await.map_err(|e| {
                if e.is_connect() {
                    CallError::Unreachable { addr: addr.into(), message: error_chain(&e) }
                } else {
                    CallError::Transport { addr: addr.into(), message: error_chain(&e) }
                }
            })?;
            let status = resp.status();
            let bytes = Limited::new(resp.into_body(), MAX_RPC_BODY)
                .collect()
                .await
                .map_err(|e| CallError::Transport { addr: addr.into(), message: e.to_string() })?
                .to_bytes();
            if status != StatusCode::OK {
                let body = String::from_utf8_lossy(&bytes[..bytes.len().min(512)]).into_owned();
                return Err(CallError::Refused { addr: addr.into(), status: status.as_u16(), body });
            }
            codec::decode(&bytes).map_err(|e| CallError::Decode { addr: addr.into(), message: e.to_string() })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(r) => r,
            Err(_) => Err(CallError::Timeout { addr: addr.into(), timeout }),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// Creates one [`PeerConnection`] per replication target; openraft calls it.
pub struct NetworkFactory {
    pub(super) node_id: NodeId,
    pub(super) client: PeerClient,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerConnection {
        PeerConnection { from: self.node_id, target, addr: node.addr.clone(), client: self.client.clone() }
    }
}

/// Raft's channel to one peer.
pub struct PeerConnection {
    from: NodeId,
    target: NodeId,
    addr: String,
    client: PeerClient,
}

impl PeerConnection {
    async fn rpc<Q, A, E>(
        &self,
        action: RPCTypes,
        path: &str,
        req: &Q,
        option: &RPCOption,
    ) -> Result<A, RPCError<NodeId, Node, E>>
    where
        Q: Serialize,
        A: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let ttl = option.hard_ttl();
        match self.client.call::<Q, Result<A, E>>(&self.addr, path, req, ttl).await {
            Ok(Ok(a)) => Ok(a),
            Ok(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(self.target, e))),
            // A peer that refuses our secret or does not know the endpoint (misconfiguration,
            // version skew) will not change its mind soon: let openraft back off.
            Err(e @ (CallError::Unreachable { .. } | CallError::NoSecret)) => {
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(e @ CallError::Refused { status: 401 | 404, .. }) => Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(CallError::Timeout { .. }) => {
                Err(RPCError::Timeout(Timeout { action, id: self.from, target: self.target, timeout: ttl }))
            }
            Err(e) => Err(RPCError::Network(NetworkError::new(&e))),
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        self.rpc(RPCTypes::AppendEntries, PATH_APPEND, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId, InstallSnapshotError>>> {
        self.rpc(RPCTypes::InstallSnapshot, PATH_SNAPSHOT, &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, Node, RaftError<NodeId>>> {
        self.rpc(RPCTypes::Vote, PATH_VOTE, &rpc, &option).await
    }
}
