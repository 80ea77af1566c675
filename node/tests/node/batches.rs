//! Many tags on one node: created in batches (`POST /admin/tags:batch`: thousands per request
//! in few Raft entries, idempotent, checked whole before anything is proposed, bound by a
//! token's rights and tag budget like single creations), listed in pages, and unloaded when
//! idle.
use leaf_api::audit::{AuditFilter, AuditKind};
use leaf_api::routes;
use leaf_api::tag::MAX_TAGS_PER_REQUEST;
use leaf_api::types::{CreateTagRequest, CreateTagsRequest};
use leaf_api::ErrorCode;
use leaf_client::{ClientError, Method, StatusCode};
use tempfile::TempDir;

use crate::support::{config, create_bounded_tag, create_tag, error_of, get_ids, start, TOKEN};

fn tag(name: String, step: i64) -> CreateTagRequest {
    CreateTagRequest { tag: name, step, ..Default::default() }
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:05}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_creates_thousands_of_tags_in_two_entries_and_may_be_sent_again() {
    let dir = TempDir::new().unwrap();
    // No snowflake worker: its lease renewals would be entries of their own in the count.
    let mut cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    cfg.snowflake.enabled = false;
    let (node, c) = start(cfg).await;
    create_bounded_tag(&c, "b-00005", 7, 40).await;
    let all = names("b-", 7_000);
    let req = CreateTagsRequest { tags: all.iter().map(|t| tag(t.clone(), 100)).collect() };
    let before = c.cluster_status().await.unwrap().last_log_index.unwrap();
    let done = c.create_tags(&req).await.unwrap();
    let after = c.cluster_status().await.unwrap().last_log_index.unwrap();
    assert_eq!(done.existing, ["b-00005"]);
    let mut expected = all.clone();
    expected.remove(5);
    assert_eq!(done.created, expected, "created in the request's order");
    assert!(after - before <= 2, "7,000 tags took {} log entries", after - before);
    // The existing tag is left as it was; the new ones serve.
    let existing = c.tag("b-00005").await.unwrap();
    assert_eq!((existing.step, existing.max_id), (7, 40));
    assert_eq!(get_ids(&c, "b-06999", None).await, [1]);
    assert_eq!(get_ids(&c, "b-00005", None).await, [40]);
    assert_eq!(c.tags().await.unwrap().iter().filter(|t| t.tag.starts_with("b-")).count(), 7_000);
    // A record per tag created, by the admin token.
    let filter = AuditFilter { kind: Some(AuditKind::TagCreated), tag: Some("b-06999".into()), ..Default::default() };
    let page = c.audit(&filter, None, None).await.unwrap();
    assert_eq!(page.records.len(), 1, "{page:?}");
    assert_eq!(page.records[0].actor, leaf_api::audit::Actor::AdminToken);
    // Again: nothing created, everything reported, nothing proposed that changes a tag.
    let again = c.create_tags(&req).await.unwrap();
    assert!(again.created.is_empty());
    assert_eq!(again.existing, all);
    assert_eq!(c.tag("b-06999").await.unwrap().max_id, 101, "the tag's first segment is untouched");
    // Stopped, not dropped: a runtime shutting down under a snapshot build left the store's
    // last drop to the build's blocking task, where sled once never finished flushing
    // (raft-store/src/sled_lock.rs).
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_checked_whole_before_anything_is_created() {
    let dir = TempDir::new().unwrap();
    let mut cfg = config(&dir);
    cfg.http.max_batch_body_bytes = 64 * 1024;
    let (_node, c) = start(cfg).await;
    let body = |tags: Vec<CreateTagRequest>| serde_json::to_value(CreateTagsRequest { tags }).unwrap();
    let post = |v| error_of(&c, Method::POST, routes::ADMIN_TAGS_BATCH, Some(v));
    let cases = [
        (body(vec![tag("x-1".into(), 10), tag("bad tag".into(), 10)]), ErrorCode::InvalidTag, "tags[1]"),
        (body(vec![tag("x-1".into(), 10), tag("x-2".into(), 0)]), ErrorCode::InvalidRequest, "tags[1]"),
        (body(vec![]), ErrorCode::InvalidRequest, "1 to 10000"),
        (serde_json::json!({"tags": [{"tag": "x-1", "step": 1}], "extra": 1}), ErrorCode::InvalidRequest, "extra"),
    ];
    for (v, code, says) in cases {
        let (status, e) = post(v.clone()).await;
        assert_eq!((status, e.code), (StatusCode::BAD_REQUEST, code), "{v}: {e:?}");
        assert!(e.message.contains(says), "{v}: {}", e.message);
    }
    // A body over `http.max_batch_body_bytes`.
    let (status, e) = post(body((0..3_000).map(|i| tag(format!("{i:0>20}"), 1)).collect())).await;
    assert_eq!((status, e.code), (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge), "{e:?}");
    assert!(e.message.contains("65536"), "{}", e.message);
    assert!(c.tags().await.unwrap().iter().all(|t| !t.tag.starts_with('x') && t.tag.len() < 20), "nothing created");
    // A name given twice is created once, by its first mention; the later one is answered as
    // existing, in the request's order.
    let twice = CreateTagsRequest { tags: vec![tag("y-1".into(), 10), tag("y-2".into(), 10), tag("y-1".into(), 99)] };
    let done = c.create_tags(&twice).await.unwrap();
    assert_eq!((done.created, done.existing), (vec!["y-1".to_string(), "y-2".into()], vec!["y-1".to_string()]));
    assert_eq!(c.tag("y-1").await.unwrap().step, 10, "the first mention's settings");
    // More tags than a request takes, on a node with the default body limit.
    let dir2 = TempDir::new().unwrap();
    let (_big, c2) = start(config(&dir2)).await;
    let many = body((0..=MAX_TAGS_PER_REQUEST).map(|i| tag(format!("{i}"), 1)).collect());
    let (status, e) = error_of(&c2, Method::POST, routes::ADMIN_TAGS_BATCH, Some(many)).await;
    assert_eq!((status, e.code), (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest), "{e:?}");
    assert!(e.message.contains("not 10001"), "{}", e.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_batch_is_bound_by_its_patterns_and_its_tag_budget() {
    use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
    let dir = TempDir::new().unwrap();
    let (node, admin) = start(leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) }).await;
    let issued = admin
        .create_token(&CreateTokenRequest {
            name: "tenant".into(),
            rights: vec![Right::Tags],
            tags: vec![TagPattern::parse("t-*").unwrap()],
            quota: None,
            id_quota: None,
            max_tags: Some(3),
        })
        .await
        .unwrap();
    let tenant = crate::support::client(&format!("http://{}", node.http_addr()), Some(issued.bearer.clone()));
    let batch = |t: &[&str]| CreateTagsRequest { tags: t.iter().map(|t| tag(t.to_string(), 10)).collect() };
    let refused = |r: Result<_, ClientError>| match r {
        Err(ClientError::Api { status, code, .. }) => (status, code),
        other => panic!("expected a refusal, got {other:?}"),
    };
    // A tag outside its patterns: the whole batch is refused before anything is proposed.
    assert_eq!(
        refused(tenant.create_tags(&batch(&["t-1", "u-1"])).await),
        (StatusCode::FORBIDDEN, ErrorCode::Forbidden)
    );
    // Over its budget: refused whole by the state machine.
    assert_eq!(
        refused(tenant.create_tags(&batch(&["t-1", "t-2", "t-3", "t-4"])).await),
        (StatusCode::FORBIDDEN, ErrorCode::Forbidden)
    );
    assert!(admin.tags().await.unwrap().iter().all(|t| !t.tag.starts_with("t-")), "nothing was created");
    // A tag that exists does not count; three new ones fit.
    create_tag(&admin, "t-0", 10).await;
    let done = tenant.create_tags(&batch(&["t-0", "t-1", "t-2", "t-3"])).await.unwrap();
    assert_eq!((done.created.len(), done.existing), (3, vec!["t-0".to_string()]));
    let info = admin.token(issued.token.id).await.unwrap();
    assert_eq!(info.tags_created, 3);
    assert_eq!(refused(tenant.create_tags(&batch(&["t-4"])).await), (StatusCode::FORBIDDEN, ErrorCode::Forbidden));
}

/// `GET /admin/tags`, `/db` and `/cache` are pages in name order: `prefix`, `after`, `limit`;
/// `/db` and `/cache` leave out obfuscated and archived tags whatever the page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_are_pages_in_name_order_with_a_prefix() {
    use leaf_api::profile::Profile;
    use leaf_api::types::ListQuery;
    let dir = TempDir::new().unwrap();
    let (_node, c) = start(config(&dir)).await;
    let all = names("p-", 2_500);
    c.create_tags(&CreateTagsRequest { tags: all.iter().map(|t| tag(t.clone(), 10)).collect() }).await.unwrap();
    let obfuscated = CreateTagRequest { profile: Some(Profile::Obfuscated), ..tag("p-01000x".into(), 10) };
    c.create_tag(&obfuscated).await.unwrap();
    c.archive_tag("p-01001").await.unwrap();
    let q = |prefix: &str, after: Option<&str>, limit: u32| ListQuery {
        prefix: Some(prefix.into()),
        after: after.map(str::to_string),
        limit: Some(limit),
    };
    let tags = |v: Vec<leaf_api::types::TagInfo>| v.into_iter().map(|t| t.tag).collect::<Vec<_>>();
    // A page, the next one, the last (short) one.
    assert_eq!(tags(c.tags_page(&q("p-010", None, 3)).await.unwrap()), ["p-01000", "p-01000x", "p-01001"]);
    assert_eq!(tags(c.tags_page(&q("p-010", Some("p-01001"), 2)).await.unwrap()), ["p-01002", "p-01003"]);
    assert_eq!(tags(c.tags_page(&q("p-0109", Some("p-01097"), 5)).await.unwrap()), ["p-01098", "p-01099"]);
    // `after` before the prefix starts at the prefix; after it, nothing.
    assert_eq!(tags(c.tags_page(&q("p-02", Some("a"), 1)).await.unwrap()), ["p-02000"]);
    assert!(c.tags_page(&q("p-02", Some("q"), 1)).await.unwrap().is_empty());
    // Followed page by page: every tag once, in order.
    let every = tags(
        c.tags_matching(&ListQuery { prefix: Some("p-".into()), limit: Some(333), ..ListQuery::default() })
            .await
            .unwrap(),
    );
    let mut expected: Vec<String> = all.clone();
    expected.push("p-01000x".into());
    expected.sort();
    assert_eq!(every, expected);
    // /db leaves out the obfuscated and the archived tag, still filling its pages.
    let db = tags(c.db_page(&q("p-010", None, 3)).await.unwrap());
    assert_eq!(db, ["p-01000", "p-01002", "p-01003"]);
    // /cache lists the loaded tags in the same way.
    for t in ["p-00007", "p-00003", "p-00009", "p-01000x"] {
        let _ = c.segment_id(t).await;
    }
    let cache: Vec<String> =
        c.cache_page(&q("p-0000", Some("p-00003"), 10)).await.unwrap().into_iter().map(|e| e.tag).collect();
    assert_eq!(cache, ["p-00007", "p-00009"]);
    // Bad queries.
    for (path, code) in [
        ("/admin/tags?limit=0", ErrorCode::InvalidRequest),
        ("/admin/tags?limit=50001", ErrorCode::InvalidRequest),
        ("/admin/tags?prefix=a%20b", ErrorCode::InvalidTag),
        ("/db?after=", ErrorCode::InvalidTag),
        ("/cache?nope=1", ErrorCode::InvalidRequest),
        ("/admin/dashboard?prefix=%2F", ErrorCode::InvalidTag),
    ] {
        let (status, e) = error_of(&c, Method::GET, path, None).await;
        assert_eq!((status, e.code), (StatusCode::BAD_REQUEST, code), "{path}: {e:?}");
    }
}

