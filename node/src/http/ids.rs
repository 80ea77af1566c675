//! The ID endpoints: segment and snowflake IDs as decimal text (Leaf's wire form) or as JSON
//! ranges (`?format=ranges`, the same functions serve gRPC), and the
//! snowflake decoders at our path and at Leaf's monitor path.
//!
//! The per-ID path takes no lock and builds no JSON: the tag is validated, its buffer handle
//! looked up in the lock-free registry, and the ID formatted with `itoa`.
//!
//! **Fast path.** A plain `GET` of the two ID routes (one path segment after the route's
//! prefix, no percent-escapes) is served by [`fast_path`], ahead of the router and its layers,
//! which calls the same functions as the routed handlers ([`segment_ids`], [`snowflake_ids`])
//! with the same validation ([`validate_tag`], [`batch_of`]). It skips only axum's per-request
//! machinery (URL parameters in the request's extensions, the boxed request body, route
//! service and handler future, the extractors, the per-request clone of the layer stack):
//! about 15 allocations per request, which cost a fifth of single-ID throughput
//! (BENCHMARKS.md). Everything else, including `HEAD`, other methods
//! (405 with `Allow`), escaped or empty segments and every other route, goes through the
//! router; the prefixes come from [`leaf_api::routes`], and a test checks the two paths
//! answer alike.
use std::sync::Arc;

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderValue, Method};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::future::BoxFuture;
use leaf_api::ranges::{IdFormat, IdRanges};
use leaf_api::routes;
use leaf_api::tag::validate_tag;
use leaf_api::types::SnowflakeDecoded;
use leaf_api::ErrorCode;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::{batch_of, ApiQuery, Authorization, Batch, KeyParam, RawParam, TagParam};
use super::openapi::{DecodeErrors, SegmentGetErrors, SnowflakeGetErrors, TEXT};
use super::{tag_not_found, App};
use crate::metrics::Route;
use crate::tags::ServeAs;

/// The routes of this area, with their OpenAPI operations.
pub fn routes() -> OpenApiRouter<Arc<App>> {
    OpenApiRouter::new()
        .routes(routes!(segment_get))
        .routes(routes!(snowflake_get))
        .routes(routes!(snowflake_decode))
        .routes(routes!(leaf_decode))
}

fn text(body: impl Into<Bytes>) -> Response {
    let mut r = Response::new(Body::from(body.into()));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
    r
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

/// One segment ID, or `count` IDs separated by `\n`, or `count` IDs as ranges.
///
/// Leaf-compatible: the body is the decimal ID and nothing else. The IDs of one request are
/// increasing; the IDs of a tag are unique across the cluster. With `format=ranges` the body is
/// JSON: a few ranges `[start, end)` whatever the count (up to 1,000,000).
#[utoipa::path(get, path = routes::SEGMENT_GET, tag = "ids", operation_id = "segment_get",
    params(
        ("tag" = String, Path, description = "The tag (Leaf's biz_tag).", min_length = 1, max_length = 128,
            pattern = r"^[A-Za-z0-9_.:\-]+$", example = "leaf-segment-test"),
        ("count" = Option<u32>, Query, description = "How many IDs (default one): at most 100000 as text, \
            1000000 as ranges.", minimum = 1, maximum = 1000000, example = 3),
        ("format" = Option<IdFormat>, Query, description = "`text` (default): one decimal ID per line; \
            `ranges`: JSON ranges."),
    ),
    responses(
        (status = 200, description = "As text, the ID, or the IDs one per line without a trailing newline; \
            as ranges, the IDs as ascending ranges `[start, end)`.",
            content((String = "text/plain; charset=utf-8", example = "1\n2\n3"),
                (IdRanges = "application/json", example = json!({"ranges": [{"start": 1, "end": 4}]})))),
        SegmentGetErrors,
    ))]
pub async fn segment_get(
    State(app): State<Arc<App>>,
    Authorization(auth): Authorization,
    TagParam(tag): TagParam,
    batch: Batch,
) -> Result<Response, ApiError> {
    app.access.check_ids(auth.as_ref().map(|v| v.as_bytes()), Some(&tag))?;
    segment_ids(&app, &tag, batch).await
}

/// The segment handle of a validated tag, confirming an unknown tag with the leader first.
async fn segment_handle(app: &App, tag: &str) -> Result<Arc<crate::tags::TagHandle>, ApiError> {
    match app.tags.get(tag) {
        Some(h) => Ok(h),
        None => {
            app.confirm_tags(tag).await?;
            app.tags.get(tag).ok_or_else(|| tag_not_found(tag))
        }
    }
}

