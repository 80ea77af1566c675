//! The per-tag series, bounded: a node may hold many thousand tags, and a series per tag per
//! metric would make `/metrics` grow with them. Every loaded tag still counts lock-free into
//! its own atomics ([`TagCounters`]); a scrape shows:
//! - `leaf_ids_served_total{mode="segment",tag}`, `leaf_segment_refills_total{tag}`,
//!   `leaf_segment_refill_failures_total{tag}` and `leaf_segment_waits_total{tag}` for the
//!   `max_tag_series` tags this node served most (by IDs, then by name), plus the snowflake keys
//!   (bounded apart, see [`super::Metrics::snowflake_served`]);
//! - `leaf_ids_served_by_profile_total{profile}`: every tag's IDs by profile, those of tags not
//!   shown and of tags unloaded since included (obfuscated tags are never counted in public);
//! - the exhaustion forecast gauges (`leaf_tag_ids_left`, `leaf_tag_consumption_rate`,
//!   `leaf_tag_exhaustion_seconds`) for the `max_tag_series` tags nearest to exhaustion (by
//!   time, then by IDs left): the ones an alert is about. Every tag's forecast stays in the API
//!   (`/cache`, the dashboard).
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

use crate::config::DEFAULT_MAX_TAG_SERIES;
use leaf_api::profile::Profile;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::MetricType;

/// The counters of one loaded tag, in one allocation, incremented lock-free by its handle and
/// actor (four registered counters cost four).
#[derive(Debug, Default)]
pub struct TagCounts {
    pub served: Count,
    pub refills: Count,
    pub failures: Count,
    pub waits: Count,
}

/// A loaded tag's counters, shared by its handle, its actor and these series.
pub type TagCounters = std::sync::Arc<TagCounts>;

/// One monotonic count.
#[derive(Debug, Default)]
pub struct Count(AtomicU64);

impl Count {
    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Its value as a counter sample.
    fn sample(&self) -> ConstCounter {
        ConstCounter::new(self.get())
    }
}

#[derive(Debug)]
struct Entry {
    profile: Profile,
    counters: TagCounters,
}

/// A tag's last forecast, as the sampler set it.
#[derive(Debug, Clone, Copy)]
struct Forecast {
    ids_left: u64,
    rate: Option<f64>,
    exhausted_in_secs: Option<u64>,
}

/// Which counter of a tag a family shows.
type Pick = fn(&TagCounts) -> &Count;

/// The profiles whose totals are public (an obfuscated tag's count is never shown).
const PUBLIC_PROFILES: [Profile; 3] = [Profile::Segment, Profile::Monotonic, Profile::Daily];

/// Every loaded tag's counters and every tag's forecast, shown bounded (see the module doc).
#[derive(Debug)]
pub struct TagSeries {
    max: AtomicUsize,
    tags: RwLock<HashMap<String, Entry>>,
    /// IDs served by tags unloaded since, by profile (index in [`PUBLIC_PROFILES`]): the
    /// profile totals never go down.
    retired: [AtomicU64; PUBLIC_PROFILES.len()],
    forecasts: RwLock<HashMap<String, Forecast>>,
    /// The snowflake keys' counters (their own bound), shown under `leaf_ids_served_total`.
    snowflake: std::sync::Arc<RwLock<HashMap<String, Counter>>>,
}

impl TagSeries {
    pub fn new(snowflake: std::sync::Arc<RwLock<HashMap<String, Counter>>>) -> Self {
        TagSeries {
            max: AtomicUsize::new(DEFAULT_MAX_TAG_SERIES),
            tags: RwLock::default(),
            retired: Default::default(),
            forecasts: RwLock::default(),
            snowflake,
        }
    }

