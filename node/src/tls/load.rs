//! Reads `[tls]`'s PEM files into the rustls configs of one generation: the listener's
//! server config (client certificates verified against the cluster CA and the client CA,
//! optional unless `tls.require_client_cert`), the client config peers are dialled with
//! (the cluster CA as the only root, this node's certificate as its client certificate), and
//! the two verifiers [`super::identity`] tells nodes and clients apart with.
//!
//! Every problem is reported with the `[tls]` key and file it concerns, never with key
//! material. A certificate that does not speak for this node, is not signed by the cluster
//! CA, or does not match its key is refused here, at start or reload, rather than by every
//! peer later.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use leaf_api::identity::CertIdentity;
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use crate::config::TlsConfig;

/// One generation of the node's TLS configs, built from the files as they were read.
pub struct Loaded {
    /// The listener's config.
    pub server: Arc<ServerConfig>,
    /// The config peers are dialled with.
    pub client: Arc<ClientConfig>,
    /// Verifies a presented certificate against the cluster CA only (nodes).
    pub(super) node_verifier: Arc<dyn ClientCertVerifier>,
    /// Verifies a presented certificate against the client CA (`client_ca`, else `ca`).
    pub(super) client_verifier: Arc<dyn ClientCertVerifier>,
    /// Verifies a dialled peer's certificate against the cluster CA and the dialled name.
    server_verifier: Arc<WebPkiServerVerifier>,
    /// Expiry of this node's certificate, Unix seconds.
    pub not_after: i64,
}

/// Why the TLS files cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("tls.{key}: cannot read {}: {message}", path.display())]
    Read { key: &'static str, path: PathBuf, message: String },
    #[error("tls.{key}: {} holds no {what}", path.display())]
    Empty { key: &'static str, path: PathBuf, what: &'static str },
    #[error("tls.cert {}: {message}", path.display())]
    Cert { path: PathBuf, message: String },
    #[error("tls.key does not belong to the certificate in tls.cert")]
    KeyMismatch,
    #[error("tls: {0}")]
    Config(String),
}

/// The one crypto provider of the node (ring), preferring AES-128-GCM: as safe for TLS 1.3 as
/// AES-256 (it is the suite every TLS 1.3 peer must support) and 4 rounds in 14 cheaper per
/// block, which the per-request cost of small ID answers notices.
pub fn provider() -> Arc<CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|s| s.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    Arc::new(provider)
}

impl Loaded {
    /// Reads the files of `config` (TLS on) for node `node_id`.
    pub fn from_files(config: &TlsConfig, node_id: u64) -> Result<Loaded, TlsError> {
        let (Some(cert), Some(key), Some(ca)) = (&config.cert, &config.key, &config.ca) else {
            return Err(TlsError::Config("tls.cert, tls.key and tls.ca must all be set".into()));
        };
        let chain = read_certs("cert", cert)?;
        let key = read_key(key)?;
        let ca_roots = roots("ca", ca)?;
        let client_roots = match &config.client_ca {
            Some(path) => roots("client_ca", path)?,
            None => ca_roots.clone(),
        };
        let provider = provider();
        let rustls_err = |e: rustls::Error| TlsError::Config(e.to_string());
        let verifier = |roots: &RootCertStore, optional: bool| {
            let b = WebPkiClientVerifier::builder_with_provider(Arc::new(roots.clone()), provider.clone());
            let b = if optional { b.allow_unauthenticated() } else { b };
            b.build().map_err(|e| TlsError::Config(format!("client certificate verifier: {e}")))
        };
        let node_verifier = verifier(&ca_roots, false)?;
        let client_verifier = verifier(&client_roots, false)?;
        let mut either = ca_roots.clone();
        if config.client_ca.is_some() {
            for root in client_roots.roots.iter() {
                either.roots.push(root.clone());
            }
        }
        let listener_verifier = verifier(&either, !config.require_client_cert)?;

        // This node's certificate: for this node, signed by the cluster CA, matching its key.
        let server_verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(ca_roots.clone()), provider.clone())
            .build()
            .map_err(|e| TlsError::Config(format!("server certificate verifier: {e}")))?;
        let not_after = check_own_cert(cert, &chain, node_id, &node_verifier, &server_verifier)?;
        let signing = provider.key_provider.load_private_key(key.clone_key()).map_err(|_| TlsError::KeyMismatch)?;
        match CertifiedKey::new(chain.clone(), signing).keys_match() {
            Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
            Err(_) => return Err(TlsError::KeyMismatch),
        }

