//! `leaf-gapless-bench`: numbers per second of gapless series on a local loopback cluster of
//! real `leaf` processes, against the Raft allocation rate of the same run.
//!
//! Starts an N-node cluster (default 3) from the `leaf` binary next to this one (or `--bin`,
//! `LEAF_BIN`), creates one gapless series and `--series` more (default 1,000), and measures for
//! `--secs` each, one after another:
//! - baseline: segment allocations proposed at the leader over the internal RPC by
//!   `--clients` concurrent proposers (each its own Raft entry unless the leader groups them);
//! - one series, `--clients` concurrent clients spread over every node (followers forward),
//!   each issuing new keys one after another over HTTP(S);
//! - the same, all clients at the leader;
//! - `--series` series, each client issuing to a random one;
//! - one series, each client reserving a number then confirming it (two commits a document).
//!
//! Prints a Markdown table: numbers (or allocations, or confirmed reservations) per second,
//! p50/p99/max latency, and the rate as a ratio to the baseline's; then the ledger's size and
//! the leader's resident memory before and after the gapless measurements (what the ledger
//! costs, roughly: the process's other memory moves too). Mutual TLS between the nodes and HTTPS for clients, as
//! `leaf-bench`; `--plaintext` for neither.
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use leaf_api::gapless::GaplessOptions;
use leaf_api::profile::Profile;
use leaf_api::types::{CreateTagRequest, CreateTagsRequest};
use leaf_client::Client;
use leaf_cluster_tests::cluster::{default_bin, Cluster, Options, SECRET};
use leaf_node::internals::ops::{self, Propose};
use leaf_node::internals::PeerClient;
use leaf_raft_store::{Applied, Op};

#[derive(Parser, Debug)]
#[command(about = "Gapless numbers per second on a local leaf cluster")]
struct Args {
    /// Cluster size.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(2..=7))]
    nodes: u64,
    /// Concurrent clients (and proposers in the baseline).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    clients: u64,
    /// Series in the many-series measurement.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    series: u64,
    /// Seconds each measurement runs.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    secs: u64,
    /// The `leaf` binary (default: `leaf` next to this program, or LEAF_BIN).
    #[arg(long, env = "LEAF_BIN")]
    bin: Option<std::path::PathBuf>,
    /// Plaintext between the nodes and to clients (default: TLS).
    #[arg(long)]
    plaintext: bool,
}

/// What one measurement saw.
struct Run {
    name: String,
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Run {
    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }

    fn pct(&self, p: f64) -> Duration {
        let mut s = self.latencies.clone();
        s.sort();
        s.get(((s.len().max(1) - 1) as f64 * p).round() as usize).copied().unwrap_or_default()
    }
}

