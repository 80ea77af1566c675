//! The HTTP edge: routing, request parsing, admin authentication, and the one place where
//! errors become HTTP statuses.
//!
//! | path | method | what |
//! |---|---|---|
//! | `/api/segment/get/{tag}` | GET | one ID as decimal text (Leaf-compatible); `?count=N` (1–100,000) returns N IDs separated by `\n`, no trailing newline |
//! | `/api/snowflake/get/{key}` | GET | one snowflake ID as decimal text (Leaf-compatible; the key is validated like a tag and counted in metrics); `?count=N` (1–100,000) returns N IDs separated by `\n` |
//! | `/api/snowflake/decode/{id}` | GET | timestamp (ms and ISO-8601), worker ID and sequence of an ID |
//! | `/decodeSnowflakeId?snowflakeId=N` | GET | the same, at Leaf's monitor path |
//! | `/health` | GET | readiness JSON; 200 when ready (both modes; `?mode=segment` or `?mode=snowflake` for one), 503 not |
//! | `/metrics` | GET | Prometheus text |
//! | `/cache` | GET | per-tag buffers on this node (Leaf's `/cache`) |
//! | `/db` | GET | tags as stored (Leaf's `/db`) |
//! | `/admin/tags` | GET, POST | list / create tags |
//! | `/admin/tags/{tag}` | GET, PATCH | show / update a tag |
//! | `/admin/allocations` | GET | the journal of committed segments and the node each went to (`?tag=`, `?node=`) |
//! | `/cluster/status` | GET | membership, leader, term, log indexes, replication, health |
//! | `/admin/cluster/learners` | POST | add a learner `{"node_id": 4, "addr": "host:port"}` |
//! | `/admin/cluster/nodes/{id}/promote` | POST | make a learner a voter |
//! | `/admin/cluster/nodes/{id}` | DELETE | remove a member |
//! | `/admin/fault/clock` | POST | skew this node's clock `{"offset_ms": N}` (only with fault injection enabled) |
//! | `/internal/...` | POST | cluster-internal RPC (bincode), authenticated by the cluster secret |
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use leaf_api::tag::{parse_count, validate_max_id, validate_step, validate_tag};
use leaf_api::types::{
    AddLearnerRequest, ClockFault, CreateTagRequest, Health, SnowflakeDecoded, TagInfo, UpdateTagRequest,
};
use leaf_api::{ErrorBody, ErrorCode};
use leaf_raft_store::{ApplyError, TagRecord};
use serde::{de::DeserializeOwned, Serialize};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::clock::SystemClock;
use crate::config::{is_loopback, Config};
use crate::metrics::Metrics;
use crate::raft::network::{MAX_RPC_BODY, SECRET_HEADER};
use crate::raft::service::{self, ServiceError};
use crate::raft::{MemberErrorKind, ProposeError, RaftNode};
use crate::snowflake::{Snowflake, SnowflakeError};
use crate::tags::{AllocError, Tags, TakeError};

type Resp = Response<Full<Bytes>>;

/// A failed request, before it becomes a response.
#[derive(Debug)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    allow: Option<&'static str>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError { code, message: message.into(), allow: None }
    }

    fn method(allow: &'static str) -> Self {
        ApiError { allow: Some(allow), ..Self::new(ErrorCode::MethodNotAllowed, format!("allowed: {allow}")) }
    }
}

/// The HTTP status of each error code.
pub fn status_of(code: ErrorCode) -> StatusCode {
    use ErrorCode::*;
    match code {
        InvalidTag | InvalidCount | InvalidRequest => StatusCode::BAD_REQUEST,
        PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        Unauthorized => StatusCode::UNAUTHORIZED,
        Forbidden => StatusCode::FORBIDDEN,
        TagNotFound | NotFound => StatusCode::NOT_FOUND,
        MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        TagExists | TagExhausted | MemberExists | NodeIdRetired => StatusCode::CONFLICT,
        MemberNotFound => StatusCode::NOT_FOUND,
        SegmentsNotReady | NotReady | Unavailable | ShuttingDown | SnowflakeUnavailable | ClockMovedBackwards
        | WorkerIdsExhausted => StatusCode::SERVICE_UNAVAILABLE,
    }
}

