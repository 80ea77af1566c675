//! [`diagnose`]: the `rustls` error behind a failed connection or request, found in its
//! `source()` chain, said in plain words ([`TlsFailure`] and a message).
use std::error::Error as StdError;

use rustls::{AlertDescription, CertificateError, InvalidMessage};

use crate::error::TlsFailure;

/// Where to pass the cluster's CA.
const CA_HINT: &str = "pass its CA with --ca / LEAF_CA";

/// The TLS failure behind `err`, if its source chain holds a `rustls` error (directly, or
/// inside an `std::io::Error`, which is how TLS streams report them): what kind it is and a
/// message saying what is wrong and what to do. `None` when the chain holds no `rustls` error.
pub fn diagnose(err: &(dyn StdError + 'static)) -> Option<(TlsFailure, String)> {
    find_rustls(err).map(describe)
}

/// The first `rustls::Error` in the chain of `err`.
fn find_rustls<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        // `io::Error::source()` skips the error it wraps: look at that one too.
        if let Some(inner) = e.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            if let Some(r) = find_rustls(inner) {
                return Some(r);
            }
        }
        next = e.source();
    }
    None
}

fn describe(e: &rustls::Error) -> (TlsFailure, String) {
    use TlsFailure as F;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => (
                F::UnknownIssuer,
                format!("the node's certificate is not signed by a CA this client trusts ({CA_HINT})"),
            ),
            // The chain names a trusted CA but that CA's key did not sign it: another CA with
            // the same name (another cluster's `leaf certs ca`, say).
            CertificateError::BadSignature => (
                F::UnknownIssuer,
                format!(
                    "the node's certificate is not signed by a CA this client trusts: a CA of the same name but \
                     another key signed it ({CA_HINT})"
                ),
            ),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => (
                F::NotValidForName,
                format!(
                    "the node's certificate is not valid for the host it was dialled at ({e}): use a name or \
                     address the certificate lists, or reissue it with that host"
                ),
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                (F::Expired, format!("the node's certificate has expired ({e})"))
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                (F::NotValidYet, format!("the node's certificate is not valid yet ({e}): check this machine's clock"))
            }
            _ => (F::BadCertificate, format!("the node's certificate was refused: {e}")),
        },
        // The first bytes of an HTTP answer are not a TLS record.
        rustls::Error::InvalidMessage(
            InvalidMessage::InvalidContentType
            | InvalidMessage::UnknownProtocolVersion
            | InvalidMessage::MessageTooLarge,
        ) => (F::Plaintext, "the node answered in plaintext: use http:// or turn TLS on".to_string()),
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => (
            F::ClientCertRequired,
            "the node requires a client certificate and this client presented none (pass --client-cert and \
             --client-key / LEAF_CLIENT_CERT and LEAF_CLIENT_KEY)"
                .to_string(),
        ),
        rustls::Error::AlertReceived(
            a @ (AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateRevoked
            | AlertDescription::CertificateExpired
            | AlertDescription::CertificateUnknown
            | AlertDescription::UnknownCA
            | AlertDescription::AccessDenied),
        ) => (
            F::ClientCertRejected,
            format!(
                "the node refused this client's certificate ({a:?}): is it signed by the cluster's CA, and still \
                 valid?"
            ),
        ),
        other => (F::Handshake, format!("TLS handshake failed: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustls_errors_are_found_through_io_errors_and_sources() {
        let unknown = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        // Directly.
        assert_eq!(diagnose(&unknown).unwrap().0, TlsFailure::UnknownIssuer);
        // Inside an io::Error (how tokio-rustls reports it), inside a wrapper.
        #[derive(Debug)]
        struct Wrapper(std::io::Error);
        impl std::fmt::Display for Wrapper {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("client error (Connect)")
            }
        }
        impl StdError for Wrapper {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, unknown);
        let (failure, message) = diagnose(&Wrapper(io)).unwrap();
        assert_eq!(failure, TlsFailure::UnknownIssuer);
        assert!(message.contains("not signed by a CA this client trusts") && message.contains("--ca"), "{message}");
        // No rustls error anywhere: nothing to say.
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(diagnose(&Wrapper(refused)).is_none());
    }

    #[test]
    fn each_failure_has_its_own_words() {
        let cases = [
            (rustls::Error::InvalidCertificate(CertificateError::NotValidForName), TlsFailure::NotValidForName),
            (rustls::Error::InvalidCertificate(CertificateError::Expired), TlsFailure::Expired),
            (rustls::Error::InvalidCertificate(CertificateError::NotValidYet), TlsFailure::NotValidYet),
            (rustls::Error::InvalidCertificate(CertificateError::BadSignature), TlsFailure::UnknownIssuer),
            (rustls::Error::InvalidCertificate(CertificateError::InvalidPurpose), TlsFailure::BadCertificate),
            (rustls::Error::InvalidMessage(InvalidMessage::InvalidContentType), TlsFailure::Plaintext),
            (rustls::Error::AlertReceived(AlertDescription::CertificateRequired), TlsFailure::ClientCertRequired),
            (rustls::Error::AlertReceived(AlertDescription::UnknownCA), TlsFailure::ClientCertRejected),
            (rustls::Error::AlertReceived(AlertDescription::ProtocolVersion), TlsFailure::Handshake),
        ];
        let mut messages = std::collections::HashSet::new();
        for (e, want) in cases {
            let (got, message) = diagnose(&e).unwrap();
            assert_eq!(got, want, "{e:?}");
            assert!(messages.insert(message.clone()), "{message}");
        }
        let (_, plaintext) = diagnose(&rustls::Error::InvalidMessage(InvalidMessage::InvalidContentType)).unwrap();
        assert!(plaintext.contains("plaintext") && plaintext.contains("http://"), "{plaintext}");
    }
}