/// [`segment_get`]'s work, for a validated tag.
pub async fn segment_ids(app: &App, tag: &str, batch: Batch) -> Result<Response, ApiError> {
    let h = segment_handle(app, tag).await?;
    match (batch.format, batch.count) {
        (IdFormat::Ranges, count) => Ok(Json(ranges_of(app, &h, count.unwrap_or(1)).await?).into_response()),
        (IdFormat::Text, None) => {
            let mut id = 0;
            take(app, &h, 1, |first, _| id = first).await?;
            Ok(text(Bytes::copy_from_slice(itoa::Buffer::new().format(id).as_bytes())))
        }
        (IdFormat::Text, Some(n)) => {
            let mut lines = IdLines::with_capacity(n);
            take(app, &h, n, |first, c| lines.push_run(first, c)).await?;
            Ok(text(lines.out))
        }
    }
}

/// `count` IDs of a validated tag as ranges (HTTP `format=ranges` and gRPC).
pub async fn segment_ranges(app: &App, tag: &str, count: u32) -> Result<IdRanges, ApiError> {
    let h = segment_handle(app, tag).await?;
    ranges_of(app, &h, count).await
}

/// `count` IDs of a validated tag one by one, whatever its profile (gRPC `GetSegmentIdList`).
pub async fn segment_list(app: &App, tag: &str, count: u32) -> Result<Vec<i64>, ApiError> {
    let h = segment_handle(app, tag).await?;
    let mut out = Vec::with_capacity(count as usize);
    take(app, &h, count, |first, c| out.extend(first..first + c as i64)).await?;
    Ok(out)
}

async fn ranges_of(app: &App, h: &crate::tags::TagHandle, count: u32) -> Result<IdRanges, ApiError> {
    if let ServeAs::Obfuscated(_) = h.serve() {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("tag {:?} is obfuscated: its IDs are not contiguous, so they come only as text", h.tag()),
        ));
    }
    let mut out = IdRanges::default();
    take(app, h, count, |first, c| out.push_run(first, c)).await?;
    Ok(out)
}

/// Takes `n` IDs of a tag the way its profile serves them, calling `sink(first, count)` per
/// increasing run: from this node's buffers, or from the leader (monotonic tags: one run).
async fn take(
    app: &App,
    h: &crate::tags::TagHandle,
    n: u32,
    mut sink: impl FnMut(i64, u64) + Send,
) -> Result<(), ApiError> {
    match h.serve() {
        ServeAs::Buffer => Ok(h.take(u64::from(n), sink).await?),
        ServeAs::Obfuscated(o) => {
            let mut bad = None;
            h.take(u64::from(n), |first, count| {
                for seq in first..first + count as i64 {
                    // The counter is below the tag's limit, the bijection's domain.
                    match o.encode(seq as u64) {
                        Ok(id) => sink(id as i64, 1),
                        Err(e) => bad = Some(e),
                    }
                }
            })
            .await?;
            match bad {
                Some(e) => {
                    tracing::error!(tag = h.tag(), error = %e, "an obfuscated tag's counter left its ID space");
                    Err(ApiError::new(ErrorCode::Unavailable, format!("tag {:?} cannot be served: {e}", h.tag())))
                }
                None => Ok(()),
            }
        }
        ServeAs::Leader => {
            let first = app.raft.monotonic_take(h.tag().to_string(), n).await?;
            h.count_served(u64::from(n));
            sink(first, u64::from(n));
            Ok(())
        }
        ServeAs::Unservable(why) => {
            Err(ApiError::new(ErrorCode::Unavailable, format!("tag {:?} cannot be served: {why}", h.tag())))
        }
    }
}

/// One snowflake ID, or `count` IDs separated by `\n`, or `count` IDs as ranges.
///
/// Leaf-compatible; the key is only for auditing (counted in metrics). The IDs of one
/// millisecond are consecutive, so ranges are about one per millisecond the batch spans.
#[utoipa::path(get, path = routes::SNOWFLAKE_GET, tag = "ids", operation_id = "snowflake_get",
    params(
        ("key" = String, Path, description = "Audit key, validated like a tag.", min_length = 1, max_length = 128,
            pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders"),
        ("count" = Option<u32>, Query, description = "How many IDs (default one): at most 100000 as text, \
            1000000 as ranges.", minimum = 1, maximum = 1000000, example = 2),
        ("format" = Option<IdFormat>, Query, description = "`text` (default): one decimal ID per line; \
            `ranges`: JSON ranges."),
    ),
    responses(
        (status = 200, description = "As text, the ID, or the IDs one per line without a trailing newline; \
            as ranges, the IDs as ascending ranges `[start, end)`.",
            content((String = "text/plain; charset=utf-8", example = "7390451735961219072\n7390451735961219073"),
                (IdRanges = "application/json",
                    example = json!({"ranges": [{"start": 7390451735961219072_i64, "end": 7390451735961219074_i64}]})))),
        SnowflakeGetErrors,
    ))]
