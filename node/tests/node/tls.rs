//! TLS on one node: HTTPS with the right and the wrong CA, plaintext on the TLS port, mutual
//! TLS on the internal endpoints (only a member node's certificate from the cluster CA),
//! client certificates for admin and as a requirement, and certificate rotation under load.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use leaf_node::certs::{create_ca, issue_client, issue_node};
use leaf_node::config::TlsConfig;
use leaf_node::internals::{ops::OpKind, CallError, PeerClient};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use std::time::Duration;

use crate::support::*;
use leaf_api::types::SnowflakeState;
use leaf_api::{ErrorBody, ErrorCode};
use leaf_client::Client;
use leaf_node::config::Config;
use leaf_node::NodeHandle;
use tempfile::TempDir;

const SECRET: &str = "tls-test-cluster-secret-0123456789";
const DAYS: u32 = 30;

/// A CA in its own directory, with node certificates 1 and 9 and client certificate `ops`.
pub(super) fn pki() -> TempDir {
    let dir = tempfile::tempdir().unwrap();
    let hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    create_ca(dir.path(), 3650, false).unwrap();
    for id in [1, 9] {
        issue_node(dir.path(), id, &hosts, DAYS, false).unwrap();
    }
    issue_client(dir.path(), "ops", DAYS, false).unwrap();
    dir
}

fn tls(pki: &Path) -> TlsConfig {
    TlsConfig {
        cert: Some(pki.join("node-1.pem")),
        key: Some(pki.join("node-1-key.pem")),
        ca: Some(pki.join("ca.pem")),
        ..TlsConfig::default()
    }
}

/// A TLS node (node 1) with a cluster secret; `edit` adjusts the config first.
pub(super) async fn start_tls(data: &TempDir, pki: &Path, edit: impl FnOnce(&mut Config)) -> (NodeHandle, String) {
    let mut cfg = Config { tls: tls(pki), cluster_secret: Some(SECRET.into()), ..config(data) };
    edit(&mut cfg);
    let node = leaf_node::start(cfg).await.expect("TLS node starts");
    assert!(node.wait_ready(Duration::from_secs(10)).await, "TLS node not ready");
    let url = format!("https://{}", node.http_addr());
    (node, url)
}

pub(super) fn https_client(url: &str, ca: &Path) -> Client {
    let timeout = Duration::from_secs(10);
    Client::builder([url]).ca_file(ca).retries(0).timeout(timeout).deadline(timeout).build().unwrap()
}

/// A rustls client config trusting `ca`, presenting `cert` (a `(chain, key)` file pair).
fn peer_config(ca: &Path, cert: Option<(PathBuf, PathBuf)>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match cert {
        Some((chain, key)) => {
            let chain = CertificateDer::pem_file_iter(chain).unwrap().collect::<Result<Vec<_>, _>>().unwrap();
            b.with_client_auth_cert(chain, PrivateKeyDer::from_pem_file(key).unwrap()).unwrap()
        }
        None => b.with_no_client_auth(),
    })
}

fn pair(dir: &Path, name: &str) -> Option<(PathBuf, PathBuf)> {
    Some((dir.join(format!("{name}.pem")), dir.join(format!("{name}-key.pem"))))
}