    /// Shows at most `max` tags per per-tag metric.
    pub fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Relaxed);
    }

    /// The counters of `tag` (of `profile`), made at its first load; an obfuscated tag's count
    /// in no public series.
    pub fn counters(&self, tag: &str, profile: Profile) -> TagCounters {
        if profile == Profile::Obfuscated {
            return TagCounters::default();
        }
        let mut tags = self.tags.write().unwrap_or_else(|e| e.into_inner());
        let e = tags.entry(tag.to_string()).or_insert_with(|| Entry { profile, counters: TagCounters::default() });
        e.counters.clone()
    }

    /// Forgets an unloaded tag's counters, keeping its IDs in its profile's total.
    pub fn unload(&self, tag: &str) {
        let gone = {
            let mut tags = self.tags.write().unwrap_or_else(|e| e.into_inner());
            let gone = tags.remove(tag);
            crate::memory::shrink_sparse(&mut tags);
            gone
        };
        if let Some(e) = gone {
            if let Some(i) = PUBLIC_PROFILES.iter().position(|p| *p == e.profile) {
                self.retired[i].fetch_add(e.counters.served.get(), Ordering::Relaxed);
            }
        }
    }

    /// Sets `tag`'s forecast.
    pub fn set_forecast(&self, tag: &str, ids_left: u64, rate: Option<f64>, exhausted_in_secs: Option<u64>) {
        let f = Forecast { ids_left, rate, exhausted_in_secs };
        self.forecasts.write().unwrap_or_else(|e| e.into_inner()).insert(tag.to_string(), f);
    }

    /// Forgets `tag`'s forecast (a tag that is gone).
    pub fn remove_forecast(&self, tag: &str) {
        let mut forecasts = self.forecasts.write().unwrap_or_else(|e| e.into_inner());
        forecasts.remove(tag);
        crate::memory::shrink_sparse(&mut forecasts);
    }

    /// The room of its two tables (the counters', the forecasts'), for tests.
    #[cfg(test)]
    fn rooms(&self) -> (usize, usize) {
        let tags = self.tags.read().unwrap_or_else(|e| e.into_inner()).capacity();
        (tags, self.forecasts.read().unwrap_or_else(|e| e.into_inner()).capacity())
    }

    /// The tags shown: the `max` served most, by name.
    fn busiest(&self) -> Vec<(String, TagCounters)> {
        let tags = self.tags.read().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<(u64, &String, &Entry)> = tags.iter().map(|(t, e)| (e.counters.served.get(), t, e)).collect();
        let max = self.max.load(Ordering::Relaxed);
        if all.len() > max {
            all.select_nth_unstable_by(max, |a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
            all.truncate(max);
        }
        let mut shown: Vec<(String, TagCounters)> =
            all.into_iter().map(|(_, t, e)| (t.clone(), e.counters.clone())).collect();
        shown.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        shown
    }

    /// IDs served by profile, every tag (shown or not, loaded or unloaded since).
    fn by_profile(&self) -> [u64; PUBLIC_PROFILES.len()] {
        let mut sums: [u64; PUBLIC_PROFILES.len()] = std::array::from_fn(|i| self.retired[i].load(Ordering::Relaxed));
        for e in self.tags.read().unwrap_or_else(|e| e.into_inner()).values() {
            if let Some(i) = PUBLIC_PROFILES.iter().position(|p| *p == e.profile) {
                sums[i] = sums[i].saturating_add(e.counters.served.get());
            }
        }
        sums
    }

    /// The forecasts shown: the `max` nearest to exhaustion, by name.
    fn nearest_exhaustion(&self) -> Vec<(String, Forecast)> {
        let forecasts = self.forecasts.read().unwrap_or_else(|e| e.into_inner());
        let mut all: Vec<(&String, &Forecast)> = forecasts.iter().collect();
        let max = self.max.load(Ordering::Relaxed);
        let key = |f: &Forecast| (f.exhausted_in_secs.unwrap_or(u64::MAX), f.ids_left);
        if all.len() > max {
            all.select_nth_unstable_by(max, |a, b| key(a.1).cmp(&key(b.1)).then_with(|| a.0.cmp(b.0)));
            all.truncate(max);
        }
        let mut shown: Vec<(String, Forecast)> = all.into_iter().map(|(t, f)| (t.clone(), *f)).collect();
        shown.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        shown
    }
}

