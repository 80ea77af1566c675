//! A node that crashes at any storage boundary comes back, loses nothing acknowledged and
//! repeats no ID.
//!
//! Every crash point of `leaf_raft_store::failpoint::CRASH_POINTS` has one case, here, in
//! [`crate::backup_restore`] (a backup's) or in [`crate::snapshot_crash`] (the points on a follower's path to taking a snapshot: install,
//! purge, commit, append). Each case here arms one point on one node of a running 3-node TLS
//! cluster through its `LEAF_FAILPOINTS_FILE` (`leaf-test-node` re-arms from that file while
//! running), drives the cluster down the path that passes the point (an election, a conflicting
//! log, a snapshot build, a checkpoint, a snowflake high-water mark), checks that the node died
//! exactly there (its log names the point), disarms it, restarts it and proves:
//!
//! - it comes back: every node ready, one leader, the crashed node applied up to the leader's
//!   commit point;
//! - nothing acknowledged is lost: every tag whose creation was answered 200 is on every node;
//! - no duplicate: segment and snowflake IDs from every node are new to everything handed out
//!   in the whole test, and segment IDs are above every segment ID acknowledged before.
//!
//! Where this machine can (root and `/dev/fuse`; CI sets `LEAF_REQUIRE_FUSE=1`), every node's
//! data directory is on a power-cut disk ([`leaf_cluster_tests::power`]), and every node that
//! goes down (the one that crashed at its point, and those a path kills) loses its power too:
//! what it wrote and did not sync is gone when it restarts, as after a power cut at that point.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use leaf_api::types::{CreateTagsRequest, SnowflakeState};
use leaf_client::Client;
use leaf_cluster_tests::cluster::{Cluster, TOKEN};
use leaf_raft_store::failpoint::CRASH_POINTS;

use crate::support::*;

/// How a case reaches its crash point on the armed node.
#[derive(Debug, Clone, Copy)]
enum Path {
    /// The leader is killed: the armed follower saves a vote in the election.
    Election,
    /// The armed node is the leader; it appends an entry its followers (stopped) never see, is
    /// killed, the followers elect a new leader and commit over it, and the old leader's
    /// restart truncates the conflicting entry.
    Conflict,
    /// Tags are created until the armed follower builds a snapshot (`snapshot_every`).
    Snapshot,
    /// Tags are created until the armed follower checkpoints its state machine (every
    /// `CHECKPOINT_EVERY` applied entries).
    Checkpoint,
    /// Tags are created in batches of [`BATCH`] until the armed follower checkpoints so many
    /// keys that it stages them (`staged` in raft-store). The point stalls [`STALL`] first, so
    /// sled's background flush (every 500 ms) writes the staging out: the restart must finish
    /// it, and its log must say so.
    Batches,
    /// Snowflake IDs are requested from the armed node until it raises its high-water mark.
    Snowflake,
}

/// Tags per batch of [`Path::Batches`]: a few batches exceed the keys that make a checkpoint
/// due (`CHECKPOINT_KEYS`, 4,096), and each is more than a checkpoint writes in one sled batch.
const BATCH: usize = 1_000;

/// The `fail` action of a [`Path::Batches`] point: stall, then crash.
const STALL: &str = "return(1500)";

/// What a restart logs when it finishes a staged checkpoint a crash interrupted.
const FINISHED_STAGING: &str = "finishing a checkpoint a crash interrupted";

/// The crash points of this test (the rest are [`crate::snapshot_crash::CASES`]).
const CASES: &[(&str, Path)] = &[
    ("log-vote-written", Path::Election),
    ("log-vote-flushed", Path::Election),
    ("log-truncate-removed", Path::Conflict),
    ("log-truncate-done", Path::Conflict),
    ("sm-build-begin", Path::Snapshot),
    ("sm-build-checkpointed", Path::Snapshot),
    ("sm-build-snapshot-written", Path::Snapshot),
    ("sm-build-rebase-midway", Path::Snapshot),
    ("sm-build-done", Path::Snapshot),
    ("compact-copied", Path::Snapshot),
    ("compact-renamed", Path::Snapshot),
    ("sm-checkpoint-begin", Path::Checkpoint),
    ("sm-checkpoint-written", Path::Checkpoint),
    ("sm-checkpoint-staged", Path::Batches),
    ("sm-checkpoint-copied", Path::Batches),
    ("snowflake-state-synced", Path::Snowflake),
    ("snowflake-state-renamed", Path::Snowflake),
];

const TAG: &str = "crash-points";
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn every_crash_point_has_a_case() {
    let elsewhere = crate::backup_restore::CRASH_POINT;
    let covered: BTreeSet<&str> = CASES
        .iter()
        .map(|(p, _)| *p)
        .chain(crate::snapshot_crash::CASES.iter().map(|(p, _)| *p))
        .chain([elsewhere])
        .collect();
    let all: BTreeSet<&str> = CRASH_POINTS.iter().copied().collect();
    assert_eq!(covered, all, "crash points without a case (or cases of no crash point)");
    assert_eq!(CASES.len() + crate::snapshot_crash::CASES.len() + 1, all.len(), "a crash point has two cases");
}

