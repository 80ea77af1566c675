//! A connection flood from one address (issue 30): thousands of silent TCP connections and
//! idle HTTP/2 connections that answer pings, against the leader of a TLS cluster, while a
//! follower restarts. Before, clients and peers drew from one pool of `http.max_connections`
//! with no per-address cap and no reserve, and an idle HTTP/2 connection held its slot for
//! good: the flood took every slot, the restarted follower could not reconnect, and `/health`
//! answered 503 to everyone else.
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaf_client::HealthMode;
use leaf_cluster_tests::cluster::tls_client_config;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};

use crate::support::*;

/// The flooding host: not the address the test's clients and the nodes use (127.0.0.1).
const ATTACKER: &str = "127.0.0.9:0";
const IDLE_H2: usize = 2_500;
const SILENT: usize = 2_500;

async fn dial(to: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(ATTACKER.parse().unwrap())?;
    socket.connect(to).await
}

/// Keeps an HTTP/2 connection over TLS open from the attacker's address, silent (hyper answers
/// the node's pings), dialling again a second after a refusal or a close; counts it in `up`
/// while its HTTP/2 handshake is done.
async fn idle_h2(to: SocketAddr, tls: tokio_rustls::TlsConnector, up: Arc<AtomicUsize>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        // The sender is held: hyper closes a client connection whose senders are all gone.
        if let Some((_sender, conn)) = h2_handshake(to, &tls).await {
            up.fetch_add(1, Ordering::Relaxed);
            let driven = tokio::spawn(conn);
            while !stop.load(Ordering::Relaxed) && !driven.is_finished() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            driven.abort();
            up.fetch_sub(1, Ordering::Relaxed);
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
}

async fn h2_handshake(
    to: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
) -> Option<(
    hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    impl std::future::Future<Output = hyper::Result<()>> + Send + 'static,
)> {
    let tcp = dial(to).await.ok()?;
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let stream = tls.connect(name, tcp).await.ok()?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let builder = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder.handshake::<_, http_body_util::Empty<bytes::Bytes>>(io).await.ok()
}

/// Keeps one silent TCP connection open from the attacker's address: when the node closes it
/// (the handshake timeout, or a refusal), dials again a moment later.
async fn silent(to: SocketAddr, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        if let Ok(mut s) = dial(to).await {
            let mut sink = [0u8; 512];
            // Until the node closes it (or the test ends).
            while !stop.load(Ordering::Relaxed) {
                match tokio::time::timeout(Duration::from_millis(500), s.read(&mut sink)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => break,
                    _ => {}
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
}

fn refused(metrics: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("leaf_http_connections_refused_total ").and_then(|v| v.trim().parse().ok()))
        .expect("the connection metrics")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_from_one_address_shuts_out_neither_peers_nor_clients() {
    let (_lane, mut cluster, leader) = cluster(3, "").await;
    let follower = [1, 2, 3].into_iter().find(|id| *id != leader).unwrap();
    create_tag(&cluster.client(leader), "flood", 100).await;
    let target: SocketAddr = cluster.addr(leader).parse().unwrap();
    let mut tls = (*tls_client_config(&cluster.ca().unwrap(), None).unwrap()).clone();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tls = tokio_rustls::TlsConnector::from(Arc::new(tls));

    let (up, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
    let mut flood = Vec::new();
    for _ in 0..IDLE_H2 {
        flood.push(tokio::spawn(idle_h2(target, tls.clone(), up.clone(), stop.clone())));
    }
    // The node holds idle HTTP/2 connections up to what it lets one address have.
    until_holds("the idle flood takes hold", FORM, || up.load(Ordering::Relaxed) >= 500).await;
    let before = refused(&cluster.client(leader).metrics().await.unwrap());
    for _ in 0..SILENT {
        flood.push(tokio::spawn(silent(target, stop.clone())));
    }
    // And refuses most of the silent ones.
    eventually("the silent flood is refused", FORM, || async {
        let m = cluster.client(leader).metrics().await.unwrap();
        let more = refused(&m) - before;
        if more >= SILENT as f64 / 2.0 {
            Ok(())
        } else {
            Err(more)
        }
    })
    .await;

    // A follower restarts during the flood: it reconnects and catches up.
    cluster.kill(follower);
    create_tag(&cluster.client(leader), "during-flood", 100).await;
    cluster.spawn(follower).unwrap();
    let rejoined = || async {
        let leader_index = cluster.status(leader).await.map(|s| s.last_log_index).unwrap_or_default();
        cluster.status(follower).await.is_ok_and(|s| s.health.ready && s.last_applied_index >= leader_index)
    };
    until(&format!("node {follower} rejoins during the flood"), FORM, rejoined).await;
    // The cluster serves, and the flooded node answers everyone else.
    assert!(cluster.client(leader).health(HealthMode::All).await.unwrap().ready);
    assert_eq!(try_get_ids(&cluster.client(follower), "during-flood", Some(5)).await.unwrap().len(), 5);
    assert_eq!(try_get_ids(&cluster.client(leader), "flood", Some(5)).await.unwrap().len(), 5);
    assert!(up.load(Ordering::Relaxed) >= 500, "the idle connections were still held");

    stop.store(true, Ordering::Relaxed);
    for task in flood {
        let _ = task.await;
    }
}

/// When clients hold every client slot (a flood from many addresses, here one address with the
/// per-address cap lifted), the members still reach each other: a peer that finds no client
/// slot handshakes on the reserve and keeps its slot with a member's certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_reach_a_node_whose_client_slots_are_all_taken() {
    let (_lane, mut cluster, leader) =
        cluster(3, "[http]\nmax_connections = 300\nmax_connections_per_address = 1000000\n").await;
    let mut others = [1, 2, 3].into_iter().filter(|id| *id != leader);
    let (restarted, other) = (others.next().unwrap(), others.next().unwrap());
    create_tag(&cluster.client(other), "before", 100).await;
    // Down before the flood, so no slot it held is freed for it during the flood.
    cluster.kill(restarted);
    let target: SocketAddr = cluster.addr(leader).parse().unwrap();
    let mut tls = (*tls_client_config(&cluster.ca().unwrap(), None).unwrap()).clone();
    tls.alpn_protocols = vec![b"h2".to_vec()];
    let tls = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let (up, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
    let flood: Vec<_> =
        (0..1_000).map(|_| tokio::spawn(idle_h2(target, tls.clone(), up.clone(), stop.clone()))).collect();
    // Every client slot of the leader is taken: a client is refused there.
    // A new client each time: a kept-alive connection would hold its slot through the flood.
    let (url, ca) = (cluster.url(leader), cluster.ca().unwrap());
    let refused = || {
        let c = leaf_cluster_tests::cluster::node_client(&url, None, Some(ca.as_path()), Duration::from_secs(2));
        async move { c.health(HealthMode::All).await.is_err() }
    };
    let since = tokio::time::Instant::now();
    eventually("the leader's client slots fill", FORM, || async {
        let filled = refused().await && up.load(Ordering::Relaxed) >= 250;
        let up = up.load(Ordering::Relaxed);
        if filled {
            Ok(())
        } else {
            Err(format!("{up} idle connections up"))
        }
    })
    .await;

    // The follower comes back: it catches up, and its writes reach the leader over new
    // connections, which only the reserve can hold.
    cluster.spawn(restarted).unwrap();
    let rejoined = || async { cluster.status(restarted).await.is_ok_and(|s| s.health.ready) };
    until(&format!("node {restarted} rejoins"), FORM, rejoined).await;
    let create =
        leaf_api::types::CreateTagRequest { tag: "through-the-reserve".into(), step: 100, ..Default::default() };
    // Within what is left of FORM since the wait for the slots began.
    let left = FORM.saturating_sub(since.elapsed());
    eventually(&format!("node {restarted} reaches the leader"), left, || async {
        match cluster.client(restarted).create_tag(&create).await {
            Ok(_) => Ok(()),
            // An attempt that timed out may have committed.
            Err(e) if e.code() == Some(leaf_api::ErrorCode::TagExists) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert_eq!(try_get_ids(&cluster.client(restarted), "through-the-reserve", Some(5)).await.unwrap().len(), 5);
    assert!(refused().await, "the client slots were still taken");

    stop.store(true, Ordering::Relaxed);
    for task in flood {
        let _ = task.await;
    }
}
