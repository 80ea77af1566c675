//! Real network faults (root): every node in a network namespace of its own, with its own
//! address on a bridge the harness creates; partitions are iptables rules inside the
//! namespaces, link degradation is `tc netem`.
//!
//! Layout of a run with tag `T` (from the harness's PID) and subnet `10.77.S.0/24`:
//! - bridge `lfbT` in the root namespace, address `10.77.S.254`: the clients' (and the
//!   harness's) address;
//! - per node `id`: namespace `lfT-id`, a veth pair (`lfvT-id` on the bridge, `eth0` inside)
//!   with address `10.77.S.id`; the node listens on `10.77.S.id:8080` for clients and peers;
//! - inside each namespace a chain `LEAF` hooked into `INPUT`: a blocked link `from → to` is a
//!   `DROP` of packets from `from`'s address in `to`'s namespace, so one direction can be cut
//!   alone (a one-way partition) and clients can be cut from a node (a `DROP` of the bridge
//!   address) while its peers still reach it;
//! - link degradation (the `netem` fault), per chosen link `from → to`, inside `from`'s
//!   namespace: random loss with an iptables `statistic` match in a chain `LEAFOUT` hooked into
//!   `OUTPUT`, and a bandwidth cap with an `htb` class that a `u32` filter sends the link's
//!   packets to; delay, jitter and reordering come from a `netem` qdisc under that class when
//!   the kernel has `sch_netem`, and otherwise from an `NFQUEUE` rule in `LEAFOUT` that hands
//!   the link's packets to a userspace delayer in the sender's namespace ([`super::delay`]).
//!   (The CI machine's kernel is built without `sch_netem`: `CONFIG_NET_SCH_NETEM` is unset;
//!   [`Netns::has_netem`] says which path runs.)
//!
//! The host's `FORWARD` chain (Docker sets its policy to DROP, and with `br_netfilter` bridged
//! packets pass it) gets an `ACCEPT` for the bridge, removed with everything else on drop.
//! Every rule's packet counter is read before it is removed: the drops prove a partition bit.
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::process::Command;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::delay::{DelaySpec, DelayStats, Delayer};
use super::proxy::Link;

/// The port every node listens on inside its namespace.
pub const PORT: u16 = 8080;

/// How a set of links is degraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Netem {
    /// Delay, jitter and reordering: by `sch_netem` where the kernel has it, else by the
    /// userspace delayer.
    pub delay_ms: u32,
    pub jitter_ms: u32,
    /// Percent of packets dropped.
    pub loss_pct: u32,
    /// Percent of packets sent at once, ahead of the delayed ones.
    pub reorder_pct: u32,
    /// Bandwidth cap of each degraded link, in kbit/s.
    #[serde(default = "default_rate_kbit")]
    pub rate_kbit: u32,
}

fn default_rate_kbit() -> u32 {
    100_000
}

impl Netem {
    fn args(&self) -> Vec<String> {
        let mut a = vec!["delay".to_string(), format!("{}ms", self.delay_ms), format!("{}ms", self.jitter_ms)];
        if self.loss_pct > 0 {
            a.extend(["loss".to_string(), format!("{}%", self.loss_pct)]);
        }
        if self.reorder_pct > 0 {
            a.extend(["reorder".to_string(), format!("{}%", self.reorder_pct), "50%".to_string()]);
        }
        a
    }
}

/// Runs a command; fails with its stderr.
fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(program).args(args).output().with_context(|| format!("run {program}"))?;
    if !out.status.success() {
        bail!("{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Why this machine cannot run the namespace backend, if it cannot.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces, iptables and tc need it)".to_string());
    }
    for tool in ["ip", "iptables", "tc"] {
        if Command::new(tool).arg("-V").output().is_err() {
            return Some(format!("`{tool}` is not installed"));
        }
    }
    None
}

/// The namespaces, bridge and rules of one run; removed on drop.
pub struct Netns {
    tag: String,
    subnet: u8,
    ids: BTreeSet<u64>,
    /// Links whose packets are dropped now (`from → to`).
    blocked: BTreeSet<Link>,
    /// Nodes whose clients are cut off now.
    clients_cut: BTreeSet<u64>,
    /// Degraded links now, per sending node.
    degraded: BTreeMap<u64, BTreeSet<u64>>,
    forward_rule: bool,
    /// Whether the kernel has `sch_netem` (probed at creation).
    netem: bool,
    /// The userspace delayers of degraded links, per sending node (without `sch_netem`).
    delayers: BTreeMap<u64, Delayer>,
}

