//! The tower layer that asks the service core who is calling, before routing: every admin and
//! monitor route needs the credentials its row of [`leaf_api::routes::TABLE`] declares (the
//! admin bearer token, or loopback without one; an admin client certificate; a scoped token
//! with the route's right), and a request that is not another web origin's (`Origin`, and
//! `Host` for token-less loopback); a path under `/admin` that no row declares needs the root
//! credentials. Everything under `/internal` needs the cluster secret (and, with TLS, a
//! member node's certificate). The checks
//! themselves are [`crate::service::App::authorize`]'s. A refused request gets its 401/403 and
//! never reaches a handler, so unknown paths and wrong methods under those prefixes answer
//! 401/403 first, and no request body is read before the caller is known. The caller of an
//! admin request goes into the request as a [`crate::access::Principal`]: handlers check a
//! scoped token's tag patterns and record it in the audit trail.
use std::sync::Arc;

use axum::extract::Request;
use axum::http::header::{AUTHORIZATION, HOST, ORIGIN};
use axum::response::{IntoResponse, Response};
use futures::future::{ready, Either, Ready};

use crate::access::credentials::{ClientAddr, ConnInfo, Provenance};
use crate::raft::network::SECRET_HEADER;
use crate::service::auth::{Credentials, Verdict};
use crate::service::App;

/// The tower layer that runs the check before the router. Hand-written rather than
/// `axum::middleware::from_fn` so the requests it lets through (every ID request) pay a prefix
/// check, not a boxed future and a clone of the router. One per connection, which it knows (so
/// no request carries it as an extension).
#[derive(Clone)]
pub struct AuthLayer {
    pub app: Arc<App>,
    pub conn: ConnInfo,
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = Auth<S>;

    fn layer(&self, inner: S) -> Auth<S> {
        Auth { app: self.app.clone(), conn: self.conn.clone(), inner }
    }
}

/// See [`AuthLayer`].
#[derive(Clone)]
pub struct Auth<S> {
    app: Arc<App>,
    conn: ConnInfo,
    inner: S,
}

impl<S> tower::Service<Request> for Auth<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<Result<Response, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let text = |name| req.headers().get(name).map(|v: &axum::http::HeaderValue| v.to_str().unwrap_or(""));
        let creds = Credentials {
            // Present but not text is a credential sent, and checked (refused), not one absent.
            authorization: text(AUTHORIZATION),
            cluster_secret: req.headers().get(SECRET_HEADER).map(|v| v.as_bytes()),
            provenance: Provenance {
                // HTTP/1.1 sends Host; HTTP/2 the :authority, which lands in the URI.
                host: text(HOST).or_else(|| req.uri().authority().map(|a| a.as_str())),
                origin: text(ORIGIN),
            },
        };
        let method = leaf_api::routes::Method::parse(req.method().as_str());
        match self.app.authorize(&self.conn, method, req.uri().path(), creds) {
            Ok(verdict) => {
                match verdict {
                    Verdict::Admin(principal) | Verdict::Monitor(principal) => {
                        req.extensions_mut().insert(principal);
                    }
                    Verdict::Peer(Some(peer)) => {
                        req.extensions_mut().insert(peer);
                    }
                    Verdict::Anyone => {
                        req.extensions_mut().insert(ClientAddr(self.conn.peer.ip()));
                    }
                    Verdict::Peer(None) => {}
                }
                Either::Left(self.inner.call(req))
            }
            Err(e) => Either::Right(ready(Ok(e.into_response()))),
        }
    }
}
