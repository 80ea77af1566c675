//! `leaf-failover-bench`: how long each kind of request goes unserved when a node of a 3- or
//! 5-node cluster fails, what errors clients see, how many elections it costs, and how many
//! segment IDs the failure wastes (issues 34 and 55).
//!
//! Starts a `--nodes` cluster of real `leaf` processes (the binary next to this one, `--bin` or
//! `LEAF_BIN`; mutual TLS between the nodes and HTTPS clients unless `--plaintext`), creates a
//! segment tag, a monotonic tag and a tag per admin-writing client, and runs steady load of
//! four kinds (segment IDs, snowflake IDs, monotonic IDs, admin writes: tag updates, each a
//! Raft write), each through `--tasks` clients of `leaf-client` over all nodes with its default
//! retries and failover, and through one client per node that sends one attempt to that node
//! only. Every request is recorded (start, end, ok or the error).
//!
//! Then `--reps` times the `--scenario`: `leader-kill` (`kill -9` the leader), `follower-kill`
//! (a follower, chosen with the seed), `leader-pause` (SIGSTOP the leader: it keeps its sockets
//! and answers nothing, the harness's stand-in for a partition), `rolling-restart` (SIGTERM
//! and restart the followers then the leader, one after another), `leader-term` (SIGTERM the
//! leader, a graceful stop that hands leadership over first, and start it again once the others
//! serve), `follower-heal` and
//! `leader-heal` (cut a follower's or the leader's Raft links both ways for at least `--away-ms`,
//! then heal them; the nodes' Raft traffic then goes through per-link proxies). The victim comes back once
//! the others serve every kind again, and the cluster is healthy before the next fault
//! (`leaf_cluster_tests::failover::drive`).
//!
//! Prints Markdown: per kind and client, the window (the longest time without a success at the
//! nodes that stayed up, from the fault until the cluster served everything again after the
//! victim's return) p50/p99/max over the repetitions and the errors; the times to a new leader
//! and back to healthy; the terms each fault cost (elections) and the leader changes; the
//! segment and monotonic IDs each fault wasted (the victim's committed
//! allocations it never served, from the allocation journal, `/cache` and every served ID).
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Parser, ValueEnum};
use leaf_api::profile::Profile;
use leaf_api::types::CreateTagRequest;
use leaf_client::Client;
use leaf_cluster_tests::chaos::proxy::{self, Proxies};
use leaf_cluster_tests::cluster::{default_bin, Cluster, Options, TOKEN};
use leaf_cluster_tests::failover::analysis::{errors, quantile, wasted, windows, Mode};
use leaf_cluster_tests::failover::drive::{Driver, Event, Fault};
use leaf_cluster_tests::failover::load::{Load, Progress, Target};
use leaf_cluster_tests::failover::{Kind, Record, Via};
use rand::{Rng, SeedableRng};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    LeaderKill,
    FollowerKill,
    LeaderPause,
    RollingRestart,
    LeaderTerm,
    FollowerHeal,
    LeaderHeal,
}

impl Scenario {
    fn title(self) -> &'static str {
        match self {
            Scenario::LeaderKill => "`kill -9` of the leader",
            Scenario::FollowerKill => "`kill -9` of a follower",
            Scenario::LeaderPause => "the leader paused (SIGSTOP, the stand-in for a partition)",
            Scenario::RollingRestart => "rolling restart (SIGTERM and start, followers then the leader)",
            Scenario::LeaderTerm => "SIGTERM of the leader (a graceful stop), started again once the others serve",
            Scenario::FollowerHeal => "a follower partitioned (Raft links cut both ways), then healed",
            Scenario::LeaderHeal => "the leader partitioned (Raft links cut both ways), then healed",
        }
    }

    fn partitions(self) -> bool {
        matches!(self, Scenario::FollowerHeal | Scenario::LeaderHeal)
    }
}

#[derive(Parser, Debug)]
#[command(about = "Failover windows of a local leaf cluster under load")]
struct Args {
    #[arg(long, value_enum, default_value = "leader-kill")]
    scenario: Scenario,
    /// Nodes of the cluster.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(3..=7))]
    nodes: u64,
    /// The least time a partitioned node stays cut off (`*-heal`).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    away_ms: u64,
    /// Repetitions (default: 10 for leader-kill, 3 for the others).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100))]
    reps: Option<u64>,
    /// leaf-client tasks per request kind (besides one single-attempt client per node).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=32))]
    tasks: u64,
    /// Pace of each ID-requesting task, in milliseconds between requests.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=1000))]
    interval_ms: u64,
    /// Pace of each admin-writing task.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=1000))]
    admin_interval_ms: u64,
    /// Load kept running after each recovery, before the next step.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    settle_ms: u64,
    /// Longest wait for every kind to succeed again after a fault before going on.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=300))]
    max_hold_secs: u64,
    /// Seed of the random choices (which follower); printed when not given.
    #[arg(long)]
    seed: Option<u64>,
    /// The `leaf` binary (default: `leaf` next to this program, or LEAF_BIN).
    #[arg(long, env = "LEAF_BIN")]
    bin: Option<PathBuf>,
    /// Plaintext between the nodes and to clients (default: TLS).
    #[arg(long)]
    plaintext: bool,
    /// Copy the nodes' logs into this directory at the end.
    #[arg(long)]
    logs: Option<PathBuf>,
}

