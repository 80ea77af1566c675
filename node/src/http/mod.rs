//! The HTTP edge, on axum: the routes (declared once with their OpenAPI operations), the
//! tower layers, the extractors, and the one place where errors become HTTP statuses. Handlers
//! are thin: they extract and validate the request, call an operation of the service core
//! ([`crate::service::App`]) and shape its answer. The public routes and their contract are
//! in `docs/openapi.json` (served at `GET /openapi.json`); every path comes from
//! [`leaf_api::routes`]. The node's listener (`listener/`) hands this edge its requests.
//!
//! Layout:
//! - this file: [`api`] (routes and their OpenAPI operations), [`router`] (routes, fallback,
//!   per-area layers), [`service`] (the router inside the layers every request passes) and
//!   [`answered`] (per-route timing, recent errors).
//! - [`ids`]: segment and snowflake IDs, the decoders; [`fast`]: the fast path for plain ID
//!   `GET`s (the per-ID path).
//! - [`gapless`]: a gapless series' number for an idempotency key.
//! - [`monitor`]: health, metrics, `/cache`, `/db`, `/openapi.json`.
//! - [`ui`]: the built-in dashboard's page and assets; [`dashboard`]: its data.
//! - [`admin`]: tags, the allocation journal, the clock fault.
//! - [`tokens`]: scoped tokens (create, list, show, rotate, revoke) and the audit trail.
//! - [`backup`]: `GET /admin/backup`, the backup file streamed (its own, longer timeout).
//! - [`cluster`]: status, learners, promote, remove.
//! - [`internal`]: the bincode node-to-node RPC mount.
//! - [`auth`]: the tower layer that asks the core who is calling `/admin` and `/internal`
//!   before routing; the caller's [`crate::access::Principal`] goes into the request.
//! - [`extract`]: validating extractors that fail with [`ApiError`].
//! - [`error`]: [`ApiError`] as a response, [`status_of`], axum's rejections.
//! - [`openapi`]: the document's info, security scheme and per-endpoint error responses.
//!
//! Every HTTP answer (fast path and router) is timed per route template and status
//! (`leaf_http_request_duration_seconds`), and an error answer is kept for the dashboard.
//!
//! Layers, outermost first: the finishing layer (counts errors per code; turns the bodiless
//! answers of the router and of the layers — 404, 405 with `Allow`, 413, timeout — into JSON
//! `ErrorBody`s) and [`auth::AuthLayer`] (one per connection, which it knows), around the whole
//! router; then per area, on every route but the ID routes: request tracing (`TraceLayer`,
//! debug level, no headers), the request timeout (3 × the longer of `raft.propose_timeout_ms`
//! and `segment.wait_timeout_ms`, then 503 `unavailable`), and on the public ones the body
//! limit (`http.max_body_bytes`, 413 `payload_too_large`; `http.max_batch_body_bytes` for
//! `POST /admin/tags:batch`). The ID routes take no body, bound
//! their own waits and are counted in metrics; a plain `GET` of one of them is served by
//! [`fast::fast_path`] ahead of the router, with the same validation and handler code, which
//! keeps single-ID throughput at the bare hyper ceiling's (BENCHMARKS.md).
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::http::header::{ALLOW, CONNECTION, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use leaf_api::ErrorCode;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnFailure, TraceLayer};
use utoipa_axum::router::OpenApiRouter;

use crate::access::credentials::ConnInfo;
use crate::metrics::Route;
use crate::service::recent::ErrorNote;
use crate::service::{ApiError, App};

pub mod admin;
pub mod auth;
pub mod backup;
pub mod cluster;
pub mod dashboard;
pub mod error;
pub mod extract;
pub mod fast;
pub mod gapless;
pub mod ids;
pub mod internal;
pub mod monitor;
pub mod openapi;
pub mod regions;
pub mod templates;
pub mod tokens;
pub mod ui;

pub use error::status_of;
pub use fast::fast_path;

/// How long a backup may take to write before its answer starts.
const BACKUP_TIMEOUT: Duration = Duration::from_secs(600);

/// The public routes with their OpenAPI operations (no layers, no state yet).
pub fn api() -> OpenApiRouter<Arc<App>> {
    use utoipa::OpenApi;
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .merge(ids::routes())
        .merge(gapless::routes())
        .merge(monitor::routes())
        .merge(admin::routes())
        .merge(admin::batch_routes())
        .merge(tokens::routes())
        .merge(templates::routes())
        .merge(regions::routes())
        .merge(cluster::routes())
        .merge(dashboard::routes())
        .merge(ui::routes())
        .merge(backup::routes())
}

