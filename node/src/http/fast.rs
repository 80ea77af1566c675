//! The fast path: a plain `GET` of the two ID routes (one path segment after the route's
//! prefix, no percent-escapes) is served by [`fast_path`], ahead of the router and its layers,
//! through the same functions as the routed handlers ([`segment_ids`], [`snowflake_ids`]) with
//! the same validation ([`validate::tag`], [`validate::key`], [`batch_of`]) and credentials
//! check. It skips only axum's per-request machinery (URL parameters in the request's
//! extensions, the boxed request body, route service and handler future, the extractors, the
//! per-request clone of the layer stack): about 15 allocations per request, which cost a fifth
//! of single-ID throughput (BENCHMARKS.md). What needs no wait is done before any future
//! exists: validation, the credentials and quota check, and one ID from a tag whose buffers
//! hold one ([`App::segment_take_one_now`]), answered as a ready future (no box, no state
//! machine, no clone of the URI); the awaited rest (refills, unknown tags, monotonic tags,
//! batches, snowflake IDs) runs boxed, as the handlers do. Everything else, including `HEAD`, other methods
//! (405 with `Allow`), escaped or empty segments and every other route, goes through the
//! router; the prefixes come from [`leaf_api::routes`], and a test checks the two paths
//! answer alike.
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use std::future::{ready, Ready};

use axum::http::Method;
use axum::response::{IntoResponse, Response};
use futures::future::{BoxFuture, Either};
use leaf_api::routes;
use leaf_api::ErrorCode;

use super::extract::{batch_of, Batch};
use super::ids::{one_id, segment_ids, snowflake_ids};
use crate::access::{IdAsk, IdRequester};
use crate::metrics::Route;
use crate::service::{validate, ApiError, App};

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

/// Which handler serves a fast row of [`routes::TABLE`]; `None` for any other template.
fn kind_of(template: &str) -> Option<FastKind> {
    match template {
        routes::SEGMENT_GET => Some(FastKind::Segment),
        routes::SNOWFLAKE_GET => Some(FastKind::Snowflake),
        _ => None,
    }
}

/// The fast routes of [`routes::TABLE`] (`fast: true`), found once: each one's prefix, kind and
/// metrics label.
static FAST: LazyLock<Vec<(&'static str, FastKind, Route)>> = LazyLock::new(|| {
    let fast = routes::TABLE.iter().filter(|r| r.fast);
    fast.filter_map(|r| Some((prefix_of(r.template), kind_of(r.template)?, Route::of(r.template)))).collect()
});

/// Which ID route a request is, when the fast path can serve it exactly as the router would:
/// `GET` and one non-empty path segment without percent-escapes after the route's prefix.
fn fast_route<'a>(method: &Method, path: &'a str) -> Option<(FastKind, &'a str)> {
    if method != Method::GET {
        return None;
    }
    let plain = |rest: &'a str| !rest.is_empty() && !rest.bytes().any(|b| b == b'/' || b == b'%');
    FAST.iter().find_map(|(prefix, kind, _)| Some((*kind, path.strip_prefix(prefix).filter(|r| plain(r))?)))
}

/// Which of the two ID routes the fast path serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FastKind {
    Segment,
    Snowflake,
}

/// What is left of a request once it was validated and its credentials checked, when its IDs
/// cannot be had at once: the routed handlers' work, awaited.
#[derive(Debug)]
enum Later {
    Segment(Batch, IdRequester),
    Snowflake(Batch),
}

/// The part of the fast path that needs no wait: the routed handlers' validation and
/// credentials check, then, for one segment ID as text, the ID itself when the tag's buffers
/// hold one ([`App::segment_take_one_now`]). `Ok(Err(later))` when the IDs need the awaited
/// path.
fn now(
    app: &App,
    (kind, name): (FastKind, &str),
    query: Option<&str>,
    (auth, addr): (Option<&[u8]>, IpAddr),
) -> Result<Result<Response, Later>, ApiError> {
    match kind {
        FastKind::Segment => {
            validate::tag(name)?;
            let batch = batch_of(query)?;
            let who = app.check_ids(auth, Some(name), IdAsk { addr, ids: batch.count.unwrap_or(1) })?;
            if batch == Batch::default() {
                if let Some(id) = app.segment_take_one_now(name) {
                    return Ok(Ok(one_id(id)));
                }
            }
            Ok(Err(Later::Segment(batch, who)))
        }
        FastKind::Snowflake => {
            validate::key(name)?;
            let batch = batch_of(query)?;
            app.check_ids(auth, None, IdAsk { addr, ids: batch.count.unwrap_or(1) })?;
            Ok(Err(Later::Snowflake(batch)))
        }
    }
}