/// Every internal endpoint.
fn internal_paths() -> Vec<&'static str> {
    use leaf_node::internals::{
        PATH_APPEND, PATH_PEER_STATUS, PATH_PRE_VOTE, PATH_SNAPSHOT, PATH_TAKE_OVER, PATH_TIME, PATH_VOTE,
    };
    let mut paths =
        vec![PATH_APPEND, PATH_VOTE, PATH_SNAPSHOT, PATH_TIME, PATH_PEER_STATUS, PATH_PRE_VOTE, PATH_TAKE_OVER];
    paths.extend(OpKind::ALL.map(OpKind::path));
    paths
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {name} in /metrics"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_serves_and_plaintext_on_the_tls_port_gets_a_clear_400() {
    let (pki, data) = (pki(), tempfile::tempdir().unwrap());
    let (node, url) = start_tls(&data, pki.path(), |_| {}).await;
    let c = https_client(&url, &pki.path().join("ca.pem"));
    assert_eq!(get_ids(&c, "leaf-segment-test", Some(10)).await.len(), 10);
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    assert_eq!(snowflake_ids(&c, Some(3)).await.len(), 3);
    assert!(health(&c).await.ready);

    // Raw plaintext HTTP: a complete 400 saying to use https, at once (not a hang or a reset).
    let started = std::time::Instant::now();
    let mut s = tokio::net::TcpStream::connect(node.http_addr()).await.unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut answer)).await.unwrap().unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    let body: ErrorBody = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body.code, ErrorCode::InvalidRequest);
    assert!(body.message.contains("https://"), "{}", body.message);

    // The same through the client with an http:// URL: the node's words reach the caller.
    let plain = client(&format!("http://{}", node.http_addr()), None);
    let e = plain.segment_id("leaf-segment-test").await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidRequest), "{e}");
    assert!(e.to_string().contains("https://"), "{e}");
    let m = c.metrics().await.unwrap();
    assert!(metric(&m, "leaf_tls_plaintext_refused_total") >= 2.0, "{m}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusting_another_ca_fails_with_a_clear_error() {
    let (pki, other, data) = (pki(), pki(), tempfile::tempdir().unwrap());
    let (node, url) = start_tls(&data, pki.path(), |_| {}).await;
    let started = std::time::Instant::now();
    let e = https_client(&url, &other.path().join("ca.pem")).segment_id("leaf-segment-test").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let text = e.to_string();
    assert!(text.contains("not signed by a CA this client trusts"), "unclear: {text}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_rpcs_need_a_member_node_certificate_from_the_cluster_ca() {
    let (pki, other, data) = (pki(), pki(), tempfile::tempdir().unwrap());
    let (node, url) = start_tls(&data, pki.path(), |_| {}).await;
    let addr = node.http_addr().to_string();
    let ca = pki.path().join("ca.pem");
    let call = |cfg: Arc<rustls::ClientConfig>, path: &'static str| {
        let addr = addr.clone();
        async move {
            let peer = PeerClient::with_client_config(Some(SECRET), cfg);
            peer.call::<_, serde_json::Value>(1, &addr, path, &(), Duration::from_secs(5)).await
        }
    };
    // Its own certificate is a member's: the clock RPC answers.
    let own = PeerClient::with_client_config(Some(SECRET), peer_config(&ca, pair(pki.path(), "node-1")));
    let now: i64 = own.call(1, &addr, leaf_node::internals::PATH_TIME, &(), Duration::from_secs(5)).await.unwrap();
    assert!(now > 0);

    for path in internal_paths() {
        // Same CA, but node 9 is no member.
        match call(peer_config(&ca, pair(pki.path(), "node-9")), path).await {
            Err(CallError::Refused { status: 403, body, .. }) => assert!(body.contains("node 9"), "{body}"),
            other => panic!("{path}: node 9 got {other:?}"),
        }
        // A client certificate, or none: not a node.
        for cert in [pair(pki.path(), "client-ops"), None] {
            match call(peer_config(&ca, cert.clone()), path).await {
                Err(CallError::Refused { status: 401, .. }) => {}
                other => panic!("{path}: {cert:?} got {other:?}"),
            }
        }
        // Node 1's identity from another CA: the handshake itself is refused.
        match call(peer_config(&ca, pair(other.path(), "node-1")), path).await {
            Err(e @ (CallError::Transport { .. } | CallError::Unreachable { .. })) => {
                assert!(!e.surely_not_delivered() || matches!(e, CallError::Unreachable { .. }))
            }
            other => panic!("{path}: a certificate of another CA got {other:?}"),
        }
    }
    // The client sees the handshake fail before the node has counted it: wait for the count.
    crate::support::eventually("every handshake failure counted", Duration::from_secs(10), || async {
        let m = https_client(&url, &ca).metrics().await.unwrap();
        let failures = metric(&m, "leaf_tls_handshake_failures_total");
        if failures >= internal_paths().len() as f64 {
            Ok(())
        } else {
            Err(format!("{failures} counted:\n{m}"))
        }
    })
    .await;
    node.shutdown().await;
}