/// The routes and the fallback, with the per-area layers. The ID routes get none: they take no
/// body and bound their own waits (`segment.wait_timeout_ms`, the snowflake clock and window
/// waits), so the per-ID path arms no timer and wraps no body. Every other area gets the
/// request timeout, and the public ones the body limit.
pub fn router(app: Arc<App>) -> Router {
    let part = |r: OpenApiRouter<Arc<App>>| r.split_for_parts().0;
    let timeout = TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        Duration::from_millis(3 * app.config().raft.propose_timeout_ms.max(app.config().segment.wait_timeout_ms)),
    );
    let bodies = Router::new()
        .merge(part(gapless::routes()))
        .merge(part(monitor::routes()))
        .merge(part(admin::routes()))
        .merge(part(tokens::routes()))
        .merge(part(templates::routes()))
        .merge(part(regions::routes()))
        .merge(part(cluster::routes()))
        .merge(part(dashboard::routes()))
        .merge(part(ui::routes()))
        .route_layer(RequestBodyLimitLayer::new(app.config().http.max_body_bytes))
        // The limit above is the one that counts.
        .route_layer(axum::extract::DefaultBodyLimit::disable())
        .route_layer(timeout)
        .route_layer(trace());
    // Batches read their larger bodies through axum's own limit, which `JsonBody` reports.
    let batches = part(admin::batch_routes())
        .route_layer(axum::extract::DefaultBodyLimit::max(app.config().http.max_batch_body_bytes))
        .route_layer(timeout)
        .route_layer(trace());
    // A backup of a large state takes a while to write before its answer starts.
    let backups = part(backup::routes())
        .route_layer(TimeoutLayer::with_status_code(StatusCode::SERVICE_UNAVAILABLE, BACKUP_TIMEOUT))
        .route_layer(trace());
    Router::new()
        .merge(part(ids::routes()))
        .merge(bodies)
        .merge(batches)
        .merge(backups)
        .merge(internal::routes().route_layer(timeout).route_layer(trace()))
        .fallback(fallback)
        .layer(axum::Extension(openapi::served_json(app.config())))
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
        if let Some(e) = fast::unmatched_id_path(path) {
            return e;
        }
    }
    ApiError::new(ErrorCode::NotFound, format!("no endpoint {path}"))
}

/// Counts every error by code, and makes the bodiless error answers of the router and the
/// tower layers (405 with `Allow`, 413, timeout) JSON `ErrorBody`s like every other error.
///
/// A 413 also says `Connection: close`: the node answers before reading the rest of the body,
/// and hyper then closes the connection, so a client that kept it for its next request would
/// see that request fail on a connection already closed (RFC 9110, 15.5.14).
pub(crate) fn finish(app: &App, r: Response) -> Response {
    let mut out = as_error_body(app, r);
    if out.status() == StatusCode::PAYLOAD_TOO_LARGE {
        out.headers_mut().insert(CONNECTION, axum::http::HeaderValue::from_static("close"));
    }
    out
}

/// The answer [`finish`] gives, before the 413's `Connection: close`.
fn as_error_body(app: &App, r: Response) -> Response {
    if let Some(code) = r.extensions().get::<ErrorCode>() {
        app.metrics().error(*code);
        return r;
    }
    let status = r.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return r;
    }
    if r.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json")) {
        return r;
    }
    let code = error::framework_code(status);
    let allow = r.headers().get(ALLOW).cloned();
    let message =
        error::framework_message(code, allow.as_ref().and_then(|v| v.to_str().ok()), app.config().http.max_body_bytes);
    app.metrics().error(code);
    let mut out = ApiError::new(code, message).into_response();
    if let Some(allow) = allow {
        out.headers_mut().insert(ALLOW, allow);
    }
    out
}

/// Times an answer of `route` and keeps it if it is an error (see the module doc).
pub fn answered(app: &App, route: Route, started: std::time::Instant, r: &Response) {
    app.metrics().http_request(route, r.status(), started.elapsed());
    if let Some(note) = r.extensions().get::<ErrorNote>() {
        app.record_error(leaf_api::dashboard::RecentError {
            at_ms: app.now_ms(),
            status: r.status().as_u16(),
            code: note.code,
            route: route.label().to_string(),
            message: note.message.to_string(),
        });
    }
}