impl From<ProposeError> for ApiError {
    fn from(e: ProposeError) -> Self {
        let code = match &e {
            ProposeError::Rejected(ApplyError::TagExists(_)) => ErrorCode::TagExists,
            ProposeError::Rejected(ApplyError::TagNotFound(_)) => ErrorCode::TagNotFound,
            ProposeError::Rejected(ApplyError::TagExhausted { .. }) => ErrorCode::TagExhausted,
            ProposeError::Rejected(ApplyError::Invalid(_)) => ErrorCode::InvalidRequest,
            // Worker registration is the snowflake actor's business; no request proposes it.
            ProposeError::Rejected(ApplyError::NotAMember(_) | ApplyError::WorkerLost { .. }) => {
                ErrorCode::SnowflakeUnavailable
            }
            ProposeError::Rejected(ApplyError::WorkersExhausted) => ErrorCode::WorkerIdsExhausted,
            ProposeError::Member { kind, .. } => match kind {
                MemberErrorKind::Exists => ErrorCode::MemberExists,
                MemberErrorKind::Retired => ErrorCode::NodeIdRetired,
                MemberErrorKind::NotFound => ErrorCode::MemberNotFound,
                MemberErrorKind::Invalid => ErrorCode::InvalidRequest,
            },
            // Fatal: Raft stopped (a storage error such as a full disk); the message says why.
            ProposeError::NotLeader { .. }
            | ProposeError::Timeout(_)
            | ProposeError::Unavailable(_)
            | ProposeError::Fatal(_) => ErrorCode::Unavailable,
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<TakeError> for ApiError {
    fn from(e: TakeError) -> Self {
        let code = match &e {
            TakeError::NotReady { .. } => ErrorCode::SegmentsNotReady,
            TakeError::Alloc(AllocError::TagNotFound(_)) => ErrorCode::TagNotFound,
            TakeError::Alloc(AllocError::TagExhausted(_)) => ErrorCode::TagExhausted,
            TakeError::Alloc(AllocError::Unavailable(_)) => ErrorCode::Unavailable,
            TakeError::Alloc(AllocError::ShuttingDown) => ErrorCode::ShuttingDown,
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<SnowflakeError> for ApiError {
    fn from(e: SnowflakeError) -> Self {
        let code = match &e {
            SnowflakeError::NotServing(_) | SnowflakeError::OutOfRange => ErrorCode::SnowflakeUnavailable,
            SnowflakeError::ClockBackwards { .. } | SnowflakeError::ClockStalled(_) => ErrorCode::ClockMovedBackwards,
            SnowflakeError::Exhausted(_) => ErrorCode::WorkerIdsExhausted,
        };
        ApiError::new(code, e.to_string())
    }
}

/// Everything a request handler needs.
pub struct App {
    pub config: Arc<Config>,
    pub raft: RaftNode,
    pub tags: Tags,
    pub snowflake: Snowflake,
    /// The node's clock, skewed by `POST /admin/fault/clock` when fault injection is on.
    pub clock: Arc<SystemClock>,
    pub metrics: Arc<Metrics>,
    /// Set once the configured bootstrap tags exist; the node is not ready before.
    pub bootstrapped: Arc<std::sync::atomic::AtomicBool>,
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn json<T: Serialize>(status: StatusCode, value: &T) -> Resp {
    let body = serde_json::to_vec(value).unwrap_or_else(|e| format!("{{\"serialize_error\":\"{e}\"}}").into_bytes());
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

fn tag_info(tag: String, r: TagRecord) -> TagInfo {
    TagInfo {
        tag,
        max_id: r.max_id,
        step: r.step,
        description: r.description,
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
    }
}

fn query_param<'a>(req: &'a Request<Incoming>, name: &str) -> Option<std::borrow::Cow<'a, str>> {
    let q = req.uri().query()?;
    form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == name).map(|(_, v)| v)
}

/// The optional `count` query parameter of the ID endpoints (1–100,000).
fn count_param(req: &Request<Incoming>) -> Result<Option<u32>, ApiError> {
    match query_param(req, "count") {
        Some(raw) => Ok(Some(parse_count(&raw).map_err(|e| ApiError::new(ErrorCode::InvalidCount, e.to_string()))?)),
        None => Ok(None),
    }
}

/// Collects runs of consecutive IDs as decimal lines separated by `\n` (no trailing newline).
struct IdLines {
    out: Vec<u8>,
    fmt: itoa::Buffer,
}

impl IdLines {
    fn with_capacity(n: u32) -> Self {
        IdLines { out: Vec::with_capacity(n as usize * 20), fmt: itoa::Buffer::new() }
    }

    fn push_run(&mut self, first: i64, count: u64) {
        for id in first..first + count as i64 {
            if !self.out.is_empty() {
                self.out.push(b'\n');
            }
            self.out.extend_from_slice(self.fmt.format(id).as_bytes());
        }
    }
}

/// Where a request came in: used to keep token-less admin on loopback.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    pub local: SocketAddr,
    pub peer: SocketAddr,
}

impl App {
    /// Answers one request; never fails and never panics on bad input.
    pub async fn handle(&self, req: Request<Incoming>, conn: ConnInfo) -> Resp {
        match self.route(req, conn).await {
            Ok(r) => r,
            Err(e) => {
                self.metrics.error(e.code);
                let mut r = json(status_of(e.code), &ErrorBody::new(e.code, e.message));
                if let Some(allow) = e.allow {
                    r.headers_mut().insert(ALLOW, HeaderValue::from_static(allow));
                }
                r
            }
        }
    }

    async fn route(&self, req: Request<Incoming>, conn: ConnInfo) -> Result<Resp, ApiError> {
        // Uri clones share their bytes: no allocation on the hot path.
        let uri = req.uri().clone();
        let path = uri.path();
        if let Some(tag) = path.strip_prefix("/api/segment/get/") {
            if req.method() != Method::GET {
                return Err(ApiError::method("GET"));
            }
            return self.segment_get(tag, count_param(&req)?).await;
        }
        if let Some(key) = path.strip_prefix("/api/snowflake/get/") {
            if req.method() != Method::GET {
                return Err(ApiError::method("GET"));
            }
            return self.snowflake_get(key, count_param(&req)?).await;
        }
        if let Some(id) = path.strip_prefix("/api/snowflake/decode/") {
            if req.method() != Method::GET {
                return Err(ApiError::method("GET"));
            }
            return self.snowflake_decode(id);
        }
        if path == "/decodeSnowflakeId" {
            if req.method() != Method::GET {
                return Err(ApiError::method("GET"));
            }
            let id = query_param(&req, "snowflakeId")
                .ok_or_else(|| ApiError::new(ErrorCode::InvalidRequest, "missing query parameter snowflakeId"))?;
            return self.snowflake_decode(&id);
        }
        if path == "/admin" || path.starts_with("/admin/") {
            self.authorize(&req, conn)?;
            return self.admin(req, path).await;
        }
        if service::is_internal(path) {
            return self.internal(req, path).await;
        }
        let get_only = |req: &Request<Incoming>| {
            if req.method() == Method::GET {
                Ok(())
            } else {
                Err(ApiError::method("GET"))
            }
        };
        match path {
            "/health" => {
                get_only(&req)?;
                let h = self.health();
                let ready = match query_param(&req, "mode").as_deref() {
                    None | Some("all") => h.ready,
                    Some("segment") => h.segment_ready,
                    Some("snowflake") => snowflake_ready(&h.snowflake),
                    Some(other) => {
                        return Err(ApiError::new(
                            ErrorCode::InvalidRequest,
                            format!("mode must be segment, snowflake or all, not {other:?}"),
                        ))
                    }
                };
                let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
                Ok(json(status, &h))
            }
            "/metrics" => {
                get_only(&req)?;
                let body = self.metrics.render(&self.raft.status(), self.raft.state().tag_count());
                let mut r = text(StatusCode::OK, body);
                r.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
                Ok(r)
            }
            "/cache" => {
                get_only(&req)?;
                let entries: Vec<_> = self.tags.loaded().iter().map(|h| h.inspect()).collect();
                Ok(json(StatusCode::OK, &entries))
            }
            "/db" => {
                get_only(&req)?;
                Ok(json(StatusCode::OK, &self.tag_list()))
            }
            "/cluster/status" => {
                get_only(&req)?;
                Ok(json(StatusCode::OK, &self.raft.cluster_status(self.health())))
            }
            _ => Err(ApiError::new(ErrorCode::NotFound, format!("no endpoint {path}"))),
        }
    }

    pub fn health(&self) -> Health {
        let mut s = self.raft.status();
        if s.not_ready.is_none() && !self.bootstrapped.load(std::sync::atomic::Ordering::Acquire) {
            s.not_ready = Some("creating bootstrap tags".to_string());
        }
        let snowflake = self.snowflake.health();
        let segment_ready = s.not_ready.is_none();
        let reason = s.not_ready.or_else(|| {
            (!snowflake_ready(&snowflake)).then(|| {
                format!("snowflake {}: {}", snowflake.state, snowflake.reason.as_deref().unwrap_or("not serving yet"))
            })
        });
        Health {
            ready: segment_ready && snowflake_ready(&snowflake),
            segment_ready,
            node_id: s.node_id,
            leader_id: s.leader_id,
            term: s.term,
            last_applied_index: s.last_applied_index,
            quorum_ack_age_ms: s.quorum_ack_age_ms,
            reason,
            snowflake,
        }
    }

    fn tag_list(&self) -> Vec<TagInfo> {
        self.raft.state().tags().into_iter().map(|(t, r)| tag_info(t, r)).collect()
    }

    async fn segment_get(&self, tag: &str, count: Option<u32>) -> Result<Resp, ApiError> {
        validate_tag(tag).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
        let handle = match self.tags.get(tag) {
            Some(h) => h,
            None => {
                self.confirm_tags(tag).await?;
                self.tags.get(tag).ok_or_else(|| tag_not_found(tag))?
            }
        };
        match count {
            None => {
                let mut id = 0;
                handle.take(1, |first, _| id = first).await?;
                Ok(text(StatusCode::OK, Bytes::copy_from_slice(itoa::Buffer::new().format(id).as_bytes())))
            }
            Some(n) => {
                let mut lines = IdLines::with_capacity(n);
                handle.take(n as u64, |first, c| lines.push_run(first, c)).await?;
                Ok(text(StatusCode::OK, lines.out))
            }
        }
    }

    async fn snowflake_get(&self, key: &str, count: Option<u32>) -> Result<Resp, ApiError> {
        validate_tag(key).map_err(|e| ApiError::new(ErrorCode::InvalidTag, format!("snowflake key: {e}")))?;
        let n = count.unwrap_or(1);
        let mut lines = IdLines::with_capacity(n);
        self.snowflake.take(n as u64, |first, c| lines.push_run(first, c)).await?;
        self.metrics.snowflake_served(key, n as u64);
        Ok(text(StatusCode::OK, lines.out))
    }

    fn snowflake_decode(&self, raw: &str) -> Result<Resp, ApiError> {
        let bad = || ApiError::new(ErrorCode::InvalidRequest, format!("{raw:?} is not a snowflake ID (0..2^63)"));
        let id: i64 = raw.parse().map_err(|_| bad())?;
        let parts = self.snowflake.layout().decode(id).ok_or_else(bad)?;
        let timestamp = chrono::DateTime::from_timestamp_millis(parts.timestamp_ms)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            .unwrap_or_default();
        let body = SnowflakeDecoded {
            id,
            timestamp_ms: parts.timestamp_ms,
            timestamp,
            worker_id: parts.worker_id,
            sequence: parts.sequence,
        };
        Ok(json(StatusCode::OK, &body))
    }

    /// A tag unknown here may have just been created through another node: wait until this
    /// node has applied everything committed so far (a read index, no log write), so a tag
    /// created anywhere is usable everywhere at once.
    async fn confirm_tags(&self, tag: &str) -> Result<(), ApiError> {
        self.raft.read_barrier().await.map_err(|e| {
            tracing::debug!(tag, error = %e, "read barrier failed");
            ApiError::new(
                ErrorCode::NotReady,
                format!("cannot confirm whether tag {tag:?} exists: {}", e.public_message()),
            )
        })
    }

    /// `/internal/*`: peers only. The secret is checked before the body is even read.
    async fn internal(&self, req: Request<Incoming>, path: &str) -> Result<Resp, ApiError> {
        let given = req.headers().get(SECRET_HEADER).map(|v| v.as_bytes());
        check_cluster_secret(self.config.cluster_secret(), given)?;
        if req.method() != Method::POST {
            return Err(ApiError::method("POST"));
        }
        let body = read_body(req, MAX_RPC_BODY).await?;
        match service::handle(&self.raft, path, &body).await {
            Ok(bytes) => {
                let mut r = Response::new(Full::new(Bytes::from(bytes)));
                r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
                Ok(r)
            }
            Err(e @ ServiceError::NotFound(_)) => Err(ApiError::new(ErrorCode::NotFound, e.to_string())),
            Err(e @ ServiceError::BadRequest(_)) => Err(ApiError::new(ErrorCode::InvalidRequest, e.to_string())),
            Err(e @ ServiceError::Encode(_)) => Err(ApiError::new(ErrorCode::Unavailable, e.to_string())),
        }
    }

    fn authorize(&self, req: &Request<Incoming>, conn: ConnInfo) -> Result<(), ApiError> {
        let header = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        check_admin(self.config.admin_token(), header, conn)
    }

    async fn admin(&self, req: Request<Incoming>, path: &str) -> Result<Resp, ApiError> {
        let method = req.method().clone();
        if path == "/admin/tags" {
            return match method {
                Method::GET => Ok(json(StatusCode::OK, &self.tag_list())),
                Method::POST => {
                    let body: CreateTagRequest = self.read_json(req).await?;
                    self.create_tag(body).await
                }
                _ => Err(ApiError::method("GET, POST")),
            };
        }
        if path == "/admin/allocations" {
            if method != Method::GET {
                return Err(ApiError::method("GET"));
            }
            let tag = query_param(&req, "tag").map(|t| t.into_owned());
            if let Some(t) = &tag {
                validate_tag(t).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
            }
            let node = match query_param(&req, "node") {
                Some(raw) => Some(raw.parse::<u64>().map_err(|_| {
                    ApiError::new(ErrorCode::InvalidRequest, format!("node must be a node ID, not {raw:?}"))
                })?),
                None => None,
            };
            let journal = self
                .raft
                .allocations(tag.as_deref(), node)
                .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("allocation journal unreadable: {e}")))?;
            return Ok(json(StatusCode::OK, &journal));
        }
        if path == "/admin/fault/clock" {
            if !self.config.fault.enabled {
                return Err(ApiError::new(
                    ErrorCode::NotFound,
                    "fault injection is disabled (start the node with --enable-fault-injection)",
                ));
            }
            if method != Method::POST {
                return Err(ApiError::method("POST"));
            }
            let body: ClockFault = self.read_json(req).await?;
            if body.offset_ms.unsigned_abs() > 365 * 24 * 3_600_000 {
                return Err(ApiError::new(ErrorCode::InvalidRequest, "offset_ms must be within a year"));
            }
            let before = self.clock.offset_ms();
            self.clock.set_offset_ms(body.offset_ms);
            tracing::warn!(before, offset_ms = body.offset_ms, "FAULT INJECTED: clock offset changed");
            return Ok(json(StatusCode::OK, &body));
        }
        if path == "/admin/cluster/learners" {
            if method != Method::POST {
                return Err(ApiError::method("POST"));
            }
            let body: AddLearnerRequest = self.read_json(req).await?;
            let change = self.raft.add_learner(body.node_id, body.addr).await?;
            return Ok(json(StatusCode::OK, &change));
        }
        if let Some(rest) = path.strip_prefix("/admin/cluster/nodes/") {
            let (id, action) = rest.split_once('/').unwrap_or((rest, ""));
            let id: u64 = id
                .parse()
                .ok()
                .filter(|id| *id > 0)
                .ok_or_else(|| ApiError::new(ErrorCode::InvalidRequest, format!("{id:?} is not a node ID")))?;
            let change = match (action, &method) {
                ("promote", &Method::POST) => self.raft.promote(id).await?,
                ("promote", _) => return Err(ApiError::method("POST")),
                ("", &Method::DELETE) => self.raft.remove(id).await?,
                ("", _) => return Err(ApiError::method("DELETE")),
                _ => return Err(ApiError::new(ErrorCode::NotFound, format!("no endpoint {path}"))),
            };
            return Ok(json(StatusCode::OK, &change));
        }
        if let Some(tag) = path.strip_prefix("/admin/tags/") {
            validate_tag(tag).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
            return match method {
                Method::GET => {
                    if self.raft.state().tag(tag).is_none() {
                        self.confirm_tags(tag).await?;
                    }
                    match self.raft.state().tag(tag) {
                        Some(r) => Ok(json(StatusCode::OK, &tag_info(tag.to_string(), r))),
                        None => Err(tag_not_found(tag)),
                    }
                }
                Method::PATCH => {
                    let body: UpdateTagRequest = self.read_json(req).await?;
                    self.update_tag(tag, body).await
                }
                _ => Err(ApiError::method("GET, PATCH")),
            };
        }
        Err(ApiError::new(ErrorCode::NotFound, format!("no endpoint {path}")))
    }

    async fn create_tag(&self, body: CreateTagRequest) -> Result<Resp, ApiError> {
        let bad = |e: leaf_api::tag::ValidationError| ApiError::new(ErrorCode::InvalidRequest, e.to_string());
        validate_tag(&body.tag).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
        validate_step(body.step).map_err(bad)?;
        let max_id = body.max_id.unwrap_or(1);
        validate_max_id(max_id).map_err(bad)?;
        let description = body.description.unwrap_or_default();
        check_description(&description)?;
        let record = self.raft.create_tag(body.tag.clone(), body.step, max_id, description).await?;
        Ok(json(StatusCode::CREATED, &tag_info(body.tag, record)))
    }

    async fn update_tag(&self, tag: &str, body: UpdateTagRequest) -> Result<Resp, ApiError> {
        if body.step.is_none() && body.description.is_none() {
            return Err(ApiError::new(ErrorCode::InvalidRequest, "nothing to update: give step and/or description"));
        }
        if let Some(step) = body.step {
            validate_step(step).map_err(|e| ApiError::new(ErrorCode::InvalidRequest, e.to_string()))?;
        }
        if let Some(d) = &body.description {
            check_description(d)?;
        }
        let record = self.raft.update_tag(tag.to_string(), body.step, body.description).await?;
        Ok(json(StatusCode::OK, &tag_info(tag.to_string(), record)))
    }

    async fn read_json<T: DeserializeOwned>(&self, req: Request<Incoming>) -> Result<T, ApiError> {
        let body = read_body(req, self.config.http.max_body_bytes).await?;
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::new(ErrorCode::InvalidRequest, format!("invalid JSON body: {e}")))
    }
}

/// Snowflake readiness: serving, or disabled by configuration (nothing to wait for).
fn snowflake_ready(h: &leaf_api::types::SnowflakeHealth) -> bool {
    matches!(h.state, leaf_api::types::SnowflakeState::Serving | leaf_api::types::SnowflakeState::Disabled)
}

fn tag_not_found(tag: &str) -> ApiError {
    ApiError::new(ErrorCode::TagNotFound, format!("tag {tag:?} does not exist"))
}

/// Reads a whole body of at most `max` bytes (413 beyond, checked up front when the length is
/// declared).
async fn read_body(req: Request<Incoming>, max: usize) -> Result<Bytes, ApiError> {
    let too_large = || ApiError::new(ErrorCode::PayloadTooLarge, format!("request body exceeds {max} bytes"));
    if let Some(len) = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok()) {
        if len > max as u64 {
            return Err(too_large());
        }
    }
    match Limited::new(req.into_body(), max).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(e) => Err(ApiError::new(ErrorCode::InvalidRequest, format!("reading body: {e}"))),
    }
}