impl Collector for TagSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let shown = self.busiest();
        {
            let mut f = encoder.encode_descriptor(
                "ids_served",
                "IDs handed out, by mode and tag (segment: the metrics.max_tag_series tags this node served most; \
                 snowflake: by key)",
                None,
                MetricType::Counter,
            )?;
            for (tag, c) in &shown {
                c.served.sample().encode(f.encode_family(&[("mode", "segment"), ("tag", tag.as_str())])?)?;
            }
            let keys = self.snowflake.read().unwrap_or_else(|e| e.into_inner());
            let mut keys: Vec<(&String, &Counter)> = keys.iter().collect();
            keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (key, c) in keys {
                c.encode(f.encode_family(&[("mode", "snowflake"), ("tag", key.as_str())])?)?;
            }
        }
        let per_tag: [(&str, &str, Pick); 3] = [
            ("segment_refills", "Committed segment allocations, by tag (the tags of leaf_ids_served)", |c| &c.refills),
            ("segment_refill_failures", "Failed segment allocations, by tag (the tags of leaf_ids_served)", |c| {
                &c.failures
            }),
            (
                "segment_waits",
                "Requests that found both buffers empty and waited for a refill, by tag (the tags of leaf_ids_served)",
                |c| &c.waits,
            ),
        ];
        for (name, help, pick) in per_tag {
            let mut f = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (tag, c) in &shown {
                pick(c).sample().encode(f.encode_family(&[("tag", tag.as_str())])?)?;
            }
        }
        {
            let mut f = encoder.encode_descriptor(
                "ids_served_by_profile",
                "Segment-mode IDs handed out by this node, by profile, every tag counted (obfuscated tags are not)",
                None,
                MetricType::Counter,
            )?;
            for (p, n) in PUBLIC_PROFILES.iter().zip(self.by_profile()) {
                counter(n).encode(f.encode_family(&[("profile", p.as_str())])?)?;
            }
        }
        let forecasts = self.nearest_exhaustion();
        let gauges: [(&str, &str); 3] = [
            (
                "tag_ids_left",
                "IDs a tag may still allocate before its last ID (allocated IDs count as spent), by tag (the \
                 metrics.max_tag_series tags nearest to exhaustion)",
            ),
            (
                "tag_consumption_rate",
                "IDs allocated per second across the cluster, exponentially weighted over forecast.window_secs, by tag \
                 (absent until two samples; the tags of leaf_tag_ids_left)",
            ),
            (
                "tag_exhaustion_seconds",
                "Seconds until a tag's IDs run out at its consumption rate, by tag (absent while the rate is unknown or \
                 zero; the tags of leaf_tag_ids_left)",
            ),
        ];
        for (i, (name, help)) in gauges.into_iter().enumerate() {
            let mut f = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (tag, fc) in &forecasts {
                let labels = [("tag", tag.as_str())];
                let saturated = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
                match i {
                    0 => gauge(saturated(fc.ids_left)).encode(f.encode_family(&labels)?)?,
                    1 => match fc.rate {
                        Some(r) => {
                            let g = Gauge::<f64, AtomicU64>::default();
                            g.set(r);
                            g.encode(f.encode_family(&labels)?)?
                        }
                        None => continue,
                    },
                    _ => match fc.exhausted_in_secs {
                        Some(s) => gauge(saturated(s)).encode(f.encode_family(&labels)?)?,
                        None => continue,
                    },
                }
            }
        }
        Ok(())
    }
}

/// A counter holding `n`, to encode a computed total.
fn counter(n: u64) -> Counter {
    let c = Counter::default();
    c.inc_by(n);
    c
}

/// A gauge holding `v`, to encode a computed value.
fn gauge(v: i64) -> Gauge {
    let g = Gauge::default();
    g.set(v);
    g
}

#[cfg(test)]
mod tests {
    use leaf_api::profile::Profile;

    use crate::metrics::{render_idle, Metrics};

