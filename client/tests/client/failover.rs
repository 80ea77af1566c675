//! The client against fake nodes: failover, retries only where safe, typed errors, timeouts,
//! decode errors, health and the route table.
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::StatusCode;
use leaf_api::types::{CreateTagRequest, UpdateTagRequest};
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError, HealthMode};

use crate::support::*;

#[tokio::test]
async fn a_dead_node_fails_over_to_a_live_one_and_the_live_one_is_kept() {
    let live = Server::start(|_, _| (StatusCode::OK, "42".into())).await;
    let c = client(&[dead_url(), live.url()]);
    assert_eq!(c.segment_id("orders").await.unwrap(), 42);
    assert_eq!(c.segment_id("orders").await.unwrap(), 42);
    assert_eq!(live.hits(), 2);
    assert_eq!(live.seen.lock().unwrap()[0].path, "/api/segment/get/orders");
    // The next call starts at the node that answered last.
    let busy = Server::start(|_, _| (StatusCode::SERVICE_UNAVAILABLE, error(ErrorCode::ShuttingDown))).await;
    let c = client(&[busy.url(), live.url()]);
    assert_eq!(c.segment_id("orders").await.unwrap(), 42);
    assert_eq!(c.segment_id("orders").await.unwrap(), 42);
    assert_eq!((busy.hits(), live.hits()), (1, 4));
}

#[tokio::test]
async fn a_503_that_says_retry_is_retried_and_a_400_is_not() {
    let s = Server::start(|_, n| match n {
        0 => (StatusCode::SERVICE_UNAVAILABLE, error(ErrorCode::SegmentsNotReady)),
        _ => (StatusCode::OK, "7\n8\n9".into()),
    })
    .await;
    assert_eq!(client(&[s.url()]).segment_ids("t", 3).await.unwrap(), vec![7, 8, 9]);
    assert_eq!(s.hits(), 2);
    assert_eq!(s.seen.lock().unwrap()[1].path, "/api/segment/get/t?count=3");

    let bad = Server::start(|_, _| (StatusCode::BAD_REQUEST, error(ErrorCode::InvalidCount))).await;
    let e = client(&[bad.url(), s.url()]).segment_ids("t", 0).await.unwrap_err();
    assert!(
        matches!(e, ClientError::Api { status: StatusCode::BAD_REQUEST, code: ErrorCode::InvalidCount, .. }),
        "{e:?}"
    );
    assert_eq!(bad.hits(), 1, "a 400 is the answer");
    assert_eq!(s.hits(), 2, "and is not tried elsewhere");
}

#[tokio::test]
async fn errors_are_typed_by_their_code() {
    let s = Server::start(|req, _| {
        if req.path.starts_with("/api/segment/") {
            (StatusCode::NOT_FOUND, error(ErrorCode::TagNotFound))
        } else if req.path.starts_with("/api/snowflake/") {
            (StatusCode::SERVICE_UNAVAILABLE, error(ErrorCode::WorkerIdsExhausted))
        } else {
            (StatusCode::BAD_GATEWAY, "<html>proxy</html>".into())
        }
    })
    .await;
    let c = client(&[s.url()]);
    let e = c.segment_id("nope").await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(StatusCode::NOT_FOUND), Some(ErrorCode::TagNotFound)));
    assert!(!e.is_unavailable());
    let e = c.snowflake_id("k").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WorkerIdsExhausted));
    assert!(e.is_unavailable());
    let e = c.cluster_status().await.unwrap_err();
    assert!(matches!(e, ClientError::Decode { status: StatusCode::BAD_GATEWAY, .. }), "{e:?}");
    assert_eq!(s.hits(), 3, "none of these is retried");
}

