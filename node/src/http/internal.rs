//! The node-to-node RPC mount: `POST /internal/...` with a bincode body of at most
//! [`MAX_RPC_BODY`]. The cluster secret is checked by [`super::auth::AuthLayer`] before routing;
//! [`crate::raft::service`] decodes, handles and encodes. Not public API: not in the OpenAPI
//! document.
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Extension;
use axum::Router;
use leaf_api::ErrorCode;

use crate::access::credentials::PeerNode;
use crate::raft::network::MAX_RPC_BODY;
use crate::service::{ApiError, App};

/// Every internal path; [`service::handle`] answers 404 for the ones it does not know.
pub fn routes() -> Router<Arc<App>> {
    Router::new().route("/internal/{*rpc}", post(rpc))
}

async fn rpc(
    State(app): State<Arc<App>>,
    caller: Option<Extension<PeerNode>>,
    uri: Uri,
    body: Body,
) -> Result<Response, ApiError> {
    let body = axum::body::to_bytes(body, MAX_RPC_BODY).await.map_err(|e| {
        let e = e.into_inner();
        if e.is::<http_body_util::LengthLimitError>() {
            ApiError::new(ErrorCode::PayloadTooLarge, format!("request body exceeds {MAX_RPC_BODY} bytes"))
        } else {
            ApiError::new(ErrorCode::InvalidRequest, format!("reading body: {e}"))
        }
    })?;
    let answer = app.internal_rpc(uri.path(), &body, caller.map(|Extension(p)| p)).await?;
    Ok(([(CONTENT_TYPE, "application/octet-stream")], answer).into_response())
}
