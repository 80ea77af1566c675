//! Prometheus metrics (`GET /metrics`).
//!
//! Hot-path counters are plain atomics handed out once per tag ([`Metrics::ids_counter`]), so
//! counting an ID never takes a lock or hashes a label set.
//!
//! Layout:
//! - this file: [`Metrics`], the node's registry (`leaf_*` series, and the `process_*` ones
//!   without the prefix), the counters handed to the rest of the node, and [`Metrics::render`].
//! - [`gapless`]: gapless issues by outcome and their latency.
//! - [`exposition`]: OpenMetrics or the Prometheus text format 0.0.4, by the `Accept` header.
//! - [`labels`]: the label sets, and the label enum [`GrpcMethod`].
//! - [`latency`]: `leaf_http_request_duration_seconds{route, status}`, lock-free.
//! - [`node`]: gauges read from the node's state at each scrape (quorum contact, replication
//!   lag, membership, profiles, tokens, audit, the snowflake worker, peer clocks, build).
//! - [`process`]: `process_*` from `/proc/self`.
//! - [`region`]: a region's adoption, its tags' runways and its block grants.
//! - [`scope`]: the exposition as a scoped `monitor` token reads it (its tags, its token).
//! - [`tag_series`]: the per-tag series, bounded to the busiest tags (and the forecasts to
//!   those nearest exhaustion), with totals by profile.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use leaf_api::ErrorCode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::raft::RaftStatus;

pub mod exposition;
pub mod gapless;
pub mod labels;
pub mod latency;
pub mod node;
pub mod process;
pub mod region;
pub mod scope;
pub mod tag_series;

pub use exposition::Format;
pub use labels::GrpcMethod;
use labels::{CodeLabels, GrpcLabels, StoreLabels, TokenLabels};
pub use latency::Route;
pub use node::{NodeFacts, SnowflakeFacts};

/// gRPC status codes 0 (OK) to 16 (UNAUTHENTICATED).
const GRPC_CODES: usize = 17;

/// All metrics of one node.
pub struct Metrics {
    registry: Registry,
    /// Whether a scrape reads the allocator's heap figures (`metrics.heap_stats`).
    heap_stats: Arc<std::sync::atomic::AtomicBool>,
    /// Per-tag counters and forecasts, shown bounded; the snowflake keys' counters too.
    tag_series: Arc<tag_series::TagSeries>,
    refill_seconds: Histogram,
    gapless: gapless::GaplessMetrics,
    region: Arc<region::RegionMetrics>,
    errors: Family<CodeLabels, Counter>,
    raft_term: Gauge,
    raft_leader: Gauge,
    raft_is_leader: Gauge,
    raft_last_log: Gauge,
    raft_applied: Gauge,
    raft_snapshot: Gauge,
    tags: Gauge,
    ready: Gauge<f64, AtomicU64>,
    /// Leader answers refused because they did not fit the request (see `raft::answer`).
    peer_answers_rejected: Counter,
    /// Connections answered 503 because `http.max_connections` were open.
    connections_refused: Counter,
    /// Read-index rounds this node started for its callers (shared by concurrent callers).
    read_index_rounds: Counter,
    /// Requests for a tag this node does not hold answered from its own state, without a
    /// read-index round (the node was caught up with a leader it heard from recently).
    local_misses: Counter,
    /// TLS handshakes, plaintext refusals, reloads, certificate expiry.
    tls: crate::tls::TlsCounters,
    /// gRPC calls by method and status code: one counter per pair, made up front, so counting
    /// a call is one atomic add (index: method × [`GRPC_CODES`] + code).
    grpc_calls: Vec<Counter>,
    /// Snowflake keys seen so far, to bound the label set (shown by [`tag_series`]).
    snowflake_keys: Arc<std::sync::RwLock<std::collections::HashMap<String, Counter>>>,
    /// The snowflake forecast gauges ([`crate::forecast`]; the tags' are in [`tag_series`]).
    forecast: ForecastGauges,
    /// Requests made with scoped tokens, by token and outcome.
    token_requests: Family<TokenLabels, Counter>,
    /// Request durations by route and status.
    http: Arc<latency::HttpLatency>,
    /// Gauges set from the node's state at each scrape.
    node: node::NodeGauges,
    /// Failed disk operations: Raft's storage (counted once, when a scrape first sees Raft
    /// stopped by it) and the snowflake state file.
    storage_errors: Family<StoreLabels, Counter>,
    raft_storage_failure_counted: AtomicBool,
}

