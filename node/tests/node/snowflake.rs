//! Snowflake IDs: unique, decodable and Leaf-compatible; clock rollback at run time and at
//! restart never repeats an ID.
use std::time::Duration;

use crate::support::*;
use leaf_api::types::{ClockFault, SnowflakeDecoded, SnowflakeState};
use leaf_api::ErrorCode;
use leaf_client::{ClientError, Method, StatusCode};
use serde_json::json;
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snowflake_ids_are_unique_decodable_and_leaf_compatible() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let h = wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    let worker = h.snowflake.worker_id.unwrap();
    assert!(h.snowflake.high_water_ms.unwrap() > chrono_now_ms(), "the window runs ahead of the clock");
    // Leaf's wire form: 200, text/plain, the decimal ID and nothing else.
    let r = c.raw(Method::GET, "/api/snowflake/get/any.key-1", None).await.unwrap();
    assert_eq!(r.status, StatusCode::OK);
    let one: i64 = std::str::from_utf8(&r.body).unwrap().parse().unwrap();
    assert!(one > 0);
    // A batch larger than one millisecond's 4,096 sequence numbers moves on to later
    // milliseconds; every ID is unique and increasing.
    let ids = snowflake_ids(&c, Some(100_000)).await;
    assert_eq!(ids.len(), 100_000);
    assert!(ids[0] > one && ids.windows(2).all(|w| w[0] < w[1]), "not strictly increasing");
    let mut per_ms = std::collections::BTreeMap::<i64, usize>::new();
    for id in &ids {
        *per_ms.entry(id >> 22).or_default() += 1;
        assert_eq!((id >> 12) & 0x3ff, worker as i64);
    }
    assert!(per_ms.len() >= 25 && per_ms.values().all(|n| *n <= 4096), "{} ms", per_ms.len());
    // Decode round-trips, at our path and at Leaf's.
    for id in [one, ids[0], ids[99_999]] {
        // Leaf's path is not one the client calls: read it raw.
        let leaf = c.raw(Method::GET, &format!("/decodeSnowflakeId?snowflakeId={id}"), None).await.unwrap();
        assert_eq!(leaf.status, StatusCode::OK);
        let leaf: SnowflakeDecoded = serde_json::from_slice(&leaf.body).unwrap();
        for d in [c.decode(id).await.unwrap(), leaf] {
            let rebuilt =
                ((d.timestamp_ms - 1_288_834_974_657) << 22) | ((d.worker_id as i64) << 12) | d.sequence as i64;
            assert_eq!(rebuilt, id, "{d:?}");
            assert_eq!(d.worker_id, worker);
            assert!((d.timestamp_ms - chrono_now_ms()).abs() < 60_000, "{d:?}");
            assert_eq!(d.timestamp.len(), "2026-11-21T19:34:54.425Z".len(), "{d:?}");
            assert!(d.timestamp.ends_with('Z') && d.timestamp.contains('T'), "{d:?}");
        }
    }
    // Bad input: 400s with codes, never a 500.
    for (path, code) in [
        ("/api/snowflake/get/bad%20key", ErrorCode::InvalidTag),
        ("/api/snowflake/get/k?count=0", ErrorCode::InvalidCount),
        ("/api/snowflake/get/k?count=1000001", ErrorCode::InvalidCount),
        ("/api/snowflake/decode/abc", ErrorCode::InvalidRequest),
        ("/api/snowflake/decode/-5", ErrorCode::InvalidRequest),
        ("/api/snowflake/decode/9223372036854775808", ErrorCode::InvalidRequest),
        ("/decodeSnowflakeId", ErrorCode::InvalidRequest),
        ("/decodeSnowflakeId?snowflakeId=x", ErrorCode::InvalidRequest),
    ] {
        let (s, e) = error_of(&c, Method::GET, path, None).await;
        assert_eq!((s, e.code), (StatusCode::BAD_REQUEST, code), "{path}: {}", e.message);
    }
    let (s, e) = error_of(&c, Method::POST, "/api/snowflake/get/k", None).await;
    assert_eq!((s, e.code), (StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed));
    // Fault injection is off unless enabled.
    let (s, e) = error_of(&c, Method::POST, "/admin/fault/clock", Some(json!({"offset_ms": -50}))).await;
    assert_eq!((s, e.code), (StatusCode::NOT_FOUND, ErrorCode::NotFound), "{}", e.message);
    // The key is counted in metrics.
    let m = c.metrics().await.unwrap();
    assert!(m.contains("leaf_ids_served_total{mode=\"snowflake\",tag=\"audit-key\"} 100000"), "{m}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runtime_clock_rollback_waits_when_small_and_errors_when_large() {
    let dir = TempDir::new().unwrap();
    let mut cfg = fault_config(&dir);
    cfg.admin_token = Some(TOKEN.into());
    // A tolerance far above the time two requests take on a loaded machine: with Leaf's 5 ms,
    // a set-offset call slower than the 3 ms rollback it injects let the clock catch up first
    // (CI saw "it did not wait").
    cfg.snowflake.max_backward_ms = 400;
    let (node, c) = start(cfg).await;
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    // Pin the last ID ahead of the real clock so the rollbacks below are measured from it.
    set_clock_offset(&c, 1000).await;
    let before = snowflake_ids(&c, None).await[0];
    // 300 ms back, less the time these calls take: the node waits twice the gap and issues a
    // larger ID, as Leaf does.
    let started = std::time::Instant::now();
    set_clock_offset(&c, 700).await;
    let after = snowflake_ids(&c, None).await[0];
    let waited = started.elapsed();
    assert!(after > before, "{after} <= {before}");
    // With d the time from `before` to the second ID's clock reading, the gap is 300 - d ms
    // and the call waits twice that: at least 300 ms from `before` in all, less the moment
    // between `before` and `started`.
    assert!(waited >= Duration::from_millis(200), "it did not wait: {waited:?}");
    // 1000 ms back: beyond the tolerance, a 503 with Leaf's -3, never an ID.
    set_clock_offset(&c, -300).await;
    let (s, e) = error_of(&c, Method::GET, "/api/snowflake/get/k?count=10", None).await;
    // (raw: the typed error has no leaf_code)
    assert_eq!((s, e.code, e.leaf_code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::ClockMovedBackwards, Some(-3)));
    assert!(e.message.contains("moved back"), "{}", e.message);
    // Once the clock has caught up, IDs resume above every earlier one.
    set_clock_offset(&c, 1000).await;
    let resumed = snowflake_ids(&c, Some(10)).await;
    assert!(resumed[0] > after);
    // The fault endpoint is admin-only and validates its body.
    let anon = client(&format!("http://{}", node.http_addr()), None);
    let e = anon.set_clock_fault(&ClockFault { offset_ms: 1 }).await.unwrap_err();
    assert_eq!(e.status(), Some(StatusCode::UNAUTHORIZED));
    let (s, _) = error_of(&c, Method::POST, "/admin/fault/clock", Some(json!({"offset": 1}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_the_clock_behind_the_high_water_mark_never_repeats_an_id() {
    let dir = TempDir::new().unwrap();
    // Issue IDs 2 s in the future, then come back with the true clock.
    let mut cfg = fault_config(&dir);
    cfg.fault.clock_offset_ms = 2000;
    let (node, c) = start(cfg).await;
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    let before = snowflake_ids(&c, Some(1000)).await;
    let max_before = *before.last().unwrap();
    let hw = health(&c).await.snowflake.high_water_ms.unwrap();
    node.shutdown().await;

    // Behind by more than max_startup_wait_ms: snowflake stays off with a clear reason, and
    // segment mode is unaffected.
    let mut cfg = config(&dir);
    cfg.snowflake.max_startup_wait_ms = 100;
    let (node, c) = start(cfg).await;
    let h = wait_snowflake(&c, SnowflakeState::Off, Duration::from_secs(10)).await;
    let reason = h.snowflake.reason.unwrap();
    assert!(reason.contains("behind the time high-water mark"), "{reason}");
    match c.snowflake_id("k").await {
        Err(ClientError::Api { status, code, message }) => {
            assert_eq!((status, code), (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::SnowflakeUnavailable));
            assert!(message.contains("high-water mark"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(h.segment_ready && !h.ready, "segment mode stays ready (snowflake is not)");
    get_ids(&c, "leaf-segment-test", Some(3)).await;
    node.shutdown().await;

    // Behind by less than max_startup_wait_ms: the node serves at once, above the mark and
    // ahead of the clock, instead of waiting for the clock to pass the mark.
    let mut cfg = config(&dir);
    cfg.snowflake.max_startup_wait_ms = 10_000;
    let (node, c) = start(cfg).await;
    let h = wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(15)).await;
    assert!(chrono_now_ms() < hw, "serving only once the clock passed the mark");
    let after = snowflake_ids(&c, Some(1000)).await;
    assert!(after[0] > max_before, "{} <= {max_before}", after[0]);
    assert!(after[0] >> 22 > (hw - 1_288_834_974_657), "the first timestamp is above the high-water mark");
    assert_eq!(h.snowflake.worker_id, Some(0));
    node.shutdown().await;

    // A damaged state file stops the start instead of forgetting the mark (Leaf #97), naming
    // the file and the offset; with it restored, the node starts.
    let path = dir.path().join(leaf_node::internals::STATE_FILE);
    let good = std::fs::read(&path).unwrap();
    let mut bytes = good.clone();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&path, bytes).unwrap();
    let e = match leaf_node::start(config(&dir)).await {
        Err(e) => e.to_string(),
        Ok(node) => {
            node.shutdown().await;
            panic!("a node started on a damaged state file");
        }
    };
    assert!(e.contains(&format!("{}: damaged at offset 1: record checksum mismatch", path.display())), "{e}");
    assert!(e.contains("replace it from its peers"), "{e}");
    std::fs::write(&path, good).unwrap();
    let (node, c) = start(config(&dir)).await;
    get_ids(&c, "leaf-segment-test", None).await;
    node.shutdown().await;
}