/// A peer that connects again resumes its TLS session (no certificate is sent on the resumed
/// handshake), and the internal RPCs still tell who it is from the certificate of the session:
/// a member is answered, another node gets 403, a client certificate or none 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn internal_rpcs_identify_the_caller_on_a_resumed_session() {
    let (pki, data) = (pki(), tempfile::tempdir().unwrap());
    let (node, url) = start_tls(&data, pki.path(), |_| {}).await;
    let addr = node.http_addr().to_string();
    let ca = pki.path().join("ca.pem");
    let resumed = || async {
        let m = https_client(&url, &ca).metrics().await.unwrap();
        metric(&m, "leaf_tls_resumed_handshakes_total")
    };
    for (cert, status) in [("node-1", None), ("node-9", Some(403)), ("client-ops", Some(401)), ("none", Some(401))] {
        let config = peer_config(&ca, if cert == "none" { None } else { pair(pki.path(), cert) });
        let before = resumed().await;
        for round in ["full", "resumed"] {
            // A new client each time: a new connection, with the session store of `config`.
            let peer = PeerClient::with_client_config(Some(SECRET), config.clone());
            let answer =
                peer.call::<_, i64>(1, &addr, leaf_node::internals::PATH_TIME, &(), Duration::from_secs(5)).await;
            match (answer, status) {
                (Ok(now), None) => assert!(now > 0),
                (Err(CallError::Refused { status: got, .. }), Some(want)) if got == want => {}
                (other, _) => panic!("{cert}, {round} handshake: {other:?}"),
            }
        }
        assert_eq!(resumed().await, before + 1.0, "{cert}: the second connection did not resume");
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_authenticate_admin_and_can_be_required() {
    let (pki, data) = (pki(), tempfile::tempdir().unwrap());
    let (node, url) = start_tls(&data, pki.path(), |c| {
        c.admin_token = Some(TOKEN.into());
        c.tls.admin_clients = vec!["ops".into()];
        c.tls.require_client_cert = true;
    })
    .await;
    let ca = pki.path().join("ca.pem");
    let timeout = Duration::from_secs(10);
    let with_cert = |name: &str| {
        let (cert, key) = pair(pki.path(), name).unwrap();
        Client::builder([url.as_str()])
            .ca_file(&ca)
            .client_cert_files(cert, key)
            .retries(0)
            .timeout(timeout)
            .deadline(timeout)
            .build()
            .unwrap()
    };
    // `ops` is an admin by certificate, without the token.
    create_tag(&with_cert("client-ops"), "by-cert", 10).await;
    // A node's certificate is no admin: the token is still needed.
    let e = with_cert("node-9").tags().await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Unauthorized), "{e}");
    assert_eq!(get_ids(&with_cert("node-9"), "by-cert", None).await.len(), 1);
    // No certificate at all: refused in the handshake, with a clear error.
    let e = https_client(&url, &ca).segment_id("by-cert").await.unwrap_err();
    assert!(e.to_string().contains("certificate"), "unclear: {e}");
    node.shutdown().await;
}

/// Keep-alive clients and clients opening a new connection per request run while the node's
/// certificate is replaced four times: no request fails, and new handshakes end up with the
/// last certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_rotate_under_load_with_zero_failed_requests() {
    let (pki, data) = (pki(), tempfile::tempdir().unwrap());
    let (node, url) = start_tls(&data, pki.path(), |c| c.tls.reload_interval_ms = 100).await;
    let ca = pki.path().join("ca.pem");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut load = Vec::new();
    for worker in 0..4 {
        let (url, ca, stop, ok, failed) = (url.clone(), ca.clone(), stop.clone(), ok.clone(), failed.clone());
        load.push(tokio::spawn(async move {
            let keep = https_client(&url, &ca);
            while !stop.load(Ordering::Relaxed) {
                // Workers 0 and 1 reuse one connection; 2 and 3 handshake for every request.
                let c = if worker < 2 { keep.clone() } else { https_client(&url, &ca) };
                match c.segment_id("leaf-segment-test").await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        eprintln!("worker {worker}: {e}");
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        }));
    }
    let hosts = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let watcher = https_client(&url, &ca);
    for round in 1..=4u32 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        issue_node(pki.path(), 1, &hosts, DAYS + round, true).unwrap();
        let picked_up =
            || async { metric(&watcher.metrics().await.unwrap(), "leaf_tls_reloads_total") >= f64::from(round) };
        crate::support::until(&format!("rotation {round} picked up"), Duration::from_secs(10), picked_up).await;
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    stop.store(true, Ordering::Relaxed);
    for l in load {
        l.await.unwrap();
    }
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("rotation under load: {ok} requests answered, {failed} failed");
    assert_eq!(failed, 0);
    assert!(ok > 100, "too little load to mean anything: {ok}");

    // A new handshake gets the certificate now on disk.
    let on_disk = CertificateDer::pem_file_iter(pki.path().join("node-1.pem")).unwrap().next().unwrap().unwrap();
    let connector = tokio_rustls::TlsConnector::from(peer_config(&ca, None));
    let tcp = tokio::net::TcpStream::connect(node.http_addr()).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector.connect(name, tcp).await.unwrap();
    let served = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    assert_eq!(served, on_disk, "the node still serves an old certificate");
    node.shutdown().await;
}

/// SIGHUP reloads at once, whatever the polling interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_certificate_files_at_once() {
    let (pki, data) = (pki(), tempfile::tempdir().unwrap());
    let (node, url) = start_tls(&data, pki.path(), |c| c.tls.reload_interval_ms = 3_600_000).await;
    let c = https_client(&url, &pki.path().join("ca.pem"));
    let hosts = vec!["127.0.0.1".to_string()];
    issue_node(pki.path(), 1, &hosts, DAYS + 5, true).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(metric(&c.metrics().await.unwrap(), "leaf_tls_reloads_total"), 0.0, "reloaded without the signal");
    // SAFETY: raise(3) on this process; the node under test has installed its SIGHUP handler
    // (tokio's, which stays installed for the life of the process).
    unsafe { libc::raise(libc::SIGHUP) };
    let reloaded = || async { metric(&c.metrics().await.unwrap(), "leaf_tls_reloads_total") >= 1.0 };
    crate::support::until("SIGHUP reloads", Duration::from_secs(5), reloaded).await;
    node.shutdown().await;
}
