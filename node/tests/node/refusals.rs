//! What a refusal says, and what a token may read (issue 52):
//! - every admin refusal of a scoped token names the right it asked for (template and backup
//!   refusals said "managing tokens needs…"), a batch refused for `max_tags` says it created
//!   nothing, and an `ids`-only token's 403 does not name a template it may not see;
//! - the attack: a `cluster` token scoped to `none-*` read `/admin/allocations` of every tag,
//!   obfuscated ones included, whose segments count their IDs. Now a token sees the
//!   allocations of its own tags, never of an obfuscated one;
//! - every route of the route table (`leaf_api::routes::TABLE`) is refused as its row declares,
//!   and a path under `/admin` that no row declares needs the root credentials (issue 54);
//! - a backup: on a node without an admin token, a loopback caller is root (it may mint a
//!   token, which is more), so it takes one; once the node has an admin token, nobody without
//!   the root credentials does.
use leaf_api::profile::Profile;
use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
use leaf_api::types::{CreateTagRequest, CreateTagsRequest};
use leaf_api::ErrorCode;
use leaf_client::Method;
use tempfile::TempDir;

use crate::support::{client, config, error_of, start, TOKEN};

/// A node with the admin token, and its admin client.
async fn node(dir: &TempDir) -> (leaf_node::NodeHandle, leaf_client::Client) {
    start(leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(dir) }).await
}

/// A client of a token with `rights` on `patterns`.
async fn token(
    node: &leaf_node::NodeHandle,
    admin: &leaf_client::Client,
    rights: &[Right],
    patterns: &[&str],
    max_tags: Option<u32>,
) -> leaf_client::Client {
    let req = CreateTokenRequest {
        name: format!("tenant-{}", rand::random::<u32>()),
        rights: rights.to_vec(),
        tags: patterns.iter().map(|p| TagPattern::parse(p).unwrap()).collect(),
        max_tags,
        ..Default::default()
    };
    let issued = admin.create_token(&req).await.unwrap();
    client(&format!("http://{}", node.http_addr()), Some(issued.bearer))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_names_the_right_it_asked_for() {
    let dir = TempDir::new().unwrap();
    let (node, admin) = node(&dir).await;
    let ids_only = token(&node, &admin, &[Right::Ids], &["x-*"], None).await;
    for (method, path, names) in [
        (Method::GET, "/admin/tags", "'tags' right"),
        (Method::GET, "/admin/allocations", "'cluster' right"),
        (Method::GET, "/admin/audit", "'cluster' right"),
        (Method::GET, "/admin/dashboard", "'monitor' right"),
        (Method::GET, "/admin/tokens", "managing tokens"),
        (Method::GET, "/admin/templates", "managing tag templates"),
        (Method::GET, "/admin/backup", "taking a backup"),
    ] {
        let (status, e) = error_of(&ids_only, method, path, None).await;
        assert_eq!((status.as_u16(), e.code), (403, ErrorCode::Forbidden), "{path}: {}", e.message);
        assert!(e.message.contains(names), "{path}: {:?} does not name {names:?}", e.message);
        if !names.ends_with("right") {
            assert!(!e.message.contains("managing tokens") || path == "/admin/tokens", "{path}: {}", e.message);
        }
    }
    // A template's tag, asked for by a token without the tags right: the right, not the
    // template, is named.
    let template = serde_json::json!({"pattern": "x-*-inv", "step": 10});
    let r = admin.raw(Method::PUT, "/admin/templates/secret-plan", Some(template.to_string().into())).await.unwrap();
    assert!(r.status.is_success(), "{:?}", r.body);
    let e = ids_only.segment_id("x-1-inv").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Forbidden), "{e}");
    assert!(e.to_string().contains("'tags' right") && !e.to_string().contains("secret-plan"), "{e}");
    // A batch past max_tags says it created none, and how far the token got.
    let budget = token(&node, &admin, &[Right::Tags], &["b-*"], Some(5)).await;
    let batch = CreateTagsRequest {
        tags: (0..6).map(|i| CreateTagRequest { tag: format!("b-{i}"), step: 10, ..Default::default() }).collect(),
    };
    let e = budget.create_tags(&batch).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Forbidden), "{e}");
    let m = e.to_string();
    assert!(m.contains("max_tags") && m.contains("has created 0") && m.contains("none was created"), "{m}");
    assert!(admin.tag("b-0").await.is_err(), "nothing was created");
    node.shutdown().await;
}

