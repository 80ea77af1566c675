//! Directory entry operations: each applies to the backing directory at once and, in the strict
//! model, is journaled until the directories concerned are fsynced. Removed entries are moved to
//! the trash instead of deleted, so that a power cut can bring them back.

use std::ffi::OsStr;
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::{symlink, DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::attr::key;
use crate::dirs::{DirOp, Victim};
use crate::nodes::NodeId;
use crate::state::State;
use crate::sys::{self, errno};

impl State {
    /// `node` was just created at `path` (`name` in `parent`): sets its permissions exactly (the
    /// process umask must not apply twice) and owner, and journals the creation.
    pub(crate) fn created(
        &mut self,
        parent: NodeId,
        name: &OsStr,
        node: NodeId,
        path: &Path,
        perm: Option<u32>,
        owner: (u32, u32),
    ) -> io::Result<()> {
        let done = (|| {
            if let Some(perm) = perm {
                sys::chmod(path, perm)?;
            }
            if owner != sys::euid_egid() {
                sys::lchown(path, owner.0, owner.1)?;
            }
            Ok(())
        })();
        if let Err(e) = done {
            // Leave nothing half made behind.
            let _ = if fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
                fs::remove_dir(path)
            } else {
                fs::remove_file(path)
            };
            self.nodes.removed(path);
            return Err(e);
        }
        if self.strict_dirs {
            self.journal.push(DirOp::Create { parent, name: name.to_os_string(), node });
        }
        Ok(())
    }

    pub(crate) fn mknod(
        &mut self,
        parent: NodeId,
        name: &OsStr,
        mode: u32,
        rdev: u32,
        owner: (u32, u32),
    ) -> io::Result<(NodeId, Metadata)> {
        let path = self.child(parent, name, libc::EACCES)?;
        sys::mknod(&path, mode, rdev)?;
        let md = fs::symlink_metadata(&path)?;
        let node = self.nodes.get_or_insert(&path, key(&md));
        self.created(parent, name, node, &path, Some(mode & 0o7777), owner)?;
        Ok((node, fs::symlink_metadata(&path)?))
    }

    pub(crate) fn mkdir(
        &mut self,
        parent: NodeId,
        name: &OsStr,
        perm: u32,
        owner: (u32, u32),
    ) -> io::Result<(NodeId, Metadata)> {
        let path = self.child(parent, name, libc::EACCES)?;
        fs::DirBuilder::new().mode(perm).create(&path)?;
        let md = fs::symlink_metadata(&path)?;
        let node = self.nodes.get_or_insert(&path, key(&md));
        self.created(parent, name, node, &path, Some(perm), owner)?;
        Ok((node, fs::symlink_metadata(&path)?))
    }

    pub(crate) fn symlink(
        &mut self,
        parent: NodeId,
        name: &OsStr,
        target: &Path,
        owner: (u32, u32),
    ) -> io::Result<(NodeId, Metadata)> {
        let path = self.child(parent, name, libc::EACCES)?;
        symlink(target, &path)?;
        let md = fs::symlink_metadata(&path)?;
        let node = self.nodes.get_or_insert(&path, key(&md));
        self.created(parent, name, node, &path, None, owner)?;
        Ok((node, fs::symlink_metadata(&path)?))
    }

    pub(crate) fn unlink(&mut self, parent: NodeId, name: &OsStr) -> io::Result<()> {
        let path = self.child(parent, name, libc::ENOENT)?;
        let md = fs::symlink_metadata(&path)?;
        if md.is_dir() {
            return Err(errno(libc::EISDIR));
        }
        self.remove(parent, name, &path, &md)
    }

    pub(crate) fn rmdir(&mut self, parent: NodeId, name: &OsStr) -> io::Result<()> {
        let path = self.child(parent, name, libc::ENOENT)?;
        let md = fs::symlink_metadata(&path)?;
        if !md.is_dir() {
            return Err(errno(libc::ENOTDIR));
        }
        if fs::read_dir(&path)?.next().is_some() {
            return Err(errno(libc::ENOTEMPTY));
        }
        self.remove(parent, name, &path, &md)
    }

    fn remove(&mut self, parent: NodeId, name: &OsStr, path: &Path, md: &Metadata) -> io::Result<()> {
        if self.strict_dirs {
            let node = self.nodes.get_or_insert(path, key(md));
            let trash = self.trash_entry(path)?;
            let victim = Victim { node, trash };
            self.journal.push(DirOp::Remove { parent, name: name.to_os_string(), victim });
        } else {
            if md.is_dir() {
                fs::remove_dir(path)?;
            } else {
                fs::remove_file(path)?;
            }
            self.forget_removed(path, md);
        }
        Ok(())
    }

    /// The entry at `path` is gone for good.
    fn forget_removed(&mut self, path: &Path, md: &Metadata) {
        self.nodes.removed(path);
        if md.is_file() && md.nlink() <= 1 {
            self.files.remove(&key(md));
        }
    }

    /// Moves the entry at `path` to the trash; returns where it is now.
    fn trash_entry(&mut self, path: &Path) -> io::Result<PathBuf> {
        let dst = self.trash.join(self.trash_seq.to_string());
        self.trash_seq += 1;
        fs::rename(path, &dst)?;
        self.nodes.moved(path, &dst);
        Ok(dst)
    }

    /// Brings back the entry the trash holds at `trash` as `path`.
    pub(crate) fn restore_entry(&mut self, trash: &Path, path: &Path) -> io::Result<()> {
        if fs::symlink_metadata(path).is_ok() {
            return Err(errno(libc::EEXIST));
        }
        fs::rename(trash, path)?;
        self.nodes.moved(trash, path);
        Ok(())
    }

    pub(crate) fn rename(
        &mut self,
        parent: NodeId,
        name: &OsStr,
        new_parent: NodeId,
        new_name: &OsStr,
        flags: u32,
    ) -> io::Result<()> {
        if flags & !libc::RENAME_NOREPLACE != 0 {
            return Err(errno(libc::EINVAL));
        }
        let from = self.child(parent, name, libc::ENOENT)?;
        let to = self.child(new_parent, new_name, libc::EACCES)?;
        let src = fs::symlink_metadata(&from)?;
        if from == to {
            return Ok(());
        }
        if src.is_dir() && to.starts_with(&from) {
            return Err(errno(libc::EINVAL));
        }
        let node = self.nodes.get_or_insert(&from, key(&src));
        // What the new name names now: moved to the trash in the strict model, else overwritten.
        let mut replaced = None;
        let mut overwritten = None;
        if let Ok(dst) = fs::symlink_metadata(&to) {
            if flags & libc::RENAME_NOREPLACE != 0 {
                return Err(errno(libc::EEXIST));
            }
            if key(&dst) == key(&src) {
                // Two links of one file: rename does nothing.
                return Ok(());
            }
            match (src.is_dir(), dst.is_dir()) {
                (true, false) => return Err(errno(libc::ENOTDIR)),
                (false, true) => return Err(errno(libc::EISDIR)),
                (true, true) if fs::read_dir(&to)?.next().is_some() => return Err(errno(libc::ENOTEMPTY)),
                _ => {}
            }
            if self.strict_dirs {
                let victim = self.nodes.get_or_insert(&to, key(&dst));
                let trash = self.trash_entry(&to)?;
                replaced = Some(Victim { node: victim, trash });
            } else {
                overwritten = Some(dst);
            }
        }
        if let Err(e) = fs::rename(&from, &to) {
            if let Some(victim) = &replaced {
                let _ = self.restore_entry(&victim.trash, &to);
            }
            return Err(e);
        }
        if let Some(dst) = &overwritten {
            self.forget_removed(&to, dst);
        }
        self.nodes.moved(&from, &to);
        if self.strict_dirs {
            self.journal.push(DirOp::Rename {
                node,
                from_parent: parent,
                from_name: name.to_os_string(),
                to_parent: new_parent,
                to_name: new_name.to_os_string(),
                replaced,
            });
        }
        Ok(())
    }

    /// `fsyncdir`: the changes of `dir` whose directories are all fsynced now are durable.
    pub(crate) fn fsyncdir(&mut self, dir: NodeId) -> io::Result<()> {
        self.stats.fsyncdirs += 1;
        let durable = self.journal.fsyncdir(dir);
        self.make_durable(durable)
    }

    /// Purges what durable changes removed. A removed directory counts as fsynced from then on (it
    /// was empty; what was in it is durably elsewhere or gone).
    pub(crate) fn make_durable(&mut self, mut durable: Vec<DirOp>) -> io::Result<()> {
        let mut first_err = None;
        while let Some(op) = durable.pop() {
            let Some(victim) = op.victim() else { continue };
            let was_dir = fs::symlink_metadata(&victim.trash).is_ok_and(|m| m.is_dir());
            if let Err(e) = self.purge(&victim.trash) {
                first_err.get_or_insert(e);
            }
            if was_dir {
                durable.extend(self.journal.fsyncdir(victim.node));
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Deletes `path` (in the trash) for good.
    pub(crate) fn purge(&mut self, path: &Path) -> io::Result<()> {
        let Ok(md) = fs::symlink_metadata(path) else { return Ok(()) };
        if md.is_dir() {
            fs::remove_dir_all(path)?;
        } else {
            fs::remove_file(path)?;
        }
        self.forget_removed(path, &md);
        Ok(())
    }
}