/// What a link degradation did, counted when it is removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Degraded {
    /// Packets the loss rules dropped.
    pub lost: u64,
    /// What the userspace delayers did (zero under `sch_netem`, which counts nothing).
    pub delay: DelayStats,
}

impl Netns {
    /// Creates the bridge and a namespace per node in `ids`.
    pub fn create(ids: &[u64]) -> anyhow::Result<Netns> {
        if let Some(why) = unavailable() {
            bail!("the namespace backend cannot run here: {why}");
        }
        let pid = std::process::id();
        let mut net = Netns {
            tag: format!("{}", pid % 1_000_000),
            subnet: (pid % 200 + 20) as u8,
            ids: BTreeSet::new(),
            blocked: BTreeSet::new(),
            clients_cut: BTreeSet::new(),
            degraded: BTreeMap::new(),
            forward_rule: false,
            netem: false,
            delayers: BTreeMap::new(),
        };
        let br = net.bridge();
        run("ip", &["link", "add", &br, "type", "bridge"])?;
        run("ip", &["addr", "add", &format!("{}/24", net.host_ip()), "dev", &br])?;
        run("ip", &["link", "set", &br, "up"])?;
        run("iptables", &["-I", "FORWARD", "-i", &br, "-o", &br, "-j", "ACCEPT"])?;
        net.forward_rule = true;
        for &id in ids {
            net.add(id)?;
        }
        if let Some(&first) = ids.first() {
            net.netem = net.exec(first, &["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]).is_ok();
            if net.netem {
                net.exec(first, &["tc", "qdisc", "del", "dev", "lo", "root"])?;
            }
        }
        Ok(net)
    }

    /// Whether degraded links get netem's delay, jitter and reordering (the kernel has
    /// `sch_netem`), or loss and a bandwidth cap only.
    pub fn has_netem(&self) -> bool {
        self.netem
    }

    fn bridge(&self) -> String {
        format!("lfb{}", self.tag)
    }

    /// Node `id`'s namespace.
    pub fn namespace(&self, id: u64) -> String {
        format!("lf{}-{id}", self.tag)
    }

    /// The clients' address, on the bridge.
    pub fn host_ip(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.subnet, 254)
    }

    /// Node `id`'s address.
    pub fn ip(&self, id: u64) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.subnet, id as u8)
    }

    /// Runs `args` inside node `id`'s namespace.
    fn exec(&self, id: u64, args: &[&str]) -> anyhow::Result<String> {
        let ns = self.namespace(id);
        let mut all = vec!["netns", "exec", ns.as_str()];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// The command prefix that runs a program in node `id`'s namespace.
    pub fn wrapper(&self, id: u64) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.namespace(id)]
    }

    /// Node `id` as a cluster runs it here: listening on its own address, run under
    /// `ip netns exec`.
    pub fn node_spec(&self, id: u64) -> crate::cluster::NodeSpec {
        let host = self.ip(id).to_string();
        crate::cluster::NodeSpec {
            id,
            port: PORT,
            peer_addr: format!("{host}:{PORT}"),
            env: Vec::new(),
            host,
            wrapper: self.wrapper(id),
        }
    }

    /// Creates node `id`'s namespace, veth pair and `LEAF` chain (a node added later, too).
    pub fn add(&mut self, id: u64) -> anyhow::Result<()> {
        if !(1..=250).contains(&id) {
            bail!("node ID {id}: the namespace backend addresses nodes 1 to 250");
        }
        let ns = self.namespace(id);
        let host_end = format!("lfv{}-{id}", self.tag);
        run("ip", &["netns", "add", &ns])?;
        self.ids.insert(id);
        run("ip", &["link", "add", &host_end, "type", "veth", "peer", "name", "eth0", "netns", &ns])?;
        run("ip", &["link", "set", &host_end, "master", &self.bridge(), "up"])?;
        self.exec(id, &["ip", "addr", "add", &format!("{}/24", self.ip(id)), "dev", "eth0"])?;
        self.exec(id, &["ip", "link", "set", "eth0", "up"])?;
        self.exec(id, &["ip", "link", "set", "lo", "up"])?;
        self.exec(id, &["iptables", "-N", "LEAF"])?;
        self.exec(id, &["iptables", "-I", "INPUT", "-j", "LEAF"])?;
        self.exec(id, &["iptables", "-N", "LEAFOUT"])?;
        self.exec(id, &["iptables", "-I", "OUTPUT", "-j", "LEAFOUT"])?;
        Ok(())
    }

    /// Drops the packets of exactly `links` (and of the clients of `clients_cut`), replacing
    /// whatever was cut before; returns the packets the replaced rules dropped.
    pub fn set_blocked(&mut self, links: &BTreeSet<Link>, clients_cut: &BTreeSet<u64>) -> anyhow::Result<u64> {
        let dropped = self.flush_rules()?;
        for &(from, to) in links {
            if self.ids.contains(&from) && self.ids.contains(&to) {
                self.exec(to, &["iptables", "-A", "LEAF", "-s", &self.ip(from).to_string(), "-j", "DROP"])?;
            }
        }
        for &id in clients_cut.iter().filter(|id| self.ids.contains(id)) {
            self.exec(id, &["iptables", "-A", "LEAF", "-s", &self.host_ip().to_string(), "-j", "DROP"])?;
        }
        self.blocked = links.clone();
        self.clients_cut = clients_cut.clone();
        Ok(dropped)
    }

    /// Removes every drop rule; returns how many packets they dropped.
    pub fn heal(&mut self) -> anyhow::Result<u64> {
        let dropped = self.flush_rules()?;
        self.blocked.clear();
        self.clients_cut.clear();
        Ok(dropped)
    }

    /// Reads the `LEAF` chains' drop counters, then empties them.
    fn flush_rules(&mut self) -> anyhow::Result<u64> {
        let touched: BTreeSet<u64> =
            self.blocked.iter().map(|(_, to)| *to).chain(self.clients_cut.iter().copied()).collect();
        let mut dropped = 0;
        for id in touched {
            let listing = self.exec(id, &["iptables", "-L", "LEAF", "-v", "-x", "-n"])?;
            dropped += count_drops(&listing);
            self.exec(id, &["iptables", "-F", "LEAF"])?;
        }
        Ok(dropped)
    }

    /// Degrades the links `from → to` for each `(from, to)` in `links` with `netem`, replacing
    /// any degradation before.
    pub fn set_netem(&mut self, links: &BTreeSet<Link>, netem: &Netem) -> anyhow::Result<()> {
        self.clear_netem()?;
        let mut by_sender: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for &(from, to) in links {
            if self.ids.contains(&from) && self.ids.contains(&to) {
                by_sender.entry(from).or_default().insert(to);
            }
        }
        let rate = format!("{}kbit", netem.rate_kbit.max(8));
        let loss = format!("{:.4}", f64::from(netem.loss_pct.min(100)) / 100.0);
        for (&from, tos) in &by_sender {
            self.degraded.insert(from, tos.clone());
            let spec = DelaySpec {
                delay_ms: netem.delay_ms,
                jitter_ms: netem.jitter_ms,
                reorder_pct: netem.reorder_pct,
                seed: from << 32 | u64::from(netem.delay_ms),
            };
            let userspace_delay = !self.netem && !spec.is_noop();
            if userspace_delay {
                let ns = std::path::PathBuf::from("/run/netns").join(self.namespace(from));
                self.delayers.insert(from, Delayer::start(&ns, spec)?);
            }
            // Class 1:1 (the default) is every other packet, unlimited; class 1:2 the links'.
            self.exec(from, &["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"])?;
            self.exec(
                from,
                &["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit"],
            )?;
            self.exec(
                from,
                &["tc", "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:2", "htb", "rate", &rate],
            )?;
            if self.netem {
                let mut qdisc: Vec<String> =
                    ["tc", "qdisc", "add", "dev", "eth0", "parent", "1:2", "handle", "20:", "netem"]
                        .map(String::from)
                        .into();
                qdisc.extend(netem.args());
                self.exec(from, &qdisc.iter().map(String::as_str).collect::<Vec<_>>())?;
            }
            for &to in tos {
                let ip = self.ip(to).to_string();
                let dst = format!("{ip}/32");
                self.exec(
                    from,
                    &[
                        "tc", "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                        "match", "ip", "dst", &dst, "flowid", "1:2",
                    ],
                )?;
                if netem.loss_pct > 0 && !self.netem {
                    let random = ["-m", "statistic", "--mode", "random", "--probability", &loss, "-j", "DROP"];
                    self.append_out(from, &ip, &random)?;
                }
                if let Some(delayer) = self.delayers.get(&from).filter(|_| userspace_delay) {
                    let queue = delayer.queue().to_string();
                    self.append_out(from, &ip, &["-j", "NFQUEUE", "--queue-num", &queue, "--queue-bypass"])?;
                }
            }
        }
        Ok(())
    }

    /// Appends a rule for `from`'s packets to `ip` to its `LEAFOUT` chain.
    fn append_out(&self, from: u64, ip: &str, rule: &[&str]) -> anyhow::Result<()> {
        let mut args = vec!["iptables", "-A", "LEAFOUT", "-d", ip];
        args.extend_from_slice(rule);
        self.exec(from, &args).map(drop)
    }

    /// Removes every degradation (rules first, then the delayers release what they hold);
    /// returns what it did.
    pub fn clear_netem(&mut self) -> anyhow::Result<Degraded> {
        let mut done = Degraded::default();
        while let Some((from, _)) = self.degraded.pop_first() {
            self.exec(from, &["tc", "qdisc", "del", "dev", "eth0", "root"])?;
            done.lost += count_drops(&self.exec(from, &["iptables", "-L", "LEAFOUT", "-v", "-x", "-n"])?);
            self.exec(from, &["iptables", "-F", "LEAFOUT"])?;
        }
        while let Some((_, d)) = self.delayers.pop_first() {
            let s = d.stop()?;
            done.delay.delayed += s.delayed;
            done.delay.reordered += s.reordered;
            done.delay.packets += s.packets;
        }
        Ok(done)
    }

    /// Whether node `id` currently reaches `to` over TCP on [`PORT`] within a second (a probe
    /// from inside `id`'s namespace; `None`: from the host, as a client).
    pub fn reaches(&self, from: Option<u64>, to: u64) -> bool {
        let target = format!("/dev/tcp/{}/{PORT}", self.ip(to));
        let script = format!("exec 3<>{target}");
        let args = ["timeout", "1", "bash", "-c", script.as_str()];
        match from {
            Some(id) => self.exec(id, &args).is_ok(),
            None => run(args[0], &args[1..]).is_ok(),
        }
    }
}

