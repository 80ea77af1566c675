//! The client against in-process TLS servers (tokio-rustls + hyper) with certificates made
//! here by rcgen: the right CA, a wrong CA, a wrong name, an expired certificate, a plaintext
//! port, and servers that demand a client certificate.
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use leaf_api::{ErrorBody, ErrorCode};
use leaf_client::{Client, ClientError, HealthMode, TlsFailure};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair, SanType};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

const HEALTH: &str = r#"{"ready":true,"segment_ready":true,"node_id":1,"leader_id":1,"term":2,
    "last_applied_index":5,"reason":null,"snowflake":{"state":"serving","worker_id":3,"reason":null,
    "high_water_ms":null,"lease_remaining_ms":null,"peer_clock_offset_ms":null}}"#;

/// A test CA.
struct Pki {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate and its key, PEM.
struct Issued {
    cert: String,
    key: String,
}

impl Pki {
    fn new(name: &str) -> Pki {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
        Pki { cert: params.self_signed(&key).unwrap(), key }
    }

    fn ca_pem(&self) -> String {
        self.cert.pem()
    }

    fn issue(&self, mut params: CertificateParams, purpose: ExtendedKeyUsagePurpose) -> Issued {
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        Issued { cert: cert.pem(), key: key.serialize_pem() }
    }

    /// A node certificate for these DNS names / IP addresses.
    fn server(&self, hosts: &[&str]) -> Issued {
        let params = CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>()).unwrap();
        self.issue(params, ExtendedKeyUsagePurpose::ServerAuth)
    }

    /// A client certificate carrying `urn:leaf:client:<name>`.
    fn client(&self, name: &str) -> Issued {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        let uri = leaf_api::identity::CertIdentity::Client(name.to_string()).uri();
        params.subject_alt_names.push(SanType::URI(uri.try_into().unwrap()));
        self.issue(params, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

/// The TLS servers' answer: a ready report on `/health`, `42` anywhere else.
async fn answer(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = if req.uri().path() == "/health" { HEALTH } else { "42" };
    Ok(Response::new(Full::new(Bytes::from_static(body.as_bytes()))))
}

/// A TLS server with `id`'s certificate, demanding a client certificate signed by
/// `client_ca` when given. Counts the connections it accepted.
async fn tls_server(id: &Issued, client_ca: Option<&Pki>) -> (String, Arc<AtomicU32>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder =
        rustls::ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().unwrap();
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(CertificateDer::from_pem_slice(ca.ca_pem().as_bytes()).unwrap()).unwrap();
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let chain = CertificateDer::pem_slice_iter(id.cert.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(id.key.as_bytes()).unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(builder.with_single_cert(chain, key).unwrap()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU32::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), hyper::service::service_fn(answer))
                        .await;
                }
            });
        }
    });
    (format!("https://{addr}"), accepted)
}

/// A plaintext HTTP server answering every request with `status` and `body`.
async fn plain_server(status: StatusCode, body: String) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let body = body.clone();
            let svc = hyper::service::service_fn(move |_req: Request<hyper::body::Incoming>| {
                let body = body.clone();
                async move {
                    let mut resp = Response::new(Full::new(Bytes::from(body)));
                    *resp.status_mut() = status;
                    Ok::<_, Infallible>(resp)
                }
            });
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc));
        }
    });
    addr
}

fn quick<I: IntoIterator<Item = S>, S: AsRef<str>>(nodes: I) -> leaf_client::ClientBuilder {
    Client::builder(nodes).backoff(Duration::from_millis(1), Duration::from_millis(5)).timeout(Duration::from_secs(10))
}

fn tls_error(e: &ClientError) -> (TlsFailure, String) {
    match e {
        ClientError::Tls { failure, .. } => (*failure, e.to_string()),
        other => panic!("not a TLS error: {other:?}"),
    }
}

#[tokio::test]
async fn a_client_trusting_the_cluster_ca_gets_answers_over_https() {
    let pki = Pki::new("leaf test CA");
    let (url, _) = tls_server(&pki.server(&["127.0.0.1"]), None).await;
    let c = quick([&url]).ca_pem(pki.ca_pem()).build().unwrap();
    assert_eq!(c.nodes(), [url]);
    assert!(c.health(HealthMode::All).await.unwrap().ready);
    assert_eq!(c.segment_id("orders").await.unwrap(), 42);
    // The same CA from a file.
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, pki.ca_pem()).unwrap();
    let c = quick(c.nodes()).ca_file(&ca_file).build().unwrap();
    assert_eq!(c.segment_id("orders").await.unwrap(), 42);
}

#[tokio::test]
async fn a_client_trusting_another_ca_is_told_to_pass_the_right_one_and_gives_up() {
    let pki = Pki::new("leaf test CA");
    let other = Pki::new("some other CA");
    let (a, hits_a) = tls_server(&pki.server(&["127.0.0.1"]), None).await;
    let (b, hits_b) = tls_server(&pki.server(&["127.0.0.1"]), None).await;
    let c = quick([&a]).retries(5).ca_pem(other.ca_pem()).build().unwrap();
    let e = c.segment_id("orders").await.unwrap_err();
    let (failure, text) = tls_error(&e);
    assert_eq!(failure, TlsFailure::UnknownIssuer);
    assert!(text.contains("not signed by a CA this client trusts") && text.contains("--ca / LEAF_CA"), "{text}");
    assert!(text.starts_with(&a), "names the node: {text}");
    assert!(!e.is_unavailable(), "a setup problem, not an outage");
    assert_eq!(hits_a.load(Ordering::SeqCst), 1, "one node: not tried again");
    // Two nodes: each is tried once, then the call gives up (the budget allowed six).
    let c = quick([&a, &b]).retries(5).ca_pem(other.ca_pem()).build().unwrap();
    let e = c.segment_id("orders").await.unwrap_err();
    assert!(matches!(&e, ClientError::AllNodesFailed { attempts: 2, .. }), "{e:?}");
    assert_eq!(e.tls_failure(), Some(TlsFailure::UnknownIssuer));
    assert_eq!((hits_a.load(Ordering::SeqCst), hits_b.load(Ordering::SeqCst)), (2, 1));
    // A CA of the same name but another key (another cluster's): the same advice.
    let twin = Pki::new("leaf test CA");
    let e = quick([&a]).ca_pem(twin.ca_pem()).build().unwrap().segment_id("orders").await.unwrap_err();
    let (failure, text) = tls_error(&e);
    assert_eq!(failure, TlsFailure::UnknownIssuer);
    assert!(text.contains("same name but another key") && text.contains("--ca / LEAF_CA"), "{text}");
}

