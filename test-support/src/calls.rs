//! The calls on a [`Client`] that every test suite makes, each with the test's failure message
//! built in.
use std::time::Duration;

use leaf_api::types::{CreateTagRequest, Health, SnowflakeState};
use leaf_api::ErrorBody;
use leaf_client::{Client, HealthMode, Method, StatusCode};

/// The request that creates segment tag `tag` with `step`.
pub fn tag_req(tag: &str, step: i64) -> CreateTagRequest {
    CreateTagRequest { tag: tag.into(), step, max_id: None, description: None, ..Default::default() }
}

/// A token of a global tier for its regions (the `regions` and `tags` rights on every tag),
/// created through `c` (the admin token): its bearer, or the test fails.
pub async fn create_regions_token(c: &Client) -> String {
    let req = leaf_api::tokens::CreateTokenRequest {
        name: "regions".into(),
        rights: vec![leaf_api::tokens::Right::Regions, leaf_api::tokens::Right::Tags],
        tags: vec![leaf_api::tokens::TagPattern::parse("*").expect("a valid pattern")],
        quota: None,
        id_quota: None,
        max_tags: None,
    };
    c.create_token(&req).await.unwrap_or_else(|e| panic!("create the regions' token: {e}")).bearer
}

/// Creates segment tag `tag` with `step`, or fails the test.
pub async fn create_tag(c: &Client, tag: &str, step: i64) {
    c.create_tag(&tag_req(tag, step)).await.unwrap_or_else(|e| panic!("create {tag}: {e}"));
}

/// Creates segment tag `tag` with `step`, starting above `max_id`, or fails the test.
pub async fn create_bounded_tag(c: &Client, tag: &str, step: i64, max_id: i64) {
    let req = CreateTagRequest { max_id: Some(max_id), ..tag_req(tag, step) };
    c.create_tag(&req).await.unwrap_or_else(|e| panic!("create {tag}: {e}"));
}

/// `count` segment IDs of `tag` (one, as the single-ID route, when `None`).
pub async fn try_get_ids(c: &Client, tag: &str, count: Option<u32>) -> Result<Vec<i64>, String> {
    let ids = match count {
        Some(n) => c.segment_ids(tag, n).await,
        None => c.segment_id(tag).await.map(|id| vec![id]),
    };
    ids.map_err(|e| format!("{tag} ({count:?}): {e}"))
}

/// [`try_get_ids`], or fail the test.
pub async fn get_ids(c: &Client, tag: &str, count: Option<u32>) -> Vec<i64> {
    try_get_ids(c, tag, count).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Sends a request as given (deliberately malformed ones included) and reads the error body.
pub async fn error_of(
    c: &Client,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> (StatusCode, ErrorBody) {
    let r = c.raw(method, path, body.map(|v| bytes::Bytes::from(v.to_string()))).await.unwrap();
    let e = serde_json::from_slice(&r.body).unwrap_or_else(|_| panic!("{path}: not an error body: {:?}", r.body));
    (r.status, e)
}

/// Waits until the node behind `c` has snowflake mode in `state` (`serving`, `off`, ...), for up
/// to `within`; returns its health.
pub async fn wait_snowflake(c: &Client, state: SnowflakeState, within: Duration) -> Health {
    crate::eventually(&format!("snowflake {state}"), within, || async {
        match c.health(HealthMode::All).await {
            Ok(r) if r.health.snowflake.state == state => Ok(r.health),
            Ok(r) => Err(format!("{:?}", r.health.snowflake)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
}
