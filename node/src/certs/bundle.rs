//! `leaf certs bundle`: what a cluster's nodes and clients need, made once and then kept.
//!
//! [`Bundle::run`] creates the CA in the CA directory unless its `ca.pem` exists, copies
//! `ca.pem` into the output directory when that is another one, then issues each listed node
//! and client certificate whose files are not there yet. What exists is kept, so a second run
//! writes nothing and listing one more node issues only that node's certificate: a container
//! or script can run it on every start. A kept certificate that does not fit the request
//! (issued by another CA, lacking a listed host, expired) stays as it is, with a warning.
//!
//! With the CA directory apart from the output directory, the output holds no CA key: it is
//! what nodes mount.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rcgen::{CertificateParams, SanType};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use x509_parser::extensions::GeneralName;

use super::{
    client_files, client_params, create_ca, node_files, node_params, write, write_pair, Ca, CertsError, CA_CERT_FILE,
    CA_KEY_FILE,
};

#[cfg(test)]
mod tests;

/// A node to issue a certificate for, written `ID=HOST[,HOST...]`: its Raft ID and the DNS
/// names or IP addresses it is dialled at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub id: u64,
    pub hosts: Vec<String>,
}

impl FromStr for NodeSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (id, hosts) = s.split_once('=').ok_or_else(|| format!("{s:?} is not of the form ID=HOST[,HOST...]"))?;
        let id: u64 = id.trim().parse().map_err(|_| format!("{s:?}: {id:?} is not a node ID"))?;
        if id == 0 {
            return Err(format!("{s:?}: node IDs start at 1"));
        }
        let hosts: Vec<String> = hosts.split(',').map(|h| h.trim().to_string()).collect();
        if hosts.iter().any(String::is_empty) {
            return Err(format!("{s:?}: an empty host"));
        }
        Ok(NodeSpec { id, hosts })
    }
}

/// What one run is asked to make.
#[derive(Debug, Clone)]
pub struct Bundle<'a> {
    /// Where `ca.pem` and the node and client certificates and keys go.
    pub dir: &'a Path,
    /// Where the CA (`ca.pem`, `ca-key.pem`) is, or is created; `None`: `dir`.
    pub ca_dir: Option<&'a Path>,
    pub nodes: &'a [NodeSpec],
    pub clients: &'a [String],
    /// Validity of the node and client certificates issued now, in days.
    pub days: u32,
    /// Validity of a CA created now, in days.
    pub ca_days: u32,
}

/// What happened to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Wrote,
    Kept,
}

/// The files a run wrote or kept, in order, and its warnings (about kept certificates).
#[derive(Debug, Default)]
pub struct Report {
    pub files: Vec<(Action, PathBuf)>,
    pub warnings: Vec<String>,
}

impl Report {
    fn add(&mut self, action: Action, paths: &[&Path]) {
        self.files.extend(paths.iter().map(|p| (action, p.to_path_buf())));
    }

    /// The paths with this action.
    pub fn paths(&self, action: Action) -> Vec<&Path> {
        self.files.iter().filter(|(a, _)| *a == action).map(|(_, p)| p.as_path()).collect()
    }
}

/// A certificate to have: its file names and the parameters to issue it with (whose subject
/// alternative names a kept one is checked against).
struct Wanted {
    cert: String,
    key: String,
    params: CertificateParams,
}

