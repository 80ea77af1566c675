//! Whom a certificate presented on a connection speaks for: a node, if its URI names one and
//! the cluster CA signed it; a client, if its URI names one and the client CA signed it;
//! otherwise nobody. The handshake already verified the chain against either CA; this tells
//! which one, so a client CA can never vouch for a node. Outbound, [`NodeBound`] checks that
//! the member a node dials is the one that answers.
use std::sync::Arc;

use leaf_api::identity::CertIdentity;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::ServerName;
use rustls::{CertificateError, DigitallySignedStruct, OtherError, SignatureScheme};
use rustls_pki_types::{CertificateDer, UnixTime};
use x509_parser::extensions::GeneralName;

use super::Loaded;

/// The verified identity of a peer that presented `chain` (its own certificate first).
pub fn identify(loaded: &Loaded, chain: &[CertificateDer<'static>]) -> Option<CertIdentity> {
    let (own, intermediates) = chain.split_first()?;
    let identity = read(own).ok()?.0?;
    let verifier = match identity {
        CertIdentity::Node(_) => &loaded.node_verifier,
        CertIdentity::Client(_) => &loaded.client_verifier,
    };
    verifier.verify_client_cert(own, intermediates, UnixTime::now()).ok()?;
    Some(identity)
}

/// The identity a certificate's URIs name (unverified) and its expiry (Unix seconds).
pub fn read(cert: &CertificateDer<'_>) -> Result<(Option<CertIdentity>, i64), String> {
    let (_, x509) = x509_parser::parse_x509_certificate(cert.as_ref()).map_err(|e| format!("not X.509: {e}"))?;
    let not_after = x509.validity().not_after.timestamp();
    let san = x509.subject_alternative_name().map_err(|e| format!("bad subject alternative names: {e}"))?;
    let uris = san.iter().flat_map(|s| s.value.general_names.iter()).filter_map(|n| match n {
        GeneralName::URI(uri) => Some(*uri),
        _ => None,
    });
    Ok((CertIdentity::from_uris(uris), not_after))
}

/// Verifies the certificate of a dialled member: the cluster CA's chain and the dialled name,
/// as any TLS client does, and then that it speaks for the node this connection is meant for.
/// Without the last check any member's certificate (or a removed member's, until it expires)
/// answers for every address, and a node placed at another's address is counted in its stead.
#[derive(Debug)]
pub struct NodeBound {
    inner: Arc<WebPkiServerVerifier>,
    node: u64,
}

/// The dialled peer's certificate speaks for another node (or none).
#[derive(Debug, thiserror::Error)]
#[error("the peer's certificate speaks for {found}, not for node {expected}, the member dialled")]
struct WrongNode {
    expected: u64,
    found: String,
}

impl NodeBound {
    pub fn new(inner: Arc<WebPkiServerVerifier>, node: u64) -> Self {
        NodeBound { inner, node }
    }
}

impl ServerCertVerifier for NodeBound {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified = self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        match read(end_entity) {
            Ok((Some(CertIdentity::Node(id)), _)) if id == self.node => Ok(verified),
            other => {
                let found = match other {
                    Ok((Some(identity), _)) => identity.to_string(),
                    _ => "no node".to_string(),
                };
                let wrong = WrongNode { expected: self.node, found };
                Err(rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(wrong)))))
            }
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
