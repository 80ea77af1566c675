//! The ID endpoints: segment and snowflake IDs as decimal text (Leaf's wire form), and the
//! snowflake decoders at our path and at Leaf's monitor path.
//!
//! The per-ID path takes no lock and builds no JSON: the tag is validated, its buffer handle
//! looked up in the lock-free registry, and the ID formatted with `itoa`.
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use axum::Json;
use leaf_api::routes;
use leaf_api::types::SnowflakeDecoded;
use leaf_api::ErrorCode;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{ApiQuery, CountParam, KeyParam, RawParam, TagParam};
use super::openapi::{DecodeErrors, SegmentGetErrors, SnowflakeGetErrors, TEXT};
use super::{tag_not_found, App};

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(segment_get))
        .routes(routes!(snowflake_get))
        .routes(routes!(snowflake_decode))
        .routes(routes!(leaf_decode))
}

fn text(body: impl Into<Bytes>) -> Response {
    ([(CONTENT_TYPE, TEXT)], body.into()).into_response()
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

/// One segment ID, or `count` IDs separated by `\n`.
///
/// Leaf-compatible: the body is the decimal ID and nothing else. The IDs of one request are
/// increasing; the IDs of a tag are unique across the cluster.
#[utoipa::path(get, path = routes::SEGMENT_GET, tag = "ids", operation_id = "segment_get",
    params(
        ("tag" = String, Path, description = "The tag (Leaf's biz_tag).", min_length = 1, max_length = 128,
            pattern = r"^[A-Za-z0-9_.:\-]+$", example = "leaf-segment-test"),
        ("count" = Option<u32>, Query, description = "How many IDs (default one).", minimum = 1, maximum = 100000,
            example = 3),
    ),
    responses(
        (status = 200, description = "The ID, or the IDs one per line without a trailing newline.",
            body = String, content_type = "text/plain; charset=utf-8", example = "1\n2\n3"),
        SegmentGetErrors,
    ))]
pub async fn segment_get(
    State(app): State<Arc<App>>,
    TagParam(tag): TagParam,
    CountParam(count): CountParam,
) -> Result<Response, ApiError> {
    let handle = match app.tags.get(&tag) {
        Some(h) => h,
        None => {
            app.confirm_tags(&tag).await?;
            app.tags.get(&tag).ok_or_else(|| tag_not_found(&tag))?
        }
    };
    match count {
        None => {
            let mut id = 0;
            handle.take(1, |first, _| id = first).await?;
            Ok(text(Bytes::copy_from_slice(itoa::Buffer::new().format(id).as_bytes())))
        }
        Some(n) => {
            let mut lines = IdLines::with_capacity(n);
            handle.take(n as u64, |first, c| lines.push_run(first, c)).await?;
            Ok(text(lines.out))
        }
    }
}

/// One snowflake ID, or `count` IDs separated by `\n`.
///
/// Leaf-compatible; the key is only for auditing (counted in metrics).
#[utoipa::path(get, path = routes::SNOWFLAKE_GET, tag = "ids", operation_id = "snowflake_get",
    params(
        ("key" = String, Path, description = "Audit key, validated like a tag.", min_length = 1, max_length = 128,
            pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders"),
        ("count" = Option<u32>, Query, description = "How many IDs (default one).", minimum = 1, maximum = 100000,
            example = 2),
    ),
    responses(
        (status = 200, description = "The ID, or the IDs one per line without a trailing newline.",
            body = String, content_type = "text/plain; charset=utf-8",
            example = "7390451735961219072\n7390451735961219073"),
        SnowflakeGetErrors,
    ))]
pub async fn snowflake_get(
    State(app): State<Arc<App>>,
    KeyParam(key): KeyParam,
    CountParam(count): CountParam,
) -> Result<Response, ApiError> {
    let n = count.unwrap_or(1);
    let mut lines = IdLines::with_capacity(n);
    app.snowflake.take(n as u64, |first, c| lines.push_run(first, c)).await?;
    app.metrics.snowflake_served(&key, n as u64);
    Ok(text(lines.out))
}

