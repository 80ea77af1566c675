//! The forecasts of a running node: [`Forecasts`], what `/cache`, `/health` and `/metrics`
//! read, and the [`Sampler`] task that keeps the tags' rates.
//!
//! The sampler follows the tags that move, never every tag: each sample asks the allocation
//! journal which tags allocated since the last one ([`Journal::moved_since`]) and reads the
//! `max_id` of those, of the tags it follows already and of the bounded ones, feeding the
//! deltas to each tag's [`RateEstimator`]. An unbounded tag idle for two windows is dropped
//! (its rate has decayed to nothing); a bounded tag (an upper bound, a daily counter) is
//! followed from the start (one scan of every tag) or its first allocation on, so its IDs left
//! and exhaustion stay in `/metrics`. A million tags cost a sample nothing but the ones that
//! serve. A gap in the journal (trimmed, or a snapshot installed) only delays following a tag
//! until its next allocation. The applied state is the same on every node, so is the rate, up
//! to when each node samples. A sample also sets the per-tag gauges and drops the series of a
//! tag no longer followed, so the label set stays within the tags that move.
//!
//! IDs left are read fresh from the state on each `/cache` request; the snowflake forecast
//! needs no history and is computed when asked ([`Forecasts::snowflake`]).
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use leaf_api::types::{SnowflakeForecast, TagForecast};
use leaf_raft_store::{Journal, StateReader, TagRecord};
use tokio::sync::watch;

use super::{epoch_years_left, exhausted_in_secs, free_worker_ids, ids_left, last_id, RateEstimator, LAST_ID};
use crate::config::ForecastConfig;
use crate::metrics::Metrics;
use crate::snowflake::generator::Layout;

/// Tag name → IDs per second, for the tags with a known rate.
type Rates = ArcSwap<HashMap<String, f64>>;

/// The forecasts as the node's handlers read them.
pub struct Forecasts {
    state: StateReader,
    /// The allocation journal: which tags moved since a sample.
    journal: Journal,
    layout: Layout,
    /// `snowflake.worker_ids`: the worker IDs this cluster may take.
    worker_ids: crate::config::WorkerIds,
    rates: Arc<Rates>,
}

impl Forecasts {
    /// The forecasts over the applied `state` (with its allocation `journal`), for snowflake
    /// IDs of `layout`.
    pub fn new(state: StateReader, journal: Journal, layout: Layout, worker_ids: crate::config::WorkerIds) -> Self {
        Forecasts { state, journal, layout, worker_ids, rates: Arc::default() }
    }

    /// `tag`'s forecast: IDs left as applied now, the rate as of the last sample; `None` if
    /// the tag is not in the applied state.
    pub fn tag(&self, tag: &str) -> Option<TagForecast> {
        let record = self.state.tag(tag)?;
        let left = ids_left(record.max_id, last_id(&record));
        let rate = self.rates.load().get(tag).copied();
        Some(TagForecast { ids_left: left, rate_per_sec: rate, exhausted_in_secs: exhausted_in_secs(left, rate) })
    }

    /// Every followed tag's rate (IDs per second) as of the last sample: what a backup
    /// records for the restore's margins.
    pub fn rates(&self) -> Vec<(String, f64)> {
        self.rates.load().iter().map(|(t, r)| (t.clone(), *r)).collect()
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
    pub async fn run(self: Arc<Self>, cfg: ForecastConfig, metrics: Arc<Metrics>, shutdown: watch::Receiver<bool>) {
        let mut sampler = Sampler::new(Duration::from_secs(cfg.window_secs), metrics, self.rates.clone());
        let start = tokio::time::Instant::now();
        // The journal index the next sample reads from; `None` before the first.
        let mut after: Option<u64> = None;
        let mut ticker = crate::ticker::Ticker::new(Duration::from_millis(cfg.sample_interval_ms), shutdown);
        while ticker.next().await {
            let at = start.elapsed();
            let tags = match after {
                // The first sample: every bounded tag, and the journal from here on.
                None => {
                    after = Some(self.journal.through());
                    self.state.with_state(|s| {
                        s.tags.iter().filter_map(|(t, r)| observed(t, r, None).filter(|o| o.bounded)).collect()
                    })
                }
                Some(from) => {
                    let moved = match self.journal.moved_since(from) {
                        Ok(m) => {
                            after = Some(m.through);
                            m.moved.unwrap_or_default()
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "forecast: the allocation journal could not be read");
                            Default::default()
                        }
                    };
                    let following = sampler.following(at);
                    self.state.with_state(|s| {
                        let mut out: Vec<Observed> =
                            moved.iter().filter_map(|(t, before)| observed(t, s.tags.get(t)?, Some(*before))).collect();
                        let rest = following.iter().filter(|t| !moved.contains_key(*t));
                        out.extend(rest.filter_map(|t| observed(t, s.tags.get(t.as_str())?, None)));
                        out
                    })
                }
            };
            sampler.sample(at, tags);
        }
    }
}