#[tokio::test]
async fn retries_stop_at_the_budget_with_the_last_error() {
    let s = Server::start(|_, _| (StatusCode::SERVICE_UNAVAILABLE, error(ErrorCode::Unavailable))).await;
    let c = Client::builder([s.url()]).retries(2).backoff(Duration::from_millis(1), Duration::from_millis(2));
    let e = c.build().unwrap().snowflake_ids("k", 5).await.unwrap_err();
    match &e {
        ClientError::AllNodesFailed { attempts: 3, last } => {
            assert_eq!(last.code(), Some(ErrorCode::Unavailable))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.code(), Some(ErrorCode::Unavailable));
    assert_eq!(s.hits(), 3);
}

#[tokio::test]
async fn create_tag_is_not_retried_once_it_may_have_reached_a_node() {
    let req = CreateTagRequest {
        tag: "orders".into(),
        step: 10,
        max_id: None,
        description: Some("d".into()),
        ..Default::default()
    };
    let created = r#"{"tag":"orders","max_id":1,"step":10,"description":"d","created_ms":1,"updated_ms":1}"#;
    // A 503 "unavailable" may mean the outcome is unknown: answered, not retried.
    let unsure = Server::start(|_, _| (StatusCode::SERVICE_UNAVAILABLE, error(ErrorCode::Unavailable))).await;
    let other = Server::start(move |_, _| (StatusCode::CREATED, created.into())).await;
    let e = client(&[unsure.url(), other.url()]).create_tag(&req).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Unavailable));
    assert_eq!((unsure.hits(), other.hits()), (1, 0));
    // A node that never got the request (connection refused): the next one is tried.
    let info = client(&[dead_url(), other.url()]).create_tag(&req).await.unwrap();
    assert_eq!((info.tag.as_str(), info.step), ("orders", 10));
    let sent: CreateTagRequest = serde_json::from_str(&other.seen.lock().unwrap()[0].body).unwrap();
    assert_eq!(sent, req);
    // Whereas an update is idempotent and retried.
    let flaky = Server::start(move |_, n| match n {
        0 => (StatusCode::SERVICE_UNAVAILABLE, error(ErrorCode::Unavailable)),
        _ => (StatusCode::OK, created.into()),
    })
    .await;
    let update = UpdateTagRequest { step: Some(20), description: None, ..Default::default() };
    client(&[flaky.url()]).update_tag("orders", &update).await.unwrap();
    assert_eq!(flaky.hits(), 2);
    assert_eq!(flaky.seen.lock().unwrap()[1].method, "PATCH");
}

#[tokio::test]
async fn a_slow_node_times_out_and_the_next_one_answers() {
    let slow = Server::start_slow(Duration::from_secs(5), |_, _| (StatusCode::OK, "1".into())).await;
    let fast = Server::start(|_, _| (StatusCode::OK, "2".into())).await;
    let c = Client::builder([slow.url(), fast.url()]).timeout(Duration::from_millis(200)).build().unwrap();
    assert_eq!(c.snowflake_id("k").await.unwrap(), 2);
    let alone = Client::builder([slow.url()]).timeout(Duration::from_millis(100)).retries(0).build().unwrap();
    assert!(matches!(alone.snowflake_id("k").await, Err(ClientError::Timeout { .. })));
    // The deadline bounds the whole call, retries included.
    let bounded = Client::builder([slow.url()])
        .timeout(Duration::from_secs(10))
        .deadline(Duration::from_millis(300))
        .build()
        .unwrap();
    let start = std::time::Instant::now();
    assert!(bounded.segment_id("t").await.is_err());
    assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
}

#[tokio::test]
async fn wrong_bodies_are_decode_errors() {
    let s = Server::start(|req, _| match req.path.as_str() {
        "/api/segment/get/few?count=3" => (StatusCode::OK, "1\n2".into()),
        "/api/segment/get/many?count=1" => (StatusCode::OK, "1\n2".into()),
        "/api/segment/get/neg" => (StatusCode::OK, "-5".into()),
        _ => (StatusCode::OK, "{\"not\":\"status\"}".into()),
    })
    .await;
    let c = client(&[s.url()]);
    for r in [c.segment_ids("few", 3).await, c.segment_ids("many", 1).await] {
        assert!(matches!(r, Err(ClientError::Decode { .. })), "{r:?}");
    }
    assert!(matches!(c.segment_id("neg").await, Err(ClientError::Decode { .. })));
    assert!(matches!(c.cluster_status().await, Err(ClientError::Decode { .. })));
}

#[tokio::test]
async fn health_reports_not_ready_as_an_answer_and_the_token_is_a_bearer() {
    let health = r#"{"ready":false,"segment_ready":true,"node_id":1,"leader_id":1,"term":2,
        "last_applied_index":5,"reason":"no worker ID yet","snowflake":{"state":"starting",
        "worker_id":null,"reason":null,"high_water_ms":null,"lease_remaining_ms":null,
        "peer_clock_offset_ms":null}}"#;
    let s = Server::start(move |req, _| match req.path.as_str() {
        "/health?mode=segment" => (StatusCode::OK, health.into()),
        _ => (StatusCode::SERVICE_UNAVAILABLE, health.into()),
    })
    .await;
    let c = Client::builder([s.url()]).token("tok-123").build().unwrap();
    let r = c.health(HealthMode::All).await.unwrap();
    assert!(!r.ready);
    assert_eq!(r.health.reason.as_deref(), Some("no worker ID yet"));
    assert!(c.health(HealthMode::Segment).await.unwrap().ready);
    assert_eq!(s.hits(), 2, "not ready is not retried");
    assert!(s.seen.lock().unwrap().iter().all(|r| r.auth.as_deref() == Some("Bearer tok-123")));
    assert!(!format!("{c:?}").contains("tok-123"));
}

