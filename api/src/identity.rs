//! Whom a TLS certificate speaks for. A certificate of the cluster carries one URI in its
//! subject alternative names:
//! - `urn:leaf:node:<id>`: node `<id>` (Raft ID, at least 1); such a certificate also carries
//!   the DNS names and IP addresses its peers dial it at;
//! - `urn:leaf:client:<name>`: a client called `<name>` (1–64 of `[A-Za-z0-9_.-]`), which a
//!   node may let use the admin endpoints (`tls.admin_clients`).
//!
//! `leaf certs` writes them; a node reads them from the certificate a peer or client
//! presented. A certificate with no such URI, or with several, speaks for nobody.

/// Prefix of a node identity URI.
pub const NODE_URI_PREFIX: &str = "urn:leaf:node:";
/// Prefix of a client identity URI.
pub const CLIENT_URI_PREFIX: &str = "urn:leaf:client:";
/// Longest client name.
pub const MAX_CLIENT_NAME_LEN: usize = 64;

/// The identity a certificate's URI names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CertIdentity {
    /// A node of the cluster, by Raft ID.
    Node(u64),
    /// A client, by name.
    Client(String),
}

impl CertIdentity {
    /// The URI written into a certificate for this identity.
    pub fn uri(&self) -> String {
        match self {
            CertIdentity::Node(id) => format!("{NODE_URI_PREFIX}{id}"),
            CertIdentity::Client(name) => format!("{CLIENT_URI_PREFIX}{name}"),
        }
    }

    /// Reads an identity URI; `None` for any other URI or a malformed one.
    pub fn parse(uri: &str) -> Option<CertIdentity> {
        if let Some(id) = uri.strip_prefix(NODE_URI_PREFIX) {
            // Digits only: no sign, no spaces, no leading `+`.
            if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            return id.parse().ok().filter(|&id| id >= 1).map(CertIdentity::Node);
        }
        let name = uri.strip_prefix(CLIENT_URI_PREFIX)?;
        validate_client_name(name).ok()?;
        Some(CertIdentity::Client(name.to_string()))
    }

    /// The one identity among a certificate's URIs: `None` when none names one, or when
    /// several do (a certificate must not speak for two parties).
    pub fn from_uris<'a>(uris: impl IntoIterator<Item = &'a str>) -> Option<CertIdentity> {
        let mut found = uris.into_iter().filter_map(CertIdentity::parse);
        let first = found.next()?;
        match found.next() {
            None => Some(first),
            Some(_) => None,
        }
    }
}

impl std::fmt::Display for CertIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertIdentity::Node(id) => write!(f, "node {id}"),
            CertIdentity::Client(name) => write!(f, "client {name:?}"),
        }
    }
}

/// Checks a client name: 1–64 characters of `[A-Za-z0-9_.-]`.
pub fn validate_client_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_CLIENT_NAME_LEN {
        return Err(format!("a client name has 1 to {MAX_CLIENT_NAME_LEN} characters"));
    }
    match name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))) {
        Some(c) => Err(format!("a client name may not contain {c:?} (allowed: A-Z a-z 0-9 _ . -)")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_round_trip_through_their_uris() {
        for id in [CertIdentity::Node(1), CertIdentity::Node(u64::MAX), CertIdentity::Client("ops.team-1_a".into())] {
            assert_eq!(CertIdentity::parse(&id.uri()), Some(id));
        }
        assert_eq!(CertIdentity::Node(7).uri(), "urn:leaf:node:7");
        assert_eq!(CertIdentity::Client("ops".into()).uri(), "urn:leaf:client:ops");
    }

    #[test]
    fn malformed_uris_name_nobody() {
        for bad in [
            "urn:leaf:node:",
            "urn:leaf:node:0",
            "urn:leaf:node:+1",
            "urn:leaf:node: 1",
            "urn:leaf:node:1a",
            "urn:leaf:node:18446744073709551616",
            "urn:leaf:client:",
            "urn:leaf:client:a b",
            "urn:leaf:client:a/b",
            "urn:leaf:client:é",
            "URN:LEAF:NODE:1",
            "https://leaf1:8080",
        ] {
            assert_eq!(CertIdentity::parse(bad), None, "{bad:?}");
        }
        assert_eq!(CertIdentity::parse(&format!("urn:leaf:client:{}", "x".repeat(65))), None);
    }

    #[test]
    fn a_certificate_speaks_for_exactly_one_party() {
        assert_eq!(CertIdentity::from_uris(["https://x", "urn:leaf:node:3"]), Some(CertIdentity::Node(3)));
        assert_eq!(CertIdentity::from_uris(["urn:leaf:node:3", "urn:leaf:node:4"]), None);
        assert_eq!(CertIdentity::from_uris(["urn:leaf:node:3", "urn:leaf:client:ops"]), None);
        assert_eq!(CertIdentity::from_uris(["https://x"]), None);
        assert_eq!(CertIdentity::from_uris([]), None);
    }
}
