//! [`Config::validate`]: the checks of the top-level keys and those spanning sections; each
//! section checks its own keys (its `validate`), called from here.
use super::{bootstrap, check_host_port, is_loopback, Config, ConfigError};

/// Whether `secret` is usable as an admin token or cluster secret: at least 16 characters of
/// visible ASCII (both travel in HTTP headers).
fn secret_ok(secret: &str) -> bool {
    secret.len() >= 16 && secret.bytes().all(|b| b.is_ascii_graphic())
}

impl Config {
    /// Checks every field; reports all problems at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut errs = Vec::new();
        self.validate_identity(&mut errs);
        self.validate_secrets(&mut errs);
        self.tls.validate(&mut errs);
        self.grpc.validate(&mut errs);
        self.forecast.validate(&mut errs);
        self.metrics.validate(&mut errs);
        self.auth.validate(&mut errs);
        self.audit.validate(&mut errs);
        self.backup.validate(&mut errs);
        self.region.validate(&mut errs);
        self.validate_plaintext_peers(&mut errs);
        if let Some(a) = &self.advertise_addr {
            if let Err(e) = check_host_port(a) {
                errs.push(format!("advertise_addr: {e}"));
            }
        }
        bootstrap::validate(&self.bootstrap_tags, &mut errs);
        self.segment.validate(&mut errs);
        self.raft.validate(&mut errs);
        self.http.validate(&mut errs);
        self.snowflake.validate(&mut errs);
        self.fault.validate(&mut errs);
        if errs.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(errs))
        }
    }

    /// `node_id` and `data_dir`.
    fn validate_identity(&self, errs: &mut Vec<String>) {
        if self.node_id == 0 {
            errs.push("node_id must be at least 1".to_string());
        }
        if self.data_dir.as_os_str().is_empty() {
            errs.push("data_dir must not be empty".to_string());
        }
    }

    /// `admin_token` and `cluster_secret`: well-formed, and present where the listener or
    /// `peers` need them. No message shows a secret's value.
    fn validate_secrets(&self, errs: &mut Vec<String>) {
        if self.admin_token().is_some_and(|t| !secret_ok(t)) {
            errs.push("admin_token must be at least 16 visible ASCII characters".to_string());
        }
        if self.admin_token.is_none() && !is_loopback(self.http_addr.ip()) {
            errs.push(format!(
                "admin_token is required because http_addr {} is not a loopback address: without it, anything \
                 that reaches this node (a reverse proxy or sidecar on the host included) could change tags and \
                 membership. Set admin_token (LEAF_ADMIN_TOKEN, e.g. `openssl rand -hex 24`) or listen on 127.0.0.1",
                self.http_addr
            ));
        }
        match self.cluster_secret() {
            Some(t) if !secret_ok(t) => {
                errs.push("cluster_secret must be at least 16 visible ASCII characters".to_string())
            }
            None if !self.peers.is_empty() => {
                errs.push("cluster_secret is required when peers are set (it authenticates Raft traffic)".to_string())
            }
            _ => {}
        }
    }

    /// A node in a cluster (it has a `cluster_secret`) on a non-loopback listener needs TLS, or
    /// `insecure_plaintext_peers` said out loud.
    fn validate_plaintext_peers(&self, errs: &mut Vec<String>) {
        if self.cluster_secret.is_some()
            && !self.tls.enabled()
            && !is_loopback(self.http_addr.ip())
            && !self.insecure_plaintext_peers
        {
            errs.push(format!(
                "http_addr {} is not a loopback address and TLS is off: Raft traffic, the cluster secret and admin \
                 tokens would cross the network in clear. Configure [tls] (`leaf certs` makes a CA and \
                 certificates; deploy/README.md) or, on a network you trust completely, pass \
                 --insecure-plaintext-peers",
                self.http_addr
            ));
        }
    }
}
