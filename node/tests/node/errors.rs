//! Every error status and code, admin authentication, a source address not on this host, and
//! the connection cap.
use std::time::Duration;

use crate::support::*;
use leaf_api::types::{CreateTagRequest, UpdateTagRequest};
use leaf_api::ErrorCode;
use leaf_client::{Method, StatusCode};
use leaf_node::config::Config;
use serde_json::json;
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_statuses_and_codes() {
    let dir = TempDir::new().unwrap();
    let cfg =
        Config { http: leaf_node::config::HttpConfig { max_body_bytes: 2048, ..Default::default() }, ..config(&dir) };
    let (node, c) = start(cfg).await;
    let cases: Vec<(Method, String, Option<serde_json::Value>, StatusCode, ErrorCode)> = vec![
        (Method::GET, "/api/segment/get/nope".into(), None, StatusCode::NOT_FOUND, ErrorCode::TagNotFound),
        (Method::GET, "/api/segment/get/bad%20tag".into(), None, StatusCode::BAD_REQUEST, ErrorCode::InvalidTag),
        (Method::GET, "/api/segment/get/".into(), None, StatusCode::BAD_REQUEST, ErrorCode::InvalidTag),
        (Method::GET, "/api/segment/get/a/b".into(), None, StatusCode::BAD_REQUEST, ErrorCode::InvalidTag),
        (
            Method::GET,
            format!("/api/segment/get/{}", "x".repeat(129)),
            None,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidTag,
        ),
        (
            Method::GET,
            "/api/segment/get/leaf-segment-test?count=0".into(),
            None,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidCount,
        ),
        (
            Method::GET,
            "/api/segment/get/leaf-segment-test?count=1000001".into(),
            None,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidCount,
        ),
        (
            Method::GET,
            "/api/segment/get/leaf-segment-test?count=ten".into(),
            None,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidCount,
        ),
        (
            Method::POST,
            "/api/segment/get/leaf-segment-test".into(),
            None,
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::MethodNotAllowed,
        ),
        (Method::DELETE, "/admin/tags".into(), None, StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed),
        (Method::POST, "/health".into(), None, StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed),
        (Method::GET, "/nothing/here".into(), None, StatusCode::NOT_FOUND, ErrorCode::NotFound),
        (Method::GET, "/admin/nothing".into(), None, StatusCode::NOT_FOUND, ErrorCode::NotFound),
        (Method::GET, "/admin/tags/nope".into(), None, StatusCode::NOT_FOUND, ErrorCode::TagNotFound),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "leaf-segment-test", "step": 5})),
            StatusCode::CONFLICT,
            ErrorCode::TagExists,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "bad tag", "step": 5})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidTag,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s0", "step": 0})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s1", "step": 5, "max_id": -1})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s2", "step": 5, "bogus": 1})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s3"})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s4", "step": 5, "description": "d".repeat(1500)})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::POST,
            "/admin/tags".into(),
            Some(json!({"tag": "s5", "step": 5, "description": "d".repeat(4000)})),
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
        ),
        (
            Method::PATCH,
            "/admin/tags/leaf-segment-test".into(),
            Some(json!({})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::PATCH,
            "/admin/tags/leaf-segment-test".into(),
            Some(json!({"step": -3})),
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
        ),
        (
            Method::PATCH,
            "/admin/tags/nope".into(),
            Some(json!({"step": 3})),
            StatusCode::NOT_FOUND,
            ErrorCode::TagNotFound,
        ),
    ];
    for (method, path, body, status, code) in cases {
        let (s, e) = error_of(&c, method.clone(), &path, body).await;
        assert_eq!((s, e.code), (status, code), "{method} {path}: {}", e.message);
        assert_eq!(e.leaf_code, code.leaf_code());
        assert!(!e.message.is_empty());
    }
    // Malformed JSON (not representable as a serde_json::Value) through a raw request.
    let (s, e) = raw_post(node.http_addr(), "/admin/tags", "{not json").await;
    assert_eq!((s, e.code), (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest));
    // 405 names the allowed methods.
    let (s, _) = error_of(&c, Method::PUT, "/admin/tags", None).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
    // Membership changes that do not fit the cluster as it stands: 409, never 400. The one
    // voter cannot be removed; a node without a cluster secret cannot replicate to a learner.
    let (s, e) = error_of(&c, Method::DELETE, "/admin/cluster/nodes/1", None).await;
    assert_eq!((s, e.code), (StatusCode::CONFLICT, ErrorCode::MembershipConflict), "{}", e.message);
    let learner = json!({"node_id": 2, "addr": "127.0.0.1:1"});
    let (s, e) = error_of(&c, Method::POST, "/admin/cluster/learners", Some(learner)).await;
    assert_eq!((s, e.code), (StatusCode::CONFLICT, ErrorCode::MembershipConflict), "{}", e.message);
    // Nothing above changed the stored tags.
    let tags = c.db().await.unwrap();
    assert_eq!(tags.iter().map(|t| t.tag.as_str()).collect::<Vec<_>>(), ["leaf-segment-test"]);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_requires_the_token_when_configured() {
    let dir = TempDir::new().unwrap();
    let cfg = Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, good) = start(cfg).await;
    let base = format!("http://{}", node.http_addr());
    let (anonymous, wrong) = (client(&base, None), client(&base, Some("wrong-token-0123456789".into())));
    for c in [&anonymous, &wrong] {
        let req = CreateTagRequest { tag: "a".into(), step: 5, max_id: None, description: None, ..Default::default() };
        let e = c.create_tag(&req).await.unwrap_err();
        assert_eq!((e.status(), e.code()), (Some(StatusCode::UNAUTHORIZED), Some(ErrorCode::Unauthorized)));
        let e = c.tags().await.unwrap_err();
        assert_eq!(e.status(), Some(StatusCode::UNAUTHORIZED));
    }
    // The public API needs no token; a token that is given is checked, there too.
    assert_eq!(get_ids(&anonymous, "leaf-segment-test", None).await.len(), 1);
    let e = wrong.segment_id("leaf-segment-test").await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(StatusCode::UNAUTHORIZED), Some(ErrorCode::Unauthorized)));
    assert_eq!(get_ids(&good, "leaf-segment-test", None).await.len(), 1, "the admin token gets IDs");
    create_tag(&good, "a", 5).await;
    let info = good
        .update_tag("a", &UpdateTagRequest { step: Some(9), description: Some("x".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!((info.step, info.description.as_str()), (9, "x"));
    node.shutdown().await;
}

/// A `raft.source_ip` that is not an address of this host stops the node at start with a clear
/// error, instead of leaving every peer silently unreachable.
#[tokio::test]
async fn a_source_ip_not_on_this_host_is_refused_at_start() {
    let dir = TempDir::new().unwrap();
    let mut cfg = config(&dir);
    cfg.raft.source_ip = Some("192.0.2.1".parse().unwrap());
    match leaf_node::start(cfg).await {
        Ok(_) => panic!("a node started with a foreign source_ip"),
        Err(e) => assert!(e.to_string().contains("raft.source_ip 192.0.2.1"), "{e}"),
    }
    let mut cfg = config(&dir);
    cfg.raft.source_ip = Some("127.0.0.12".parse().unwrap());
    let (_node, c) = start(cfg).await;
    assert_eq!(get_ids(&c, "leaf-segment-test", None).await.len(), 1);
}

/// Connections beyond `http.max_connections` get a 503 with `Retry-After` and are closed; once
/// a connection closes its slot serves again. Idle keep-alive connections count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_get_503_with_retry_after() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir);
    cfg.http.max_connections = 3;
    let (node, _c) = start(cfg).await;
    let addr = node.http_addr();
    async fn get(stream: &mut tokio::net::TcpStream) -> String {
        stream.write_all(b"GET /health?mode=segment HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.unwrap().unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
    let mut open = Vec::new();
    for _ in 0..3 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        assert!(get(&mut s).await.starts_with("HTTP/1.1 200"), "a connection under the cap is served");
        open.push(s);
    }
    let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
    let answer = get(&mut extra).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
    assert!(answer.contains("\"code\":\"unavailable\""), "{answer}");
    // Closed by the node.
    let mut rest = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), extra.read_to_end(&mut rest)).await.unwrap().unwrap_or(0);
    assert_eq!(n, 0, "the refused connection stays open");
    // A freed slot serves again.
    drop(open.pop());
    let reused = || async {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        get(&mut s).await.starts_with("HTTP/1.1 200")
    };
    crate::support::until("the freed slot is reused", Duration::from_secs(5), reused).await;
    node.shutdown().await;
}

