//! The listener: one TCP port for every protocol. It accepts connections under the connection
//! cap, handshakes TLS when configured, finds out which protocol a connection speaks
//! ([`proto`]: HTTP/1.1, or HTTP/2 by h2c prior knowledge or ALPN `h2`), and dispatches each
//! request ([`dispatch`]): gRPC calls to [`crate::grpc`], plain ID `GET`s to the HTTP fast
//! path, the rest to the HTTP router inside its layers. It is the one module that knows both
//! edges; they never import each other.
//!
//! The connection caps are enforced at accept ([`admission`]: `http.max_connections`, at most
//! `http.max_connections_per_address` of them per address, and a reserve for member nodes): a
//! connection beyond them gets a complete 503 `unavailable` with `Retry-After: 1` and is
//! closed without reading the request. An HTTP/2 connection idle for `http.idle_timeout_ms` is
//! shut down gracefully ([`idle`]), as is every connection at shutdown ([`stop`]). With
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

mod admission;
mod dispatch;
mod idle;
pub mod proto;
mod stop;

use dispatch::connection;

/// Serves `listener` until `shutdown` turns true, then lets in-flight requests finish for up to
/// `http.shutdown_grace_ms`.
pub async fn serve(listener: TcpListener, app: Arc<App>, shutdown: watch::Receiver<bool>) {
    let local = match listener.local_addr() {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "listener has no local address");
            return;
        }
    };
    let http = &app.config().http;
    let protocols = proto::Protocols::new(Duration::from_millis(http.header_read_timeout_ms));
    let routes = crate::http::router(app.clone());
    let grpc = app.config().grpc.enabled.then(|| crate::grpc::routes(app.clone(), shutdown.clone()));
    let admission = admission::Admission::new(
        http.max_connections,
        http.max_connections_per_address,
        http.reserved_peer_connections,
    );
    let trimmer = Arc::new(crate::memory::Trimmer::default());
    let trimming = tokio::spawn(trimmer.clone().run(Duration::from_secs(2)));
    // Every connection task holds a sender; shutdown waits until all are dropped.
    let (open_tx, mut all_closed) = tokio::sync::mpsc::channel::<()>(1);
    let mut stop = shutdown.clone();
    // What the connections wait on: set once, below, when `shutdown` turns.
    let stopping = stop::Stop::new();
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
                let Some(ticket) = admission.admit(peer.ip(), app.tls().is_some()) else {
                    app.metrics().connection_refused();
                    tokio::spawn(refuse_connection(stream));
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let info = ConnInfo { local: stream.local_addr().unwrap_or(local), peer, identity: None };
                let conn = Conn {
                    app: app.clone(),
                    routes: routes.clone(),
                    grpc: grpc.clone(),
                    protocols: protocols.clone(),
                    stopping: stopping.clone(),
                };
                let (trimmer, open) = (trimmer.clone(), open_tx.clone());
                tokio::spawn(async move {
                    conn.run(stream, info, ticket).await;
                    trimmer.connection_closed();
                    drop(open);
                });
            }
            _ = stop.changed() => break,
        }
    }
    stopping.stop();
    drop(listener);
    drop(open_tx);
    trimming.abort();
    let grace = Duration::from_millis(app.config().http.shutdown_grace_ms);
    if tokio::time::timeout(grace, all_closed.recv()).await.is_err() {
        tracing::warn!(?grace, "in-flight requests did not finish within the shutdown grace period");
    }
}

/// What one connection's task needs.
struct Conn {
    app: Arc<App>,
    routes: axum::Router,
    grpc: Option<tonic::service::Routes>,
    protocols: proto::Protocols,
    stopping: Arc<stop::Stop>,
}

impl Conn {
    /// Serves one admitted connection to its end (`ticket` holds its slot until then).
    async fn run(self, stream: tokio::net::TcpStream, info: ConnInfo, ticket: admission::Ticket) {
        let first_bytes = Duration::from_millis(self.app.config().http.header_read_timeout_ms);
        match self.app.tls().cloned() {
            None => {
                // A connection that has not said which protocol it speaks is dropped at
                // shutdown, as hyper drops an HTTP/1 connection that has not started a request.
                let sniffed = tokio::select! {
                    p = proto::sniff(&stream, first_bytes) => p,
                    _ = self.stopping.stopped() => None,
                };
                if let Some(p) = sniffed {
                    self.serve(TokioIo::new(stream), p, info).await;
                }
            }
            Some(tls) => {
                let handshake = if ticket.reserved { first_bytes.min(admission::PROBATION) } else { first_bytes };
                self.tls_then_serve(&tls, stream, handshake, info, &ticket).await;
            }
        }
        drop(ticket);
    }

    /// The TLS handshake (within `handshake`), then HTTP, unless the connection is on a
    /// reserved slot without a member's certificate.
    async fn tls_then_serve(
        self,
        tls: &crate::tls::Tls,
        stream: tokio::net::TcpStream,
        handshake: Duration,
        info: ConnInfo,
        ticket: &admission::Ticket,
    ) {
        match crate::tls::accept::accept(tls, stream, handshake).await {
            Ok(accepted) => {
                let member = match &accepted.identity {
                    Some(leaf_api::identity::CertIdentity::Node(id)) => self.app.is_current_member(*id),
                    _ => false,
                };
                if !ticket.keep_if_member(member) {
                    // On a reserved slot without a member's certificate.
                    self.app.metrics().connection_refused();
                    return;
                }
                let p = proto::of_alpn(accepted.stream.get_ref().1.alpn_protocol());
                let info = ConnInfo { identity: accepted.identity.map(Arc::new), ..info };
                self.serve(TokioIo::new(accepted.stream), p, info).await;
            }
            Err(e) => tracing::debug!(peer = %info.peer, error = %e, "TLS connection refused"),
        }
    }

    /// Serves HTTP on an established connection until it ends: at shutdown, and for HTTP/2
    /// after `http.idle_timeout_ms` without a request in flight, gracefully (in-flight
    /// requests finish). The connection is polled first, and the shutdown wait costs a flag
    /// read per wake-up ([`stop`]): this loop runs several times per request.
    async fn serve<I>(self, io: TokioIo<I>, p: proto::Proto, info: ConnInfo)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let activity = (p == proto::Proto::Http2).then(idle::Activity::new);
        let svc = connection(&self.app, &self.routes, &self.grpc, info, activity.clone());
        let conn = self.protocols.builder(p).serve_connection(io, svc);
        let mut conn = std::pin::pin!(conn);
        let idle_timeout = Duration::from_millis(self.app.config().http.idle_timeout_ms);
        let idle = async {
            match activity {
                Some(a) => idle::idle(a, idle_timeout).await,
                None => std::future::pending().await,
            }
        };
        let mut idle = std::pin::pin!(idle);
        let mut stopped = self.stopping.stopped();
        let mut closing = false;
        loop {
            tokio::select! {
                biased;
                ended = conn.as_mut() => {
                    if let Err(e) = ended {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = &mut stopped, if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
                _ = &mut idle, if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
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
