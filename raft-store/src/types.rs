//! The openraft type configuration of leaf. Every openraft type the rest of the workspace
//! needs is named here, so the version-specific generics live in one module.
use crate::apply::ApplyResult;
use crate::command::Command;

openraft::declare_raft_types!(
    /// Raft types of a leaf cluster: [`Command`]s in, [`ApplyResult`]s out, `u64` node IDs,
    /// nodes addressed by a [`BasicNode`] (their cluster address), snapshots in files.
    pub TypeConfig:
        D = Command,
        R = ApplyResult,
        NodeId = u64,
        Node = openraft::BasicNode,
        SnapshotData = tokio::fs::File,
);

pub type NodeId = u64;
pub type Node = openraft::BasicNode;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogState = openraft::storage::LogState<TypeConfig>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
pub type Snapshot = openraft::storage::Snapshot<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type StorageIOError = openraft::StorageIOError<NodeId>;
pub type Raft = openraft::Raft<TypeConfig>;
