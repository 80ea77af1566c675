//! What a chaos run's faults act on: local `leaf` processes behind per-link proxies, local
//! processes each in a network namespace of its own (`--netns`, root), or the containers of a
//! docker-compose project.
//!
//! | fault | local processes | network namespaces | docker-compose |
//! |---|---|---|---|
//! | kill | `kill -9`, respawn | the same | `docker kill`, `docker start` |
//! | pause | SIGSTOP / SIGCONT | the same | `docker pause` / `unpause` |
//! | partition | proxies blackhole links: halves, isolated leader, ring | iptables drops: the same shapes | `docker network disconnect` / `connect`: the minority side (or the leader) is cut off from everyone, clients included; a ring is run as halves |
//! | link | not supported | iptables: one-way, flapping, clients cut from a minority | not supported |
//! | netem | not supported | delay, jitter, reordering (`tc netem`, or an NFQUEUE delayer without it), loss, a bandwidth cap on chosen links | not supported |
//! | restart | SIGTERM, respawn | the same | `docker stop`, `docker start` |
//! | clock | `/admin/fault/clock` | the same | the same |
//! | power-cut | `kill -9`, every cut node's disk forgets what was not synced ([`crate::power`]), respawn | the same | not supported |
//! | membership | a fresh node ID replaces a member | the same (in a new namespace) | a fresh node ID in a free compose service (the spare the override declares, or a removed node's, with a fresh volume) replaces a member, whose container and volume are then removed |
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use anyhow::bail;
use tokio::task::block_in_place;

use super::netns::{Degraded, Netem, Netns};
use super::proxy::{self, Link, Proxies};
use super::schedule::{FaultKind, Shape};
use crate::cluster::Cluster;
use crate::docker::Compose;
use crate::power::Power;

/// The nodes of a run and how faults reach them.
pub enum Nodes {
    Local {
        cluster: Cluster,
        net: LocalNet,
        /// The nodes' disks, when the run has power cuts (after `cluster`: fields drop in
        /// order, and the nodes must be dead before their disks unmount).
        power: Option<Power>,
    },
    Docker {
        compose: Compose,
        /// Services currently detached from the cluster network.
        detached: BTreeSet<u64>,
        /// Containers of the current partition that a connected peer could not reach.
        verified: u64,
        slots: Slots,
    },
}

/// Which compose service (`leaf<i>`) runs which node: node `i` runs in `leaf<i>` until it is
/// replaced; its replacement takes a free service.
pub struct Slots {
    services: BTreeMap<u64, u64>,
    /// Services with no container: free for a replacement node.
    free: Vec<u64>,
    /// Every node ever started.
    ever: BTreeSet<u64>,
    /// The logs of removed nodes, whose containers are gone.
    removed_logs: Vec<(u64, String)>,
}

impl Slots {
    /// Nodes `1..=nodes` in their own services, and `spares` more services free.
    pub fn new(nodes: u64, spares: u64) -> Slots {
        Slots {
            services: (1..=nodes).map(|id| (id, id)).collect(),
            free: (nodes + 1..=nodes + spares).rev().collect(),
            ever: (1..=nodes).collect(),
            removed_logs: Vec::new(),
        }
    }

    /// The service node `id` runs in. A node that runs in none (removed, or never started)
    /// is an error, never a guess: its number may name another node's service by now.
    pub fn service(&self, id: u64) -> anyhow::Result<u64> {
        match self.services.get(&id) {
            Some(s) => Ok(*s),
            None => bail!("node {id} runs in no compose service"),
        }
    }
}

/// How local nodes' links are cut.
pub enum LocalNet {
    Proxies {
        proxies: Proxies,
        /// The proxies' cut-connection count when the current partition began.
        cut_at_start: u64,
    },
    Netns {
        net: Netns,
        /// Packets the drop rules of the current partition dropped so far (flapping ones
        /// replace their rules).
        dropped: u64,
    },
}

