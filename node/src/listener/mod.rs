//! The listener: one TCP port for every protocol. It accepts connections under the connection
//! cap, handshakes TLS when configured, finds out which protocol a connection speaks
//! ([`proto`]: HTTP/1.1, or HTTP/2 by h2c prior knowledge or ALPN `h2`), and dispatches each
//! request ([`dispatch`]): gRPC calls to [`crate::grpc`], plain ID `GET`s to the HTTP fast
//! path, the rest to the HTTP router inside its layers. It is the one module that knows both
//! edges; they never import each other.
//!
//! `http.max_connections` is enforced at accept: a connection beyond it gets a complete 503
//! `unavailable` with `Retry-After: 1` and is closed without reading the request. With
//! `[tls]`, an accepted connection is handshaken first ([`crate::tls::accept`], within
//! `http.header_read_timeout_ms`), and the identity of its client certificate goes into its
//! [`ConnInfo`].
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::access::credentials::ConnInfo;
use crate::service::App;

mod dispatch;
pub mod proto;

use dispatch::connection;

/// Serves `listener` until `shutdown` turns true, then lets in-flight requests finish for up to
/// `http.shutdown_grace_ms`.
pub async fn serve(listener: TcpListener, app: Arc<App>, mut shutdown: watch::Receiver<bool>) {
    let local = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "listener has no local address");
            return;
        }
    };
    let protocols = proto::Protocols::new(Duration::from_millis(app.config().http.header_read_timeout_ms));
    let routes = crate::http::router(app.clone());
    let grpc = app.config().grpc.enabled.then(|| crate::grpc::routes(app.clone(), shutdown.clone()));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let slots = Arc::new(tokio::sync::Semaphore::new(app.config().http.max_connections));
    let trimmer = Arc::new(crate::memory::Trimmer::default());
    let trimming = tokio::spawn(trimmer.clone().run(Duration::from_secs(2)));
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    app.metrics().connection_refused();
                    tokio::spawn(refuse_connection(stream));
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let info = ConnInfo { local: stream.local_addr().unwrap_or(local), peer, identity: None };
                let trimmer = trimmer.clone();
                let (app, routes, grpc, protocols, watcher) =
                    (app.clone(), routes.clone(), grpc.clone(), protocols.clone(), graceful.watcher());
                let mut stopping = shutdown.clone();
                tokio::spawn(async move {
                    let first_bytes = Duration::from_millis(app.config().http.header_read_timeout_ms);
                    match app.tls().cloned() {
                        None => {
                            // The watcher holds up graceful shutdown: a connection that has not
                            // said which protocol it speaks is dropped at once, as hyper drops
                            // an HTTP/1 connection that has not started a request.
                            let sniffed = tokio::select! {
                                p = proto::sniff(&stream, first_bytes) => p,
                                _ = stopping.wait_for(|stop| *stop) => None,
                            };
                            if let Some(p) = sniffed {
                                let svc = connection(&app, &routes, &grpc, info);
                                let conn = protocols.builder(p).serve_connection(TokioIo::new(stream), svc);
                                if let Err(e) = watcher.watch(conn.into_owned()).await {
                                    tracing::debug!(error = %e, "connection ended with an error");
                                }
                            }
                        }
                        Some(tls) => match crate::tls::accept::accept(&tls, stream, first_bytes).await {
                            Ok(accepted) => {
                                let p = proto::of_alpn(accepted.stream.get_ref().1.alpn_protocol());
                                let info = ConnInfo { identity: accepted.identity.map(Arc::new), ..info };
                                let svc = connection(&app, &routes, &grpc, info);
                                let conn = protocols.builder(p).serve_connection(TokioIo::new(accepted.stream), svc);
                                if let Err(e) = watcher.watch(conn.into_owned()).await {
                                    tracing::debug!(error = %e, "connection ended with an error");
                                }
                            }
                            Err(e) => tracing::debug!(%peer, error = %e, "TLS connection refused"),
                        },
                    }
                    drop(slot);
                    trimmer.connection_closed();
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    trimming.abort();
    let grace = Duration::from_millis(app.config().http.shutdown_grace_ms);
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        tracing::warn!(?grace, "in-flight requests did not finish within the shutdown grace period");
    }
}

/// The answer of a connection beyond `http.max_connections`: a complete 503 response with
/// `Retry-After`, written without reading the request, then the connection is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
connection: close\r\ncontent-length: 103\r\n\r\n\
{\"code\":\"unavailable\",\"message\":\"too many open connections to this node; retry shortly\",\"leaf_code\":-3}";

/// Answers a connection over the cap with [`BUSY`] (bounded by a second) and closes it.
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(BUSY).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use leaf_api::{ErrorBody, ErrorCode};

    #[test]
    fn the_busy_answer_is_a_well_formed_503_with_a_json_error() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains("\r\nretry-after: 1"));
        let len: usize = head.split("content-length: ").nth(1).unwrap().parse().unwrap();
        assert_eq!(len, body.len());
        let e: ErrorBody = serde_json::from_str(body).unwrap();
        assert_eq!(e, ErrorBody::new(ErrorCode::Unavailable, "too many open connections to this node; retry shortly"));
    }
}