#[tokio::test]
async fn paths_and_queries_come_from_the_route_table() {
    let s = Server::start(|_, _| (StatusCode::OK, "{}".into())).await;
    let c = client(&[s.url()]);
    let _ = c.allocations(Some("a.b"), Some(3)).await;
    let _ = c.tag("x:y").await;
    let _ = c.promote(4).await;
    let _ = c.remove(5).await;
    let _ = c.health(HealthMode::Snowflake).await;
    let seen: Vec<(String, String)> =
        s.seen.lock().unwrap().iter().map(|r| (r.method.clone(), r.path.clone())).collect();
    let want = [
        ("GET", "/admin/allocations?tag=a.b&node=3"),
        ("GET", "/admin/tags/x%3Ay"),
        ("POST", "/admin/cluster/nodes/4/promote"),
        ("DELETE", "/admin/cluster/nodes/5"),
        ("GET", "/health?mode=snowflake"),
    ];
    assert_eq!(seen, want.map(|(m, p)| (m.to_string(), p.to_string())));
}

/// A gapless answer for another key, and a ledger whose pages do not move forward, are refused
/// instead of believed (the second would otherwise page for ever).
#[tokio::test]
async fn gapless_answers_are_checked_and_ledger_paging_must_advance() {
    let entry = |n: u64| {
        format!(
            r#"{{"period":0,"number":{n},"key":"k{n}","state":"issued","actor":"unattributed","at_ms":1,"seq":{n},"hash":"{}"}}"#,
            "0".repeat(64)
        )
    };
    let page = |entries: &[u64], next: Option<u64>| {
        let list: Vec<String> = entries.iter().map(|n| entry(*n)).collect();
        let next = next.map_or(String::new(), |n| format!(r#","next":{{"after_period":0,"after_number":{n}}}"#));
        format!(
            r#"{{"tag":"inv","numbers":9,"open_reservations":0,"head":"{}","entries":[{}]{next}}}"#,
            "0".repeat(64),
            list.join(",")
        )
    };
    let (same, off) = (page(&[1, 2], Some(2)), page(&[1, 2], Some(5)));
    let s = Server::start(move |req, _| {
        if req.path.starts_with("/admin/tags/same/") {
            (StatusCode::OK, same.replace("\"inv\"", "\"same\""))
        } else if req.path.starts_with("/admin/tags/off/") {
            (StatusCode::OK, off.replace("\"inv\"", "\"off\""))
        } else if req.path.ends_with("/confirm") {
            // The right key, but still reserved: a confirm must answer it confirmed.
            let n = r#"{"tag":"inv","period":0,"number":1,"key":"mine","state":"reserved","issued_ms":1,"deadline_ms":9,"replayed":false}"#;
            (StatusCode::OK, n.into())
        } else {
            let n =
                r#"{"tag":"inv","period":0,"number":1,"key":"other","state":"issued","issued_ms":1,"replayed":false}"#;
            (StatusCode::OK, n.into())
        }
    })
    .await;
    let c = client(&[s.url()]);
    assert!(matches!(c.gapless("inv").issue("mine").await, Err(ClientError::Decode { .. })));
    assert!(matches!(c.gapless("inv").confirm("mine").await, Err(ClientError::Decode { .. })));
    for tag in ["same", "off"] {
        let r = tokio::time::timeout(Duration::from_secs(10), c.gapless(tag).ledger(None))
            .await
            .expect("no endless paging");
        assert!(matches!(r, Err(ClientError::Request(_))), "{tag}: {r:?}");
    }
}

/// A tag this client just created may be unknown for a moment on a node that has not applied
/// the create yet (nodes answer a miss from their own state): its `tag_not_found` is retried,
/// beyond the retry budget, while another tag's is the answer at once.
#[tokio::test]
async fn a_tag_just_created_by_this_client_is_waited_for_and_another_is_not_found_at_once() {
    let created = r#"{"tag":"fresh","max_id":1,"step":10,"description":"","created_ms":1,"updated_ms":1}"#;
    let gets = Arc::new(AtomicU32::new(0));
    let g = gets.clone();
    let node = Server::start(move |seen, _| {
        if seen.method == "POST" {
            return (StatusCode::CREATED, created.into());
        }
        // "fresh" is applied on this node only at its 7th ID request; "other" exists nowhere.
        let n = g.fetch_add(1, Ordering::SeqCst);
        if seen.path.starts_with("/api/segment/get/fresh") && n >= 6 {
            return (StatusCode::OK, "5".into());
        }
        (StatusCode::NOT_FOUND, error(ErrorCode::TagNotFound))
    })
    .await;
    let c = client(&[node.url()]);
    // Before the create, its 404 is the answer.
    let e = c.segment_id("fresh").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TagNotFound));
    assert_eq!(gets.swap(0, Ordering::SeqCst), 1);
    let req = CreateTagRequest { tag: "fresh".into(), step: 10, ..Default::default() };
    c.create_tag(&req).await.unwrap();
    assert_eq!(c.segment_id("fresh").await.unwrap(), 5);
    assert_eq!(gets.swap(0, Ordering::SeqCst), 7, "six 404s retried, more than the budget of 3");
    let e = c.segment_id("other").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TagNotFound));
    assert_eq!(gets.load(Ordering::SeqCst), 1, "another tag's 404 is the answer");
}