/// The links a partition of `shape` over `order` (members in a seeded order) cuts, and its
/// description. `Ring`s below 5 nodes put the leader into the cut pair.
fn partition_links(order: &[u64], shape: Shape, leader: u64, minority: usize) -> (BTreeSet<Link>, String) {
    match shape {
        Shape::IsolateLeader => {
            let rest: Vec<u64> = order.iter().copied().filter(|id| *id != leader).collect();
            (proxy::split(&[vec![leader], rest.clone()]), format!("isolate leader {leader} | {rest:?}"))
        }
        Shape::Ring => {
            // Below 5 nodes a ring cuts one pair, `order[1]`–`order[2]`; the leader goes into
            // it so the cut always bites (follower–follower links carry no Raft traffic) and
            // the far end must elect through the bridge.
            let mut order = order.to_vec();
            if order.len() < 5 {
                if let Some(i) = order.iter().position(|id| *id == leader) {
                    let at = 1 % order.len();
                    order.swap(i, at);
                }
            }
            (proxy::ring(&order), format!("ring {order:?}"))
        }
        Shape::OneWay => {
            // The leader's packets to a minority are dropped, theirs to it still arrive.
            let cut: Vec<u64> = order.iter().copied().filter(|id| *id != leader).take(minority).collect();
            (cut.iter().map(|to| (leader, *to)).collect(), format!("one-way: leader {leader} -> {cut:?} dropped"))
        }
        Shape::Halves | Shape::Flapping { .. } | Shape::ClientsCut => {
            let (a, b) = order.split_at(minority);
            let flapping = match shape {
                Shape::Flapping { period_ms } => format!("flapping every {period_ms} ms: "),
                _ => String::new(),
            };
            (proxy::split(&[a.to_vec(), b.to_vec()]), format!("{flapping}halves {a:?} | {b:?}"))
        }
    }
}

impl Nodes {
    /// Whether this kind of fault can be injected here.
    pub fn supports(&self, kind: FaultKind) -> bool {
        match self {
            Nodes::Local { power, .. } if kind == FaultKind::PowerCut => power.is_some(),
            Nodes::Local { net: LocalNet::Netns { .. }, .. } => true,
            Nodes::Local { net: LocalNet::Proxies { .. }, .. } => !matches!(kind, FaultKind::Link | FaultKind::Netem),
            Nodes::Docker { .. } => !matches!(kind, FaultKind::Link | FaultKind::Netem | FaultKind::PowerCut),
        }
    }

    /// The network namespaces of a `--netns` run.
    pub fn netns(&mut self) -> Option<&mut Netns> {
        match self {
            Nodes::Local { net: LocalNet::Netns { net, .. }, .. } => Some(net),
            _ => None,
        }
    }

    /// Base URL of node `id`'s public API, as clients reach it.
    pub fn url(&self, id: u64) -> String {
        match self {
            Nodes::Local { cluster, .. } => cluster.url(id),
            // A node in no service gets an address nothing listens on: its requests fail.
            Nodes::Docker { compose, slots, .. } => match slots.service(id) {
                Ok(service) => compose.url(service),
                Err(_) => format!("https://127.0.0.1:0/no-service-for-node-{id}"),
            },
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
            Nodes::Docker { slots, .. } => slots.ever.iter().copied().collect(),
        }
    }

