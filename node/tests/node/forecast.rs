//! Exhaustion forecasts on a live node: a tag's `ids_left` in `/cache` falls as it allocates,
//! its rate appears after two samples, and `/metrics` (the tags that move, and the bounded
//! ones) and `/health` carry the forecasts.
//! The sampler runs every 20 ms here; nothing waits on a timer, it polls until it sees.
use std::time::Duration;

use crate::support::*;
use leaf_api::types::SnowflakeState;
use leaf_api::types::TagForecast;
use leaf_client::Client;
use tempfile::TempDir;

/// Polls `/cache` until `tag`'s forecast satisfies `ok`; returns it.
async fn forecast_until(c: &Client, tag: &str, what: &str, ok: impl Fn(&TagForecast) -> bool) -> TagForecast {
    crate::support::eventually(&format!("{tag}: {what}"), Duration::from_secs(10), || async {
        let cache = c.cache().await.unwrap();
        let entry = cache.into_iter().find(|e| e.tag == tag);
        match entry.as_ref().and_then(|e| e.forecast.clone()).filter(|f| ok(f)) {
            Some(f) => Ok(f),
            None => Err(entry),
        }
    })
    .await
}

/// Polls `/metrics` until a line starts with `series`; returns the text.
async fn metrics_until(c: &Client, series: &str) -> String {
    crate::support::eventually(&format!("{series:?} in /metrics"), Duration::from_secs(10), || async {
        let text = c.metrics().await.unwrap();
        if text.lines().any(|l| l.starts_with(series)) {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await
}

fn tag_request(tag: &str, step: i64) -> leaf_api::types::CreateTagRequest {
    leaf_api::types::CreateTagRequest { tag: tag.into(), step, ..Default::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forecasts_follow_allocations_in_cache_metrics_and_health() {
    let dir = TempDir::new().unwrap();
    let mut cfg = config(&dir);
    cfg.forecast.sample_interval_ms = 20;
    let (node, c) = start(cfg).await;
    create_tag(&c, "fc", 1000).await;

    // The first request loads the tag and allocates [1, 1001) at least.
    get_ids(&c, "fc", Some(10)).await;
    let first = forecast_until(&c, "fc", "sampled twice", |f| f.rate_per_sec.is_some()).await;
    assert!(first.ids_left <= (i64::MAX - 1001) as u64, "{first:?}");
    // /cache reads IDs left from the applied state: exactly the distance to the last ID.
    let db = c.db().await.unwrap();
    let max_id = db.iter().find(|t| t.tag == "fc").unwrap().max_id;
    let now = forecast_until(&c, "fc", "as in /db", |_| true).await;
    assert!(now.ids_left <= (i64::MAX - max_id) as u64, "{now:?} with max_id {max_id}");

    // A batch larger than the step gets a segment of its own: fewer left, and a rate.
    get_ids(&c, "fc", Some(5000)).await;
    let later =
        forecast_until(&c, "fc", "consuming", |f| f.ids_left <= first.ids_left - 5000 && f.rate_per_sec > Some(0.0))
            .await;
    assert!(later.ids_left <= first.ids_left - 5000, "{first:?} then {later:?}");
    assert!(later.exhausted_in_secs.is_some_and(|s| s > 0), "{later:?}");

    // A bounded tag is followed from its first allocation on, however idle after it.
    let capped = leaf_api::types::CreateTagRequest { upper_bound: Some(100_000), ..tag_request("capped", 10) };
    c.create_tag(&capped).await.unwrap();
    get_ids(&c, "capped", None).await;
    let text = metrics_until(&c, "leaf_tag_ids_left{tag=\"capped\"} ").await;
    for series in [
        "leaf_tag_ids_left{tag=\"fc\"} ",
        "leaf_tag_consumption_rate{tag=\"fc\"} ",
        "leaf_tag_exhaustion_seconds{tag=\"fc\"} ",
        "leaf_snowflake_epoch_years_left ",
        "leaf_snowflake_free_worker_ids ",
    ] {
        assert!(text.lines().any(|l| l.starts_with(series)), "no {series:?} in\n{text}");
    }
    // An unbounded tag that never moved has no series (the label set follows the tags that
    // move); its forecast is still in the API.
    assert!(!text.contains("tag=\"leaf-segment-test\""), "{text}");
    let idle = c.cache().await.unwrap();
    assert!(idle.iter().all(|e| e.tag != "leaf-segment-test" || e.forecast.is_some()), "{idle:?}");

    // The snowflake forecast: this node's worker ID is the only one held.
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    let sf = health(&c).await.snowflake.forecast.expect("the node fills in the snowflake forecast");
    assert_eq!(sf.epoch_ends_ms, 1_288_834_974_657 + (1 << 41) - 1);
    assert!(sf.epoch_years_left > 0.0 && sf.epoch_years_left < 70.0, "{sf:?}");
    assert_eq!(sf.free_worker_ids, 1023, "{sf:?}");
    let text = c.metrics().await.unwrap();
    assert!(text.lines().any(|l| l == "leaf_snowflake_free_worker_ids 1023"), "{text}");
    node.shutdown().await;
}