/// A snowflake ID's timestamp, worker ID and sequence.
#[utoipa::path(get, path = routes::SNOWFLAKE_DECODE, tag = "ids", operation_id = "snowflake_decode",
    params(("id" = i64, Path, description = "A snowflake ID (non-negative).", minimum = 0,
        example = 7390451735961219072_i64)),
    responses(
        (status = 200, description = "The ID's parts.", body = SnowflakeDecoded),
        DecodeErrors,
    ))]
pub async fn snowflake_decode(
    State(app): State<Arc<App>>,
    RawParam(id): RawParam,
) -> Result<Json<SnowflakeDecoded>, ApiError> {
    decode(&app, &id)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeafDecodeQuery {
    snowflake_id: Option<String>,
}

/// The same at Leaf's monitor path.
#[utoipa::path(get, path = routes::LEAF_DECODE, tag = "ids", operation_id = "leaf_decode",
    params(("snowflakeId" = i64, Query, description = "A snowflake ID (non-negative).", minimum = 0,
        example = 7390451735961219072_i64)),
    responses(
        (status = 200, description = "The ID's parts.", body = SnowflakeDecoded),
        DecodeErrors,
    ))]
pub async fn leaf_decode(
    State(app): State<Arc<App>>,
    ApiQuery(q): ApiQuery<LeafDecodeQuery>,
) -> Result<Json<SnowflakeDecoded>, ApiError> {
    let id = q
        .snowflake_id
        .ok_or_else(|| ApiError::new(ErrorCode::InvalidRequest, "missing query parameter snowflakeId"))?;
    decode(&app, &id)
}

fn decode(app: &App, raw: &str) -> Result<Json<SnowflakeDecoded>, ApiError> {
    let bad = || ApiError::new(ErrorCode::InvalidRequest, format!("{raw:?} is not a snowflake ID (0..2^63)"));
    let id: i64 = raw.parse().map_err(|_| bad())?;
    let parts = app.snowflake.layout().decode(id).ok_or_else(bad)?;
    let timestamp = chrono::DateTime::from_timestamp_millis(parts.timestamp_ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default();
    Ok(Json(SnowflakeDecoded {
        id,
        timestamp_ms: parts.timestamp_ms,
        timestamp,
        worker_id: parts.worker_id,
        sequence: parts.sequence,
    }))
}

/// What the router's fallback answers for a path under an ID route that the route's single
/// segment cannot match (`/api/segment/get/`, `/api/segment/get/a/b`): the tag or ID is
/// invalid, as before the move to axum. `None` for any other path.
pub fn unmatched_id_path(path: &str) -> Option<ApiError> {
    let invalid_tag = |prefix: &str, rest: &str| {
        let e = leaf_api::tag::validate_tag(rest).err()?;
        Some(ApiError::new(ErrorCode::InvalidTag, format!("{prefix}{e}")))
    };
    if let Some(rest) = path.strip_prefix("/api/segment/get/") {
        return invalid_tag("", rest);
    }
    if let Some(rest) = path.strip_prefix("/api/snowflake/get/") {
        return invalid_tag("snowflake key: ", rest);
    }
    if let Some(rest) = path.strip_prefix("/api/snowflake/decode/") {
        return Some(ApiError::new(ErrorCode::InvalidRequest, format!("{rest:?} is not a snowflake ID (0..2^63)")));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_lines_have_no_trailing_newline() {
        let mut l = IdLines::with_capacity(4);
        l.push_run(9, 2);
        l.push_run(20, 1);
        assert_eq!(l.out, b"9\n10\n20");
    }

    #[test]
    fn paths_the_router_cannot_match_are_invalid_tags() {
        assert_eq!(unmatched_id_path("/api/segment/get/").unwrap().code, ErrorCode::InvalidTag);
        assert_eq!(unmatched_id_path("/api/segment/get/a/b").unwrap().code, ErrorCode::InvalidTag);
        assert!(unmatched_id_path("/api/snowflake/get/k/").unwrap().message.starts_with("snowflake key"));
        assert_eq!(unmatched_id_path("/api/snowflake/decode/1/2").unwrap().code, ErrorCode::InvalidRequest);
        assert!(unmatched_id_path("/api/segment/gets/a").is_none());
        assert!(unmatched_id_path("/health").is_none());
    }
}