/// A tag as a sample reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub tag: String,
    pub max_id: i64,
    /// The largest ID it may hand out.
    pub last: i64,
    /// It has a bound ([`LAST_ID`] is not its last ID): followed however idle.
    pub bounded: bool,
    /// The counter before its first allocation since the previous sample, for a tag the
    /// journal reports moving (the base of a tag not followed yet).
    pub before: Option<i64>,
}

/// `tag` as a sample reads it; `None` for a tag without a forecast: an obfuscated one (its
/// allocation rate would count its IDs) or an archived one (it allocates nothing).
fn observed(tag: &str, r: &TagRecord, before: Option<i64>) -> Option<Observed> {
    if matches!(r.profile(), leaf_raft_store::StoredProfile::Obfuscated { .. }) || r.archived_ms().is_some() {
        return None;
    }
    let last = last_id(r);
    Some(Observed { tag: tag.to_string(), max_id: r.max_id, last, bounded: last != LAST_ID, before })
}

/// A tag the sampler follows.
struct Followed {
    estimator: RateEstimator,
    bounded: bool,
    /// Its `max_id` at the last sample, and when it last changed.
    max_id: i64,
    moved_at: Duration,
}

/// The rate estimators of the tags followed, fed by [`Sampler::sample`].
pub struct Sampler {
    window: Duration,
    followed: HashMap<String, Followed>,
    metrics: Arc<Metrics>,
    rates: Arc<Rates>,
    /// When the previous sample was taken.
    last_at: Option<Duration>,
}

impl Sampler {
    /// A sampler with no history, whose rates decay over `window`, publishing to `rates` and
    /// the gauges of `metrics`.
    pub fn new(window: Duration, metrics: Arc<Metrics>, rates: Arc<Rates>) -> Self {
        Sampler { window, followed: HashMap::new(), metrics, rates, last_at: None }
    }

