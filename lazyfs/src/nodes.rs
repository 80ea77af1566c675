//! The inode numbers the file system hands to the kernel, and the backing path of each.
//!
//! Numbers are never reused and nodes are never dropped (a test mounts few files), so the
//! directory journal can name directories and entries by number across renames and remounts.
//! A node whose backing entry is gone (removed for good) keeps its number but has no path.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A node's number, as the kernel knows it (`1` is the root).
pub(crate) type NodeId = u64;

/// The root's number.
pub(crate) const ROOT: NodeId = 1;

/// A backing file's identity: `(st_dev, st_ino)`.
pub(crate) type Key = (u64, u64);

#[derive(Debug)]
struct Node {
    path: Option<PathBuf>,
    key: Key,
}

#[derive(Debug)]
pub(crate) struct Nodes {
    by_id: HashMap<NodeId, Node>,
    by_path: HashMap<PathBuf, NodeId>,
    next: NodeId,
}

impl Nodes {
    pub(crate) fn new(root: PathBuf, root_key: Key) -> Self {
        let mut nodes = Nodes { by_id: HashMap::new(), by_path: HashMap::new(), next: ROOT + 1 };
        nodes.by_path.insert(root.clone(), ROOT);
        nodes.by_id.insert(ROOT, Node { path: Some(root), key: root_key });
        nodes
    }

    /// The node's current backing path, if it still has one.
    pub(crate) fn path(&self, id: NodeId) -> Option<&Path> {
        self.by_id.get(&id)?.path.as_deref()
    }

    /// The node of the backing file at `path`, whose identity is `key`: the known one, or a new one
    /// if the path is new or now names another file.
    pub(crate) fn get_or_insert(&mut self, path: &Path, key: Key) -> NodeId {
        if let Some(&id) = self.by_path.get(path) {
            if self.by_id.get(&id).is_some_and(|n| n.key == key) {
                return id;
            }
            if let Some(node) = self.by_id.get_mut(&id) {
                node.path = None;
            }
        }
        let id = self.next;
        self.next += 1;
        self.by_path.insert(path.to_path_buf(), id);
        self.by_id.insert(id, Node { path: Some(path.to_path_buf()), key });
        id
    }

    /// The node at `path`, if one is known.
    pub(crate) fn at(&self, path: &Path) -> Option<NodeId> {
        self.by_path.get(path).copied()
    }

    /// The entry at `from` (and everything below it) moved to `to`.
    pub(crate) fn moved(&mut self, from: &Path, to: &Path) {
        if from == to {
            return;
        }
        self.removed(to);
        let ids: Vec<NodeId> =
            self.by_path.iter().filter(|(path, _)| path.starts_with(from)).map(|(_, &id)| id).collect();
        for id in ids {
            let Some(node) = self.by_id.get_mut(&id) else { continue };
            let Some(old) = node.path.take() else { continue };
            self.by_path.remove(&old);
            let new = match old.strip_prefix(from) {
                Ok(rest) if rest.as_os_str().is_empty() => to.to_path_buf(),
                Ok(rest) => to.join(rest),
                Err(_) => old,
            };
            self.by_path.insert(new.clone(), id);
            node.path = Some(new);
        }
    }

    /// The entry at `path` (and everything below it) is gone for good.
    pub(crate) fn removed(&mut self, path: &Path) {
        let paths: Vec<PathBuf> = self.by_path.keys().filter(|p| p.starts_with(path)).cloned().collect();
        for p in paths {
            if let Some(id) = self.by_path.remove(&p) {
                if let Some(node) = self.by_id.get_mut(&id) {
                    node.path = None;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn lookups_reuse_numbers_until_the_file_changes() {
        let mut nodes = Nodes::new(p("/b"), (1, 1));
        let a = nodes.get_or_insert(&p("/b/a"), (1, 10));
        assert_eq!(nodes.get_or_insert(&p("/b/a"), (1, 10)), a);
        let a2 = nodes.get_or_insert(&p("/b/a"), (1, 11));
        assert_ne!(a2, a);
        assert_eq!(nodes.path(a), None);
        assert_eq!(nodes.path(a2), Some(p("/b/a").as_path()));
        assert_eq!(nodes.path(ROOT), Some(p("/b").as_path()));
    }

    #[test]
    fn a_directory_move_carries_its_descendants() {
        let mut nodes = Nodes::new(p("/b"), (1, 1));
        let d = nodes.get_or_insert(&p("/b/d"), (1, 2));
        let f = nodes.get_or_insert(&p("/b/d/f"), (1, 3));
        let other = nodes.get_or_insert(&p("/b/dd"), (1, 4));
        let victim = nodes.get_or_insert(&p("/b/e"), (1, 5));
        nodes.moved(&p("/b/d"), &p("/b/e"));
        assert_eq!(nodes.path(d), Some(p("/b/e").as_path()));
        assert_eq!(nodes.path(f), Some(p("/b/e/f").as_path()));
        assert_eq!(nodes.path(other), Some(p("/b/dd").as_path()));
        assert_eq!(nodes.path(victim), None);
        assert_eq!(nodes.at(&p("/b/e/f")), Some(f));
        assert_eq!(nodes.at(&p("/b/d/f")), None);
        nodes.removed(&p("/b/e"));
        assert_eq!(nodes.path(d), None);
        assert_eq!(nodes.path(f), None);
        assert_eq!(nodes.path(other), Some(p("/b/dd").as_path()));
    }
}
