//! [`ClientBuilder`]: node URLs, admin token, timeouts, retries, TLS settings.
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderValue;

use crate::client::{Client, Inner, Policy};
use crate::error::BuildError;
use crate::own_creates::OwnCreates;
use crate::retry::Backoff;
use crate::tls::TlsOptions;
use crate::transport::Transport;

/// Configures a [`Client`]; made by [`Client::builder`].
///
/// Defaults: no token, 5 s per attempt, 15 s in total, 3 retries, backoff from 50 ms doubling
/// to at most 1 s (with jitter); for `https://` nodes, the platform's root certificates and no
/// client certificate.
///
/// The TLS setters only record what to use: files are read, and TLS errors reported, by
/// [`ClientBuilder::build`].
#[derive(Clone)]
pub struct ClientBuilder {
    nodes: Vec<String>,
    token: Option<String>,
    policy: Policy,
    tls: TlsOptions,
    own_creates: OwnCreates,
    settlement_key: Option<[u8; 32]>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("nodes", &self.nodes.len())
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("policy", &self.policy)
            .field("tls", &self.tls)
            .finish()
    }
}

impl ClientBuilder {
    pub(crate) fn new(nodes: Vec<String>) -> Self {
        ClientBuilder {
            nodes,
            token: None,
            policy: Policy {
                timeout: Duration::from_secs(5),
                deadline: Duration::from_secs(15),
                retries: 3,
                backoff: Backoff { base: Duration::from_millis(50), cap: Duration::from_secs(1) },
            },
            tls: TlsOptions::new(),
            own_creates: OwnCreates::default(),
            settlement_key: None,
        }
    }

    /// Share the memory of recent creates with other clients (each client reads its own
    /// creates: see [`crate::own_creates`]). An application that builds one client per node
    /// passes the same [`OwnCreates`] to each, or [`Client::own_creates`] of the first, so a
    /// tag created through one is retried through a `tag_not_found` on another. Default: a
    /// memory of its own.
    pub fn own_creates(mut self, memory: OwnCreates) -> Self {
        self.own_creates = memory;
        self
    }

    /// The key this client derives its gapless settlement secrets from when it has no token
    /// (see [`crate::gapless`]): a client built again with the same key repeats, confirms and
    /// voids the numbers an earlier one took. Keep it like a password. Default: a random key
    /// per client, so only this client (and its clones) settles its numbers.
    pub fn settlement_key(mut self, key: [u8; 32]) -> Self {
        self.settlement_key = Some(key);
        self
    }

    /// Trust only the CA certificate(s) in this PEM text for `https://` nodes.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls = self.tls.ca_pem(pem);
        self
    }

    /// Trust only the CA certificate(s) in this PEM file for `https://` nodes.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls = self.tls.ca_file(path);
        self
    }

    /// Present this certificate chain and private key (PEM texts) to nodes that ask for one.
    pub fn client_cert_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.tls = self.tls.client_cert_pem(cert, key);
        self
    }

    /// Present the certificate chain and private key in these PEM files.
    pub fn client_cert_files(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls = self.tls.client_cert_files(cert, key);
        self
    }

    /// All TLS settings at once (replacing any set before).
    pub fn tls(mut self, tls: TlsOptions) -> Self {
        self.tls = tls;
        self
    }

    /// The admin token, sent as `Authorization: Bearer <token>` on every request.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// [`ClientBuilder::token`] when `Some`; no token when `None`.
    pub fn maybe_token(mut self, token: Option<String>) -> Self {
        self.token = token;
        self
    }

    /// Longest wait for one attempt's complete answer.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.policy.timeout = timeout;
        self
    }

    /// Longest time one call may take over all its attempts and backoffs.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.policy.deadline = deadline;
        self
    }

    /// Attempts after the first, on errors worth retrying (0: one attempt only).
    pub fn retries(mut self, retries: u32) -> Self {
        self.policy.retries = retries;
        self
    }

    /// Backoff before retry `n`: a random time between half and all of
    /// `min(cap, base * 2^n)`.
    pub fn backoff(mut self, base: Duration, cap: Duration) -> Self {
        self.policy.backoff = Backoff { base, cap };
        self
    }

    /// Checks the URLs (`http://host:port` or `https://host:port`, no path, query or
    /// credentials) and the token, and reads the TLS files. Without a CA, `https://` nodes are
    /// checked against the platform's root certificates: none loadable is an error.
    pub fn build(self) -> Result<Client, BuildError> {
        if self.nodes.is_empty() {
            return Err(BuildError::NoNodes);
        }
        let nodes = self.nodes.iter().map(|u| parse_base(u)).collect::<Result<Vec<_>, _>>()?;
        let auth = match self.token {
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| BuildError::InvalidToken)?;
                v.set_sensitive(true);
                Some(v)
            }
            None => None,
        };
        // Without https:// nodes the TLS layer is never used, but given files are still
        // checked (a mistake is reported now, not when a node turns TLS on).
        let https = nodes.iter().any(|n| n.starts_with("https://"));
        let tls = self.tls.config(https)?;
        Ok(Client {
            inner: Arc::new(Inner {
                nodes,
                auth,
                policy: self.policy,
                transport: Transport::new(tls),
                preferred: AtomicUsize::new(0),
                own_creates: self.own_creates,
                settlement_key: self.settlement_key.unwrap_or_else(rand::random),
            }),
        })
    }
}

