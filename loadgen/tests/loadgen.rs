//! The load generator against tiny in-process HTTP servers, plain and TLS.
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hyper_util::rt::TokioIo;
use leaf_loadgen::args::TlsArgs;
use leaf_loadgen::{run, BenchArgs, BenchError};

#[tokio::test]
async fn bad_urls_and_paths_are_refused() {
    for url in ["ftp://127.0.0.1:1", "127.0.0.1:80", "http://", "https://"] {
        let args = BenchArgs { urls: vec![url.to_string()], ..test_args() };
        assert!(matches!(run(&args).await, Err(BenchError::Url(_))), "{url}");
    }
    let args = BenchArgs { path: "api".into(), ..test_args() };
    assert!(matches!(run(&args).await, Err(BenchError::Path(_))));
    let args = BenchArgs { duration: Duration::ZERO, ..test_args() };
    assert!(matches!(run(&args).await, Err(BenchError::Duration)));
    let args = BenchArgs { path: "/t-{zipf}".into(), zipf_tags: 0, ..test_args() };
    assert!(matches!(run(&args).await, Err(BenchError::Path(_))));
}

fn test_args() -> BenchArgs {
    BenchArgs {
        urls: vec!["http://127.0.0.1:1".into()],
        path: "/".into(),
        connections: 2,
        duration: Duration::from_millis(200),
        requests: None,
        rate: None,
        warmup: Duration::ZERO,
        threads: 1,
        json: false,
        tls: TlsArgs::default(),
        zipf_tags: 1000,
        zipf_s: 1.1,
    }
}

/// A server that answers every request with three lines after `delay`.
async fn server(delay: Duration) -> SocketAddr {
    serve(delay, None).await
}