/// What the cluster acknowledged so far.
#[derive(Default)]
struct Acked {
    tags: BTreeSet<String>,
    segment: BTreeSet<i64>,
    snowflake: BTreeSet<i64>,
}

impl Acked {
    async fn create_tag(&mut self, c: &Client, name: String) -> bool {
        match c.create_tag(&tag_req(&name, 10)).await {
            Ok(_) => {
                self.tags.insert(name);
                true
            }
            Err(_) => false,
        }
    }

    /// Segment IDs from `node`: new, and above `floor` if given (a restarted node lost its
    /// buffers, so it allocates above every range committed before).
    fn segment_ids(&mut self, node: u64, ids: Vec<i64>, floor: Option<i64>, point: &str) {
        for id in ids {
            assert!(
                floor.is_none_or(|f| id > f),
                "{point}: segment ID {id} from restarted node {node} is not above {floor:?}, acknowledged before"
            );
            assert!(self.segment.insert(id), "{point}: segment ID {id} from node {node} was handed out before");
        }
    }

    fn snowflake_ids(&mut self, node: u64, ids: Vec<i64>, point: &str) {
        for id in ids {
            assert!(self.snowflake.insert(id), "{point}: snowflake ID {id} from node {node} was handed out before");
        }
    }
}

/// Waits until node `id` died at `point` (its log since `log_from` names it).
async fn died_at(cluster: &mut Cluster, id: u64, point: &str, log_from: usize) {
    eventually(&format!("{point}: node {id} crashes"), WAIT, || {
        std::future::ready(if cluster.alive(id) { Err(cluster.log_tail(id, 30)) } else { Ok(()) })
    })
    .await;
    let log = std::fs::read(cluster.log_path(id)).unwrap();
    let run = String::from_utf8_lossy(&log[log_from.min(log.len())..]);
    assert!(
        run.contains(&format!("leaf failpoint {point}: crashing the process")),
        "{point}: node {id} exited, but not at the crash point:\n{run}"
    );
}

fn log_len(cluster: &Cluster, id: u64) -> usize {
    std::fs::metadata(cluster.log_path(id)).map_or(0, |m| m.len()) as usize
}

