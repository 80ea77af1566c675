//! The forecasts of a running node: [`Forecasts`], what `/cache`, `/health` and `/metrics`
//! read, and the [`Sampler`] task that keeps the tags' rates.
//!
//! No hook sees allocations as they are applied (the state machine lives in `leaf-raft-store`
//! and reports them only to their proposer), so the sampler reads every tag's `max_id` from
//! the applied state every `forecast.sample_interval_ms` and feeds the deltas to the tag's
//! [`RateEstimator`]. The applied state is the same on every node, so is the rate, up to when
//! each node samples. A sample also sets the per-tag gauges and drops the series of a tag that
//! is gone (none can be today), so the label set stays within the tags that exist
//! ([`leaf_raft_store::MAX_TAGS`] at most).
//!
//! IDs left are read fresh from the state on each `/cache` request; the snowflake forecast
//! needs no history and is computed when asked ([`Forecasts::snowflake`]).
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use leaf_api::types::{SnowflakeForecast, TagForecast};
use leaf_raft_store::StateReader;
use tokio::sync::watch;

use super::{epoch_years_left, exhausted_in_secs, free_worker_ids, ids_left, last_id, RateEstimator};
use crate::config::ForecastConfig;
use crate::metrics::Metrics;
use crate::snowflake::generator::Layout;

/// Tag name → IDs per second, for the tags with a known rate.
type Rates = ArcSwap<HashMap<String, f64>>;

/// The forecasts as the node's handlers read them.
pub struct Forecasts {
    state: StateReader,
    layout: Layout,
    /// `snowflake.worker_ids`: the worker IDs this cluster may take.
    worker_ids: crate::config::WorkerIds,
    rates: Arc<Rates>,
}

impl Forecasts {
    /// The forecasts over the applied `state`, for snowflake IDs of `layout`.
    pub fn new(state: StateReader, layout: Layout, worker_ids: crate::config::WorkerIds) -> Self {
        Forecasts { state, layout, worker_ids, rates: Arc::default() }
    }

    /// `tag`'s forecast: IDs left as applied now, the rate as of the last sample; `None` if
    /// the tag is not in the applied state.
    pub fn tag(&self, tag: &str) -> Option<TagForecast> {
        let record = self.state.tag(tag)?;
        let left = ids_left(record.max_id, last_id(&record));
        let rate = self.rates.load().get(tag).copied();
        Some(TagForecast { ids_left: left, rate_per_sec: rate, exhausted_in_secs: exhausted_in_secs(left, rate) })
    }

    /// The snowflake forecast at `now_ms` (this node's clock, which also stands in for the
    /// leader's when judging whether a worker ID is reclaimable).
    pub fn snowflake(&self, now_ms: i64) -> SnowflakeForecast {
        let free = self.state.with_state(|s| free_worker_ids(&s.workers, &s.members, now_ms, self.worker_ids));
        SnowflakeForecast {
            epoch_ends_ms: self.layout.max_ms(),
            epoch_years_left: epoch_years_left(self.layout, now_ms),
            free_worker_ids: free,
        }
    }

    /// The sampler task: samples at once, then every `cfg.sample_interval_ms`, until
    /// `shutdown` turns true (or its sender is gone).
    pub async fn run(self: Arc<Self>, cfg: ForecastConfig, metrics: Arc<Metrics>, mut shutdown: watch::Receiver<bool>) {
        let mut sampler = Sampler::new(Duration::from_secs(cfg.window_secs), metrics, self.rates.clone());
        let start = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(Duration::from_millis(cfg.sample_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                r = shutdown.wait_for(|stop| *stop) => {
                    let _ = r;
                    return;
                }
            }
            // Obfuscated tags get no forecast: their allocation rate would count their IDs;
            // archived ones allocate nothing.
            let tags = self.state.with_state(|s| {
                s.tags
                    .iter()
                    .filter(|(_, r)| {
                        !matches!(r.profile, leaf_raft_store::StoredProfile::Obfuscated { .. })
                            && r.archived_ms.is_none()
                    })
                    .map(|(t, r)| (t.clone(), r.max_id, last_id(r)))
                    .collect::<Vec<_>>()
            });
            sampler.sample(start.elapsed(), tags);
        }
    }
}

