//! gRPC on the node's listener: a tonic client (h2c and TLS) against a real node. Segment
//! ranges (sum = count, ascending, unique across calls, count 0 = 1, over the limit =
//! INVALID_ARGUMENT with `leaf-code`), unknown tag = NOT_FOUND, snowflake ranges and decode,
//! the standard health service; HTTP/1.1 and an HTTP/2 (h2c, and h2 over TLS by ALPN) plain
//! GET on the same port;
//! `[grpc] enabled = false`.
use std::collections::HashSet;

use leaf_api::grpc::health::health_check_response::ServingStatus;
use leaf_api::grpc::health::health_client::HealthClient;
use leaf_api::grpc::health::HealthCheckRequest;
use leaf_api::grpc::v1::id_service_client::IdServiceClient;
use leaf_api::grpc::v1::{DecodeSnowflakeRequest, GetSegmentIdsRequest, GetSnowflakeIdsRequest};
use leaf_api::ranges::IdRanges;
use leaf_api::tag::MAX_RANGE_BATCH;
use leaf_client::tls::TlsOptions;
use tonic::transport::Channel;
use tonic::Code;

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::*;
use crate::tls;
use leaf_api::types::SnowflakeState;
use leaf_node::config::Config;
use tempfile::TempDir;

const TAG: &str = "leaf-segment-test";

async fn channel(url: &str, tls: Option<rustls::ClientConfig>) -> Channel {
    leaf_loadgen::grpc::channel(url, tls).await.unwrap_or_else(|e| panic!("gRPC channel to {url}: {e}"))
}

async fn segment(c: &mut IdServiceClient<Channel>, tag: &str, count: u32) -> Result<IdRanges, tonic::Status> {
    c.get_segment_ids(GetSegmentIdsRequest { tag: tag.into(), count }).await.map(|r| r.into_inner().into())
}

fn leaf_code(s: &tonic::Status) -> &str {
    s.metadata().get("leaf-code").and_then(|v| v.to_str().ok()).unwrap_or("<none>")
}

async fn check(h: &mut HealthClient<Channel>, service: &str) -> Result<ServingStatus, tonic::Status> {
    let r = h.check(HealthCheckRequest { service: service.into() }).await?;
    Ok(r.into_inner().status())
}

/// What every node answers alike over h2c or TLS: IDs, errors, decode, health.
async fn exercise(ch: Channel) {
    let mut ids = IdServiceClient::new(ch.clone());
    let mut seen = HashSet::new();
    for count in [1000, 1, 2500, 1_000] {
        let r = segment(&mut ids, TAG, count).await.unwrap();
        r.validate(count as u64).unwrap_or_else(|e| panic!("count {count}: {e}: {r:?}"));
        for id in r.ids() {
            assert!(seen.insert(id), "ID {id} handed out twice");
        }
    }
    let one = segment(&mut ids, TAG, 0).await.unwrap();
    one.validate(1).unwrap();
    assert!(seen.insert(one.ranges[0].start));

    let big = segment(&mut ids, TAG, MAX_RANGE_BATCH + 1).await.unwrap_err();
    assert_eq!(big.code(), Code::InvalidArgument, "{big:?}");
    assert_eq!(leaf_code(&big), "invalid_count");
    let bad = segment(&mut ids, "no/slash", 1).await.unwrap_err();
    assert_eq!((bad.code(), leaf_code(&bad)), (Code::InvalidArgument, "invalid_tag"), "{bad:?}");
    let empty = segment(&mut ids, "", 1).await.unwrap_err();
    assert_eq!((empty.code(), leaf_code(&empty)), (Code::InvalidArgument, "invalid_tag"), "{empty:?}");
    // A request message above the node's 4 KiB limit is refused before it is buffered.
    let huge = segment(&mut ids, &"x".repeat(8 * 1024), 1).await.unwrap_err();
    assert_eq!(huge.code(), Code::OutOfRange, "{huge:?}");
    let unknown = segment(&mut ids, "grpc-no-such-tag", 1).await.unwrap_err();
    assert_eq!((unknown.code(), leaf_code(&unknown)), (Code::NotFound, "tag_not_found"), "{unknown:?}");

    let flakes: IdRanges = ids
        .get_snowflake_ids(GetSnowflakeIdsRequest { key: "grpc-test".into(), count: 5000 })
        .await
        .unwrap()
        .into_inner()
        .into();
    flakes.validate(5000).unwrap_or_else(|e| panic!("{e}: {flakes:?}"));
    let bad_key = ids.get_snowflake_ids(GetSnowflakeIdsRequest { key: "a b".into(), count: 1 }).await.unwrap_err();
    assert_eq!((bad_key.code(), leaf_code(&bad_key)), (Code::InvalidArgument, "invalid_tag"));
    let first = flakes.ranges[0].start;
    let parts = ids.decode_snowflake(DecodeSnowflakeRequest { id: first }).await.unwrap().into_inner();
    assert_eq!(parts.id, first);
    assert!(parts.timestamp_ms > 1_288_834_974_657, "{parts:?}");
    assert!(parts.timestamp.ends_with('Z'), "{parts:?}");
    assert!(parts.worker_id < 1024 && parts.sequence < 4096, "{parts:?}");
    let negative = ids.decode_snowflake(DecodeSnowflakeRequest { id: -1 }).await.unwrap_err();
    assert_eq!((negative.code(), leaf_code(&negative)), (Code::InvalidArgument, "invalid_request"));

    let mut health = HealthClient::new(ch);
    for service in ["", "leaf.v1.IdService", "segment", "snowflake"] {
        assert_eq!(check(&mut health, service).await.unwrap(), ServingStatus::Serving, "{service:?}");
    }
    let nope = check(&mut health, "nope").await.unwrap_err();
    assert_eq!(nope.code(), Code::NotFound);
    let mut watch = health.watch(HealthCheckRequest { service: String::new() }).await.unwrap().into_inner();
    let first = watch.message().await.unwrap().expect("a first status");
    assert_eq!(first.status(), ServingStatus::Serving);
    let mut unknown = health.watch(HealthCheckRequest { service: "nope".into() }).await.unwrap().into_inner();
    assert_eq!(unknown.message().await.unwrap().expect("a first status").status(), ServingStatus::ServiceUnknown);
}

