//! Drives the connections: one task per keep-alive connection (plain TCP, or TLS for
//! `https://`), closed or open loop, each with its own histogram, merged at the end.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;

use crate::args::{BenchArgs, RAND};
use crate::error::BenchError;
use crate::report::{Latency, Report};

/// One target: where to connect, what to send as `Host`, and the TLS layer of an `https://`
/// URL.
#[derive(Clone)]
struct Target {
    url: String,
    addr: SocketAddr,
    authority: String,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

/// The TLS connector of a run: built once, when some URL is `https://`.
fn tls_connector(args: &BenchArgs) -> Result<Option<TlsConnector>, BenchError> {
    let opts = args.tls.options()?;
    let https = |u: &String| u.trim().parse::<hyper::Uri>().is_ok_and(|u| u.scheme_str() == Some("https"));
    if !args.urls.iter().any(https) {
        return Ok(None);
    }
    Ok(Some(TlsConnector::from(Arc::new(opts.client_config()?))))
}

async fn resolve(url: &str, tls: Option<&TlsConnector>) -> Result<Target, BenchError> {
    let bad = || BenchError::Url(url.to_string());
    let uri: hyper::Uri = url.parse().map_err(|_| bad())?;
    let (https, default_port) = match uri.scheme_str() {
        Some("http") => (false, 80),
        Some("https") => (true, 443),
        _ => return Err(bad()),
    };
    let authority = uri.authority().ok_or_else(bad)?.to_string();
    let host = uri.host().filter(|h| !h.is_empty()).ok_or_else(bad)?;
    let tls = match (https, tls) {
        (false, _) => None,
        (true, Some(connector)) => {
            // An IPv6 host keeps its brackets in the URI, not in the name checked.
            let name = host.trim_start_matches('[').trim_end_matches(']').to_string();
            Some((connector.clone(), ServerName::try_from(name).map_err(|_| bad())?))
        }
        (true, None) => return Err(bad()),
    };
    let host_port = if uri.port().is_some() { authority.clone() } else { format!("{authority}:{default_port}") };
    let addr = tokio::net::lookup_host(&host_port)
        .await
        .map_err(|e| BenchError::Resolve(host_port.clone(), e.to_string()))?
        .next()
        .ok_or_else(|| BenchError::Resolve(host_port.clone(), "no address".to_string()))?;
    Ok(Target { url: url.to_string(), addr, authority, tls })
}

/// Shared state of a run.
struct Shared {
    path: String,
    /// The distribution of `{zipf}`, when the path has one.
    zipf: Option<crate::zipf::Zipf>,
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
    let mut sender: Option<Conn> = None;
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
        let Some(Conn { sender: s, ended }) = sender.as_mut() else { continue };
        let sent = Instant::now();
        let from = start_from.unwrap_or(sent);
        // `{rand}` in the path: a fresh random value per request (e.g. a flood of unknown tags).
        let path = if shared.path.contains(RAND) {
            std::borrow::Cow::Owned(shared.path.replace(RAND, &format!("{:016x}", rand::random::<u64>())))
        } else if let Some(z) = &shared.zipf {
            std::borrow::Cow::Owned(z.fill(&shared.path, &mut rand::thread_rng()))
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
        };
        let answer = match ended {
            None => answer.await.map_err(|e| e.to_string()),
            Some(ended) => tls_answer(answer, ended, &target.url).await,
        };
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
                record_error(&shared, e);
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

/// One keep-alive connection.
struct Conn {
    sender: http1::SendRequest<Empty<Bytes>>,
    /// TLS only: the task driving the connection, which ends with the TLS failure that closed
    /// it, if that is what did.
    ended: Option<JoinHandle<Option<String>>>,
}

async fn connect(target: &Target) -> Result<Conn, String> {
    let stream = TcpStream::connect(target.addr).await.map_err(|e| format!("connect {}: {e}", target.addr))?;
    let _ = stream.set_nodelay(true);
    let Some((connector, name)) = &target.tls else {
        let (sender, conn) = handshake(stream, target.addr).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        return Ok(Conn { sender, ended: None });
    };
    let stream = connector.connect(name.clone(), stream).await.map_err(|e| {
        tls_reason(&target.url, &e).unwrap_or_else(|| format!("TLS handshake with {}: {e}", target.addr))
    })?;
    let (sender, conn) = handshake(stream, target.addr).await?;
    // In TLS 1.3 a node refuses a client certificate after the handshake, so the reason
    // arrives on the connection, not on the request.
    let url = target.url.clone();
    let ended = tokio::spawn(async move { conn.await.err().and_then(|e| tls_reason(&url, &e)) });
    Ok(Conn { sender, ended: Some(ended) })
}

/// An HTTP/1.1 connection over `io`; the caller drives the connection future.
async fn handshake<IO>(
    io: IO,
    addr: SocketAddr,
) -> Result<(http1::SendRequest<Empty<Bytes>>, http1::Connection<TokioIo<IO>, Empty<Bytes>>), String>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    http1::handshake(TokioIo::new(io)).await.map_err(|e| format!("handshake {addr}: {e}"))
}

/// A TLS failure behind `e`, in words, prefixed by the node's URL.
fn tls_reason(url: &str, e: &(dyn std::error::Error + 'static)) -> Option<String> {
    leaf_client::tls::diagnose(e).map(|(_, why)| format!("{url}: {why}"))
}

/// The answer over a TLS connection, or why there is none: the TLS failure that ended the
/// connection when there was one. Never waits on a connection that is gone (a request sent
/// just as a node's refusal closes the connection may otherwise never be answered).
async fn tls_answer(
    answer: impl std::future::Future<Output = Result<(StatusCode, Bytes), hyper::Error>>,
    ended: &mut JoinHandle<Option<String>>,
    url: &str,
) -> Result<(StatusCode, Bytes), String> {
    let failed = tokio::select! {
        biased;
        a = answer => match a {
            Ok(v) => return Ok(v),
            Err(e) => tls_reason(url, &e).unwrap_or_else(|| e.to_string()),
        },
        r = &mut *ended => {
            return Err(r.ok().flatten().unwrap_or_else(|| format!("{url}: the node closed the connection")))
        }
    };
    // The connection's own error says more than "connection closed", if it has one.
    match tokio::time::timeout(Duration::from_millis(100), ended).await {
        Ok(Ok(Some(reason))) => Err(reason),
        _ => Err(failed),
    }
}

/// Runs the load described by `args` on the current (multi-thread) runtime.
pub async fn run(args: &BenchArgs) -> Result<Report, BenchError> {
    if !args.path.starts_with('/') {
        return Err(BenchError::Path(args.path.clone()));
    }
    if args.duration.is_zero() {
        return Err(BenchError::Duration);
    }
    let tls = tls_connector(args)?;
    let mut targets = Vec::new();
    for url in &args.urls {
        targets.push(resolve(url.trim().trim_end_matches('/'), tls.as_ref()).await?);
    }
    let start = Instant::now();
    let measure_from = start + args.warmup;
    let zipf = if args.path.contains(crate::zipf::ZIPF) {
        Some(crate::zipf::Zipf::new(args.zipf_tags, args.zipf_s).map_err(BenchError::Path)?)
    } else {
        None
    };
    let shared = Arc::new(Shared {
        path: args.path.clone(),
        zipf,
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
        latency_us: Latency::of(&hist),
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
