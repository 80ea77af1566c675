//! `leaf certs`: a development CA and the node and client certificates it signs (rcgen).
//!
//! - [`create_ca`] writes `ca.pem` and `ca-key.pem`: a self-signed ECDSA P-256 CA, with a
//!   random name of its own besides its CN "leaf development CA".
//! - [`issue_node`] writes `node-<id>.pem` and `node-<id>-key.pem`: the URI SAN
//!   `urn:leaf:node:<id>` plus a DNS or IP SAN per host its peers dial, for serverAuth and
//!   clientAuth (a node is both a server and, to its peers, a client).
//! - [`issue_client`] writes `client-<name>.pem` and `client-<name>-key.pem`: the URI SAN
//!   `urn:leaf:client:<name>`, for clientAuth.
//! - [`bundle`] makes whatever of a CA and a list of node and client certificates is missing,
//!   and keeps what exists (`leaf certs bundle`, run on every container start).
//!
//! The issuing commands sign with the CA read back from the directory, so the issuer name and
//! authority key ID of what they write are those of `ca.pem` on disk. Files are replaced
//! atomically (see [`write`]), keys are mode 0600, and an existing file is only replaced when
//! asked to. These are development certificates: production brings its own CA.
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use leaf_api::identity::{validate_client_name, CertIdentity};
use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    SanType, SerialNumber,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub mod bundle;
mod write;

#[cfg(test)]
mod tests;

/// The CA certificate's file name in the directory.
pub const CA_CERT_FILE: &str = "ca.pem";
/// The CA private key's file name in the directory.
pub const CA_KEY_FILE: &str = "ca-key.pem";
/// Longest validity `--days` accepts (a hundred years).
pub const MAX_DAYS: u32 = 36_500;

/// Certificates are valid from an hour ago, so a peer whose clock is a little behind accepts
/// them at once.
const BACKDATE: Duration = Duration::from_secs(3600);

/// Writes `contents` to `path` as a secret (mode 0600), so that a reader never sees half of
/// it: a temporary file synced, moved into place only if `path` still does not exist, and its
/// directory synced. For `leaf token create --bearer-file`.
pub fn write_secret_file(path: &Path, contents: &[u8]) -> Result<(), CertsError> {
    let (dir, name) = match (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        (Some(dir), Some(name)) => (if dir.as_os_str().is_empty() { Path::new(".") } else { dir }, name),
        _ => {
            let source = std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name");
            return Err(CertsError::Io { path: path.to_path_buf(), source });
        }
    };
    write::write_files(dir, &[write::File { name, contents, secret: true }], false)
}

/// What a command wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The PEM certificate.
    pub cert: PathBuf,
    /// The PEM private key (PKCS#8, mode 0600).
    pub key: PathBuf,
}

impl Written {
    /// The paths written, the certificate first.
    pub fn paths(&self) -> [&Path; 2] {
        [&self.cert, &self.key]
    }
}

/// Why `leaf certs` wrote nothing. No variant carries key material.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{} already exists: pass --force to replace it", path.display())]
    Exists { path: PathBuf },
    #[error("no CA in {}: {} is missing (run `leaf certs ca --dir {}` first)", dir.display(), missing.display(), dir.display())]
    NoCa { dir: PathBuf, missing: PathBuf },
    #[error("{}: {reason}", path.display())]
    BadCa { path: PathBuf, reason: String },
    #[error(
        "the CA in {} expires at {ca_not_after} (UTC), before a certificate valid for {days} days would: \
         ask for fewer --days or create a new CA",
        dir.display()
    )]
    CaExpiresFirst { dir: PathBuf, ca_not_after: String, days: u32 },
    #[error("a node certificate needs at least one --host (a DNS name or IP address its peers dial it at)")]
    NoHost,
    #[error("bad host {host:?}: {reason}")]
    BadHost { host: String, reason: &'static str },
    #[error("bad client name: {0}")]
    BadName(String),
    #[error("node IDs start at 1")]
    BadId,
    #[error("--days must be 1 to {MAX_DAYS}, not {0}")]
    BadDays(u32),
    #[error("{} exists without {}: put it back, or remove {} to have the pair made anew", present.display(), missing.display(), present.display())]
    HalfPair { present: PathBuf, missing: PathBuf },
    #[error(
        "{} does not hold the CA certificate of {}: the certificates beside it come from another CA \
         (remove that directory's files to start over)",
        copy.display(),
        ca.display()
    )]
    CaMismatch { copy: PathBuf, ca: PathBuf },
    #[error("{0} is listed twice")]
    Duplicate(String),
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
}