/// With `segment.idle_unload_secs`, a tag that serves nothing leaves the node's buffers and
/// `/metrics`; asked again, it serves above every ID it served before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tag_is_unloaded_and_serves_above_its_old_ids_when_asked_again() {
    let dir = TempDir::new().unwrap();
    let mut cfg = config(&dir);
    cfg.segment.idle_unload_secs = 1;
    let (_node, c) = start(cfg).await;
    create_tag(&c, "sleepy", 1_000).await;
    let before = get_ids(&c, "sleepy", Some(10)).await;
    assert!(c.cache().await.unwrap().iter().any(|e| e.tag == "sleepy"));
    let unloaded = || async { !c.cache().await.unwrap().iter().any(|e| e.tag == "sleepy") };
    crate::support::until("the idle tag is unloaded", std::time::Duration::from_secs(20), unloaded).await;
    let metrics = c.metrics().await.unwrap();
    assert!(!metrics.contains("tag=\"sleepy\""), "its series left /metrics");
    assert!(metrics.contains("leaf_ids_served_by_profile_total{profile=\"segment\"} 10"), "{metrics}");
    let after = get_ids(&c, "sleepy", Some(10)).await;
    assert!(after[0] > *before.last().unwrap(), "{before:?} then {after:?}");
    assert!(after[0] > 1_000, "the rest of the first segment was skipped: {after:?}");
}

