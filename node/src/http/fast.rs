//! The fast path: a plain `GET` of the two ID routes (one path segment after the route's
//! prefix, no percent-escapes) is served by [`fast_path`], ahead of the router and its layers,
//! through the same functions as the routed handlers ([`segment_ids`], [`snowflake_ids`]) with
//! the same validation ([`validate::tag`], [`validate::key`], [`batch_of`]) and credentials
//! check. It skips only axum's per-request machinery (URL parameters in the request's
//! extensions, the boxed request body, route service and handler future, the extractors, the
//! per-request clone of the layer stack): about 15 allocations per request, which cost a fifth
//! of single-ID throughput (BENCHMARKS.md). Everything else, including `HEAD`, other methods
//! (405 with `Allow`), escaped or empty segments and every other route, goes through the
//! router; the prefixes come from [`leaf_api::routes`], and a test checks the two paths
//! answer alike.
use std::convert::Infallible;
use std::net::IpAddr;
use std::sync::Arc;

use axum::http::Method;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use leaf_api::routes;
use leaf_api::ErrorCode;

use super::extract::batch_of;
use super::ids::{segment_ids, snowflake_ids};
use crate::access::IdAsk;
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
    (auth, addr): (Option<&[u8]>, IpAddr),
) -> Result<Response, ApiError> {
    match kind {
        FastKind::Segment => {
            validate::tag(name)?;
            let batch = batch_of(query)?;
            let who = app.check_ids(auth, Some(name), IdAsk { addr, ids: batch.count.unwrap_or(1) })?;
            segment_ids(app, name, batch, who).await
        }
        FastKind::Snowflake => {
            validate::key(name)?;
            let batch = batch_of(query)?;
            app.check_ids(auth, None, IdAsk { addr, ids: batch.count.unwrap_or(1) })?;
            snowflake_ids(app, name, batch).await
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
    client: IpAddr,
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
        let caller = (auth.as_ref().map(|v| v.as_bytes()), client);
        let answer = fast(&app, (kind, &uri.path()[at..]), uri.query(), caller).await;
        let answer = super::finish(&app, answer.into_response());
        let route = match kind {
            FastKind::Segment => *SEGMENT_ROUTE,
            FastKind::Snowflake => *SNOWFLAKE_ROUTE,
        };
        super::answered(&app, route, started, &answer);
        Ok(answer)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            assert!(!crate::access::credentials::is_admin(p) && !crate::raft::service::is_internal(p), "{p}");
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
