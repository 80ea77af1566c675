//! Tests of `leaf certs`: what it writes verifies with rustls (webpki) against the CA file, a
//! TLS handshake with the written keys succeeds and names the right identity, the fields
//! read back with x509-parser, files are only replaced when asked, and bad input writes
//! nothing.
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leaf_api::identity::CertIdentity;
use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, RootCertStore};
use rustls_pki_types::pem::PemObject;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::prelude::X509Certificate;

use super::*;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub(super) fn cert(path: &Path) -> CertificateDer<'static> {
    CertificateDer::pem_file_iter(path).unwrap().next().unwrap().unwrap()
}

fn key(path: &Path) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_file(path).unwrap()
}

fn roots(ca_dir: &Path) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    roots.add(cert(&ca_dir.join(CA_CERT_FILE))).unwrap();
    Arc::new(roots)
}

fn server_verifier(ca_dir: &Path) -> Arc<WebPkiServerVerifier> {
    WebPkiServerVerifier::builder_with_provider(roots(ca_dir), provider()).build().unwrap()
}

fn client_verifier(ca_dir: &Path) -> Arc<dyn ClientCertVerifier> {
    WebPkiClientVerifier::builder_with_provider(roots(ca_dir), provider()).build().unwrap()
}

pub(super) fn verify_server(ca_dir: &Path, cert_path: &Path, name: &str) -> Result<(), rustls::Error> {
    let name = ServerName::try_from(name.to_string()).unwrap();
    server_verifier(ca_dir).verify_server_cert(&cert(cert_path), &[], &name, &[], UnixTime::now()).map(|_| ())
}

pub(super) fn verify_client(ca_dir: &Path, cert_path: &Path) -> Result<(), rustls::Error> {
    client_verifier(ca_dir).verify_client_cert(&cert(cert_path), &[], UnixTime::now()).map(|_| ())
}

pub(super) fn parse(der: &[u8]) -> X509Certificate<'_> {
    x509_parser::parse_x509_certificate(der).unwrap().1
}

pub(super) fn identity(x509: &X509Certificate<'_>) -> Option<CertIdentity> {
    let san = x509.subject_alternative_name().unwrap().unwrap();
    CertIdentity::from_uris(san.value.general_names.iter().filter_map(|n| match n {
        GeneralName::URI(u) => Some(*u),
        _ => None,
    }))
}

fn common_name(x509: &X509Certificate<'_>) -> String {
    x509.subject().iter_common_name().next().unwrap().as_str().unwrap().to_string()
}

fn key_id(x509: &X509Certificate<'_>, authority: bool) -> Option<Vec<u8>> {
    x509.iter_extensions().find_map(|e| match e.parsed_extension() {
        ParsedExtension::SubjectKeyIdentifier(k) if !authority => Some(k.0.to_vec()),
        ParsedExtension::AuthorityKeyIdentifier(a) if authority => a.key_identifier.as_ref().map(|k| k.0.to_vec()),
        _ => None,
    })
}

fn now_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Runs a TLS handshake in memory: `client` presents `client_files` (if any) and expects
/// `name`; `server` presents `server_files` and verifies client certificates with `ca_dir`'s
/// CA. The identity of the certificate the server received.
fn handshake(
    ca_dir: &Path,
    server_files: &Written,
    client_files: Option<&Written>,
    name: &str,
) -> Result<Option<CertIdentity>, rustls::Error> {
    let server = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(client_verifier(ca_dir))
        .with_single_cert(vec![cert(&server_files.cert)], key(&server_files.key))?;
    let client = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(ca_dir));
    let client = match client_files {
        Some(w) => client.with_client_auth_cert(vec![cert(&w.cert)], key(&w.key))?,
        None => client.with_no_client_auth(),
    };
    let name = ServerName::try_from(name.to_string()).unwrap();
    let mut c = rustls::ClientConnection::new(Arc::new(client), name)?;
    let mut s = rustls::ServerConnection::new(Arc::new(server))?;
    for _ in 0..20 {
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            s.read_tls(&mut rd).unwrap();
            s.process_new_packets()?;
        }
        let mut buf = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut buf).unwrap();
        }
        let mut rd = &buf[..];
        while !rd.is_empty() {
            c.read_tls(&mut rd).unwrap();
            c.process_new_packets()?;
        }
        if !c.is_handshaking() && !s.is_handshaking() {
            return Ok(s.peer_certificates().and_then(|chain| identity(&parse(&chain[0]))));
        }
    }
    panic!("the handshake did not finish");
}

