//! A fake node for the client tests: an HTTP server on loopback whose answers a test scripts,
//! and what it saw.
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use leaf_api::{ErrorBody, ErrorCode};
use leaf_client::Client;

/// What a test server saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub auth: Option<String>,
    pub body: String,
}

type Handler = Arc<dyn Fn(&Seen, u32) -> (StatusCode, String) + Send + Sync>;

/// A server answering with `handler(request, n)`, `n` counting its requests from 0.
pub struct Server {
    addr: SocketAddr,
    hits: Arc<AtomicU32>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub async fn start(handler: impl Fn(&Seen, u32) -> (StatusCode, String) + Send + Sync + 'static) -> Server {
        Self::start_slow(Duration::ZERO, handler).await
    }

    pub async fn start_slow(
        delay: Duration,
        handler: impl Fn(&Seen, u32) -> (StatusCode, String) + Send + Sync + 'static,
    ) -> Server {
        let handler: Handler = Arc::new(handler);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicU32::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (h, s) = (hits.clone(), seen.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (handler, hits, seen) = (handler.clone(), h.clone(), s.clone());
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (handler, hits, seen) = (handler.clone(), hits.clone(), seen.clone());
                    async move {
                        let n = hits.fetch_add(1, Ordering::SeqCst);
                        let method = req.method().to_string();
                        let path = req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
                        let auth = req.headers().get("authorization").map(|v| v.to_str().unwrap().to_string());
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let request = Seen { method, path, auth, body: String::from_utf8_lossy(&body).into() };
                        seen.lock().unwrap().push(request.clone());
                        tokio::time::sleep(delay).await;
                        let (status, body) = handler(&request, n);
                        let mut resp = Response::new(Full::new(Bytes::from(body)));
                        *resp.status_mut() = status;
                        Ok::<_, Infallible>(resp)
                    }
                });
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
            }
        });
        Server { addr, hits, seen }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn hits(&self) -> u32 {
        self.hits.load(Ordering::SeqCst)
    }
}

pub fn error(code: ErrorCode) -> String {
    serde_json::to_string(&ErrorBody::new(code, format!("test {code}"))).unwrap()
}

/// A loopback URL nothing listens on.
pub fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

pub fn client(nodes: &[String]) -> Client {
    Client::builder(nodes).backoff(Duration::from_millis(1), Duration::from_millis(5)).build().unwrap()
}
