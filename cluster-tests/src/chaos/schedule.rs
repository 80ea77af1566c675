//! The seeded fault schedule: which fault, when, against which kind of target, for how long.
//!
//! The schedule is a pure function of the seed, the fault kinds and the fault phase's length,
//! so a seed replays the same schedule. Targets are roles ("the leader", "a minority"); which
//! node a role names is resolved when the fault starts, with a random number also drawn here.
use std::fmt;
use std::str::FromStr;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::netns::Netem;

/// The kinds of fault (`--faults`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// `kill -9`, then restart on the same data dir.
    Kill,
    /// SIGSTOP, then SIGCONT.
    Pause,
    /// Cut Raft traffic between groups of nodes.
    Partition,
    /// Skew or strobe a node's clock through the fault-injection endpoint.
    Clock,
    /// Rolling restart (SIGTERM, start, wait until ready) of every node in turn.
    Restart,
    /// Replace a node: add a fresh node ID as learner, promote it, remove the old one.
    Membership,
    /// Partitions only packet filters make (`--netns`): one-way, flapping, clients cut from a
    /// minority.
    Link,
    /// Delay, jitter, loss and reordering on some links (`--netns`, `tc netem`).
    Netem,
    /// A power cut: `kill -9`, and each node's disk forgets what it did not sync (the nodes'
    /// data on [`crate::power`]'s file system: root and `/dev/fuse`), then power back.
    #[serde(rename = "power-cut")]
    PowerCut,
}

impl FaultKind {
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Kill,
        FaultKind::Pause,
        FaultKind::Partition,
        FaultKind::Clock,
        FaultKind::Restart,
        FaultKind::Membership,
        FaultKind::Link,
        FaultKind::Netem,
        FaultKind::PowerCut,
    ];

    /// The kinds a run injects when `--faults` names none: every kind the backend supports
    /// (link and netem need the namespace backend) but power cuts, which need root and
    /// `/dev/fuse` and are asked for by name.
    pub fn defaults(netns: bool) -> Vec<FaultKind> {
        FaultKind::ALL
            .into_iter()
            .filter(|k| *k != FaultKind::PowerCut)
            .filter(|k| netns || !matches!(k, FaultKind::Link | FaultKind::Netem))
            .collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Clock => "clock",
            FaultKind::Restart => "restart",
            FaultKind::Membership => "membership",
            FaultKind::Link => "link",
            FaultKind::Netem => "netem",
            FaultKind::PowerCut => "power-cut",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim())
            .ok_or_else(|| format!("unknown fault {s:?}; known: {}", FaultKind::ALL.map(|k| k.name()).join(",")))
    }
}

/// Which nodes a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Leader,
    /// One follower.
    Follower,
    /// (n-1)/2 nodes, leader possibly among them.
    Minority,
    /// n/2+1 nodes: the rest cannot form a quorum.
    Majority,
    /// Every node (rolling restart, a power cut of the whole cluster).
    All,
}

/// How a partition cuts the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// A random minority against the rest.
    Halves,
    /// The leader alone against the rest.
    IsolateLeader,
    /// Every node sees a majority, no two the same one (a bridge with 3 or 4 nodes).
    Ring,
    /// The leader's packets to a minority are dropped; theirs to it arrive (`link`).
    OneWay,
    /// Halves, cut and healed every `period_ms` for the fault's duration (`link`).
    Flapping { period_ms: u64 },
    /// Clients cannot reach a minority; the nodes still reach each other (`link`).
    ClientsCut,
}

/// What a clock fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockMode {
    /// Hold an offset for the fault's duration.
    Skew { offset_ms: i64 },
    /// Flip between the offset and 0 every `period_ms`.
    Strobe { offset_ms: i64, period_ms: u64 },
}

/// One planned fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedFault {
    /// Start, in ms after the fault phase began.
    pub at_ms: u64,
    pub kind: FaultKind,
    pub target: Target,
    /// How long the fault holds before it is healed (kill, pause, partition, clock).
    pub hold_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Shape>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockMode>,
    /// The degradation of a `netem` fault (on links picked when it starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netem: Option<Netem>,
    /// Drawn now, used to pick the concrete nodes when the fault starts.
    pub pick: u64,
}

/// Largest clock offset injected. It stays below `snowflake.max_peer_offset_ms` (1 s) so a
/// node restarting while a peer is skewed still passes its startup clock check, and below
/// `snowflake.max_startup_wait_ms` (5 s) so a node restarted behind its high-water mark serves
/// (above the mark, ahead of its clock) instead of refusing: every node must serve again after
/// recovery.
pub const MAX_OFFSET_MS: i64 = 800;

