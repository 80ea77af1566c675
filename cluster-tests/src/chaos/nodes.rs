//! What a chaos run's faults act on: local `leaf` processes behind per-link proxies, or the
//! containers of a docker-compose project.
//!
//! | fault | local processes | docker-compose |
//! |---|---|---|
//! | kill | `kill -9`, respawn | `docker kill`, `docker start` |
//! | pause | SIGSTOP / SIGCONT | `docker pause` / `unpause` |
//! | partition | proxies blackhole links: halves, isolated leader, ring | `docker network disconnect` / `connect`: the minority side (or the leader) is cut off from everyone, clients included; a ring is run as halves |
//! | restart | SIGTERM, respawn | `docker stop`, `docker start` |
//! | clock | `/admin/fault/clock` | the same |
//! | membership | a fresh node ID replaces a member | not supported |
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use tokio::task::block_in_place;

use super::proxy::{self, Proxies};
use super::schedule::{FaultKind, Shape};
use crate::cluster::Cluster;
use crate::docker::Compose;

/// The nodes of a run and how faults reach them.
pub enum Nodes {
    Local {
        cluster: Cluster,
        proxies: Proxies,
        /// The proxies' cut-connection count when the current partition began.
        cut_at_start: u64,
    },
    Docker {
        compose: Compose,
        /// Containers currently detached from the cluster network.
        detached: BTreeSet<u64>,
        /// Containers of the current partition that a connected peer could not reach.
        verified: u64,
    },
}

impl Nodes {
    /// Whether this kind of fault can be injected here.
    pub fn supports(&self, kind: FaultKind) -> bool {
        !(matches!(self, Nodes::Docker { .. }) && kind == FaultKind::Membership)
    }

    /// Base URL of node `id`'s public API, as clients reach it.
    pub fn url(&self, id: u64) -> String {
        match self {
            Nodes::Local { cluster, .. } => cluster.url(id),
            Nodes::Docker { compose, .. } => compose.url(id),
        }
    }

    /// The CA of `https://` nodes (`None`: plaintext).
    pub fn ca(&self) -> Option<std::path::PathBuf> {
        match self {
            Nodes::Local { cluster, .. } => cluster.ca(),
            Nodes::Docker { compose, .. } => compose.ca(),
        }
    }

    /// Every node ever started (removed ones included).
    pub fn ids(&self) -> Vec<u64> {
        match self {
            Nodes::Local { cluster, .. } => cluster.ids(),
            Nodes::Docker { compose, .. } => compose.ids(),
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => {
                cluster.kill(id);
                Ok(())
            }
            Nodes::Docker { compose, .. } => block_in_place(|| compose.kill(id)),
        }
    }

