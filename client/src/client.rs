//! [`Client`]: one call = attempts over the nodes until an answer, a non-retryable error, the
//! retry budget or the deadline.
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper::header::HeaderValue;
use hyper::{Method, StatusCode};
use leaf_api::ErrorBody;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;

use crate::builder::ClientBuilder;
use crate::error::ClientError;
use crate::own_creates::OwnCreates;
use crate::retry::{gives_up_on_tls, retryable, Backoff, Safety};
use crate::transport::{RawReply, Transport};

/// A client of one leaf cluster (any of its nodes); cheap to clone, clones share the
/// connection pool.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// Base URLs, `http://host:port`.
    pub nodes: Vec<String>,
    /// `Bearer <token>`, marked sensitive.
    pub auth: Option<HeaderValue>,
    pub policy: Policy,
    pub transport: Transport,
    /// The node the next call starts with: the last one that answered.
    pub preferred: AtomicUsize,
    /// The tags this client created recently ([`crate::own_creates`]).
    pub own_creates: OwnCreates,
    /// What its gapless settlement secrets derive from ([`crate::gapless`]).
    pub settlement_key: [u8; 32],
}

/// Timeouts and retries of every call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    pub timeout: Duration,
    pub deadline: Duration,
    pub retries: u32,
    pub backoff: Backoff,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("nodes", &self.inner.nodes)
            .field("token", &self.inner.auth.as_ref().map(|_| "(set)"))
            .field("policy", &self.inner.policy)
            .finish()
    }
}

/// One API call, before it is sent.
pub(crate) struct Call {
    pub method: Method,
    /// Path and query.
    pub path: String,
    pub body: Option<Bytes>,
    pub safety: Safety,
    /// Non-2xx statuses whose body is the endpoint's answer rather than an error (`/health`
    /// answers 503 with its report).
    pub also_ok: Option<StatusCode>,
    /// The tag the call takes IDs of or looks at: a `tag_not_found` for a tag this client just
    /// created is retried ([`crate::own_creates`]).
    pub tag: Option<String>,
}

impl Call {
    pub fn get(path: String) -> Call {
        Call { method: Method::GET, path, body: None, safety: Safety::Idempotent, also_ok: None, tag: None }
    }

    pub fn with_json<T: Serialize>(
        method: Method,
        path: String,
        body: &T,
        safety: Safety,
    ) -> Result<Call, ClientError> {
        let body = serde_json::to_vec(body).map_err(|e| ClientError::Request(e.to_string()))?;
        Ok(Call { method, path, body: Some(Bytes::from(body)), safety, also_ok: None, tag: None })
    }

    /// A GET that takes IDs of `tag`.
    pub fn taking(path: String, tag: &str) -> Call {
        Call::get(path).about(tag)
    }

    /// This call, about `tag` (see [`Call::tag`]).
    pub fn about(self, tag: &str) -> Call {
        Call { tag: Some(tag.to_string()), ..self }
    }
}

/// A successful answer, and which node gave it.
pub(crate) struct Answer {
    pub node: String,
    pub status: StatusCode,
    pub body: Bytes,
}

impl Answer {
    /// The body as JSON of type `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, ClientError> {
        serde_json::from_slice(&self.body).map_err(|e| self.decode_error(e.to_string()))
    }

    pub fn decode_error(&self, message: impl Into<String>) -> ClientError {
        ClientError::Decode { node: self.node.clone(), status: self.status, message: message.into() }
    }
}

