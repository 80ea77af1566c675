//! Bit rot: a node whose Raft log file, snapshot file or snowflake state file no longer reads
//! back refuses to start, naming the file and the offset, and the documented node replacement
//! (remove it, add a node under a new ID, promote it) restores full service.
use std::path::{Path, PathBuf};

use leaf_api::types::AddLearnerRequest;

use crate::support::*;

/// What is damaged on a node, and how.
#[derive(Debug, Clone, Copy)]
enum Rot {
    /// 8 bytes flipped at 16 places over sled's log file.
    Log,
    /// One byte flipped in the middle of the current snapshot file.
    Snapshot,
    /// The last byte of the snowflake state file flipped.
    StateFile,
}

fn flip(path: &Path, offset: u64, len: usize) {
    leaf_raft_store::failpoint::flip_bytes(path, offset, len).unwrap();
}

/// Damages the stopped node's data in `dir`; returns the file the node must name.
fn rot(dir: &Path, what: Rot) -> PathBuf {
    let raft = dir.join("raft");
    match what {
        Rot::Log => {
            let path = raft.join("db");
            let len = std::fs::metadata(&path).unwrap().len();
            for k in 0..16 {
                flip(&path, 4096 + k * (len - 4096 - 8) / 16, 8);
            }
            path
        }
        Rot::Snapshot => {
            let snaps = raft.join("snapshots");
            let file = std::fs::read_dir(&snaps).unwrap().map(|e| e.unwrap().path()).next().expect("a snapshot file");
            let len = std::fs::metadata(&file).unwrap().len();
            flip(&file, len / 2, 1);
            file
        }
        Rot::StateFile => {
            let path = dir.join("snowflake.state");
            let len = std::fs::metadata(&path).unwrap().len();
            flip(&path, len - 1, 1);
            path
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_a_damaged_file_refuses_to_start_and_its_replacement_restores_service() {
    let (_lane, mut cluster, leader) = cluster_beside(3, "[raft]\nsnapshot_every = 40\n").await;
    for i in 0..60 {
        create_tag(&cluster.client(leader), &format!("rot-{i}"), 10).await;
    }
    // Every node holds a snapshot file.
    for id in 1..=3 {
        let built = || async { cluster.status(id).await.unwrap().snapshot_index.is_some() };
        until(&format!("node {id} builds a snapshot"), FORM, built).await;
    }
    // IDs of one tag from every node that ever serves it: none twice.
    let mut served = try_get_ids(&cluster.client(1), "rot-0", Some(50)).await.unwrap();
    // Node 3's log, node 2's snapshot, node 1's state file; replaced by 4, 5 and 6.
    for (victim, what, next) in [(3, Rot::Log, 4), (2, Rot::Snapshot, 5), (1, Rot::StateFile, 6)] {
        assert!(cluster.stop(victim), "node {victim} did not stop cleanly");
        let file = rot(&cluster.data_dir(victim), what);
        cluster.spawn(victim).unwrap();
        let refused = format!("node {victim} refuses to start on a damaged {what:?}");
        let status =
            eventually(&refused, FORM, || std::future::ready(cluster.exited(victim).ok_or("still runs"))).await;
        assert!(!status.success(), "{status:?}");
        let log = cluster.log_tail(victim, 5);
        assert!(log.contains("the data directory is damaged"), "{what:?}: {log}");
        assert!(log.contains(&format!("{}:", file.display())), "{what:?}: {log}");
        // Where the damage is: an offset, or (sled dropped the log's tail behind it at
        // recovery, and does not say where) what the log lost.
        assert!(log.contains("offset") || log.contains("were synced before"), "{what:?}: {log}");
        assert!(log.contains("replace it from its peers"), "{log}");

        // The documented replacement: remove it, add a node under a new ID, promote it.
        let via = *cluster.running().iter().find(|id| **id != victim).unwrap();
        until_ok(&format!("remove {victim}"), || async { cluster.client(via).remove(victim).await.map(|_| ()) }).await;
        let port = cluster.start_extra(next).unwrap();
        let add = AddLearnerRequest { node_id: next, addr: format!("127.0.0.1:{port}") };
        until_ok(&format!("add {next}"), || async { cluster.client(via).add_learner(&add).await.map(|_| ()) }).await;
        until_promoted(&cluster, via, next).await;
        served.extend(try_get_ids(&cluster.client(next), "rot-0", Some(50)).await.unwrap());
    }
    // Only replacements are left, and they serve: every ID of the tag unique, and new tags.
    cluster.wait_leader_among(&[4, 5, 6], FORM).await.unwrap();
    for id in 4..=6 {
        served.extend(try_get_ids(&cluster.client(id), "rot-0", Some(20)).await.unwrap());
        create_tag(&cluster.client(id), &format!("after-{id}"), 10).await;
        assert_eq!(try_get_ids(&cluster.client(id), &format!("after-{id}"), Some(3)).await.unwrap().len(), 3);
    }
    let mut sorted = served.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), served.len(), "an ID of rot-0 was served twice");
}