    /// Starts a stopped or killed node again, on its data.
    pub fn start(&mut self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => cluster.spawn(id),
            Nodes::Docker { compose, .. } => block_in_place(|| compose.start(id)),
        }
    }

    /// SIGTERM and wait; true if it exited cleanly.
    pub fn stop(&mut self, id: u64) -> anyhow::Result<bool> {
        match self {
            Nodes::Local { cluster, .. } => Ok(block_in_place(|| cluster.stop(id))),
            Nodes::Docker { compose, .. } => block_in_place(|| compose.stop(id, Duration::from_secs(15))),
        }
    }

    /// Freezes the node.
    pub fn pause(&self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => {
                cluster.pause(id);
                Ok(())
            }
            Nodes::Docker { compose, .. } => block_in_place(|| compose.pause(id)),
        }
    }

    /// Thaws it.
    pub fn resume(&self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => {
                cluster.resume(id);
                Ok(())
            }
            Nodes::Docker { compose, .. } => block_in_place(|| compose.unpause(id)),
        }
    }

    /// Whether the node's process is running; for a container, also thaws it if paused.
    pub fn alive_and_thawed(&mut self, id: u64) -> anyhow::Result<bool> {
        match self {
            Nodes::Local { cluster, .. } => {
                let alive = cluster.alive(id);
                if alive {
                    cluster.resume(id);
                }
                Ok(alive)
            }
            Nodes::Docker { compose, .. } => {
                let (running, paused, _) = block_in_place(|| compose.state(id))?;
                if running && paused {
                    block_in_place(|| compose.unpause(id))?;
                }
                Ok(running)
            }
        }
    }

    /// Cuts the network into a partition of shape `shape` over `order` (members in a seeded
    /// order); returns its description.
    pub fn partition(&mut self, order: &[u64], shape: Shape, leader: Option<u64>) -> anyhow::Result<String> {
        if order.is_empty() {
            bail!("no members to partition");
        }
        let leader = leader.filter(|l| order.contains(l)).unwrap_or(order[0]);
        let minority = ((order.len() - 1) / 2).max(1);
        match self {
            Nodes::Local { proxies, cut_at_start, .. } => {
                let (links, detail) = match shape {
                    Shape::Halves => {
                        let (a, b) = order.split_at(minority);
                        (proxy::split(&[a.to_vec(), b.to_vec()]), format!("halves {a:?} | {b:?}"))
                    }
                    Shape::IsolateLeader => {
                        let rest: Vec<u64> = order.iter().copied().filter(|id| *id != leader).collect();
                        (proxy::split(&[vec![leader], rest.clone()]), format!("isolate leader {leader} | {rest:?}"))
                    }
                    Shape::Ring => {
                        // Below 5 nodes a ring cuts one pair, `order[1]`–`order[2]`; the leader
                        // goes into it so the cut always bites (follower–follower links carry
                        // no Raft traffic) and the far end must elect through the bridge.
                        let mut order = order.to_vec();
                        if order.len() < 5 {
                            if let Some(i) = order.iter().position(|id| *id == leader) {
                                let at = 1 % order.len();
                                order.swap(i, at);
                            }
                        }
                        (proxy::ring(&order), format!("ring {order:?}"))
                    }
                };
                *cut_at_start = proxies.cut_connections();
                proxies.set_blocked(links);
                Ok(detail)
            }
            Nodes::Docker { compose, detached, verified } => {
                let (cut, detail): (Vec<u64>, String) = match shape {
                    Shape::IsolateLeader => (vec![leader], format!("isolate leader {leader}")),
                    Shape::Halves | Shape::Ring => {
                        let cut = order[..minority].to_vec();
                        let note =
                            if shape == Shape::Ring { " (a ring cannot be cut with a network disconnect)" } else { "" };
                        (cut.clone(), format!("isolate minority {cut:?}{note}"))
                    }
                };
                *verified = 0;
                for &id in &cut {
                    block_in_place(|| compose.disconnect(id))?;
                    detached.insert(id);
                }
                // Proof that it bites: a node still on the network cannot reach the cut ones.
                if let Some(&peer) = order.iter().find(|id| !cut.contains(id)) {
                    *verified = block_in_place(|| -> anyhow::Result<u64> {
                        let mut n = 0;
                        for &id in &cut {
                            for _ in 0..5 {
                                if compose.unreachable_from(peer, id)? {
                                    n += 1;
                                    break;
                                }
                                std::thread::sleep(Duration::from_millis(200));
                            }
                        }
                        Ok(n)
                    })?;
                }
                Ok(format!("{detail}: docker network disconnect"))
            }
        }
    }

    /// Ends any partition. Returns proof that it bit: how many connections the local proxies
    /// blackholed or cut during it, or how many cut-off containers a connected peer could not
    /// reach.
    pub fn heal_links(&mut self) -> anyhow::Result<u64> {
        match self {
            Nodes::Local { proxies, cut_at_start, .. } => {
                proxies.heal();
                Ok(proxies.cut_connections().saturating_sub(*cut_at_start))
            }
            Nodes::Docker { compose, detached, verified } => {
                while let Some(id) = detached.pop_first() {
                    if let Err(e) = block_in_place(|| compose.connect(id)) {
                        detached.insert(id);
                        return Err(e);
                    }
                }
                Ok(std::mem::take(verified))
            }
        }
    }

    /// Stops every node (a compose project is taken down with its volumes) and saves each
    /// node's log as `logs/node<N>.log` in `out`.
    pub fn finish(&mut self, out: &Path) -> anyhow::Result<()> {
        let logs = out.join("logs");
        std::fs::create_dir_all(&logs)?;
        match self {
            Nodes::Local { cluster, .. } => {
                for id in cluster.ids() {
                    block_in_place(|| cluster.stop(id));
                }
                for id in cluster.ids() {
                    let _ = std::fs::copy(cluster.log_path(id), logs.join(format!("node{id}.log")));
                }
                Ok(())
            }
            Nodes::Docker { compose, .. } => {
                for id in compose.ids() {
                    match block_in_place(|| compose.logs(id)) {
                        Ok(text) => std::fs::write(logs.join(format!("node{id}.log")), text)?,
                        Err(e) => eprintln!("logs of node {id}: {e:#}"),
                    }
                }
                block_in_place(|| compose.down())
            }
        }
    }
}