/// The policy of every row, enforced: a token with every right but the one a route needs is
/// refused with the right named; a root-only route refuses a token with every right, naming
/// what it does; a monitor view that is not public needs the `monitor` right. A path under
/// `/admin` that no row declares is refused to a token with every right (deny by default),
/// and a wrong method on a declared path is refused by the path's policy before its 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_refused_as_its_table_row_declares() {
    use leaf_api::routes::{self, Access};
    let dir = TempDir::new().unwrap();
    let (node, admin) = node(&dir).await;
    let all = token(&node, &admin, &Right::ALL, &["*"], None).await;
    let mut without = Vec::new();
    for r in Right::ALL {
        let others: Vec<Right> = Right::ALL.into_iter().filter(|o| *o != r).collect();
        without.push((r, token(&node, &admin, &others, &["*"], None).await));
    }
    let config = leaf_node::Config::default();
    let mut checked = 0;
    for row in routes::TABLE {
        let (caller, names) = match row.access {
            Access::Right(r) => (&without.iter().find(|(w, _)| *w == r).unwrap().1, format!("'{}' right", r.as_str())),
            Access::Monitor(view) if !config.auth.is_public(view) => {
                (&without.iter().find(|(w, _)| *w == Right::Monitor).unwrap().1, "'monitor' right".to_string())
            }
            Access::Root(what) => (&all, what.to_string()),
            _ => continue,
        };
        let path = routes::fill(row.template, &vec!["x"; row.template.matches('{').count()]);
        let method = Method::from_bytes(row.method.as_str().as_bytes()).unwrap();
        let (status, e) = error_of(caller, method, &path, None).await;
        let shown = format!("{} {path}", row.method.as_str());
        assert_eq!((status.as_u16(), e.code), (403, ErrorCode::Forbidden), "{shown}: {}", e.message);
        assert!(e.message.contains(&names), "{shown}: {:?} does not name {names:?}", e.message);
        checked += 1;
    }
    assert!(checked >= 28, "only {checked} rows checked");
    // Deny by default.
    let (status, e) = error_of(&all, Method::GET, "/admin/not-declared", None).await;
    assert_eq!((status.as_u16(), e.code), (403, ErrorCode::Forbidden), "{}", e.message);
    assert!(e.message.contains("an undeclared admin endpoint"), "{}", e.message);
    let (status, _) = error_of(&admin, Method::GET, "/admin/not-declared", None).await;
    assert_eq!(status.as_u16(), 404);
    // A method the path does not answer: its policy first, then 405.
    let tags = &without.iter().find(|(w, _)| *w == Right::Cluster).unwrap().1;
    let (status, _) = error_of(tags, Method::PUT, "/admin/tags", None).await;
    assert_eq!(status.as_u16(), 405);
    let no_tags = &without.iter().find(|(w, _)| *w == Right::Tags).unwrap().1;
    let (status, _) = error_of(no_tags, Method::PUT, "/admin/tags", None).await;
    assert_eq!(status.as_u16(), 403);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_never_reads_the_allocations_of_an_obfuscated_tag_or_of_others_tags() {
    let dir = TempDir::new().unwrap();
    let (node, admin) = node(&dir).await;
    let req = |tag: &str, profile| CreateTagRequest { tag: tag.into(), step: 10, profile, ..Default::default() };
    for (tag, profile) in [("orders", None), ("none-plain", None), ("none-hidden", Some(Profile::Obfuscated))] {
        admin.create_tag(&req(tag, profile)).await.unwrap();
        admin.segment_ids(tag, 5).await.unwrap();
    }
    let all = admin.allocations(None, None).await.unwrap();
    let tags = |j: &leaf_api::types::AllocationJournal| {
        let mut t: Vec<String> = j.allocations.iter().map(|a| a.tag.clone()).collect();
        t.dedup();
        t.sort();
        t.dedup();
        t
    };
    for t in ["orders", "none-plain", "none-hidden"] {
        assert!(tags(&all).iter().any(|x| x == t), "the admin sees {t}: {:?}", tags(&all));
    }
    let cluster = token(&node, &admin, &[Right::Cluster], &["none-*"], None).await;
    let seen = cluster.allocations(None, None).await.unwrap();
    assert_eq!(tags(&seen), ["none-plain"], "only its own tags, and no obfuscated one");
    let hidden = cluster.allocations(Some("none-hidden"), None).await.unwrap();
    assert!(hidden.allocations.is_empty(), "{hidden:?}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_takes_the_root_credentials_and_loopback_is_root_only_without_an_admin_token() {
    let dir = TempDir::new().unwrap();
    // No admin token: a loopback caller is root, and takes a backup.
    let (node, c) = start(config(&dir)).await;
    let r = c.raw(Method::GET, "/admin/backup", None).await.unwrap();
    assert_eq!(r.status.as_u16(), 200, "{:?}", &r.body[..r.body.len().min(200)]);
    node.shutdown().await;
    // An admin token: nobody without it.
    let dir = TempDir::new().unwrap();
    let (node, admin) = start(leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) }).await;
    let anonymous = client(&format!("http://{}", node.http_addr()), None);
    let (status, e) = error_of(&anonymous, Method::GET, "/admin/backup", None).await;
    assert_eq!((status.as_u16(), e.code), (401, ErrorCode::Unauthorized), "{}", e.message);
    let cluster = token(&node, &admin, &[Right::Cluster, Right::Tags, Right::Monitor, Right::Ids], &["*"], None).await;
    let (status, e) = error_of(&cluster, Method::GET, "/admin/backup", None).await;
    assert_eq!((status.as_u16(), e.code), (403, ErrorCode::Forbidden), "{}", e.message);
    assert!(e.message.contains("taking a backup"), "{}", e.message);
    assert_eq!(admin.raw(Method::GET, "/admin/backup", None).await.unwrap().status.as_u16(), 200);
    node.shutdown().await;
}