/// Past the 40,000 tags a single creation of earlier releases stops at, a single creation
/// goes on (as the creation only this release reads), and a snapshot of more than that
/// restores whole on restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_tags_than_earlier_releases_held_are_created_and_snapshotted() {
    let dir = TempDir::new().unwrap();
    let mut cfg = config(&dir);
    cfg.raft.snapshot_every = 4;
    let (node, c) = start(cfg.clone()).await;
    let legacy = leaf_raft_store::LEGACY_MAX_TAGS;
    let all = names("m-", legacy);
    for chunk in all.chunks(MAX_TAGS_PER_REQUEST) {
        c.create_tags(&CreateTagsRequest { tags: chunk.iter().map(|t| tag(t.clone(), 10)).collect() }).await.unwrap();
    }
    let bulk_end = node.raft().status().last_applied_index.unwrap_or(0);
    create_tag(&c, "single-past-the-old-bound", 10).await;
    assert_eq!(get_ids(&c, "single-past-the-old-bound", None).await, [1]);
    assert_eq!(get_ids(&c, "m-39999", None).await, [1]);
    // A build runs beside applies and the next is due only on a later apply, so further
    // creations drive the snapshot until it holds every tag (a condition, not a sleep).
    let mut i = 0;
    crate::support::eventually("a snapshot of the bulk", std::time::Duration::from_secs(30), || {
        let (node, c, drive) = (&node, &c, format!("drive-{i}"));
        i += 1;
        async move {
            let status = node.raft().status();
            if status.snapshot_index.is_some_and(|s| s >= bulk_end) {
                return Ok(());
            }
            create_tag(c, &drive, 10).await;
            Err(status)
        }
    })
    .await;
    node.shutdown().await;
    let (_node, c) = start(cfg).await;
    let tags = c.tags().await.unwrap();
    assert_eq!(tags.iter().filter(|t| t.tag.starts_with("m-")).count(), legacy);
    assert!(tags.iter().any(|t| t.tag == "single-past-the-old-bound"));
    assert_eq!(get_ids(&c, "single-past-the-old-bound", None).await, [11]);
}