/// The schedule of a fault phase of `phase_ms`: one fault every few seconds, in rounds that
/// each run every enabled kind once in a seeded order, so a short run covers all of them and
/// a long one has them in equal numbers (within one).
pub fn plan(seed: u64, kinds: &[FaultKind], phase_ms: u64) -> Vec<PlannedFault> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::new();
    if kinds.is_empty() {
        return out;
    }
    let mut round: Vec<FaultKind> = Vec::new();
    let mut at = 1000;
    while at + 2000 < phase_ms {
        if round.is_empty() {
            round = kinds.to_vec();
            round.shuffle(&mut rng);
        }
        let Some(kind) = round.pop() else { break };
        let hold_ms = rng.gen_range(1000..=4000);
        let role = [Target::Leader, Target::Follower, Target::Minority, Target::Majority];
        let mut netem = None;
        let (target, shape, clock) = match kind {
            FaultKind::Kill | FaultKind::Pause => (role[rng.gen_range(0..4)], None, None),
            FaultKind::PowerCut => {
                // One node, a minority, a majority or every node at once, in equal shares.
                let cut = [Target::Follower, Target::Minority, Target::Majority, Target::All];
                (cut[rng.gen_range(0..4)], None, None)
            }
            FaultKind::Partition => {
                let shape = [Shape::Halves, Shape::IsolateLeader, Shape::Ring][rng.gen_range(0..3)];
                (Target::All, Some(shape), None)
            }
            FaultKind::Clock => {
                let sign = if rng.gen_bool(0.5) { 1 } else { -1 };
                let offset_ms = sign * rng.gen_range(50..=MAX_OFFSET_MS);
                let mode = if rng.gen_bool(0.5) {
                    ClockMode::Skew { offset_ms }
                } else {
                    ClockMode::Strobe { offset_ms, period_ms: rng.gen_range(50..=250) }
                };
                (role[rng.gen_range(0..3)], None, Some(mode))
            }
            FaultKind::Restart => (Target::All, None, None),
            FaultKind::Membership => (role[rng.gen_range(0..2)], None, None),
            FaultKind::Link => {
                // The shapes in turn, so any three link faults cover all of them.
                let n = out.iter().filter(|f: &&PlannedFault| f.kind == FaultKind::Link).count();
                let shape = match n % 3 {
                    0 => Shape::OneWay,
                    1 => Shape::Flapping { period_ms: rng.gen_range(200..=1000) },
                    _ => Shape::ClientsCut,
                };
                (Target::All, Some(shape), None)
            }
            FaultKind::Netem => {
                netem = Some(Netem {
                    delay_ms: rng.gen_range(5..=150),
                    jitter_ms: rng.gen_range(0..=50),
                    loss_pct: rng.gen_range(0..=20),
                    reorder_pct: rng.gen_range(0..=30),
                    rate_kbit: rng.gen_range(500..=20_000),
                });
                (Target::All, None, None)
            }
        };
        let pick = rng.gen();
        out.push(PlannedFault { at_ms: at, kind, target, hold_ms, shape, clock, netem, pick });
        // Restarts and replacements take their own time; the gap after them is a guess that
        // the runner stretches when they run long.
        let busy = match kind {
            FaultKind::Restart => 12_000,
            FaultKind::Membership => 6_000,
            _ => hold_ms,
        };
        at += busy + rng.gen_range(1500..=4000);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_replays_the_same_schedule() {
        let a = plan(42, &FaultKind::ALL, 120_000);
        assert_eq!(a, plan(42, &FaultKind::ALL, 120_000));
        assert_ne!(a, plan(43, &FaultKind::ALL, 120_000));
        // Every kind appears, starts are increasing and inside the phase.
        for k in FaultKind::ALL {
            assert!(a.iter().any(|f| f.kind == k), "{k} missing");
        }
        assert!(a.windows(2).all(|w| w[0].at_ms < w[1].at_ms));
        // A long phase has every kind in equal numbers, within one.
        let long = plan(9, &FaultKind::ALL, 3_600_000);
        let counts: Vec<usize> = FaultKind::ALL.iter().map(|k| long.iter().filter(|f| f.kind == *k).count()).collect();
        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(hi - lo <= 1 && *lo >= 30, "{counts:?}");
        assert!(a.iter().all(|f| f.at_ms + 2000 < 120_000));
        assert!(plan(1, &[], 60_000).is_empty());
        let only = plan(7, &[FaultKind::Pause], 30_000);
        assert!(!only.is_empty() && only.iter().all(|f| f.kind == FaultKind::Pause));
        assert!(a.iter().filter_map(|f| f.clock).all(|c| match c {
            ClockMode::Skew { offset_ms } | ClockMode::Strobe { offset_ms, .. } => offset_ms.abs() <= MAX_OFFSET_MS,
        }));
    }

    #[test]
    fn fault_names_parse() {
        assert_eq!("kill".parse::<FaultKind>(), Ok(FaultKind::Kill));
        assert!("nuke".parse::<FaultKind>().unwrap_err().contains("known: kill,pause"));
    }
}
