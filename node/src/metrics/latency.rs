//! `leaf_http_request_duration_seconds{route, status}`: a histogram per route template and
//! answered status, counted without a lock (the per-ID path passes here).
//!
//! Every cell is made up front: [`ROUTES`] (the public route table, the internal RPC mount and
//! `unmatched`) × [`STATUSES`] (the statuses the node answers, and `other`), each a fixed set of
//! atomic buckets. So the label set is bounded whatever clients send, an observation is a few
//! relaxed atomic adds, and a scrape lists only the cells that saw a request.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;

/// Upper bounds of the buckets, seconds: 100 µs to 10 s.
pub const BOUNDS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A histogram of durations whose observations are relaxed atomic adds. A scrape may see an
/// observation's count before its sum: the next scrape is exact again.
#[derive(Debug, Default)]
pub struct AtomicHistogram {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_ns: AtomicU64,
}

impl AtomicHistogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BOUNDS.iter().position(|b| secs <= *b).unwrap_or(BOUNDS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let counts: Vec<u64> = self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).collect();
        let buckets: Vec<(f64, u64)> = BOUNDS.iter().copied().chain([f64::MAX]).zip(counts.iter().copied()).collect();
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(sum, counts.iter().sum(), &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The `route` label values: the public route templates, then these.
const INTERNAL: &str = "/internal";
const UNMATCHED: &str = "unmatched";

/// Every `route` label value, in cell order: the templates of [`leaf_api::routes::TABLE`],
/// then the internal mount and `unmatched`.
static LABELS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| leaf_api::routes::templates().chain([INTERNAL, UNMATCHED]).collect());

/// Every `route` label value, in cell order.
pub fn routes() -> impl Iterator<Item = &'static str> {
    LABELS.iter().copied()
}

/// The `status` label values, in cell order; the last is every other status.
pub const STATUSES: [&str; 15] =
    ["200", "201", "204", "400", "401", "403", "404", "405", "409", "413", "429", "500", "502", "503", "other"];

/// A route label, as an index into [`routes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route(usize);

impl Route {
    /// The route template `path` matches: the internal mount for `/internal/…`, else
    /// `unmatched`.
    pub fn of(path: &str) -> Route {
        let public = LABELS.len() - 2;
        if crate::raft::service::is_internal(path) {
            return Route(public);
        }
        match LABELS[..public].iter().position(|t| leaf_api::routes::matches(t, path)) {
            Some(i) => Route(i),
            None => Route(public + 1),
        }
    }

    pub fn label(self) -> &'static str {
        LABELS.get(self.0).copied().unwrap_or(UNMATCHED)
    }
}

fn status_index(status: StatusCode) -> usize {
    let s = status.as_str();
    STATUSES[..STATUSES.len() - 1].iter().position(|x| *x == s).unwrap_or(STATUSES.len() - 1)
}

/// Copies of every cell, so threads add to different cache lines: with one copy, the worker
/// threads serving the same route would bounce its lines between cores on every answer.
const SHARDS: usize = 8;

thread_local! {
    /// The shard this thread adds to, given out in turn.
    static SHARD: usize = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) as usize % SHARDS
    };
}

/// The request duration histograms: one cell per route and status, in [`SHARDS`] copies that
/// a scrape adds up.
#[derive(Debug)]
pub struct HttpLatency {
    shards: Box<[Box<[AtomicHistogram]>]>,
}

impl Default for HttpLatency {
    fn default() -> Self {
        let n = routes().count() * STATUSES.len();
        let shard = || (0..n).map(|_| AtomicHistogram::default()).collect::<Box<[_]>>();
        HttpLatency { shards: (0..SHARDS).map(|_| shard()).collect() }
    }
}

impl HttpLatency {
    pub fn observe(&self, route: Route, status: StatusCode, d: Duration) {
        let shard = &self.shards[SHARD.with(|s| *s)];
        if let Some(cell) = shard.get(route.0 * STATUSES.len() + status_index(status)) {
            cell.observe(d);
        }
    }

