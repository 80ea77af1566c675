//! A follower that crashes in the middle of installing a snapshot restarts, catches up and
//! serves IDs above everything handed out before.
//!
//! openraft 0.9.25 purges a follower's log for a snapshot, and raises its commit point, while
//! the snapshot is still queued for the state machine; the storage layer keeps those points
//! from reaching the disk before the installed snapshot does (raft-store's `coverage`). Each
//! case here stops a follower, lets the leader snapshot and purge its log past it, restarts it
//! with one storage crash point armed (`LEAF_FAILPOINTS`, the test binary is built with the
//! `failpoints` feature) so that it aborts at that step of taking the snapshot, checks it died
//! there, restarts it clean and checks that it becomes ready, applies up to the leader's commit
//! point and serves IDs that are new and above every ID acknowledged before. One cluster serves
//! every case. (The truncate crash points are not on this path.) With power-cut disks
//! (`support::Down`: root and `/dev/fuse`), the follower's power goes each time it goes down,
//! so each restart starts from what it had synced.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use leaf_cluster_tests::cluster::{Cluster, NodeSpec, Options};

use crate::support::*;

/// Crash point and its `fail` actions. `return(500)` stalls the crashing step half a second
/// first, so that openraft's purge for the same install, which runs concurrently, has reached
/// the log store before the crash: at `sm-install-begin` nothing of the snapshot is written
/// yet, the widest window for the bug this guards against (without the fix, the restart fails
/// there: "Failed to get log entries"). The `log-*` points fire on the install's purge, the
/// first commit point and the first append after it (the test prints whether the install had
/// finished by then).
pub(crate) const CASES: &[(&str, &str)] = &[
    ("sm-install-begin", "return(500)"),
    ("sm-install-snapshot-written", "return(500)"),
    ("sm-install-snapshot-flushed", "return"),
    ("sm-install-state-cleared", "return"),
    ("sm-install-state-replaced", "return"),
    ("sm-install-done", "return"),
    ("log-purge-begin", "return"),
    ("log-purge-meta-written", "return"),
    ("log-purge-meta-flushed", "return"),
    ("log-purge-entries-removed", "return"),
    ("log-purge-done", "return"),
    ("log-committed-written", "return"),
    ("log-append-written", "return"),
    ("log-append-flushed", "return"),
];

const TAG: &str = "crash";
const WAIT: Duration = Duration::from_secs(30);

/// Writes through `leader` until its log is purged past `index` (so a node whose log ends
/// there must take a snapshot); returns how many tags it created.
async fn purge_past(cluster: &Cluster, leader: u64, index: u64, case: usize) -> usize {
    let mut n = 0;
    eventually(&format!("the leader purges past {index}"), WAIT, || {
        let created = n;
        n += 5;
        async move {
            let s = cluster.status(leader).await.unwrap();
            if s.purged_index.is_some_and(|p| p > index + 1) {
                return Ok(created);
            }
            for i in created..created + 5 {
                create_tag(&cluster.client(leader), &format!("c{case}-{i}"), 10).await;
            }
            Err(s)
        }
    })
    .await
}

/// Node `id`'s log lines since byte `from` that name a panic or an error.
fn errors_since(cluster: &Cluster, id: u64, from: usize) -> String {
    let log = std::fs::read(cluster.log_path(id)).unwrap_or_default();
    let text = String::from_utf8_lossy(&log[from.min(log.len())..]).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.contains("panicked") {
            // The panic message follows its location.
            out.extend(lines[i..(i + 3).min(lines.len())].iter().copied());
        } else if l.contains("ERROR") || l.contains("failpoint") {
            out.push(l);
        }
    }
    out.truncate(30);
    out.join("\n")
}

