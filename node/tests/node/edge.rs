//! The HTTP edge's own answers over real HTTP: 405 with `Allow` from the router on every area,
//! 404 for unknown paths, axum's rejections and the body limit as the project's JSON errors,
//! `/openapi.json` equal to the committed `docs/openapi.json`, and the fast ID path (ready or
//! awaited) answering and counting like the router.
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::header::{HeaderMap, ALLOW, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, StatusCode};
use leaf_api::{ErrorBody, ErrorCode};
use leaf_node::config::{Config, HttpConfig};
use tempfile::TempDir;

use crate::support::{config, start};

/// One request on its own connection; the answer's status, headers and body.
pub(crate) async fn send<B>(addr: SocketAddr, req: hyper::Request<B>) -> (StatusCode, HeaderMap, Bytes)
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let resp = sender.send_request(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    (parts.status, parts.headers, body.collect().await.unwrap().to_bytes())
}

async fn call(addr: SocketAddr, method: Method, path: &str, body: &'static str) -> (StatusCode, HeaderMap, Bytes) {
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json");
    send(addr, req.body(Full::new(Bytes::from(body))).unwrap()).await
}

/// The answer is a JSON `ErrorBody` with `code` and the code's status.
fn assert_error(what: &str, (status, headers, body): &(StatusCode, HeaderMap, Bytes), code: ErrorCode) {
    assert_eq!(headers.get(CONTENT_TYPE).map(|v| v.as_bytes()), Some(&b"application/json"[..]), "{what}");
    let e: ErrorBody = serde_json::from_slice(body).unwrap_or_else(|_| panic!("{what}: not JSON: {body:?}"));
    assert_eq!((e.code, e.leaf_code), (code, code.leaf_code()), "{what}: {}", e.message);
    assert_eq!(*status, leaf_node::internals::status_of(code), "{what}");
    assert!(!e.message.is_empty(), "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_router_answers_405_with_allow_and_404_as_json_on_every_area() {
    let dir = TempDir::new().unwrap();
    let (node, _c) = start(config(&dir)).await;
    let addr = node.http_addr();
    for (area, method, path, allow) in [
        ("ids", Method::POST, "/api/segment/get/leaf-segment-test", "GET,HEAD"),
        ("ids", Method::DELETE, "/decodeSnowflakeId?snowflakeId=1", "GET,HEAD"),
        ("monitor", Method::PUT, "/health", "GET,HEAD"),
        ("monitor", Method::POST, "/openapi.json", "GET,HEAD"),
        ("admin", Method::DELETE, "/admin/tags", "GET,HEAD,POST"),
        ("admin", Method::POST, "/admin/tags/leaf-segment-test", "GET,HEAD,PATCH"),
        ("cluster", Method::GET, "/admin/cluster/nodes/1/promote", "POST"),
        ("cluster", Method::POST, "/admin/cluster/nodes/1", "DELETE"),
    ] {
        let what = format!("{area}: {method} {path}");
        let answer = call(addr, method, path, "").await;
        assert_error(&what, &answer, ErrorCode::MethodNotAllowed);
        assert_eq!(answer.1.get(ALLOW).map(|v| v.to_str().unwrap()), Some(allow), "{what}");
        let e: ErrorBody = serde_json::from_slice(&answer.2).unwrap();
        assert!(e.message.contains(allow), "{what}: {}", e.message);
    }
    for path in ["/nothing/here", "/api", "/admin/nothing", "/internals"] {
        assert_error(path, &call(addr, Method::GET, path, "").await, ErrorCode::NotFound);
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejections_and_the_body_limit_are_json_errors() {
    let dir = TempDir::new().unwrap();
    let cfg = Config { http: HttpConfig { max_body_bytes: 1024, ..Default::default() }, ..config(&dir) };
    let (node, _c) = start(cfg).await;
    let addr = node.http_addr();
    for (what, method, path, body, code) in [
        ("not UTF-8 in the path", Method::GET, "/api/segment/get/%FF", "", ErrorCode::InvalidTag),
        ("not UTF-8 in a node ID", Method::DELETE, "/admin/cluster/nodes/%FF", "", ErrorCode::InvalidRequest),
        (
            "a node ID above int64",
            Method::DELETE,
            "/admin/cluster/nodes/9223372036854775808",
            "",
            ErrorCode::InvalidRequest,
        ),
        ("an unknown health mode", Method::GET, "/health?mode=bogus", "", ErrorCode::InvalidRequest),
        ("a non-numeric node filter", Method::GET, "/admin/allocations?node=x", "", ErrorCode::InvalidRequest),
        (
            "a node filter above int64",
            Method::GET,
            "/admin/allocations?node=9223372036854775808",
            "",
            ErrorCode::InvalidRequest,
        ),
        ("a count that is not a number", Method::GET, "/api/snowflake/get/k?count=x", "", ErrorCode::InvalidCount),
        ("broken JSON", Method::POST, "/admin/tags", "{\"tag\":", ErrorCode::InvalidRequest),
        ("a fractional step", Method::POST, "/admin/tags", r#"{"tag":"f","step":1.5}"#, ErrorCode::InvalidRequest),
        (
            "a PATCH with only nulls",
            Method::PATCH,
            "/admin/tags/leaf-segment-test",
            r#"{"step":null}"#,
            ErrorCode::InvalidRequest,
        ),
    ] {
        assert_error(what, &call(addr, method, path, body).await, code);
    }
    // An integral number in float notation is an integer (as JSON Schema says).
    let (s, _, b) = call(addr, Method::POST, "/admin/tags", r#"{"tag":"float-step","step":1e3,"max_id":5.0}"#).await;
    assert_eq!(s, StatusCode::CREATED, "{}", String::from_utf8_lossy(&b));
    // Over the limit, declared up front (tower-http's limit) ...
    let big: &'static str =
        Box::leak(format!(r#"{{"tag":"big","step":5,"description":"{}"}}"#, "d".repeat(2000)).into_boxed_str());
    let answer = call(addr, Method::POST, "/admin/tags", big).await;
    assert_error("declared length over the limit", &answer, ErrorCode::PayloadTooLarge);
    // ... or streamed without a length (found while reading).
    let chunks = futures::stream::iter(
        (0..8).map(|_| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(vec![b' '; 256])))),
    );
    let req = hyper::Request::post("/admin/tags")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(StreamBody::new(chunks))
        .unwrap();
    assert!(req.headers().get(CONTENT_LENGTH).is_none());
    let answer = send(addr, req).await;
    assert_error("streamed body over the limit", &answer, ErrorCode::PayloadTooLarge);
    // Nothing above created a tag but the float-step one.
    let (_, _, b) = call(addr, Method::GET, "/db", "").await;
    let tags: Vec<leaf_api::types::TagInfo> = serde_json::from_slice(&b).unwrap();
    assert_eq!(tags.iter().map(|t| t.tag.as_str()).collect::<Vec<_>>(), ["float-step", "leaf-segment-test"]);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_openapi_document_is_the_committed_one() {
    // The committed document is a node's with an admin token (the production setup).
    let dir = TempDir::new().unwrap();
    let (node, _c) = start(leaf_node::Config { admin_token: Some(crate::support::TOKEN.into()), ..config(&dir) }).await;
    let (s, headers, body) = call(node.http_addr(), Method::GET, leaf_api::routes::OPENAPI, "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(headers.get(CONTENT_TYPE).unwrap(), "application/json");
    let committed = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json")).unwrap();
    assert!(body == committed, "GET /openapi.json differs from docs/openapi.json");
    let doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    node.shutdown().await;
}

/// A plain `GET` of an ID route takes the fast path ahead of the router; the same request with
/// a percent-escaped segment (which decodes to the same tag) takes the router. Both must answer
/// alike: IDs from the same tag, and byte-identical errors. Mutation-checked: a fast path that
/// skipped tag validation or read `count` differently fails here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_id_path_and_the_router_answer_alike() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let addr = node.http_addr();
    crate::support::wait_snowflake(&c, leaf_api::types::SnowflakeState::Serving, std::time::Duration::from_secs(15))
        .await;
    let get = |path: &'static str| call(addr, Method::GET, path, "");
    let id = |r: &(StatusCode, HeaderMap, Bytes)| -> i64 {
        assert_eq!(r.0, StatusCode::OK, "{:?}", r.2);
        assert_eq!(r.1.get(CONTENT_TYPE).map(|v| v.as_bytes()), Some(&b"text/plain; charset=utf-8"[..]));
        std::str::from_utf8(&r.2).unwrap().parse().unwrap()
    };
    // Same tag both ways: the router's ID comes after the fast path's, from the same buffer.
    let fast = id(&get("/api/segment/get/leaf-segment-test").await);
    let routed = id(&get("/api/segment/get/leaf%2Dsegment%2Dtest").await);
    assert!(routed > fast, "{routed} after {fast}");
    let fast = get("/api/segment/get/leaf-segment-test?count=3").await;
    let routed = get("/api/segment/get/leaf%2Dsegment%2Dtest?count=3").await;
    assert_eq!((fast.0, routed.0), (StatusCode::OK, StatusCode::OK));
    assert_eq!(std::str::from_utf8(&fast.2).unwrap().lines().count(), 3);
    assert_eq!(std::str::from_utf8(&routed.2).unwrap().lines().count(), 3);
    // Errors, byte for byte.
    for (fast_path, routed_path, code) in [
        ("/api/segment/get/bad!tag", "/api/segment/get/bad%21tag", ErrorCode::InvalidTag),
        ("/api/segment/get/no-such-tag", "/api/segment/get/no%2Dsuch%2Dtag", ErrorCode::TagNotFound),
        (
            "/api/segment/get/leaf-segment-test?count=0",
            "/api/segment/get/leaf%2Dsegment%2Dtest?count=0",
            ErrorCode::InvalidCount,
        ),
        (
            "/api/segment/get/leaf-segment-test?count=x",
            "/api/segment/get/leaf%2Dsegment%2Dtest?count=x",
            ErrorCode::InvalidCount,
        ),
        ("/api/snowflake/get/bad!key", "/api/snowflake/get/bad%21key", ErrorCode::InvalidTag),
        ("/api/snowflake/get/k?count=1000001", "/api/snowflake/get/%6B?count=1000001", ErrorCode::InvalidCount),
    ] {
        let (f, r) = (get(fast_path).await, get(routed_path).await);
        assert_error(fast_path, &f, code);
        assert_eq!((f.0, &f.2), (r.0, &r.2), "{fast_path} vs {routed_path}");
    }
    // Snowflake IDs both ways.
    let f = get("/api/snowflake/get/k").await;
    let r = get("/api/snowflake/get/%6B").await;
    assert!(id(&r) > id(&f));
}

/// One ID of a tag whose buffers hold one is answered at once (a ready future, no await); the
/// awaited path serves what needs a wait (here a monotonic tag's IDs, from the leader) and the
/// router an escaped path. All answer alike, and every answer is timed per route and status,
/// its IDs counted and its errors counted, whichever path it took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_answered_at_once_look_and_count_like_awaited_ones() {
    use leaf_api::profile::Profile;
    use leaf_api::types::CreateTagRequest;
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let addr = node.http_addr();
    let mono =
        CreateTagRequest { tag: "mono".into(), step: 5, profile: Some(Profile::Monotonic), ..Default::default() };
    c.create_tag(&mono).await.unwrap();
    crate::support::create_tag(&c, "fresh", 1000).await;
    let mut last = std::collections::HashMap::new();
    for (tag, path) in [
        ("fresh", "/api/segment/get/fresh"),
        ("fresh", "/api/segment/get/fresh"),
        ("fresh", "/api/segment/get/fr%65sh"),
        ("fresh", "/api/segment/get/fresh"),
        ("mono", "/api/segment/get/mono"),
        ("mono", "/api/segment/get/m%6Fno"),
        ("mono", "/api/segment/get/mono"),
    ] {
        let (status, headers, body) = call(addr, Method::GET, path, "").await;
        assert_eq!(status, StatusCode::OK, "{path}: {body:?}");
        assert_eq!(headers.get(CONTENT_TYPE).map(|v| v.as_bytes()), Some(&b"text/plain; charset=utf-8"[..]), "{path}");
        let length = body.len().to_string();
        assert_eq!(headers.get(CONTENT_LENGTH).map(|v| v.as_bytes()), Some(length.as_bytes()), "{path}");
        let id: i64 = std::str::from_utf8(&body).unwrap().parse().unwrap();
        if let Some(before) = last.insert(tag, id) {
            assert!(id > before, "{path}: {id} after {before}");
        }
    }
    assert_error("bad tag", &call(addr, Method::GET, "/api/segment/get/bad!tag", "").await, ErrorCode::InvalidTag);
    let (_, _, text) = call(addr, Method::GET, "/metrics", "").await;
    let text = String::from_utf8(text.to_vec()).unwrap();
    for needle in [
        "leaf_http_request_duration_seconds_count{route=\"/api/segment/get/{tag}\",status=\"200\"} 7",
        "leaf_http_request_duration_seconds_count{route=\"/api/segment/get/{tag}\",status=\"400\"} 1",
        "leaf_ids_served_total{mode=\"segment\",tag=\"fresh\"} 4",
        "leaf_errors_total{code=\"invalid_tag\"} 1",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    node.shutdown().await;
}