/// The file names in `dir`, sorted.
pub(super) fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[test]
fn node_and_client_certificates_verify_against_the_ca_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let ca = create_ca(dir, 30, false).unwrap();
    assert_eq!(ca, Written { cert: dir.join("ca.pem"), key: dir.join("ca-key.pem") });
    let hosts: Vec<String> =
        ["leaf-1.example.test", "localhost", "127.0.0.1", "::1", "[fd00::7]", "localhost"].map(String::from).to_vec();
    let node = issue_node(dir, 1, &hosts, 20, false).unwrap();
    assert_eq!(node, Written { cert: dir.join("node-1.pem"), key: dir.join("node-1-key.pem") });
    let client = issue_client(dir, "ops", 20, false).unwrap();
    assert_eq!(client, Written { cert: dir.join("client-ops.pem"), key: dir.join("client-ops-key.pem") });

    // As a server: valid for every host given, DNS and IP, and for nothing else.
    for name in ["leaf-1.example.test", "localhost", "127.0.0.1", "::1", "fd00::7"] {
        verify_server(dir, &node.cert, name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for name in ["leaf-2.example.test", "example.test", "127.0.0.2", "::2"] {
        match verify_server(dir, &node.cert, name) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    // As a client: the node (to its peers) and the client.
    verify_client(dir, &node.cert).unwrap();
    verify_client(dir, &client.cert).unwrap();
    // A client certificate is no server certificate (clientAuth only).
    assert!(verify_server(dir, &client.cert, "localhost").is_err());
    // The CA itself is no end-entity certificate.
    assert!(verify_client(dir, &ca.cert).is_err());

    // The written keys belong to their certificates: mutual TLS handshakes succeed, and the
    // server reads the client's identity from its certificate.
    assert_eq!(handshake(dir, &node, Some(&client), "localhost").unwrap(), Some(CertIdentity::Client("ops".into())));
    assert_eq!(handshake(dir, &node, Some(&node), "127.0.0.1").unwrap(), Some(CertIdentity::Node(1)));
    // A client without a certificate is refused by a server that requires one.
    assert!(handshake(dir, &node, None, "localhost").is_err());
}

#[test]
fn a_certificate_from_another_ca_is_refused() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    create_ca(a.path(), 30, false).unwrap();
    create_ca(b.path(), 30, false).unwrap();
    let node = issue_node(b.path(), 2, &["localhost".into()], 20, false).unwrap();
    let client = issue_client(b.path(), "ops", 20, false).unwrap();
    let (ca_a, ca_b) = (cert(&a.path().join(CA_CERT_FILE)), cert(&b.path().join(CA_CERT_FILE)));
    assert_ne!(parse(&ca_a).subject().as_raw(), parse(&ca_b).subject().as_raw(), "two CAs share a name");
    verify_server(b.path(), &node.cert, "localhost").unwrap();
    for result in [
        verify_server(a.path(), &node.cert, "localhost"),
        verify_client(a.path(), &node.cert),
        verify_client(a.path(), &client.cert),
    ] {
        match result {
            Err(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(handshake(a.path(), &node, None, "localhost").is_err());
}

#[test]
fn identities_names_and_extensions_read_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let start = now_secs();
    let ca = create_ca(dir, 100, false).unwrap();
    let node = issue_node(dir, 7, &["leaf-7.example.test".into(), "10.0.0.7".into()], 50, false).unwrap();
    let client = issue_client(dir, "ops.team-1_a", 50, false).unwrap();
    let (ca_der, node_der, client_der) = (cert(&ca.cert), cert(&node.cert), cert(&client.cert));
    let (ca_x, node_x, client_x) = (parse(&ca_der), parse(&node_der), parse(&client_der));

    // The CA: self-signed, a CA with pathlen 0, signs certificates and CRLs, days long.
    assert_eq!(common_name(&ca_x), "leaf development CA");
    assert_eq!(ca_x.issuer().as_raw(), ca_x.subject().as_raw());
    let bc = ca_x.basic_constraints().unwrap().unwrap();
    assert!(bc.critical && bc.value.ca);
    assert_eq!(bc.value.path_len_constraint, Some(0));
    let ku = ca_x.key_usage().unwrap().unwrap().value;
    assert!(ku.key_cert_sign() && ku.crl_sign() && ku.digital_signature());
    let validity = ca_x.validity();
    assert!((validity.not_before.timestamp() - (start - 3600)).abs() < 60);
    assert!((validity.not_after.timestamp() - (start + 100 * 86_400)).abs() < 60);
    let ca_ski = key_id(&ca_x, false).expect("the CA has a subject key ID");

    // The node: its identity URI, its hosts, server and client auth, issued by ca.pem.
    assert_eq!(identity(&node_x), Some(CertIdentity::Node(7)));
    assert_eq!(common_name(&node_x), "leaf node 7");
    let san = node_x.subject_alternative_name().unwrap().unwrap();
    let names = &san.value.general_names;
    assert!(names.contains(&GeneralName::DNSName("leaf-7.example.test")), "{names:?}");
    assert!(names.contains(&GeneralName::IPAddress(&[10, 0, 0, 7])), "{names:?}");
    assert!(names.contains(&GeneralName::URI("urn:leaf:node:7")), "{names:?}");
    assert_eq!(names.len(), 3, "{names:?}");
    let eku = node_x.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.server_auth && eku.client_auth);
    assert!(!node_x.is_ca());
    assert!(node_x.key_usage().unwrap().unwrap().value.digital_signature());
    assert!((node_x.validity().not_after.timestamp() - (start + 50 * 86_400)).abs() < 60);
    assert!((node_x.validity().not_before.timestamp() - (start - 3600)).abs() < 60);

    // The client: its identity URI only, client auth only, CN = its name.
    assert_eq!(identity(&client_x), Some(CertIdentity::Client("ops.team-1_a".into())));
    assert_eq!(common_name(&client_x), "ops.team-1_a");
    assert_eq!(client_x.subject_alternative_name().unwrap().unwrap().value.general_names.len(), 1);
    let eku = client_x.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);

    for issued in [&node_x, &client_x] {
        assert_eq!(issued.issuer().as_raw(), ca_x.subject().as_raw());
        assert_eq!(key_id(issued, true).as_ref(), Some(&ca_ski), "the authority key ID is the CA's");
        assert!(issued.tbs_certificate.serial.bits() > 100, "a random serial");
    }
    assert_ne!(node_x.raw_serial(), client_x.raw_serial());
    assert_ne!(ca_x.raw_serial(), node_x.raw_serial());
}

#[test]
fn a_ca_brought_in_from_elsewhere_signs_with_its_own_name_and_key_id() {
    // A CA that `leaf certs ca` did not write: another name, unconstrained, its own key ID.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::OrganizationName, "Example Corp");
    params.distinguished_name.push(DnType::CommonName, "Example Internal CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    params.key_identifier_method = rcgen::KeyIdMethod::PreSpecified(vec![0xab; 20]);
    params.not_before = (SystemTime::now() - Duration::from_secs(60)).into();
    params.not_after = (SystemTime::now() + Duration::from_secs(1000 * 86_400)).into();
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
    let ca = params.self_signed(&key).unwrap();
    std::fs::write(dir.join(CA_CERT_FILE), ca.pem()).unwrap();
    std::fs::write(dir.join(CA_KEY_FILE), key.serialize_pem()).unwrap();

    let node = issue_node(dir, 3, &["leaf-3".into()], 825, false).unwrap();
    verify_server(dir, &node.cert, "leaf-3").unwrap();
    verify_client(dir, &node.cert).unwrap();
    let der = cert(&node.cert);
    let x = parse(&der);
    assert_eq!(key_id(&x, true), Some(vec![0xab; 20]));
    assert_eq!(x.issuer().iter_organization().next().unwrap().as_str().unwrap(), "Example Corp");
}

#[cfg(unix)]
#[test]
fn keys_are_private_and_files_are_replaced_only_with_force() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new/nested");
    let ca = create_ca(&dir, 30, false).unwrap();
    let node = issue_node(&dir, 1, &["localhost".into()], 20, false).unwrap();
    let client = issue_client(&dir, "ops", 20, false).unwrap();
    for w in [&ca, &node, &client] {
        assert_eq!(std::fs::metadata(&w.key).unwrap().permissions().mode() & 0o777, 0o600, "{:?}", w.key);
        assert_eq!(std::fs::metadata(&w.cert).unwrap().permissions().mode() & 0o077 & !0o044, 0, "{:?}", w.cert);
    }
    let expected = ["ca-key.pem", "ca.pem", "client-ops-key.pem", "client-ops.pem", "node-1-key.pem", "node-1.pem"]
        .map(String::from);
    assert_eq!(listing(&dir), expected, "no temporary file is left behind");

    let read = |w: &Written| (std::fs::read(&w.cert).unwrap(), std::fs::read(&w.key).unwrap());
    for (w, again) in [
        (&ca, Box::new(|force| create_ca(&dir, 30, force)) as Box<dyn Fn(bool) -> Result<Written, CertsError>>),
        (&node, Box::new(|force| issue_node(&dir, 1, &["localhost".into()], 20, force))),
        (&client, Box::new(|force| issue_client(&dir, "ops", 20, force))),
    ] {
        let before = read(w);
        match again(false) {
            Err(e @ CertsError::Exists { .. }) => {
                let text = e.to_string();
                assert!(text.contains(&*w.key.to_string_lossy()) && text.contains("--force"), "{text}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(read(w), before, "a refused run changed {:?}", w.cert);
        assert_eq!(again(true).unwrap(), *w);
        let after = read(w);
        assert!(after.0 != before.0 && after.1 != before.1, "--force did not replace {:?}", w.cert);
        assert_eq!(std::fs::metadata(&w.key).unwrap().permissions().mode() & 0o777, 0o600);
    }
    assert_eq!(listing(&dir), expected);
    // Replaced with --force, the CA signs what comes next; the old node certificate is its
    // predecessor's.
    let node2 = issue_node(&dir, 2, &["localhost".into()], 20, false).unwrap();
    verify_server(&dir, &node2.cert, "localhost").unwrap();

    // One file of the pair present: refused, and the other is not written either.
    std::fs::remove_file(&node2.cert).unwrap();
    match issue_node(&dir, 2, &["localhost".into()], 20, false) {
        Err(CertsError::Exists { path }) => assert_eq!(path, node2.key),
        other => panic!("{other:?}"),
    }
    assert!(!node2.cert.exists());
}

#[test]
fn host_names_and_addresses_become_sans() {
    assert_eq!(host_san("127.0.0.1").unwrap(), SanType::IpAddress("127.0.0.1".parse().unwrap()));
    assert_eq!(host_san("[::1]").unwrap(), SanType::IpAddress("::1".parse().unwrap()));
    assert_eq!(host_san("fd00::1").unwrap(), SanType::IpAddress("fd00::1".parse().unwrap()));
    assert_eq!(host_san("Leaf-1.svc").unwrap(), SanType::DnsName("Leaf-1.svc".try_into().unwrap()));
    assert!(host_san(&format!("{}.b", "a".repeat(63))).is_ok());
    let long = ["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(62)].join(".");
    assert_eq!(long.len(), 254);
    for bad in [
        "",
        "a b",
        "a..b",
        ".a",
        "a.",
        "-a",
        "a-",
        "a.-b",
        "leaf:8080",
        "127.0.0.1:8080",
        "1.2.3",
        "999.1.1.1",
        "a_b",
        "*.example",
        "é.example",
        "[127.0.0.1]",
        "[leaf]",
        &format!("{}.b", "a".repeat(64)),
        &long,
    ] {
        match host_san(bad) {
            Err(CertsError::BadHost { host, .. }) => assert_eq!(host, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn bad_input_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let hosts = ["localhost".to_string()];
    // No CA yet.
    for result in [issue_node(dir, 1, &hosts, 20, false), issue_client(dir, "ops", 20, false)] {
        match result {
            Err(e @ CertsError::NoCa { .. }) => {
                assert!(e.to_string().contains(&format!("run `leaf certs ca --dir {}` first", dir.display())), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(listing(dir).is_empty());
    for days in [0, MAX_DAYS + 1] {
        assert!(matches!(create_ca(dir, days, false), Err(CertsError::BadDays(d)) if d == days));
    }
    assert!(listing(dir).is_empty());
    create_ca(dir, 10, false).unwrap();
    let ca_files = listing(dir);
    assert!(matches!(issue_node(dir, 1, &[], 5, false), Err(CertsError::NoHost)));
    assert!(matches!(issue_node(dir, 1, &["a b".into()], 5, false), Err(CertsError::BadHost { .. })));
    assert!(matches!(issue_node(dir, 1, &["ok".into(), "".into()], 5, false), Err(CertsError::BadHost { .. })));
    assert!(matches!(issue_node(dir, 0, &hosts, 5, false), Err(CertsError::BadId)));
    assert!(matches!(issue_node(dir, 1, &hosts, 0, false), Err(CertsError::BadDays(0))));
    assert!(matches!(issue_client(dir, "ops", MAX_DAYS + 1, false), Err(CertsError::BadDays(_))));
    for name in ["", "a b", "a/b", "../x", &"x".repeat(65)] {
        assert!(matches!(issue_client(dir, name, 5, false), Err(CertsError::BadName(_))), "{name:?}");
    }
    // Longer than the CA lives.
    match issue_node(dir, 1, &hosts, 11, false) {
        Err(e @ CertsError::CaExpiresFirst { .. }) => assert!(e.to_string().contains("fewer --days"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(listing(dir), ca_files);
}

#[test]
fn a_broken_ca_is_refused_without_echoing_its_key() {
    let (tmp, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let dir = tmp.path();
    let hosts = ["localhost".to_string()];
    create_ca(dir, 10, false).unwrap();
    // Only the certificate.
    std::fs::rename(dir.join(CA_KEY_FILE), other.path().join("saved-key.pem")).unwrap();
    match issue_node(dir, 1, &hosts, 5, false) {
        Err(CertsError::NoCa { missing, .. }) => assert_eq!(missing, dir.join(CA_KEY_FILE)),
        other => panic!("{other:?}"),
    }
    // A key that is not PEM: refused, and its text never appears in the error.
    std::fs::write(dir.join(CA_KEY_FILE), "-----BEGIN PRIVATE KEY-----\nTOPSECRET!!\n-----END PRIVATE KEY-----\n")
        .unwrap();
    let e = issue_node(dir, 1, &hosts, 5, false).unwrap_err();
    assert!(matches!(e, CertsError::BadCa { .. }), "{e:?}");
    assert!(!format!("{e} {e:?}").contains("TOPSECRET"), "{e}");
    // Another CA's key.
    create_ca(other.path(), 10, false).unwrap();
    std::fs::copy(other.path().join(CA_KEY_FILE), dir.join(CA_KEY_FILE)).unwrap();
    match issue_client(dir, "ops", 5, false) {
        Err(e @ CertsError::BadCa { .. }) => assert!(e.to_string().contains("does not belong"), "{e}"),
        other => panic!("{other:?}"),
    }
    // A node certificate in place of the CA.
    let node = issue_node(other.path(), 1, &hosts, 5, false).unwrap();
    std::fs::copy(&node.cert, dir.join(CA_CERT_FILE)).unwrap();
    std::fs::copy(&node.key, dir.join(CA_KEY_FILE)).unwrap();
    match issue_client(dir, "ops", 5, false) {
        Err(e @ CertsError::BadCa { .. }) => assert!(e.to_string().contains("not a CA"), "{e}"),
        other => panic!("{other:?}"),
    }
    // Not PEM at all.
    std::fs::write(dir.join(CA_CERT_FILE), "hello").unwrap();
    assert!(matches!(issue_client(dir, "ops", 5, false), Err(CertsError::BadCa { .. })));
    assert_eq!(listing(dir), [CA_KEY_FILE, CA_CERT_FILE]);
}
