//! `leaf bench`: an HTTP/1.1 load generator for leaf (or any HTTP server).
//!
//! N keep-alive connections, each its own hyper connection driven by one task, spread over one
//! or more base URLs. Closed loop (each connection sends its next request when the previous
//! answer arrived) or open loop at a fixed total rate. Open-loop latency is measured from when
//! a request was *due*, not when it was sent, whenever the connection was still busy at that
//! moment (coordinated-omission correction, as in wrk2); a request sent late only because of
//! the timer's 1 ms granularity is measured from its send. Latencies go into hdrhistograms
//! (ns, 3 significant digits), merged at the end.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// `leaf bench` arguments.
#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Base URL(s) of the node(s), comma-separated or repeated; connections are spread over
    /// them round robin.
    #[arg(long = "url", visible_alias = "node", value_delimiter = ',', default_value = "http://127.0.0.1:8080")]
    pub urls: Vec<String>,
    /// Path and query of every request; `{rand}` is replaced by a random hex value per request
    /// (e.g. `/api/segment/get/u-{rand}`: a flood of unknown tags).
    #[arg(long, default_value = "/api/segment/get/leaf-segment-test")]
    pub path: String,
    /// Concurrent keep-alive connections.
    #[arg(long, short = 'c', default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub connections: u32,
    /// How long to measure (after the warmup): e.g. 10s, 1m, 500ms.
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Stop after this many measured requests instead (the duration still caps the run).
    #[arg(long, short = 'n', value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Open loop: this many requests per second in total, at fixed intervals (default: closed
    /// loop, as fast as the server answers).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub rate: Option<u64>,
    /// Requests during this first period are sent but not measured.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Worker threads of the generator (it shares the machine with what it measures).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Placeholder in `--path` replaced by a random value per request.
const RAND: &str = "{rand}";

/// Parses `90s`, `10m`, `1500ms`, `2h` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 10s, 1m or 500ms"))?;
    let ms = match unit {
        "ms" => Some(n),
        "" | "s" => n.checked_mul(1000),
        "m" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    ms.map(Duration::from_millis).ok_or_else(|| format!("{s:?} is too long"))
}

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

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("invalid URL {0:?}: expected http://host:port")]
    Url(String),
    #[error("cannot resolve {0}: {1}")]
    Resolve(String, String),
    #[error("path must start with '/': {0:?}")]
    Path(String),
    #[error("--duration must be more than zero")]
    Duration,
    #[error("histogram: {0}")]
    Histogram(String),
    #[error("no request got an answer: {0}")]
    NoAnswers(String),
}

/// One target: where to connect and what to send as `Host`.
#[derive(Debug, Clone)]
struct Target {
    addr: SocketAddr,
    authority: String,
}

async fn resolve(url: &str) -> Result<Target, BenchError> {
    let uri: hyper::Uri = url.parse().map_err(|_| BenchError::Url(url.to_string()))?;
    if uri.scheme_str() != Some("http") {
        return Err(BenchError::Url(url.to_string()));
    }
    let authority = uri.authority().ok_or_else(|| BenchError::Url(url.to_string()))?.to_string();
    let host_port = if uri.port().is_some() { authority.clone() } else { format!("{authority}:80") };
    let addr = tokio::net::lookup_host(&host_port)
        .await
        .map_err(|e| BenchError::Resolve(host_port.clone(), e.to_string()))?
        .next()
        .ok_or_else(|| BenchError::Resolve(host_port.clone(), "no address".to_string()))?;
    Ok(Target { addr, authority })
}

/// Shared state of a run.
struct Shared {
    path: String,
    /// Start of measurement (end of warmup).
    measure_from: Instant,
    deadline: Instant,
    /// Measured requests so far, for `--requests` and the progress line.
    counted: AtomicU64,
    limit: Option<u64>,
    stop: AtomicBool,
    last_error: std::sync::Mutex<Option<String>>,
}

/// One connection's results.
struct Tally {
    hist: Histogram<u64>,
    ok: u64,
    errors: u64,
    failures: u64,
    ids: u64,
}

