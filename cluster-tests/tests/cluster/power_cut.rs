//! Power cuts ([`leaf_cluster_tests::power`]): the nodes' data directories on a file system that
//! forgets at a cut whatever was not synced. Nothing a node acknowledged may be lost: no tag
//! whose creation was answered 201 may be gone, no segment ID may be handed out twice, and
//! every ID asked for after a cut of every node is above every ID answered before it (each
//! node starts from the tag's committed allocations, all of which survived).
//!
//! Run against another build with `LEAF_BIN` (the build before issue 51, whose store only
//! `sync_file_range`d, fails both: tags lost and IDs handed out again).
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaf_api::types::CreateTagsRequest;
use leaf_cluster_tests::cluster::{Cluster, NodeSpec, Options, TOKEN};
use leaf_cluster_tests::power::Power;

use crate::support::*;

/// Small segments, so that load commits an allocation every hundred IDs.
const SMALL_SEGMENTS: &str = "[segment]\nmax_step = 100\n";
/// The tags the load takes IDs of.
const HOT: [&str; 3] = ["hot-a", "hot-b", "hot-c"];
/// How long the load runs before the cut (it goes on through the cut and the restart).
const LOAD_BEFORE_CUT: Duration = Duration::from_millis(2500);

/// What clients were answered: IDs per tag, and tags whose creation was acknowledged.
#[derive(Default)]
struct Acked {
    ids: BTreeMap<String, Vec<Answer>>,
    tags: Vec<String>,
    /// Raised to odd just before a cut, to even once its nodes run again: cut `k` is epoch
    /// `2k + 1`.
    epoch: AtomicU64,
}

/// One ID and the epochs its request was invoked and answered in.
#[derive(Clone, Copy)]
struct Answer {
    id: i64,
    invoked: u64,
    answered: u64,
}

/// Snapshots every 100 entries, a short log behind them, sled's files rewritten from 1 MiB, and
/// large segments (the allocation journal, which sled's files also hold, stays small): the
/// nodes rewrite sled's files while they run, again and again.
const REWRITES: &str = "[segment]\nmax_step = 100000\n\
                        [raft]\nsnapshot_every = 100\nkeep_logs_after_snapshot = 50\nrewrite_above_mib = 1\n";

/// A cluster of `n` nodes whose data directories are on disks that [`Power`] can cut, with
/// `toml` as their configuration.
async fn powered_cluster(n: u64, toml: &str) -> Option<(Lane, Power, Cluster)> {
    let lane = beside().await;
    if !Power::available().unwrap() {
        return None;
    }
    let mut power = Power::new().unwrap();
    let mut opts = Options::new(bin());
    opts.extra_toml = toml.to_string();
    let mut cluster = Cluster::prepare_specs((1..=n).map(NodeSpec::direct).collect(), opts).unwrap();
    let ids = cluster.ids();
    power.wire(&mut cluster, &ids).unwrap();
    for id in ids {
        cluster.spawn(id).unwrap();
    }
    let leader = cluster.wait_leader(FORM).await.unwrap();
    for tag in HOT {
        create_tag(&cluster.client(leader), tag, 100).await;
    }
    Some((lane, power, cluster))
}

