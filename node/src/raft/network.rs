//! Cluster-internal RPC, client side: one pooled hyper client that carries Raft's append,
//! vote and snapshot messages and forwarded requests to peers as bincode bodies.
//!
//! With `[tls]` on, peers are dialled with `https://` over mutual TLS: the peer's certificate
//! must be signed by the cluster CA for the address dialled and speak for the member dialled
//! (`urn:leaf:node:<id>`, one connection pool per member), and this node presents its own
//! (the configs come from [`crate::tls::Tls`]; a reload swaps the connection pool, so new
//! connections use the new files). Every request carries the cluster secret in
//! [`SECRET_HEADER`] as well; the receiving side is
//! [`super::service`]. Failures are classified by whether the request may have been delivered
//! ([`CallError::surely_not_delivered`]), which decides whether a forwarded proposal may be
//! retried, and become openraft's `Unreachable` (connect failures, so it backs off), `Timeout`
//! or `Network` errors.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use hyper_rustls::HttpsConnector;
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

use super::peer_report::PeerReports;

/// Header carrying the cluster secret on every internal request.
pub const SECRET_HEADER: &str = "x-leaf-cluster-secret";
/// Largest internal request or response body: an append of [`MAX_APPEND_ENTRIES`] entries
/// (snapshots travel in [`SNAPSHOT_CHUNK_BYTES`] chunks).
pub const MAX_RPC_BODY: usize = 16 * 1024 * 1024;
/// Most entries in one append request. A batch of tags was an entry of up to 1 MiB: openraft's
/// default of 300 entries let a node catching up from the log (a new learner, a restarted
/// follower) be sent hundreds of megabytes in one request, which it refused, again and again,
/// and it never caught up (seen: a learner added to a cluster holding a million tags). Batch
/// entries are now at most [`leaf_raft_store::MAX_BATCH_COMMAND_BYTES`] (384 KiB), so 32 of
/// them and their envelope stay under [`MAX_RPC_BODY`], and a busy leader still ships 32 small
/// entries a round trip.
pub const MAX_APPEND_ENTRIES: u64 = 32;
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
/// A member's health and clock, for the dashboard (answered by the HTTP layer, which knows the
/// node's snowflake and buffers: [`crate::service::dashboard::NodeProbe`]).
pub const PATH_NODE_HEALTH: &str = "/internal/node-health";

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
    pool: Arc<ArcSwap<Pool>>,
    tls: Option<TlsSource>,
    source_ip: Option<std::net::IpAddr>,
    secret: Option<Arc<HeaderValue>>,
}

/// Where the TLS client config comes from.
#[derive(Clone)]
enum TlsSource {
    /// The node's files, reloaded ([`crate::tls::Tls`]).
    Reloading(Arc<crate::tls::Tls>),
    /// One config for the client's life (tests).
    Fixed(Arc<rustls::ClientConfig>),
}

/// The connection pools of one generation of the TLS files.
struct Pool {
    generation: u64,
    http: Dialer,
}

enum Dialer {
    Plain(Box<HyperClient<HttpConnector, Full<Bytes>>>),
    /// One pool per member dialled: each member's connections check that the certificate
    /// speaks for that member ([`crate::tls::identity::NodeBound`]), so a connection made for
    /// one node is never reused for another.
    Tls {
        configs: TlsConfigs,
        source_ip: Option<std::net::IpAddr>,
        per_node: Mutex<HashMap<NodeId, HttpsClient>>,
    },
}

type HttpsClient = HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// The client configs of one TLS generation.
enum TlsConfigs {
    /// The node's files: every member is dialled with a config bound to it.
    Bound(Arc<crate::tls::Loaded>),
    /// A test's config, as it is (the dialled node is not checked).
    Fixed(Arc<rustls::ClientConfig>),
}

impl PeerClient {
    /// A plaintext client. `source_ip`: the local address peer connections leave from
    /// (`raft.source_ip`).
    pub fn new(secret: Option<&str>, source_ip: Option<std::net::IpAddr>) -> Self {
        Self::build(secret, source_ip, None)
    }

    /// A mutual-TLS client with the node's TLS files, following their reloads.
    pub fn tls(secret: Option<&str>, source_ip: Option<std::net::IpAddr>, tls: Arc<crate::tls::Tls>) -> Self {
        Self::build(secret, source_ip, Some(TlsSource::Reloading(tls)))
    }

    /// A TLS client with a fixed config (tests that present a forged certificate).
    pub fn with_client_config(secret: Option<&str>, config: Arc<rustls::ClientConfig>) -> Self {
        Self::build(secret, None, Some(TlsSource::Fixed(config)))
    }

    fn build(secret: Option<&str>, source_ip: Option<std::net::IpAddr>, tls: Option<TlsSource>) -> Self {
        let secret = secret.and_then(|s| HeaderValue::from_str(s).ok()).map(|mut v| {
            v.set_sensitive(true);
            Arc::new(v)
        });
        let pool = Arc::new(ArcSwap::from_pointee(pool(source_ip, tls.as_ref())));
        PeerClient { pool, tls, source_ip, secret }
    }

    /// The pool of the current TLS generation (rebuilt after a reload; connections of the old
    /// pool finish their requests and close).
    fn current(&self) -> Arc<Pool> {
        let pool = self.pool.load_full();
        match &self.tls {
            Some(TlsSource::Reloading(tls)) if tls.generation() != pool.generation => {
                let fresh = Arc::new(self::pool(self.source_ip, self.tls.as_ref()));
                self.pool.store(fresh.clone());
                fresh
            }
            _ => pool,
        }
    }