impl Bundle<'_> {
    /// Makes what is missing, recording each file in `report` as it goes (so a failure
    /// part-way still shows what was written). Every input is checked before anything is
    /// written.
    pub fn run(&self, report: &mut Report) -> Result<(), CertsError> {
        super::check_days(self.days)?;
        super::check_days(self.ca_days)?;
        let wanted = self.wanted()?;
        let ca_dir = self.ca_dir.unwrap_or(self.dir);
        let ca_cert = ca_dir.join(CA_CERT_FILE);
        let ca_key = ca_dir.join(CA_KEY_FILE);
        match (exists(&ca_cert)?, exists(&ca_key)?) {
            (false, false) => {
                let written = create_ca(ca_dir, self.ca_days, false)?;
                report.add(Action::Wrote, &written.paths());
            }
            (false, true) => return Err(CertsError::HalfPair { present: ca_key, missing: ca_cert }),
            (true, true) => report.add(Action::Kept, &[&ca_cert, &ca_key]),
            // A CA brought in without its key: enough while nothing is to be issued.
            (true, false) => report.add(Action::Kept, &[&ca_cert]),
        }
        let ca_pem = std::fs::read(&ca_cert).map_err(|source| CertsError::Io { path: ca_cert.clone(), source })?;
        let ca_certs = pem_certs(&ca_pem);
        if ca_certs.is_empty() {
            return Err(CertsError::BadCa { path: ca_cert, reason: "no PEM certificate".into() });
        }
        std::fs::create_dir_all(self.dir).map_err(|source| CertsError::Io { path: self.dir.to_path_buf(), source })?;
        if !same_dir(ca_dir, self.dir)? {
            self.copy_ca(&ca_cert, &ca_pem, &ca_certs, report)?;
        }
        let ca_subjects: Vec<Vec<u8>> = ca_certs
            .iter()
            .filter_map(|der| x509_parser::parse_x509_certificate(der).ok().map(|(_, x)| x.subject().as_raw().to_vec()))
            .collect();
        let mut ca = None;
        for w in wanted {
            let cert = self.dir.join(&w.cert);
            let key = self.dir.join(&w.key);
            match (exists(&cert)?, exists(&key)?) {
                (true, true) => {
                    report.add(Action::Kept, &[&cert, &key]);
                    report.warnings.extend(check_kept(&cert, &key, &w.params.subject_alt_names, &ca_subjects));
                }
                (false, false) => {
                    let ca = match &mut ca {
                        Some(ca) => ca,
                        None => ca.insert(Ca::load(ca_dir)?),
                    };
                    let (issued, issued_key) = ca.sign(w.params, self.days)?;
                    let written = write_pair(self.dir, &w.cert, &issued, &w.key, &issued_key, false)?;
                    report.add(Action::Wrote, &written.paths());
                }
                (true, false) => return Err(CertsError::HalfPair { present: cert, missing: key }),
                (false, true) => return Err(CertsError::HalfPair { present: key, missing: cert }),
            }
        }
        Ok(())
    }

    /// The certificates asked for, each checked (IDs, hosts, names, days, no repeats).
    fn wanted(&self) -> Result<Vec<Wanted>, CertsError> {
        let mut wanted = Vec::with_capacity(self.nodes.len() + self.clients.len());
        let mut ids = BTreeSet::new();
        for node in self.nodes {
            if !ids.insert(node.id) {
                return Err(CertsError::Duplicate(format!("node {}", node.id)));
            }
            let params = node_params(node.id, &node.hosts, self.days)?;
            let (cert, key) = node_files(node.id);
            wanted.push(Wanted { cert, key, params });
        }
        let mut names = BTreeSet::new();
        for name in self.clients {
            let params = client_params(name, self.days)?;
            if !names.insert(name.as_str()) {
                return Err(CertsError::Duplicate(format!("client {name}")));
            }
            let (cert, key) = client_files(name);
            wanted.push(Wanted { cert, key, params });
        }
        Ok(wanted)
    }

    /// Puts the CA certificate into the output directory, or keeps the copy there when it
    /// holds every certificate of the CA's `ca.pem` (it may hold more: an old CA kept while
    /// certificates are rotated to a new one).
    fn copy_ca(
        &self,
        ca_cert: &Path,
        ca_pem: &[u8],
        ca_certs: &[CertificateDer<'static>],
        report: &mut Report,
    ) -> Result<(), CertsError> {
        let copy = self.dir.join(CA_CERT_FILE);
        if exists(&copy)? {
            let held = std::fs::read(&copy).map_err(|source| CertsError::Io { path: copy.clone(), source })?;
            let held = pem_certs(&held);
            if !ca_certs.iter().all(|c| held.contains(c)) {
                return Err(CertsError::CaMismatch { copy, ca: ca_cert.to_path_buf() });
            }
            report.add(Action::Kept, &[&copy]);
        } else {
            let file = write::File { name: CA_CERT_FILE, contents: ca_pem, secret: false };
            write::write_files(self.dir, &[file], false)?;
            report.add(Action::Wrote, &[&copy]);
        }
        Ok(())
    }
}

