//! The HTTP edge, on axum: the routes (declared once with their OpenAPI operations), the
//! tower layers, admin and cluster authentication, and the one place where errors become HTTP
//! statuses. The public routes and their contract are in `docs/openapi.json` (served at
//! `GET /openapi.json`); every path comes from [`leaf_api::routes`].
//!
//! Layout:
//! - this file: [`App`] (what a handler needs), [`router`] (routes, fallback, per-area
//!   layers), [`service`] (the router inside the layers every request passes) and
//!   [`serve`] (the accept loop: connection cap, header timeout, HTTP/1.1 or HTTP/2 per
//!   connection, graceful shutdown) and `connection` (one connection's dispatch: gRPC calls
//!   to [`crate::grpc`], plain ID `GET`s to the fast path, the rest to the router).
//! - [`ids`]: segment and snowflake IDs, the decoders (the per-ID path).
//! - [`monitor`]: health, metrics, `/cache`, `/db`, `/openapi.json`.
//! - [`ui`]: the built-in dashboard's page and assets; [`dashboard`]: its data
//!   (`/admin/dashboard`, with every member's health asked over the internal RPC);
//!   [`recent`]: the ring of recent error answers it shows.
//! - [`admin`]: tags, the allocation journal, the clock fault.
//! - [`tokens`]: scoped tokens (create, list, show, rotate, revoke) and the audit trail.
//! - [`cluster`]: status, learners, promote, remove.
//! - [`internal`]: the bincode node-to-node RPC mount (work done by [`crate::raft::service`]).
//! - [`auth`]: who is calling `/admin` (admin token, admin certificate, scoped token with the
//!   right for the path, or loopback without a token) and the cluster secret, before routing;
//!   the caller's [`crate::access::Principal`] goes into the request for the handlers.
//! - [`extract`]: validating extractors that fail with [`ApiError`].
//! - [`error`]: [`ApiError`], [`status_of`], conversions from the layers' errors.
//! - [`openapi`]: the document's info, security scheme and per-endpoint error responses.
//! - [`proto`]: which HTTP version a connection speaks (HTTP/1.1, or HTTP/2 by h2c prior
//!   knowledge or ALPN `h2`).
//!
//! Every HTTP answer (fast path and router, not gRPC) is timed per route template and status
//! (`leaf_http_request_duration_seconds`), and an error answer goes into [`recent`].
//!
//! Layers, outermost first: the finishing layer (counts errors per code; turns the bodiless
//! answers of the router and of the layers — 404, 405 with `Allow`, 413, timeout — into JSON
//! `ErrorBody`s) and [`auth::AuthLayer`] (one per connection, which it knows), around the whole
//! router; then per area, on every route but the ID routes: request tracing (`TraceLayer`,
//! debug level, no headers), the request timeout (3 × the longer of `raft.propose_timeout_ms`
//! and `segment.wait_timeout_ms`, then 503 `unavailable`), and on the public ones the body
//! limit (`http.max_body_bytes`, 413 `payload_too_large`). The ID routes take no body, bound
//! their own waits and are counted in metrics; a plain `GET` of one of them is served by
//! [`ids::fast_path`] ahead of the router, with the same validation and handler code (see
//! [`ids`]), which keeps single-ID throughput at the bare hyper ceiling's (BENCHMARKS.md).
//! `http.max_connections` is enforced at accept: a connection beyond it gets a complete 503
//! `unavailable` with `Retry-After: 1` and is closed without reading the request. With
//! `[tls]`, an accepted connection is handshaken first ([`crate::tls::accept`], within
//! `http.header_read_timeout_ms`), and the identity of its client certificate goes into its
//! [`ConnInfo`].
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::header::{ALLOW, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::future::Either;
use hyper_util::rt::TokioIo;
use leaf_api::types::{Health, SnowflakeHealth, SnowflakeState, TagInfo};
use leaf_api::ErrorCode;
use leaf_raft_store::{StoredProfile, TagRecord};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use utoipa_axum::router::OpenApiRouter;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::forecast::sampler::Forecasts;
use crate::metrics::{Metrics, Route};
use crate::raft::RaftNode;
use crate::snowflake::Snowflake;
use crate::tags::Tags;

pub mod admin;
pub mod auth;
pub mod cluster;
pub mod dashboard;
pub mod error;
pub mod extract;
pub mod ids;
pub mod internal;
pub mod monitor;
pub mod openapi;
pub mod proto;
pub mod recent;
pub mod tokens;
pub mod ui;

pub use auth::ConnInfo;
pub use error::{status_of, ApiError};

/// Everything a request handler needs.
pub struct App {
    /// Scoped tokens and quotas ([`crate::access`]).
    pub access: crate::access::Access,
    pub config: Arc<Config>,
    pub raft: RaftNode,
    pub tags: Tags,
    pub snowflake: Snowflake,
    /// The node's clock, skewed by `POST /admin/fault/clock` when fault injection is on.
    pub clock: Arc<SystemClock>,
    pub metrics: Arc<Metrics>,
    /// Set once the configured bootstrap tags exist; the node is not ready before.
    pub bootstrapped: Arc<AtomicBool>,
    /// The listener's TLS (`[tls]`); `None`: plaintext.
    pub tls: Option<Arc<crate::tls::Tls>>,
    /// The exhaustion forecasts (`/cache`, `/health`, `/metrics`).
    pub forecasts: Arc<Forecasts>,
    /// The peers' clock offsets (`/metrics`).
    pub peer_clocks: Arc<crate::clock_watch::PeerClocks>,
    /// The latest error answers (the dashboard).
    pub recent_errors: recent::RecentErrors,
    /// When the node started (the dashboard's uptime).
    pub started: std::time::Instant,
}

impl App {
    pub fn health(&self) -> Health {
        let mut s = self.raft.status();
        if s.not_ready.is_none() && !self.bootstrapped.load(Ordering::Acquire) {
            s.not_ready = Some("creating bootstrap tags".to_string());
        }
        let mut snowflake = self.snowflake.health();
        snowflake.forecast = Some(self.forecasts.snowflake(self.clock.now_ms()));
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
}

/// Snowflake readiness: serving, or disabled by configuration (nothing to wait for).
pub(crate) fn snowflake_ready(h: &SnowflakeHealth) -> bool {
    matches!(h.state, SnowflakeState::Serving | SnowflakeState::Disabled)
}

fn tag_info(tag: String, r: TagRecord) -> TagInfo {
    TagInfo {
        tag,
        max_id: r.max_id,
        step: r.step,
        description: r.description,
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
        profile: r.profile.kind(),
        daily: match &r.profile {
            StoredProfile::Daily { format, .. } => Some(format.options()),
            _ => None,
        },
        day: match &r.profile {
            StoredProfile::Daily { day, .. } if *day != 0 => Some(*day),
            _ => None,
        },
        upper_bound: r.upper_bound,
    }
}

fn tag_not_found(tag: &str) -> ApiError {
    ApiError::new(ErrorCode::TagNotFound, format!("tag {tag:?} does not exist"))
}

/// The public routes with their OpenAPI operations (no layers, no state yet).
pub fn api() -> OpenApiRouter<Arc<App>> {
    use utoipa::OpenApi;
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(ids::routes())
        .merge(monitor::routes())
        .merge(admin::routes())
        .merge(tokens::routes())
        .merge(cluster::routes())
        .merge(dashboard::routes())
        .merge(ui::routes())
}

/// The routes and the fallback, with the per-area layers. The ID routes get none: they take no
/// body and bound their own waits (`segment.wait_timeout_ms`, the snowflake clock and window
/// waits), so the per-ID path arms no timer and wraps no body. Every other area gets the
/// request timeout, and the public ones the body limit.
pub fn router(app: Arc<App>) -> Router {
    let part = |r: OpenApiRouter<Arc<App>>| r.split_for_parts().0;
    let timeout = TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        Duration::from_millis(3 * app.config.raft.propose_timeout_ms.max(app.config.segment.wait_timeout_ms)),
    );
    let bodies = Router::new()
        .merge(part(monitor::routes()))
        .merge(part(admin::routes()))
        .merge(part(tokens::routes()))
        .merge(part(cluster::routes()))
        .merge(part(dashboard::routes()))
        .merge(part(ui::routes()))
        .route_layer(RequestBodyLimitLayer::new(app.config.http.max_body_bytes))
        // The limit above is the one that counts.
        .route_layer(axum::extract::DefaultBodyLimit::disable())
        .route_layer(timeout)
        .route_layer(trace());
    Router::new()
        .merge(part(ids::routes()))
        .merge(bodies)
        .merge(internal::routes().route_layer(timeout).route_layer(trace()))
        .fallback(fallback)
        .with_state(app)
}

/// Request tracing (spans and events at debug level, no headers; `RUST_LOG=tower_http=debug`).
fn trace() -> TraceLayer<tower_http::classify::SharedClassifier<tower_http::classify::ServerErrorsAsFailures>> {
    TraceLayer::new_for_http().on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG))
}