pub async fn snowflake_get(
    State(app): State<Arc<App>>,
    Authorization(auth): Authorization,
    KeyParam(key): KeyParam,
    batch: Batch,
) -> Result<Response, ApiError> {
    app.access.check_ids(auth.as_ref().map(|v| v.as_bytes()), None)?;
    snowflake_ids(&app, &key, batch).await
}

/// [`snowflake_get`]'s work, for a validated key.
pub async fn snowflake_ids(app: &App, key: &str, batch: Batch) -> Result<Response, ApiError> {
    let n = batch.count.unwrap_or(1);
    match batch.format {
        IdFormat::Ranges => Ok(Json(snowflake_ranges(app, key, n).await?).into_response()),
        IdFormat::Text => {
            let mut lines = IdLines::with_capacity(n);
            app.snowflake.take(n as u64, |first, c| lines.push_run(first, c)).await?;
            app.metrics.snowflake_served(key, n as u64);
            Ok(text(lines.out))
        }
    }
}

/// `count` snowflake IDs as ranges, for a validated key (HTTP `format=ranges` and gRPC).
pub async fn snowflake_ranges(app: &App, key: &str, count: u32) -> Result<IdRanges, ApiError> {
    let mut out = IdRanges::default();
    app.snowflake.take(count as u64, |first, c| out.push_run(first, c)).await?;
    app.metrics.snowflake_served(key, count as u64);
    Ok(out)
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
    let id: i64 = raw.parse().map_err(|_| not_a_snowflake(raw))?;
    decode_id(app, id).map(Json).map_err(|_| not_a_snowflake(raw))
}

fn not_a_snowflake(raw: &str) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, format!("{raw:?} is not a snowflake ID (0..2^63)"))
}

/// The parts of snowflake ID `id` (HTTP decoders and gRPC); a negative ID is
/// `invalid_request`.
pub fn decode_id(app: &App, id: i64) -> Result<SnowflakeDecoded, ApiError> {
    let parts = app.snowflake.layout().decode(id).ok_or_else(|| not_a_snowflake(&id.to_string()))?;
    let timestamp = chrono::DateTime::from_timestamp_millis(parts.timestamp_ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default();
    Ok(SnowflakeDecoded {
        id,
        timestamp_ms: parts.timestamp_ms,
        timestamp,
        worker_id: parts.worker_id,
        sequence: parts.sequence,
    })
}

/// What the router's fallback answers for a path under an ID route that the route's single
/// segment cannot match (`/api/segment/get/`, `/api/segment/get/a/b`): the tag or ID is
/// invalid, as before the move to axum. `None` for any other path.
pub fn unmatched_id_path(path: &str) -> Option<ApiError> {
    let invalid_tag = |prefix: &str, rest: &str| {
        let e = leaf_api::tag::validate_tag(rest).err()?;
        Some(ApiError::new(ErrorCode::InvalidTag, format!("{prefix}{e}")))
    };
    if let Some(rest) = path.strip_prefix(prefix_of(routes::SEGMENT_GET)) {
        return invalid_tag("", rest);
    }
    if let Some(rest) = path.strip_prefix(prefix_of(routes::SNOWFLAKE_GET)) {
        return invalid_tag("snowflake key: ", rest);
    }
    if let Some(rest) = path.strip_prefix(prefix_of(routes::SNOWFLAKE_DECODE)) {
        return Some(ApiError::new(ErrorCode::InvalidRequest, format!("{rest:?} is not a snowflake ID (0..2^63)")));
    }
    None
}

/// The part of a route template before its first `{param}` (`/api/segment/get/`).
fn prefix_of(template: &'static str) -> &'static str {
    &template[..template.find('{').unwrap_or(template.len())]
}

/// An ID request the fast path serves: the tag or key as it appears in the path.
#[derive(Debug, PartialEq, Eq)]
enum FastRoute<'a> {
    Segment(&'a str),
    Snowflake(&'a str),
}

/// Which ID route a request is, when the fast path can serve it exactly as the router would:
/// `GET` and one non-empty path segment without percent-escapes after the route's prefix.
fn fast_route<'a>(method: &Method, path: &'a str) -> Option<FastRoute<'a>> {
    if method != Method::GET {
        return None;
    }
    let plain = |rest: &'a str| (!rest.is_empty() && !rest.contains(['/', '%'])).then_some(rest);
    if let Some(rest) = path.strip_prefix(prefix_of(routes::SEGMENT_GET)) {
        return plain(rest).map(FastRoute::Segment);
    }
    if let Some(rest) = path.strip_prefix(prefix_of(routes::SNOWFLAKE_GET)) {
        return plain(rest).map(FastRoute::Snowflake);
    }
    None
}

/// Which of the two ID routes the fast path serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FastKind {
    Segment,
    Snowflake,
}