/// Runs `clients` loops of `op(client, i)` for `secs` and collects every latency.
async fn measure<F, Fut>(name: String, clients: u64, secs: u64, op: F) -> anyhow::Result<Run>
where
    F: Fn(u64, u64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let start = Instant::now();
    let until = start + Duration::from_secs(secs);
    let tasks: Vec<_> = (0..clients)
        .map(|k| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = 0;
                while Instant::now() < until {
                    let t = Instant::now();
                    op(k, i).await?;
                    lat.push(t.elapsed());
                    i += 1;
                }
                anyhow::Ok(lat)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    Ok(Run { name, latencies, wall: start.elapsed() })
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let bin = match args.bin {
        Some(b) => b,
        None => default_bin()?,
    };
    let mut opts = Options::new(&bin);
    opts.log_filter = "warn".into();
    opts.tls = !args.plaintext;
    let cluster = Cluster::start(args.nodes, opts)?;
    let leader = cluster.wait_leader(Duration::from_secs(30)).await?;
    let admin = cluster.client(leader);
    let gapless = |tag: String| CreateTagRequest {
        tag,
        step: 1,
        profile: Some(Profile::Gapless),
        gapless: Some(GaplessOptions::default()),
        ..Default::default()
    };
    admin.create_tag(&gapless("one".into())).await.context("create the series")?;
    let many: Vec<CreateTagRequest> = (0..args.series).map(|i| gapless(format!("s-{i:05}"))).collect();
    for chunk in many.chunks(5_000) {
        admin.create_tags(&CreateTagsRequest { tags: chunk.to_vec() }).await.context("create the series")?;
    }
    admin.create_tag(&CreateTagRequest { tag: "bench".into(), step: 1000, ..Default::default() }).await?;
    let tls = if args.plaintext { "plaintext" } else { "mutual TLS, HTTPS clients" };
    eprintln!("cluster of {} up ({tls}, leader {leader}), binary {}", args.nodes, bin.display());
    let (clients, secs) = (args.clients, args.secs);
    let nodes: Vec<Client> =
        cluster.ids().into_iter().map(|id| cluster.client_with(id, None, Duration::from_secs(10))).collect();
    let at_leader = cluster.client_with(leader, None, Duration::from_secs(10));
    let follower = cluster.ids().into_iter().find(|&id| id != leader).context("no follower")?;
    let peers = match cluster.peer_tls_config(follower)? {
        Some(config) => PeerClient::with_client_config(Some(SECRET), config),
        None => PeerClient::new(Some(SECRET), None),
    };
    let leader_addr = cluster.addr(leader);
    let mut runs = Vec::new();

    let name = format!("baseline: segment allocations at the leader, {clients} proposers");
    runs.push(
        measure(name, clients, secs, move |_, _| {
            let (peers, addr) = (peers.clone(), leader_addr.clone());
            async move {
                let op = Op::AllocateSegment { tag: "bench".into(), step: 1000, node_id: leader };
                match ops::call(&peers, leader, &addr, &Propose { op }, Duration::from_secs(10)).await?? {
                    Applied::Segment(_) => Ok(()),
                    other => bail!("not a segment: {other:?}"),
                }
            }
        })
        .await?,
    );
    let issue = |c: Client, tag: String, key: String| async move {
        let n = c.gapless(&tag).issue(&key).await.context("issue")?;
        if n.replayed {
            bail!("key {key} was issued before");
        }
        Ok(())
    };
    let spread = nodes.clone();
    let name = format!("one series, {clients} clients over {} nodes", nodes.len());
    runs.push(
        measure(name, clients, secs, move |k, i| {
            let c = spread[k as usize % spread.len()].clone();
            issue(c, "one".into(), format!("a-{k}-{i}"))
        })
        .await?,
    );
    let name = format!("one series, {clients} clients at the leader");
    runs.push(
        measure(name, clients, secs, move |k, i| issue(at_leader.clone(), "one".into(), format!("b-{k}-{i}"))).await?,
    );
    let rss_before = rss(&admin).await?;
    let (spread, series) = (nodes.clone(), args.series);
    let name = format!("{series} series, {clients} clients over {} nodes", nodes.len());
    runs.push(
        measure(name, clients, secs, move |k, i| {
            let c = spread[k as usize % spread.len()].clone();
            // A different series each call, spread evenly.
            let tag = format!("s-{:05}", (k * 7919 + i * 104_729) % series);
            issue(c, tag, format!("c-{k}-{i}"))
        })
        .await?,
    );
    let spread = nodes.clone();
    let name = format!("one series, reserve then confirm, {clients} clients over {} nodes", nodes.len());
    runs.push(
        measure(name, clients, secs, move |k, i| {
            let c = spread[k as usize % spread.len()].clone();
            async move {
                let key = format!("d-{k}-{i}");
                let n = c.gapless("one").reserve(&key, Some(600)).await.context("reserve")?;
                if n.replayed {
                    bail!("key {key} was reserved before");
                }
                c.gapless("one").confirm(&key).await.context("confirm")?;
                Ok(())
            }
        })
        .await?,
    );
    // Every number accounted for: the one series holds exactly what was issued to it.
    let issued = runs[1].latencies.len() + runs[2].latencies.len() + runs[4].latencies.len();
    let page = admin.gapless("one").ledger_page(&Default::default()).await?;
    if page.numbers as usize != issued {
        bail!("series one holds {} numbers, {issued} were issued", page.numbers);
    }

    let base = runs[0].rate();
    println!("| measurement | answers | per second | p50 | p99 | max | rate ÷ baseline |");
    println!("|---|---|---|---|---|---|---|");
    for r in &runs {
        println!(
            "| {} | {} | {:.0} | {} | {} | {} | {:.2} |",
            r.name,
            r.latencies.len(),
            r.rate(),
            ms(r.pct(0.5)),
            ms(r.pct(0.99)),
            ms(r.pct(1.0)),
            r.rate() / base
        );
    }
    let numbers: usize = runs[1..].iter().map(|r| r.latencies.len()).sum();
    let rss_after = rss(&admin).await?;
    println!(
        "\nledger: {numbers} numbers; leader RSS {:.1} MiB before the gapless measurements, {:.1} MiB after \
         ({:.0} bytes a number)",
        rss_before / 1048576.0,
        rss_after / 1048576.0,
        (rss_after - rss_before) / numbers.max(1) as f64
    );
    drop(cluster);
    Ok(())
}

/// A node's resident memory, from its metrics.
async fn rss(c: &Client) -> anyhow::Result<f64> {
    let text = c.metrics().await?;
    let line = text.lines().find_map(|l| l.strip_prefix("process_resident_memory_bytes "));
    line.context("no process_resident_memory_bytes")?.trim().parse().context("process_resident_memory_bytes")
}