/// Runs load on every node (IDs of the hot tags, singly and in batches, and a stream of tag
/// creations through node 1) until `stop`, recording only what was acknowledged. Errors while
/// nodes are down are expected and skipped.
fn start_load(
    cluster: &Cluster,
    round: usize,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Acked>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    for id in cluster.ids() {
        for k in 0..2usize {
            let c = cluster.client_with(id, Some(TOKEN), Duration::from_secs(2));
            let (stop, acked) = (stop.clone(), acked.clone());
            tasks.push(tokio::spawn(async move {
                let mut n = 0usize;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let tag = HOT[(n + k) % HOT.len()];
                    let batch = if n.is_multiple_of(5) { Some(1 + (n % 40) as u32) } else { None };
                    let invoked = acked.lock().unwrap().epoch.load(Ordering::SeqCst);
                    match try_get_ids(&c, tag, batch).await {
                        Ok(ids) => {
                            let mut acked = acked.lock().unwrap();
                            let answered = acked.epoch.load(Ordering::SeqCst);
                            let got = ids.into_iter().map(|id| Answer { id, invoked, answered });
                            acked.ids.entry(tag.to_string()).or_default().extend(got);
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            }));
        }
    }
    let c = cluster.client_with(1, Some(TOKEN), Duration::from_secs(2));
    tasks.push(tokio::spawn(async move {
        let mut n = 0usize;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let tag = format!("made-{round}-{n}");
            match c.create_tag(&tag_req(&tag, 10)).await {
                Ok(_) => acked.lock().unwrap().tags.push(tag),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }));
    tasks
}

/// `rounds` times: load on every node, a power cut of all of them in the middle of it, the
/// restart; then the checks over everything acknowledged, on a quiet cluster: `extra`, the
/// caller's own load, is stopped with this one's.
async fn cut_under_load(power: &mut Power, cluster: &mut Cluster, rounds: usize, extra: Option<&AtomicBool>) {
    let acked = Arc::new(Mutex::new(Acked::default()));
    let all = cluster.ids();
    let mut lost_bytes = 0;
    for round in 0..=rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = start_load(cluster, round, stop.clone(), acked.clone());
        tokio::time::sleep(LOAD_BEFORE_CUT).await;
        if round < rounds {
            acked.lock().unwrap().epoch.fetch_add(1, Ordering::SeqCst);
            let cut = power.cut(cluster, &all).unwrap();
            acked.lock().unwrap().epoch.fetch_add(1, Ordering::SeqCst);
            lost_bytes += cut.bytes_lost();
            eprintln!("round {round}: power cut of nodes {all:?}: {:?}", cut.reports);
            cluster.wait_leader(FORM).await.unwrap();
        }
        stop.store(true, Ordering::Relaxed);
        if round == rounds {
            extra.inspect(|e| e.store(true, Ordering::Relaxed));
        }
        for t in tasks {
            t.await.unwrap();
        }
    }
    // Every load task has ended: what they recorded is final.
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    // The load must have done something in every round for the checks to mean anything.
    let served: usize = acked.ids.values().map(Vec::len).sum();
    eprintln!(
        "{} cuts: {served} IDs and {} tag creations acknowledged; {lost_bytes} unsynced bytes taken back",
        rounds,
        acked.tags.len()
    );
    assert!(served > 1000 && acked.tags.len() > 20, "too little load: {served} IDs, {} tags", acked.tags.len());
    let leader = cluster.wait_leader(FORM).await.unwrap();
    let c = cluster.client(leader);
    let mut lost = Vec::new();
    for tag in &acked.tags {
        if let Err(e) = c.tag(tag).await {
            lost.push(format!("{tag} ({e})"));
        }
    }
    let mut twice = BTreeMap::new();
    let mut below = Vec::new();
    for (tag, answers) in &acked.ids {
        let mut seen = BTreeSet::new();
        let dups = answers.iter().filter(|a| !seen.insert(a.id)).count();
        if dups > 0 {
            twice.insert(tag.clone(), dups);
        }
        for k in 0..rounds as u64 {
            let before = answers.iter().filter(|a| a.answered <= 2 * k).map(|a| a.id).max();
            let after = answers.iter().filter(|a| a.invoked >= 2 * k + 2).map(|a| a.id).min();
            if let (Some(before), Some(after)) = (before, after) {
                if after <= before {
                    below.push(format!("{tag} after cut {k}: {after} <= {before} answered before it"));
                }
            }
        }
    }
    assert!(
        lost.is_empty() && twice.is_empty() && below.is_empty(),
        "{} of {} acknowledged tag creations lost (through node {leader}: {:?}); IDs handed out twice per tag: \
         {twice:?}; IDs after a cut not above those before it: {below:?}",
        lost.len(),
        acked.tags.len(),
        lost
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_cluster_power_cuts_under_load_lose_no_acknowledged_write() {
    let Some((_lane, mut power, mut cluster)) = powered_cluster(3, SMALL_SEGMENTS).await else { return };
    cut_under_load(&mut power, &mut cluster, 3, None).await;
}

/// The same cuts while the nodes rewrite sled's files as they run (`leaf_raft_store::compact`),
/// with batches of tag creations through node 2 besides the load (they grow sled's files past
/// the 1 MiB the nodes rewrite them from): writes acknowledged from the new files, and those
/// during a copy, survive a cut too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_cluster_power_cuts_while_sleds_files_are_rewritten_lose_nothing() {
    let Some((_lane, mut power, mut cluster)) = powered_cluster(3, REWRITES).await else { return };
    let stop = Arc::new(AtomicBool::new(false));
    let batches = tokio::spawn({
        // Long enough for a batch on a slow machine: one given up on goes on in the node while
        // the next is sent, and they would pile up there.
        let (c, stop) = (cluster.client_with(2, Some(TOKEN), Duration::from_secs(10)), stop.clone());
        async move {
            let mut acked = Vec::new();
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let names: Vec<String> = (0..500).map(|i| format!("batch-{n}-{i}")).collect();
                let batch = CreateTagsRequest { tags: names.iter().map(|t| tag_req(t, 10)).collect() };
                match c.create_tags(&batch).await {
                    Ok(_) => acked.extend(names),
                    Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                }
            }
            acked
        }
    });
    cut_under_load(&mut power, &mut cluster, 3, Some(&stop)).await;
    let acked = batches.await.unwrap();
    let leader = cluster.wait_leader(FORM).await.unwrap();
    let have: BTreeSet<String> = cluster.client(leader).tags().await.unwrap().into_iter().map(|t| t.tag).collect();
    let lost: Vec<&String> = acked.iter().filter(|t| !have.contains(*t)).collect();
    assert!(
        lost.is_empty(),
        "{} of {} tags created in acknowledged batches lost: {:?}",
        lost.len(),
        acked.len(),
        lost.first()
    );
    // Only a rewrite while the node runs logs how long it held writes off.
    let mut held = Vec::new();
    for id in cluster.ids() {
        let log = std::fs::read_to_string(cluster.log_path(id)).unwrap();
        let lines = log.lines().filter(|l| l.contains("rewrote sled's files"));
        held.extend(lines.filter_map(|l| l.split("held_ms=").nth(1)?.split(' ').next()?.parse::<u64>().ok()));
    }
    let rewrites = held.len();
    eprintln!(
        "{} tags in acknowledged batches; {rewrites} rewrites of sled's files while the nodes ran, writes held off \
         for at most {:?} ms",
        acked.len(),
        held.iter().max()
    );
    assert!(rewrites >= 3, "{rewrites} rewrites while the nodes ran: this test tried too few");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_cut_three_times_keeps_what_it_acknowledged() {
    let Some((_lane, mut power, mut cluster)) = powered_cluster(1, SMALL_SEGMENTS).await else { return };
    cut_under_load(&mut power, &mut cluster, 3, None).await;
}