/// Creates a development CA in `dir` (created if missing): `ca.pem` and `ca-key.pem`, valid
/// for `days` days.
pub fn create_ca(dir: &Path, days: u32, force: bool) -> Result<Written, CertsError> {
    check_days(days)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    // A name of its own: a certificate from another development CA then fails as "unknown
    // issuer", not as a bad signature from a CA of the same name.
    let unique = format!("development CA {:016x}", rand::random::<u64>());
    params.distinguished_name.push(DnType::OrganizationalUnitName, unique);
    params.distinguished_name.push(DnType::CommonName, "leaf development CA");
    // pathlen 0: it signs node and client certificates, never another CA.
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    set_validity(&mut params, days);
    params.serial_number = Some(random_serial());
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let cert = params.self_signed(&key)?;
    write_pair(dir, CA_CERT_FILE, &cert, CA_KEY_FILE, &key, force)
}

/// Issues node `id`'s certificate, signed by the CA in `dir`: `node-<id>.pem` and
/// `node-<id>-key.pem`. Each host is an IP SAN when it parses as an IP address (brackets
/// around an IPv6 address are allowed), else a DNS SAN.
pub fn issue_node(dir: &Path, id: u64, hosts: &[String], days: u32, force: bool) -> Result<Written, CertsError> {
    let params = node_params(id, hosts, days)?;
    let ca = Ca::load(dir)?;
    let (cert, key) = ca.sign(params, days)?;
    let (cert_name, key_name) = node_files(id);
    write_pair(dir, &cert_name, &cert, &key_name, &key, force)
}

/// Issues the certificate of client `name` (1–64 of `[A-Za-z0-9_.-]`), signed by the CA in
/// `dir`: `client-<name>.pem` and `client-<name>-key.pem`.
pub fn issue_client(dir: &Path, name: &str, days: u32, force: bool) -> Result<Written, CertsError> {
    let params = client_params(name, days)?;
    let ca = Ca::load(dir)?;
    let (cert, key) = ca.sign(params, days)?;
    let (cert_name, key_name) = client_files(name);
    write_pair(dir, &cert_name, &cert, &key_name, &key, force)
}

/// The file names of node `id`'s certificate and key.
fn node_files(id: u64) -> (String, String) {
    (format!("node-{id}.pem"), format!("node-{id}-key.pem"))
}

/// The file names of client `name`'s certificate and key.
fn client_files(name: &str) -> (String, String) {
    (format!("client-{name}.pem"), format!("client-{name}-key.pem"))
}

/// The checked parameters of node `id`'s certificate (see [`issue_node`]).
fn node_params(id: u64, hosts: &[String], days: u32) -> Result<CertificateParams, CertsError> {
    if id == 0 {
        return Err(CertsError::BadId);
    }
    check_days(days)?;
    if hosts.is_empty() {
        return Err(CertsError::NoHost);
    }
    let mut sans = vec![uri_san(&CertIdentity::Node(id))?];
    for host in hosts {
        let san = host_san(host)?;
        if !sans.contains(&san) {
            sans.push(san);
        }
    }
    let mut params = leaf_params(&format!("leaf node {id}"), sans, days);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params)
}

/// The checked parameters of client `name`'s certificate (see [`issue_client`]).
fn client_params(name: &str, days: u32) -> Result<CertificateParams, CertsError> {
    validate_client_name(name).map_err(CertsError::BadName)?;
    check_days(days)?;
    let mut params = leaf_params(name, vec![uri_san(&CertIdentity::Client(name.to_string()))?], days);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params)
}