/// The gauges of snowflake mode's exhaustion forecast (set at each scrape).
#[derive(Default)]
struct ForecastGauges {
    epoch_years_left: Gauge<f64, AtomicU64>,
    free_worker_ids: Gauge,
}

/// Distinct snowflake keys counted under their own label; later ones count as `_other`, so
/// clients inventing keys cannot grow `/metrics` without bound.
const MAX_SNOWFLAKE_KEYS: usize = 1000;
const OTHER_KEYS: &str = "_other";

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut root = Registry::default();
        let heap_stats: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        root.register_collector(Box::new(process::ProcessCollector { heap: heap_stats.clone() }));
        let registry = root.sub_registry_with_prefix("leaf");
        let snowflake_keys: Arc<std::sync::RwLock<_>> = Arc::default();
        let m = Metrics {
            tag_series: Arc::new(tag_series::TagSeries::new(snowflake_keys.clone())),
            refill_seconds: Histogram::new(exponential_buckets(0.0002, 2.0, 16)),
            gapless: gapless::GaplessMetrics::default(),
            region: Arc::default(),
            errors: Family::default(),
            raft_term: Gauge::default(),
            raft_leader: Gauge::default(),
            raft_is_leader: Gauge::default(),
            raft_last_log: Gauge::default(),
            raft_applied: Gauge::default(),
            raft_snapshot: Gauge::default(),
            tags: Gauge::default(),
            ready: Gauge::default(),
            peer_answers_rejected: Counter::default(),
            connections_refused: Counter::default(),
            read_index_rounds: Counter::default(),
            local_misses: Counter::default(),
            tls: Default::default(),
            snowflake_keys,
            heap_stats,
            grpc_calls: Vec::new(),
            forecast: ForecastGauges::default(),
            token_requests: Family::default(),
            http: Arc::default(),
            node: node::NodeGauges::default(),
            storage_errors: Family::default(),
            raft_storage_failure_counted: AtomicBool::new(false),
            registry: Registry::default(),
        };
        let grpc: Family<GrpcLabels, Counter> = Family::default();
        let grpc_calls = GrpcMethod::ALL
            .iter()
            .flat_map(|m| (0..GRPC_CODES as i32).map(move |c| (*m, tonic::Code::from_i32(c))))
            .map(|(m, c)| {
                grpc.get_or_create(&GrpcLabels { method: m.as_str().to_string(), code: format!("{c:?}") }).clone()
            })
            .collect();
        registry.register("grpc_calls", "gRPC calls answered, by method and status code", grpc);
        registry.register_collector(Box::new(TagSeriesCollector(m.tag_series.clone())));
        registry.register(
            "segment_refill_seconds",
            "Segment allocation latency (Raft commit)",
            m.refill_seconds.clone(),
        );
        m.gapless.register(registry);
        m.region.register(registry);
        registry.register("errors", "Error responses, by code", m.errors.clone());
        registry.register("raft_term", "Current Raft term", m.raft_term.clone());
        registry.register("raft_leader_id", "Node ID of the known leader (0 when none)", m.raft_leader.clone());
        registry.register("raft_is_leader", "1 when this node is the leader", m.raft_is_leader.clone());
        registry.register("raft_last_log_index", "Index of the last log entry", m.raft_last_log.clone());
        registry.register(
            "raft_applied_index",
            "Index of the last applied entry (commit index)",
            m.raft_applied.clone(),
        );
        registry.register("raft_snapshot_index", "Index covered by the current snapshot", m.raft_snapshot.clone());
        registry.register("tags", "Tags in the replicated state", m.tags.clone());
        registry.register("ready", "1 when the node is ready to serve", m.ready.clone());
        registry.register(
            "peer_answers_rejected",
            "Answers of the leader refused because they did not fit the request (a broken or forged peer)",
            m.peer_answers_rejected.clone(),
        );
        registry.register(
            "http_connections_refused",
            "Connections answered 503 and closed because http.max_connections were open",
            m.connections_refused.clone(),
        );
        registry.register(
            "read_index_rounds",
            "Read-index rounds through the leader (unknown tags), each shared by every caller waiting for it",
            m.read_index_rounds.clone(),
        );
        registry.register(
            "unknown_tags_answered_locally",
            "Requests for a tag this node does not hold answered 404 from its own state, without a read-index round",
            m.local_misses.clone(),
        );
        let tls = &m.tls;
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes that failed or timed out (bad or missing client certificates included)",
            tls.handshake_failures.clone(),
        );
        registry.register(
            "tls_full_handshakes",
            "Completed TLS handshakes that were full ones (certificates sent and verified)",
            tls.full_handshakes.clone(),
        );
        registry.register(
            "tls_resumed_handshakes",
            "Completed TLS handshakes that resumed an earlier session (ticket or session ID)",
            tls.resumed_handshakes.clone(),
        );
        registry.register(
            "tls_plaintext_refused",
            "Plaintext requests on the TLS port, answered 400",
            tls.plaintext_refused.clone(),
        );
        registry.register("tls_reloads", "Successful reloads of the TLS files", tls.reloads.clone());
        registry.register(
            "tls_reload_failures",
            "Reloads of the TLS files that failed (the previous files stay in use)",
            tls.reload_failures.clone(),
        );
        registry.register(
            "tls_cert_not_after_seconds",
            "Expiry of this node's TLS certificate, Unix seconds (0 without TLS)",
            tls.cert_not_after.clone(),
        );
        let f = &m.forecast;
        registry.register(
            "snowflake_epoch_years_left",
            "Years until the 41-bit snowflake timestamp runs out (snowflake.epoch_ms + 2^41 ms)",
            f.epoch_years_left.clone(),
        );
        registry.register(
            "snowflake_free_worker_ids",
            "Snowflake worker IDs of snowflake.worker_ids not held by a node, or reclaimable, as this node has applied them",
            f.free_worker_ids.clone(),
        );
        registry.register(
            "token_requests",
            "Requests made with scoped tokens on this node, by token ID, token name and outcome (allowed; \
             limited: over the token's quota, answered 429; denied: outside its scope, answered 403)",
            m.token_requests.clone(),
        );
        registry.register(
            "storage_errors",
            "Failed disk operations, by store (raft: Raft's log or state machine, which stops Raft; \
             snowflake_state: the snowflake state file)",
            m.storage_errors.clone(),
        );
        for store in ["raft", "snowflake_state"] {
            let _ = m.storage_errors.get_or_create(&StoreLabels { store });
        }
        registry.register_collector(Box::new(latency::HttpLatencyCollector(m.http.clone())));
        registry.register_collector(Box::new(m.node.clone()));
        for code in ErrorCode::ALL {
            let _ = m.errors.get_or_create(&CodeLabels { code: code.as_str().to_string() });
        }
        Metrics { registry: root, grpc_calls, ..m }
    }

    /// Counts a request of `route` answered with `status` after `took`.
    pub fn http_request(&self, route: Route, status: axum::http::StatusCode, took: std::time::Duration) {
        self.http.observe(route, status, took);
    }

    /// Gapless issues' counters and latency.
    /// A region's metrics (set by its leader's keeper; 0 or none on a node of no region).
    pub fn region(&self) -> Arc<region::RegionMetrics> {
        self.region.clone()
    }

    pub fn gapless(&self) -> &gapless::GaplessMetrics {
        &self.gapless
    }

    /// The counter of failed writes of the snowflake state file.
    pub fn snowflake_state_errors(&self) -> Counter {
        self.storage_errors.get_or_create(&StoreLabels { store: "snowflake_state" }).clone()
    }

    /// Error answers counted so far, every code.
    pub fn errors_total(&self) -> u64 {
        ErrorCode::ALL
            .iter()
            .map(|c| self.errors.get_or_create(&CodeLabels { code: c.as_str().to_string() }).get())
            .sum()
    }

    /// Counts a gRPC call of `method` answered with `code`.
    pub fn grpc_call(&self, method: GrpcMethod, code: tonic::Code) {
        let i = method as usize * GRPC_CODES + (code as i32).clamp(0, GRPC_CODES as i32 - 1) as usize;
        if let Some(c) = self.grpc_calls.get(i) {
            c.inc();
        }
    }

    /// The counters of requests made with token `id` (named `name`): allowed, limited,
    /// denied. A token's series are made at its first use on this node and removed once it
    /// is revoked and another token is first used (at most one set per live token).
    pub fn token_counters(&self, id: &str, name: &str) -> (Counter, Counter, Counter) {
        let c = |outcome| {
            self.token_requests
                .get_or_create(&TokenLabels { token: id.to_string(), name: name.to_string(), outcome })
                .clone()
        };
        (c("allowed"), c("limited"), c("denied"))
    }

    /// Removes the series of a revoked token (see [`Metrics::token_counters`]).
    pub fn remove_token_counters(&self, id: &str, name: &str) {
        for outcome in ["allowed", "limited", "denied"] {
            self.token_requests.remove(&TokenLabels { token: id.to_string(), name: name.to_string(), outcome });
        }
    }

    /// Counts a connection refused at the cap.
    pub fn connection_refused(&self) {
        self.connections_refused.inc();
    }

    /// The TLS counters.
    pub fn tls_counters(&self) -> crate::tls::TlsCounters {
        self.tls.clone()
    }

    /// The counters the Raft member increments.
    pub fn raft_counters(&self) -> crate::raft::RaftCounters {
        crate::raft::RaftCounters {
            rejected_answers: self.peer_answers_rejected.clone(),
            read_index_rounds: self.read_index_rounds.clone(),
        }
    }

    /// A request for a tag this node does not hold was answered from its own state.
    pub fn local_miss(&self) {
        self.local_misses.inc();
    }

    /// The counters of `tag` (of `profile`), made at its first load; keep them and increment
    /// them lock-free. Shown bounded ([`tag_series`]); an obfuscated tag's in no public series.
    pub fn tag_counters(&self, tag: &str, profile: leaf_api::profile::Profile) -> tag_series::TagCounters {
        self.tag_series.counters(tag, profile)
    }

    /// Forgets an unloaded tag's counters (its IDs stay in its profile's total).
    pub fn unload_tag(&self, tag: &str) {
        self.tag_series.unload(tag);
    }

    /// Shows per-tag series for at most `max` tags (`metrics.max_tag_series`).
    pub fn set_max_tag_series(&self, max: usize) {
        self.tag_series.set_max(max);
    }

    /// Whether a scrape reads the allocator's heap figures (`metrics.heap_stats`).
    pub fn set_heap_stats(&self, on: bool) {
        self.heap_stats.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Snowflake IDs served so far, every key.
    pub fn snowflake_served_total(&self) -> u64 {
        self.snowflake_keys.read().unwrap_or_else(|e| e.into_inner()).values().map(Counter::get).sum()
    }

    /// Counts `n` snowflake IDs served for `key`.
    pub fn snowflake_served(&self, key: &str, n: u64) {
        {
            let read = self.snowflake_keys.read().unwrap_or_else(|e| e.into_inner());
            let full = read.len() >= MAX_SNOWFLAKE_KEYS;
            if let Some(c) = read.get(key).or_else(|| if full { read.get(OTHER_KEYS) } else { None }) {
                c.inc_by(n);
                return;
            }
        }
        let mut write = self.snowflake_keys.write().unwrap_or_else(|e| e.into_inner());
        let label = if write.len() < MAX_SNOWFLAKE_KEYS { key } else { OTHER_KEYS };
        let counter = write.entry(label.to_string()).or_default();
        counter.inc_by(n);
    }

    /// Sets `tag`'s forecast; a `None` rate or exhaustion time is not shown.
    pub fn set_tag_forecast(&self, tag: &str, ids_left: u64, rate: Option<f64>, exhausted_in_secs: Option<u64>) {
        self.tag_series.set_forecast(tag, ids_left, rate, exhausted_in_secs);
    }

    /// Forgets `tag`'s forecast (a tag that is gone).
    pub fn remove_tag_forecast(&self, tag: &str) {
        self.tag_series.remove_forecast(tag);
    }

    /// Sets the snowflake forecast gauges.
    pub fn set_snowflake_forecast(&self, epoch_years_left: f64, free_worker_ids: u16) {
        self.forecast.epoch_years_left.set(epoch_years_left);
        self.forecast.free_worker_ids.set(i64::from(free_worker_ids));
    }

    pub fn observe_refill(&self, seconds: f64) {
        self.refill_seconds.observe(seconds);
    }

    /// Whether a `/metrics` render has counted this node's Raft storage failure, so a scrape
    /// has seen it (under `raft.on_storage_failure = "exit"` the node waits for that).
    pub fn raft_storage_failure_reported(&self) -> bool {
        self.raft_storage_failure_counted.load(Ordering::Relaxed)
    }

    pub fn error(&self, code: ErrorCode) {
        self.errors.get_or_create(&CodeLabels { code: code.as_str().to_string() }).inc();
    }

    /// Renders `format`, refreshing the Raft gauges from `status` and the node gauges from
    /// `facts`.
    pub fn render(&self, status: &RaftStatus, tags: usize, facts: NodeFacts, format: Format) -> String {
        let g = |v: Option<u64>| v.unwrap_or(0) as i64;
        self.raft_term.set(status.term as i64);
        self.raft_leader.set(g(status.leader_id));
        self.raft_is_leader.set(status.is_leader as i64);
        self.raft_last_log.set(g(status.last_log_index));
        self.raft_applied.set(g(status.last_applied_index));
        self.raft_snapshot.set(g(status.snapshot_index));
        self.tags.set(tags as i64);
        self.ready.set(if status.not_ready.is_none() { 1.0 } else { 0.0 });
        if status.storage_failed && !self.raft_storage_failure_counted.swap(true, Ordering::Relaxed) {
            self.storage_errors.get_or_create(&StoreLabels { store: "raft" }).inc();
        }
        self.node.set(facts);
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encode metrics");
        }
        let out = exposition::spell_infinities(out);
        match format {
            Format::OpenMetrics => out,
            Format::Text004 => exposition::to_text_004(&out),
        }
    }
}

/// [`tag_series::TagSeries`] as a registered collector (the registry owns its collectors).
#[derive(Debug)]
struct TagSeriesCollector(Arc<tag_series::TagSeries>);

impl prometheus_client::collector::Collector for TagSeriesCollector {
    fn encode(&self, encoder: prometheus_client::encoding::DescriptorEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

/// `m` rendered for a follower with nothing in its log (tests of every module's series).
#[cfg(test)]
pub(crate) fn render_idle(m: &Metrics) -> String {
    let status = RaftStatus {
        node_id: 1,
        leader_id: None,
        is_leader: false,
        term: 0,
        last_log_index: None,
        last_applied_index: None,
        snapshot_index: None,
        purged_index: None,
        quorum_ack_age_ms: Some(0),
        not_ready: None,
        storage_failed: false,
    };
    m.render(&status, 0, NodeFacts::default(), Format::Text004)
}

#[cfg(test)]
mod tests;
