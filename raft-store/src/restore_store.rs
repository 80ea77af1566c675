//! Writing a restored state into a new data directory: the store a node opens as a member of
//! a cluster whose log was compacted up to the restore.
//!
//! The state becomes the store's snapshot and applied state at [`RESTORED_LOG_INDEX`] of term 1
//! (proposed, as far as the log says, by the restoring node), the log is purged up to it and the
//! node's vote is that term: when the node starts, it campaigns in a later term, and every
//! other member (blank, since it must not form a cluster of its own) gets the state as that
//! snapshot from the leader.
//!
//! The directory is written under a temporary name beside it and renamed into place once
//! everything is on disk, so a crash midway leaves no directory that a node would start from.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{CommittedLeaderId, Membership};

use crate::state_machine::SmData;
use crate::types::{LogId, Node, NodeId, Vote};
use crate::{OpenError, StoreOptions};

/// The log index a restored state is at.
pub const RESTORED_LOG_INDEX: u64 = 1;

/// Why a restored data directory could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RestoreStoreError {
    #[error("the data directory {0} exists and is not empty: a restore writes a new one")]
    NotEmpty(PathBuf),
    #[error("the new cluster's membership must include this node ({0})")]
    NotAMember(NodeId),
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error("writing the restored state: {0}")]
    Storage(#[from] crate::types::StorageError),
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: PathBuf, source: std::io::Error },
}

/// Whether `dir` is absent or an empty directory.
pub fn is_blank(dir: &Path) -> bool {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Writes `data` as the state of a new data directory `dir` for node `node_id` of a cluster of
/// `members` (voters, with their addresses). Refuses a `dir` that holds anything.
pub async fn write_restored(
    dir: &Path,
    opts: &StoreOptions,
    data: SmData,
    node_id: NodeId,
    members: BTreeMap<NodeId, Node>,
) -> Result<LogId, RestoreStoreError> {
    if !is_blank(dir) {
        return Err(RestoreStoreError::NotEmpty(dir.to_owned()));
    }
    if !members.contains_key(&node_id) {
        return Err(RestoreStoreError::NotAMember(node_id));
    }
    let io = |what, path: &Path| {
        let path = path.to_owned();
        move |source| RestoreStoreError::Io { what, path, source }
    };
    let name = dir.file_name().map_or("leaf-data".into(), |n| n.to_string_lossy().into_owned());
    let temp = dir.with_file_name(format!(".{name}.restoring-{}", std::process::id()));
    if temp.exists() {
        std::fs::remove_dir_all(&temp).map_err(io("remove the leftover", &temp))?;
    }
    let log_id = LogId::new(CommittedLeaderId::new(1, node_id), RESTORED_LOG_INDEX);
    {
        let (mut log, mut sm) = crate::open(&temp, opts)?;
        let voters = members.keys().copied().collect();
        let membership = Membership::new(vec![voters], members);
        sm.install_restored(data, log_id, membership).await?;
        log.save_vote(&Vote::new(1, node_id)).await?;
        log.purge(log_id).await?;
        let (applied, _) = sm.applied_state().await?;
        debug_assert_eq!(applied, Some(log_id));
    }
    // sled releases its lock file from a background thread after the last handle drops.
    std::fs::File::open(&temp).and_then(|d| d.sync_all()).map_err(io("sync", &temp))?;
    if dir.exists() {
        std::fs::remove_dir(dir).map_err(io("remove the empty", dir))?;
    }
    std::fs::rename(&temp, dir).map_err(io("rename into place", dir))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::File::open(parent).and_then(|d| d.sync_all()).map_err(io("sync", parent))?;
    }
    Ok(log_id)
}

#[cfg(test)]
mod tests {
    use openraft::storage::{RaftLogReader, RaftLogStorage, RaftStateMachine};

    use super::*;
    use crate::tags::TagRecord;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restored_directory_opens_as_a_compacted_member_and_a_second_restore_is_refused() {
        let parent = tempfile::tempdir().unwrap();
        let dir = parent.path().join("raft");
        let mut data = SmData::default();
        data.state.tags.insert("orders".into(), TagRecord::plain(5_000, 100, 0, 0));
        data.state.members_ever.insert(9);
        let members = BTreeMap::from([(1, Node::new("a:1")), (2, Node::new("b:2"))]);
        let opts = StoreOptions::default();
        let refused = write_restored(&dir, &opts, data.clone(), 3, members.clone()).await;
        assert!(matches!(refused, Err(RestoreStoreError::NotAMember(3))), "{refused:?}");
        assert!(!dir.exists(), "a refused restore wrote {}", dir.display());
        let log_id = write_restored(&dir, &opts, data.clone(), 1, members.clone()).await.unwrap();
        assert_eq!(log_id.index, RESTORED_LOG_INDEX);
        let leftovers: Vec<_> = std::fs::read_dir(parent.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(leftovers, ["raft"], "only the directory, no temporary one");
        {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let (mut log, mut sm) = loop {
                match crate::open(&dir, &opts) {
                    Ok(s) => break s,
                    Err(e) if std::time::Instant::now() < deadline => {
                        let _ = e;
                        std::thread::sleep(std::time::Duration::from_millis(20));
                    }
                    Err(e) => panic!("{e}"),
                }
            };
            let (applied, membership) = sm.applied_state().await.unwrap();
            assert_eq!(applied, Some(log_id));
            assert_eq!(membership.membership().voter_ids().collect::<Vec<_>>(), [1, 2]);
            let state = log.get_log_state().await.unwrap();
            assert_eq!((state.last_purged_log_id, state.last_log_id), (Some(log_id), Some(log_id)));
            assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(1, 1)));
            assert!(log.try_get_log_entries(0..=RESTORED_LOG_INDEX).await.unwrap().is_empty());
            let restored = sm.reader().with_state(|s| s.clone());
            assert_eq!(restored.tags, data.state.tags);
            assert_eq!(restored.members_ever, [1, 2, 9].into(), "the new members join every member ever");
            let snapshot = sm.get_current_snapshot().await.unwrap().expect("a snapshot");
            assert_eq!(snapshot.meta.last_log_id, Some(log_id));
        }
        let again = write_restored(&dir, &opts, data, 1, members).await;
        assert!(matches!(again, Err(RestoreStoreError::NotEmpty(_))), "{again:?}");
    }
}