/// [`server`], over TLS with `acceptor` when given.
async fn serve(delay: Duration, acceptor: Option<tokio_rustls::TlsAcceptor>) -> SocketAddr {
    use hyper::service::service_fn;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |_req| async move {
                    tokio::time::sleep(delay).await;
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                        Bytes::from_static(b"1\n2\n3"),
                    )))
                });
                let http = hyper::server::conn::http1::Builder::new();
                let _ = match acceptor {
                    None => http.serve_connection(TokioIo::new(stream), svc).await,
                    Some(acceptor) => match acceptor.accept(stream).await {
                        Ok(tls) => http.serve_connection(TokioIo::new(tls), svc).await,
                        Err(_) => return,
                    },
                };
            });
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_counts_requests_ids_and_latency() {
    let addr = server(Duration::from_millis(2)).await;
    let args = BenchArgs { urls: vec![format!("http://{addr}")], connections: 4, ..test_args() };
    let r = run(&args).await.unwrap();
    assert_eq!(r.errors + r.failures, 0);
    assert!(r.requests > 20, "{r:?}");
    // Four connections, each at most one request per 2 ms.
    assert!(r.requests_per_sec <= 4.0 * 500.0 * 1.1, "{r:?}");
    assert!((r.ids_per_sec / r.requests_per_sec - 3.0).abs() < 1e-9, "{r:?}");
    assert!(r.latency_us.p50 >= 2000.0, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_loop_keeps_its_rate_and_counts_the_wait_of_a_slow_server() {
    // Fast server: the rate is what was asked.
    let fast = server(Duration::ZERO).await;
    let args = BenchArgs {
        urls: vec![format!("http://{fast}")],
        rate: Some(400),
        duration: Duration::from_millis(500),
        ..test_args()
    };
    let r = run(&args).await.unwrap();
    // Never above the rate (a starved generator may send fewer).
    assert!((50..=250).contains(&r.requests), "{r:?}");
    // A server slower than the schedule (one connection, 20 ms per answer, asked for 200
    // per second): later requests are due long before they can be sent, and the wait counts.
    let slow = server(Duration::from_millis(20)).await;
    let args = BenchArgs {
        urls: vec![format!("http://{slow}")],
        connections: 1,
        rate: Some(200),
        duration: Duration::from_millis(500),
        ..test_args()
    };
    let r = run(&args).await.unwrap();
    assert!(r.latency_us.max > 200_000.0, "coordinated omission not corrected: {r:?}");
}

#[tokio::test]
async fn a_run_without_any_answer_is_an_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let args = BenchArgs { urls: vec![format!("http://127.0.0.1:{port}")], ..test_args() };
    assert!(matches!(run(&args).await, Err(BenchError::NoAnswers(_))));
}

/// A CA (PEM) and a TLS acceptor whose certificate for 127.0.0.1 it signed; with
/// `client_ca`, the acceptor demands a client certificate signed by that CA.
struct Pki {
    ca: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "bench test CA");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        Pki { ca: params.self_signed(&key).unwrap(), key }
    }

    /// A certificate and key (PEM) for these SANs.
    fn issue(&self, sans: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, sans[0]);
        (params.signed_by(&key, &self.ca, &self.key).unwrap().pem(), key.serialize_pem())
    }

    fn acceptor(&self, client_ca: Option<&Pki>) -> tokio_rustls::TlsAcceptor {
        use rustls_pki_types::pem::PemObject;
        use rustls_pki_types::{CertificateDer, PrivateKeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = match client_ca {
            Some(ca) => {
                let mut roots = rustls::RootCertStore::empty();
                roots.add(ca.ca.der().clone()).unwrap();
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .unwrap();
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let (cert, key) = self.issue(&["127.0.0.1"]);
        let chain = vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()];
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(builder.with_single_cert(chain, key).unwrap()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_urls_are_measured_over_tls_with_the_given_ca_and_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let pki = Pki::new();
    let ca = file("ca.pem", &pki.ca.pem());
    let addr = serve(Duration::ZERO, Some(pki.acceptor(Some(&pki)))).await;
    let (cert, key) = pki.issue(&["bench"]);
    let (cert, key) = (file("client.pem", &cert), file("client-key.pem", &key));
    let args = BenchArgs {
        urls: vec![format!("https://{addr}")],
        tls: TlsArgs { ca: Some(ca.clone()), client_cert: Some(cert.clone()), client_key: Some(key.clone()) },
        ..test_args()
    };
    let r = run(&args).await.unwrap();
    assert_eq!(r.errors + r.failures, 0, "{r:?}");
    assert!(r.requests > 20 && r.ok == r.requests, "{r:?}");
    assert!((r.ids_per_sec / r.requests_per_sec - 3.0).abs() < 1e-9, "{r:?}");

    // No client certificate: the node's refusal, in words.
    let args = BenchArgs { tls: TlsArgs { client_cert: None, client_key: None, ..args.tls.clone() }, ..args };
    match run(&args).await {
        Err(BenchError::NoAnswers(why)) => assert!(why.contains("requires a client certificate"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Another CA (of the same name: the chain finds it, its key does not match): the node's
    // certificate is not trusted.
    let other = file("other-ca.pem", &Pki::new().ca.pem());
    let plain_tls = serve(Duration::ZERO, Some(pki.acceptor(None))).await;
    let args = BenchArgs {
        urls: vec![format!("https://{plain_tls}")],
        tls: TlsArgs { ca: Some(other), ..TlsArgs::default() },
        ..test_args()
    };
    match run(&args).await {
        Err(BenchError::NoAnswers(why)) => assert!(why.contains("not signed by a CA this client trusts"), "{why}"),
        other => panic!("{other:?}"),
    }
    // https:// to a plaintext server.
    let plain = server(Duration::ZERO).await;
    let args = BenchArgs {
        urls: vec![format!("https://{plain}")],
        tls: TlsArgs { ca: Some(ca.clone()), ..TlsArgs::default() },
        ..test_args()
    };
    match run(&args).await {
        Err(BenchError::NoAnswers(why)) => assert!(why.contains("answered in plaintext"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Unusable settings stop the run before it starts: a certificate without its key, a CA
    // file that does not exist.
    let args = BenchArgs {
        urls: vec![format!("https://{plain_tls}")],
        tls: TlsArgs { client_cert: Some(cert), ..TlsArgs::default() },
        ..test_args()
    };
    assert!(matches!(run(&args).await, Err(BenchError::Tls(_))));
    let args = BenchArgs { tls: TlsArgs { ca: Some(dir.path().join("missing.pem")), ..args.tls.clone() }, ..args };
    assert!(matches!(run(&args).await, Err(BenchError::Tls(_))));
}
