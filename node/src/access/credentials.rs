//! The credential checks, without any wire format: who a connection is ([`ConnInfo`]), the
//! admin bearer token (or loopback without one), admin client certificates, the cluster secret
//! and peer node certificates, and where a browser's request comes from ([`Provenance`]).
//! Secrets are compared in constant time (of neither the secret's nor the guess's length), and
//! no error holds one.
//! [`crate::service::auth`] combines them into the verdict on a call; the HTTP auth layer and
//! the gRPC admin service ask it.
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use leaf_api::identity::CertIdentity;
use leaf_api::ErrorCode;
use subtle::ConstantTimeEq;

use crate::config::is_loopback;
use crate::error::ApiError;
use crate::raft::network::SECRET_HEADER;

/// Where a request came in (token-less admin stays on loopback) and whom the connection's
/// verified client certificate names. Each connection's [`AuthLayer`] holds it.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    pub local: SocketAddr,
    pub peer: SocketAddr,
    /// From the TLS handshake ([`crate::tls::identity`]); `None` without TLS or certificate.
    pub identity: Option<Arc<CertIdentity>>,
}

/// Whether `given` is `secret`. Both are hashed (SHA-256) before the constant-time comparison,
/// so the time taken tells neither the secret's length nor how much of a guess was right.
pub fn secret_eq(given: &[u8], secret: &[u8]) -> bool {
    let digest = |b: &[u8]| ring::digest::digest(&ring::digest::SHA256, b);
    bool::from(digest(given).as_ref().ct_eq(digest(secret).as_ref()))
}

/// Where a request says it comes from and is addressed to: its `Origin` and its `Host` (or
/// HTTP/2 authority). A browser always sends `Host`, sends `Origin` on cross-site requests,
/// and a web page cannot forge either; other clients need not send them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Provenance<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
}

/// At most this much of a caller's `Origin` or `Host` is quoted back in an error.
const QUOTED: usize = 64;

fn quoted(s: &str) -> String {
    s.chars().take(QUOTED).collect()
}

/// Admin endpoints refuse requests that a web page of another origin made (cross-site request
/// forgery): an `Origin` that is not the address the request was sent to. Same-origin
/// requests (the node's own `/ui`) and clients that send no `Origin` pass.
pub fn check_origin(p: Provenance<'_>) -> Result<(), ApiError> {
    let Some(origin) = p.origin else { return Ok(()) };
    let authority = origin.split_once("://").map(|(_, a)| a);
    match (authority, p.host) {
        (Some(a), Some(host)) if !a.is_empty() && a.eq_ignore_ascii_case(host) => Ok(()),
        _ => Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "admin endpoints refuse cross-origin requests: Origin {:?} is not this node's address",
                quoted(origin)
            ),
        )),
    }
}

/// Whether a `Host` value names this machine's loopback (`localhost`, `127.0.0.0/8`, `::1`),
/// with or without a port.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((name, port)) if port.is_empty() || port.strip_prefix(':').is_some_and(is_port) => name,
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return false,
            None => host,
        },
    };
    name.eq_ignore_ascii_case("localhost") || name.parse::<IpAddr>().is_ok_and(is_loopback)
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Whether the connection's certificate names a client allowed on `/admin`.
pub fn admin_client(allowed: &[String], identity: Option<&CertIdentity>) -> bool {
    matches!(identity, Some(CertIdentity::Client(name)) if allowed.iter().any(|a| a == name))
}

/// The address a request came from, for the handlers of the ID routes (the anonymous quota);
/// the auth layer puts it into every request it lets through that is neither admin nor internal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

/// The member node whose certificate made an internal call (with TLS): Raft messages must
/// come from the node they name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerNode(pub u64);

