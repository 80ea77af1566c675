//! Who may call what: the admin bearer token (or, without one, loopback connections only; or,
//! with TLS, a client certificate named in `tls.admin_clients`) for everything under
//! `/admin`, a scoped token for the parts of `/admin` its rights cover ([`admin_right`]), and
//! the cluster secret for everything under `/internal` — with TLS, from a connection whose
//! certificate the cluster CA signed for a member node. Secrets are compared in constant time,
//! and everything is checked by [`AuthLayer`] before routing to a handler, so unknown paths and
//! wrong methods under those prefixes answer 401/403 first, and no request body is read before
//! the caller is known. The caller of an admin request goes into the request as a
//! [`Principal`]: handlers check a scoped token's tag patterns and record it in the audit
//! trail. ID requests are checked by their handlers ([`crate::access::Access::check_ids`]).
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::header::AUTHORIZATION;
use axum::response::{IntoResponse, Response};
use futures::future::{ready, Either, Ready};
use leaf_api::identity::CertIdentity;
use leaf_api::ErrorCode;
use subtle::ConstantTimeEq;

use super::error::ApiError;
use super::App;
use crate::access::Principal;
use crate::config::is_loopback;
use crate::raft::network::SECRET_HEADER;
use crate::raft::service;

/// Where a request came in (token-less admin stays on loopback) and whom the connection's
/// verified client certificate names. Each connection's [`AuthLayer`] holds it.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    /// From the TLS handshake ([`crate::tls::identity`]); `None` without TLS or certificate.
    pub identity: Option<Arc<CertIdentity>>,
}

/// Whether `path` is an admin endpoint (or would be one).
pub fn is_admin(path: &str) -> bool {
    path == "/admin" || path.starts_with("/admin/")
}

/// The admin credentials of a call that came in on `conn` (HTTP `/admin/*`, gRPC
/// `AdminService`): a client certificate named in `tls.admin_clients`, a scoped token (within
/// its quota), else the admin token (or loopback without one).
pub(crate) fn check_admin_call(app: &App, conn: &ConnInfo, authorization: Option<&str>) -> Result<Principal, ApiError> {
    if let Some(CertIdentity::Client(name)) = conn.identity.as_deref() {
        if admin_client(&app.config.tls.admin_clients, conn.identity.as_deref()) {
            return Ok(Principal::Root(leaf_api::audit::Actor::client_cert(name)));
        }
    }
    if let Some(bearer) = authorization.and_then(|v| v.strip_prefix("Bearer ")) {
        if let Some(p) = app.access.scoped(bearer)? {
            return Ok(p);
        }
    }
    check_admin(app.config.admin_token(), authorization, conn).map(Principal::Root)
}

/// The right a scoped token needs for an admin path; `None`: only the root credentials (the
/// token endpoints: a scoped token never mints or revokes tokens).
pub fn admin_right(path: &str) -> Option<leaf_api::tokens::Right> {
    use leaf_api::tokens::Right;
    let under = |prefix: &str| path == prefix || path.strip_prefix(prefix).is_some_and(|r| r.starts_with('/'));
    if under(leaf_api::routes::ADMIN_TOKENS) {
        None
    } else if under(leaf_api::routes::ADMIN_TAGS) {
        Some(Right::Tags)
    } else {
        Some(Right::Cluster)
    }
}

/// Admin and internal paths need their credentials: the verdict on a request that came in on
/// `conn`, before routing, with the principal of an admin request.
fn check(app: &App, conn: &ConnInfo, req: &Request) -> Result<Option<Principal>, ApiError> {
    let path = req.uri().path();
    if is_admin(path) {
        let header = req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok());
        let principal = check_admin_call(app, conn, header)?;
        match admin_right(path) {
            Some(right) => principal.require(right)?,
            None => principal.require_root("managing tokens")?,
        }
        Ok(Some(principal))
    } else if service::is_internal(path) {
        if app.tls.is_some() {
            check_peer_node(conn.identity.as_deref(), |id| {
                app.config.peers.0.contains_key(&id) || !app.raft.has_membership() || app.raft.knows_node(id)
            })?;
        }
        let given = req.headers().get(SECRET_HEADER).map(|v| v.as_bytes());
        check_cluster_secret(app.config.cluster_secret(), given).map(|()| None)
    } else {
        Ok(None)
    }
}