/// The packet counts of a `iptables -L -v -x -n` listing's rules, summed.
fn count_drops(listing: &str) -> u64 {
    listing
        .lines()
        .filter(|l| l.contains("DROP"))
        .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Released before the namespaces go (each stops within a millisecond or two).
        self.delayers.clear();
        for id in std::mem::take(&mut self.ids) {
            // Deleting the host end deletes the pair, even while a process still holds the
            // namespace open.
            let _ = run("ip", &["link", "del", &format!("lfv{}-{id}", self.tag)]);
            let _ = run("ip", &["netns", "del", &self.namespace(id)]);
        }
        let _ = run("ip", &["link", "del", &self.bridge()]);
        if self.forward_rule {
            let br = self.bridge();
            let _ = run("iptables", &["-D", "FORWARD", "-i", &br, "-o", &br, "-j", "ACCEPT"]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_counted_from_the_listing() {
        let listing = "Chain LEAF (1 references)\n    pkts      bytes target     prot opt in     out     source               destination\n      12      720 DROP       0    --  *      *       10.77.30.2           0.0.0.0/0\n       3      180 DROP       0    --  *      *       10.77.30.254         0.0.0.0/0\n";
        assert_eq!(count_drops(listing), 15);
        assert_eq!(count_drops("Chain LEAF (1 references)\n pkts bytes target\n"), 0);
    }

    #[test]
    fn netem_arguments() {
        let n = Netem { delay_ms: 40, jitter_ms: 10, loss_pct: 5, reorder_pct: 25, rate_kbit: 1000 };
        assert_eq!(n.args().join(" "), "delay 40ms 10ms loss 5% reorder 25% 50%");
        let n = Netem { delay_ms: 40, jitter_ms: 0, loss_pct: 0, reorder_pct: 0, rate_kbit: 1000 };
        assert_eq!(n.args().join(" "), "delay 40ms 0ms");
    }

    /// Two namespaces on a bridge: a one-way drop bites and heals, netem applies (root only).
    #[test]
    fn namespaces_partition_and_heal() {
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
        let mut net = Netns::create(&[1, 2]).unwrap();
        /// Killed on drop, so a failing assertion leaves no listener holding the test's output.
        struct Reaped(std::process::Child);
        impl Drop for Reaped {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        // A listener in node 2's namespace.
        let _listener = Command::new("ip")
            .args(["netns", "exec", &net.namespace(2), "python3", "-c"])
            .arg(format!(
                "import socket,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n\
                 s.bind(('0.0.0.0',{PORT}))\ns.listen(64)\nwhile True:\n c,_=s.accept()\n c.close()"
            ))
            .spawn()
            .map(Reaped)
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !net.reaches(Some(1), 2) {
            assert!(std::time::Instant::now() < deadline, "node 1 never reached node 2");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(net.reaches(None, 2), "the host does not reach node 2");
        // One way: 1 → 2 dropped; the host still reaches 2.
        net.set_blocked(&[(1, 2)].into(), &BTreeSet::new()).unwrap();
        assert!(!net.reaches(Some(1), 2));
        assert!(net.reaches(None, 2));
        // Clients cut from 2.
        let dropped = net.set_blocked(&BTreeSet::new(), &[2].into()).unwrap();
        assert!(dropped > 0, "the one-way drop counted no packets");
        assert!(!net.reaches(None, 2));
        assert!(net.reaches(Some(1), 2));
        assert!(net.heal().unwrap() > 0);
        assert!(net.reaches(None, 2));
        // Every packet of 1 → 2 lost: no connection; the host's link to 2 is untouched.
        let lossy = Netem { delay_ms: 50, jitter_ms: 5, loss_pct: 100, reorder_pct: 10, rate_kbit: 800 };
        net.set_netem(&[(1, 2)].into(), &lossy).unwrap();
        // A process spawned now inherits the delayer's netlink socket (it is not close-on-exec)
        // and outlives the delayer, as a restarted node does in a chaos run: the next delayer
        // in this namespace must still bind.
        let _heir = Command::new("sleep").arg("60").spawn().map(Reaped).unwrap();
        assert!(!net.reaches(Some(1), 2), "a link losing every packet still connects");
        assert!(net.reaches(None, 2), "the host's link to node 2 was degraded too");
        let done = net.clear_netem().unwrap();
        if !net.has_netem() {
            assert!(done.lost > 0, "the loss rule counted no drop");
        }
        assert!(net.reaches(Some(1), 2));
        // A 300 ms delay on 1 → 2 holds the SYN: a connection takes at least that long, and
        // the delayer (without sch_netem) counts what it held.
        let slow = Netem { delay_ms: 300, jitter_ms: 0, loss_pct: 0, reorder_pct: 0, rate_kbit: 100_000 };
        net.set_netem(&[(1, 2)].into(), &slow).unwrap();
        let t = std::time::Instant::now();
        assert!(net.reaches(Some(1), 2));
        let took = t.elapsed();
        assert!(took >= std::time::Duration::from_millis(300), "a 300 ms link connected in {took:?}");
        let done = net.clear_netem().unwrap();
        if !net.has_netem() {
            assert!(done.delay.delayed > 0 && done.delay.packets >= done.delay.delayed, "{done:?}");
        }
        // Half the packets at once, half 100 ms ± 100 ms late: some overtake others (a
        // connection's ACK and FIN leave back to back; 20 connections make missing it ~1e-4).
        let shuffled = Netem { delay_ms: 100, jitter_ms: 100, loss_pct: 0, reorder_pct: 50, rate_kbit: 100_000 };
        net.set_netem(&[(1, 2)].into(), &shuffled).unwrap();
        for _ in 0..20 {
            assert!(net.reaches(Some(1), 2));
        }
        let done = net.clear_netem().unwrap();
        if !net.has_netem() {
            assert!(done.delay.reordered > 0, "nothing was reordered: {done:?}");
        }
        // A bandwidth cap alone lets connections through.
        net.set_netem(&[(1, 2)].into(), &Netem { loss_pct: 0, ..lossy }).unwrap();
        assert!(net.reaches(Some(1), 2));
        net.clear_netem().unwrap();
    }
}
