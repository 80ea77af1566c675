//! openraft's own storage test suite, run against the sled store.
use leaf_raft_store::types::StorageError;
use leaf_raft_store::{open, LogStore, StateMachineStore, StoreOptions, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};
use tempfile::TempDir;

struct SledBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, TempDir> for SledBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore), StorageError> {
        let dir = TempDir::new().expect("tempdir");
        let (log, sm) = open(dir.path(), &StoreOptions::default()).expect("open store");
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(SledBuilder).unwrap();
}