    /// SIGKILL.
    pub fn kill(&mut self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => {
                cluster.kill(id);
                Ok(())
            }
            Nodes::Docker { compose, slots, .. } => {
                let service = slots.service(id)?;
                block_in_place(|| compose.kill(service))
            }
        }
    }

    /// Cuts the power of `ids` at once (see [`Power::cut_off`]): they stay down until
    /// [`Nodes::start`]ed. Returns the unsynced bytes their disks took back.
    pub fn power_cut(&mut self, ids: &[u64]) -> anyhow::Result<u64> {
        match self {
            Nodes::Local { cluster, power: Some(power), .. } => {
                Ok(block_in_place(|| power.cut_off(cluster, ids))?.bytes_lost())
            }
            _ => bail!("power cuts need local nodes on power-cut disks (root and /dev/fuse)"),
        }
    }

    /// Starts a stopped or killed node again, on its data.
    pub fn start(&mut self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => cluster.spawn(id),
            Nodes::Docker { compose, slots, .. } => {
                let service = slots.service(id)?;
                block_in_place(|| compose.start(service))
            }
        }
    }

    /// Runs node `id` on `bin` from its next start (local nodes only).
    pub fn set_bin(&mut self, id: u64, bin: &Path) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => {
                cluster.set_bin(id, bin);
                Ok(())
            }
            Nodes::Docker { .. } => bail!("an upgrade run needs local nodes"),
        }
    }

    /// The last `lines` lines of node `id`'s log (local nodes; empty for containers).
    pub fn log_tail(&self, id: u64, lines: usize) -> String {
        match self {
            Nodes::Local { cluster, .. } => cluster.log_tail(id, lines),
            Nodes::Docker { .. } => String::new(),
        }
    }

    /// SIGTERM and wait; true if it exited cleanly.
    pub fn stop(&mut self, id: u64) -> anyhow::Result<bool> {
        match self {
            Nodes::Local { cluster, .. } => Ok(block_in_place(|| cluster.stop(id))),
            Nodes::Docker { compose, slots, .. } => {
                let service = slots.service(id)?;
                block_in_place(|| compose.stop(service, Duration::from_secs(15)))
            }
        }
    }

    /// Freezes the node.
    pub fn pause(&self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => {
                cluster.pause(id);
                Ok(())
            }
            Nodes::Docker { compose, slots, .. } => {
                let service = slots.service(id)?;
                block_in_place(|| compose.pause(service))
            }
        }
    }

    /// Thaws it.
    pub fn resume(&self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => {
                cluster.resume(id);
                Ok(())
            }
            Nodes::Docker { compose, slots, .. } => {
                let service = slots.service(id)?;
                block_in_place(|| compose.unpause(service))
            }
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
            Nodes::Docker { compose, slots, .. } => {
                let service = slots.service(id)?;
                let state = block_in_place(|| compose.state(service))?;
                if state.running && state.paused {
                    block_in_place(|| compose.unpause(service))?;
                }
                Ok(state.running)
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
            Nodes::Local { net: LocalNet::Proxies { proxies, cut_at_start }, .. } => {
                let (links, detail) = partition_links(order, shape, leader, minority);
                *cut_at_start = proxies.cut_connections();
                proxies.set_blocked(links);
                Ok(detail)
            }
            Nodes::Local { net: LocalNet::Netns { net, dropped }, .. } => {
                let (links, detail) = partition_links(order, shape, leader, minority);
                let (links, clients, detail) = match shape {
                    Shape::ClientsCut => {
                        let cut: BTreeSet<u64> = order[..minority].iter().copied().collect();
                        (BTreeSet::new(), cut.clone(), format!("clients cut from {cut:?}"))
                    }
                    _ => (links, BTreeSet::new(), detail),
                };
                *dropped += block_in_place(|| net.set_blocked(&links, &clients))?;
                Ok(format!("{detail}: iptables"))
            }
            Nodes::Docker { compose, detached, verified, slots } => {
                let (cut, detail): (Vec<u64>, String) = match shape {
                    Shape::IsolateLeader => (vec![leader], format!("isolate leader {leader}")),
                    _ => {
                        let cut = order[..minority].to_vec();
                        let note =
                            if shape == Shape::Ring { " (a ring cannot be cut with a network disconnect)" } else { "" };
                        (cut.clone(), format!("isolate minority {cut:?}{note}"))
                    }
                };
                *verified = 0;
                for &id in &cut {
                    let service = slots.service(id)?;
                    block_in_place(|| compose.disconnect(service))?;
                    detached.insert(service);
                }
                // Proof that it bites: a node still on the network cannot reach the cut ones.
                if let Some(&peer) = order.iter().find(|id| !cut.contains(id)) {
                    *verified = block_in_place(|| -> anyhow::Result<u64> {
                        let mut n = 0;
                        for &id in &cut {
                            for _ in 0..5 {
                                if compose.unreachable_from(slots.service(peer)?, slots.service(id)?)? {
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
    /// blackholed or cut during it, how many packets the namespaces' rules dropped, or how many
    /// cut-off containers a connected peer could not reach.
    pub fn heal_links(&mut self) -> anyhow::Result<u64> {
        match self {
            Nodes::Local { net: LocalNet::Proxies { proxies, cut_at_start }, .. } => {
                proxies.heal();
                Ok(proxies.cut_connections().saturating_sub(*cut_at_start))
            }
            Nodes::Local { net: LocalNet::Netns { net, dropped }, .. } => {
                let now = block_in_place(|| net.heal())?;
                Ok(std::mem::take(dropped) + now)
            }
            Nodes::Docker { compose, detached, verified, .. } => {
                while let Some(service) = detached.pop_first() {
                    if let Err(e) = block_in_place(|| compose.connect(service)) {
                        detached.insert(service);
                        return Err(e);
                    }
                }
                Ok(std::mem::take(verified))
            }
        }
    }

    /// Opens the links of a flapping partition for a while, keeping count of what its rules
    /// dropped (namespaces only; elsewhere the same as a heal).
    pub fn open_links(&mut self) -> anyhow::Result<()> {
        match self {
            Nodes::Local { net: LocalNet::Netns { net, dropped }, .. } => {
                *dropped += block_in_place(|| net.heal())?;
                Ok(())
            }
            _ => self.heal_links().map(|_| ()),
        }
    }

    /// Degrades `links` with `netem` (namespaces only).
    pub fn degrade(&mut self, links: &BTreeSet<Link>, netem: &Netem) -> anyhow::Result<()> {
        match self.netns() {
            Some(net) => block_in_place(|| net.set_netem(links, netem)),
            None => bail!("netem needs the namespace backend (--netns)"),
        }
    }

    /// Ends any degradation; returns what it did.
    pub fn undegrade(&mut self) -> anyhow::Result<Degraded> {
        match self.netns() {
            Some(net) => block_in_place(|| net.clear_netem()),
            None => Ok(Degraded::default()),
        }
    }

    /// Starts node `new` (a fresh ID, not a member yet) in a free compose service, with a
    /// fresh volume; returns the address its peers dial.
    pub fn start_in_container(&mut self, new: u64) -> anyhow::Result<String> {
        let Nodes::Docker { compose, slots, .. } = self else {
            bail!("not a docker-compose run");
        };
        let Some(service) = slots.free.pop() else {
            bail!("no free compose service for node {new}");
        };
        compose.reserve_port(service);
        compose.set_env(&format!("LEAF{service}_NODE_ID"), &new.to_string());
        if let Err(e) = block_in_place(|| compose.up_only(&[service])) {
            slots.free.push(service);
            return Err(e);
        }
        slots.services.insert(new, service);
        slots.ever.insert(new);
        Ok(format!("leaf{service}:8080"))
    }

    /// Stops a node that is no longer a member, for good: a local process is stopped; a
    /// container is removed with its volume (its log kept for [`Nodes::finish`]), which frees
    /// its service for a later replacement.
    pub fn retire(&mut self, id: u64) -> anyhow::Result<()> {
        match self {
            Nodes::Local { cluster, .. } => {
                block_in_place(|| cluster.stop(id));
                Ok(())
            }
            Nodes::Docker { compose, slots, .. } => {
                let Some(service) = slots.services.remove(&id) else {
                    bail!("node {id} runs in no compose service");
                };
                let log = block_in_place(|| compose.logs(service)).unwrap_or_else(|e| format!("(no log: {e:#})"));
                slots.removed_logs.push((id, log));
                block_in_place(|| compose.destroy(service))?;
                slots.free.push(service);
                Ok(())
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
            Nodes::Docker { compose, slots, .. } => {
                for (&id, &service) in &slots.services {
                    match block_in_place(|| compose.logs(service)) {
                        Ok(text) => std::fs::write(logs.join(format!("node{id}.log")), text)?,
                        Err(e) => eprintln!("logs of node {id}: {e:#}"),
                    }
                }
                for (id, text) in &slots.removed_logs {
                    std::fs::write(logs.join(format!("node{id}.log")), text)?;
                }
                block_in_place(|| compose.down())
            }
        }
    }
}
