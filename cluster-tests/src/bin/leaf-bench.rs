//! `leaf-bench`: latency of Raft writes on a local loopback cluster of real `leaf` processes.
//!
//! Starts an N-node cluster (default 3) from the `leaf` binary next to this one (or `--bin`,
//! or `LEAF_BIN`), waits for a leader and measures, one after another in the same run:
//! - baseline: `GET /health` on the leader — an HTTP round trip on the same stack, no Raft;
//! - a segment allocation proposed at the leader over the internal RPC (append, fsync,
//!   replicate to a quorum that fsyncs, apply), sequentially and with concurrent proposers;
//! - a tag update sent to a follower's admin API, which forwards it to the leader;
//! - snowflake IDs from a follower: one per request, and batches of 100,000 (`?count=`), with
//!   the IDs per second each achieves (the layout's limit is 4,096 per ms per worker).
//!
//! Prints a Markdown table of p50/p90/p99/max and each p50 as a ratio to the baseline's.
//! The cluster runs with mutual TLS between nodes and HTTPS for clients, like the harness's
//! clusters; `--plaintext` measures the same on plaintext loopback (BENCHMARKS.md compares
//! the two).
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use leaf_api::types::{CreateTagRequest, UpdateTagRequest};
use leaf_client::HealthMode;
use leaf_cluster_tests::cluster::{default_bin, Cluster, Options, SECRET};
use leaf_node::internals::ops::{self, Propose};
use leaf_node::internals::PeerClient;
use leaf_raft_store::{Applied, Op};

#[derive(Parser, Debug)]
#[command(about = "Raft write latency on a local leaf cluster")]
struct Args {
    /// Cluster size.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(2..=7))]
    nodes: u64,
    /// Samples per sequential measurement (the forwarded one takes a quarter as many).
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(4..=10_000_000))]
    samples: u64,
    /// Concurrent proposers in the concurrent measurement.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=1024))]
    concurrency: u64,
    /// The `leaf` binary (default: `leaf` next to this program, or LEAF_BIN).
    #[arg(long, env = "LEAF_BIN")]
    bin: Option<std::path::PathBuf>,
    /// Plaintext between the nodes and to clients (default: TLS, with `leaf certs` certificates).
    #[arg(long)]
    plaintext: bool,
}

/// The internal-RPC client, presenting node `as_node`'s certificate when the cluster has TLS.
fn peer_client(cluster: &Cluster, as_node: u64) -> anyhow::Result<PeerClient> {
    Ok(match cluster.peer_tls_config(as_node)? {
        Some(config) => PeerClient::with_client_config(Some(SECRET), config),
        None => PeerClient::new(Some(SECRET), None),
    })
}

struct Stats {
    name: String,
    samples: Vec<Duration>,
    wall: Duration,
}

impl Stats {
    fn pct(&self, p: f64) -> Duration {
        let mut s = self.samples.clone();
        s.sort();
        let i = ((s.len() as f64 - 1.0) * p).round() as usize;
        s[i]
    }
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

async fn sequential<F, Fut>(name: &str, n: usize, mut op: F) -> anyhow::Result<Stats>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    // Warm connections and caches.
    for i in 0..n.min(50) {
        op(i).await?;
    }
    let start = Instant::now();
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        op(i).await?;
        samples.push(t.elapsed());
    }
    Ok(Stats { name: name.to_string(), samples, wall: start.elapsed() })
}