        let mut server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(rustls_err)?
            .with_client_cert_verifier(listener_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| match e {
                rustls::Error::InconsistentKeys(_) => TlsError::KeyMismatch,
                e => rustls_err(e),
            })?;
        // HTTP/1.1 first: a client offering both (curl, browsers) keeps HTTP/1.1 as before; gRPC
        // clients offer only `h2` and get HTTP/2 (see `http::proto`).
        server.alpn_protocols = vec![b"http/1.1".to_vec(), b"h2".to_vec()];
        // Our order (the provider's), not the client's: clients tend to ask for AES-256 first.
        server.ignore_client_order = true;
        // Fresh ticket keys and an empty cache per generation (see `resume`).
        super::resume::enable(&mut server)?;
        let client = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(rustls_err)?
            .with_root_certificates(ca_roots)
            .with_client_auth_cert(chain, key)
            .map_err(rustls_err)?;
        Ok(Loaded {
            server: Arc::new(server),
            client: Arc::new(client),
            node_verifier,
            client_verifier,
            server_verifier,
            not_after,
        })
    }

    /// The config to dial member `node` with: [`Loaded::client`], and the dialled peer's
    /// certificate must also speak for `node` ([`super::identity::NodeBound`]), so another
    /// member, or a removed one, at the address cannot answer in its name.
    pub fn client_for(&self, node: u64) -> ClientConfig {
        let mut config = (*self.client).clone();
        let bound = super::identity::NodeBound::new(self.server_verifier.clone(), node);
        config.dangerous().set_certificate_verifier(Arc::new(bound));
        config
    }
}

/// Checks the node's own certificate; returns its expiry (Unix seconds).
fn check_own_cert(
    path: &Path,
    chain: &[CertificateDer<'static>],
    node_id: u64,
    node_verifier: &Arc<dyn ClientCertVerifier>,
    server_verifier: &WebPkiServerVerifier,
) -> Result<i64, TlsError> {
    let bad = |message: String| TlsError::Cert { path: path.to_path_buf(), message };
    let (own, intermediates) = chain.split_first().ok_or_else(|| bad("no certificate".into()))?;
    let (identity, not_after) = super::identity::read(own).map_err(bad)?;
    match identity {
        Some(CertIdentity::Node(id)) if id == node_id => {}
        Some(other) => {
            return Err(bad(format!(
                "it speaks for {other}, but this is node {node_id} (make one with `leaf certs node --id {node_id}`)"
            )))
        }
        None => {
            return Err(bad(format!(
                "it names no node: its subject alternative names need exactly one URI {} (`leaf certs node` writes it)",
                CertIdentity::Node(node_id).uri()
            )))
        }
    }
    let now = UnixTime::now();
    node_verifier
        .verify_client_cert(own, intermediates, now)
        .map_err(|e| bad(format!("not usable as a client certificate of the cluster CA (tls.ca): {e}")))?;
    // Peers also check it as a server certificate; a name is checked per dial, so only the
    // chain and the server usage here.
    let probe = rustls_pki_types::ServerName::try_from(format!("node-{node_id}.invalid"))
        .map_err(|e| TlsError::Config(e.to_string()))?;
    match server_verifier.verify_server_cert(own, intermediates, &probe, &[], now) {
        Ok(_) | Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName)) => {}
        Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext { .. })) => {}
        Err(e) => return Err(bad(format!("not usable as a server certificate of the cluster CA (tls.ca): {e}"))),
    }
    Ok(not_after)
}

fn read_certs(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let read = |message: String| TlsError::Read { key, path: path.to_path_buf(), message };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| read(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| read(e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsError::Empty { key, path: path.to_path_buf(), what: "PEM certificate" });
    }
    Ok(certs)
}

/// The private key. Its parse errors are not shown: they could quote the file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let read = |message: String| TlsError::Read { key: "key", path: path.to_path_buf(), message };
    if let Err(e) = std::fs::metadata(path) {
        return Err(read(e.to_string()));
    }
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        rustls_pki_types::pem::Error::Io(e) => read(e.to_string()),
        rustls_pki_types::pem::Error::NoItemsFound => {
            TlsError::Empty { key: "key", path: path.to_path_buf(), what: "PEM private key (PKCS#8, PKCS#1 or SEC1)" }
        }
        _ => read("not a readable PEM private key (PKCS#8, PKCS#1 or SEC1)".into()),
    })
}

fn roots(key: &'static str, path: &Path) -> Result<RootCertStore, TlsError> {
    let mut store = RootCertStore::empty();
    for cert in read_certs(key, path)? {
        store.add(cert).map_err(|e| TlsError::Read {
            key,
            path: path.to_path_buf(),
            message: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(store)
}