const SEGMENT_TAG: &str = "seg";
const MONOTONIC_TAG: &str = "mono";
const SNOWFLAKE_KEY: &str = "bench";

fn ms(ns: u64) -> String {
    format!("{:.0} ms", ns as f64 / 1e6)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let seed = args.seed.unwrap_or_else(rand::random);
    eprintln!("seed {seed} (--seed {seed} repeats the random choices)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let many = matches!(args.scenario, Scenario::LeaderKill | Scenario::LeaderTerm | Scenario::FollowerHeal);
    let reps = args.reps.unwrap_or(if many { 10 } else { 3 }) as usize;
    let bin = match args.bin.clone() {
        Some(b) => b,
        None => default_bin()?,
    };
    let mut opts = Options::new(&bin);
    opts.tls = !args.plaintext;
    let ids: Vec<u64> = (1..=args.nodes).collect();
    let proxies = args.scenario.partitions().then(Proxies::default);
    let mut cluster = match &proxies {
        Some(p) => Cluster::start_specs(proxy::proxied_specs(p, &ids).await?, opts)?,
        None => Cluster::start(args.nodes, opts)?,
    };
    let leader = cluster.wait_leader(Duration::from_secs(30)).await?;
    let admin = cluster.client(leader);
    let tag = |tag: &str, profile| CreateTagRequest { tag: tag.into(), step: 1000, profile, ..Default::default() };
    admin.create_tag(&tag(SEGMENT_TAG, None)).await.context("create the segment tag")?;
    admin.create_tag(&tag(MONOTONIC_TAG, Some(Profile::Monotonic))).await.context("create the monotonic tag")?;
    let ids = cluster.ids();
    let urls: Vec<String> = ids.iter().map(|&id| cluster.url(id)).collect();
    let mut builder = Client::builder(&urls).token(TOKEN);
    if let Some(ca) = cluster.ca() {
        builder = builder.ca_file(ca);
    }
    let retrying = builder.build()?;
    let mut targets = Vec::new();
    for kind in Kind::ALL {
        let interval =
            Duration::from_millis(if kind == Kind::Admin { args.admin_interval_ms } else { args.interval_ms });
        let mut add = |via: Via, client: Client| {
            let tag = match kind {
                Kind::Segment => SEGMENT_TAG.to_string(),
                Kind::Monotonic => MONOTONIC_TAG.to_string(),
                Kind::Snowflake => SNOWFLAKE_KEY.to_string(),
                Kind::Admin => format!("adm-{}", targets.len()),
            };
            targets.push(Target { kind, via, client, tag, interval });
        };
        for _ in 0..args.tasks {
            add(Via::Retrying, retrying.clone());
        }
        for &id in &ids {
            add(Via::Plain(id), cluster.client_with(id, Some(TOKEN), Duration::from_secs(5)));
        }
    }
    for t in targets.iter().filter(|t| t.kind == Kind::Admin) {
        admin.create_tag(&tag(&t.tag, None)).await.context("create an admin-write tag")?;
    }
    let clients: Vec<(Kind, Via)> = targets.iter().map(|t| (t.kind, t.via)).collect();
    let tls = if args.plaintext { "plaintext" } else { "mutual TLS, HTTPS clients" };
    eprintln!(
        "cluster of {} up ({tls}, leader {leader}), binary {}; {} client tasks; {:?} x {reps}",
        args.nodes,
        bin.display(),
        targets.len(),
        args.scenario
    );
    let progress = Arc::new(Progress::new(Instant::now()));
    let load = Load::start(targets, progress.clone());
    let mut driver = Driver::new(&mut cluster, progress.clone(), clients);
    driver.settle = Duration::from_millis(args.settle_ms);
    driver.max_hold = Duration::from_secs(args.max_hold_secs);
    driver.proxies = proxies;
    driver.away = Duration::from_millis(args.away_ms);
    driver.healthy().await?;
    if driver.recovered(&ids, 0).await.is_none() {
        anyhow::bail!("not every client succeeded within {:?} of the start", driver.max_hold);
    }
    tokio::time::sleep(driver.settle).await;
    let max_id_before = retrying.tag(SEGMENT_TAG).await?.max_id;
    for rep in 0..reps {
        let leader = driver.healthy().await?;
        let followers: Vec<u64> = ids.iter().copied().filter(|&id| id != leader).collect();
        match args.scenario {
            Scenario::LeaderKill => driver.fault(rep, leader, Fault::Kill).await?,
            Scenario::LeaderPause => driver.fault(rep, leader, Fault::Pause).await?,
            Scenario::FollowerKill => {
                let victim = followers[rng.gen_range(0..followers.len())];
                driver.fault(rep, victim, Fault::Kill).await?;
            }
            Scenario::LeaderTerm => driver.fault(rep, leader, Fault::Stop).await?,
            Scenario::LeaderHeal => driver.fault(rep, leader, Fault::Partition).await?,
            Scenario::FollowerHeal => {
                let victim = followers[rng.gen_range(0..followers.len())];
                driver.fault(rep, victim, Fault::Partition).await?;
            }
            Scenario::RollingRestart => {
                for victim in followers.into_iter().chain([leader]) {
                    driver.fault(rep, victim, Fault::Restart).await?;
                }
            }
        }
        if let Some(e) = driver.events.last() {
            eprintln!("rep {rep} done at {:.1} s", e.end_ns as f64 / 1e9);
        }
    }
    let events = std::mem::take(&mut driver.events);
    drop(driver);
    let records = load.finish().await?;

    let leader = cluster.wait_leader(Duration::from_secs(30)).await?;
    let max_id_after = retrying.tag(SEGMENT_TAG).await?.max_id;
    let by_leader = cluster.client(leader);
    let seg_allocs = by_leader.allocations(Some(SEGMENT_TAG), None).await?;
    let mono_allocs = by_leader.allocations(Some(MONOTONIC_TAG), None).await?;
    if seg_allocs.complete_from_index != 0 || mono_allocs.complete_from_index != 0 {
        eprintln!("warning: the leader's allocation journal is not complete since the start");
    }
    let mut buffered = Vec::new();
    for &id in &ids {
        for entry in cluster.client(id).cache().await?.into_iter().filter(|e| e.tag == SEGMENT_TAG) {
            let segments = entry.current.iter().chain(entry.next.iter()).chain(entry.spares.iter());
            buffered.extend(segments.map(|s| (s.position, s.end)));
        }
    }
    let served = |kind: Kind| {
        let mut v: Vec<i64> = records.iter().filter(|r| r.kind == kind && r.ok).filter_map(|r| r.id).collect();
        v.sort_unstable();
        v
    };
    let (seg_served, mono_served) = (served(Kind::Segment), served(Kind::Monotonic));
    let duplicates = seg_served.windows(2).filter(|w| w[0] == w[1]).count()
        + mono_served.windows(2).filter(|w| w[0] == w[1]).count();
    anyhow::ensure!(duplicates == 0, "{duplicates} IDs were served twice");

    let waste = |allocs: &[leaf_api::types::AllocationView], served: &[i64], buffered: &[(i64, i64)], e: &Event| {
        wasted(allocs, served, buffered, e.victim, e.index_after, e.index_upto)
    };
    let seg_waste: Vec<u64> =
        events.iter().map(|e| waste(&seg_allocs.allocations, &seg_served, &buffered, e)).collect();
    let mono_waste: Vec<u64> = events.iter().map(|e| waste(&mono_allocs.allocations, &mono_served, &[], e)).collect();
    for (e, (sw, mw)) in events.iter().zip(seg_waste.iter().zip(&mono_waste)) {
        print_event(e, &records, *sw, *mw);
    }
    println!("\n#### {}, {} nodes: {reps} repetitions (seed {seed})\n", args.scenario.title(), args.nodes);
    print_windows(&events, &records, reps);
    let secs = |f: &dyn Fn(&Event) -> Option<u64>| -> Vec<u64> { events.iter().filter_map(f).collect() };
    let times = [
        ("fault → the others agree on a leader", secs(&|e| Some(e.leader_ns - e.fault_ns))),
        ("fault → every kind served again by the others", secs(&|e| e.recovered_ns.map(|r| r - e.fault_ns))),
        ("victim back (restart or resume) → cluster healthy", secs(&|e| Some(e.healthy_ns - e.restart_ns))),
    ];
    println!("\n| per fault ({} faults) | p50 | max |\n|---|---|---|", events.len());
    for (name, v) in times {
        println!("| {name} | {} | {} |", ms(quantile(&v, 0.5)), ms(quantile(&v, 1.0)));
    }
    let terms: Vec<u64> = events.iter().map(|e| e.terms).collect();
    let changes: Vec<u64> = events.iter().map(|e| u64::from(e.leader_changed)).collect();
    for (name, v) in [
        ("terms (elections) per fault", &terms),
        ("leader changes", &changes),
        ("segment IDs wasted", &seg_waste),
        ("monotonic IDs wasted", &mono_waste),
    ] {
        let total: u64 = v.iter().sum();
        println!("| {name} (total {total}) | {} | {} |", quantile(v, 0.5), quantile(v, 1.0));
    }
    let still: i64 = buffered.iter().map(|(p, e)| e - p).sum();
    let allocated = max_id_after - max_id_before;
    println!(
        "\nSegment tag: `max_id` grew by {allocated} during the faults; the clients were served {} IDs in the whole \
         run, the nodes still buffer {still}; the faults' victims left {} of their allocations unserved.",
        seg_served.len(),
        seg_waste.iter().sum::<u64>()
    );
    if let Some(dir) = &args.logs {
        std::fs::create_dir_all(dir)?;
        for id in ids {
            std::fs::copy(cluster.log_path(id), dir.join(format!("node{id}.log")))?;
        }
    }
    Ok(())
}

/// The windows, errors and requests of each kind and client over the repetitions.
fn print_windows(events: &[Event], records: &[Record], reps: usize) {
    println!("| request kind | client | window p50 | p99 | max | errors | errors by class | requests |");
    println!("|---|---|---|---|---|---|---|---|");
    for kind in Kind::ALL {
        for mode in [Mode::Retrying, Mode::Plain] {
            let mut per_rep = vec![0u64; reps];
            let mut classes = std::collections::BTreeMap::<String, u64>::new();
            let mut requests = 0;
            for e in events {
                let w = windows(records, e.fault_ns, e.end_ns, Some(e.victim));
                per_rep[e.rep] = per_rep[e.rep].max(w.get(&(kind, mode)).copied().unwrap_or(0));
                for (class, n) in
                    errors(records, e.fault_ns, e.end_ns, Some(e.victim)).remove(&(kind, mode)).unwrap_or_default()
                {
                    *classes.entry(class).or_default() += n;
                }
                requests += records
                    .iter()
                    .filter(|r| r.kind == kind && r.end_ns >= e.fault_ns && r.end_ns < e.end_ns)
                    .filter(|r| (mode == Mode::Plain) == r.via.is_plain() && r.via != Via::Plain(e.victim))
                    .count();
            }
            let total: u64 = classes.values().sum();
            let classes: Vec<String> = classes.iter().map(|(c, n)| format!("{n} {c}")).collect();
            println!(
                "| {} | {} | {} | {} | {} | {total} | {} | {requests} |",
                kind.name(),
                mode.name(),
                ms(quantile(&per_rep, 0.5)),
                ms(quantile(&per_rep, 0.99)),
                ms(quantile(&per_rep, 1.0)),
                if classes.is_empty() { "—".to_string() } else { classes.join(", ") }
            );
        }
    }
}

/// One line per fault on stderr: its times, the windows of the fault phase (until the victim
/// came back) and of the rejoin (after), and the IDs it wasted.
fn print_event(e: &Event, records: &[Record], seg_waste: u64, mono_waste: u64) {
    let role = if e.victim_led { "leader" } else { "follower" };
    let show = |from: u64, to: u64| {
        let w = windows(records, from, to, Some(e.victim));
        let parts: Vec<String> = w
            .iter()
            .map(|((k, m), ns)| format!("{:?}/{}={}", k, if *m == Mode::Plain { "plain" } else { "retry" }, ms(*ns)))
            .collect();
        parts.join(" ")
    };
    eprintln!(
        "rep {} {:?} node {} ({role}) at {:.3} s: leader after {}, served again after {}, back → healthy {}; \
         terms +{}, leader changed: {}; wasted segment {seg_waste} monotonic {mono_waste}\n  down: {}\n  rejoin: {}",
        e.rep,
        e.fault,
        e.victim,
        e.fault_ns as f64 / 1e9,
        ms(e.leader_ns - e.fault_ns),
        e.recovered_ns.map_or("never".to_string(), |r| ms(r - e.fault_ns)),
        ms(e.healthy_ns - e.restart_ns),
        e.terms,
        e.leader_changed,
        show(e.fault_ns, e.restart_ns),
        show(e.restart_ns, e.end_ns),
    );
}