/// Internal endpoints need the configured cluster secret, compared in constant time; a node
/// without one refuses them all.
pub fn check_cluster_secret(secret: Option<&str>, given: Option<&[u8]>) -> Result<(), ApiError> {
    let ok = match secret {
        Some(secret) => bool::from(given.unwrap_or_default().ct_eq(secret.as_bytes())),
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Unauthorized,
            format!("internal endpoints need the cluster secret in {SECRET_HEADER}"),
        ))
    }
}

/// Admin needs the bearer token when one is configured, and a loopback connection when not.
/// The token is compared in constant time.
pub fn check_admin(token: Option<&str>, authorization: Option<&str>, conn: ConnInfo) -> Result<(), ApiError> {
    match token {
        Some(token) => {
            let given = authorization.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
            if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
                Ok(())
            } else {
                Err(ApiError::new(
                    ErrorCode::Unauthorized,
                    "admin endpoints need 'Authorization: Bearer <admin_token>'",
                ))
            }
        }
        None if is_loopback(conn.local.ip()) && is_loopback(conn.peer.ip()) => Ok(()),
        None => Err(ApiError::new(
            ErrorCode::Forbidden,
            "no admin_token is configured, so admin endpoints answer only on loopback connections",
        )),
    }
}

/// Descriptions are free text for people, bounded so the replicated state stays small.
fn check_description(d: &str) -> Result<(), ApiError> {
    if d.len() > 1024 {
        return Err(ApiError::new(ErrorCode::InvalidRequest, "description is longer than 1024 bytes"));
    }
    Ok(())
}

