//! TLS settings of a client ([`TlsOptions`]: which CA to trust, which client certificate to
//! present) and the `rustls` configuration they make, shared by [`crate::Client`] and
//! `leaf bench`. [`diagnose`] turns a failed handshake into plain words.
//!
//! Roots: the CA PEM when one is given (only that CA is trusted, as a cluster's own CA
//! should be), otherwise the platform's root certificates. Configurations use `rustls` with
//! the `ring` provider and its safe default protocol versions (TLS 1.2 and 1.3).
//!
//! ```
//! use leaf_client::tls::{TlsError, TlsOptions};
//!
//! // A CA file that holds no certificate is refused when the configuration is built.
//! let opts = TlsOptions::new().ca_pem("not a certificate");
//! assert!(matches!(opts.client_config(), Err(TlsError::Pem { .. })));
//! ```
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

mod failure;

pub use crate::error::{TlsError, TlsFailure};
pub use failure::diagnose;

const CA: &str = "CA certificate";
const CERT: &str = "client certificate";
const KEY: &str = "client key";

/// A PEM text, given in memory or as a file read when the configuration is built.
#[derive(Clone)]
enum Pem {
    Bytes(Arc<[u8]>),
    File(PathBuf),
}

impl Pem {
    fn load(&self, what: &'static str) -> Result<(Arc<[u8]>, String), TlsError> {
        match self {
            Pem::Bytes(b) => Ok((b.clone(), "(given in memory)".to_string())),
            Pem::File(path) => {
                let bytes = std::fs::read(path).map_err(|e| TlsError::Read {
                    what,
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                Ok((bytes.into(), path.display().to_string()))
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Pem::Bytes(_) => "(in memory)".to_string(),
            Pem::File(p) => p.display().to_string(),
        }
    }
}

/// Which CA a client trusts and which certificate it presents (mutual TLS). Empty by default:
/// the platform's roots, no client certificate. `Debug` names files, never key material.
#[derive(Clone, Default)]
pub struct TlsOptions {
    ca: Option<Pem>,
    client_cert: Option<Pem>,
    client_key: Option<Pem>,
}

impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca", &self.ca.as_ref().map(Pem::describe))
            .field("client_cert", &self.client_cert.as_ref().map(Pem::describe))
            .field("client_key", &self.client_key.as_ref().map(|_| "(set)"))
            .finish()
    }
}

impl TlsOptions {
    /// No CA (the platform's roots), no client certificate.
    pub fn new() -> Self {
        TlsOptions::default()
    }

    /// Options from command-line style paths: `--ca`, `--client-cert`, `--client-key`. A
    /// certificate without a key (or the reverse) is an error.
    pub fn from_files(ca: Option<&Path>, cert: Option<&Path>, key: Option<&Path>) -> Result<Self, TlsError> {
        let mut opts = TlsOptions::new();
        if let Some(ca) = ca {
            opts = opts.ca_file(ca);
        }
        match (cert, key) {
            (Some(cert), Some(key)) => opts = opts.client_cert_files(cert, key),
            (Some(_), None) => return Err(TlsError::IncompleteClientCert("a client certificate needs its key")),
            (None, Some(_)) => return Err(TlsError::IncompleteClientCert("a client key needs its certificate")),
            (None, None) => {}
        }
        Ok(opts)
    }

    /// Trust only the CA certificate(s) in this PEM text.
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca = Some(Pem::Bytes(pem.into().into()));
        self
    }

    /// Trust only the CA certificate(s) in this PEM file (read when the configuration is
    /// built).
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca = Some(Pem::File(path.into()));
        self
    }

    /// Present this certificate chain and private key (PEM texts) when a node asks for one.
    pub fn client_cert_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.client_cert = Some(Pem::Bytes(cert.into().into()));
        self.client_key = Some(Pem::Bytes(key.into().into()));
        self
    }

    /// Present the certificate chain and private key in these PEM files.
    pub fn client_cert_files(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_cert = Some(Pem::File(cert.into()));
        self.client_key = Some(Pem::File(key.into()));
        self
    }

    /// Nothing set: no CA, no client certificate.
    pub fn is_empty(&self) -> bool {
        self.ca.is_none() && self.client_cert.is_none() && self.client_key.is_none()
    }

    /// The `rustls` configuration: the CA's certificates as roots (the platform's when no CA
    /// is given), the client certificate when one is given. Reads the files now.
    pub fn client_config(&self) -> Result<ClientConfig, TlsError> {
        self.config(true)
    }

    /// As [`TlsOptions::client_config`]; without a CA, the platform's roots are loaded only
    /// when `platform_roots` (a client of `http://` nodes alone still checks its files but
    /// needs no roots).
    pub(crate) fn config(&self, platform_roots: bool) -> Result<ClientConfig, TlsError> {
        let roots = match &self.ca {
            Some(ca) => ca_roots(ca)?,
            None if platform_roots => native_roots()?,
            None => RootCertStore::empty(),
        };
        let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config { reason: e.to_string() })?
            .with_root_certificates(roots);
        match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => {
                let chain = certificates(cert, CERT)?;
                let key = private_key(key)?;
                builder.with_client_auth_cert(chain, key).map_err(|e| TlsError::Config {
                    reason: format!("the client certificate and key cannot be used together: {e}"),
                })
            }
            (None, None) => Ok(builder.with_no_client_auth()),
            // The setters always set both; kept total for safety.
            _ => Err(TlsError::IncompleteClientCert("a client certificate needs its key")),
        }
    }
}

