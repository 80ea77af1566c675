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
use crate::service::ids::IdRuns;
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

/// How much of a text batch is written at a time (a chunk of the body).
const CHUNK_BYTES: usize = 64 * 1024;

/// `runs` as decimal lines separated by `\n` (no trailing newline), written as the body is
/// sent, a chunk at a time: a batch of a million holds its runs, not 20 MB of text. A batch of
/// one chunk or less is one buffer (with a `Content-Length`).
fn id_lines(runs: IdRuns) -> Response {
    let mut ids = runs.into_ids().peekable();
    let mut fmt = itoa::Buffer::new();
    let mut chunk = move || {
        let mut out = Vec::with_capacity(CHUNK_BYTES + 24);
        while out.len() < CHUNK_BYTES {
            let Some(id) = ids.next() else { break };
            out.extend_from_slice(fmt.format(id).as_bytes());
            if ids.peek().is_some() {
                out.push(b'\n');
            }
        }
        (!out.is_empty()).then(|| Bytes::from(out))
    };
    let Some(first) = chunk() else { return text(Bytes::new()) };
    if first.len() < CHUNK_BYTES {
        return text(first);
    }
    let rest = std::iter::once(first).chain(std::iter::from_fn(chunk)).map(Ok::<_, std::convert::Infallible>);
    let mut r = Response::new(Body::from_stream(futures::stream::iter(rest)));
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(TEXT));
    r
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
        ("count" = Option<u32>, Query, description = "How many IDs (default one): from 1 to 1000000 (as \
            text, written as it is sent).", minimum = 1, maximum = 1000000, example = 3),
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
        (IdFormat::Text, Some(n)) => Ok(id_lines(app.segment_runs(tag, n, who).await?)),
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
        ("count" = Option<u32>, Query, description = "How many IDs (default one): from 1 to 1000000 (as \
            text, written as it is sent).", minimum = 1, maximum = 1000000, example = 2),
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
        IdFormat::Text => Ok(id_lines(app.snowflake_runs(key, n).await?)),
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

    async fn body_of(r: Response) -> (Vec<u8>, Option<u64>) {
        use axum::body::HttpBody as _;
        let len = r.body().size_hint().exact();
        (axum::body::to_bytes(r.into_body(), usize::MAX).await.unwrap().to_vec(), len)
    }

    #[tokio::test]
    async fn id_lines_have_no_trailing_newline() {
        let mut runs = IdRuns::default();
        runs.push(9, 2);
        runs.push(20, 1);
        assert_eq!(body_of(id_lines(runs)).await, (b"9\n10\n20".to_vec(), Some(7)));
        assert_eq!(body_of(id_lines(IdRuns::default())).await, (Vec::new(), Some(0)));
    }

    /// A batch past one chunk is written chunk by chunk, and reads back as every ID once, in
    /// order, one per line: at each chunk's end as within one.
    #[tokio::test]
    async fn a_large_batch_is_streamed_whole() {
        let mut runs = IdRuns::default();
        runs.push(1, 600_000);
        runs.push(10_000_000_000, 400_000);
        let (body, len) = body_of(id_lines(runs)).await;
        assert_eq!(len, None, "streamed, not one buffer");
        let ids: Vec<i64> = std::str::from_utf8(&body).unwrap().split('\n').map(|l| l.parse().unwrap()).collect();
        let expected: Vec<i64> = (1..600_001).chain(10_000_000_000..10_000_400_000).collect();
        assert_eq!(ids, expected);
    }
}