/// Clients built with one memory of creates (one client per node, say) read each other's
/// creates; a client with a memory of its own does not, and an archive forgets the tag.
#[tokio::test]
async fn clients_sharing_a_memory_of_creates_read_each_others_and_an_archive_forgets() {
    let created = r#"{"tag":"fresh","max_id":1,"step":10,"description":"","created_ms":1,"updated_ms":1}"#;
    let maker = Server::start(move |seen, _| match seen.method.as_str() {
        "POST" => (StatusCode::CREATED, created.into()),
        _ => (StatusCode::NOT_FOUND, error(ErrorCode::TagNotFound)),
    })
    .await;
    // The other node learns of "fresh" at its 4th ID request.
    let gets = Arc::new(AtomicU32::new(0));
    let g = gets.clone();
    let lagging = Server::start(move |seen, _| {
        let n = g.fetch_add(1, Ordering::SeqCst);
        match seen.path.starts_with("/api/segment/get/fresh") && n >= 3 {
            true => (StatusCode::OK, "5".into()),
            false => (StatusCode::NOT_FOUND, error(ErrorCode::TagNotFound)),
        }
    })
    .await;
    let a = client(&[maker.url()]);
    let b = Client::builder([lagging.url()]).retries(0).own_creates(a.own_creates()).build().unwrap();
    let stranger = Client::builder([lagging.url()]).retries(0).build().unwrap();
    a.create_tag(&CreateTagRequest { tag: "fresh".into(), step: 10, ..Default::default() }).await.unwrap();
    let e = stranger.segment_id("fresh").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TagNotFound), "a stranger does not wait: {e}");
    assert_eq!(b.segment_id("fresh").await.unwrap(), 5);
    assert_eq!(gets.swap(0, Ordering::SeqCst), 4, "the stranger's 404 and b's two retried ones");

    // Archived through `a`, the tag's 404 is the answer at once on `b` too.
    let archived = r#"{"tag":"gone","max_id":1,"step":10,"description":"","created_ms":1,"updated_ms":1}"#;
    let misses = Arc::new(AtomicU32::new(0));
    let m = misses.clone();
    let both = Server::start(move |seen, _| match seen.method.as_str() {
        "POST" if seen.path.ends_with("/archive") => (StatusCode::OK, archived.into()),
        "POST" => (StatusCode::CREATED, archived.into()),
        _ => {
            m.fetch_add(1, Ordering::SeqCst);
            (StatusCode::NOT_FOUND, error(ErrorCode::TagNotFound))
        }
    })
    .await;
    let a = client(&[both.url()]);
    let b = Client::builder([both.url()]).retries(0).own_creates(a.own_creates()).build().unwrap();
    a.create_tag(&CreateTagRequest { tag: "gone".into(), step: 10, ..Default::default() }).await.unwrap();
    a.archive_tag("gone").await.unwrap();
    let e = b.segment_id("gone").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TagNotFound), "{e}");
    assert_eq!(misses.load(Ordering::SeqCst), 1, "an archived tag's 404 is not retried");
}
