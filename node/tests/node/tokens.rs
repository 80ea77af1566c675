//! Scoped tokens on one node: scope by right and tag pattern on every ID path (fast path,
//! router, ranges), the admin API's rights, quotas (429 with `Retry-After`, per-token
//! metrics), revocation and rotation, tokens required for IDs, the audit trail, and every
//! refused input.
use leaf_api::audit::{Actor, AuditAction, AuditFilter, AuditKind};
use leaf_api::tokens::{CreateTokenRequest, IssuedToken, Quota, Right, RotateTokenRequest, TagPattern, TokenId};
use leaf_api::types::{CreateTagRequest, UpdateTagRequest};
use leaf_api::ErrorCode;
use leaf_client::{Client, Method, StatusCode};
use serde_json::json;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{client, config, create_tag, error_of, start, TOKEN};

fn pats(p: &[&str]) -> Vec<TagPattern> {
    p.iter().map(|p| TagPattern::parse(p).unwrap()).collect()
}

async fn issue(admin: &Client, name: &str, rights: &[Right], tags: &[&str], quota: Option<Quota>) -> IssuedToken {
    let req = CreateTokenRequest {
        name: name.into(),
        rights: rights.to_vec(),
        tags: pats(tags),
        quota,
        ..Default::default()
    };
    admin.create_token(&req).await.unwrap_or_else(|e| panic!("create token {name}: {e}"))
}

/// The status and code of a call that must fail.
fn refused<T: std::fmt::Debug>(r: Result<T, leaf_client::ClientError>) -> (Option<StatusCode>, Option<ErrorCode>) {
    let e = r.unwrap_err();
    (e.status(), e.code())
}

const FORBIDDEN: (Option<StatusCode>, Option<ErrorCode>) = (Some(StatusCode::FORBIDDEN), Some(ErrorCode::Forbidden));
const UNAUTHORIZED: (Option<StatusCode>, Option<ErrorCode>) =
    (Some(StatusCode::UNAUTHORIZED), Some(ErrorCode::Unauthorized));