/// `count` IDs of [`TAG`] from node `id`; each must be new to `seen`.
async fn fresh_ids(cluster: &Cluster, id: u64, count: u32, seen: &mut BTreeSet<i64>) -> Vec<i64> {
    let ids = try_get_ids(&cluster.client(id), TAG, Some(count)).await.unwrap_or_else(|e| panic!("node {id}: {e}"));
    for i in &ids {
        assert!(seen.insert(*i), "ID {i} from node {id} was handed out before");
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_crashes_while_taking_a_snapshot_restarts_and_catches_up() {
    let started = Instant::now();
    let _lane = beside().await;
    let mut opts = Options::new(bin());
    opts.extra_toml = "[raft]\nsnapshot_every = 20\nkeep_logs_after_snapshot = 2\n".to_string();
    // `down` (holding the disks, if any) before `cluster`: the nodes die before their disks go.
    let mut down = Down::new();
    let mut cluster = down.start((1..=3).map(NodeSpec::direct).collect(), opts);
    let first_leader = cluster.wait_leader(FORM).await.unwrap();
    let follower = if first_leader == 3 { 2 } else { 3 };
    let others: Vec<u64> = (1..=3).filter(|id| *id != follower).collect();
    create_tag(&cluster.client(first_leader), TAG, 10).await;
    let mut seen = BTreeSet::new();
    fresh_ids(&cluster, follower, 20, &mut seen).await;

    for (case, (point, actions)) in CASES.iter().enumerate() {
        let t = Instant::now();
        let last = cluster.status(follower).await.unwrap().last_log_index.unwrap_or(0);
        down.down(&mut cluster, follower);
        let leader = cluster.wait_leader_among(&others, WAIT).await.unwrap();
        let tags = purge_past(&cluster, leader, last, case).await;
        // Acknowledged before the crash: everything after must be above these.
        fresh_ids(&cluster, leader, 30, &mut seen).await;
        let max_before = *seen.last().unwrap();

        // Restart with the crash point armed: it must die there, while taking the snapshot.
        let log_from = std::fs::metadata(cluster.log_path(follower)).map_or(0, |m| m.len()) as usize;
        cluster.set_env(follower, &[("LEAF_FAILPOINTS", &format!("{point}={actions}"))]);
        cluster.spawn(follower).unwrap();
        until_holds(&format!("{point}: node {follower} crashes"), WAIT, || !cluster.alive(follower)).await;
        let log = std::fs::read(cluster.log_path(follower)).unwrap();
        let run = String::from_utf8_lossy(&log[log_from.min(log.len())..]);
        let crash_line = format!("leaf failpoint {point}: crashing the process");
        let crash_at = run.find(&crash_line);
        assert!(crash_at.is_some(), "{point}: node {follower} exited but not at the crash point:\n{run}");
        // Informational: whether the snapshot had been installed before the crash point.
        let installed_first = run.find("installed snapshot").is_some_and(|i| Some(i) < crash_at);

        // Its power goes too (with power-cut disks). Restart clean: ready, caught up with the
        // leader, serving new IDs above the old ones.
        down.down(&mut cluster, follower);
        cluster.set_env(follower, &[]);
        cluster.spawn(follower).unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            let target = cluster.status(leader).await.unwrap().committed_index;
            match cluster.status(follower).await {
                Ok(s) if s.health.ready && s.last_applied_index >= target => break,
                Ok(s) => assert!(
                    Instant::now() < deadline,
                    "{point}: node {follower} did not catch up: {s:?}\n{}",
                    errors_since(&cluster, follower, log_from)
                ),
                Err(e) => assert!(
                    Instant::now() < deadline && cluster.alive(follower),
                    "{point}: node {follower} did not come back: {e}\n{}",
                    errors_since(&cluster, follower, log_from)
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let after = fresh_ids(&cluster, follower, 30, &mut seen).await;
        assert!(after.iter().all(|i| *i > max_before), "{point}: IDs {after:?} not above {max_before}");
        fresh_ids(&cluster, leader, 10, &mut seen).await;
        println!(
            "{point}: {tags} tags to purge past index {last}; crashed {} the install finished; case took {:?}",
            if installed_first { "after" } else { "before" },
            t.elapsed()
        );
    }
    println!("{} cases in {:?}", CASES.len(), started.elapsed());
}