    /// The tags to read at the sample at `at`, besides the ones that moved: the bounded ones
    /// followed, and the others that moved within the last two windows.
    pub fn following(&self, at: Duration) -> Vec<String> {
        let idle = self.window.saturating_mul(2);
        self.followed
            .iter()
            .filter(|(_, f)| f.bounded || at.saturating_sub(f.moved_at) < idle)
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// One sample, taken at `at` (from a fixed origin), of the tags to follow: updates their
    /// rates and gauges; a tag followed before and missing from `tags` loses its estimator and
    /// its series.
    pub fn sample(&mut self, at: Duration, tags: Vec<Observed>) {
        let mut rates = HashMap::with_capacity(tags.len());
        let mut seen = std::collections::HashSet::with_capacity(tags.len());
        for o in tags {
            let (window, last_at) = (self.window, self.last_at);
            let f = self.followed.entry(o.tag.clone()).or_insert_with(|| {
                let mut estimator = RateEstimator::new(window);
                let base = o.before.unwrap_or(o.max_id);
                // Moved since the previous sample: the base is as of then.
                if let (Some(before), Some(prev)) = (o.before, last_at) {
                    estimator.observe(prev, before);
                }
                Followed { estimator, bounded: o.bounded, max_id: base, moved_at: at }
            });
            if o.max_id != f.max_id {
                (f.max_id, f.moved_at) = (o.max_id, at);
            }
            f.bounded = o.bounded;
            f.estimator.observe(at, o.max_id);
            let rate = f.estimator.rate();
            let left = ids_left(o.max_id, o.last);
            self.metrics.set_tag_forecast(&o.tag, left, rate, exhausted_in_secs(left, rate));
            if let Some(r) = rate {
                rates.insert(o.tag.clone(), r);
            }
            seen.insert(o.tag);
        }
        let metrics = &self.metrics;
        self.followed.retain(|tag, _| {
            let keep = seen.contains(tag);
            if !keep {
                metrics.remove_tag_forecast(tag);
            }
            keep
        });
        crate::memory::shrink_sparse(&mut self.followed);
        self.last_at = Some(at);
        self.rates.store(Arc::new(rates));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forecast::LAST_ID;

    fn obs(tag: &str, max_id: i64, last: i64) -> Observed {
        Observed { tag: tag.into(), max_id, last, bounded: last != LAST_ID, before: None }
    }

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
        s.sample(t(0), vec![obs("a", 1, LAST_ID), obs("full", 100, 99)]);
        let text = render(&metrics);
        assert_eq!(
            series(&text, "leaf_tag_ids_left"),
            [format!("leaf_tag_ids_left{{tag=\"a\"}} {}", i64::MAX - 1), "leaf_tag_ids_left{tag=\"full\"} 0".into()]
        );
        // No rate yet: no rate series, and no exhaustion series but for the exhausted tag.
        assert!(series(&text, "leaf_tag_consumption_rate").is_empty(), "{text}");
        assert_eq!(series(&text, "leaf_tag_exhaustion_seconds"), ["leaf_tag_exhaustion_seconds{tag=\"full\"} 0"]);
        assert!(rates.load().is_empty());

        s.sample(t(10), vec![obs("a", 1001, LAST_ID), obs("full", 100, 99)]);
        let text = render(&metrics);
        assert!(text.contains("leaf_tag_consumption_rate{tag=\"a\"} 100.0"), "{text}");
        assert!(text.contains("leaf_tag_consumption_rate{tag=\"full\"} 0.0"), "{text}");
        let want = exhausted_in_secs((i64::MAX - 1001) as u64, Some(100.0)).unwrap();
        assert!(text.contains(&format!("leaf_tag_exhaustion_seconds{{tag=\"a\"}} {want}")), "{text}");
        assert_eq!(rates.load().get("a"), Some(&100.0));

        // "a" is gone: its estimator, rate and every series with it.
        s.sample(t(20), vec![obs("full", 100, 99)]);
        let text = render(&metrics);
        assert!(!text.contains("tag=\"a\""), "{text}");
        assert!(rates.load().get("a").is_none());
        assert_eq!(s.followed.len(), 1);
    }

    /// A load over many tags fills the table of the tags followed; once they are dropped, the
    /// table goes with them.
    #[test]
    fn the_table_of_the_tags_followed_shrinks_once_they_are_dropped() {
        let mut s = Sampler::new(Duration::from_secs(10), Arc::new(Metrics::new()), Arc::default());
        let many = (0..5_000).map(|i| obs(&format!("t{i}"), 1, LAST_ID)).collect();
        s.sample(Duration::from_secs(1), many);
        let full = s.followed.capacity();
        assert!(full >= 5_000, "{full}");
        s.sample(Duration::from_secs(2), vec![obs("t1", 2, LAST_ID)]);
        assert_eq!(s.followed.len(), 1);
        assert!(s.followed.capacity() <= 64, "room for {} after {full}", s.followed.capacity());
    }

    /// A tag the journal reports moving gets its rate at once, from the previous sample; an
    /// unbounded one idle for two windows is no longer read, a bounded one always is.
    #[test]
    fn a_moving_tag_is_followed_until_idle_and_a_bounded_one_always() {
        let metrics = Arc::new(Metrics::new());
        let rates = Arc::new(Rates::default());
        let mut s = Sampler::new(Duration::from_secs(10), metrics, rates.clone());
        let t = |secs| Duration::from_secs(secs);
        s.sample(t(0), vec![]);
        let moved = Observed { before: Some(1), ..obs("a", 1001, LAST_ID) };
        s.sample(t(10), vec![moved, obs("b", 5, 99)]);
        assert_eq!(rates.load().get("a"), Some(&100.0));
        let mut following = s.following(t(10));
        following.sort();
        assert_eq!(following, ["a", "b"]);
        s.sample(t(20), vec![obs("a", 1001, LAST_ID), obs("b", 5, 99)]);
        assert_eq!(s.following(t(29)).len(), 2, "idle for less than two windows");
        assert_eq!(s.following(t(30)), ["b"], "a idle since 10 s: two windows");
    }
}