/// Serves `listener` until `shutdown` turns true, then lets in-flight requests finish for up to
/// `http.shutdown_grace_ms`.
pub async fn serve(listener: TcpListener, app: Arc<App>, mut shutdown: watch::Receiver<bool>) {
    let local = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "listener has no local address");
            return;
        }
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(app.config.http.header_read_timeout_ms))
        .keep_alive(true);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(app.config.http.max_connections));
    let trimmer = Arc::new(crate::memory::Trimmer::default());
    let trimming = tokio::spawn(trimmer.clone().run(Duration::from_secs(2)));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    app.metrics.connection_refused();
                    tokio::spawn(refuse_connection(stream));
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let conn_local = stream.local_addr().unwrap_or(local);
                let info = ConnInfo { local: conn_local, peer };
                let app = app.clone();
                let trimmer = trimmer.clone();
                let svc = hyper::service::service_fn(move |req| {
                    let app = app.clone();
                    async move { Ok::<_, Infallible>(app.handle(req, info).await) }
                });
                let conn = builder.serve_connection(TokioIo::new(stream), svc);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    drop(slot);
                    trimmer.connection_closed();
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    trimming.abort();
    let grace = Duration::from_millis(app.config.http.shutdown_grace_ms);
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!(?grace, "in-flight requests did not finish within the shutdown grace period");
    }
}

