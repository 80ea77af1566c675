//! [`ClientBuilder`]: node URLs, admin token, timeouts, retries.
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::HeaderValue;

use crate::client::{Client, Inner, Policy};
use crate::error::BuildError;
use crate::retry::Backoff;
use crate::transport::Transport;

/// Configures a [`Client`]; made by [`Client::builder`].
///
/// Defaults: no token, 5 s per attempt, 15 s in total, 3 retries, backoff from 50 ms doubling
/// to at most 1 s (with jitter).
#[derive(Clone)]
pub struct ClientBuilder {
    nodes: Vec<String>,
    token: Option<String>,
    policy: Policy,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("nodes", &self.nodes.len())
            .field("token", &self.token.as_ref().map(|_| "(set)"))
            .field("policy", &self.policy)
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
        }
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

    /// Checks the URLs (`http://host:port`, no path, query or credentials) and the token.
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
        Ok(Client {
            inner: Arc::new(Inner {
                nodes,
                auth,
                policy: self.policy,
                transport: Transport::new(),
                preferred: AtomicUsize::new(0),
            }),
        })
    }
}

/// `http://host:port[/]` → `http://host:port`.
fn parse_base(url: &str) -> Result<String, BuildError> {
    let trimmed = url.trim().trim_end_matches('/');
    let invalid = |reason| BuildError::InvalidUrl { url: Some(url.to_string()), reason };
    if trimmed.contains('@') {
        return Err(BuildError::InvalidUrl { url: None, reason: "credentials in the URL are not supported" });
    }
    let uri: hyper::Uri = trimmed.parse().map_err(|_| invalid("not a URL"))?;
    if uri.scheme_str() != Some("http") {
        return Err(invalid("expected http://host:port"));
    }
    let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
    if authority.host().is_empty() {
        return Err(invalid("no host"));
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(invalid("a node URL has no path or query"));
    }
    Ok(format!("http://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_urls_are_checked() {
        assert_eq!(parse_base("http://127.0.0.1:8080/").unwrap(), "http://127.0.0.1:8080");
        assert_eq!(parse_base(" http://leaf1:8080 ").unwrap(), "http://leaf1:8080");
        assert_eq!(parse_base("http://leaf1").unwrap(), "http://leaf1");
        for bad in
            ["", "127.0.0.1:8080", "https://leaf1:8080", "ftp://x", "http://", "http://h:1/api", "http://h:1?x=1"]
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
}
