//! The HTTP ceiling: the most any one-ID-per-request HTTP service can do on this machine.
//!
//! A bare hyper HTTP/1.1 server on the same stack and settings as `leaf serve` (multi-thread
//! tokio runtime, keep-alive, nodelay, header-read timeout) that answers every request with the
//! next value of an atomic counter as decimal text: no routing, no metrics, no ID logic.
//! `bench/run.sh` measures it in the same run as leaf, and leaf's targets are ratios of it.
//! A connection that starts with the HTTP/2 preface (h2c with prior knowledge, as `h2load`
//! sends) is served HTTP/2 instead, as leaf's listener does (`bench/h2.sh`).
//!
//!   cargo run --release -p leaf-node --example http_ceiling -- 127.0.0.1:18080
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn main() -> anyhow::Result<()> {
    let addr: SocketAddr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:18080".to_string()).parse()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(serve(addr))
}

async fn serve(addr: SocketAddr) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!("http_ceiling listening on {}", listener.local_addr()?);
    let counter = Arc::new(AtomicU64::new(0));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(10)).keep_alive(true);
    let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new()).max_concurrent_streams(256);
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let counter = counter.clone();
        let (h1, h2) = (builder.clone(), h2.clone());
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |_req| {
                let id = counter.fetch_add(1, Ordering::Relaxed) + 1;
                async move {
                    let mut buf = itoa::Buffer::new();
                    let mut resp = Response::new(Full::new(Bytes::copy_from_slice(buf.format(id).as_bytes())));
                    *resp.status_mut() = StatusCode::OK;
                    resp.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                    Ok::<_, Infallible>(resp)
                }
            });
            if is_h2c(&stream).await {
                let _ = h2.serve_connection(TokioIo::new(stream), svc).await;
            } else {
                let _ = h1.serve_connection(TokioIo::new(stream), svc).await;
            }
        });
    }
}

/// Whether the connection starts with the HTTP/2 preface (peeked, not consumed); anything else,
/// silence for 10 s included, is HTTP/1.1.
async fn is_h2c(stream: &tokio::net::TcpStream) -> bool {
    let peek = async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            let n = stream.peek(&mut buf).await.unwrap_or(0);
            if n == 0 || buf[..n] != H2_PREFACE[..n] {
                return false;
            }
            if n == H2_PREFACE.len() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), peek).await.unwrap_or(false)
}
