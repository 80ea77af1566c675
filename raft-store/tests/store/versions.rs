//! Cluster versions in the store: an entry of a later version is kept whole in the log and
//! stops the state machine, naming its version; a raised version survives a reopen and a
//! snapshot install.
use leaf_raft_store::command::Envelope;
use leaf_raft_store::version::{ClusterVersion, SUPPORTED};
use leaf_raft_store::{open, Applied, Op, StoreOptions};
use openraft::storage::RaftStateMachine;
use openraft::{RaftLogReader, RaftSnapshotBuilder};
use tempfile::TempDir;

use crate::support::{create_op, entry, reopen, rt};

#[test]
fn an_entry_of_a_later_version_is_kept_whole_and_stops_the_state_machine_naming_its_version() {
    rt().block_on(async {
        let dir = TempDir::new().unwrap();
        let (mut log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        let later = ClusterVersion(SUPPORTED.0 + 1);
        let entries = vec![
            entry(1, 1, create_op()),
            entry(1, 2, Op::Undecodable(Envelope { version: later, body: vec![9, 9, 9] })),
        ];
        crate::support::append(&mut log, entries.clone()).await;
        let err = sm.apply(entries.clone()).await.expect_err("the state machine must stop at it").to_string();
        assert!(err.contains(&format!("cluster version {later}")) && err.contains("log entry 2"), "{err}");
        drop((log, sm));
        // The log holds the entry as it came, for a release that can apply it.
        let (mut log, _sm) = reopen(dir.path());
        let stored = log.try_get_log_entries(1..3).await.unwrap();
        assert_eq!(stored, entries);
    });
}

#[test]
fn a_raised_version_survives_a_reopen_and_a_snapshot_install() {
    rt().block_on(async {
        let dir = TempDir::new().unwrap();
        let (_log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
        assert_eq!(sm.reader().cluster_version(), ClusterVersion(1));
        let r = sm.apply(vec![entry(1, 1, Op::SetClusterVersion { version: ClusterVersion(2) })]).await.unwrap();
        assert_eq!(r[0], Ok(Applied::ClusterVersion(ClusterVersion(2))));
        let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        drop((_log, sm));
        let (_log, sm) = reopen(dir.path());
        assert_eq!(sm.reader().cluster_version(), ClusterVersion(2));
        let other = TempDir::new().unwrap();
        let (_l2, mut sm2) = open(other.path(), &StoreOptions::default()).unwrap();
        sm2.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
        assert_eq!(sm2.reader().cluster_version(), ClusterVersion(2));
    });
}
