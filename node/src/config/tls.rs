//! `[tls]`: HTTPS for clients and mutual TLS between nodes, on the node's one listener.
use std::path::PathBuf;

use leaf_api::identity::validate_client_name;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// TLS of the node's listener and of its connections to peers. Off unless `cert`, `key` and
/// `ca` are all set (`leaf certs` makes a development CA and certificates). With TLS on:
/// - clients connect with `https://`; a client may present a certificate (mTLS), which is
///   required when `require_client_cert` is set;
/// - `/internal/*` (Raft, forwarding, clock RPCs) is accepted only from a connection whose
///   certificate `ca` signed for a node (`urn:leaf:node:<id>`) that is a member, a listed peer,
///   or any node while this node is not a member itself yet (no cluster, or a learner still
///   catching up); the cluster secret is still required;
/// - the node dials its peers with `https://`, verifying that `ca` signed their certificate
///   for the address it dials, and presents its own certificate.
///
/// The files are re-read when they change (checked every `reload_interval_ms`) and on
/// SIGHUP; new connections use the new files, open ones keep theirs. Files that fail to load
/// (a half-written key, a key that does not match the certificate) leave the old ones in use.
///
/// `cert` and `key` may contain [`NODE_ID_PLACEHOLDER`] (`{node_id}`), replaced by the node's
/// ID when the configuration is loaded: one setting for every pod of a Kubernetes StatefulSet
/// (`--node-id-from-hostname`), such as `/tls/node-{node_id}.pem`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate chain of this node, its own certificate first. Its subject alternative
    /// names must hold `urn:leaf:node:<node_id>` and the names or addresses peers and clients
    /// dial it at. `{node_id}` in the path stands for the node's ID. Default none (TLS off).
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert` (PKCS#8, PKCS#1 or SEC1). `{node_id}` in the path stands for
    /// the node's ID. Default none.
    pub key: Option<PathBuf>,
    /// PEM certificate(s) of the cluster CA: peers' certificates must chain to it, in both
    /// directions. Default none.
    pub ca: Option<PathBuf>,
    /// PEM certificate(s) of the CA that signs client certificates. Default: `ca`.
    pub client_ca: Option<PathBuf>,
    /// Client names (`urn:leaf:client:<name>` certificates signed by the client CA) allowed to use
    /// `/admin/*` without the bearer token. Default empty.
    pub admin_clients: Vec<String>,
    /// Refuse any connection that presents no valid certificate (the public API included).
    /// Default `false`: a client certificate is optional outside `/internal/*`.
    pub require_client_cert: bool,
    /// How often the files are checked for changes. From 100 to 3600000; default `2000` ms.
    pub reload_interval_ms: u64,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            cert: None,
            key: None,
            ca: None,
            client_ca: None,
            admin_clients: Vec::new(),
            require_client_cert: false,
            reload_interval_ms: 2000,
        }
    }
}

/// What `tls.cert` and `tls.key` may hold in place of the node's ID.
pub const NODE_ID_PLACEHOLDER: &str = "{node_id}";

impl TlsConfig {
    /// Replaces [`NODE_ID_PLACEHOLDER`] in `cert` and `key` by `node_id` (paths that are not
    /// UTF-8 are left as they are).
    pub(super) fn expand_node_id(&mut self, node_id: u64) {
        for path in [&mut self.cert, &mut self.key].into_iter().flatten() {
            if let Some(text) = path.to_str().filter(|t| t.contains(NODE_ID_PLACEHOLDER)) {
                *path = PathBuf::from(text.replace(NODE_ID_PLACEHOLDER, &node_id.to_string()));
            }
        }
    }

    /// Whether TLS is on (`cert`, `key` and `ca` set; [`TlsConfig::validate`] refuses a part).
    pub fn enabled(&self) -> bool {
        self.cert.is_some() && self.key.is_some() && self.ca.is_some()
    }

    /// Checks the section, pushing one message per problem.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        let set = [self.cert.is_some(), self.key.is_some(), self.ca.is_some()];
        if set.iter().any(|s| *s) && !set.iter().all(|s| *s) {
            errs.push("tls.cert, tls.key and tls.ca must be set together (leaf certs makes them)".to_string());
        }
        for (key, path) in [("cert", &self.cert), ("key", &self.key), ("ca", &self.ca), ("client_ca", &self.client_ca)]
        {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                errs.push(format!("tls.{key} must not be empty"));
            }
        }
        let client_settings = self.client_ca.is_some() || !self.admin_clients.is_empty() || self.require_client_cert;
        if !self.enabled() && client_settings {
            errs.push(
                "tls.client_ca, tls.admin_clients and tls.require_client_cert need TLS on (tls.cert, tls.key, tls.ca)"
                    .to_string(),
            );
        }
        for name in &self.admin_clients {
            if let Err(e) = validate_client_name(name) {
                errs.push(format!("tls.admin_clients: {name:?}: {e}"));
            }
        }
        if !(100..=3_600_000).contains(&self.reload_interval_ms) {
            errs.push("tls.reload_interval_ms must be from 100 to 3600000".to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(t: &TlsConfig) -> Vec<String> {
        let mut errs = Vec::new();
        t.validate(&mut errs);
        errs
    }

    #[test]
    fn all_three_files_or_none() {
        assert!(errors(&TlsConfig::default()).is_empty());
        let full = TlsConfig {
            cert: Some("n.pem".into()),
            key: Some("n-key.pem".into()),
            ca: Some("ca.pem".into()),
            ..TlsConfig::default()
        };
        assert!(full.enabled());
        assert!(errors(&full).is_empty());
        let half = TlsConfig { ca: None, ..full.clone() };
        assert!(!half.enabled());
        assert_eq!(errors(&half).len(), 1, "{:?}", errors(&half));
        let empty = TlsConfig { key: Some("".into()), ..full.clone() };
        assert_eq!(errors(&empty).len(), 1);
    }

    #[test]
    fn the_node_id_placeholder_is_expanded_in_cert_and_key_only() {
        let mut t = TlsConfig {
            cert: Some("/tls/node-{node_id}.pem".into()),
            key: Some("/tls/{node_id}/node-{node_id}-key.pem".into()),
            ca: Some("/tls/{node_id}-ca.pem".into()),
            client_ca: Some("/tls/{node_id}-client-ca.pem".into()),
            ..TlsConfig::default()
        };
        t.expand_node_id(12);
        assert_eq!(t.cert, Some("/tls/node-12.pem".into()));
        assert_eq!(t.key, Some("/tls/12/node-12-key.pem".into()));
        assert_eq!(t.ca, Some("/tls/{node_id}-ca.pem".into()), "the CA is the same for every node");
        assert_eq!(t.client_ca, Some("/tls/{node_id}-client-ca.pem".into()));
        let mut plain = TlsConfig { cert: Some("/tls/node-1.pem".into()), ..TlsConfig::default() };
        plain.expand_node_id(3);
        assert_eq!(plain.cert, Some("/tls/node-1.pem".into()));
        assert_eq!(plain.key, None);
    }

    #[test]
    fn client_settings_need_tls_and_valid_names() {
        let off = TlsConfig { admin_clients: vec!["ops".into()], ..TlsConfig::default() };
        assert_eq!(errors(&off).len(), 1);
        let on = TlsConfig {
            cert: Some("n.pem".into()),
            key: Some("n-key.pem".into()),
            ca: Some("ca.pem".into()),
            admin_clients: vec!["ops".into(), "a b".into()],
            reload_interval_ms: 10,
            ..TlsConfig::default()
        };
        assert_eq!(errors(&on).len(), 2, "{:?}", errors(&on));
    }
}
