//! The credential checks, without any wire format: who a connection is ([`ConnInfo`]), the
//! admin bearer token (or loopback without one), admin client certificates, the cluster secret
//! and peer node certificates. Secrets are compared in constant time, and no error holds one.
//! [`crate::service::auth`] combines them into the verdict on a call; the HTTP auth layer and
//! the gRPC admin service ask it.
use std::net::SocketAddr;
use std::sync::Arc;

use leaf_api::identity::CertIdentity;
use leaf_api::ErrorCode;
use subtle::ConstantTimeEq;

use crate::config::is_loopback;
use crate::raft::network::SECRET_HEADER;
use crate::service::ApiError;

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

/// Whether the connection's certificate names a client allowed on `/admin`.
pub fn admin_client(allowed: &[String], identity: Option<&CertIdentity>) -> bool {
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

impl ConnInfo {
    /// A connection of unknown origin: never treated as loopback.
    #[cfg(test)]
    pub fn unknown() -> Self {
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