/// Waits (up to 30 s) until the node of `c` has a snapshot past the batch entries that follow
/// log index `before` and has purged some of them: the snapshot comes once 10,000 tags were
/// applied (a build may start before the last batch entry); behind it, the batch entries past
/// the 100 kept are purged.
async fn snapshotted_and_purged_past(c: &leaf_client::Client, before: u64) {
    crate::support::eventually("snapshotted and purged by weight", std::time::Duration::from_secs(30), || async {
        let s = c.cluster_status().await.unwrap();
        if s.snapshot_index > Some(before + 1) && s.purged_index > Some(before) {
            Ok(())
        } else {
            Err(s)
        }
    })
    .await
}

/// A log of batches is snapshotted and purged by its tags, not by its entries: by openraft's
/// count (a snapshot every 10,000 entries, the default) 12,000 tags in 4 entries would never
/// be, and a new node would replay every batch. Here a snapshot covers them within seconds and
/// the log behind it is purged down to what `keep_logs_after_snapshot` weighs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_of_batches_is_snapshotted_and_purged_by_its_tags() {
    let dir = TempDir::new().unwrap();
    let mut cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    cfg.raft.keep_logs_after_snapshot = 100;
    // No snowflake worker: a lease renewal after the batches would be the log's last entry.
    cfg.snowflake.enabled = false;
    assert_eq!(cfg.raft.snapshot_every, 10_000, "the default");
    let (node, c) = start(cfg).await;
    let before = node.raft().status().last_applied_index.unwrap_or(0);
    for chunk in names("w-", 12_000).chunks(6_000) {
        c.create_tags(&CreateTagsRequest { tags: chunk.iter().map(|t| tag(t.clone(), 10)).collect() }).await.unwrap();
    }
    let bulk_end = node.raft().status().last_applied_index.unwrap_or(0);
    assert!(bulk_end - before <= 4, "the batches were few entries: {before}..{bulk_end}");
    snapshotted_and_purged_past(&c, before).await;
    assert_eq!(get_ids(&c, "w-11999", None).await, [1]);
    node.shutdown().await;
}