/// Whether `path` exists (a dangling symlink counts: it is not ours to replace).
fn exists(path: &Path) -> Result<bool, CertsError> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(CertsError::Io { path: path.to_path_buf(), source }),
    }
}

fn same_dir(a: &Path, b: &Path) -> Result<bool, CertsError> {
    let canonical =
        |p: &Path| std::fs::canonicalize(p).map_err(|source| CertsError::Io { path: p.to_path_buf(), source });
    Ok(canonical(a)? == canonical(b)?)
}

/// The PEM certificates in `pem` (unreadable blocks are skipped).
fn pem_certs(pem: &[u8]) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem).filter_map(Result::ok).collect()
}

/// Warnings about a kept certificate that does not fit: not from the CA, a name it lacks,
/// expired. Its key is not read.
fn check_kept(cert: &Path, key: &Path, sans: &[SanType], ca_subjects: &[Vec<u8>]) -> Vec<String> {
    let redo = format!("remove it and {} to have them issued again", key.display());
    let der = match std::fs::read(cert).map(|pem| pem_certs(&pem)) {
        Ok(certs) if !certs.is_empty() => certs.into_iter().next(),
        _ => None,
    };
    let Some(der) = der else {
        return vec![format!("kept {}, which holds no readable PEM certificate: {redo}", cert.display())];
    };
    let Ok((_, x509)) = x509_parser::parse_x509_certificate(&der) else {
        return vec![format!("kept {}, which is not an X.509 certificate: {redo}", cert.display())];
    };
    let mut problems = Vec::new();
    if !ca_subjects.iter().any(|s| s.as_slice() == x509.issuer().as_raw()) {
        problems.push("the CA did not issue it".to_string());
    }
    let names: Vec<&GeneralName<'_>> = match x509.subject_alternative_name() {
        Ok(Some(san)) => san.value.general_names.iter().collect(),
        _ => Vec::new(),
    };
    let missing: Vec<String> =
        sans.iter().filter(|want| !names.iter().any(|n| san_matches(want, n))).map(san_text).collect();
    if !missing.is_empty() {
        problems.push(format!("it does not name {}", missing.join(", ")));
    }
    if x509.validity().not_after.timestamp() <= unix_now() {
        problems.push(format!("it expired at {}", x509.validity().not_after));
    }
    if problems.is_empty() {
        return Vec::new();
    }
    vec![format!("kept {}, but {}: {redo}", cert.display(), problems.join("; "))]
}

fn unix_now() -> i64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

fn san_matches(want: &SanType, have: &GeneralName<'_>) -> bool {
    match (want, have) {
        (SanType::DnsName(w), GeneralName::DNSName(h)) => w.as_str().eq_ignore_ascii_case(h),
        (SanType::URI(w), GeneralName::URI(h)) => w.as_str() == *h,
        (SanType::IpAddress(std::net::IpAddr::V4(w)), GeneralName::IPAddress(h)) => w.octets().as_slice() == *h,
        (SanType::IpAddress(std::net::IpAddr::V6(w)), GeneralName::IPAddress(h)) => w.octets().as_slice() == *h,
        _ => false,
    }
}

fn san_text(san: &SanType) -> String {
    match san {
        SanType::DnsName(n) => n.as_str().to_string(),
        SanType::URI(u) => u.as_str().to_string(),
        SanType::IpAddress(ip) => ip.to_string(),
        other => format!("{other:?}"),
    }
}
