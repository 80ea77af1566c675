//! Read-only endpoints: health, cluster status, buffers, stored tags, metrics. All
//! reads, retried as idempotent (see [`crate::retry`]).
use hyper::StatusCode;
use leaf_api::routes;
use leaf_api::types::{CacheEntry, ClusterStatus, Health, ListQuery, TagInfo};

use crate::client::{api_error, Call, Client};
use crate::error::ClientError;

/// Which readiness `/health` answers for (`?mode=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HealthMode {
    /// Segment-ready and snowflake-ready (no `mode` parameter).
    #[default]
    All,
    /// The node can commit new segments.
    Segment,
    /// The node issues snowflake IDs (or snowflake is disabled).
    Snowflake,
}

impl HealthMode {
    fn query(self) -> &'static str {
        match self {
            HealthMode::All => "",
            HealthMode::Segment => "?mode=segment",
            HealthMode::Snowflake => "?mode=snowflake",
        }
    }
}

/// A node's `/health` answer: whether the asked-for readiness holds (HTTP 200 rather than
/// 503), and the report either way.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthReport {
    pub ready: bool,
    pub health: Health,
}

impl Client {
    /// `GET /health`: a node that is not ready is an answer (`ready: false`), not an error,
    /// and is not retried on another node. Errors are retried as for any read.
    pub async fn health(&self, mode: HealthMode) -> Result<HealthReport, ClientError> {
        let mut call = Call::get(format!("{}{}", routes::HEALTH, mode.query()));
        call.also_ok = Some(StatusCode::SERVICE_UNAVAILABLE);
        let answer = self.execute(call).await?;
        match serde_json::from_slice::<Health>(&answer.body) {
            Ok(health) => Ok(HealthReport { ready: answer.status == StatusCode::OK, health }),
            // A 503 with an error body: the node refused the connection (over its limit).
            Err(_) if answer.status != StatusCode::OK => Err(api_error(&answer.node, answer.status, &answer.body)),
            Err(e) => Err(answer.decode_error(e.to_string())),
        }
    }

    /// `GET /cluster/status` of whichever node answers.
    pub async fn cluster_status(&self) -> Result<ClusterStatus, ClientError> {
        self.execute(Call::get(routes::CLUSTER_STATUS.to_string())).await?.json()
    }

    /// `GET /cache`: the answering node's per-tag buffers (the first page: up to
    /// [`leaf_api::tag::MAX_LIST_PAGE`] tags).
    pub async fn cache(&self) -> Result<Vec<CacheEntry>, ClientError> {
        self.cache_page(&ListQuery::default()).await
    }

    /// One page of `GET /cache` (see [`ListQuery`]).
    pub async fn cache_page(&self, query: &ListQuery) -> Result<Vec<CacheEntry>, ClientError> {
        self.execute(Call::get(crate::admin::with_query(routes::CACHE, query))).await?.json()
    }

    /// `GET /db`: the tags as stored (the first page: up to [`leaf_api::tag::MAX_LIST_PAGE`]
    /// tags).
    pub async fn db(&self) -> Result<Vec<TagInfo>, ClientError> {
        self.db_page(&ListQuery::default()).await
    }

    /// One page of `GET /db` (see [`ListQuery`]).
    pub async fn db_page(&self, query: &ListQuery) -> Result<Vec<TagInfo>, ClientError> {
        self.execute(Call::get(crate::admin::with_query(routes::DB, query))).await?.json()
    }

    /// `GET /metrics`: Prometheus text.
    pub async fn metrics(&self) -> Result<String, ClientError> {
        let answer = self.execute(Call::get(routes::METRICS.to_string())).await?;
        String::from_utf8(answer.body.to_vec()).map_err(|_| answer.decode_error("not UTF-8"))
    }
}