/// Whether the connection's certificate names a client allowed on `/admin`.
fn admin_client(allowed: &[String], identity: Option<&CertIdentity>) -> bool {
    matches!(identity, Some(CertIdentity::Client(name)) if allowed.iter().any(|a| a == name))
}

/// With TLS, `/internal/*` needs a certificate the cluster CA signed for a node that
/// `is_member` accepts: a member, a listed peer, or anyone while this node has no cluster.
pub fn check_peer_node(identity: Option<&CertIdentity>, is_member: impl Fn(u64) -> bool) -> Result<(), ApiError> {
    match identity {
        Some(CertIdentity::Node(id)) if is_member(*id) => Ok(()),
        Some(CertIdentity::Node(id)) => Err(ApiError::new(
            ErrorCode::Forbidden,
            format!("node {id} is not a member of this cluster: internal endpoints refuse it"),
        )),
        _ => Err(ApiError::new(
            ErrorCode::Unauthorized,
            "internal endpoints need a node certificate signed by the cluster CA (mutual TLS)",
        )),
    }
}

/// The tower layer that runs [`check`] before the router: a refused request gets its 401/403
/// and never reaches a handler. Hand-written rather than `axum::middleware::from_fn` so the
/// requests it lets through (every ID request) pay a prefix check, not a boxed future and a
/// clone of the router. One per connection, which it knows (so no request carries it as an
/// extension).
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
        match check(&self.app, &self.conn, &req) {
            Ok(principal) => {
                if let Some(p) = principal {
                    req.extensions_mut().insert(p);
                }
                Either::Left(self.inner.call(req))
            }
            Err(e) => Either::Right(ready(Ok(e.into_response()))),
        }
    }
}

impl ConnInfo {
    /// A connection of unknown origin: never treated as loopback.
    #[cfg(test)]
    fn unknown() -> Self {
        let any = SocketAddr::from(([0, 0, 0, 0], 0));
        ConnInfo { local: any, peer: any, identity: None }
    }
}

/// Internal endpoints need the configured cluster secret, compared in constant time; a node
/// without one refuses them all.
pub fn check_cluster_secret(secret: Option<&str>, given: Option<&[u8]>) -> Result<(), ApiError> {
    let ok = match secret {
        Some(secret) => bool::from(given.unwrap_or_default().ct_eq(secret.as_bytes())),
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Unauthorized,
            format!("internal endpoints need the cluster secret in {SECRET_HEADER}"),
        ))
    }
}

