//! Session resumption through the listener's own accept path: a second connection resumes
//! (TLS 1.3 tickets, TLS 1.2 session IDs), a resumed session speaks for the same node or client
//! as its full handshake and never for more, a reload forgets every session, and a node's
//! dialler resumes only with the member it means to reach.
use std::path::Path;
use std::time::Duration;

use leaf_api::identity::CertIdentity;
use rustls::client::Resumption;
use rustls::{ClientConfig, HandshakeKind};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsConnector;

use super::tests::{chain, config, load, pki};
use super::*;

/// What one connection looked like from both ends.
#[derive(Debug)]
struct Round {
    client: Option<HandshakeKind>,
    server: Option<HandshakeKind>,
    identity: Option<CertIdentity>,
}

/// One connection from `client` to a listener of `tls`, which answers one byte; the client
/// reads it (and the tickets before it), then closes. `Err` when either side failed.
async fn connect(tls: &Tls, client: &Arc<ClientConfig>) -> Result<Round, String> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = async {
        let (stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let accepted = accept::accept(tls, stream, Duration::from_secs(5)).await.map_err(|e| e.to_string())?;
        let kind = accepted.stream.get_ref().1.handshake_kind();
        let mut stream = accepted.stream;
        stream.write_all(b"x").await.map_err(|e| e.to_string())?;
        stream.flush().await.map_err(|e| e.to_string())?;
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest).await;
        Ok::<_, String>((kind, accepted.identity))
    };
    let dial = async {
        let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        let name = ServerName::try_from("localhost").map_err(|e| e.to_string())?;
        let mut stream = TlsConnector::from(client.clone()).connect(name, tcp).await.map_err(|e| e.to_string())?;
        let mut one = [0u8; 1];
        stream.read_exact(&mut one).await.map_err(|e| e.to_string())?;
        let kind = stream.get_ref().1.handshake_kind();
        let _ = stream.shutdown().await;
        Ok::<_, String>(kind)
    };
    let (server, client) = tokio::join!(server, dial);
    let (client, (server, identity)) = (client?, server?);
    Ok(Round { client, server, identity })
}

/// A client config of the cluster CA in `dir`, presenting the `name` pair if given; TLS 1.2
/// only with session IDs when `tls12`.
fn client(dir: &Path, name: Option<&str>, tls12: bool) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(chain(&dir.join("ca.pem")));
    let versions: &[&rustls::SupportedProtocolVersion] =
        if tls12 { &[&rustls::version::TLS12] } else { rustls::DEFAULT_VERSIONS };
    let b = ClientConfig::builder_with_provider(load::provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match name {
        Some(name) => {
            let key = PrivateKeyDer::from_pem_file(dir.join(format!("{name}-key.pem"))).unwrap();
            b.with_client_auth_cert(chain(&dir.join(format!("{name}.pem"))), key).unwrap()
        }
        None => b.with_no_client_auth(),
    };
    if tls12 {
        config.resumption =
            Resumption::in_memory_sessions(16).tls12_resumption(rustls::client::Tls12Resumption::SessionIdOnly);
    }
    Arc::new(config)
}

fn full_then_resumed(first: &Round, second: &Round) {
    assert_eq!(first.client, Some(HandshakeKind::Full), "{first:?}");
    assert_eq!(first.server, Some(HandshakeKind::Full), "{first:?}");
    assert_eq!(second.client, Some(HandshakeKind::Resumed), "{second:?}");
    assert_eq!(second.server, Some(HandshakeKind::Resumed), "{second:?}");
}

#[tokio::test]
async fn a_second_connection_resumes_as_the_same_node_or_client() {
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path());
    // Client certificates required, as on a cluster's internal traffic.
    let tls = load(&TlsConfig { require_client_cert: true, ..config(dir.path(), 1) }, 1).unwrap();
    let ticketer = &tls.current().server.ticketer;
    assert!(ticketer.enabled(), "stateless tickets are on");
    assert_eq!(ticketer.lifetime(), 12 * 3600, "a key every 6 h, tickets of the previous one accepted");
    for (name, who) in [("node-2", CertIdentity::Node(2)), ("client-ops", CertIdentity::Client("ops".into()))] {
        for tls12 in [false, true] {
            let c = client(dir.path(), Some(name), tls12);
            let first = connect(&tls, &c).await.unwrap();
            let second = connect(&tls, &c).await.unwrap();
            full_then_resumed(&first, &second);
            assert_eq!(first.identity.as_ref(), Some(&who), "{name} tls12={tls12}");
            assert_eq!(second.identity.as_ref(), Some(&who), "{name} tls12={tls12}: resumed as another");
        }
    }
    assert_eq!(tls.counters().full_handshakes.get(), 4);
    assert_eq!(tls.counters().resumed_handshakes.get(), 4);

    // Without a certificate: refused at the full handshake, so nothing to resume.
    assert!(connect(&tls, &client(dir.path(), None, false)).await.is_err());
}

#[tokio::test]
async fn a_session_without_a_certificate_resumes_as_nobody() {
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path());
    let tls = load(&config(dir.path(), 1), 1).unwrap();
    let anonymous = client(dir.path(), None, false);
    let first = connect(&tls, &anonymous).await.unwrap();
    let second = connect(&tls, &anonymous).await.unwrap();
    full_then_resumed(&first, &second);
    assert_eq!((first.identity, second.identity), (None, None));
}

#[tokio::test]
async fn a_reload_forgets_every_session() {
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path());
    let tls = load(&config(dir.path(), 1), 1).unwrap();
    let c = client(dir.path(), Some("node-2"), false);
    connect(&tls, &c).await.unwrap();
    assert_eq!(connect(&tls, &c).await.unwrap().server, Some(HandshakeKind::Resumed));
    tls.reload().unwrap();
    // The client still holds tickets of the old generation: none is accepted.
    let after = connect(&tls, &c).await.unwrap();
    assert_eq!(after.server, Some(HandshakeKind::Full), "{after:?}");
    assert_eq!(after.identity, Some(CertIdentity::Node(2)));
    assert_eq!(connect(&tls, &c).await.unwrap().server, Some(HandshakeKind::Resumed));
}

#[tokio::test]
async fn a_dialler_resumes_only_with_the_member_it_means() {
    let dir = tempfile::tempdir().unwrap();
    pki(dir.path());
    let server = load(&config(dir.path(), 1), 1).unwrap();
    let dialler = load(&config(dir.path(), 2), 2).unwrap();
    let loaded = dialler.current();
    // Node 2 dials node 1 twice: the second connection resumes, both as node 2.
    let to_one = Arc::new(loaded.client_for(1));
    let first = connect(&server, &to_one).await.unwrap();
    let second = connect(&server, &to_one).await.unwrap();
    full_then_resumed(&first, &second);
    assert_eq!(second.identity, Some(CertIdentity::Node(2)));
    // The config for member 3 shares the session store (same name, `localhost`), but a session
    // verified as node 1 is not offered for node 3: the full handshake finds node 1 and fails.
    let to_three = Arc::new(loaded.client_for(3));
    let e = connect(&server, &to_three).await.unwrap_err();
    assert!(e.contains("not for node 3") || e.contains("certificate"), "{e}");
}