/// The whole service of the connection `conn`: `router` (from [`router`]) inside the layers
/// every request passes, applied once around the router (not per route), so the finishing
/// layer sees the `Allow` header the method router adds to its 405s, and auth runs before
/// routing.
pub fn service(
    app: Arc<App>,
    router: Router,
    conn: ConnInfo,
) -> impl tower::Service<Request, Response = Response, Error = std::convert::Infallible, Future: Send> + Clone + Send {
    tower::ServiceBuilder::new()
        .map_response({
            let app = app.clone();
            move |r: Response| finish(&app, r)
        })
        .layer(auth::AuthLayer { app, conn })
        .service(router)
}

/// No route matched: 404 `not_found`, or 400 for a path under an ID route whose parameter
/// is invalid (an empty tag, a tag with `/`).
async fn fallback(req: Request) -> ApiError {
    let path = req.uri().path();
    if req.method() == axum::http::Method::GET {
        if let Some(e) = ids::unmatched_id_path(path) {
            return e;
        }
    }
    ApiError::new(ErrorCode::NotFound, format!("no endpoint {path}"))
}

/// Counts every error by code, and makes the bodiless error answers of the router and the
/// tower layers (405 with `Allow`, 413, timeout) JSON `ErrorBody`s like every other error.
fn finish(app: &App, r: Response) -> Response {
    if let Some(code) = r.extensions().get::<ErrorCode>() {
        app.metrics.error(*code);
        return r;
    }
    let status = r.status();
    let json = r.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return r;
    }
    let code = error::framework_code(status);
    let allow = r.headers().get(ALLOW).cloned();
    let message =
        error::framework_message(code, allow.as_ref().and_then(|v| v.to_str().ok()), app.config.http.max_body_bytes);
    app.metrics.error(code);
    let mut out = ApiError::new(code, message).into_response();
    if let Some(allow) = allow {
        out.headers_mut().insert(ALLOW, allow);
    }
    out
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
    let protocols = proto::Protocols::new(Duration::from_millis(app.config.http.header_read_timeout_ms));
    let routes = router(app.clone());
    let grpc = app.config.grpc.enabled.then(|| crate::grpc::routes(app.clone(), shutdown.clone()));
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
                let info = ConnInfo { local: stream.local_addr().unwrap_or(local), peer, identity: None };
                let trimmer = trimmer.clone();
                let (app, routes, grpc, protocols, watcher) =
                    (app.clone(), routes.clone(), grpc.clone(), protocols.clone(), graceful.watcher());
                let mut stopping = shutdown.clone();
                tokio::spawn(async move {
                    let first_bytes = Duration::from_millis(app.config.http.header_read_timeout_ms);
                    match app.tls.clone() {
                        None => {
                            // The watcher holds up graceful shutdown: a connection that has not
                            // said which protocol it speaks is dropped at once, as hyper drops
                            // an HTTP/1 connection that has not started a request.
                            let sniffed = tokio::select! {
                                p = proto::sniff(&stream, first_bytes) => p,
                                _ = stopping.wait_for(|stop| *stop) => None,
                            };
                            if let Some(p) = sniffed {
                                let svc = connection(&app, &routes, &grpc, info);
                                let conn = protocols.builder(p).serve_connection(TokioIo::new(stream), svc);
                                if let Err(e) = watcher.watch(conn.into_owned()).await {
                                    tracing::debug!(error = %e, "connection ended with an error");
                                }
                            }
                        }
                        Some(tls) => match crate::tls::accept::accept(&tls, stream, first_bytes).await {
                            Ok(accepted) => {
                                let p = proto::of_alpn(accepted.stream.get_ref().1.alpn_protocol());
                                let info = ConnInfo { identity: accepted.identity.map(Arc::new), ..info };
                                let svc = connection(&app, &routes, &grpc, info);
                                let conn = protocols.builder(p).serve_connection(TokioIo::new(accepted.stream), svc);
                                if let Err(e) = watcher.watch(conn.into_owned()).await {
                                    tracing::debug!(error = %e, "connection ended with an error");
                                }
                            }
                            Err(e) => tracing::debug!(%peer, error = %e, "TLS connection refused"),
                        },
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

/// The service of one connection: gRPC calls (HTTP/2, `application/grpc*`, when enabled) to
/// the tonic routes, else the fast ID path, else the router inside its layers.
fn connection(
    app: &Arc<App>,
    routes: &Router,
    grpc: &Option<tonic::service::Routes>,
    info: ConnInfo,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = Response,
    Error = std::convert::Infallible,
    Future: Send,
> + Clone {
    use futures::FutureExt;
    let routes = service(app.clone(), routes.clone(), info.clone());
    let app = app.clone();
    let grpc = grpc.clone();
    hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        if let Some(grpc) = grpc.as_ref().filter(|_| crate::grpc::is_grpc(&req)) {
            // The admin service checks who is calling (the HTTP auth layer is not in the way).
            req.extensions_mut().insert(info.clone());
            let call = grpc.clone().oneshot(req).map(|r| r.map(|resp| resp.map(axum::body::Body::new)));
            return Either::Right(Either::Right(call));
        }
        let started = std::time::Instant::now();
        // The fast path times its own answer (it holds the app already).
        if let Some(fast) = ids::fast_path(&app, &req, started) {
            return Either::Left(fast);
        }
        let (route, timed) = (Route::of(req.uri().path()), app.clone());
        let done = move |r: Result<Response, std::convert::Infallible>| {
            if let Ok(r) = &r {
                timed.answered(route, started, r);
            }
            r
        };
        Either::Right(Either::Left(routes.clone().oneshot(req.map(axum::body::Body::new)).map(done)))
    })
}

impl App {
    /// Times an answer of `route` and keeps it if it is an error (see the module doc).
    pub(crate) fn answered(&self, route: Route, started: std::time::Instant, r: &Response) {
        self.metrics.http_request(route, r.status(), started.elapsed());
        if let Some(note) = r.extensions().get::<recent::ErrorNote>() {
            self.recent_errors.record(leaf_api::dashboard::RecentError {
                at_ms: self.clock.now_ms(),
                status: r.status().as_u16(),
                code: note.code,
                route: route.label().to_string(),
                message: note.message.to_string(),
            });
        }
    }
}

/// The answer of a connection beyond `http.max_connections`: a complete 503 response with
/// `Retry-After`, written without reading the request, then the connection is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
connection: close\r\ncontent-length: 103\r\n\r\n\
{\"code\":\"unavailable\",\"message\":\"too many open connections to this node; retry shortly\",\"leaf_code\":-3}";

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
    use leaf_api::ErrorBody;

    #[test]
    fn the_busy_answer_is_a_well_formed_503_with_a_json_error() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains("\r\nretry-after: 1"));
        let len: usize = head.split("content-length: ").nth(1).unwrap().parse().unwrap();
        assert_eq!(len, body.len());
        let e: ErrorBody = serde_json::from_str(body).unwrap();
        assert_eq!(e, ErrorBody::new(ErrorCode::Unavailable, "too many open connections to this node; retry shortly"));
    }
}