/// The weights survive a restart: the batch entries a restarted node does not re-apply (each
/// is checkpointed with its entry, and a shutdown checkpoints the rest) are weighed from its
/// log, so a snapshot by weight still comes. Without that, a cluster upgraded or restarted
/// with its batches unsnapshotted would replay them all to every new node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_weighs_the_batch_log_it_did_not_re_apply() {
    let dir = TempDir::new().unwrap();
    let mut cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    cfg.raft.keep_logs_after_snapshot = 100;
    cfg.snowflake.enabled = false;
    // 12,000 tags weigh less than 20,000: no snapshot before the restart.
    cfg.raft.snapshot_every = 20_000;
    let (node, c) = start(cfg.clone()).await;
    let before = node.raft().status().last_applied_index.unwrap_or(0);
    for chunk in names("r-", 12_000).chunks(6_000) {
        c.create_tags(&CreateTagsRequest { tags: chunk.iter().map(|t| tag(t.clone(), 10)).collect() }).await.unwrap();
    }
    assert_eq!(c.cluster_status().await.unwrap().snapshot_index, None);
    node.shutdown().await;
    cfg.raft.snapshot_every = 10_000;
    let (_node, c) = start(cfg).await;
    snapshotted_and_purged_past(&c, before).await;
    assert_eq!(get_ids(&c, "r-11999", None).await, [1]);
}

/// First IDs of many cold tags asked at once: the leader commits the allocations that arrive
/// while it commits others as one entry (a group), and each tag gets its own allocation, its
/// ID inside it, every allocation in its own place of the journal. Bursts go on until one was
/// grouped (at most 20): whether requests overlap a commit depends on the machine's timing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_ids_of_cold_tags_asked_together_are_committed_in_shared_entries() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    const BURST: usize = 64;
    let mut served = Vec::new();
    let mut grouped = false;
    for burst in 0..20 {
        let names: Vec<String> = (0..BURST).map(|i| format!("cold-{burst:02}-{i:02}")).collect();
        let req = CreateTagsRequest { tags: names.iter().map(|t| tag(t.clone(), 10)).collect() };
        c.create_tags(&req).await.unwrap();
        let tasks: Vec<_> = names
            .into_iter()
            .map(|t| {
                let c = c.clone();
                tokio::spawn(async move { (get_ids(&c, &t, None).await, t) })
            })
            .collect();
        for t in tasks {
            let (ids, tag) = t.await.unwrap();
            served.push((tag, ids[0]));
        }
        let journal = c.allocations(None, None).await.unwrap();
        if journal.allocations.iter().any(|a| a.position > 0) {
            grouped = true;
            break;
        }
    }
    assert!(grouped, "no burst of {BURST} first IDs shared an entry");
    let journal = c.allocations(None, None).await.unwrap();
    let mut places = std::collections::HashSet::new();
    for a in &journal.allocations {
        assert!(places.insert((a.log_index, a.position)), "two allocations at one place: {a:?}");
    }
    for (tag, id) in served {
        let mine: Vec<_> = journal.allocations.iter().filter(|a| a.tag == tag).collect();
        assert_eq!(mine.len(), 1, "{tag}: {mine:?}");
        assert!((mine[0].start..mine[0].end).contains(&id), "{tag}: ID {id} outside {:?}", mine[0]);
    }
    node.shutdown().await;
}
