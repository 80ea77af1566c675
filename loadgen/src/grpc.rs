//! `leaf bench grpc`: unary `leaf.v1.IdService/GetSegmentIds` calls, closed loop, over
//! `--connections` HTTP/2 connections (one tonic [`Channel`] each, h2c for `http://`, TLS with
//! ALPN `h2` for `https://`) with `--concurrency` calls in flight on each. Reports calls/s,
//! IDs/s (the sum of the answers' range lengths) and latency percentiles in the same
//! [`Report`] as the HTTP mode (`requests` = calls; `errors` = calls answered with a non-OK
//! status; `failures` = calls that got no answer).
//!
//! [`channel`] is also what the node's tests and tools use to reach a node over gRPC.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use hdrhistogram::Histogram;
use hyper_util::rt::TokioIo;
use leaf_api::grpc::v1::id_service_client::IdServiceClient;
use leaf_api::grpc::v1::GetSegmentIdsRequest;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::args::TlsArgs;
use crate::report::{Latency, Report};
use crate::{parse_duration, BenchError};

/// `leaf bench grpc` arguments.
#[derive(Args, Debug, Clone)]
pub struct GrpcBenchArgs {
    /// Base URL of the node: http:// (h2c) or https:// (TLS, ALPN h2).
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The segment tag to ask for.
    #[arg(long, default_value = "leaf-segment-test")]
    pub tag: String,
    /// IDs per call (`count`; answered as ranges), 1 to 1,000,000.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub count: u32,
    /// HTTP/2 connections.
    #[arg(long, short = 'c', default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub connections: u32,
    /// Calls in flight on each connection.
    #[arg(long, short = 'k', default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub concurrency: u32,
    /// How long to measure (after the warmup): e.g. 10s, 1m, 500ms.
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Calls during this first period are made but not measured.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Worker threads of the generator (it shares the machine with what it measures).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// One HTTP/2 connection to `url` as a tonic channel: h2c for `http://`; for `https://`, TLS
/// with `tls` (ALPN `h2` is set here) done by our own connector, since tonic is built without
/// its TLS features.
pub async fn channel(url: &str, tls: Option<rustls::ClientConfig>) -> Result<Channel, BenchError> {
    let bad = || BenchError::Url(url.to_string());
    let uri: Uri = url.parse().map_err(|_| bad())?;
    let endpoint = Endpoint::from_shared(url.to_string()).map_err(|_| bad())?;
    let connect_err = |e: tonic::transport::Error| BenchError::NoAnswers(format!("connect {url}: {e}"));
    match uri.scheme_str() {
        Some("http") => endpoint.connect().await.map_err(connect_err),
        Some("https") => {
            let mut tls = tls.ok_or_else(bad)?;
            tls.alpn_protocols = vec![b"h2".to_vec()];
            let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
            let connect = tower::service_fn(move |uri: Uri| {
                let connector = connector.clone();
                async move {
                    let host = uri.host().unwrap_or("localhost").trim_matches(['[', ']']).to_string();
                    let port = uri.port_u16().unwrap_or(443);
                    let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
                    let _ = tcp.set_nodelay(true);
                    let name = rustls_pki_types::ServerName::try_from(host)
                        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                    let tls = connector.connect(name, tcp).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(tls))
                }
            });
            endpoint.connect_with_connector(connect).await.map_err(connect_err)
        }
        _ => Err(bad()),
    }
}