fn check_days(days: u32) -> Result<(), CertsError> {
    if (1..=MAX_DAYS).contains(&days) {
        Ok(())
    } else {
        Err(CertsError::BadDays(days))
    }
}

fn set_validity(params: &mut CertificateParams, days: u32) {
    let now = SystemTime::now();
    params.not_before = now.checked_sub(BACKDATE).unwrap_or(now).into();
    params.not_after = (now + Duration::from_secs(u64::from(days) * 86_400)).into();
}

/// A positive 127-bit random serial (RFC 5280: at most 20 octets, positive, unique per CA).
fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

/// The parameters of a node or client certificate: CN, SANs, validity, a random serial,
/// digitalSignature, not a CA.
fn leaf_params(common_name: &str, sans: Vec<SanType>, days: u32) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.subject_alt_names = sans;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.use_authority_key_identifier_extension = true;
    params.serial_number = Some(random_serial());
    set_validity(&mut params, days);
    params
}

fn uri_san(identity: &CertIdentity) -> Result<SanType, CertsError> {
    Ok(SanType::URI(identity.uri().try_into()?))
}

/// A host a node is dialled at, as a SAN: an IP address, or a DNS name (labels of 1–63
/// characters of `[A-Za-z0-9-]`, not starting or ending with `-`; at most 253 in all).
fn host_san(host: &str) -> Result<SanType, CertsError> {
    let bad = |reason| CertsError::BadHost { host: host.to_string(), reason };
    let unbracketed = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    if let Some(ip) = unbracketed {
        return match ip.parse::<std::net::Ipv6Addr>() {
            Ok(ip) => Ok(SanType::IpAddress(IpAddr::V6(ip))),
            Err(_) => Err(bad("only an IPv6 address goes in brackets")),
        };
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SanType::IpAddress(ip));
    }
    if host.is_empty() {
        return Err(bad("empty"));
    }
    if host.len() > 253 {
        return Err(bad("a DNS name has at most 253 characters"));
    }
    if host.contains(':') {
        return Err(bad("give the host without a port"));
    }
    if !host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-') {
        return Err(bad("a DNS name has only A-Z a-z 0-9 . -"));
    }
    for label in host.split('.') {
        if label.is_empty() {
            return Err(bad("a DNS name has no empty label (no leading, trailing or double dot)"));
        }
        if label.len() > 63 {
            return Err(bad("a DNS label has at most 63 characters"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(bad("a DNS label does not start or end with '-'"));
        }
    }
    if host.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(bad("neither an IP address nor a DNS name"));
    }
    Ok(SanType::DnsName(host.try_into()?))
}

/// The CA of a directory, read back from its files.
struct Ca {
    dir: PathBuf,
    /// `ca.pem`'s parameters (subject name, key ID) re-signed with its key: rcgen's issuer.
    issuer: Certificate,
    key: KeyPair,
    /// `ca.pem`'s subject name, DER, which the issuer name of what it signs must equal.
    subject: Vec<u8>,
    /// `ca.pem`'s notAfter, Unix seconds and as text.
    not_after: (i64, String),
}