/// A body over the limit is answered before it is read, and the node then closes the
/// connection: the 413 says `Connection: close`, so a client does not keep the connection for
/// its next request (which would fail as "connection closed before message completed"). Both
/// limits: the public one and the batch route's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_closes_the_connection_and_says_so() {
    use http_body_util::{BodyExt, Full};
    let dir = TempDir::new().unwrap();
    let http =
        leaf_node::config::HttpConfig { max_body_bytes: 2048, max_batch_body_bytes: 64 * 1024, ..Default::default() };
    let (node, c) = start(Config { http, ..config(&dir) }).await;
    let big = |n: usize| bytes::Bytes::from(json!({"tags": [{"tag": "x".repeat(n), "step": 1}]}).to_string());
    for (path, body) in [("/admin/tags", big(4_000)), (leaf_api::routes::ADMIN_TAGS_BATCH, big(70_000))] {
        let stream = tokio::net::TcpStream::connect(node.http_addr()).await.unwrap();
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
        let conn = tokio::spawn(conn);
        let req = hyper::Request::post(path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body))
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        assert_eq!(resp.headers().get("connection").map(|v| v.as_bytes()), Some(&b"close"[..]), "{path}");
        let b = resp.into_body().collect().await.unwrap().to_bytes();
        let e: leaf_api::ErrorBody = serde_json::from_slice(&b).unwrap();
        assert_eq!(e.code, ErrorCode::PayloadTooLarge, "{path}");
        // The connection ends (the node closed it), rather than waiting for a next request.
        tokio::time::timeout(Duration::from_secs(5), conn).await.expect("the connection stays open").unwrap().ok();
    }
    // The client's pooled connections are unharmed: its next call is answered.
    assert!(c.tags().await.is_ok());
    node.shutdown().await;
}