/// A plain `GET` over HTTP/2 with prior knowledge (h2c): status and body.
async fn h2c_get(addr: SocketAddr, path: &str) -> (u16, String) {
    h2_get(tokio::net::TcpStream::connect(addr).await.unwrap(), addr, path).await
}

/// A plain `GET` over HTTP/2 on `io` (TCP, or TLS that negotiated `h2`): status and body.
async fn h2_get<I>(io: I, addr: SocketAddr, path: &str) -> (u16, String)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::{BodyExt, Empty};
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), hyper_util::rt::TokioIo::new(io))
            .await
            .unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::get(format!("http://{addr}{path}")).body(Empty::<bytes::Bytes>::new()).unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_and_http_share_the_plaintext_listener() {
    let dir = tempfile::tempdir().unwrap();
    let (node, http) = start(config(&dir)).await;
    wait_snowflake(&http, SnowflakeState::Serving, Duration::from_secs(15)).await;
    let addr = node.http_addr();
    exercise(channel(&format!("http://{addr}"), None).await).await;

    // HTTP/1.1 on the same port, as before.
    let id = http.segment_id(TAG).await.unwrap();
    assert!(id > 0);
    // HTTP/2 without gRPC: the same routes (the fast path and the router).
    let (status, body) = h2c_get(addr, "/api/segment/get/leaf-segment-test").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.parse::<i64>().unwrap() > id, "{body}");
    let (status, body) = h2c_get(addr, "/api/segment/get/leaf-segment-test?count=3&format=ranges").await;
    assert_eq!(status, 200, "{body}");
    let ranges: IdRanges = serde_json::from_str(&body).unwrap();
    ranges.validate(3).unwrap();
    let (status, _) = h2c_get(addr, "/health").await;
    assert_eq!(status, 200);
    let (status, body) = h2c_get(addr, "/no/such/path").await;
    assert_eq!(status, 404, "{body}");

    let metrics = http.metrics().await.unwrap();
    let ok = metrics
        .lines()
        .find(|l| l.starts_with(r#"leaf_grpc_calls_total{method="leaf.v1.IdService/GetSegmentIds",code="Ok"}"#))
        .unwrap_or_else(|| panic!("no gRPC call counter in\n{metrics}"));
    assert!(!ok.ends_with(" 0"), "{ok}");
    assert!(metrics.contains(r#"leaf_grpc_calls_total{method="leaf.v1.IdService/GetSegmentIds",code="NotFound"} 1"#));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_off_takes_the_http_path() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir);
    cfg.grpc.enabled = false;
    let (node, http) = start(cfg).await;
    let mut ids = IdServiceClient::new(channel(&format!("http://{}", node.http_addr()), None).await);
    let e = segment(&mut ids, TAG, 1).await.unwrap_err();
    // The HTTP path's 404 (a JSON body, no grpc-status), which the client reports as an error.
    assert_ne!(e.code(), Code::Ok);
    assert!(e.message().contains("404"), "{e:?}");
    assert!(http.segment_id(TAG).await.unwrap() > 0);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_over_tls_with_alpn_h2() {
    let pki = tls::pki();
    let data = tempfile::tempdir().unwrap();
    let (node, url) = tls::start_tls(&data, pki.path(), |_| {}).await;
    let https = tls::https_client(&url, &pki.path().join("ca.pem"));
    wait_snowflake(&https, SnowflakeState::Serving, Duration::from_secs(15)).await;
    let client_tls = TlsOptions::new().ca_file(pki.path().join("ca.pem")).client_config().unwrap();
    exercise(channel(&url, Some(client_tls.clone())).await).await;
    // HTTPS over HTTP/1.1 still answers on the same port.
    assert!(https.segment_id(TAG).await.unwrap() > 0);
    // ALPN: a client offering h2 alone gets HTTP/2, also for plain GETs; one offering both
    // (curl, browsers) keeps HTTP/1.1.
    let ca = pki.path().join("ca.pem");
    let both = tls_connect(node.http_addr(), &ca, &[b"h2", b"http/1.1"]).await;
    assert_eq!(both.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let h2 = tls_connect(node.http_addr(), &ca, &[b"h2"]).await;
    assert_eq!(h2.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (status, body) = h2_get(h2, node.http_addr(), "/api/segment/get/leaf-segment-test").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.parse::<i64>().unwrap() > 0, "{body}");
    // A gRPC client that does not trust the CA gets no connection.
    let untrusted = TlsOptions::new().ca_file(tls::pki().path().join("ca.pem")).client_config().unwrap();
    assert!(leaf_loadgen::grpc::channel(&url, Some(untrusted)).await.is_err());
    node.shutdown().await;
}

/// A TLS connection to `addr` trusting `ca`, offering the ALPN protocols `offered`.
async fn tls_connect(
    addr: SocketAddr,
    ca: &std::path::Path,
    offered: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut config = TlsOptions::new().ca_file(ca).client_config().unwrap();
    config.alpn_protocols = offered.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from(addr.ip().to_string()).unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await.unwrap()
}

/// `AdminService` creates tags with their profiles, with the admin token (and refuses without
/// it); `GetSegmentIdList` serves obfuscated tags, which `GetSegmentIds` refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_service_creates_profiled_tags_with_the_token_only() {
    use leaf_api::grpc::v1::admin_service_client::AdminServiceClient;
    use leaf_api::grpc::v1::{CreateTagRequest, DailyOptions, GetTagRequest, Profile};
    let dir = TempDir::new().unwrap();
    let (node, _c) = start(Config { admin_token: Some(TOKEN.into()), ..config(&dir) }).await;
    let ch = channel(&format!("http://{}", node.http_addr()), None).await;
    let mut admin = AdminServiceClient::new(ch.clone());
    let req = |tag: &str, profile: Profile| CreateTagRequest {
        tag: tag.into(),
        step: 100,
        profile: profile.into(),
        ..CreateTagRequest::default()
    };
    // No token, a wrong token: refused before anything is created.
    let e = admin.create_tag(req("mono", Profile::Monotonic)).await.unwrap_err();
    assert_eq!((e.code(), leaf_code(&e)), (Code::Unauthenticated, "unauthorized"), "{e:?}");
    let mut wrong = tonic::Request::new(req("mono", Profile::Monotonic));
    wrong.metadata_mut().insert("authorization", "Bearer nope".parse().unwrap());
    assert_eq!(admin.create_tag(wrong).await.unwrap_err().code(), Code::Unauthenticated);
    fn with_token<T>(r: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(r);
        r.metadata_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
        r
    }
    let tag = admin.create_tag(with_token(req("mono", Profile::Monotonic))).await.unwrap().into_inner();
    assert_eq!((tag.tag.as_str(), tag.profile()), ("mono", Profile::Monotonic));
    let daily = CreateTagRequest {
        daily: Some(DailyOptions { digits: 6, utc_offset: "+08:00".into() }),
        ..req("daily", Profile::Daily)
    };
    let d = admin.create_tag(with_token(daily)).await.unwrap().into_inner();
    assert_eq!(d.daily.map(|o| (o.digits, o.utc_offset)), Some((6, "+08:00".to_string())));
    let bad = CreateTagRequest { upper_bound: Some(5), ..req("daily-bound", Profile::Daily) };
    let e = admin.create_tag(with_token(bad)).await.unwrap_err();
    assert_eq!((e.code(), leaf_code(&e)), (Code::InvalidArgument, "invalid_request"), "{e:?}");
    admin.create_tag(with_token(req("obf", Profile::Obfuscated))).await.unwrap();
    let shown = admin.get_tag(with_token(GetTagRequest { tag: "obf".into() })).await.unwrap().into_inner();
    assert_eq!(shown.profile(), Profile::Obfuscated);
    let e = admin.get_tag(with_token(GetTagRequest { tag: "nope".into() })).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // IDs: monotonic as ranges, obfuscated only as a list.
    let mut ids = IdServiceClient::new(ch);
    let m = segment(&mut ids, "mono", 10).await.unwrap();
    m.validate(10).unwrap();
    let e = segment(&mut ids, "obf", 10).await.unwrap_err();
    assert_eq!((e.code(), leaf_code(&e)), (Code::FailedPrecondition, "wrong_profile"), "{e:?}");
    let list = ids.get_segment_id_list(GetSegmentIdsRequest { tag: "obf".into(), count: 500 }).await.unwrap();
    let list = list.into_inner().ids;
    assert_eq!(list.iter().collect::<HashSet<_>>().len(), 500);
    assert!(list.windows(2).any(|w| w[0] > w[1]), "obfuscated IDs came in order");
    // Archived, a tag serves nothing until it is restored.
    let archived = admin.archive_tag(with_token(GetTagRequest { tag: "mono".into() })).await.unwrap().into_inner();
    assert!(archived.archived_ms.is_some());
    assert_eq!(segment(&mut ids, "mono", 1).await.unwrap_err().code(), Code::NotFound);
    let restored = admin.restore_tag(with_token(GetTagRequest { tag: "mono".into() })).await.unwrap().into_inner();
    assert_eq!(restored.archived_ms, None);
    let again = segment(&mut ids, "mono", 10).await.unwrap();
    assert!(again.ranges[0].start >= m.ranges.last().unwrap().end, "{m:?} then {again:?}");
    // A batch: far larger than an ID request may be; the existing tag is reported.
    let tags: Vec<CreateTagRequest> =
        (0..3_000).map(|i| req(&format!("g-{i:04}"), Profile::Segment)).chain([req("obf", Profile::Segment)]).collect();
    let batch = leaf_api::grpc::v1::CreateTagsRequest { tags };
    let e = admin.create_tags(batch.clone()).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "{e:?}");
    let done = admin.create_tags(with_token(batch.clone())).await.unwrap().into_inner();
    assert_eq!((done.created.len(), done.existing), (3_000, vec!["obf".to_string()]));
    let again = admin.create_tags(with_token(batch)).await.unwrap().into_inner();
    assert_eq!((again.created.len(), again.existing.len()), (0, 3_001));
    assert_eq!(segment(&mut ids, "g-2999", 5).await.unwrap().ranges[0].start, 1);
    node.shutdown().await;
}

/// Scoped tokens over gRPC: the `authorization` metadata on IdService (scope, required
/// tokens, quota as RESOURCE_EXHAUSTED) and AdminService (the tags right on its patterns).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_carry_scoped_tokens() {
    use leaf_api::grpc::v1::admin_service_client::AdminServiceClient;
    use leaf_api::grpc::v1::{CreateTagRequest, GetTagRequest};
    use leaf_api::tokens::{CreateTokenRequest, Quota, Right, TagPattern};
    let dir = TempDir::new().unwrap();
    let mut cfg = Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    cfg.auth.require_token_for_ids = true;
    let (node, c) = start(cfg).await;
    create_tag(&c, "orders-eu", 100).await;
    create_tag(&c, "users", 100).await;
    let token = |name: &str, rights: Vec<Right>, quota| CreateTokenRequest {
        name: name.into(),
        rights,
        tags: vec![TagPattern::parse("orders-*").unwrap()],
        quota,
        ..Default::default()
    };
    let t = c.create_token(&token("svc", vec![Right::Ids, Right::Tags], None)).await.unwrap().bearer;
    let slow = Some(Quota { rate_per_sec: 1, burst: 2 });
    let s = c.create_token(&token("slow", vec![Right::Ids], slow)).await.unwrap().bearer;
    let with = |bearer: &str, tag: &str| {
        let mut r = tonic::Request::new(GetSegmentIdsRequest { tag: tag.into(), count: 10 });
        r.metadata_mut().insert("authorization", format!("Bearer {bearer}").parse().unwrap());
        r
    };
    let ch = channel(&format!("http://{}", node.http_addr()), None).await;
    let mut ids = IdServiceClient::new(ch.clone());
    let e = segment(&mut ids, "orders-eu", 10).await.unwrap_err();
    assert_eq!((e.code(), leaf_code(&e)), (Code::Unauthenticated, "unauthorized"), "{e:?}");
    let r: IdRanges = ids.get_segment_ids(with(&t, "orders-eu")).await.unwrap().into_inner().into();
    r.validate(10).unwrap();
    let e = ids.get_segment_ids(with(&t, "users")).await.unwrap_err();
    assert_eq!((e.code(), leaf_code(&e)), (Code::PermissionDenied, "forbidden"), "{e:?}");
    let e = ids.get_segment_id_list(with(&t, "users")).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let codes: Vec<Code> = futures::future::join_all((0..6).map(|_| {
        let mut ids = ids.clone();
        let r = with(&s, "orders-eu");
        async move { ids.get_segment_ids(r).await.map_or_else(|e| e.code(), |_| Code::Ok) }
    }))
    .await;
    assert!(codes.contains(&Code::ResourceExhausted), "{codes:?}");
    assert!(codes.iter().filter(|c| **c == Code::Ok).count() <= 3, "{codes:?}");
    // The admin service: the tags right, on the token's patterns only.
    let mut admin = AdminServiceClient::new(ch);
    let auth = |r: &mut tonic::metadata::MetadataMap| {
        r.insert("authorization", format!("Bearer {t}").parse().unwrap());
    };
    let mut get = tonic::Request::new(GetTagRequest { tag: "orders-eu".into() });
    auth(get.metadata_mut());
    assert!(admin.get_tag(get).await.is_ok());
    let mut get = tonic::Request::new(GetTagRequest { tag: "users".into() });
    auth(get.metadata_mut());
    assert_eq!(admin.get_tag(get).await.unwrap_err().code(), Code::PermissionDenied);
    let mut create = tonic::Request::new(CreateTagRequest { tag: "users-2".into(), step: 10, ..Default::default() });
    auth(create.metadata_mut());
    assert_eq!(admin.create_tag(create).await.unwrap_err().code(), Code::PermissionDenied);
    node.shutdown().await;
}

/// Health `Watch` streams need no credential and each polls the node: before, anyone could
/// open as many as the connections allowed. Past `grpc.max_health_watches`, one more is
/// refused with `RESOURCE_EXHAUSTED`; closing one makes room, and `Check` always answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_watch_streams_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(&dir);
    cfg.grpc.max_health_watches = 2;
    let (node, _http) = start(cfg).await;
    let mut health = HealthClient::new(channel(&format!("http://{}", node.http_addr()), None).await);
    let watch =
        |mut h: HealthClient<Channel>| async move { h.watch(HealthCheckRequest { service: String::new() }).await };
    let mut open = Vec::new();
    for _ in 0..2 {
        let mut stream = watch(health.clone()).await.unwrap().into_inner();
        stream.message().await.unwrap().expect("a first status");
        open.push(stream);
    }
    let refused = watch(health.clone()).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    check(&mut health, "").await.expect("Check is not bounded");
    // A closed stream frees its place (the server sees the reset a moment later).
    drop(open.pop());
    crate::support::eventually("room after a stream closed", Duration::from_secs(10), || async {
        match watch(health.clone()).await {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Code::ResourceExhausted => Err(e),
            Err(e) => panic!("no room after a stream closed: {e:?}"),
        }
    })
    .await;
    node.shutdown().await;
}
