//! The ID endpoints: segment and snowflake IDs as decimal text (Leaf's wire form) or as JSON
//! ranges (`?format=ranges`; the same core operations serve gRPC), and the snowflake decoders
//! at our path and at Leaf's monitor path.
//!
//! The per-ID path takes no lock and builds no JSON: the tag is validated, its buffer handle
//! looked up in the lock-free registry, and the ID formatted with `itoa`. A plain `GET` of the
//! two ID routes is served by [`super::fast`] ahead of the router, through [`segment_ids`] and
//! [`snowflake_ids`] as here, or, for one ID of a tag whose buffers hold one, at once with the
//! same answer ([`one_id`]).
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::Json;
use leaf_api::ranges::{IdFormat, IdRanges};
use leaf_api::routes;
use leaf_api::types::SnowflakeDecoded;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::extract::{ApiQuery, Batch, IdCaller, KeyParam, RawParam, TagParam};
use super::openapi::{DecodeErrors, SegmentGetErrors, SnowflakeGetErrors, TEXT};
use crate::access::IdAsk;
use crate::service::{ApiError, App};

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

/// The answer of a request for one ID as text: the decimal ID (the fast path's ready answers
/// and [`segment_ids`] alike).
pub fn one_id(id: i64) -> Response {
    text(Bytes::copy_from_slice(itoa::Buffer::new().format(id).as_bytes()))
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
    security((), ("admin_token" = [])),
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
    caller: IdCaller,
    TagParam(tag): TagParam,
    batch: Batch,
) -> Result<Response, ApiError> {
    let ask = IdAsk { addr: caller.addr, ids: batch.count.unwrap_or(1) };
    let who = app.check_ids(caller.authorization.as_ref().map(|v| v.as_bytes()), Some(&tag), ask)?;
    segment_ids(&app, &tag, batch, who).await
}

/// [`segment_get`]'s work, for a validated tag asked for by `who`.
pub async fn segment_ids(
    app: &App,
    tag: &str,
    batch: Batch,
    who: crate::access::IdRequester,
) -> Result<Response, ApiError> {
    match (batch.format, batch.count) {
        (IdFormat::Ranges, count) => Ok(Json(app.segment_ranges(tag, count.unwrap_or(1), who).await?).into_response()),
        (IdFormat::Text, None) => {
            let mut id = 0;
            app.segment_take(tag, 1, who, |first, _| id = first).await?;
            Ok(one_id(id))
        }
        (IdFormat::Text, Some(n)) => {
            let mut lines = IdLines::with_capacity(n);
            app.segment_take(tag, n, who, |first, c| lines.push_run(first, c)).await?;
            Ok(text(lines.out))
        }
    }
}

/// One snowflake ID, or `count` IDs separated by `\n`, or `count` IDs as ranges.
///
/// Leaf-compatible; the key is only for auditing (counted in metrics). The IDs of one
/// millisecond are consecutive, so ranges are about one per millisecond the batch spans.
#[utoipa::path(get, path = routes::SNOWFLAKE_GET, tag = "ids", operation_id = "snowflake_get",
    security((), ("admin_token" = [])),
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
    caller: IdCaller,
    KeyParam(key): KeyParam,
    batch: Batch,
) -> Result<Response, ApiError> {
    let ask = IdAsk { addr: caller.addr, ids: batch.count.unwrap_or(1) };
    app.check_ids(caller.authorization.as_ref().map(|v| v.as_bytes()), None, ask)?;
    snowflake_ids(&app, &key, batch).await
}

/// [`snowflake_get`]'s work, for a validated key.
pub async fn snowflake_ids(app: &App, key: &str, batch: Batch) -> Result<Response, ApiError> {
    let n = batch.count.unwrap_or(1);
    match batch.format {
        IdFormat::Ranges => Ok(Json(app.snowflake_ranges(key, n).await?).into_response()),
        IdFormat::Text => {
            let mut lines = IdLines::with_capacity(n);
            app.snowflake_take(key, n, |first, c| lines.push_run(first, c)).await?;
            Ok(text(lines.out))
        }
    }
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
    app.decode_snowflake_text(&id).map(Json)
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
    let id = q.snowflake_id.ok_or_else(|| ApiError::invalid("missing query parameter snowflakeId"))?;
    app.decode_snowflake_text(&id).map(Json)
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
}
