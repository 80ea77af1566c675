//! The faults of `leaf-failover-bench`, applied to a running [`Cluster`] under load, each
//! recorded as an [`Event`] with the times the analysis cuts the records at.
//!
//! One event: the fault hits node `victim` at `fault_ns`; the driver waits until the other
//! nodes agree on a leader (`leader_ns`) and every kind succeeded again through every client
//! of them (at most `max_hold`), lets the load run `settle` more, then restarts (or resumes)
//! the victim at `restart_ns`, waits until all nodes are healthy (a common leader, segment-ready,
//! snowflake serving: `healthy_ns`) and every kind succeeds through every client again, and lets
//! the load run `settle` more (`end_ns`). A rolling restart's step stops the node with SIGTERM
//! and starts it again at once. A partition cuts the victim's Raft links both ways through the
//! cluster's proxies (clients still reach it) for at least `away`, then heals them.
//!
//! Each event also records the terms the cluster went through (`terms`: 0 when nobody
//! campaigned) and whether the leader changed.
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use leaf_api::types::SnowflakeState;

use super::load::Progress;
use super::{Kind, Via};
use crate::chaos::proxy::{self, Proxies};
use crate::cluster::Cluster;

/// How long the cluster may take to agree on a leader or become healthy.
const FORM: Duration = Duration::from_secs(30);

/// What happens to the victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `kill -9`, restarted on its data once the others recovered.
    Kill,
    /// SIGSTOP (it keeps its sockets and answers nothing), SIGCONT once the others recovered.
    Pause,
    /// SIGTERM, then started again at once (a step of a rolling restart).
    Restart,
    /// SIGTERM (a graceful stop: a leader hands over first), started again once the others
    /// recovered.
    Stop,
    /// Its Raft links cut both ways (clients still reach it), healed once the others
    /// recovered and at least `away` passed.
    Partition,
}

/// One fault as applied; times in nanoseconds since the run's start.
#[derive(Debug, Clone)]
pub struct Event {
    pub rep: usize,
    pub fault: Fault,
    pub victim: u64,
    pub victim_led: bool,
    pub fault_ns: u64,
    /// The nodes other than the victim agreed on a leader (after a restart step: all nodes).
    pub leader_ns: u64,
    /// Every kind succeeded through every client of the other nodes after `leader_ns`
    /// (`None`: not within `max_hold`).
    pub recovered_ns: Option<u64>,
    pub restart_ns: u64,
    pub healthy_ns: u64,
    pub end_ns: u64,
    /// The victim's allocations committed at log indexes in `(index_after, index_upto]` were
    /// in its buffers when the fault hit (or before): what it did not serve is wasted.
    pub index_after: u64,
    pub index_upto: u64,
    /// How many terms the cluster went through, from before the fault to healthy after it.
    pub terms: u64,
    /// Whether the leader after the fault differs from the one before.
    pub leader_changed: bool,
}

pub struct Driver<'a> {
    pub cluster: &'a mut Cluster,
    pub progress: Arc<Progress>,
    /// The request kinds and clients of the load.
    pub clients: Vec<(Kind, Via)>,
    pub settle: Duration,
    pub max_hold: Duration,
    pub events: Vec<Event>,
    /// The proxies the nodes' Raft links go through (needed by [`Fault::Partition`]).
    pub proxies: Option<Proxies>,
    /// The least time a partitioned node stays cut off.
    pub away: Duration,
    /// The log index at each node's last restart.
    restarted_at: BTreeMap<u64, u64>,
}