/// One plain HTTP/1.1 request with `bearer`, answered in full (status line and headers too).
async fn raw_http(addr: std::net::SocketAddr, path: &str, bearer: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {bearer}\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_scoped_to_a_prefix_gets_its_tags_ids_and_nothing_else() {
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, admin) = start(cfg).await;
    let base = format!("http://{}", node.http_addr());
    for t in ["orders-eu", "orders-us", "users"] {
        create_tag(&admin, t, 10).await;
    }
    let issued = issue(&admin, "orders-svc", &[Right::Ids], &["orders-*"], None).await;
    assert!(issued.bearer.starts_with(&format!("leaf_{}_", issued.token.id)), "{}", issued.bearer);
    let t = client(&base, Some(issued.bearer.clone()));
    // Every ID path: the fast path, batches, ranges, the router (an escaped path), snowflake.
    assert!(t.segment_id("orders-eu").await.is_ok());
    assert_eq!(t.segment_ids("orders-us", 5).await.unwrap().len(), 5);
    assert!(t.segment_ranges("orders-eu", 100).await.is_ok());
    let r = t.raw(Method::GET, "/api/segment/get/orders%2Deu", None).await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    crate::support::wait_snowflake(
        &admin,
        leaf_api::types::SnowflakeState::Serving,
        std::time::Duration::from_secs(20),
    )
    .await;
    t.snowflake_id("k").await.expect("ids covers snowflake IDs");
    assert_eq!(refused(t.segment_id("users").await), FORBIDDEN);
    assert_eq!(refused(t.segment_ranges("users", 10).await), FORBIDDEN);
    let (status, e) = error_of(&t, Method::GET, "/api/segment/get/user%73", None).await;
    assert_eq!((status, e.code), (StatusCode::FORBIDDEN, ErrorCode::Forbidden), "{}", e.message);
    assert!(e.message.contains(&issued.token.id.to_string()) && !e.message.contains(&issued.bearer), "{}", e.message);
    // No admin right: tags and the audit trail are closed; tokens are for the admin token only.
    assert_eq!(refused(t.tags().await), FORBIDDEN);
    assert_eq!(refused(t.audit(&AuditFilter::default(), None, None).await), FORBIDDEN);
    assert_eq!(refused(t.tokens().await), FORBIDDEN);

    // A token with the tags right sees and manages its tags only, and its changes are audited.
    let m = issue(&admin, "orders-admin", &[Right::Tags], &["orders-*"], None).await;
    let mc = client(&base, Some(m.bearer.clone()));
    let listed: Vec<String> = mc.tags().await.unwrap().into_iter().map(|t| t.tag).collect();
    assert_eq!(listed, ["orders-eu", "orders-us"]);
    let req = CreateTagRequest { tag: "orders-apac".into(), step: 5, ..Default::default() };
    mc.create_tag(&req).await.unwrap();
    let req = CreateTagRequest { tag: "billing".into(), step: 5, ..Default::default() };
    assert_eq!(refused(mc.create_tag(&req).await), FORBIDDEN);
    assert_eq!(refused(mc.tag("users").await), FORBIDDEN);
    let upd = UpdateTagRequest { step: Some(20), description: None, ..Default::default() };
    assert_eq!(refused(mc.update_tag("users", &upd).await), FORBIDDEN);
    mc.update_tag("orders-eu", &upd).await.unwrap();
    assert_eq!(refused(mc.segment_id("orders-eu").await), FORBIDDEN, "tags is not ids");
    // A scoped token never manages tokens, whatever its rights.
    let all = issue(&admin, "everything", &[Right::Ids, Right::Tags, Right::Cluster], &["*"], None).await;
    let ac = client(&base, Some(all.bearer.clone()));
    let req = CreateTokenRequest {
        name: "escalate".into(),
        rights: vec![Right::Ids],
        tags: pats(&["*"]),
        quota: None,
        ..Default::default()
    };
    assert_eq!(refused(ac.create_token(&req).await), FORBIDDEN);
    assert_eq!(refused(ac.revoke_token(issued.token.id).await), FORBIDDEN);

    // The audit trail: who did what, filterable.
    let page = ac.audit(&AuditFilter::default(), None, None).await.unwrap();
    let by_token = |id: TokenId| page.records.iter().filter(move |r| r.actor.token() == Some(id));
    let created: Vec<_> = by_token(m.token.id).map(|r| r.action.clone()).collect();
    assert!(
        matches!(&created[..], [AuditAction::TagCreated { tag, .. }, AuditAction::TagUpdated { step: Some(20), .. }] if tag == "orders-apac"),
        "{created:?}"
    );
    let tokens_made = page.records.iter().filter(|r| r.action.kind() == AuditKind::TokenCreated).count();
    assert_eq!(tokens_made, 3);
    assert!(page
        .records
        .iter()
        .filter(|r| r.action.kind() == AuditKind::TokenCreated)
        .all(|r| r.actor == Actor::AdminToken));
    let seqs: Vec<u64> = page.records.iter().map(|r| r.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let only = AuditFilter { kind: Some(AuditKind::TagUpdated), tag: Some("orders-eu".into()), ..Default::default() };
    assert_eq!(admin.audit(&only, None, None).await.unwrap().records.len(), 1);
    let mine = AuditFilter { token: Some(m.token.id), ..Default::default() };
    let p = admin.audit(&mine, None, Some(1)).await.unwrap();
    assert_eq!(p.records.len(), 1);
    let next = admin.audit(&mine, p.next_after_seq, Some(10)).await.unwrap();
    // Its creation (made to it), the tag it created and the one it updated.
    assert_eq!(p.records.len() + next.records.len(), 3, "{p:?} {next:?}");
    // No secret is ever listed or recorded.
    let everything = format!("{:?}{:?}", admin.tokens().await.unwrap(), page);
    for b in [&issued.bearer, &m.bearer, &all.bearer] {
        assert!(!everything.contains(&b[22..]), "a secret leaked");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoked_and_rotated_tokens_are_refused_and_required_tokens_are_enforced() {
    let dir = TempDir::new().unwrap();
    let mut cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    cfg.auth.require_token_for_ids = true;
    let (node, admin) = start(cfg).await;
    let base = format!("http://{}", node.http_addr());
    let anonymous = client(&base, None);
    assert_eq!(refused(anonymous.segment_id("leaf-segment-test").await), UNAUTHORIZED);
    assert_eq!(refused(anonymous.snowflake_id("k").await), UNAUTHORIZED);
    assert!(admin.segment_id("leaf-segment-test").await.is_ok(), "the admin token gets IDs");
    let issued = issue(&admin, "svc", &[Right::Ids], &["leaf-*"], None).await;
    let id = issued.token.id;
    let t = client(&base, Some(issued.bearer.clone()));
    assert!(t.segment_id("leaf-segment-test").await.is_ok());

    // Rotation with a grace period: both secrets work; without one, the old is refused at once.
    let r = admin.rotate_token(id, &RotateTokenRequest { grace_ms: Some(60_000) }).await.unwrap();
    assert!(r.token.previous_secret_until_ms.is_some() && r.bearer != issued.bearer);
    let t2 = client(&base, Some(r.bearer.clone()));
    assert!(t.segment_id("leaf-segment-test").await.is_ok(), "old secret within its grace");
    assert!(t2.segment_id("leaf-segment-test").await.is_ok());
    let r3 = admin.rotate_token(id, &RotateTokenRequest { grace_ms: None }).await.unwrap();
    assert_eq!(refused(t2.segment_id("leaf-segment-test").await), UNAUTHORIZED);
    assert_eq!(refused(t.segment_id("leaf-segment-test").await), UNAUTHORIZED);
    let t3 = client(&base, Some(r3.bearer.clone()));
    assert!(t3.segment_id("leaf-segment-test").await.is_ok());

    // Revocation: refused at once on this node, for IDs and admin alike.
    let gone = admin.revoke_token(id).await.unwrap();
    assert_eq!(gone.id, id);
    assert_eq!(refused(t3.segment_id("leaf-segment-test").await), UNAUTHORIZED);
    assert_eq!(refused(t3.tags().await), UNAUTHORIZED);
    assert_eq!(refused(admin.revoke_token(id).await), (Some(StatusCode::NOT_FOUND), Some(ErrorCode::TokenNotFound)));
    assert_eq!(refused(admin.token(id).await).1, Some(ErrorCode::TokenNotFound));
    let kinds: Vec<AuditKind> = admin
        .audit(&AuditFilter { token: Some(id), ..Default::default() }, None, None)
        .await
        .unwrap()
        .records
        .iter()
        .map(|r| r.action.kind())
        .collect();
    use AuditKind::*;
    assert_eq!(kinds, [TokenCreated, TokenRotated, TokenRotated, TokenRevoked]);

    // Bearers that are not tokens at all.
    for bad in ["leaf_zz", "x", &format!("leaf_{id}_{}", "0".repeat(64))] {
        let c = client(&base, Some(bad.to_string()));
        assert_eq!(refused(c.segment_id("leaf-segment-test").await), UNAUTHORIZED, "{bad}");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_past_the_quota_gets_429_with_retry_after_and_is_counted() {
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, admin) = start(cfg).await;
    let base = format!("http://{}", node.http_addr());
    let quota = Quota { rate_per_sec: 1, burst: 5 };
    let issued = issue(&admin, "slow", &[Right::Ids], &["*"], Some(quota)).await;
    let t = client(&base, Some(issued.bearer.clone()));
    let mut ok = 0;
    let mut limited = 0;
    for _ in 0..20 {
        match t.segment_id("leaf-segment-test").await {
            Ok(_) => ok += 1,
            Err(e) => {
                assert_eq!((e.status(), e.code()), (Some(StatusCode::TOO_MANY_REQUESTS), Some(ErrorCode::RateLimited)));
                limited += 1;
            }
        }
    }
    // The burst, plus at most what a second of refill adds while the loop runs.
    assert!((5..=7).contains(&ok), "{ok} allowed");
    assert_eq!(ok + limited, 20);
    let answer = raw_http(node.http_addr(), "/api/segment/get/leaf-segment-test", &issued.bearer).await;
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("\r\nretry-after: 1\r\n"), "{answer}");
    // Other tokens and anonymous callers are not limited by it.
    let other = issue(&admin, "fast", &[Right::Ids], &["*"], None).await;
    assert!(client(&base, Some(other.bearer)).segment_ids("leaf-segment-test", 10).await.is_ok());
    // After a second, one more.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert!(t.segment_id("leaf-segment-test").await.is_ok());
    let metrics = admin.metrics().await.unwrap();
    let line = |outcome: &str| {
        let prefix =
            format!("leaf_token_requests_total{{token=\"{}\",name=\"slow\",outcome=\"{outcome}\"}} ", issued.token.id);
        metrics.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.parse::<u64>().ok())
    };
    assert_eq!(line("limited"), Some(limited + 1), "{metrics}");
    assert_eq!(line("allowed"), Some(ok + 1));
    // A revoked token's series go once another token is first used: they stay bounded.
    admin.revoke_token(issued.token.id).await.unwrap();
    let third = issue(&admin, "third", &[Right::Ids], &["*"], None).await;
    assert!(client(&base, Some(third.bearer)).segment_id("leaf-segment-test").await.is_ok());
    let metrics = admin.metrics().await.unwrap();
    assert!(!metrics.contains(&issued.token.id.to_string()), "{metrics}");
    assert!(metrics.contains(&format!("token=\"{}\"", third.token.id)));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_requests_are_validated() {
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, admin) = start(cfg).await;
    let bad = [
        json!({"name": "a b", "rights": ["ids"], "tags": ["*"]}),
        json!({"name": "", "rights": ["ids"], "tags": ["*"]}),
        json!({"name": "x", "rights": [], "tags": ["*"]}),
        json!({"name": "x", "rights": ["root"], "tags": ["*"]}),
        json!({"name": "x", "rights": ["ids"], "tags": []}),
        json!({"name": "x", "rights": ["ids"], "tags": ["a*b"]}),
        json!({"name": "x", "rights": ["ids"], "tags": ["a", "a"]}),
        json!({"name": "x", "rights": ["ids", "cluster", "ids"], "tags": ["a"]}),
        json!({"name": "x", "rights": ["ids", "tags", "cluster", "ids"], "tags": ["a"]}),
        json!({"name": "x", "rights": ["ids"], "tags": ["a","b","c","d","e","f","g","h","i"]}),
        json!({"name": "x", "rights": ["ids"], "tags": ["*"], "quota": {"rate_per_sec": 0, "burst": 1}}),
        json!({"name": "x", "rights": ["ids"], "tags": ["*"], "quota": {"rate_per_sec": 1}}),
        json!({"name": "x", "rights": ["ids"], "tags": ["*"], "extra": 1}),
        json!({"name": "x", "rights": ["ids"], "tags": ["*"], "id_quota": {"ids_per_sec": 0, "burst_ids": 1}}),
        json!({"name": "x", "rights": ["ids"], "tags": ["*"], "id_quota": {"ids_per_sec": 1, "burst_ids": 2000000000}}),
        json!({"name": "x", "rights": ["ids"], "tags": ["*"], "id_quota": {"ids_per_sec": 1}}),
        json!({"name": "x", "rights": ["ids"], "tags": ["*"], "id_quota": {"ids_per_sec": -1, "burst_ids": 1}}),
        json!({"name": "x", "rights": ["tags"], "tags": ["*"], "max_tags": 0}),
        json!({"name": "x", "rights": ["tags"], "tags": ["*"], "max_tags": 40001}),
        json!({"name": "x", "rights": ["tags"], "tags": ["*"], "max_tags": "10"}),
        json!({"name": "x", "rights": ["tags"], "tags": ["*"], "max_tags": 1.5}),
        json!([1, 2]),
    ];
    for body in bad {
        let (status, e) = error_of(&admin, Method::POST, "/admin/tokens", Some(body.clone())).await;
        assert_eq!((status, e.code), (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest), "{body}: {}", e.message);
    }
    for (path, code) in [
        ("/admin/tokens/xyz", ErrorCode::InvalidRequest),
        ("/admin/tokens/00000000000000FF", ErrorCode::InvalidRequest),
        ("/admin/tokens/00000000000000ff", ErrorCode::TokenNotFound),
        ("/admin/audit?limit=0", ErrorCode::InvalidRequest),
        ("/admin/audit?limit=1001", ErrorCode::InvalidRequest),
        ("/admin/audit?kind=nope", ErrorCode::InvalidRequest),
        ("/admin/audit?token=12", ErrorCode::InvalidRequest),
        ("/admin/audit?tag=a%20b", ErrorCode::InvalidTag),
        ("/admin/audit?since_ms=yesterday", ErrorCode::InvalidRequest),
        ("/admin/audit?after_seq=-1", ErrorCode::InvalidRequest),
        ("/admin/audit?after_seq=9223372036854775808", ErrorCode::InvalidRequest),
        ("/admin/audit?surprise=1", ErrorCode::InvalidRequest),
    ] {
        let (_, e) = error_of(&admin, Method::GET, path, None).await;
        assert_eq!(e.code, code, "{path}: {}", e.message);
    }
    let rotate = "/admin/tokens/00000000000000ff/rotate";
    let (_, e) = error_of(&admin, Method::POST, rotate, Some(json!({"grace_ms": -1}))).await;
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    let (_, e) = error_of(&admin, Method::POST, rotate, Some(json!({"grace_ms": 86_400_001}))).await;
    assert_eq!(e.code, ErrorCode::InvalidRequest);
    let (status, e) = error_of(&admin, Method::POST, rotate, Some(json!({}))).await;
    assert_eq!((status, e.code), (StatusCode::NOT_FOUND, ErrorCode::TokenNotFound));
    let (status, e) = error_of(&admin, Method::DELETE, "/admin/tokens/00000000000000ff", None).await;
    assert_eq!((status, e.code), (StatusCode::NOT_FOUND, ErrorCode::TokenNotFound));
    // Names are unique.
    issue(&admin, "dup", &[Right::Cluster], &[], None).await;
    let req = CreateTokenRequest {
        name: "dup".into(),
        rights: vec![Right::Cluster],
        tags: vec![],
        quota: None,
        ..Default::default()
    };
    assert_eq!(refused(admin.create_token(&req).await).1, Some(ErrorCode::TokenExists));
    node.shutdown().await;
}