fn new_hist() -> Result<Histogram<u64>, BenchError> {
    // 1 µs .. 60 s in ns, 3 significant digits.
    Histogram::new_with_bounds(1_000, 60_000_000_000, 3).map_err(|e| BenchError::Histogram(e.to_string()))
}

/// Drives one connection until the deadline. `interval`: open-loop spacing of this
/// connection's requests, first due at `first`.
async fn connection(
    target: Target,
    shared: Arc<Shared>,
    schedule: Option<(Instant, Duration)>,
) -> Result<Tally, BenchError> {
    let mut tally = Tally { hist: new_hist()?, ok: 0, errors: 0, failures: 0, ids: 0 };
    let mut sender: Option<http1::SendRequest<Empty<Bytes>>> = None;
    let mut due = schedule.map(|(first, _)| first);
    loop {
        if shared.stop.load(Ordering::Relaxed) || Instant::now() >= shared.deadline {
            return Ok(tally);
        }
        // When this request is due (open loop) and whether the connection was still busy then.
        let ready_at = Instant::now();
        let mut start_from = None;
        if let (Some(d), Some((_, interval))) = (due, schedule) {
            if d > ready_at {
                tokio::time::sleep_until(d).await;
            } else {
                // Behind schedule: the wait since `d` is the server's doing; count it.
                start_from = Some(d);
            }
            due = Some(d + interval);
        }
        if sender.is_none() {
            match connect(&target).await {
                Ok(s) => sender = Some(s),
                Err(e) => {
                    tally.failures += u64::from(Instant::now() >= shared.measure_from);
                    record_error(&shared, e);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let Some(s) = sender.as_mut() else { continue };
        let sent = Instant::now();
        let from = start_from.unwrap_or(sent);
        // `{rand}` in the path: a fresh random value per request (e.g. a flood of unknown tags).
        let path = if shared.path.contains(RAND) {
            std::borrow::Cow::Owned(shared.path.replace(RAND, &format!("{:016x}", rand::random::<u64>())))
        } else {
            std::borrow::Cow::Borrowed(shared.path.as_str())
        };
        let req = Request::get(path.as_ref())
            .header(hyper::header::HOST, target.authority.as_str())
            .body(Empty::<Bytes>::new());
        let req = match req {
            Ok(r) => r,
            Err(e) => return Err(BenchError::Path(format!("{}: {e}", shared.path))),
        };
        let answer = async {
            s.ready().await?;
            let resp = s.send_request(req).await?;
            let status = resp.status();
            let body = resp.into_body().collect().await?.to_bytes();
            Ok::<_, hyper::Error>((status, body))
        }
        .await;
        let done = Instant::now();
        let measured = sent >= shared.measure_from;
        match answer {
            Ok((status, body)) => {
                if measured {
                    let n = shared.counted.fetch_add(1, Ordering::Relaxed) + 1;
                    if shared.limit.is_some_and(|l| n >= l) {
                        shared.stop.store(true, Ordering::Relaxed);
                    }
                    let ns = done.saturating_duration_since(from).as_nanos().min(u128::from(u64::MAX)) as u64;
                    tally.hist.saturating_record(ns.max(1_000));
                    if status == StatusCode::OK {
                        tally.ok += 1;
                        if !body.is_empty() {
                            tally.ids += body.iter().filter(|b| **b == b'\n').count() as u64 + 1;
                        }
                    } else {
                        tally.errors += 1;
                        record_error(&shared, format!("HTTP {status}: {}", String::from_utf8_lossy(&body)));
                    }
                }
            }
            Err(e) => {
                tally.failures += u64::from(measured);
                record_error(&shared, e.to_string());
                sender = None;
            }
        }
    }
}

fn record_error(shared: &Shared, e: impl ToString) {
    if let Ok(mut last) = shared.last_error.lock() {
        *last = Some(e.to_string());
    }
}

async fn connect(target: &Target) -> Result<http1::SendRequest<Empty<Bytes>>, String> {
    let stream = TcpStream::connect(target.addr).await.map_err(|e| format!("connect {}: {e}", target.addr))?;
    let _ = stream.set_nodelay(true);
    let (sender, conn) =
        http1::handshake(TokioIo::new(stream)).await.map_err(|e| format!("handshake {}: {e}", target.addr))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Runs the load described by `args` on the current (multi-thread) runtime.
pub async fn run(args: &BenchArgs) -> Result<Report, BenchError> {
    if !args.path.starts_with('/') {
        return Err(BenchError::Path(args.path.clone()));
    }
    if args.duration.is_zero() {
        return Err(BenchError::Duration);
    }
    let mut targets = Vec::new();
    for url in &args.urls {
        targets.push(resolve(url.trim_end_matches('/')).await?);
    }
    let start = Instant::now();
    let measure_from = start + args.warmup;
    let shared = Arc::new(Shared {
        path: args.path.clone(),
        measure_from,
        deadline: measure_from + args.duration,
        counted: AtomicU64::new(0),
        limit: args.requests,
        stop: AtomicBool::new(false),
        last_error: std::sync::Mutex::new(None),
    });
    let progress = progress_bar(args, shared.clone());
    let n = args.connections;
    let mut tasks = Vec::new();
    for k in 0..n {
        let target = targets[k as usize % targets.len()].clone();
        // Open loop: each connection carries rate/n requests per second, staggered.
        let schedule = args.rate.map(|rate| {
            let interval = Duration::from_secs_f64(f64::from(n) / rate as f64);
            (start + interval.mul_f64(f64::from(k) / f64::from(n)), interval)
        });
        tasks.push(tokio::spawn(connection(target, shared.clone(), schedule)));
    }
    let mut hist = new_hist()?;
    let (mut ok, mut errors, mut failures, mut ids) = (0, 0, 0, 0);
    for t in tasks {
        let tally = match t.await {
            Ok(r) => r?,
            Err(e) => return Err(BenchError::NoAnswers(format!("a connection task failed: {e}"))),
        };
        let _ = hist.add(&tally.hist);
        ok += tally.ok;
        errors += tally.errors;
        failures += tally.failures;
        ids += tally.ids;
    }
    let measured_end = Instant::now().min(shared.deadline);
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let seconds = measured_end.saturating_duration_since(measure_from).as_secs_f64().max(1e-9);
    let requests = ok + errors;
    if requests == 0 {
        let last = shared.last_error.lock().ok().and_then(|l| l.clone()).unwrap_or_default();
        return Err(BenchError::NoAnswers(last));
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    Ok(Report {
        urls: args.urls.clone(),
        path: args.path.clone(),
        connections: n,
        mode: if args.rate.is_some() { "open" } else { "closed" }.to_string(),
        rate: args.rate,
        seconds,
        requests,
        ok,
        errors,
        failures,
        requests_per_sec: requests as f64 / seconds,
        ids_per_sec: ids as f64 / seconds,
        latency_us: Latency {
            p50: us(hist.value_at_quantile(0.5)),
            p90: us(hist.value_at_quantile(0.9)),
            p99: us(hist.value_at_quantile(0.99)),
            p99_9: us(hist.value_at_quantile(0.999)),
            max: us(hist.max()),
            mean: hist.mean() / 1000.0,
        },
    })
}

/// A progress bar on stderr when it is a terminal.
fn progress_bar(args: &BenchArgs, shared: Arc<Shared>) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let total = (args.warmup + args.duration).as_millis() as u64;
    let bar = indicatif::ProgressBar::new(total);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{bar:40} {elapsed}/{duration} {msg}") {
        bar.set_style(style);
    }
    let b = bar.clone();
    tokio::spawn(async move {
        let start = Instant::now();
        let mut last = (0u64, Instant::now());
        while !b.is_finished() {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = Instant::now();
            let counted = shared.counted.load(Ordering::Relaxed);
            let rps = (counted - last.0) as f64 / now.duration_since(last.1).as_secs_f64().max(1e-9);
            last = (counted, now);
            b.set_position(now.duration_since(start).as_millis() as u64);
            let phase = if now < shared.measure_from { "warmup" } else { "measuring" };
            b.set_message(format!("{phase}: {counted} requests, {rps:.0} req/s"));
        }
    });
    Some(bar)
}

/// The report as text.
pub fn render(r: &Report) -> String {
    let mode = match r.rate {
        Some(rate) => format!("open loop at {rate} req/s"),
        None => "closed loop".to_string(),
    };
    let l = &r.latency_us;
    format!(
        "leaf bench: {} connections, {mode}, GET {} on {}\n\
         {:.1} s: {} requests ({} ok, {} other status, {} without answer)\n\
         throughput: {:.0} req/s, {:.0} IDs/s\n\
         latency (µs): p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0}  mean {:.0}",
        r.connections,
        r.path,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_reject_nonsense() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        for bad in ["", "s", "10x", "-1s", "99999999999999999999h", "5124095576030432h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn bad_urls_and_paths_are_refused() {
        for url in ["https://127.0.0.1:1", "127.0.0.1:80", "http://"] {
            let args = BenchArgs { urls: vec![url.to_string()], ..test_args() };
            assert!(matches!(run(&args).await, Err(BenchError::Url(_))), "{url}");
        }
        let args = BenchArgs { path: "api".into(), ..test_args() };
        assert!(matches!(run(&args).await, Err(BenchError::Path(_))));
        let args = BenchArgs { duration: Duration::ZERO, ..test_args() };
        assert!(matches!(run(&args).await, Err(BenchError::Duration)));
    }

    fn test_args() -> BenchArgs {
        BenchArgs {
            urls: vec!["http://127.0.0.1:1".into()],
            path: "/".into(),
            connections: 2,
            duration: Duration::from_millis(200),
            requests: None,
            rate: None,
            warmup: Duration::ZERO,
            threads: 1,
            json: false,
        }
    }

    /// A server that answers every request with three lines after `delay`.
    async fn server(delay: Duration) -> SocketAddr {
        use hyper::service::service_fn;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let svc = service_fn(move |_req| async move {
                        tokio::time::sleep(delay).await;
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                            Bytes::from_static(b"1\n2\n3"),
                        )))
                    });
                    let _ =
                        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
                });
            }
        });
        addr
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_loop_counts_requests_ids_and_latency() {
        let addr = server(Duration::from_millis(2)).await;
        let args = BenchArgs { urls: vec![format!("http://{addr}")], connections: 4, ..test_args() };
        let r = run(&args).await.unwrap();
        assert_eq!(r.errors + r.failures, 0);
        assert!(r.requests > 20, "{r:?}");
        // Four connections, each at most one request per 2 ms.
        assert!(r.requests_per_sec <= 4.0 * 500.0 * 1.1, "{r:?}");
        assert!((r.ids_per_sec / r.requests_per_sec - 3.0).abs() < 1e-9, "{r:?}");
        assert!(r.latency_us.p50 >= 2000.0, "{r:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_open_loop_keeps_its_rate_and_counts_the_wait_of_a_slow_server() {
        // Fast server: the rate is what was asked.
        let fast = server(Duration::ZERO).await;
        let args = BenchArgs {
            urls: vec![format!("http://{fast}")],
            rate: Some(400),
            duration: Duration::from_millis(500),
            ..test_args()
        };
        let r = run(&args).await.unwrap();
        // Never above the rate (a starved generator may send fewer).
        assert!((50..=250).contains(&r.requests), "{r:?}");
        // A server slower than the schedule (one connection, 20 ms per answer, asked for 200
        // per second): later requests are due long before they can be sent, and the wait counts.
        let slow = server(Duration::from_millis(20)).await;
        let args = BenchArgs {
            urls: vec![format!("http://{slow}")],
            connections: 1,
            rate: Some(200),
            duration: Duration::from_millis(500),
            ..test_args()
        };
        let r = run(&args).await.unwrap();
        assert!(r.latency_us.max > 200_000.0, "coordinated omission not corrected: {r:?}");
    }

    #[tokio::test]
    async fn a_run_without_any_answer_is_an_error() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let args = BenchArgs { urls: vec![format!("http://127.0.0.1:{port}")], ..test_args() };
        assert!(matches!(run(&args).await, Err(BenchError::NoAnswers(_))));
    }
}
