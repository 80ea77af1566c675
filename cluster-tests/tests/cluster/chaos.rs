//! `leaf-chaos` runs as a user runs them (its own process, a fixed seed that
//! `LEAF_CHAOS_SEED` overrides): every fault kind behind proxies, and the namespace backend.
//!
//! A run lasts as long as its seed's schedule needs to inject the faults the test requires
//! ([`chaos_run`]), not a fixed guess: the default seeds are ones whose schedules get there
//! early, and an overriding seed gets the duration its own schedule needs.
use std::time::Duration;

use leaf_cluster_tests::chaos::run::phases;
use leaf_cluster_tests::chaos::schedule::{plan, FaultKind};

use crate::support::*;

/// A seeded chaos run and the `--duration` its schedule needs.
#[derive(Debug)]
pub(crate) struct ChaosRun {
    pub(crate) seed: u64,
    pub(crate) duration: Duration,
}

/// The run of seed `LEAF_CHAOS_SEED` (else `default_seed`) over `kinds` (in `--faults` order)
/// that lasts the fewest whole seconds in which its schedule starts the `n`th fault of each
/// `(kind, n)` in `needs` at least `margin` before the fault phase ends: a run whose faults
/// overrun their planned slots by less than `margin` still injects all of them. (The tests
/// then check that the run did.)
pub(crate) fn chaos_run(
    default_seed: u64,
    kinds: &[FaultKind],
    needs: &[(FaultKind, usize)],
    margin: Duration,
) -> ChaosRun {
    let seed = std::env::var("LEAF_CHAOS_SEED").map_or(default_seed, |s| s.parse().expect("LEAF_CHAOS_SEED: a u64"));
    // A schedule is a prefix of a longer phase's schedule of the same seed.
    let schedule = plan(seed, kinds, 3_600_000);
    let last_needed = needs
        .iter()
        .map(|&(kind, n)| {
            let nth = schedule.iter().filter(|f| f.kind == kind).nth(n - 1);
            nth.unwrap_or_else(|| panic!("seed {seed} plans fewer than {n} {kind} faults in an hour")).at_ms
        })
        .max()
        .unwrap_or(0);
    // `plan` keeps a fault only if it starts 2 s before the phase ends.
    let phase = Duration::from_millis(last_needed + 2000) + margin;
    let duration = (10..).map(Duration::from_secs).find(|d| phases(*d).1 >= phase).unwrap();
    ChaosRun { seed, duration }
}

/// Runs `leaf-chaos` with `args` and `run`'s seed and duration, as its own process, as a user
/// runs it; fails (keeping history, results and node logs) unless it exits 0. Returns the
/// output directory, the printed summary and `results.json`.
pub(crate) async fn run_chaos(run: &ChaosRun, args: &[&str]) -> (tempfile::TempDir, String, serde_json::Value) {
    let ChaosRun { seed, duration } = run;
    let out = tempfile::Builder::new().prefix("leaf-chaos-ci-").tempdir().unwrap();
    println!(
        "chaos seed {seed}, duration {duration:?} (LEAF_CHAOS_SEED={seed} replays it), output in {}",
        out.path().display()
    );
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_leaf-chaos"))
        .args(args)
        .args(["--seed", &seed.to_string(), "--duration", &format!("{}s", duration.as_secs()), "--bin", &bin()])
        .arg("--out")
        .arg(out.path())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    println!("{stdout}\n{}", String::from_utf8_lossy(&run.stderr));
    if run.status.code() != Some(0) {
        let kept = out.keep();
        panic!("chaos run {args:?} with seed {seed} failed ({:?}); evidence in {}", run.status, kept.display());
    }
    let results = serde_json::from_slice(&std::fs::read(out.path().join("results.json")).unwrap()).unwrap();
    (out, stdout, results)
}