impl Ca {
    fn load(dir: &Path) -> Result<Ca, CertsError> {
        let cert_path = dir.join(CA_CERT_FILE);
        let key_path = dir.join(CA_KEY_FILE);
        for path in [&cert_path, &key_path] {
            match std::fs::symlink_metadata(path) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(CertsError::NoCa { dir: dir.to_path_buf(), missing: path.clone() })
                }
                Err(source) => return Err(CertsError::Io { path: path.clone(), source }),
            }
        }
        let bad_cert = |reason: String| CertsError::BadCa { path: cert_path.clone(), reason };
        let der = match CertificateDer::pem_file_iter(&cert_path) {
            Ok(mut certs) => match certs.next() {
                Some(Ok(der)) => der,
                Some(Err(e)) => return Err(pem_error(&cert_path, e, "no PEM certificate")),
                None => return Err(bad_cert("no PEM certificate".into())),
            },
            Err(e) => return Err(pem_error(&cert_path, e, "no PEM certificate")),
        };
        // The key file's PEM errors are not echoed: their text may quote the file.
        let key_der =
            PrivateKeyDer::from_pem_file(&key_path).map_err(|e| pem_error(&key_path, e, "no PEM private key"))?;
        let key = KeyPair::try_from(&key_der).map_err(|_| CertsError::BadCa {
            path: key_path.clone(),
            reason: "not a PKCS#8 ECDSA, Ed25519 or RSA private key".into(),
        })?;
        let (_, x509) = x509_parser::parse_x509_certificate(&der)
            .map_err(|e| bad_cert(format!("not an X.509 certificate: {e}")))?;
        if x509.tbs_certificate.subject_pki.subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err(CertsError::BadCa {
                path: key_path,
                reason: format!("this key does not belong to {}", cert_path.display()),
            });
        }
        let params = CertificateParams::from_ca_cert_der(&der)
            .map_err(|e| bad_cert(format!("cannot sign with this certificate: {e}")))?;
        if !matches!(params.is_ca, IsCa::Ca(_)) {
            return Err(bad_cert("not a CA certificate (no basicConstraints CA:TRUE)".into()));
        }
        let not_after = &x509.validity().not_after;
        let not_after = (not_after.timestamp(), not_after.to_string());
        let subject = x509.subject().as_raw().to_vec();
        let issuer = params.self_signed(&key)?;
        Ok(Ca { dir: dir.to_path_buf(), issuer, key, subject, not_after })
    }

    /// Signs `params` with a new P-256 key; refuses what would outlive the CA, and checks that
    /// the result names `ca.pem`'s subject as its issuer.
    fn sign(&self, params: CertificateParams, days: u32) -> Result<(Certificate, KeyPair), CertsError> {
        let end = SystemTime::now() + Duration::from_secs(u64::from(days) * 86_400);
        let end = end.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        if i64::try_from(end).map_or(true, |end| end > self.not_after.0) {
            return Err(CertsError::CaExpiresFirst {
                dir: self.dir.clone(),
                ca_not_after: self.not_after.1.clone(),
                days,
            });
        }
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
        let cert = params.signed_by(&key, &self.issuer, &self.key)?;
        let issuer_matches = x509_parser::parse_x509_certificate(cert.der())
            .is_ok_and(|(_, issued)| issued.issuer().as_raw() == self.subject.as_slice());
        if !issuer_matches {
            return Err(CertsError::BadCa {
                path: self.dir.join(CA_CERT_FILE),
                reason: "its subject name cannot be reproduced as an issuer name (one attribute per RDN, \
                         each type once)"
                    .into(),
            });
        }
        Ok((cert, key))
    }
}

/// A PEM reading error: I/O errors as they are, anything else as `what` (never the parser's
/// text, which may quote the file).
fn pem_error(path: &Path, e: rustls_pki_types::pem::Error, what: &str) -> CertsError {
    match e {
        rustls_pki_types::pem::Error::Io(source) => CertsError::Io { path: path.to_path_buf(), source },
        _ => CertsError::BadCa { path: path.to_path_buf(), reason: what.to_string() },
    }
}

fn write_pair(
    dir: &Path,
    cert_name: &str,
    cert: &Certificate,
    key_name: &str,
    key: &KeyPair,
    force: bool,
) -> Result<Written, CertsError> {
    let cert_pem = cert.pem();
    let key_pem = key.serialize_pem();
    // The key first: a node watching its certificate sees the new one only once its key is in
    // place.
    let files = [
        write::File { name: key_name, contents: key_pem.as_bytes(), secret: true },
        write::File { name: cert_name, contents: cert_pem.as_bytes(), secret: false },
    ];
    write::write_files(dir, &files, force)?;
    Ok(Written { cert: dir.join(cert_name), key: dir.join(key_name) })
}
