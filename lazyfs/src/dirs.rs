//! The journal of directory changes not durable yet (the strict directory model).
//!
//! Creating, removing and renaming an entry is durable only once the directory concerned has been
//! fsynced since (both directories for a rename). The journal keeps every change in order with the
//! directories still to be fsynced; `fsyncdir` drops those, and a change with none left is durable
//! and leaves the journal. At a power cut the changes left are undone, last first.
//!
//! Entries and directories are named by node number, not path: a later durable rename of a parent
//! does not lose track of them.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::nodes::NodeId;

/// A removed entry, kept in the trash until its removal is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Victim {
    pub node: NodeId,
    /// Where it waits in the trash.
    pub trash: PathBuf,
}

/// One directory change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DirOp {
    /// `node` was created as `name` in `parent` (create, mknod, mkdir, symlink).
    Create { parent: NodeId, name: OsString, node: NodeId },
    /// `name` was removed from `parent` (unlink, rmdir).
    Remove { parent: NodeId, name: OsString, victim: Victim },
    /// `node` was renamed; `replaced` is what the new name named before.
    Rename {
        node: NodeId,
        from_parent: NodeId,
        from_name: OsString,
        to_parent: NodeId,
        to_name: OsString,
        replaced: Option<Victim>,
    },
}

impl DirOp {
    /// The directories to fsync for the change to be durable.
    fn dirs(&self) -> Vec<NodeId> {
        match self {
            DirOp::Create { parent, .. } | DirOp::Remove { parent, .. } => vec![*parent],
            DirOp::Rename { from_parent, to_parent, .. } if from_parent == to_parent => vec![*from_parent],
            DirOp::Rename { from_parent, to_parent, .. } => vec![*from_parent, *to_parent],
        }
    }

    /// What the change removed, waiting in the trash.
    pub(crate) fn victim(&self) -> Option<&Victim> {
        match self {
            DirOp::Create { .. } => None,
            DirOp::Remove { victim, .. } => Some(victim),
            DirOp::Rename { replaced, .. } => replaced.as_ref(),
        }
    }
}

#[derive(Debug)]
struct Pending {
    op: DirOp,
    /// Directories not fsynced since the change.
    dirs: Vec<NodeId>,
}

#[derive(Debug, Default)]
pub(crate) struct DirJournal {
    pending: Vec<Pending>,
}

impl DirJournal {
    pub(crate) fn push(&mut self, op: DirOp) {
        let dirs = op.dirs();
        self.pending.push(Pending { op, dirs });
    }

    /// `dir` was fsynced: returns the changes that became durable, in order.
    pub(crate) fn fsyncdir(&mut self, dir: NodeId) -> Vec<DirOp> {
        let mut durable = Vec::new();
        let mut kept = Vec::with_capacity(self.pending.len());
        for mut p in self.pending.drain(..) {
            p.dirs.retain(|&d| d != dir);
            if p.dirs.is_empty() {
                durable.push(p.op);
            } else {
                kept.push(p);
            }
        }
        self.pending = kept;
        durable
    }

    /// Takes every change not durable, in order (a power cut undoes them last first; a clean
    /// unmount makes them durable).
    pub(crate) fn take_all(&mut self) -> Vec<DirOp> {
        self.pending.drain(..).map(|p| p.op).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(parent: NodeId, node: NodeId) -> DirOp {
        DirOp::Create { parent, name: format!("n{node}").into(), node }
    }

    fn rename(node: NodeId, from_parent: NodeId, to_parent: NodeId) -> DirOp {
        DirOp::Rename {
            node,
            from_parent,
            from_name: "a".into(),
            to_parent,
            to_name: "b".into(),
            replaced: Some(Victim { node: 99, trash: "/t/0".into() }),
        }
    }

    #[test]
    fn a_change_is_durable_once_its_directory_is_fsynced() {
        let mut j = DirJournal::default();
        j.push(create(1, 10));
        j.push(create(2, 11));
        j.push(create(1, 12));
        assert_eq!(j.fsyncdir(3), vec![]);
        assert_eq!(j.fsyncdir(1), vec![create(1, 10), create(1, 12)]);
        assert_eq!(j.len(), 1);
        assert_eq!(j.take_all(), vec![create(2, 11)]);
        assert_eq!(j.len(), 0);
    }

    #[test]
    fn a_rename_needs_both_directories_fsynced() {
        let mut j = DirJournal::default();
        j.push(rename(10, 1, 2));
        assert_eq!(j.fsyncdir(2), vec![]);
        assert_eq!(j.fsyncdir(2), vec![]);
        let durable = j.fsyncdir(1);
        assert_eq!(durable, vec![rename(10, 1, 2)]);
        assert_eq!(durable[0].victim(), Some(&Victim { node: 99, trash: "/t/0".into() }));
        j.push(rename(10, 3, 3));
        assert_eq!(j.fsyncdir(3).len(), 1);
    }
}
