//! IDs as ranges (`?format=ranges`): a million IDs in a few ranges, unique with the text
//! form, inside committed allocations; the limits of each format; snowflake ranges decode.
use std::time::Duration;

use crate::support::*;
use leaf_api::ranges::IdRanges;
use leaf_api::types::SnowflakeState;
use leaf_api::ErrorCode;
use leaf_client::{Method, StatusCode};
use leaf_cluster_tests::checker::check_segment_ids;
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_hold_a_million_ids_in_a_few_bytes_unique_with_text_batches() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    create_tag(&c, "r", 10).await;

    // A million IDs: one segment sized for the request, so a handful of ranges, a few bytes.
    let big = c.segment_ranges("r", 1_000_000).await.unwrap();
    assert_eq!(big.count(), 1_000_000);
    assert!(big.ranges.len() <= 3, "{:?}", big.ranges);
    let raw = c.raw(Method::GET, "/api/segment/get/r?count=1000000&format=ranges", None).await.unwrap();
    assert_eq!(raw.status, StatusCode::OK);
    assert!(raw.body.len() < 200, "{} bytes", raw.body.len());
    assert_eq!(serde_json::from_slice::<IdRanges>(&raw.body).unwrap().count(), 1_000_000);

    // Ranges and text interleaved from concurrent clients: every ID once, inside the journal.
    let tasks: Vec<_> = (0..4u32)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for n in 1..=60u32 {
                    let count = 1 + (n * 37 + i * 11) % 700;
                    if (n + i).is_multiple_of(2) {
                        got.extend(c.segment_ranges("r", count).await.unwrap().ids());
                    } else {
                        got.extend(c.segment_ids("r", count).await.unwrap());
                    }
                }
                got
            })
        })
        .collect();
    let mut all: Vec<i64> = big.ids().collect();
    all.extend(c.segment_ranges("r", 1).await.unwrap().ids());
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let journal = c.allocations(Some("r"), None).await.unwrap();
    let report = check_segment_ids(&all, &journal.allocations);
    assert!(report.is_valid(), "checker: {report:?}");
    // The fast path and the router (an escaped tag) answer alike.
    let routed = c.raw(Method::GET, "/api/segment/get/%72?count=5&format=ranges", None).await.unwrap();
    assert_eq!(routed.status, StatusCode::OK);
    assert_eq!(serde_json::from_slice::<IdRanges>(&routed.body).unwrap().count(), 5);

    // Each format's limit, and a clear error for anything else.
    for (path, status, code) in [
        ("/api/segment/get/r?count=1000001&format=ranges", StatusCode::BAD_REQUEST, ErrorCode::InvalidCount),
        ("/api/segment/get/r?count=1000001", StatusCode::BAD_REQUEST, ErrorCode::InvalidCount),
        ("/api/snowflake/get/k?count=1000001", StatusCode::BAD_REQUEST, ErrorCode::InvalidCount),
        ("/api/segment/get/r?count=0&format=ranges", StatusCode::BAD_REQUEST, ErrorCode::InvalidCount),
        ("/api/segment/get/r?format=csv", StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest),
        ("/api/segment/get/%72?format=csv", StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest),
        ("/api/segment/get/nope?format=ranges", StatusCode::NOT_FOUND, ErrorCode::TagNotFound),
        ("/api/snowflake/get/k?count=1000001&format=ranges", StatusCode::BAD_REQUEST, ErrorCode::InvalidCount),
    ] {
        let (s, e) = error_of(&c, Method::GET, path, None).await;
        assert_eq!((s, e.code), (status, code), "{path}: {e:?}");
    }
    // As text, as many as ranges: a million lines, written as they are sent, each ID once and
    // increasing.
    let raw = c.raw(Method::GET, "/api/segment/get/r?count=1000000", None).await.unwrap();
    assert_eq!(raw.status, StatusCode::OK);
    let text = std::str::from_utf8(&raw.body).unwrap();
    let ids: Vec<i64> = text.split('\n').map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 1_000_000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "increasing");
    assert!(ids[0] > *all.iter().max().unwrap(), "after every ID before");

    let e = c.segment_ranges("nope", 3).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TagNotFound), "{e}");

    // Snowflake ranges: about one per millisecond spanned, each ID decodes to this node's worker.
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    let flakes = c.snowflake_ranges("audit-key", 20_000).await.unwrap();
    assert_eq!(flakes.count(), 20_000);
    let text = snowflake_ids(&c, Some(1000)).await;
    let first = c.decode(flakes.ranges[0].start).await.unwrap();
    let last = c.decode(flakes.ranges.last().unwrap().end - 1).await.unwrap();
    assert_eq!(first.worker_id, last.worker_id);
    assert!(first.timestamp_ms <= last.timestamp_ms);
    assert!(text.iter().all(|&id| id > flakes.ranges.last().unwrap().end - 1), "text after ranges is later");
    node.shutdown().await;
}