/// Admin needs the bearer token when one is configured, and a loopback connection when not.
/// The token is compared in constant time. Answers who it was.
pub fn check_admin(
    token: Option<&str>,
    authorization: Option<&str>,
    conn: &ConnInfo,
) -> Result<leaf_api::audit::Actor, ApiError> {
    match token {
        Some(token) => {
            let given = authorization.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
            if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
                Ok(leaf_api::audit::Actor::AdminToken)
            } else {
                Err(ApiError::new(
                    ErrorCode::Unauthorized,
                    "admin endpoints need 'Authorization: Bearer <admin_token>'",
                ))
            }
        }
        None if is_loopback(conn.local.ip()) && is_loopback(conn.peer.ip()) => Ok(leaf_api::audit::Actor::Loopback),
        None => Err(ApiError::new(
            ErrorCode::Forbidden,
            "no admin_token is configured, so admin endpoints answer only on loopback connections",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(local: &str, peer: &str) -> ConnInfo {
        ConnInfo { local: local.parse().unwrap(), peer: peer.parse().unwrap(), identity: None }
    }

    #[test]
    fn internal_with_tls_needs_a_member_node_certificate() {
        let member = |id| id <= 3;
        assert!(check_peer_node(Some(&CertIdentity::Node(2)), member).is_ok());
        let outsider = check_peer_node(Some(&CertIdentity::Node(9)), member).unwrap_err();
        assert_eq!(outsider.code, ErrorCode::Forbidden);
        assert!(outsider.message.contains("node 9"), "{}", outsider.message);
        for nobody in [None, Some(CertIdentity::Client("ops".into()))] {
            assert_eq!(check_peer_node(nobody.as_ref(), member).unwrap_err().code, ErrorCode::Unauthorized);
        }
    }

    #[test]
    fn admin_by_client_certificate_only_for_listed_clients() {
        let allowed = vec!["ops".to_string()];
        assert!(admin_client(&allowed, Some(&CertIdentity::Client("ops".into()))));
        assert!(!admin_client(&allowed, Some(&CertIdentity::Client("op".into()))));
        assert!(!admin_client(&allowed, Some(&CertIdentity::Node(1))), "a node certificate is not an admin");
        assert!(!admin_client(&allowed, None));
        assert!(!admin_client(&[], Some(&CertIdentity::Client("ops".into()))));
    }

    #[test]
    fn admin_without_token_only_on_loopback() {
        let lo = conn("127.0.0.1:8080", "127.0.0.1:5000");
        assert!(check_admin(None, None, &lo).is_ok());
        let public = conn("10.1.2.3:8080", "10.1.2.4:5000");
        assert_eq!(check_admin(None, None, &public).unwrap_err().code, ErrorCode::Forbidden);
        // A token-less node bound to 0.0.0.0 still refuses remote peers.
        let mixed = conn("10.1.2.3:8080", "127.0.0.1:5000");
        assert_eq!(check_admin(None, Some("Bearer x"), &mixed).unwrap_err().code, ErrorCode::Forbidden);
        assert_eq!(check_admin(None, None, &ConnInfo::unknown()).unwrap_err().code, ErrorCode::Forbidden);
    }

    #[test]
    fn admin_with_token_needs_the_exact_bearer() {
        let tok = Some("0123456789abcdef");
        let public = conn("10.1.2.3:8080", "10.1.2.4:5000");
        assert!(check_admin(tok, Some("Bearer 0123456789abcdef"), &public).is_ok());
        for bad in [
            None,
            Some(""),
            Some("Bearer "),
            Some("Bearer 0123456789abcde"),
            Some("Bearer 0123456789abcdeff"),
            Some("0123456789abcdef"),
            Some("Basic 0123456789abcdef"),
        ] {
            assert_eq!(check_admin(tok, bad, &public).unwrap_err().code, ErrorCode::Unauthorized, "{bad:?}");
        }
        // The token is required on loopback too.
        let lo = conn("127.0.0.1:8080", "127.0.0.1:5000");
        assert_eq!(check_admin(tok, None, &lo).unwrap_err().code, ErrorCode::Unauthorized);
    }

    #[test]
    fn internal_needs_the_exact_secret() {
        assert!(check_cluster_secret(Some("s3cret"), Some(b"s3cret")).is_ok());
        for bad in [None, Some(&b""[..]), Some(b"s3cre"), Some(b"s3cret!")] {
            assert_eq!(check_cluster_secret(Some("s3cret"), bad).unwrap_err().code, ErrorCode::Unauthorized);
        }
        assert!(check_cluster_secret(None, Some(b"")).is_err(), "a node without a secret refuses all");
    }

    #[test]
    fn scoped_tokens_need_the_right_of_the_path() {
        use leaf_api::tokens::Right;
        assert_eq!(admin_right("/admin/tags"), Some(Right::Tags));
        assert_eq!(admin_right("/admin/tags/orders/decode/5"), Some(Right::Tags));
        assert_eq!(admin_right("/admin/tagsx"), Some(Right::Cluster));
        assert_eq!(admin_right("/admin/tokens"), None);
        assert_eq!(admin_right("/admin/tokens/00000000000000ff/rotate"), None);
        assert_eq!(admin_right("/admin/tokensx"), Some(Right::Cluster));
        for p in ["/admin/audit", "/admin/cluster/learners", "/admin/allocations", "/admin/fault/clock", "/admin"] {
            assert_eq!(admin_right(p), Some(Right::Cluster), "{p}");
        }
    }
}
