//! Per-tag profiles on one node: monotonic, daily and upper bounds, created through the admin
//! API and served through the ID routes (text, batches, ranges).
use std::collections::HashSet;

use leaf_api::profile::{DailyFormat, DailyOptions, Profile, JS_SAFE_MAX};
use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::Method;
use serde_json::json;
use tempfile::TempDir;

use crate::support::{config, error_of, get_ids, start};

fn req(tag: &str, step: i64, profile: Profile) -> CreateTagRequest {
    CreateTagRequest { tag: tag.into(), step, profile: Some(profile), ..Default::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monotonic_ids_strictly_increase_across_windows_and_concurrent_callers() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let info = c.create_tag(&req("mono", 7, Profile::Monotonic)).await.unwrap();
    assert_eq!(info.profile, Profile::Monotonic);
    // Sequential calls: each answer above the last, across many 7-ID windows.
    let mut last = 0;
    for n in [None, Some(3), None, Some(20), Some(1), None, Some(7)] {
        for id in get_ids(&c, "mono", n).await {
            assert!(id > last, "{id} after {last}");
            last = id;
        }
    }
    // Concurrent callers: every ID unique, each caller's sequence increasing.
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..100u32 {
                    got.extend(get_ids(&c, "mono", (i % 3 == 0).then_some(1 + i % 5)).await);
                }
                assert!(got.windows(2).all(|w| w[0] < w[1]), "one caller's IDs went back");
                got
            })
        })
        .collect();
    let mut all = HashSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(id > last && all.insert(id), "{id} repeated or below an earlier answer {last}");
        }
    }
    // Ranges: one range per request.
    let r = c.segment_ranges("mono", 50).await.unwrap();
    assert_eq!(r.ranges.len(), 1);
    assert!(r.ranges[0].start > *all.iter().max().unwrap());
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_ids_carry_the_date_and_a_padded_counter() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let daily = DailyOptions { digits: Some(5), utc_offset: Some("+08:00".into()) };
    let info = c
        .create_tag(&CreateTagRequest { daily: Some(daily), ..req("orders-daily", 10, Profile::Daily) })
        .await
        .unwrap();
    assert_eq!(info.daily.as_ref().and_then(|d| d.utc_offset.as_deref()), Some("+08:00"));
    let format = DailyFormat { digits: 5, utc_offset_minutes: 480 };
    let ids = get_ids(&c, "orders-daily", Some(25)).await;
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let today = format.day_at(now_ms).unwrap();
    for (i, id) in ids.iter().enumerate() {
        let (day, counter) = format.split(*id).unwrap_or_else(|| panic!("{id} is not yyyyMMdd + 5 digits"));
        // The day is the leader's today (or tomorrow, if the test straddles midnight).
        assert!(day == today || format.next_midnight_ms(today).and_then(|m| format.day_at(m)) == Some(day));
        assert_eq!(counter, i as i64 + 1, "the counter starts at 1 and has no gaps on one node");
    }
    let shown = c.tag("orders-daily").await.unwrap();
    assert_eq!((shown.profile, shown.day), (Profile::Daily, format.split(ids[24]).map(|(day, _)| day)));
    // Options without the daily profile, a bound or a start on a daily tag: refused.
    for body in [
        json!({"tag": "x1", "step": 10, "daily": {"digits": 4}}),
        json!({"tag": "x2", "step": 10, "profile": "daily", "upper_bound": 100}),
        json!({"tag": "x3", "step": 10, "profile": "daily", "max_id": 5}),
        json!({"tag": "x4", "step": 10, "profile": "daily", "daily": {"digits": 11}}),
        json!({"tag": "x5", "step": 10, "profile": "daily", "daily": {"utc_offset": "+25:00"}}),
        json!({"tag": "x6", "step": 10, "profile": "weekly"}),
    ] {
        let (status, e) = error_of(&c, Method::POST, "/admin/tags", Some(body.clone())).await;
        assert_eq!((status.as_u16(), e.code), (400, ErrorCode::InvalidRequest), "{body}: {}", e.message);
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upper_bound_is_never_passed() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let js = CreateTagRequest {
        max_id: Some(JS_SAFE_MAX - 24),
        upper_bound: Some(JS_SAFE_MAX),
        ..req("js", 10, Profile::Segment)
    };
    assert_eq!(c.create_tag(&js).await.unwrap().upper_bound, Some(JS_SAFE_MAX));
    let ids = get_ids(&c, "js", Some(25)).await;
    assert_eq!(ids, ((JS_SAFE_MAX - 24)..=JS_SAFE_MAX).collect::<Vec<_>>());
    let e = c.segment_id("js").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TagExhausted), "{e}");
    // A bound below the first ID: refused.
    let (status, e) = error_of(
        &c,
        Method::POST,
        "/admin/tags",
        Some(json!({"tag": "low", "step": 1, "max_id": 10, "upper_bound": 9})),
    )
    .await;
    // Below its first ID: no ID to hand out, refused as exhausted (no schema compares fields).
    assert_eq!((status.as_u16(), e.code), (409, ErrorCode::TagExhausted), "{}", e.message);
    // A monotonic tag with a bound: the last window is cut short, then exhausted.
    let mono = CreateTagRequest { upper_bound: Some(12), ..req("mono-bound", 5, Profile::Monotonic) };
    c.create_tag(&mono).await.unwrap();
    assert_eq!(get_ids(&c, "mono-bound", Some(10)).await, (1..=10).collect::<Vec<_>>());
    let e = c.segment_ids("mono-bound", 5).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::TagExhausted), "{e}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn obfuscated_ids_are_unique_unordered_and_decode_to_their_sequence() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let info = c.create_tag(&req("invoices", 100, Profile::Obfuscated)).await.unwrap();
    assert_eq!(info.profile, Profile::Obfuscated);
    let shown = serde_json::to_string(&c.tag("invoices").await.unwrap()).unwrap();
    assert!(!shown.contains("key"), "the key is never served: {shown}");
    let mut ids = Vec::new();
    for n in [None, Some(50), None, Some(1000)] {
        ids.extend(get_ids(&c, "invoices", n).await);
    }
    let unique: HashSet<_> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "an obfuscated ID repeated");
    let up = ids.windows(2).filter(|w| w[0] < w[1]).count();
    assert!(up > ids.len() / 4 && up < ids.len() * 3 / 4, "{up} of {} increase: ordered?", ids.len());
    // The admin decodes them back to the counter: 1, 2, 3, ... on one node.
    for (i, id) in ids.iter().take(60).enumerate() {
        assert_eq!(c.decode_obfuscated("invoices", *id).await.unwrap().sequence, i as i64 + 1);
    }
    // Not as ranges (not contiguous); decode only for obfuscated tags and IDs in the space.
    let e = c.segment_ranges("invoices", 10).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::WrongProfile), "{e}");
    c.create_tag(&req("plain", 10, Profile::Segment)).await.unwrap();
    let (status, e) = error_of(&c, Method::GET, "/admin/tags/plain/decode/5", None).await;
    assert_eq!((status.as_u16(), e.code), (409, ErrorCode::WrongProfile), "{}", e.message);
    for path in ["/admin/tags/invoices/decode/-1", "/admin/tags/invoices/decode/x"] {
        let (status, e) = error_of(&c, Method::GET, path, None).await;
        assert_eq!((status.as_u16(), e.code), (400, ErrorCode::InvalidRequest), "{path}: {}", e.message);
    }
    let (status, e) = error_of(&c, Method::GET, "/admin/tags/nope/decode/5", None).await;
    assert_eq!((status.as_u16(), e.code), (404, ErrorCode::TagNotFound));
    // A bound: every ID stays in [0, bound].
    let small = CreateTagRequest { upper_bound: Some(JS_SAFE_MAX), ..req("js-obf", 100, Profile::Obfuscated) };
    c.create_tag(&small).await.unwrap();
    assert!(get_ids(&c, "js-obf", Some(500)).await.iter().all(|id| (0..=JS_SAFE_MAX).contains(id)));
    // An ID outside the tag's space is none of its IDs: 404, not a malformed request.
    let outside = format!("/admin/tags/js-obf/decode/{}", JS_SAFE_MAX + 1);
    let (status, e) = error_of(&c, Method::GET, &outside, None).await;
    assert_eq!((status.as_u16(), e.code), (404, ErrorCode::NotFound), "{}", e.message);
    node.shutdown().await;
}