/// The CI chaos run: 3 nodes, every fault kind (the default list), a fixed seed (override with
/// `LEAF_CHAOS_SEED`) whose schedule has them all in its first 24 s, so the run takes 40 s,
/// and 2,000 further tags with a Zipf-distributed share of the requests (`--tags`: hundreds of
/// them make their first allocation while faults hold). The harness runs as its own process,
/// as a user runs it, and must find the history valid (exit 0) with every fault kind injected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_chaos_run_with_every_fault_kind_passes_the_checker() {
    let _lane = beside().await;
    let kinds = FaultKind::defaults(false);
    let needs: Vec<(FaultKind, usize)> = kinds.iter().map(|k| (*k, 1)).collect();
    let run = chaos_run(20261463, &kinds, &needs, Duration::from_secs(4));
    let (_out, stdout, results) = run_chaos(&run, &["--nodes", "3", "--tags", "2000"]).await;
    let seed = run.seed;
    assert_eq!(results["valid"], "true");
    for kind in ["kill", "pause", "partition", "clock", "restart", "membership"] {
        assert!(
            results["faults"][kind].as_u64().unwrap_or(0) >= 1,
            "no {kind} fault was injected: {}",
            results["faults"]
        );
    }
    assert!(results["operations"]["ok"].as_u64().unwrap() > 5000, "too little traffic: {}", results["operations"]);
    // The partitions bit: Raft connections were blackholed or cut.
    assert!(results["partition_connections_cut"].as_u64().unwrap() > 0, "partitions cut nothing");
    assert!(stdout.contains(&format!("seed {seed}")), "the run must print its seed");
    // The many tags took their share: the checker saw IDs of a few hundred of them.
    let served = results["keys"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, v)| k.starts_with("segment:chaos-z-") && v["acknowledged"].as_u64() > Some(0))
        .count();
    assert!(served >= 100, "only {served} of the 2,000 tags served");
    assert!(stdout.contains("created 2000 tags in"), "{stdout}");
}

/// The CI run of the namespace backend (root): 3 nodes in network namespaces of their own,
/// with iptables partitions (halves, isolated leader, ring; and one-way, flapping, clients
/// cut), and degraded links (`netem`), a fixed seed (override with `LEAF_CHAOS_SEED`) and as
/// long as its schedule needs for three link faults, so every link shape runs (42 s). The history must be valid, the drop
/// rules must have dropped packets (the partitions bit), and degraded links must have delayed
/// packets. Without root it prints why and passes, unless `LEAF_REQUIRE_NETNS=1` (set by
/// `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_run_in_network_namespaces_drops_packets_and_passes_the_checker() {
    if let Some(why) = leaf_cluster_tests::chaos::netns::unavailable() {
        assert!(std::env::var("LEAF_REQUIRE_NETNS").is_err(), "LEAF_REQUIRE_NETNS is set, but {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let _lane = alone().await;
    let kinds = [FaultKind::Partition, FaultKind::Link, FaultKind::Netem];
    let needs = [(FaultKind::Partition, 1), (FaultKind::Link, 3), (FaultKind::Netem, 1)];
    let run = chaos_run(20262047, &kinds, &needs, Duration::from_secs(4));
    let (out, _stdout, results) =
        run_chaos(&run, &["--netns", "--nodes", "3", "--faults", "partition,link,netem"]).await;
    assert_eq!(results["valid"], "true");
    for kind in ["partition", "link", "netem"] {
        assert!(results["faults"][kind].as_u64().unwrap_or(0) >= 1, "no {kind} fault: {}", results["faults"]);
    }
    // Every shape only packet filters make ran (the schedule cycles them; the run lasts for three).
    let history = std::fs::read_to_string(out.path().join("history.jsonl")).unwrap();
    for shape in ["one-way", "flapping", "clients cut"] {
        assert!(history.contains(shape), "no {shape} partition in the history");
    }
    assert!(results["partition_connections_cut"].as_u64().unwrap() > 0, "the drop rules dropped no packet");
    // Without sch_netem the NFQUEUE delayer reports what it held at each heal.
    let delayed: u64 = history
        .lines()
        .filter_map(|l| {
            // "..., <delayed> of <all> packets were delayed and <n> reordered"
            let head = &l[..l.find(" packets were delayed")?];
            head[..head.rfind(" of ")?].rsplit(' ').next()?.parse::<u64>().ok()
        })
        .sum();
    let netem_kernel = history.contains("netem delay");
    assert!(netem_kernel || delayed > 0, "no degraded link delayed a packet");
}

/// Seed of [`a_chaos_run_with_gapless_series_keeps_them_gapless`].
const GAPLESS_SEED: u64 = 20261282;

/// The gapless workload (`--gapless`) under kills, pauses, partitions and clock faults on 3
/// nodes, a fixed seed (override with `LEAF_CHAOS_SEED`) whose schedule has each kind once
/// early, so the run takes about 35 s. Every key is retried until answered; the run must find
/// the history valid (each series' ledger identical on every node and gapless against every
/// answer), with hundreds of numbers issued, old keys asked again, and every fault injected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_run_with_gapless_series_keeps_them_gapless() {
    let _lane = beside().await;
    let kinds = [FaultKind::Kill, FaultKind::Pause, FaultKind::Partition, FaultKind::Clock];
    let needs: Vec<(FaultKind, usize)> = kinds.iter().map(|k| (*k, 1)).collect();
    let run = chaos_run(GAPLESS_SEED, &kinds, &needs, Duration::from_secs(8));
    let (_out, stdout, results) =
        run_chaos(&run, &["--nodes", "3", "--faults", "kill,pause,partition,clock", "--gapless"]).await;
    assert!(stdout.contains(&format!("seed {}", run.seed)), "the run must print its seed");
    assert_eq!(results["valid"], "true");
    for kind in ["kill", "pause", "partition", "clock"] {
        assert!(results["faults"][kind].as_u64().unwrap_or(0) >= 1, "no {kind} fault: {}", results["faults"]);
    }
    let g = &results["gapless"];
    assert_eq!(g["valid"], "true", "{g}");
    assert!(g["numbers"].as_u64().unwrap() >= 200, "too few numbers issued: {g}");
    assert!(g["repeats"].as_u64().unwrap() > 0 && g["replays"].as_u64().unwrap() > 0, "no key asked again: {g}");
    // Reservations were confirmed, voided, and voided by the leader at their deadline.
    for how in ["issued", "confirmed", "voided", "expired"] {
        assert!(g["ended"][how].as_u64().unwrap_or(0) > 0, "no number {how}: {g}");
    }
    for tag in ["chaos-gl-never", "chaos-gl-daily"] {
        assert_eq!(g["series"][tag]["nodes_compared"], 3, "{tag}'s ledger was not compared on every node: {g}");
    }
    // The seed's first clock fault skews the leader by -741 ms for 1.8 s: the numbers it
    // issues meanwhile carry its skewed time (the leader stamps its clock into the command).
    if run.seed == GAPLESS_SEED {
        assert!(g["stamp_behind_ms"].as_i64().unwrap() <= -300, "the clock fault did not move the stamps: {g}");
    }
    assert!(stdout.contains("gapless: verdict True"), "{stdout}");
}

