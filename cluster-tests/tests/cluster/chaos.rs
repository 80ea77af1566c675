//! `leaf-chaos` runs as a user runs them (its own process, a fixed seed that
//! `LEAF_CHAOS_SEED` overrides): every fault kind behind proxies, and the namespace backend.
use crate::support::*;

/// Runs `leaf-chaos` with `args` and the seed `LEAF_CHAOS_SEED` or `default_seed`, as its own
/// process, as a user runs it; fails (keeping history, results and node logs) unless it exits 0.
/// Returns the seed, the output directory, the printed summary and `results.json`.
pub(crate) async fn run_chaos(
    default_seed: &str,
    args: &[&str],
) -> (String, tempfile::TempDir, String, serde_json::Value) {
    let seed = std::env::var("LEAF_CHAOS_SEED").unwrap_or_else(|_| default_seed.to_string());
    let out = tempfile::Builder::new().prefix("leaf-chaos-ci-").tempdir().unwrap();
    println!("chaos seed {seed}, output in {}", out.path().display());
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_leaf-chaos"))
        .args(args)
        .args(["--seed", &seed, "--bin", &bin()])
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
    (seed, out, stdout, results)
}

/// The CI chaos run: 3 nodes, 75 s, every fault kind, a fixed seed (override with
/// `LEAF_CHAOS_SEED`). The harness runs as its own process, as a user runs it, and must find
/// the history valid (exit 0) with every fault kind injected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_chaos_run_with_every_fault_kind_passes_the_checker() {
    let _serial = SERIAL.lock().await;
    let (seed, _out, stdout, results) = run_chaos("20261121", &["--nodes", "3", "--duration", "75s"]).await;
    assert_eq!(results["valid"], "true");
    for kind in ["kill", "pause", "partition", "clock", "restart", "membership"] {
        assert!(
            results["faults"][kind].as_u64().unwrap_or(0) >= 1,
            "no {kind} fault was injected: {}",
            results["faults"]
        );
    }
    assert!(results["operations"]["ok"].as_u64().unwrap() > 5000, "too little traffic: {}", results["operations"]);
    // The partitions bit: Raft connections were blackholed or cut (with this seed's shapes).
    assert!(results["partition_connections_cut"].as_u64().unwrap() > 0, "partitions cut nothing");
    assert!(stdout.contains(&format!("seed {seed}")), "the run must print its seed");
}

/// The CI run of the namespace backend (root): 3 nodes in network namespaces of their own,
/// 60 s with iptables partitions (halves, isolated leader, ring; and one-way, flapping, clients
/// cut), and degraded links (`netem`), a fixed seed (override with `LEAF_CHAOS_SEED`; this one
/// plans three link faults, so every link shape runs). The history must be valid, the drop
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
    let _serial = SERIAL.lock().await;
    let (_seed, out, _stdout, results) =
        run_chaos("20261149", &["--netns", "--nodes", "3", "--duration", "60s", "--faults", "partition,link,netem"])
            .await;
    assert_eq!(results["valid"], "true");
    for kind in ["partition", "link", "netem"] {
        assert!(results["faults"][kind].as_u64().unwrap_or(0) >= 1, "no {kind} fault: {}", results["faults"]);
    }
    // Every shape only packet filters make ran (the schedule cycles them; this seed plans three).
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
