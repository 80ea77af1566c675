//! `GET /admin/backup` (root credentials only, see [`super::auth`]): the backup file,
//! streamed from the unnamed file the core wrote it to.
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use leaf_api::routes;
use tokio::io::AsyncReadExt;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::openapi::BackupErrors;
use crate::service::{ApiError, App};

/// The header naming the backup's ID.
pub const BACKUP_ID_HEADER: &str = "x-leaf-backup-id";

/// The routes of this area (their own timeout: a large state takes a while to write).
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new().routes(routes!(backup))
}

/// A backup of the whole replicated state (every tag with its profile and counters,
/// obfuscation keys, tokens' hashes, templates, the audit trail, snowflake workers), as of a
/// point at least as new as everything committed before the request. Restore it with
/// `leaf restore`. Plaintext: it holds secrets' hashes and obfuscation keys, so only the
/// root credentials may take one, and `leaf backup` can encrypt what it saves.
#[utoipa::path(get, path = routes::ADMIN_BACKUP, tag = "admin", operation_id = "backup",
    security(("admin_token" = [])),
    responses((status = 200, description = "The backup file (`leaf restore` reads it).",
        content_type = "application/octet-stream", body = String), BackupErrors))]
pub async fn backup(State(app): State<Arc<App>>) -> Result<Response, ApiError> {
    let taken = app.backup().await?;
    let id = format!("{:032x}", taken.written.header.backup_id);
    let file = tokio::fs::File::from_std(taken.file);
    let chunks = futures::stream::unfold(file, |mut f| async move {
        let mut buf = vec![0u8; 1 << 16];
        match f.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(bytes::Bytes::from(buf)), f))
            }
            Err(e) => Some((Err(e), f)),
        }
    });
    let mut resp = Body::from_stream(chunks).into_response();
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
    h.insert(CONTENT_LENGTH, HeaderValue::from(taken.bytes));
    let disposition = format!("attachment; filename=\"leaf-backup-{id}.leafbak\"");
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        h.insert(CONTENT_DISPOSITION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&id) {
        h.insert(BACKUP_ID_HEADER, v);
    }
    Ok(resp)
}