    /// Cell `i` (route × status) summed over the shards.
    fn merged(&self, i: usize) -> AtomicHistogram {
        let out = AtomicHistogram::default();
        for shard in self.shards.iter() {
            let cell = &shard[i];
            for (o, b) in out.buckets.iter().zip(cell.buckets.iter()) {
                o.fetch_add(b.load(Ordering::Relaxed), Ordering::Relaxed);
            }
            out.sum_ns.fetch_add(cell.sum_ns.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        out
    }

    /// The cell of `(route, status)`, for tests.
    #[cfg(test)]
    fn cell(&self, route: Route, status: StatusCode) -> AtomicHistogram {
        self.merged(route.0 * STATUSES.len() + status_index(status))
    }
}

/// Encodes [`HttpLatency`]'s cells that saw a request.
#[derive(Debug)]
pub struct HttpLatencyCollector(pub Arc<HttpLatency>);

impl Collector for HttpLatencyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "http_request_duration_seconds",
            "Time from a request's arrival to its answer's headers, by route template and status (gRPC not included)",
            None,
            MetricType::Histogram,
        )?;
        for (r, route) in routes().enumerate() {
            for (s, status) in STATUSES.iter().enumerate() {
                let cell = self.0.merged(r * STATUSES.len() + s);
                if cell.count() == 0 {
                    continue;
                }
                let labels = [("route", route), ("status", *status)];
                cell.encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use leaf_api::routes;

    #[test]
    fn paths_map_to_their_route_template_and_nothing_else_gets_a_label() {
        assert_eq!(Route::of("/api/segment/get/orders").label(), routes::SEGMENT_GET);
        assert_eq!(Route::of("/api/snowflake/get/k").label(), routes::SNOWFLAKE_GET);
        assert_eq!(Route::of("/admin/tags").label(), routes::ADMIN_TAGS);
        assert_eq!(Route::of("/admin/tags/a").label(), routes::ADMIN_TAG);
        assert_eq!(Route::of("/admin/tags/a/decode/5").label(), routes::ADMIN_TAG_DECODE);
        assert_eq!(Route::of("/admin/cluster/nodes/4/promote").label(), routes::CLUSTER_PROMOTE);
        assert_eq!(Route::of("/ui").label(), routes::UI);
        assert_eq!(Route::of("/ui/app.js").label(), routes::UI_ASSET);
        assert_eq!(Route::of("/internal/raft/append").label(), "/internal");
        for junk in ["/", "", "/api/segment/get/", "/api/segment/get/a/b", "/admin/tags/", "/x", "/health/"] {
            assert_eq!(Route::of(junk).label(), "unmatched", "{junk:?}");
        }
        // Every template, with its parameters filled, is its own label.
        for t in routes::templates() {
            let params = vec!["x"; t.matches('{').count()];
            assert_eq!(Route::of(&routes::fill(t, &params)).label(), t);
        }
    }

    #[test]
    fn observations_land_in_their_bucket_and_only_used_cells_are_listed() {
        let h = Arc::new(HttpLatency::default());
        let seg = Route::of("/api/segment/get/a");
        h.observe(seg, StatusCode::OK, Duration::from_micros(80));
        h.observe(seg, StatusCode::OK, Duration::from_millis(3));
        h.observe(seg, StatusCode::OK, Duration::from_secs(30));
        h.observe(seg, StatusCode::IM_A_TEAPOT, Duration::from_millis(1));
        assert_eq!(h.cell(seg, StatusCode::OK).count(), 3);
        let mut registry = prometheus_client::registry::Registry::default();
        registry.sub_registry_with_prefix("leaf").register_collector(Box::new(HttpLatencyCollector(h)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let ok = r#"route="/api/segment/get/{tag}",status="200""#;
        assert!(text.contains(&format!("leaf_http_request_duration_seconds_count{{{ok}}} 3")), "{text}");
        for (le, n) in [("0.0001", 1), ("0.005", 2), ("10.0", 2), ("+Inf", 3)] {
            let line = format!("leaf_http_request_duration_seconds_bucket{{le=\"{le}\",{ok}}} {n}");
            assert!(text.contains(&line), "{line}: {text}");
        }
        assert!(text.contains(r#"status="other""#), "{text}");
        // Two cells used: two `_count` lines.
        assert_eq!(text.lines().filter(|l| l.starts_with("leaf_http_request_duration_seconds_count")).count(), 2);
    }
}
