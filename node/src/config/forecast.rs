//! `[forecast]`: how the exhaustion forecasts of `/cache`, `/health` and `/metrics` sample the
//! replicated state.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Sampling of the tags' `max_id` for the consumption-rate estimate ([`crate::forecast`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ForecastConfig {
    /// How often every tag's `max_id` is read from the applied state to update its rate. From 10 to
    /// 3600000; default `10000` ms.
    pub sample_interval_ms: u64,
    /// Time constant of the exponentially weighted rate: an allocation weighs `1/e` as much after
    /// this long, so one large segment moves the rate by its size over this window. From 1 to
    /// 86400; default `900` s.
    pub window_secs: u64,
}

impl Default for ForecastConfig {
    fn default() -> Self {
        ForecastConfig { sample_interval_ms: 10_000, window_secs: 900 }
    }
}

impl ForecastConfig {
    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if !(10..=3_600_000).contains(&self.sample_interval_ms) {
            errs.push("forecast.sample_interval_ms must be from 10 to 3600000".to_string());
        }
        if !(1..=86_400).contains(&self.window_secs) {
            errs.push("forecast.window_secs must be from 1 to 86400".to_string());
        }
    }
}
