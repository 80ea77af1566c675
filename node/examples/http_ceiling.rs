//! The HTTP ceiling: the most any one-ID-per-request HTTP service can do on this machine.
//!
//! A bare hyper HTTP/1.1 server on the same stack and settings as `leaf serve` (multi-thread
//! tokio runtime, keep-alive, nodelay, header-read timeout) that answers every request with the
//! next value of an atomic counter as decimal text: no routing, no metrics, no ID logic.
//! `bench/run.sh` measures it in the same run as leaf, and leaf's targets are ratios of it.
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
use hyper_util::rt::{TokioIo, TokioTimer};

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
        let conn = builder.serve_connection(TokioIo::new(stream), svc);
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}