/// What the call loops share.
struct Shared {
    measuring: AtomicBool,
    stop: AtomicBool,
    calls: AtomicU64,
    ok: AtomicU64,
    errors: AtomicU64,
    failures: AtomicU64,
    ids: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// Runs the benchmark described by `args`.
pub async fn run_grpc(args: &GrpcBenchArgs) -> Result<Report, BenchError> {
    if args.duration.is_zero() {
        return Err(BenchError::Duration);
    }
    let tls = if args.url.starts_with("https://") { Some(args.tls.options()?.client_config()?) } else { None };
    let mut channels = Vec::new();
    for _ in 0..args.connections {
        channels.push(channel(&args.url, tls.clone()).await?);
    }
    let shared = Arc::new(Shared {
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        calls: AtomicU64::new(0),
        ok: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        ids: AtomicU64::new(0),
        last_error: Mutex::new(None),
    });
    let mut tasks = Vec::new();
    for ch in &channels {
        for _ in 0..args.concurrency {
            let (client, shared, tag, count) =
                (IdServiceClient::new(ch.clone()), shared.clone(), args.tag.clone(), args.count);
            let hist = Histogram::<u64>::new(3).map_err(|e| BenchError::Histogram(e.to_string()))?;
            tasks.push(tokio::spawn(call_loop(client, shared, tag, count, hist)));
        }
    }
    tokio::time::sleep(args.warmup).await;
    shared.measuring.store(true, Ordering::Release);
    let started = Instant::now();
    tokio::time::sleep(args.duration).await;
    shared.measuring.store(false, Ordering::Release);
    let seconds = started.elapsed().as_secs_f64();
    shared.stop.store(true, Ordering::Release);
    let mut hist = Histogram::<u64>::new(3).map_err(|e| BenchError::Histogram(e.to_string()))?;
    for t in tasks {
        if let Ok(h) = t.await {
            hist.add(&h).map_err(|e| BenchError::Histogram(e.to_string()))?;
        }
    }
    let calls = shared.calls.load(Ordering::Relaxed);
    let ok = shared.ok.load(Ordering::Relaxed);
    if ok == 0 {
        let why = shared.last_error.lock().map(|e| e.clone()).unwrap_or_default();
        return Err(BenchError::NoAnswers(why.unwrap_or_else(|| "no call completed".to_string())));
    }
    Ok(Report {
        urls: vec![args.url.clone()],
        path: format!("grpc leaf.v1.IdService/GetSegmentIds tag={} count={}", args.tag, args.count),
        connections: args.connections,
        mode: format!("closed, {} in flight per connection", args.concurrency),
        rate: None,
        seconds,
        requests: calls,
        ok,
        errors: shared.errors.load(Ordering::Relaxed),
        failures: shared.failures.load(Ordering::Relaxed),
        requests_per_sec: calls as f64 / seconds,
        ids_per_sec: shared.ids.load(Ordering::Relaxed) as f64 / seconds,
        latency_us: Latency::of(&hist),
    })
}

/// One in-flight slot: calls back to back until told to stop; returns its latencies (ns).
async fn call_loop(
    mut client: IdServiceClient<Channel>,
    shared: Arc<Shared>,
    tag: String,
    count: u32,
    mut hist: Histogram<u64>,
) -> Histogram<u64> {
    while !shared.stop.load(Ordering::Acquire) {
        let start = Instant::now();
        let r = client.get_segment_ids(GetSegmentIdsRequest { tag: tag.clone(), count }).await;
        let ns = start.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        if !shared.measuring.load(Ordering::Acquire) {
            continue;
        }
        shared.calls.fetch_add(1, Ordering::Relaxed);
        let _ = hist.record(ns.max(1));
        match r {
            Ok(answer) => {
                shared.ok.fetch_add(1, Ordering::Relaxed);
                let n: u64 =
                    answer.into_inner().ranges.iter().map(|r| r.end.saturating_sub(r.start).max(0) as u64).sum();
                shared.ids.fetch_add(n, Ordering::Relaxed);
            }
            Err(s) => {
                // A status the server sent vs. a call that never got an answer.
                if s.code() == tonic::Code::Unavailable && s.metadata().get("leaf-code").is_none() {
                    shared.failures.fetch_add(1, Ordering::Relaxed);
                } else {
                    shared.errors.fetch_add(1, Ordering::Relaxed);
                }
                if let Ok(mut e) = shared.last_error.lock() {
                    *e = Some(format!("{:?}: {}", s.code(), s.message()));
                }
            }
        }
    }
    hist
}

/// The report of a gRPC run as text.
pub fn render_grpc(r: &Report) -> String {
    crate::report::render_as(
        r,
        &format!("leaf bench grpc: {} connections, {}, {}", r.connections, r.mode, r.path),
        "calls",
        "calls/s",
    )
}