impl<'a> Driver<'a> {
    pub fn new(cluster: &'a mut Cluster, progress: Arc<Progress>, clients: Vec<(Kind, Via)>) -> Driver<'a> {
        Driver {
            cluster,
            progress,
            clients,
            settle: Duration::from_secs(1),
            max_hold: Duration::from_secs(20),
            events: Vec::new(),
            proxies: None,
            away: Duration::from_secs(2),
            restarted_at: BTreeMap::new(),
        }
    }

    /// Waits until every node agrees on a leader, is segment-ready and serves snowflake IDs;
    /// returns the leader.
    pub async fn healthy(&self) -> anyhow::Result<u64> {
        let deadline = tokio::time::Instant::now() + FORM;
        loop {
            let leader = self.cluster.wait_leader(FORM).await?;
            let mut serving = true;
            for id in self.cluster.running() {
                let s = self.cluster.status(id).await?;
                serving &= s.health.snowflake.state == SnowflakeState::Serving;
            }
            if serving {
                return Ok(leader);
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("snowflake not serving on every node within {FORM:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until every kind succeeded after `since_ns` through the retrying clients and the
    /// plain clients of `nodes`, at most `max_hold`; returns when, or `None`.
    pub async fn recovered(&self, nodes: &[u64], since_ns: u64) -> Option<u64> {
        let deadline = tokio::time::Instant::now() + self.max_hold;
        loop {
            let done = self.clients.iter().all(|&(kind, via)| match via {
                Via::Plain(n) if !nodes.contains(&n) => true,
                _ => self.progress.last_ok(kind, via) > since_ns,
            });
            if done {
                return Some(self.progress.now_ns());
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The highest last log index among `nodes`.
    async fn max_index(&self, nodes: &[u64]) -> anyhow::Result<u64> {
        let mut max = 0;
        for &id in nodes {
            max = max.max(self.cluster.status(id).await?.last_log_index.unwrap_or(0));
        }
        Ok(max)
    }

    /// Applies `fault` to `victim` and brings it back (see the module docs).
    pub async fn fault(&mut self, rep: usize, victim: u64, fault: Fault) -> anyhow::Result<()> {
        let leader = self.healthy().await.context("healthy before the fault")?;
        let term_before = self.cluster.status(leader).await?.term;
        let survivors: Vec<u64> = self.cluster.running().into_iter().filter(|&id| id != victim).collect();
        let index_after = self.restarted_at.get(&victim).copied().unwrap_or(0);
        let fault_ns = self.progress.now_ns();
        let (leader_ns, recovered_ns, index_upto, restart_ns);
        match fault {
            Fault::Kill | Fault::Pause | Fault::Stop => {
                match fault {
                    Fault::Kill => self.cluster.kill(victim),
                    Fault::Pause => self.cluster.pause(victim),
                    _ => {
                        // `stop` waits for the exit on this thread: let the load run elsewhere.
                        if !tokio::task::block_in_place(|| self.cluster.stop(victim)) {
                            eprintln!("  node {victim} did not exit cleanly on SIGTERM");
                        }
                    }
                }
                self.cluster.wait_leader_among(&survivors, FORM).await.context("a leader among the others")?;
                leader_ns = self.progress.now_ns();
                recovered_ns = self.recovered(&survivors, leader_ns).await;
                tokio::time::sleep(self.settle).await;
                index_upto = self.max_index(&survivors).await?;
                restart_ns = self.progress.now_ns();
                if fault == Fault::Pause {
                    self.cluster.resume(victim);
                } else {
                    self.cluster.spawn(victim)?;
                }
            }
            Fault::Partition => {
                let proxies = self.proxies.clone().context("a partition needs the cluster's proxies")?;
                proxies.set_blocked(proxy::split(&[vec![victim], survivors.clone()]));
                self.cluster.wait_leader_among(&survivors, FORM).await.context("a leader among the others")?;
                leader_ns = self.progress.now_ns();
                recovered_ns = self.recovered(&survivors, leader_ns).await;
                tokio::time::sleep(self.settle).await;
                let away_until = fault_ns + self.away.as_nanos() as u64;
                let now = self.progress.now_ns();
                if now < away_until {
                    tokio::time::sleep(Duration::from_nanos(away_until - now)).await;
                }
                index_upto = self.max_index(&survivors).await?;
                restart_ns = self.progress.now_ns();
                proxies.set_blocked(Default::default());
            }
            Fault::Restart => {
                // `stop` waits for the exit on this thread: let the load's tasks run elsewhere.
                if !tokio::task::block_in_place(|| self.cluster.stop(victim)) {
                    eprintln!("  node {victim} did not exit cleanly on SIGTERM");
                }
                index_upto = self.max_index(&survivors).await?;
                restart_ns = self.progress.now_ns();
                self.cluster.spawn(victim)?;
                // A leader stopped this way may lead again once back (its vote is committed and
                // the others' lease on it has not run out): any common leader will do.
                self.cluster.wait_leader(FORM).await.context("a common leader after the restart")?;
                leader_ns = self.progress.now_ns();
                recovered_ns = self.recovered(&survivors, leader_ns).await;
            }
        }
        self.healthy().await.context("healthy after the restart")?;
        let healthy_ns = self.progress.now_ns();
        let all = self.cluster.running();
        if self.recovered(&all, healthy_ns).await.is_none() {
            eprintln!("  not every client succeeded within {:?} of the cluster being healthy", self.max_hold);
        }
        tokio::time::sleep(self.settle).await;
        // After the settle: an election the victim's return set off counts too.
        let leader_after = self.cluster.wait_leader(FORM).await?;
        let term_after = self.cluster.status(leader_after).await?.term;
        self.restarted_at.insert(victim, index_upto);
        self.events.push(Event {
            rep,
            fault,
            victim,
            victim_led: victim == leader,
            fault_ns,
            leader_ns,
            recovered_ns,
            restart_ns,
            healthy_ns,
            end_ns: self.progress.now_ns(),
            index_after,
            index_upto,
            terms: term_after.saturating_sub(term_before),
            leader_changed: leader_after != leader,
        });
        Ok(())
    }
}