/// The awaited rest of a request [`now`] could not answer, for the tag or key `name`.
async fn later(app: &App, rest: Later, name: &str) -> Result<Response, ApiError> {
    match rest {
        Later::Segment(batch, who) => segment_ids(app, name, batch, who).await,
        Later::Snowflake(batch) => snowflake_ids(app, name, batch).await,
    }
}

/// The fast path's answer: ready (no allocation, no state machine) when [`now`] answered,
/// else the boxed future of the awaited rest.
pub type FastAnswer = Either<Ready<Result<Response, Infallible>>, BoxFuture<'static, Result<Response, Infallible>>>;

/// The fast path (module doc): for a request it serves, its finished answer (errors counted
/// like every other); `None` sends the request to the router. It runs before the tower layers:
/// the routes it takes are public (no auth applies, checked by a test) and bound their own
/// waits. What needs no wait (validation, credentials, quotas, one ID from a tag's buffers) is
/// done here, before any future exists; only the rest is boxed.
pub fn fast_path<B>(
    app: &Arc<App>,
    req: &axum::http::Request<B>,
    started: std::time::Instant,
    client: IpAddr,
) -> Option<FastAnswer> {
    let path = req.uri().path();
    let (kind, name) = fast_route(req.method(), path)?;
    let auth = req.headers().get(axum::http::header::AUTHORIZATION).map(|v| v.as_bytes());
    let rest = match now(app, (kind, name), req.uri().query(), (auth, client)) {
        Ok(Ok(answer)) => return Some(Either::Left(ready(Ok(done(app, kind, started, answer))))),
        Err(e) => return Some(Either::Left(ready(Ok(done(app, kind, started, e.into_response()))))),
        Ok(Err(rest)) => rest,
    };
    // Where the tag or key starts in the path: the future owns a clone of the URI.
    let at = path.len() - name.len();
    let (app, uri) = (app.clone(), req.uri().clone());
    Some(Either::Right(Box::pin(async move {
        let answer = later(&app, rest, &uri.path()[at..]).await;
        Ok(done(&app, kind, started, answer.into_response()))
    })))
}

/// An answer of the fast route `kind` finished and timed as the router's are.
fn done(app: &App, kind: FastKind, started: std::time::Instant, answer: Response) -> Response {
    let answer = super::finish(app, answer);
    let route = FAST.iter().find(|(_, k, _)| *k == kind).map_or_else(|| Route::of(""), |(_, _, r)| *r);
    super::answered(app, route, started, &answer);
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_takes_plain_gets_of_the_two_id_routes_only() {
        let get = Method::GET;
        assert_eq!(fast_route(&get, "/api/segment/get/orders"), Some((FastKind::Segment, "orders")));
        assert_eq!(fast_route(&get, "/api/snowflake/get/k.1"), Some((FastKind::Snowflake, "k.1")));
        // What only the router answers: other methods (405), HEAD, escaped, empty or nested
        // segments, other routes.
        assert_eq!(fast_route(&Method::POST, "/api/segment/get/orders"), None);
        assert_eq!(fast_route(&Method::HEAD, "/api/segment/get/orders"), None);
        assert_eq!(fast_route(&get, "/api/segment/get/or%64ers"), None);
        assert_eq!(fast_route(&get, "/api/segment/get/"), None);
        assert_eq!(fast_route(&get, "/api/segment/get/a/b"), None);
        assert_eq!(fast_route(&get, "/api/snowflake/decode/1"), None);
        assert_eq!(fast_route(&get, "/api/segment/gets/a"), None);
    }

    /// Every fast row of the route table has a handler here, and none needs a check before
    /// routing: the auth layer the fast path skips would let it through.
    #[test]
    fn the_fast_routes_are_the_tables_and_checked_by_their_handlers() {
        let rows: Vec<_> = routes::TABLE.iter().filter(|r| r.fast).collect();
        assert_eq!(FAST.len(), rows.len(), "a fast row of the route table has no fast handler");
        for r in rows {
            assert!(!r.access.is_checked_before_routing(), "{}", r.template);
            assert!(prefix_of(r.template).ends_with('/') && !crate::raft::service::is_internal(r.template));
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