/// Serves the tag or key `name` of a [`FastKind`] with the routed handlers' validation,
/// credentials check and work.
async fn fast(
    app: &App,
    (kind, name): (FastKind, &str),
    query: Option<&str>,
    auth: Option<&[u8]>,
) -> Result<Response, ApiError> {
    match kind {
        FastKind::Segment => {
            validate_tag(name).map_err(|e| ApiError::new(ErrorCode::InvalidTag, e.to_string()))?;
            app.access.check_ids(auth, Some(name))?;
            segment_ids(app, name, batch_of(query)?).await
        }
        FastKind::Snowflake => {
            validate_tag(name).map_err(|e| ApiError::new(ErrorCode::InvalidTag, format!("snowflake key: {e}")))?;
            app.access.check_ids(auth, None)?;
            snowflake_ids(app, name, batch_of(query)?).await
        }
    }
}

/// The metrics labels of the two fast routes.
static SEGMENT_ROUTE: std::sync::LazyLock<Route> = std::sync::LazyLock::new(|| Route::of(routes::SEGMENT_GET));
static SNOWFLAKE_ROUTE: std::sync::LazyLock<Route> = std::sync::LazyLock::new(|| Route::of(routes::SNOWFLAKE_GET));

/// The fast path (module doc): for a request it serves, the future of its finished answer
/// (errors counted like every other); `None` sends the request to the router. It runs before
/// the tower layers: the routes it takes are public (no auth applies, checked by a test) and
/// bound their own waits.
pub fn fast_path<B>(
    app: &Arc<App>,
    req: &axum::http::Request<B>,
    started: std::time::Instant,
) -> Option<BoxFuture<'static, Result<Response, Infallible>>> {
    let path = req.uri().path();
    // Where the tag or key starts in the path: the future owns a clone of the URI.
    let (kind, at) = match fast_route(req.method(), path)? {
        FastRoute::Segment(tag) => (FastKind::Segment, path.len() - tag.len()),
        FastRoute::Snowflake(key) => (FastKind::Snowflake, path.len() - key.len()),
    };
    let app = app.clone();
    let uri = req.uri().clone();
    let auth = req.headers().get(axum::http::header::AUTHORIZATION).cloned();
    Some(Box::pin(async move {
        let answer = fast(&app, (kind, &uri.path()[at..]), uri.query(), auth.as_ref().map(|v| v.as_bytes())).await;
        let answer = super::finish(&app, answer.into_response());
        let route = match kind {
            FastKind::Segment => *SEGMENT_ROUTE,
            FastKind::Snowflake => *SNOWFLAKE_ROUTE,
        };
        app.answered(route, started, &answer);
        Ok(answer)
    }))
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
    fn the_fast_path_takes_plain_gets_of_the_two_id_routes_only() {
        let get = Method::GET;
        assert_eq!(fast_route(&get, "/api/segment/get/orders"), Some(FastRoute::Segment("orders")));
        assert_eq!(fast_route(&get, "/api/snowflake/get/k.1"), Some(FastRoute::Snowflake("k.1")));
        // What only the router answers: other methods (405), HEAD, escaped, empty or nested
        // segments, other routes.
        assert_eq!(fast_route(&Method::POST, "/api/segment/get/orders"), None);
        assert_eq!(fast_route(&Method::HEAD, "/api/segment/get/orders"), None);
        assert_eq!(fast_route(&get, "/api/segment/get/or%64ers"), None);
        assert_eq!(fast_route(&get, "/api/segment/get/"), None);
        assert_eq!(fast_route(&get, "/api/segment/get/a/b"), None);
        assert_eq!(fast_route(&get, "/api/snowflake/decode/1"), None);
        assert_eq!(fast_route(&get, "/api/segment/gets/a"), None);
        // The prefixes are the route table's, and public: the auth layer the fast path skips
        // lets them through.
        for p in [prefix_of(routes::SEGMENT_GET), prefix_of(routes::SNOWFLAKE_GET)] {
            assert!(p.starts_with("/api/") && p.ends_with('/'), "{p}");
            assert!(!super::super::auth::is_admin(p) && !crate::raft::service::is_internal(p), "{p}");
        }
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
