//! The gRPC API (`leaf.v1.IdService`, `grpc.health.v1.Health`; protos in `api/proto/`,
//! generated code in `leaf_api::grpc`), served on the node's one listener.
//!
//! Layout:
//! - this file: [`routes`], the tonic services the listener hands gRPC requests to, and
//!   [`is_grpc`], the test it uses.
//! - [`ids`]: `IdService` (segment and snowflake IDs as ranges, decode) on the same functions
//!   as the HTTP ID routes' `?format=ranges`.
//! - [`admin`]: `AdminService` (create one tag or a batch, show, archive, restore), admin
//!   credentials required.
//! - [`health`]: the standard health service from live state; `Watch` streams changes.
//! - [`error`]: the only place an `ApiError` becomes a `tonic::Status` (`leaf-code` metadata).
//!
//! **Listener.** The node's listener (`listener/`) speaks HTTP/1.1 and HTTP/2 on the same port (h2c by
//! prior knowledge without TLS, ALPN `h2` with TLS). A request on HTTP/2 whose `content-type`
//! starts with `application/grpc` goes to [`routes`] (when `[grpc] enabled`, the default);
//! every other request, HTTP/1.1 ones always, takes the HTTP path (fast ID path, router). With
//! `[grpc] enabled = false` gRPC requests take the HTTP path and get its 404.
//!
//! **Auth.** The ID RPCs and health are public, like the HTTP ID routes and `/health`; with
//! `[tls] require_client_cert` a client certificate is required at the handshake, for gRPC as
//! for HTTP. `AdminService` ([`admin`]) checks the admin credentials itself, with the HTTP
//! auth layer's check. Cluster and internal endpoints are not exposed over gRPC. Calls are counted per method and status code
//! (`leaf_grpc_calls`), errors per code (`leaf_errors`) like HTTP's.
use std::sync::Arc;

use axum::http::header::CONTENT_TYPE;
use leaf_api::grpc::health::health_server::HealthServer;
use leaf_api::grpc::v1::admin_service_server::AdminServiceServer;
use leaf_api::grpc::v1::id_service_server::IdServiceServer;
use tokio::sync::watch;
use tonic::service::Routes;

use crate::service::App;

pub mod admin;
pub mod error;
pub mod health;
pub mod ids;

/// Largest request message the ID and health services decode (the admin service takes up to
/// `http.max_batch_body_bytes`, for batches): a tag or key (at most 128 bytes) and a count,
/// or a service name, fit many times over; tonic's default (4 MiB) would let every stream of
/// every connection buffer megabytes.
pub const MAX_REQUEST_BYTES: usize = 4 * 1024;

/// The gRPC services of a node; `shutdown` ends health `Watch` streams when the node stops.
pub fn routes(app: Arc<App>, shutdown: watch::Receiver<bool>) -> Routes {
    let ids = IdServiceServer::new(ids::Ids { app: app.clone() }).max_decoding_message_size(MAX_REQUEST_BYTES);
    let health = HealthServer::new(health::HealthService::new(app.clone(), shutdown))
        .max_decoding_message_size(MAX_REQUEST_BYTES);
    // A batch of tags is as large as the HTTP batch body may be.
    let admin = AdminServiceServer::new(admin::Admin { app: app.clone() })
        .max_decoding_message_size(app.config().http.max_batch_body_bytes);
    Routes::new(ids).add_service(admin).add_service(health).prepare()
}

/// Whether `req` is a gRPC call: HTTP/2 with `content-type: application/grpc[+proto|...]`.
pub fn is_grpc<B>(req: &axum::http::Request<B>) -> bool {
    req.version() == axum::http::Version::HTTP_2
        && req.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}