/// The rate estimators of every tag, fed by [`Sampler::sample`].
pub struct Sampler {
    window: Duration,
    estimators: HashMap<String, RateEstimator>,
    metrics: Arc<Metrics>,
    rates: Arc<Rates>,
}

impl Sampler {
    /// A sampler with no history, whose rates decay over `window`, publishing to `rates` and
    /// the gauges of `metrics`.
    pub fn new(window: Duration, metrics: Arc<Metrics>, rates: Arc<Rates>) -> Self {
        Sampler { window, estimators: HashMap::new(), metrics, rates }
    }

    /// One sample of every tag, `(tag, max_id, last ID)`, taken at `at` (from a fixed origin):
    /// updates the rates and the gauges; a tag missing from `tags` loses its estimator and its
    /// series.
    pub fn sample(&mut self, at: Duration, tags: Vec<(String, i64, i64)>) {
        let mut rates = HashMap::with_capacity(tags.len());
        let mut seen = std::collections::HashSet::with_capacity(tags.len());
        for (tag, max_id, last) in tags {
            let e = self.estimators.entry(tag.clone()).or_insert_with(|| RateEstimator::new(self.window));
            e.observe(at, max_id);
            let rate = e.rate();
            let left = ids_left(max_id, last);
            self.metrics.set_tag_forecast(&tag, left, rate, exhausted_in_secs(left, rate));
            if let Some(r) = rate {
                rates.insert(tag.clone(), r);
            }
            seen.insert(tag);
        }
        let metrics = &self.metrics;
        self.estimators.retain(|tag, _| {
            let keep = seen.contains(tag);
            if !keep {
                metrics.remove_tag_forecast(tag);
            }
            keep
        });
        self.rates.store(Arc::new(rates));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forecast::LAST_ID;

    fn render(m: &Metrics) -> String {
        crate::metrics::render_idle(m)
    }

    /// The series of `name`, sorted (a family's order is its hash map's).
    fn series<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
        let mut v: Vec<_> = text.lines().filter(|l| l.starts_with(&format!("{name}{{"))).collect();
        v.sort();
        v
    }

    #[test]
    fn samples_set_the_gauges_and_the_rates_and_drop_gone_tags() {
        let metrics = Arc::new(Metrics::new());
        let rates = Arc::new(Rates::default());
        let mut s = Sampler::new(Duration::from_secs(900), metrics.clone(), rates.clone());
        let t = |secs| Duration::from_secs(secs);
        s.sample(t(0), vec![("a".into(), 1, LAST_ID), ("full".into(), 100, 99)]);
        let text = render(&metrics);
        assert_eq!(
            series(&text, "leaf_tag_ids_left"),
            [format!("leaf_tag_ids_left{{tag=\"a\"}} {}", i64::MAX - 1), "leaf_tag_ids_left{tag=\"full\"} 0".into()]
        );
        // No rate yet: no rate series, and no exhaustion series but for the exhausted tag.
        assert!(series(&text, "leaf_tag_consumption_rate").is_empty(), "{text}");
        assert_eq!(series(&text, "leaf_tag_exhaustion_seconds"), ["leaf_tag_exhaustion_seconds{tag=\"full\"} 0"]);
        assert!(rates.load().is_empty());

        s.sample(t(10), vec![("a".into(), 1001, LAST_ID), ("full".into(), 100, 99)]);
        let text = render(&metrics);
        assert!(text.contains("leaf_tag_consumption_rate{tag=\"a\"} 100.0"), "{text}");
        assert!(text.contains("leaf_tag_consumption_rate{tag=\"full\"} 0.0"), "{text}");
        let want = exhausted_in_secs((i64::MAX - 1001) as u64, Some(100.0)).unwrap();
        assert!(text.contains(&format!("leaf_tag_exhaustion_seconds{{tag=\"a\"}} {want}")), "{text}");
        assert_eq!(rates.load().get("a"), Some(&100.0));

        // "a" is gone: its estimator, rate and every series with it.
        s.sample(t(20), vec![("full".into(), 100, 99)]);
        let text = render(&metrics);
        assert!(!text.contains("tag=\"a\""), "{text}");
        assert!(rates.load().get("a").is_none());
        assert_eq!(s.estimators.len(), 1);
    }
}