    fn lines<'a>(text: &'a str, metric: &str) -> Vec<&'a str> {
        text.lines().filter(|l| l.starts_with(metric)).collect()
    }

    /// The busiest tags get series, in name order; every tag counts in its profile's total,
    /// unloaded ones too; an obfuscated tag nowhere; each family is described once.
    #[test]
    fn only_the_busiest_tags_get_series_and_every_tag_counts_in_its_profile() {
        let m = Metrics::new();
        m.set_max_tag_series(3);
        for (tag, profile, served) in [
            ("a", Profile::Segment, 10),
            ("b", Profile::Segment, 50),
            ("c", Profile::Daily, 30),
            ("d", Profile::Monotonic, 20),
            ("e", Profile::Segment, 40),
            ("secret", Profile::Obfuscated, 1_000),
        ] {
            let c = m.tag_counters(tag, profile);
            c.served.inc_by(served);
            c.refills.inc();
        }
        let text = render_idle(&m);
        assert_eq!(
            lines(&text, "leaf_ids_served_total{mode=\"segment\""),
            [
                "leaf_ids_served_total{mode=\"segment\",tag=\"b\"} 50",
                "leaf_ids_served_total{mode=\"segment\",tag=\"c\"} 30",
                "leaf_ids_served_total{mode=\"segment\",tag=\"e\"} 40",
            ]
        );
        assert_eq!(lines(&text, "leaf_segment_refills_total{").len(), 3);
        let totals = [
            "leaf_ids_served_by_profile_total{profile=\"segment\"} 100",
            "leaf_ids_served_by_profile_total{profile=\"monotonic\"} 20",
            "leaf_ids_served_by_profile_total{profile=\"daily\"} 30",
        ];
        assert_eq!(lines(&text, "leaf_ids_served_by_profile_total"), totals);
        assert!(!text.contains("tag=\"secret\"") && !text.contains("profile=\"obfuscated\""), "{text}");
        assert_eq!(text.matches("# TYPE leaf_ids_served_total counter").count(), 1, "{text}");
        // A shown tag unloaded: its series goes, its IDs stay in the total; the next one shows.
        m.unload_tag("b");
        let text = render_idle(&m);
        assert!(!text.contains("tag=\"b\""));
        assert!(text.contains("leaf_ids_served_total{mode=\"segment\",tag=\"d\"} 20"), "{text}");
        assert_eq!(lines(&text, "leaf_ids_served_by_profile_total"), totals);
        // Loaded again, it counts from zero in its series and on top in the total.
        m.tag_counters("b", Profile::Segment).served.inc_by(5);
        let text = render_idle(&m);
        assert!(text.contains("leaf_ids_served_by_profile_total{profile=\"segment\"} 105"), "{text}");
    }

    /// After a load over many tags and the idle sweep, the tables are as small as what is left
    /// in them, not as large as they once were.
    #[test]
    fn tables_emptied_by_unloads_and_dropped_forecasts_are_given_back() {
        let s = super::TagSeries::new(Default::default());
        let names: Vec<String> = (0..5_000).map(|i| format!("t{i}")).collect();
        for t in &names {
            s.counters(t, Profile::Segment);
            s.set_forecast(t, 1, None, None);
        }
        let full = s.rooms();
        assert!(full.0 >= 5_000 && full.1 >= 5_000, "{full:?}");
        for t in &names {
            s.unload(t);
            s.remove_forecast(t);
        }
        let (tags, forecasts) = s.rooms();
        assert!(tags <= 64 && forecasts <= 64, "room for {tags} and {forecasts} with nothing left (from {full:?})");
    }

    /// The forecast gauges show the tags nearest to exhaustion; a tag without a rate last.
    #[test]
    fn forecast_gauges_show_the_tags_nearest_to_exhaustion() {
        let m = Metrics::new();
        m.set_max_tag_series(2);
        m.set_tag_forecast("calm", 1_000, Some(0.5), Some(2_000));
        m.set_tag_forecast("idle", 5, None, None);
        m.set_tag_forecast("soon", 100, Some(10.0), Some(10));
        m.set_tag_forecast("later", 10_000, Some(1.0), Some(10_000));
        let text = render_idle(&m);
        assert_eq!(
            lines(&text, "leaf_tag_exhaustion_seconds{"),
            ["leaf_tag_exhaustion_seconds{tag=\"calm\"} 2000", "leaf_tag_exhaustion_seconds{tag=\"soon\"} 10"]
        );
        assert_eq!(lines(&text, "leaf_tag_ids_left{").len(), 2);
        assert!(text.contains("leaf_tag_consumption_rate{tag=\"soon\"} 10"), "{text}");
        m.remove_tag_forecast("soon");
        let text = render_idle(&m);
        assert!(text.contains("leaf_tag_exhaustion_seconds{tag=\"later\"} 10000"), "{text}");
    }
}