/// After a case: every node running, ready, caught up, holding every acknowledged tag and
/// serving new IDs; the `restarted` nodes' segment IDs above every one acknowledged before.
async fn verify(cluster: &Cluster, acked: &mut Acked, point: &str, restarted: &[u64]) {
    let ids = cluster.ids();
    let leader = cluster.wait_leader_among(&ids, WAIT).await.unwrap_or_else(|e| panic!("{point}: {e}"));
    let target = cluster.status(leader).await.unwrap().committed_index;
    for &id in &ids {
        eventually(&format!("{point}: node {id} catches up"), WAIT, || async {
            match cluster.status(id).await {
                Ok(s) if s.health.ready && s.last_applied_index >= target => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
    for &id in &ids {
        let have: BTreeSet<String> = cluster.client(id).tags().await.unwrap().into_iter().map(|t| t.tag).collect();
        let lost: Vec<&String> = acked.tags.difference(&have).collect();
        assert!(lost.is_empty(), "{point}: node {id} lost acknowledged tags {lost:?}");
    }
    let floor = acked.segment.last().copied().unwrap_or(0);
    for &id in &ids {
        let got =
            try_get_ids(&cluster.client(id), TAG, Some(20)).await.unwrap_or_else(|e| panic!("{point}: node {id}: {e}"));
        acked.segment_ids(id, got, restarted.contains(&id).then_some(floor), point);
        wait_snowflake(cluster, id, SnowflakeState::Serving).await;
        let got = snowflake_get(&cluster.client(id), 20).await.unwrap_or_else(|e| panic!("{point}: node {id}: {e:?}"));
        acked.snowflake_ids(id, got, point);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_crashed_at_any_storage_boundary_comes_back_without_loss_or_duplicates() {
    let started = Instant::now();
    let _lane = beside().await;
    // Above `CHECKPOINT_EVERY` (256): a snapshot build checkpoints too, and would otherwise
    // always come first. sled's files rewritten from 1 MiB: a build then rewrites them (or
    // soon does, as the log and the state machine's tree grow no faster than sled's files).
    let (arms, specs, opts) = armed_specs(3, "[raft]\nsnapshot_every = 300\nrewrite_above_mib = 1\n");
    // `down` (holding the disks) before `cluster`: the nodes die before their disks go.
    let mut down = Down::new();
    let mut cluster = down.start(specs, opts);
    let leader = cluster.wait_leader(FORM).await.unwrap();
    let mut acked = Acked::default();
    assert!(acked.create_tag(&cluster.client(leader), TAG.to_string()).await);
    verify(&cluster, &mut acked, "start", &[]).await;

    for (case, (point, path)) in CASES.iter().enumerate() {
        let t = Instant::now();
        let leader = cluster.wait_leader(WAIT).await.unwrap();
        let follower = cluster.ids().into_iter().find(|id| *id != leader).unwrap();
        let mut n = 0;
        let mut restarted = vec![];
        // A log line the victim's restart must write: (node, its log length before, the line).
        let mut must_log = None;
        let victim = match path {
            Path::Election => {
                let from = log_len(&cluster, follower);
                arms.set(follower, point);
                down.down(&mut cluster, leader);
                died_at(&mut cluster, follower, point, from).await;
                arms.set(follower, "");
                cluster.spawn(leader).unwrap();
                restarted.push(leader);
                follower
            }
            Path::Conflict => {
                let others: Vec<u64> = cluster.ids().into_iter().filter(|id| *id != leader).collect();
                for &id in &others {
                    down.down(&mut cluster, id);
                }
                // Appended by the leader alone: never committed, never acknowledged.
                let c = cluster.client_with(leader, Some(TOKEN), Duration::from_millis(800));
                let lone = format!("lone-{case}");
                assert!(c.create_tag(&tag_req(&lone, 10)).await.is_err(), "{point}: a lone leader committed {lone}");
                let before = cluster.status(leader).await.unwrap();
                assert!(
                    before.last_log_index > before.committed_index,
                    "{point}: the lone leader appended nothing: {before:?}"
                );
                down.down(&mut cluster, leader);
                for &id in &others {
                    cluster.spawn(id).unwrap();
                }
                restarted.extend(&others);
                let new_leader = cluster.wait_leader_among(&others, WAIT).await.unwrap();
                assert!(acked.create_tag(&cluster.client(new_leader), format!("over-{case}")).await);
                let from = log_len(&cluster, leader);
                arms.set(leader, point);
                cluster.spawn(leader).unwrap();
                died_at(&mut cluster, leader, point, from).await;
                arms.set(leader, "");
                leader
            }
            Path::Snapshot | Path::Checkpoint => {
                let from = log_len(&cluster, follower);
                arms.set(follower, point);
                let c = cluster.client(leader);
                let deadline = Instant::now() + WAIT;
                while cluster.alive(follower) {
                    assert!(Instant::now() < deadline, "{point}: node {follower} did not crash");
                    for _ in 0..5 {
                        acked.create_tag(&c, format!("c{case}-{n}")).await;
                        n += 1;
                    }
                }
                died_at(&mut cluster, follower, point, from).await;
                arms.set(follower, "");
                follower
            }
            Path::Batches => {
                let from = log_len(&cluster, follower);
                arms.set(follower, &format!("{point}={STALL}"));
                let c = cluster.client(leader);
                let deadline = Instant::now() + WAIT;
                while cluster.alive(follower) {
                    assert!(Instant::now() < deadline, "{point}: node {follower} did not crash");
                    let names: Vec<String> = (n..n + BATCH).map(|i| format!("c{case}-{i}")).collect();
                    n += BATCH;
                    let batch = CreateTagsRequest { tags: names.iter().map(|t| tag_req(t, 10)).collect() };
                    if c.create_tags(&batch).await.is_ok() {
                        acked.tags.extend(names);
                    }
                }
                died_at(&mut cluster, follower, point, from).await;
                arms.set(follower, "");
                must_log = Some((follower, log_len(&cluster, follower), FINISHED_STAGING));
                follower
            }
            Path::Snowflake => {
                let from = log_len(&cluster, follower);
                let c = cluster.client(follower);
                acked.snowflake_ids(follower, snowflake_get(&c, 50).await.unwrap(), point);
                arms.set(follower, point);
                let deadline = Instant::now() + WAIT;
                while cluster.alive(follower) {
                    assert!(Instant::now() < deadline, "{point}: node {follower} did not crash");
                    // IDs answered before the crash count as handed out.
                    if let Ok(ids) = snowflake_get(&c, 50).await {
                        acked.snowflake_ids(follower, ids, point);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                died_at(&mut cluster, follower, point, from).await;
                arms.set(follower, "");
                follower
            }
        };
        down.down(&mut cluster, victim);
        cluster.spawn(victim).unwrap();
        restarted.push(victim);
        verify(&cluster, &mut acked, point, &restarted).await;
        if let Some((id, from, line)) = must_log {
            let log = std::fs::read(cluster.log_path(id)).unwrap();
            let run = String::from_utf8_lossy(&log[from.min(log.len())..]);
            assert!(run.contains(line), "{point}: node {id}'s restart did not log {line:?}:\n{run}");
        }
        println!("{point}: node {victim} crashed there and came back; {n} tags created; case took {:?}", t.elapsed());
    }
    println!(
        "{} cases in {:?}: {} tags, {} segment and {} snowflake IDs, none repeated",
        CASES.len(),
        started.elapsed(),
        acked.tags.len(),
        acked.segment.len(),
        acked.snowflake.len()
    );
}
