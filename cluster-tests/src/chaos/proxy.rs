//! Per-link network partitions without root: a TCP proxy in front of every node's Raft address.
//!
//! Every node is started with `raft.source_ip` set to its own loopback address (127.0.0.x), so
//! the proxy in front of node `to` knows from a connection's source address which node `from`
//! opened it. Peers dial each other only through these proxies (the `peers` addresses and the
//! membership hold proxy addresses); clients talk to nodes directly and are never cut off.
//!
//! A blocked link `from → to` behaves like a network that drops packets: new connections are
//! accepted and then hang (nothing is forwarded, nothing answered), so the sender runs into its
//! own timeouts instead of a fast "connection refused". When a link's state changes, every
//! connection on it is cut, so a partition takes effect at once on pooled keep-alive
//! connections and a healed link does not keep its hung connections.
use std::collections::{BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

use crate::cluster::free_port;

/// A directed link: connections node `.0` opens to node `.1`.
pub type Link = (u64, u64);

/// The loopback address node `id`'s peer connections leave from.
pub fn source_ip(id: u64) -> anyhow::Result<IpAddr> {
    let last =
        u8::try_from(id + 10).ok().filter(|b| *b < 255).ok_or_else(|| anyhow::anyhow!("node ID {id} too large"))?;
    Ok(IpAddr::V4(Ipv4Addr::new(127, 0, 0, last)))
}

#[derive(Default)]
struct State {
    blocked: BTreeSet<Link>,
    /// Source address → node.
    sources: HashMap<IpAddr, u64>,
    /// Open connections per link, by connection number.
    conns: HashMap<Link, HashMap<u64, AbortHandle>>,
}

/// A loopback listener on a port from the process's registry ([`free_port`]), never the
/// kernel's choice of port 0: that may be a port already handed to a node that has not bound
/// it yet (seen in CI: node 1 could not bind its port, which node 2's proxy held, so node 1's
/// proxy led to node 2 and the checker found node 2's IDs "served by node 1").
async fn bind_unclaimed() -> anyhow::Result<TcpListener> {
    let mut last = None;
    for _ in 0..20 {
        // Another process may take the port between the registry's check and this bind.
        match TcpListener::bind(("127.0.0.1", free_port())).await {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(anyhow::anyhow!("no loopback port for a proxy: {last:?}"))
}

/// The proxies of one cluster. Cheap to clone.
#[derive(Clone, Default)]
pub struct Proxies {
    state: Arc<Mutex<State>>,
    next_conn: Arc<AtomicU64>,
    /// Connections blackholed on, or cut from, a blocked link: proof a partition bit.
    cut: Arc<AtomicU64>,
}

impl Proxies {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the proxy in front of node `to` (listening on `target`) and returns the address
    /// peers must dial for it. Also records `to`'s source address.
    pub async fn add(&self, to: u64, target: SocketAddr) -> anyhow::Result<SocketAddr> {
        self.lock().sources.insert(source_ip(to)?, to);
        let listener = bind_unclaimed().await?;
        let addr = listener.local_addr()?;
        let proxies = self.clone();
        tokio::spawn(async move {
            while let Ok((socket, peer)) = listener.accept().await {
                proxies.handle(socket, peer, to, target);
            }
        });
        Ok(addr)
    }

    fn handle(&self, inbound: TcpStream, peer: SocketAddr, to: u64, target: SocketAddr) {
        let _ = inbound.set_nodelay(true);
        let mut st = self.lock();
        // Unknown sources (the harness itself, a node forming the cluster before it knows its
        // peers) are never blocked.
        let from = st.sources.get(&peer.ip()).copied().unwrap_or(0);
        let link = (from, to);
        let blocked = st.blocked.contains(&link);
        if blocked {
            self.cut.fetch_add(1, Ordering::Relaxed);
        }
        let n = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let proxies = self.clone();
        let task = tokio::spawn(async move {
            if blocked {
                blackhole(inbound).await;
            } else {
                forward(inbound, target).await;
            }
            if let Some(c) = proxies.lock().conns.get_mut(&link) {
                c.remove(&n);
            }
        });
        if !task.is_finished() {
            st.conns.entry(link).or_default().insert(n, task.abort_handle());
        }
    }

    /// Blocks exactly `links` (every other link passes) and cuts the connections of every link
    /// whose state changed.
    pub fn set_blocked(&self, links: BTreeSet<Link>) {
        let mut st = self.lock();
        let changed: Vec<Link> = st.blocked.symmetric_difference(&links).copied().collect();
        st.blocked = links;
        for link in changed {
            if let Some(conns) = st.conns.remove(&link) {
                if st.blocked.contains(&link) {
                    self.cut.fetch_add(conns.len() as u64, Ordering::Relaxed);
                }
                for (_, c) in conns {
                    c.abort();
                }
            }
        }
    }

    /// Connections blackholed on, or cut from, blocked links so far.
    pub fn cut_connections(&self) -> u64 {
        self.cut.load(Ordering::Relaxed)
    }

    /// Unblocks every link.
    pub fn heal(&self) {
        self.set_blocked(BTreeSet::new());
    }
}

/// Swallows what the sender writes and answers nothing, until it gives up.
async fn blackhole(mut inbound: TcpStream) {
    let mut buf = vec![0u8; 16 * 1024];
    while matches!(inbound.read(&mut buf).await, Ok(n) if n > 0) {}
}

async fn forward(mut inbound: TcpStream, target: SocketAddr) {
    let Ok(Ok(mut outbound)) = tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(target)).await else {
        return;
    };
    let _ = outbound.set_nodelay(true);
    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
}

/// Specs of nodes `ids` whose peers dial each other only through a proxy of `proxies` (started
/// here), each leaving from its own loopback address ([`source_ip`]); clients dial the nodes
/// directly.
pub async fn proxied_specs(proxies: &Proxies, ids: &[u64]) -> anyhow::Result<Vec<crate::cluster::NodeSpec>> {
    let mut specs = Vec::new();
    for &id in ids {
        let port = free_port();
        let front = proxies.add(id, ([127, 0, 0, 1], port).into()).await?;
        let env = vec![("LEAF_RAFT__SOURCE_IP".to_string(), source_ip(id)?.to_string())];
        specs.push(crate::cluster::NodeSpec {
            port,
            peer_addr: front.to_string(),
            env,
            ..crate::cluster::NodeSpec::direct(id)
        });
    }
    Ok(specs)
}

/// Links to block so that the nodes form the given groups: no link between two groups.
pub fn split(groups: &[Vec<u64>]) -> BTreeSet<Link> {
    let mut links = BTreeSet::new();
    for (i, a) in groups.iter().enumerate() {
        for (j, b) in groups.iter().enumerate() {
            if i != j {
                for &x in a {
                    for &y in b {
                        links.insert((x, y));
                    }
                }
            }
        }
    }
    links
}

/// Links to block for a ring of majorities over `order`: each node keeps only its two ring
/// neighbours, so with 5 nodes every node sees a majority (itself and two others) and no two
/// nodes see the same one. With 3 or 4 nodes a ring keeps every link, so the links between
/// `order[1]` and `order[2]` are cut instead: `order[0]` bridges two sides that cannot talk.
pub fn ring(order: &[u64]) -> BTreeSet<Link> {
    let n = order.len();
    let mut links = BTreeSet::new();
    if n < 5 {
        if n >= 3 {
            links.insert((order[1], order[2]));
            links.insert((order[2], order[1]));
        }
        return links;
    }
    for i in 0..n {
        for j in 0..n {
            let d = (i + n - j) % n;
            let dist = d.min(n - d);
            if dist > 1 {
                links.insert((order[i], order[j]));
            }
        }
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn split_and_ring_cut_the_right_links() {
        let halves = split(&[vec![1, 2], vec![3]]);
        assert_eq!(halves, BTreeSet::from([(1, 3), (2, 3), (3, 1), (3, 2)]));
        let r5 = ring(&[1, 2, 3, 4, 5]);
        // Node 1 keeps 2 and 5; loses 3 and 4, both ways.
        assert!(r5.contains(&(1, 3)) && r5.contains(&(4, 1)) && !r5.contains(&(1, 2)) && !r5.contains(&(5, 1)));
        assert_eq!(r5.len(), 10);
        for node in 1..=5u64 {
            let reachable = (1..=5u64).filter(|&o| o == node || !r5.contains(&(node, o))).count();
            assert_eq!(reachable, 3, "node {node} sees a majority");
        }
        assert_eq!(ring(&[3, 1, 2]), BTreeSet::from([(1, 2), (2, 1)]));
    }

    #[tokio::test]
    async fn a_proxy_never_listens_on_a_port_handed_to_a_node() {
        // The chaos run hands each node a port, then starts its proxy, before any node binds:
        // proxies bound to port 0 took one of 1,000 such ports within a few hundred.
        let handed: BTreeSet<u16> = (0..1000).map(|_| free_port()).collect();
        let proxies = Proxies::default();
        for _ in 0..400 {
            let front = proxies.add(1, "127.0.0.1:9".parse().unwrap()).await.unwrap();
            assert!(!handed.contains(&front.port()), "a proxy took port {}, handed to a node", front.port());
        }
    }

    #[tokio::test]
    async fn a_blocked_link_hangs_and_healing_restores_it() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let proxies = Proxies::default();
        proxies.add(1, "127.0.0.1:9".parse().unwrap()).await.unwrap();
        let front = proxies.add(2, target).await.unwrap();
        let from1 = || async {
            let sock = tokio::net::TcpSocket::new_v4().unwrap();
            sock.bind(SocketAddr::new(source_ip(1).unwrap(), 0)).unwrap();
            sock.connect(front).await.unwrap()
        };
        let roundtrip = |mut s: TcpStream| async move {
            s.write_all(b"ping").await.unwrap();
            let mut b = [0u8; 4];
            tokio::time::timeout(Duration::from_millis(300), s.read_exact(&mut b)).await.is_ok()
        };
        assert!(roundtrip(from1().await).await, "open link forwards");
        let kept = from1().await;
        assert_eq!(proxies.cut_connections(), 0);
        proxies.set_blocked(BTreeSet::from([(1, 2)]));
        assert!(!roundtrip(kept).await, "an open connection is cut when its link is blocked");
        assert!(!roundtrip(from1().await).await, "a new connection on a blocked link hangs");
        // The kept connection was cut and the new one blackholed (the first one may still have
        // been open too when the link was blocked).
        assert!(proxies.cut_connections() >= 2, "{}", proxies.cut_connections());
        // Other sources pass.
        assert!(roundtrip(TcpStream::connect(front).await.unwrap()).await);
        proxies.heal();
        assert!(roundtrip(from1().await).await, "healed link forwards again");
    }
}
