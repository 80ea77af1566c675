//! What a run measured, and its text form.
use serde::Serialize;

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub urls: Vec<String>,
    pub path: String,
    pub connections: u32,
    /// `closed` or `open`.
    pub mode: String,
    /// Target rate of an open-loop run.
    pub rate: Option<u64>,
    pub seconds: f64,
    /// Measured requests that got an answer (any status).
    pub requests: u64,
    /// Of those, answered 200.
    pub ok: u64,
    /// Answered with another status.
    pub errors: u64,
    /// No answer: connection refused, reset or closed.
    pub failures: u64,
    pub requests_per_sec: f64,
    /// Lines in 200 bodies (one ID per line for leaf's ID endpoints), per second.
    pub ids_per_sec: f64,
    pub latency_us: Latency,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// The percentiles of a histogram of nanoseconds, in microseconds.
    pub fn of(hist: &hdrhistogram::Histogram<u64>) -> Latency {
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            p50: us(hist.value_at_quantile(0.5)),
            p90: us(hist.value_at_quantile(0.9)),
            p99: us(hist.value_at_quantile(0.99)),
            p99_9: us(hist.value_at_quantile(0.999)),
            max: us(hist.max()),
            mean: hist.mean() / 1000.0,
        }
    }
}

/// The report as text.
pub fn render(r: &Report) -> String {
    let mode = match r.rate {
        Some(rate) => format!("open loop at {rate} req/s"),
        None => "closed loop".to_string(),
    };
    render_as(r, &format!("leaf bench: {} connections, {mode}, GET {}", r.connections, r.path), "requests", "req/s")
}

/// The report as text under `title`, counting `what` (requests, calls) at `rate` (req/s, calls/s).
pub fn render_as(r: &Report, title: &str, what: &str, rate: &str) -> String {
    let l = &r.latency_us;
    format!(
        "{title} on {}\n\
         {:.1} s: {} {what} ({} ok, {} other status, {} without answer)\n\
         throughput: {:.0} {rate}, {:.0} IDs/s\n\
         latency (µs): p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0}  mean {:.0}",
        r.urls.join(","),
        r.seconds,
        r.requests,
        r.ok,
        r.errors,
        r.failures,
        r.requests_per_sec,
        r.ids_per_sec,
        l.p50,
        l.p90,
        l.p99,
        l.p99_9,
        l.max,
        l.mean
    )
}
