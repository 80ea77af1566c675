//! Loading, identities and reloading, with certificates made by `leaf certs`' code.
use std::path::Path;

use leaf_api::identity::CertIdentity;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

use super::*;
use crate::certs::{create_ca, issue_client, issue_node};

const DAYS: u32 = 30;

fn hosts() -> Vec<String> {
    vec!["127.0.0.1".to_string(), "localhost".to_string()]
}

/// A CA in `dir` with node certificates 1 and 2 and a client certificate `ops`.
pub(super) fn pki(dir: &Path) {
    create_ca(dir, 3650, false).unwrap();
    issue_node(dir, 1, &hosts(), DAYS, false).unwrap();
    issue_node(dir, 2, &hosts(), DAYS, false).unwrap();
    issue_client(dir, "ops", DAYS, false).unwrap();
}

pub(super) fn config(dir: &Path, node: u64) -> TlsConfig {
    TlsConfig {
        cert: Some(dir.join(format!("node-{node}.pem"))),
        key: Some(dir.join(format!("node-{node}-key.pem"))),
        ca: Some(dir.join("ca.pem")),
        ..TlsConfig::default()
    }
}

pub(super) fn chain(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path).unwrap().collect::<Result<Vec<_>, _>>().unwrap()
}

pub(super) fn load(config: &TlsConfig, node: u64) -> Result<Arc<Tls>, TlsError> {
    Tls::load(config, node, TlsCounters::default())
}

#[test]
fn a_node_loads_its_own_certificate_and_refuses_anyone_elses() {
    let a = tempfile::tempdir().unwrap();
    pki(a.path());
    let tls = load(&config(a.path(), 1), 1).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!(tls.current().not_after > now + 29 * 86_400, "expiry read from the certificate");
    assert_eq!(tls.counters().cert_not_after.get(), tls.current().not_after);

    let e = load(&config(a.path(), 2), 1).err().expect("node 2's certificate accepted by node 1").to_string();
    assert!(e.contains("node 2") && e.contains("this is node 1"), "{e}");

    // Another CA's certificate with this node's identity: not signed by tls.ca.
    let b = tempfile::tempdir().unwrap();
    pki(b.path());
    let foreign = TlsConfig { ca: Some(a.path().join("ca.pem")), ..config(b.path(), 1) };
    let e = load(&foreign, 1).err().expect("a certificate of another CA accepted").to_string();
    assert!(e.contains("cluster CA"), "{e}");

    // A key that is not the certificate's.
    let mismatched = TlsConfig { key: Some(a.path().join("node-2-key.pem")), ..config(a.path(), 1) };
    assert!(matches!(load(&mismatched, 1), Err(TlsError::KeyMismatch)));
}

#[test]
fn unreadable_files_are_named_and_key_contents_never_shown() {
    let a = tempfile::tempdir().unwrap();
    pki(a.path());
    let missing = TlsConfig { cert: Some(a.path().join("nope.pem")), ..config(a.path(), 1) };
    let e = load(&missing, 1).err().unwrap().to_string();
    assert!(e.contains("tls.cert") && e.contains("nope.pem"), "{e}");
    let garbage = a.path().join("garbage-key.pem");
    let secret = "-----BEGIN PRIVATE KEY-----\nU0VDUkVULUtFWS1NQVRFUklBTA!!\n-----END PRIVATE KEY-----\n";
    std::fs::write(&garbage, secret).unwrap();
    let bad = TlsConfig { key: Some(garbage), ..config(a.path(), 1) };
    let e = load(&bad, 1).err().unwrap().to_string();
    assert!(e.contains("tls.key"), "{e}");
    assert!(!e.contains("U0VDUkVU"), "key material in the error: {e}");
    let empty = a.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let e = load(&TlsConfig { ca: Some(empty), ..config(a.path(), 1) }, 1).err().unwrap().to_string();
    assert!(e.contains("tls.ca") && e.contains("no PEM certificate"), "{e}");
}

#[test]
fn identities_come_from_the_right_ca() {
    let a = tempfile::tempdir().unwrap();
    pki(a.path());
    let tls = load(&config(a.path(), 1), 1).unwrap();
    let loaded = tls.current();
    let id = |path: &Path| identity::identify(&loaded, &chain(path));
    assert_eq!(id(&a.path().join("node-2.pem")), Some(CertIdentity::Node(2)));
    assert_eq!(id(&a.path().join("client-ops.pem")), Some(CertIdentity::Client("ops".into())));
    assert_eq!(id(&a.path().join("ca.pem")), None, "a CA certificate names nobody");

    // Node and client certificates of another CA name nobody here.
    let b = tempfile::tempdir().unwrap();
    pki(b.path());
    assert_eq!(id(&b.path().join("node-2.pem")), None);
    assert_eq!(id(&b.path().join("client-ops.pem")), None);

    // With a separate client CA, B: B's clients are clients, but B cannot vouch for a node.
    let split = TlsConfig { client_ca: Some(b.path().join("ca.pem")), ..config(a.path(), 1) };
    let tls = load(&split, 1).unwrap();
    let loaded = tls.current();
    let id = |path: &Path| identity::identify(&loaded, &chain(path));
    assert_eq!(id(&b.path().join("client-ops.pem")), Some(CertIdentity::Client("ops".into())));
    assert_eq!(id(&b.path().join("node-2.pem")), None, "the client CA vouched for a node");
    assert_eq!(id(&a.path().join("node-2.pem")), Some(CertIdentity::Node(2)));
    assert_eq!(id(&a.path().join("client-ops.pem")), None, "the cluster CA is not the client CA here");
}

#[test]
fn a_reload_takes_new_files_and_keeps_the_old_ones_when_the_new_are_broken() {
    let a = tempfile::tempdir().unwrap();
    pki(a.path());
    let tls = load(&config(a.path(), 1), 1).unwrap();
    let before = tls.current();
    let generation = tls.generation();
    issue_node(a.path(), 1, &hosts(), DAYS + 10, true).unwrap();
    tls.reload().unwrap();
    assert_eq!(tls.generation(), generation + 1);
    assert!(tls.current().not_after > before.not_after, "the new certificate is in use");
    assert_eq!(tls.counters().reloads.get(), 1);

    let renewed = tls.current();
    std::fs::write(a.path().join("node-1-key.pem"), "not a key").unwrap();
    assert!(tls.reload().is_err());
    assert!(Arc::ptr_eq(&renewed, &tls.current()), "a broken reload replaced the configs in use");
    assert_eq!(tls.generation(), generation + 1);
    assert_eq!(tls.counters().reload_failures.get(), 1);
}
