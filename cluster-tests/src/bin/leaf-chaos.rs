//! `leaf-chaos`: Jepsen-style failover runs against a local cluster of real `leaf` processes.
//!
//! `leaf-chaos --nodes 5 --duration 120s --seed 42 --faults kill,pause,partition,clock,restart,membership`
//! runs a cluster, a client workload and the seeded fault schedule, then checks the history.
//! `leaf-chaos check DIR` re-checks a finished run. Exit status: 0 valid, 1 a violation was
//! found, 2 unknown (nothing violated, but not everything could be verified or the cluster did
//! not recover in time), 3 the harness itself failed.
//!
//! `leaf-chaos --tags 100000` adds 100,000 tags with a Zipf-distributed share of the requests.
//!
//! `leaf-chaos --gapless` adds gapless series (invoice numbers) and their workers; their
//! ledgers are read from every node and checked for gaps, duplicates and lost answers.
//!
//! `leaf-chaos --docker --nodes 5 --duration 6m` runs the same against the containers of
//! `deploy/docker-compose.5.yml` (`docker kill`/`start`, `pause`/`unpause`,
//! `network disconnect`/`connect`), building the image first if it is missing.
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use leaf_cluster_tests::chaos::check::summary;
use leaf_cluster_tests::chaos::run::{check_dir, run, DockerTarget, RunConfig};
use leaf_cluster_tests::chaos::schedule::FaultKind;
use leaf_cluster_tests::cluster::default_bin;
use leaf_cluster_tests::docker;
// Overflow-checked `90s` / `10m` / `1500ms` parsing, shared with `leaf bench`.
use leaf_loadgen::parse_duration;

#[derive(Parser, Debug)]
#[command(about = "Chaos runs against a local leaf cluster, with a recorded history and a checker")]
#[command(args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Cluster size.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(3..=9))]
    nodes: u64,
    /// Warmup + faults + after phases (recovery comes on top): e.g. 90s, 10m.
    #[arg(long, default_value = "90s", value_parser = parse_duration)]
    duration: Duration,
    /// Seed of the fault schedule and the workload (default: from the clock; always printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Fault kinds, comma-separated: kill,pause,partition,clock,restart,membership,link,netem,
    /// power-cut (default: every kind the backend supports but power-cut: link and netem need
    /// --netns; power-cut needs root and /dev/fuse, and local nodes).
    #[arg(long, value_delimiter = ',', value_parser = parse_faults)]
    faults: Vec<FaultKind>,
    /// No fault at all: the workload and the checker alone (a load test of the cluster with
    /// every answer checked, e.g. with --tags).
    #[arg(long, conflicts_with = "faults")]
    no_faults: bool,
    /// Run against a docker-compose cluster of the `deploy/` files instead of local processes.
    #[arg(long, conflicts_with = "netns")]
    docker: bool,
    /// Run each local node in a network namespace of its own on a bridge (root): partitions
    /// are iptables drops (one-way, flapping and client cuts too) and links can be degraded
    /// with tc netem.
    #[arg(long)]
    netns: bool,
    /// With --docker: the compose file (default: deploy/docker-compose.yml for 3 nodes,
    /// deploy/docker-compose.5.yml for 5).
    #[arg(long, requires = "docker")]
    compose: Option<PathBuf>,
    /// With --docker: the image to run (built with deploy/build-image.sh if missing).
    #[arg(long, env = "LEAF_IMAGE", default_value = "leaf:latest")]
    image: String,
    /// Concurrent client workers, one outstanding request each.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=512))]
    clients: u32,
    /// Target operations per second over all clients.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    rate: u32,
    /// Output directory (default: chaos-runs/<seed>-<unix time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The `leaf` binary (default: `leaf` next to this program, or LEAF_BIN).
    #[arg(long, env = "LEAF_BIN")]
    bin: Option<PathBuf>,
    /// Further segment tags (`chaos-z-0000000` …), created through the batch API before the
    /// run; half of the segment requests then go to one of them, drawn by a Zipf distribution
    /// (0: only the six fixed tags).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    tags: u64,
    /// The Zipf exponent of the pick among --tags (rank k has weight 1 / k^s; 0 is uniform).
    #[arg(long, default_value_t = 1.1, requires = "tags")]
    zipf_s: f64,
    /// Adds two gapless series (one that never resets, one daily with a display format,
    /// created before the faults) and max(2, clients/3) dedicated workers issuing their numbers,
    /// each key retried until answered and one call in eight repeating an answered key. After
    /// the run each series' ledger is read from every node (they must be identical) and checked
    /// to be gapless against every answer (a violation exits 1; a key left unanswered by the
    /// recovery deadline, 2).
    #[arg(long)]
    gapless: bool,
    /// With `power-cut` among the faults: every power cut hits every node at once (else one
    /// node, a minority, a majority or all of them, as the seed draws).
    #[arg(long)]
    power_cut_all: bool,
    /// How long every node may take to serve again after everything is healed.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    recovery_bound: Duration,
    /// A rolling upgrade run: start every node on this earlier `leaf`, then, as the fault
    /// phase begins, replace each by --bin, the leader last, wait until every node runs the
    /// newest cluster version, and set the gapless series' limits (a feature of that version).
    /// The clients carry the admin token. Any failure of the upgrade fails the run (exit 1).
    #[arg(long, conflicts_with = "docker")]
    upgrade_from: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Re-check a finished run's directory (history.jsonl, allocations.json, recovery.json;
    /// gapless.jsonl and gapless-ledgers.json of a --gapless run).
    Check { dir: PathBuf },
}