/// With TLS, `/internal/*` needs a certificate the cluster CA signed for a node that
/// `is_member` accepts: a current member, or anyone while this node has no cluster yet.
pub fn check_peer_node(identity: Option<&CertIdentity>, is_member: impl Fn(u64) -> bool) -> Result<PeerNode, ApiError> {
    match identity {
        Some(CertIdentity::Node(id)) if is_member(*id) => Ok(PeerNode(*id)),
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
        Some(secret) => secret_eq(given.unwrap_or_default(), secret.as_bytes()),
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
/// The token is compared in constant time. A credential that is sent is always checked: on a
/// node without an admin token, a request that carries one (and is not a valid scoped token,
/// which the caller tried first) is refused, not waved through as loopback. Token-less
/// loopback admin also needs the request addressed to a loopback name, so that a web page
/// whose domain was rebound to 127.0.0.1 cannot reach it. Answers who it was.
pub fn check_admin(
    token: Option<&str>,
    authorization: Option<&str>,
    conn: &ConnInfo,
    host: Option<&str>,
) -> Result<leaf_api::audit::Actor, ApiError> {
    match token {
        Some(token) => {
            let given = authorization.and_then(|v| v.strip_prefix("Bearer ")).unwrap_or("");
            if secret_eq(given.as_bytes(), token.as_bytes()) {
                Ok(leaf_api::audit::Actor::AdminToken)
            } else {
                Err(ApiError::new(
                    ErrorCode::Unauthorized,
                    "admin endpoints need 'Authorization: Bearer <admin_token>'",
                ))
            }
        }
        None if authorization.is_some() => Err(ApiError::new(
            ErrorCode::Unauthorized,
            "the credential sent is not a valid token (this node has no admin_token, and it is not a \
             scoped token's bearer); send none for loopback admin",
        )),
        None if is_loopback(conn.local.ip()) && is_loopback(conn.peer.ip()) => match host {
            Some(host) if !is_loopback_host(host) => Err(ApiError::new(
                ErrorCode::Forbidden,
                format!(
                    "no admin_token is configured, so admin endpoints answer only requests addressed to \
                     localhost or a loopback address, not {:?}; set auth.admin_token to use another name",
                    quoted(host)
                ),
            )),
            _ => Ok(leaf_api::audit::Actor::Loopback),
        },
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
        assert!(check_admin(None, None, &lo, None).is_ok());
        let public = conn("10.1.2.3:8080", "10.1.2.4:5000");
        assert_eq!(check_admin(None, None, &public, None).unwrap_err().code, ErrorCode::Forbidden);
        // A token-less node bound to 0.0.0.0 still refuses remote peers.
        let mixed = conn("10.1.2.3:8080", "127.0.0.1:5000");
        assert_eq!(check_admin(None, None, &mixed, None).unwrap_err().code, ErrorCode::Forbidden);
        assert_eq!(check_admin(None, None, &ConnInfo::unknown(), None).unwrap_err().code, ErrorCode::Forbidden);
    }

    #[test]
    fn a_sent_credential_is_checked_even_where_none_is_needed() {
        let lo = conn("127.0.0.1:8080", "127.0.0.1:5000");
        for sent in ["Bearer x", "Bearer ", "", "Basic dXNlcjpwdw=="] {
            assert_eq!(check_admin(None, Some(sent), &lo, None).unwrap_err().code, ErrorCode::Unauthorized, "{sent:?}");
        }
    }

    #[test]
    fn token_less_loopback_admin_needs_a_loopback_host() {
        let lo = conn("127.0.0.1:8080", "127.0.0.1:5000");
        for host in ["localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:8080", "127.9.9.9:1", "[::1]", "[::1]:8080"]
        {
            assert!(check_admin(None, None, &lo, Some(host)).is_ok(), "{host}");
        }
        // DNS rebinding: a page of evil.example whose name now resolves to 127.0.0.1.
        for host in
            ["evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "[::1]x", "::1", ""]
        {
            let e = check_admin(None, None, &lo, Some(host)).unwrap_err();
            assert_eq!(e.code, ErrorCode::Forbidden, "{host}");
        }
        let long = "x".repeat(10_000);
        assert!(check_admin(None, None, &lo, Some(&long)).unwrap_err().message.len() < 400, "quoted, not echoed whole");
        // With a token the name does not matter: the token is the credential.
        let tok = Some("0123456789abcdef");
        assert!(check_admin(tok, Some("Bearer 0123456789abcdef"), &lo, Some("leaf.internal")).is_ok());
    }

    #[test]
    fn cross_origin_admin_requests_are_refused() {
        let p = |origin, host| Provenance { origin, host };
        assert!(check_origin(p(None, Some("127.0.0.1:8080"))).is_ok(), "no Origin: not a browser's cross-site request");
        assert!(check_origin(p(Some("http://127.0.0.1:8080"), Some("127.0.0.1:8080"))).is_ok());
        assert!(check_origin(p(Some("https://Leaf.Example"), Some("leaf.example"))).is_ok());
        for (origin, host) in [
            (Some("https://evil.example"), Some("127.0.0.1:8080")),
            (Some("null"), Some("127.0.0.1:8080")),
            (Some("http://127.0.0.1:8081"), Some("127.0.0.1:8080")),
            (Some("http://127.0.0.1:8080"), None),
            (Some("http://"), Some("")),
        ] {
            assert_eq!(check_origin(p(origin, host)).unwrap_err().code, ErrorCode::Forbidden, "{origin:?} {host:?}");
        }
    }

    #[test]
    fn secrets_compare_whatever_their_lengths() {
        assert!(secret_eq(b"s3cret", b"s3cret"));
        assert!(!secret_eq(b"s3cre", b"s3cret"));
        assert!(!secret_eq(b"s3creT", b"s3cret"));
        assert!(!secret_eq(b"", b"s3cret"));
        assert!(!secret_eq(&[b's'; 4096], b"s3cret"));
    }

    #[test]
    fn admin_with_token_needs_the_exact_bearer() {
        let tok = Some("0123456789abcdef");
        let public = conn("10.1.2.3:8080", "10.1.2.4:5000");
        assert!(check_admin(tok, Some("Bearer 0123456789abcdef"), &public, None).is_ok());
        for bad in [
            None,
            Some(""),
            Some("Bearer "),
            Some("Bearer 0123456789abcde"),
            Some("Bearer 0123456789abcdeff"),
            Some("0123456789abcdef"),
            Some("Basic 0123456789abcdef"),
        ] {
            assert_eq!(check_admin(tok, bad, &public, None).unwrap_err().code, ErrorCode::Unauthorized, "{bad:?}");
        }
        // The token is required on loopback too.
        let lo = conn("127.0.0.1:8080", "127.0.0.1:5000");
        assert_eq!(check_admin(tok, None, &lo, None).unwrap_err().code, ErrorCode::Unauthorized);
    }

    #[test]
    fn internal_needs_the_exact_secret() {
        assert!(check_cluster_secret(Some("s3cret"), Some(b"s3cret")).is_ok());
        for bad in [None, Some(&b""[..]), Some(b"s3cre"), Some(b"s3cret!")] {
            assert_eq!(check_cluster_secret(Some("s3cret"), bad).unwrap_err().code, ErrorCode::Unauthorized);
        }
        assert!(check_cluster_secret(None, Some(b"")).is_err(), "a node without a secret refuses all");
    }
}