impl Client {
    /// Starts configuring a client of the nodes at `nodes` (`http://host:port` each). Any node
    /// serves every call; a call moves on to the next node when one fails in a way worth
    /// retrying.
    pub fn builder<I, S>(nodes: I) -> ClientBuilder
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ClientBuilder::new(nodes.into_iter().map(|s| s.as_ref().to_string()).collect())
    }

    /// This client's memory of the tags it created recently, to share with another client
    /// ([`ClientBuilder::own_creates`]).
    pub fn own_creates(&self) -> OwnCreates {
        self.inner.own_creates.clone()
    }

    /// The nodes' base URLs, as normalised by the builder.
    pub fn nodes(&self) -> &[String] {
        &self.inner.nodes
    }

    /// Sends one request, exactly as given, to the first node: no retry, no typing, any status
    /// is an `Ok`. For tests that send deliberately malformed requests and for endpoints a
    /// caller wants byte for byte; everything else has a typed method.
    pub async fn raw(&self, method: Method, path: &str, body: Option<Bytes>) -> Result<RawReply, ClientError> {
        let inner = &self.inner;
        let auth = inner.auth.as_ref();
        inner.transport.send(&inner.nodes[0], method, path, auth, body.as_ref(), inner.policy.timeout).await
    }

    /// Runs `call` over the nodes: starts at the node that last answered, moves to the next
    /// one after an error worth retrying (see [`crate::retry`]), backing off between attempts,
    /// within the retry budget and the deadline.
    pub(crate) async fn execute(&self, call: Call) -> Result<Answer, ClientError> {
        let inner = &self.inner;
        let policy = inner.policy;
        let deadline = Instant::now() + policy.deadline;
        let n = inner.nodes.len();
        let first = inner.preferred.load(Ordering::Relaxed) % n;
        let mut attempt: u32 = 0;
        let mut tls_failures = 0usize;
        loop {
            let idx = (first + attempt as usize) % n;
            let node = &inner.nodes[idx];
            let timeout = policy.timeout.min(deadline.saturating_duration_since(Instant::now()));
            let reply = inner
                .transport
                .send(node, call.method.clone(), &call.path, inner.auth.as_ref(), call.body.as_ref(), timeout)
                .await;
            let err = match reply.and_then(|r| check(node, r, call.also_ok)) {
                Ok(answer) => {
                    inner.preferred.store(idx, Ordering::Relaxed);
                    return Ok(answer);
                }
                Err(e) => e,
            };
            // A tag this client just created, not yet applied on the node that answered.
            let own_create =
                is_tag_not_found(&err) && call.tag.as_deref().is_some_and(|t| inner.own_creates.within_grace(t));
            if !own_create && !retryable(&err, call.safety) {
                return Err(err);
            }
            tls_failures += usize::from(matches!(err, ClientError::Tls { .. }));
            let give_up = |err| {
                if attempt == 0 {
                    err
                } else {
                    ClientError::AllNodesFailed { attempts: attempt + 1, last: Box::new(err) }
                }
            };
            if (!own_create && attempt >= policy.retries) || gives_up_on_tls(&err, n, tls_failures) {
                return Err(give_up(err));
            }
            let wait = if own_create { crate::own_creates::RETRY_EVERY } else { policy.backoff.delay(attempt) };
            if Instant::now() + wait >= deadline {
                return Err(give_up(err));
            }
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }
}

/// Whether `err` is a node's 404 `tag_not_found`.
fn is_tag_not_found(err: &ClientError) -> bool {
    matches!(err, ClientError::Api { code: leaf_api::ErrorCode::TagNotFound, .. })
}

/// A 2xx (or `also_ok`) answer, or the error its body describes.
fn check(node: &str, r: RawReply, also_ok: Option<StatusCode>) -> Result<Answer, ClientError> {
    if r.status.is_success() || Some(r.status) == also_ok {
        return Ok(Answer { node: node.to_string(), status: r.status, body: r.body });
    }
    Err(api_error(node, r.status, &r.body))
}

/// The typed error of a non-2xx answer.
pub(crate) fn api_error(node: &str, status: StatusCode, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => ClientError::Api { status, code: e.code, message: e.message },
        Err(_) => ClientError::Decode {
            node: node.to_string(),
            status,
            message: format!("not an error body: {}", String::from_utf8_lossy(&body[..body.len().min(200)])),
        },
    }
}
