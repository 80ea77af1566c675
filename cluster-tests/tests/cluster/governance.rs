//! Scoped tokens on a 3-node TLS cluster with tokens required for IDs: a token scoped to
//! `orders-*` gets IDs for `orders-eu` and 403 for `users` on every node; revoked through a
//! follower, it is refused by each node as soon as that node has applied the leader's
//! commit (no retry, no grace), and every node's audit trail records the same changes. A tag
//! archived through a follower stops being served by each node once it applied the archive.
use std::time::Duration;

use leaf_api::audit::{Actor, AuditFilter, AuditKind};
use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
use leaf_api::ErrorCode;
use leaf_client::StatusCode;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_token_is_enforced_everywhere_and_refused_on_every_node_once_its_revocation_is_applied() {
    let (_lane, cluster, leader) = cluster_beside(3, "[auth]\nrequire_token_for_ids = true\n").await;
    let follower = if leader == 1 { 2 } else { 1 };
    create_tag(&cluster.client(leader), "orders-eu", 100).await;
    create_tag(&cluster.client(follower), "users", 100).await;
    let req = CreateTokenRequest {
        name: "orders-svc".into(),
        rights: vec![Right::Ids],
        tags: vec![TagPattern::parse("orders-*").unwrap()],
        quota: None,
        ..Default::default()
    };
    // Created through a follower: forwarded to the leader like any admin change.
    let issued = cluster.client(follower).create_token(&req).await.unwrap();
    let created_at = cluster.status(leader).await.unwrap().last_applied_index.unwrap();
    let timeout = Duration::from_secs(10);
    for id in 1..=3 {
        applied(&cluster, id, created_at).await;
        let t = cluster.client_with(id, Some(&issued.bearer), timeout);
        try_get_ids(&t, "orders-eu", Some(5)).await.unwrap_or_else(|e| panic!("node {id}: {e}"));
        let (status, code, _) = api_error(t.segment_id("users").await);
        assert_eq!((status, code), (StatusCode::FORBIDDEN, ErrorCode::Forbidden), "node {id}");
        let anonymous = cluster.client_with(id, None, timeout);
        let (status, code, _) = api_error(anonymous.segment_id("orders-eu").await);
        assert_eq!((status, code), (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized), "node {id}");
    }

    // Revoked through a follower; the answer comes once the leader applied the commit.
    let revoked = cluster.client(follower).revoke_token(issued.token.id).await.unwrap();
    assert_eq!(revoked.id, issued.token.id);
    let revoked_at = cluster.status(leader).await.unwrap().last_applied_index.unwrap();
    for id in 1..=3 {
        applied(&cluster, id, revoked_at).await;
        // One request, no retry: the node that applied the commit refuses.
        let t = cluster.client_with(id, Some(&issued.bearer), timeout);
        let (status, code, message) = api_error(t.segment_id("orders-eu").await);
        assert_eq!((status, code), (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized), "node {id}: {message}");
        assert!(!message.contains(&issued.bearer), "node {id} echoed the bearer");
    }

    // Every node's trail: the same records, the token's creation and revocation by the admin
    // token among them.
    let mine = AuditFilter { token: Some(issued.token.id), ..AuditFilter::default() };
    let mut trails = Vec::new();
    for id in 1..=3 {
        let page = cluster.client(id).audit(&AuditFilter::default(), None, None).await.unwrap();
        let own = cluster.client(id).audit(&mine, None, None).await.unwrap();
        let kinds: Vec<(AuditKind, Actor)> = own.records.iter().map(|r| (r.action.kind(), r.actor.clone())).collect();
        assert_eq!(
            kinds,
            [(AuditKind::TokenCreated, Actor::AdminToken), (AuditKind::TokenRevoked, Actor::AdminToken)],
            "node {id}"
        );
        trails.push(page.records);
    }
    assert!(trails.windows(2).all(|w| w[0] == w[1]), "nodes disagree on the audit trail: {trails:?}");
    let tags_created = trails[0].iter().filter(|r| r.action.kind() == AuditKind::TagCreated).count();
    assert_eq!(tags_created, 2, "orders-eu and users: {:?}", trails[0]);

    // Archived through a follower while every node holds a buffer of its IDs: each node stops
    // serving it as soon as it applied the archive, and none serves it again.
    for id in 1..=3 {
        try_get_ids(&cluster.client(id), "orders-eu", Some(5)).await.unwrap_or_else(|e| panic!("node {id}: {e}"));
    }
    cluster.client(follower).archive_tag("orders-eu").await.unwrap();
    let archived_at = cluster.status(leader).await.unwrap().last_applied_index.unwrap();
    for id in 1..=3 {
        applied(&cluster, id, archived_at).await;
        let (status, code, message) = api_error(cluster.client(id).segment_id("orders-eu").await);
        assert_eq!((status, code), (StatusCode::NOT_FOUND, ErrorCode::TagNotFound), "node {id}: {message}");
    }

    // A batch through a follower (forwarded to the leader as 1 MiB entries at most): every
    // node serves every tag of it once it applied it, and the archived name stays taken.
    let tags: Vec<_> = (0..6_000)
        .map(|i| leaf_api::types::CreateTagRequest { tag: format!("tenant-{i:04}"), step: 10, ..Default::default() })
        .chain([leaf_api::types::CreateTagRequest { tag: "orders-eu".into(), step: 10, ..Default::default() }])
        .collect();
    let done = cluster.client(follower).create_tags(&leaf_api::types::CreateTagsRequest { tags }).await.unwrap();
    assert_eq!((done.created.len(), done.existing), (6_000, vec!["orders-eu".to_string()]));
    let batch_at = cluster.status(leader).await.unwrap().last_applied_index.unwrap();
    for id in 1..=3 {
        applied(&cluster, id, batch_at).await;
        try_get_ids(&cluster.client(id), "tenant-5999", Some(3)).await.unwrap_or_else(|e| panic!("node {id}: {e}"));
        let (status, code, _) = api_error(cluster.client(id).segment_id("orders-eu").await);
        assert_eq!((status, code), (StatusCode::NOT_FOUND, ErrorCode::TagNotFound), "node {id}");
    }
}
