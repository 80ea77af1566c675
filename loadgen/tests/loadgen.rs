//! The load generator against tiny in-process HTTP servers.
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use hyper_util::rt::TokioIo;
use leaf_loadgen::{run, BenchArgs, BenchError};

#[tokio::test]
async fn bad_urls_and_paths_are_refused() {
    for url in ["https://127.0.0.1:1", "127.0.0.1:80", "http://"] {
        let args = BenchArgs { urls: vec![url.to_string()], ..test_args() };
        assert!(matches!(run(&args).await, Err(BenchError::Url(_))), "{url}");
    }
    let args = BenchArgs { path: "api".into(), ..test_args() };
    assert!(matches!(run(&args).await, Err(BenchError::Path(_))));
    let args = BenchArgs { duration: Duration::ZERO, ..test_args() };
    assert!(matches!(run(&args).await, Err(BenchError::Duration)));
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
    }
}

/// A server that answers every request with three lines after `delay`.
async fn server(delay: Duration) -> SocketAddr {
    use hyper::service::service_fn;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let svc = service_fn(move |_req| async move {
                    tokio::time::sleep(delay).await;
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(http_body_util::Full::new(
                        Bytes::from_static(b"1\n2\n3"),
                    )))
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
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