async fn allocate(peers: &PeerClient, addr: &str, leader: u64) -> anyhow::Result<()> {
    let op = Op::AllocateSegment { tag: "bench".into(), step: 1000, node_id: leader };
    match ops::call(peers, leader, addr, &Propose { op }, Duration::from_secs(10)).await?? {
        Applied::Segment(_) => Ok(()),
        other => bail!("not a segment: {other:?}"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let (samples, concurrency) = (args.samples as usize, args.concurrency as usize);
    let bin = match args.bin {
        Some(b) => b,
        None => default_bin()?,
    };
    let mut opts = Options::new(&bin);
    opts.log_filter = "warn".into();
    opts.tls = !args.plaintext;
    let cluster = Cluster::start(args.nodes, opts)?;
    let leader = cluster.wait_leader(Duration::from_secs(30)).await?;
    let follower = cluster.ids().into_iter().find(|&id| id != leader).context("no follower")?;
    let admin = cluster.client(leader);
    let req =
        CreateTagRequest { tag: "bench".into(), step: 1000, max_id: None, description: None, ..Default::default() };
    admin.create_tag(&req).await.context("create tag")?;
    // The baseline asks for a ready node, which includes snowflake mode: wait for it.
    let deadline = Instant::now() + Duration::from_secs(30);
    for id in cluster.ids() {
        while !cluster.client(id).health(HealthMode::All).await.is_ok_and(|h| h.ready) {
            if Instant::now() > deadline {
                bail!("node {id} not ready within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let tls = if args.plaintext { "plaintext" } else { "mutual TLS" };
    eprintln!("cluster of {} up ({tls}, leader {leader}), binary {}", args.nodes, bin.display());
    // The proposals come in as the follower would send them.
    let peers = peer_client(&cluster, follower)?;
    let leader_addr = cluster.addr(leader);
    let mut results = Vec::new();

    let health = cluster.client(leader);
    results.push(
        sequential("baseline: GET /health on the leader (no Raft)", samples, |_| {
            let c = health.clone();
            async move {
                if !c.health(HealthMode::All).await?.ready {
                    bail!("health: not ready");
                }
                Ok(())
            }
        })
        .await?,
    );
    results.push(
        sequential("segment allocation at the leader, 1 proposer", samples, |_| {
            let (peers, addr) = (peers.clone(), leader_addr.clone());
            async move { allocate(&peers, &addr, leader).await }
        })
        .await?,
    );
    {
        let per = samples.div_ceil(concurrency);
        let start = Instant::now();
        let tasks: Vec<_> = (0..concurrency)
            .map(|_| {
                let (peers, addr) = (peers.clone(), leader_addr.clone());
                tokio::spawn(async move {
                    let mut s = Vec::with_capacity(per);
                    for _ in 0..per {
                        let t = Instant::now();
                        allocate(&peers, &addr, leader).await?;
                        s.push(t.elapsed());
                    }
                    anyhow::Ok(s)
                })
            })
            .collect();
        let mut samples = Vec::new();
        for t in tasks {
            samples.extend(t.await??);
        }
        let name = format!("segment allocation at the leader, {concurrency} concurrent proposers");
        results.push(Stats { name, samples, wall: start.elapsed() });
    }
    let via = cluster.client(follower);
    results.push(
        sequential("tag update sent to a follower (forwarded to the leader)", samples / 4, |i| {
            let c = via.clone();
            async move {
                let req =
                    UpdateTagRequest { step: None, description: Some(format!("bench {i}")), ..Default::default() };
                c.update_tag("bench", &req).await.context("update")?;
                Ok(())
            }
        })
        .await?,
    );

    let snowflake = |count: u32| {
        let c = via.clone();
        move |_| {
            let c = c.clone();
            async move {
                c.snowflake_ids("bench", count).await.context("snowflake")?;
                Ok(())
            }
        }
    };
    results.push(sequential("snowflake: 1 ID per request from a follower", samples, snowflake(1)).await?);
    let batches = (samples / 40).max(4);
    results.push(sequential("snowflake: 100,000 IDs per request from a follower", batches, snowflake(100_000)).await?);

    let base = results[0].pct(0.5).as_secs_f64();
    println!("| measurement | samples | p50 | p90 | p99 | max | ops/s | p50 ÷ baseline p50 |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in &results {
        let ops = r.samples.len() as f64 / r.wall.as_secs_f64();
        if r.name.contains("100,000") {
            eprintln!("{}: {:.2} M IDs/s (layout limit 4.096 M/s per worker)", r.name, ops * 0.1);
        }
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.0} | {:.1} |",
            r.name,
            r.samples.len(),
            us(r.pct(0.5)),
            us(r.pct(0.9)),
            us(r.pct(0.99)),
            us(r.pct(1.0)),
            ops,
            r.pct(0.5).as_secs_f64() / base
        );
    }
    drop(cluster);
    Ok(())
}