/// Every certificate of a PEM text; at least one.
fn certificates(pem: &Pem, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let (bytes, origin) = pem.load(what)?;
    let bad = |reason: String| TlsError::Pem { what, origin: origin.clone(), reason };
    let certs =
        CertificateDer::pem_slice_iter(&bytes).collect::<Result<Vec<_>, _>>().map_err(|e| bad(pem_error_text(&e)))?;
    if certs.is_empty() {
        return Err(bad("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".to_string()));
    }
    Ok(certs)
}

/// The roots of a CA PEM: every certificate in it must be usable as a trust anchor.
fn ca_roots(ca: &Pem) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in certificates(ca, CA)? {
        roots.add(cert).map_err(|e| TlsError::Pem {
            what: CA,
            origin: ca.describe(),
            reason: format!("not a usable CA certificate: {e}"),
        })?;
    }
    Ok(roots)
}

/// The platform's root certificates; an error when none could be loaded.
fn native_roots() -> Result<RootCertStore, TlsError> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        let reason = match found.errors.first() {
            Some(e) => e.to_string(),
            None => "none found".to_string(),
        };
        return Err(TlsError::NoRoots { reason });
    }
    Ok(roots)
}

/// The private key of a PEM text. Errors never quote the text.
fn private_key(pem: &Pem) -> Result<PrivateKeyDer<'static>, TlsError> {
    let (bytes, origin) = pem.load(KEY)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Pem {
        what: KEY,
        origin,
        reason: match e {
            rustls_pki_types::pem::Error::NoItemsFound => {
                "holds no PEM private key (PKCS#8, PKCS#1 or SEC1)".to_string()
            }
            other => pem_error_text(&other),
        },
    })
}

/// What is wrong with a PEM text, in words that never quote it (a key file's lines are
/// secret).
fn pem_error_text(e: &rustls_pki_types::pem::Error) -> String {
    use rustls_pki_types::pem::Error as E;
    match e {
        E::MissingSectionEnd { .. } => "a PEM section has no END line".to_string(),
        E::IllegalSectionStart { .. } => "a malformed PEM BEGIN line".to_string(),
        E::Base64Decode(_) => "invalid base64 inside a PEM section".to_string(),
        E::Io(e) => e.to_string(),
        E::NoItemsFound => "holds no PEM item of the expected kind".to_string(),
        E::SectionTooLarge => "a PEM section is too large".to_string(),
        _ => "not valid PEM".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca() -> (String, rcgen::KeyPair) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        (params.self_signed(&key).unwrap().pem(), key)
    }

    #[test]
    fn a_ca_pem_becomes_the_only_root_and_bad_pem_is_refused() {
        let (pem, _) = ca();
        TlsOptions::new().ca_pem(pem.clone()).client_config().unwrap();
        for (bad, want) in [
            ("", "holds no PEM certificate"),
            ("hello", "holds no PEM certificate"),
            ("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n", "invalid base64"),
            ("-----BEGIN CERTIFICATE-----\nAAAA\n", "no END line"),
        ] {
            let e = TlsOptions::new().ca_pem(bad).client_config().unwrap_err();
            assert!(matches!(e, TlsError::Pem { what: CA, .. }), "{bad:?}: {e:?}");
            assert!(e.to_string().contains(want), "{bad:?}: {e}");
        }
        // Base64 that is not a certificate.
        let e = TlsOptions::new().ca_pem("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
        assert!(e.client_config().unwrap_err().to_string().contains("not a usable CA certificate"));
    }

    #[test]
    fn files_are_named_in_errors_and_keys_are_never_quoted() {
        let dir = std::env::temp_dir().join(format!("leaf-client-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let e = TlsOptions::new().ca_file(&missing).client_config().unwrap_err();
        assert!(matches!(&e, TlsError::Read { what: CA, path, .. } if *path == missing), "{e:?}");
        assert!(e.to_string().contains("missing.pem"), "{e}");

        let (ca_pem, _) = ca();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["client".to_string()]).unwrap().self_signed(&key).unwrap();
        // A key that is not the certificate's: refused when building.
        let other = rcgen::KeyPair::generate().unwrap();
        let e = TlsOptions::new()
            .ca_pem(ca_pem.clone())
            .client_cert_pem(cert.pem(), other.serialize_pem())
            .client_config()
            .unwrap_err();
        assert!(matches!(e, TlsError::Config { .. }), "{e:?}");
        // A damaged key file: the error names the file, and no line of it.
        let secret_line = "SECRETSECRETSECRET";
        let damaged = format!("-----BEGIN PRIVATE KEY-----\n{secret_line}!\n-----END PRIVATE KEY-----\n");
        let (cert_file, key_file) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, damaged).unwrap();
        let opts = TlsOptions::from_files(None, Some(&cert_file), Some(&key_file)).unwrap();
        let e = opts.config(false).unwrap_err();
        assert!(matches!(e, TlsError::Pem { what: KEY, .. }), "{e:?}");
        assert!(e.to_string().contains("k.pem") && !e.to_string().contains(secret_line), "{e}");
        assert!(!format!("{e:?}").contains(secret_line));
        // The matching key works, and Debug shows no key.
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        let opts = TlsOptions::from_files(None, Some(&cert_file), Some(&key_file)).unwrap().ca_pem(ca_pem);
        opts.client_config().unwrap();
        assert!(!format!("{opts:?}").contains("PRIVATE"), "{opts:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_certificate_and_its_key_go_together() {
        let p = Path::new("x.pem");
        assert!(matches!(TlsOptions::from_files(None, Some(p), None), Err(TlsError::IncompleteClientCert(_))));
        assert!(matches!(TlsOptions::from_files(None, None, Some(p)), Err(TlsError::IncompleteClientCert(_))));
        assert!(TlsOptions::from_files(None, None, None).unwrap().is_empty());
        assert!(!TlsOptions::from_files(Some(p), None, None).unwrap().is_empty());
    }
}
