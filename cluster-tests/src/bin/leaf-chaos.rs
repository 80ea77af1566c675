//! `leaf-chaos`: Jepsen-style failover runs against a local cluster of real `leaf` processes.
//!
//! `leaf-chaos --nodes 5 --duration 120s --seed 42 --faults kill,pause,partition,clock,restart,membership`
//! runs a cluster, a client workload and the seeded fault schedule, then checks the history.
//! `leaf-chaos check DIR` re-checks a finished run. Exit status: 0 valid, 1 a violation was
//! found, 2 unknown (nothing violated, but not everything could be verified or the cluster did
//! not recover in time), 3 the harness itself failed.
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use leaf_cluster_tests::chaos::check::summary;
use leaf_cluster_tests::chaos::run::{check_dir, run, RunConfig};
use leaf_cluster_tests::chaos::schedule::FaultKind;
use leaf_cluster_tests::cluster::default_bin;

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
    /// Fault kinds, comma-separated: kill,pause,partition,clock,restart,membership.
    #[arg(long, default_value = "kill,pause,partition,clock,restart,membership", value_delimiter = ',', value_parser = parse_faults)]
    faults: Vec<FaultKind>,
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
    /// How long every node may take to serve again after everything is healed.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    recovery_bound: Duration,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Re-check a finished run's directory (history.jsonl, allocations.json, recovery.json).
    Check { dir: PathBuf },
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 90s, 10m or 1500ms"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "" | "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{s:?}: unknown unit {unit:?} (ms, s, m, h)")),
    }
}

fn parse_faults(s: &str) -> Result<FaultKind, String> {
    s.parse()
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
            let mut faults = args.faults.clone();
            faults.dedup();
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
                bin: match args.bin {
                    Some(b) => b,
                    None => default_bin()?,
                },
                recovery_bound: args.recovery_bound,
                request_timeout: Duration::from_secs(3),
            };
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
            let out = cfg.out.clone();
            let results = rt.block_on(run(cfg))?;
            println!("history, results.json and node logs: {}", out.display());
            results
        }
    };
    println!("\n{}", summary(&results));
    Ok(results.valid.exit_code())
}