    /// Whether this node can authenticate to peers at all.
    pub fn has_secret(&self) -> bool {
        self.secret.is_some()
    }

    /// The cluster secret, to check a learner's proof with.
    pub(super) fn secret(&self) -> Option<&[u8]> {
        self.secret.as_deref().map(|v| v.as_bytes())
    }

    /// Whether peers are dialled over mutual TLS (their certificates prove who they are).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// POSTs `req` to member `to` at `http://{addr}{path}` and decodes the answer, all within
    /// `timeout`. With TLS, the answering certificate must speak for `to`.
    pub async fn call<Q: Serialize, A: DeserializeOwned>(
        &self,
        to: NodeId,
        addr: &str,
        path: &str,
        req: &Q,
        timeout: Duration,
    ) -> Result<A, CallError> {
        let secret = self.secret.as_ref().ok_or(CallError::NoSecret)?;
        self.send(to, addr, path, req, Some(secret), timeout).await
    }

    /// Like [`PeerClient::call`], without the cluster secret: for a node that has not proved it
    /// holds it ([`super::learner_proof`]).
    pub async fn call_unproven<Q: Serialize, A: DeserializeOwned>(
        &self,
        to: NodeId,
        addr: &str,
        path: &str,
        req: &Q,
        timeout: Duration,
    ) -> Result<A, CallError> {
        self.send(to, addr, path, req, None, timeout).await
    }

    async fn send<Q: Serialize, A: DeserializeOwned>(
        &self,
        to: NodeId,
        addr: &str,
        path: &str,
        req: &Q,
        secret: Option<&Arc<HeaderValue>>,
        timeout: Duration,
    ) -> Result<A, CallError> {
        let body =
            codec::encode(req).map_err(|e| CallError::Transport { addr: addr.into(), message: e.to_string() })?;
        let pool = self.current();
        let scheme = match pool.http {
            Dialer::Plain(_) => "http",
            Dialer::Tls { .. } => "https",
        };
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(format!("{scheme}://{addr}{path}"))
            .header(CONTENT_TYPE, "application/octet-stream");
        if let Some(secret) = secret {
            request = request.header(SECRET_HEADER, secret.as_ref().clone());
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| CallError::Unreachable { addr: addr.into(), message: format!("bad address: {e}") })?;
        let exchange = async {
            let sent = match &pool.http {
                Dialer::Plain(http) => http.request(request).await,
                Dialer::Tls { configs, source_ip, per_node } => {
                    https_to(configs, *source_ip, per_node, to).request(request).await
                }
            };
            let resp = sent.map_err(|e| {
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

/// The pool of connections to member `to`, made at the first call to it.
fn https_to(
    configs: &TlsConfigs,
    source_ip: Option<std::net::IpAddr>,
    per_node: &Mutex<HashMap<NodeId, HttpsClient>>,
    to: NodeId,
) -> HttpsClient {
    let mut clients = per_node.lock().unwrap_or_else(|e| e.into_inner());
    let client = clients.entry(to).or_insert_with(|| {
        let config = match configs {
            TlsConfigs::Bound(loaded) => loaded.client_for(to),
            TlsConfigs::Fixed(config) => (**config).clone(),
        };
        let mut connector = http_connector(source_ip);
        connector.enforce_http(false);
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(config)
            .https_only()
            .enable_http1()
            .wrap_connector(connector);
        client_builder().build(https)
    });
    client.clone()
}

/// The TCP side of a peer connection.
fn http_connector(source_ip: Option<std::net::IpAddr>) -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_local_address(source_ip);
    // A peer that does not accept within a second is down for Raft's purposes; openraft
    // then backs off instead of piling up connection attempts.
    connector.set_connect_timeout(Some(Duration::from_secs(1)));
    connector
}

fn client_builder() -> hyper_util::client::legacy::Builder {
    let mut builder = HyperClient::builder(TokioExecutor::new());
    builder.pool_idle_timeout(Duration::from_secs(30)).pool_max_idle_per_host(8);
    builder
}

/// The connection pools for `tls` (none: plaintext).
fn pool(source_ip: Option<std::net::IpAddr>, tls: Option<&TlsSource>) -> Pool {
    let (generation, configs) = match tls {
        None => {
            return Pool {
                generation: 0,
                http: Dialer::Plain(Box::new(client_builder().build(http_connector(source_ip)))),
            }
        }
        Some(TlsSource::Fixed(config)) => (0, TlsConfigs::Fixed(config.clone())),
        Some(TlsSource::Reloading(tls)) => {
            // Read the generation first: a reload racing with this build is picked up next call.
            let generation = tls.generation();
            (generation, TlsConfigs::Bound(tls.current()))
        }
    };
    Pool { generation, http: Dialer::Tls { configs, source_ip, per_node: Mutex::new(HashMap::new()) } }
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
    pub(super) reports: PeerReports,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> PeerConnection {
        PeerConnection {
            from: self.node_id,
            target,
            addr: node.addr.clone(),
            client: self.client.clone(),
            reports: self.reports.clone(),
        }
    }
}

/// Raft's channel to one peer.
pub struct PeerConnection {
    from: NodeId,
    target: NodeId,
    addr: String,
    client: PeerClient,
    /// Whether the peer answers, shared with every other connection to it.
    reports: PeerReports,
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
        let answer = self.client.call::<Q, Result<A, E>>(self.target, &self.addr, path, req, ttl).await;
        let failure = answer.as_ref().err().map(|e| e as &dyn std::fmt::Display);
        self.reports.note(self.target, &self.addr, action, failure);
        match answer {
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