/// `http://host:port[/]` → `http://host:port` (and the same for `https://`).
fn parse_base(url: &str) -> Result<String, BuildError> {
    let trimmed = url.trim().trim_end_matches('/');
    let invalid = |reason| BuildError::InvalidUrl { url: Some(url.to_string()), reason };
    if trimmed.contains('@') {
        return Err(BuildError::InvalidUrl { url: None, reason: "credentials in the URL are not supported" });
    }
    let uri: hyper::Uri = trimmed.parse().map_err(|_| invalid("not a URL"))?;
    let scheme = match uri.scheme_str() {
        Some(s @ ("http" | "https")) => s,
        _ => return Err(invalid("expected http://host:port or https://host:port")),
    };
    let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
    if authority.host().is_empty() {
        return Err(invalid("no host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(invalid("a node URL has no path or query"));
    }
    Ok(format!("{scheme}://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_urls_are_checked() {
        assert_eq!(parse_base("http://127.0.0.1:8080/").unwrap(), "http://127.0.0.1:8080");
        assert_eq!(parse_base(" http://leaf1:8080 ").unwrap(), "http://leaf1:8080");
        assert_eq!(parse_base("http://leaf1").unwrap(), "http://leaf1");
        assert_eq!(parse_base("https://leaf1:8443/").unwrap(), "https://leaf1:8443");
        assert_eq!(parse_base("https://[::1]:8443").unwrap(), "https://[::1]:8443");
        for bad in
            ["", "127.0.0.1:8080", "ftp://x", "http://", "https://", "http://h:1/api", "https://h:1?x=1", "HTTPS:/h"]
        {
            assert!(matches!(parse_base(bad), Err(BuildError::InvalidUrl { url: Some(_), .. })), "{bad:?}");
        }
        let e = parse_base("http://admin:hunter2@leaf1:8080").unwrap_err();
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn builds_check_nodes_and_token() {
        assert_eq!(Client::builder(Vec::<String>::new()).build().unwrap_err(), BuildError::NoNodes);
        let e = Client::builder(["http://h:1"]).token("bad\ntoken").build().unwrap_err();
        assert_eq!(e, BuildError::InvalidToken);
        assert!(!e.to_string().contains("token\n"));
        let b = Client::builder(["http://h:1"]).token("s3cret-token");
        assert!(!format!("{b:?}").contains("s3cret"));
    }

    #[test]
    fn tls_settings_are_checked_by_build_even_for_http_nodes() {
        // A CA file that does not exist: reported, with its path, for http:// nodes too.
        let e = Client::builder(["http://h:1"]).ca_file("/nonexistent/ca.pem").build().unwrap_err();
        assert!(matches!(&e, BuildError::Tls(crate::tls::TlsError::Read { .. })), "{e:?}");
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
        // A key given in memory never shows in Debug.
        let b = Client::builder(["https://h:1"]).client_cert_pem("CERT", "-----BEGIN PRIVATE KEY-----\nS3CRETKEY");
        assert!(!format!("{b:?}").contains("S3CRETKEY"), "{b:?}");
        let e = b.build().unwrap_err();
        assert!(!e.to_string().contains("S3CRETKEY"), "{e}");
    }
}
