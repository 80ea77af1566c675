//! Whom a certificate presented on a connection speaks for: a node, if its URI names one and
//! the cluster CA signed it; a client, if its URI names one and the client CA signed it;
//! otherwise nobody. The handshake already verified the chain against either CA; this tells
//! which one, so a client CA can never vouch for a node.
use leaf_api::identity::CertIdentity;
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
