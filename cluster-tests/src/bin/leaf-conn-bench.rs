//! `leaf-conn-bench`: requests per second with a new connection for every request, over HTTPS
//! with TLS session resumption on or off, or over plaintext HTTP, for `bench/tls-resume.sh`.
//!
//! `--concurrency` tasks each loop for `--seconds`: connect, handshake (`https://`), send one
//! `GET` with `Connection: close`, read the answer to its end, check `200`. Every task shares
//! one rustls client config, as one client program would, so a task resumes a session another
//! one made; `--no-resume` turns resumption off in it (every handshake a full one). The first
//! `--warmup-ms` are not counted. Prints one line, `REQUESTS_PER_S RESUMED_FRACTION ERRORS`,
//! and the same in words on stderr.
//!
//!   leaf-conn-bench --url https://127.0.0.1:18582/api/segment/get/leaf-segment-test --ca ca.pem
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use rustls::{ClientConfig, HandshakeKind, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

#[derive(Parser, Debug)]
#[command(about = "Requests/s with a new connection per request (HTTPS with or without resumption, or HTTP)")]
struct Args {
    /// `http://` or `https://` URL; its host is the name checked in the certificate.
    #[arg(long)]
    url: String,
    /// The CA certificate (PEM) for `https://`.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// Concurrent connections.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    concurrency: u64,
    /// Measured seconds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    seconds: u64,
    /// Milliseconds run first and not counted.
    #[arg(long, default_value_t = 500)]
    warmup_ms: u64,
    /// Full handshakes only: TLS session resumption off in the client.
    #[arg(long)]
    no_resume: bool,
}

/// What the tasks counted.
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    resumed: AtomicU64,
    errors: AtomicU64,
}

struct Target {
    addr: String,
    request: Vec<u8>,
    tls: Option<(TlsConnector, ServerName<'static>)>,
}

fn target(args: &Args) -> anyhow::Result<Target> {
    let uri: hyper::Uri = args.url.parse().context("--url")?;
    let host = uri.host().context("--url has no host")?.trim_matches(|c| c == '[' || c == ']').to_string();
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => bail!("--url must be http:// or https://"),
    };
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n").into_bytes();
    let addr = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let tls = if https {
        let ca = args.ca.as_ref().context("https:// needs --ca")?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(ca).with_context(|| format!("reading {}", ca.display()))? {
            roots.add(cert?)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        if args.no_resume {
            config.resumption = rustls::client::Resumption::disabled();
        }
        Some((TlsConnector::from(Arc::new(config)), ServerName::try_from(host)?))
    } else {
        None
    };
    Ok(Target { addr, request, tls })
}

/// Sends the request on `stream` and reads the answer to its end; true for a `200`.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, request: &[u8]) -> bool {
    if stream.write_all(request).await.is_err() || stream.flush().await.is_err() {
        return false;
    }
    let mut answer = Vec::with_capacity(512);
    // The node closes after the answer; a close without close_notify after it is fine.
    let _ = stream.read_to_end(&mut answer).await;
    answer.starts_with(b"HTTP/1.1 200")
}

/// One request on a new connection: `Some(resumed)` when it was answered `200`.
async fn one(target: &Target) -> Option<bool> {
    let tcp = TcpStream::connect(&target.addr).await.ok()?;
    let _ = tcp.set_nodelay(true);
    match &target.tls {
        None => {
            let mut tcp = tcp;
            exchange(&mut tcp, &target.request).await.then_some(false)
        }
        Some((connector, name)) => {
            let mut stream = connector.connect(name.clone(), tcp).await.ok()?;
            let resumed = stream.get_ref().1.handshake_kind() == Some(HandshakeKind::Resumed);
            exchange(&mut stream, &target.request).await.then_some(resumed)
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let target = Arc::new(target(&args)?);
    let counts = Arc::new(Counts::default());
    let start = Instant::now();
    let counted_from = start + Duration::from_millis(args.warmup_ms);
    let end = counted_from + Duration::from_secs(args.seconds);
    let tasks: Vec<_> = (0..args.concurrency)
        .map(|_| {
            let (target, counts) = (target.clone(), counts.clone());
            tokio::spawn(async move {
                while Instant::now() < end {
                    let answer = one(&target).await;
                    if Instant::now() < counted_from {
                        continue;
                    }
                    match answer {
                        Some(resumed) => {
                            counts.ok.fetch_add(1, Ordering::Relaxed);
                            counts.resumed.fetch_add(u64::from(resumed), Ordering::Relaxed);
                        }
                        None => {
                            counts.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await?;
    }
    let secs = end.saturating_duration_since(counted_from).as_secs_f64();
    let ok = counts.ok.load(Ordering::Relaxed);
    let resumed = counts.resumed.load(Ordering::Relaxed);
    let errors = counts.errors.load(Ordering::Relaxed);
    let rate = ok as f64 / secs;
    let fraction = if ok == 0 { 0.0 } else { resumed as f64 / ok as f64 };
    eprintln!(
        "{ok} requests in {secs:.1} s on new connections: {rate:.0}/s, {resumed} resumed ({:.1} %), {errors} failed",
        fraction * 100.0
    );
    println!("{rate:.0} {fraction:.3} {errors}");
    Ok(())
}