/// The first seed from `from` whose schedule's first four power cuts hit one node, a
/// minority, a majority and every node (in some order), so a short run has each size.
fn power_cut_seed(from: u64) -> u64 {
    use leaf_cluster_tests::chaos::schedule::Target;
    (from..)
        .find(|seed| {
            let cuts: Vec<Target> =
                plan(*seed, &[FaultKind::PowerCut], 60_000).iter().take(4).map(|f| f.target).collect();
            [Target::Follower, Target::Minority, Target::Majority, Target::All].iter().all(|t| cuts.contains(t))
        })
        .expect("a seed")
}

/// Power cuts as a chaos fault (root and `/dev/fuse`): each node's data on a disk that forgets
/// what was not synced, and a cut of one node, a minority, a majority and the whole cluster
/// under the workload of every profile and the gapless series. The checker must find every
/// answer consistent (no ID twice, monotonic order, every ID inside a committed allocation,
/// the series gapless) and every node back. Without root or /dev/fuse it prints why and
/// passes, unless `LEAF_REQUIRE_FUSE=1` (set by `.ci/run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chaos_run_with_power_cuts_of_every_size_passes_the_checker() {
    let _lane = beside().await;
    if !leaf_cluster_tests::power::Power::available().unwrap() {
        return;
    }
    let kinds = [FaultKind::PowerCut];
    let run = chaos_run(power_cut_seed(20261129), &kinds, &[(FaultKind::PowerCut, 4)], Duration::from_secs(6));
    let (out, stdout, results) = run_chaos(&run, &["--nodes", "3", "--faults", "power-cut", "--gapless"]).await;
    assert!(stdout.contains(&format!("seed {}", run.seed)), "the run must print its seed");
    assert_eq!(results["valid"], "true");
    assert_eq!(results["gapless"]["valid"], "true", "{}", results["gapless"]);
    assert!(results["faults"]["power-cut"].as_u64().unwrap_or(0) >= 4, "too few power cuts: {}", results["faults"]);
    let history = std::fs::read_to_string(out.path().join("history.jsonl")).unwrap();
    for target in ["Follower", "Minority", "Majority", "All"] {
        assert!(history.contains(&format!("power cut {target} ")), "no power cut of {target} in the history");
    }
    assert!(results["operations"]["ok"].as_u64().unwrap() > 2000, "too little traffic: {}", results["operations"]);
}