#[tokio::test]
async fn a_certificate_for_another_name_or_out_of_date_is_named_as_such() {
    let pki = Pki::new("leaf test CA");
    let (url, _) = tls_server(&pki.server(&["leaf-1.example"]), None).await;
    let e = quick([url]).ca_pem(pki.ca_pem()).build().unwrap().segment_id("t").await.unwrap_err();
    let (failure, text) = tls_error(&e);
    assert_eq!(failure, TlsFailure::NotValidForName);
    assert!(text.contains("not valid for the host"), "{text}");

    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2001, 1, 1);
    params.not_after = rcgen::date_time_ymd(2002, 1, 1);
    let (url, _) = tls_server(&pki.issue(params, ExtendedKeyUsagePurpose::ServerAuth), None).await;
    let e = quick([url]).ca_pem(pki.ca_pem()).build().unwrap().segment_id("t").await.unwrap_err();
    let (failure, text) = tls_error(&e);
    assert_eq!(failure, TlsFailure::Expired);
    assert!(text.contains("expired"), "{text}");
}

#[tokio::test]
async fn https_to_a_plaintext_port_fails_at_once_with_a_plain_message() {
    let pki = Pki::new("leaf test CA");
    let addr = plain_server(StatusCode::OK, "42".into()).await;
    let c = quick([format!("https://{addr}")]).retries(0).ca_pem(pki.ca_pem()).build().unwrap();
    let start = Instant::now();
    let e = c.segment_id("t").await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(3), "bounded well below the 10 s timeout: {:?}", start.elapsed());
    let (failure, text) = tls_error(&e);
    assert_eq!(failure, TlsFailure::Plaintext);
    assert!(text.contains("answered in plaintext: use http:// or turn TLS on"), "{text}");
}

#[tokio::test]
async fn http_to_a_tls_port_surfaces_what_the_node_answered() {
    // A node answers a plaintext request on its TLS port with a plaintext error body.
    let body = serde_json::to_string(&ErrorBody::new(ErrorCode::InvalidRequest, "this port speaks TLS: use https://"))
        .unwrap();
    let addr = plain_server(StatusCode::BAD_REQUEST, body).await;
    let e = quick([format!("http://{addr}")]).build().unwrap().segment_id("t").await.unwrap_err();
    match &e {
        ClientError::Api { status: StatusCode::BAD_REQUEST, code: ErrorCode::InvalidRequest, message } => {
            assert!(message.contains("use https://"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // A bare TLS server answers nothing a client can read as HTTP: a transport error, quickly,
    // that hints at https://.
    let pki = Pki::new("leaf test CA");
    let (url, _) = tls_server(&pki.server(&["127.0.0.1"]), None).await;
    let plain = url.replace("https://", "http://");
    let start = Instant::now();
    let e = quick([plain]).retries(0).build().unwrap().segment_id("t").await.unwrap_err();
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    assert!(matches!(e, ClientError::Transport { .. }), "{e:?}");
    assert!(e.to_string().contains("if the node serves TLS, use https://"), "{e}");
}

#[tokio::test]
async fn a_node_demanding_client_certificates_takes_ours_and_says_when_one_is_missing() {
    let pki = Pki::new("leaf test CA");
    let (url, _) = tls_server(&pki.server(&["127.0.0.1"]), Some(&pki)).await;
    let me = pki.client("ops");
    let with = quick([&url]).ca_pem(pki.ca_pem()).client_cert_pem(me.cert.clone(), me.key.clone());
    assert_eq!(with.build().unwrap().segment_id("t").await.unwrap(), 42);
    // From files too.
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("client-ops.pem"), dir.path().join("client-ops-key.pem"));
    std::fs::write(&cert, &me.cert).unwrap();
    std::fs::write(&key, &me.key).unwrap();
    let with = quick([&url]).ca_pem(pki.ca_pem()).client_cert_files(&cert, &key).build().unwrap();
    assert!(with.health(HealthMode::All).await.unwrap().ready);

    let without = quick([&url]).retries(0).ca_pem(pki.ca_pem()).build().unwrap();
    let e = without.segment_id("t").await.unwrap_err();
    let (failure, text) = tls_error(&e);
    assert_eq!(failure, TlsFailure::ClientCertRequired);
    assert!(text.contains("requires a client certificate") && text.contains("--client-cert"), "{text}");

    // A certificate from another CA is refused, and said so.
    let stranger = Pki::new("some other CA").client("ops");
    let c = quick([url]).retries(0).ca_pem(pki.ca_pem()).client_cert_pem(stranger.cert, stranger.key);
    let e = c.build().unwrap().segment_id("t").await.unwrap_err();
    let (failure, text) = tls_error(&e);
    assert_eq!(failure, TlsFailure::ClientCertRejected);
    assert!(text.contains("refused this client's certificate"), "{text}");
}