fn parse_faults(s: &str) -> Result<FaultKind, String> {
    s.parse()
}

/// Waits for SIGINT or SIGTERM; returns its name.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = tokio::signal::ctrl_c() => "interrupted",
            _ = term.recv() => "terminated",
        },
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            "interrupted"
        }
    }
}

/// The compose file and image of a --docker run; builds the image if it is missing.
fn docker_target(args: &Args) -> anyhow::Result<DockerTarget> {
    if let Some(why) = docker::unavailable() {
        anyhow::bail!("--docker: {why}");
    }
    let compose_file = match (&args.compose, docker::compose_file(args.nodes)) {
        (Some(f), _) => f.clone(),
        (None, Some(f)) => f,
        (None, None) => anyhow::bail!("deploy/ has compose files for 3 and 5 nodes; pass --compose for {}", args.nodes),
    };
    if !docker::image_exists(&args.image) {
        println!("leaf-chaos: image {} not found; building it with deploy/build-image.sh", args.image);
        docker::build_image(&args.image)?;
    }
    Ok(DockerTarget { compose_file, image: args.image.clone() })
}

/// The fault kinds a run injects: none with --no-faults, those of --faults, or every kind the
/// backend supports.
fn fault_kinds(args: &Args) -> Vec<FaultKind> {
    match (args.no_faults, args.faults.is_empty()) {
        (true, _) => Vec::new(),
        (false, true) => FaultKind::defaults(args.netns),
        (false, false) => args.faults.clone(),
    }
}

fn main() {
    let code = match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("leaf-chaos: {e:#}");
            3
        }
    };
    std::process::exit(code);
}

fn real_main() -> anyhow::Result<i32> {
    let args = Args::parse();
    let results = match args.command {
        Some(Command::Check { dir }) => check_dir(&dir)?,
        None => {
            let seed = args.seed.unwrap_or_else(|| {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
            });
            let mut faults = fault_kinds(&args);
            if !args.netns && faults.iter().any(|k| matches!(k, FaultKind::Link | FaultKind::Netem)) {
                anyhow::bail!("the link and netem faults need --netns");
            }
            if args.netns {
                if let Some(why) = leaf_cluster_tests::chaos::netns::unavailable() {
                    anyhow::bail!("--netns: {why}");
                }
            }
            faults.dedup();
            let docker = if args.docker { Some(docker_target(&args)?) } else { None };
            let out = args.out.clone().unwrap_or_else(|| {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                PathBuf::from(format!("chaos-runs/{seed}-{now}"))
            });
            let cfg = RunConfig {
                nodes: args.nodes,
                duration: args.duration,
                seed,
                faults,
                clients: args.clients,
                rate: args.rate,
                out,
                bin: match (args.bin, &docker) {
                    (Some(b), _) => b,
                    (None, Some(_)) => PathBuf::new(),
                    (None, None) => default_bin()?,
                },
                docker,
                netns: args.netns,
                recovery_bound: args.recovery_bound,
                request_timeout: Duration::from_secs(3),
                tags: usize::try_from(args.tags)?,
                zipf_s: args.zipf_s,
                gapless: args.gapless,
                power_cut_all: args.power_cut_all,
                upgrade_from: args.upgrade_from.clone(),
            };
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            let out = cfg.out.clone();
            // Ctrl-C or SIGTERM drops the run, which stops its nodes (a compose project is
            // taken down with its volumes) instead of leaving them behind.
            let results = rt.block_on(async {
                tokio::select! {
                    r = run(cfg) => r,
                    s = interrupted() => Err(anyhow::anyhow!("{s}: stopped; the cluster was torn down")),
                }
            })?;
            println!("history, results.json and node logs: {}", out.display());
            results
        }
    };
    println!("\n{}", summary(&results));
    if args.upgrade_from.is_some() && !results.fault_errors.is_empty() {
        eprintln!("leaf-chaos: the upgrade failed: {:?}", results.fault_errors);
        return Ok(1);
    }
    Ok(results.valid.exit_code())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_faults_means_none_and_no_list_means_every_kind() {
        let kinds = |argv: &[&str]| fault_kinds(&Args::try_parse_from(argv).unwrap());
        assert!(kinds(&["leaf-chaos", "--no-faults"]).is_empty());
        assert_eq!(kinds(&["leaf-chaos"]), FaultKind::defaults(false));
        assert_eq!(kinds(&["leaf-chaos", "--faults", "kill,pause"]), [FaultKind::Kill, FaultKind::Pause]);
        assert!(Args::try_parse_from(["leaf-chaos", "--no-faults", "--faults", "kill"]).is_err());
    }
}