/// The answer of a connection beyond `http.max_connections`: a complete 503 response with
/// `Retry-After`, written without reading the request, then the connection is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
connection: close\r\ncontent-length: 88\r\n\r\n\
{\"code\":\"unavailable\",\"message\":\"too many open connections to this node; retry shortly\"}";

/// Answers a connection over the cap with [`BUSY`] (bounded by a second) and closes it.
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(BUSY).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_busy_answer_is_a_well_formed_503_with_a_json_error() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains("\r\nretry-after: 1"));
        let len: usize = head.split("content-length: ").nth(1).unwrap().parse().unwrap();
        assert_eq!(len, body.len());
        let e: ErrorBody = serde_json::from_str(body).unwrap();
        assert_eq!(e.code, ErrorCode::Unavailable);
    }

    fn conn(local: &str, peer: &str) -> ConnInfo {
        ConnInfo { local: local.parse().unwrap(), peer: peer.parse().unwrap() }
    }

    #[test]
    fn admin_without_token_only_on_loopback() {
        let lo = conn("127.0.0.1:8080", "127.0.0.1:5000");
        assert!(check_admin(None, None, lo).is_ok());
        let public = conn("10.1.2.3:8080", "10.1.2.4:5000");
        assert_eq!(check_admin(None, None, public).unwrap_err().code, ErrorCode::Forbidden);
        // A token-less node bound to 0.0.0.0 still refuses remote peers.
        let mixed = conn("10.1.2.3:8080", "127.0.0.1:5000");
        assert_eq!(check_admin(None, Some("Bearer x"), mixed).unwrap_err().code, ErrorCode::Forbidden);
    }

    #[test]
    fn admin_with_token_needs_the_exact_bearer() {
        let tok = Some("0123456789abcdef");
        let public = conn("10.1.2.3:8080", "10.1.2.4:5000");
        assert!(check_admin(tok, Some("Bearer 0123456789abcdef"), public).is_ok());
        for bad in [
            None,
            Some(""),
            Some("Bearer "),
            Some("Bearer 0123456789abcde"),
            Some("Bearer 0123456789abcdeff"),
            Some("0123456789abcdef"),
            Some("Basic 0123456789abcdef"),
        ] {
            assert_eq!(check_admin(tok, bad, public).unwrap_err().code, ErrorCode::Unauthorized, "{bad:?}");
        }
        // The token is required on loopback too.
        let lo = conn("127.0.0.1:8080", "127.0.0.1:5000");
        assert_eq!(check_admin(tok, None, lo).unwrap_err().code, ErrorCode::Unauthorized);
    }

    #[test]
    fn every_code_has_a_4xx_or_503_status() {
        for code in ErrorCode::ALL {
            let s = status_of(code);
            assert!(s.is_client_error() || s == StatusCode::SERVICE_UNAVAILABLE, "{code}: {s}");
        }
    }
}
