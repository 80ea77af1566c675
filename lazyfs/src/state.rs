//! The file system's state, and the file operations: each applies to the backing directory at once
//! and records in the undo logs what a power cut must take back. One lock guards it all.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirEntryExt, FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use fuser::FileType;

use crate::attr::key;
use crate::dirs::DirJournal;
use crate::nodes::{Key, NodeId, Nodes, ROOT};
use crate::sys::{self, errno, SetTime};
use crate::undo::{Content, FileUndo};
use crate::Stats;

/// The hidden directory of the backing directory where removed entries wait until their removal is
/// durable.
pub(crate) const TRASH: &str = ".lazyfs-trash";

/// A file with changes since its last sync.
#[derive(Debug)]
pub(crate) struct Tracked {
    /// The file opened read-write by the file system itself (it outlives the handles).
    pub file: File,
    pub undo: FileUndo,
}

/// An open file.
#[derive(Debug)]
pub(crate) struct Handle {
    pub key: Key,
    pub file: File,
}

/// A directory entry, as `readdir` lists it.
#[derive(Debug, Clone)]
pub(crate) struct DirEntry {
    pub node: NodeId,
    pub kind: FileType,
    pub name: OsString,
}

/// An open directory: its listing, taken when read from the start.
#[derive(Debug)]
pub(crate) struct DirHandle {
    pub node: NodeId,
    pub entries: Vec<DirEntry>,
}

/// What `setattr` changes.
#[derive(Debug, Default)]
pub(crate) struct SetAttr {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: SetTime,
    pub mtime: SetTime,
}

#[derive(Debug)]
pub(crate) struct State {
    pub backing: PathBuf,
    pub trash: PathBuf,
    pub strict_dirs: bool,
    pub nodes: Nodes,
    /// Files with changes since their last sync, by backing identity.
    pub files: HashMap<Key, Tracked>,
    pub journal: DirJournal,
    pub handles: HashMap<u64, Handle>,
    pub dir_handles: HashMap<u64, DirHandle>,
    next_fh: u64,
    pub trash_seq: u64,
    /// The session allowed to use the state; a new mount or an unmount starts another, which fences
    /// off any older session still served by a lingering thread.
    pub epoch: u64,
    pub mounted: bool,
    pub stats: Stats,
}

/// Upgrades write-only to read-write and drops the flags the backing file must not have: the
/// kernel computes append offsets itself, truncation is recorded first, and the backing writes need
/// no alignment or synchronous I/O.
fn open_options(flags: i32) -> OpenOptions {
    let mut oo = OpenOptions::new();
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => oo.read(true),
        _ => oo.read(true).write(true),
    };
    let dropped = libc::O_ACCMODE
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_TRUNC
        | libc::O_APPEND
        | libc::O_DIRECT
        | libc::O_SYNC
        | libc::O_DSYNC
        | libc::O_NOCTTY;
    oo.custom_flags(flags & !dropped);
    oo
}

/// Opens the file behind `file` again, read-write.
fn reopen(file: &File) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

/// Records in the undo log of `key` that `offset..offset + len` is about to change; `src` is any
/// open file of it. The first record since a sync makes the current length the synced one.
pub(crate) fn record(files: &mut HashMap<Key, Tracked>, key: Key, src: &File, offset: u64, len: u64) -> io::Result<()> {
    let tracked = match files.entry(key) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => {
            let file = reopen(src)?;
            let synced_len = file.metadata()?.len();
            e.insert(Tracked { file, undo: FileUndo::new(synced_len) })
        }
    };
    tracked.undo.record(&tracked.file, offset, len)?;
    Ok(())
}

/// Records, then sets the length of `file`.
fn truncate(files: &mut HashMap<Key, Tracked>, key: Key, file: &File, len: u64) -> io::Result<()> {
    let cur = file.metadata()?.len();
    record(files, key, file, len.min(cur), cur.saturating_sub(len))?;
    file.set_len(len)
}

impl State {
    pub(crate) fn new(backing: PathBuf, strict_dirs: bool) -> io::Result<Self> {
        let root = fs::metadata(&backing)?;
        if !root.is_dir() {
            return Err(errno(libc::ENOTDIR));
        }
        let trash = backing.join(TRASH);
        if fs::symlink_metadata(&trash).is_ok() {
            fs::remove_dir_all(&trash)?;
        }
        fs::create_dir(&trash)?;
        Ok(State {
            nodes: Nodes::new(backing.clone(), key(&root)),
            backing,
            trash,
            strict_dirs,
            files: HashMap::new(),
            journal: DirJournal::default(),
            handles: HashMap::new(),
            dir_handles: HashMap::new(),
            next_fh: 1,
            trash_seq: 0,
            epoch: 0,
            mounted: false,
            stats: Stats::default(),
        })
    }

    fn fh(&mut self) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        fh
    }

    /// The backing path of `node`.
    pub(crate) fn path(&self, node: NodeId) -> io::Result<PathBuf> {
        self.nodes.path(node).map(Path::to_path_buf).ok_or_else(|| errno(libc::ENOENT))
    }

    /// The backing path of the directory `node`, to look up or create entries in: not one removed.
    pub(crate) fn dir_path(&self, node: NodeId) -> io::Result<PathBuf> {
        let path = self.path(node)?;
        if path.starts_with(&self.trash) {
            return Err(errno(libc::ENOENT));
        }
        Ok(path)
    }

    /// Whether `name` in `parent` is the hidden trash.
    pub(crate) fn hidden(&self, parent: NodeId, name: &OsStr) -> bool {
        parent == ROOT && name == TRASH
    }

    /// The backing path of `name` in `parent`, which must not be the trash.
    pub(crate) fn child(&self, parent: NodeId, name: &OsStr, hidden_err: i32) -> io::Result<PathBuf> {
        if self.hidden(parent, name) {
            return Err(errno(hidden_err));
        }
        Ok(self.dir_path(parent)?.join(name))
    }

    pub(crate) fn lookup(&mut self, parent: NodeId, name: &OsStr) -> io::Result<(NodeId, Metadata)> {
        let path = self.child(parent, name, libc::ENOENT)?;
        let md = fs::symlink_metadata(&path)?;
        Ok((self.nodes.get_or_insert(&path, key(&md)), md))
    }

    pub(crate) fn getattr(&self, node: NodeId, fh: Option<u64>) -> io::Result<Metadata> {
        if let Some(h) = fh.and_then(|fh| self.handles.get(&fh)) {
            return h.file.metadata();
        }
        fs::symlink_metadata(self.path(node)?)
    }

    pub(crate) fn setattr(&mut self, node: NodeId, fh: Option<u64>, set: SetAttr) -> io::Result<Metadata> {
        let path = self.path(node)?;
        if let Some(len) = set.size {
            self.stats.truncates += 1;
            match fh.and_then(|fh| self.handles.get(&fh)) {
                Some(h) => truncate(&mut self.files, h.key, &h.file, len)?,
                None => {
                    let file = OpenOptions::new().write(true).open(&path)?;
                    truncate(&mut self.files, key(&file.metadata()?), &file, len)?;
                }
            }
        }
        if let Some(mode) = set.mode {
            sys::chmod(&path, mode & 0o7777)?;
        }
        if set.uid.is_some() || set.gid.is_some() {
            sys::lchown(&path, set.uid.unwrap_or(u32::MAX), set.gid.unwrap_or(u32::MAX))?;
        }
        if set.atime.is_some() || set.mtime.is_some() {
            sys::set_times(&path, set.atime, set.mtime)?;
        }
        self.getattr(node, fh)
    }

    pub(crate) fn readlink(&self, node: NodeId) -> io::Result<PathBuf> {
        fs::read_link(self.path(node)?)
    }

    pub(crate) fn open(&mut self, node: NodeId, flags: i32) -> io::Result<u64> {
        let path = self.path(node)?;
        let file = open_options(flags).open(&path)?;
        let key = key(&file.metadata()?);
        if flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY {
            self.stats.truncates += 1;
            truncate(&mut self.files, key, &file, 0)?;
        }
        let fh = self.fh();
        self.handles.insert(fh, Handle { key, file });
        Ok(fh)
    }

    /// Creates `name` in `parent` and opens it (or opens it, if it exists and `O_EXCL` is not set).
    pub(crate) fn create(
        &mut self,
        parent: NodeId,
        name: &OsStr,
        perm: u32,
        flags: i32,
        owner: (u32, u32),
    ) -> io::Result<(NodeId, Metadata, u64)> {
        let path = self.child(parent, name, libc::EACCES)?;
        let exists = fs::symlink_metadata(&path).is_ok();
        if exists && flags & libc::O_EXCL != 0 {
            return Err(errno(libc::EEXIST));
        }
        let mut oo = open_options(flags);
        if !exists {
            oo.create_new(true).mode(perm);
        }
        let file = oo.open(&path)?;
        let md = file.metadata()?;
        let node = self.nodes.get_or_insert(&path, key(&md));
        if exists {
            if flags & libc::O_TRUNC != 0 && flags & libc::O_ACCMODE != libc::O_RDONLY {
                self.stats.truncates += 1;
                truncate(&mut self.files, key(&md), &file, 0)?;
            }
        } else {
            self.created(parent, name, node, &path, Some(perm), owner)?;
        }
        let md = file.metadata()?;
        let fh = self.fh();
        self.handles.insert(fh, Handle { key: key(&md), file });
        Ok((node, md, fh))
    }

    pub(crate) fn read(&self, fh: u64, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let h = self.handles.get(&fh).ok_or_else(|| errno(libc::EBADF))?;
        Content::read_at(&h.file, offset, size as usize)
    }

    pub(crate) fn write(&mut self, fh: u64, offset: u64, data: &[u8]) -> io::Result<u32> {
        let h = self.handles.get(&fh).ok_or_else(|| errno(libc::EBADF))?;
        let len = u32::try_from(data.len()).map_err(|_| errno(libc::EINVAL))?;
        record(&mut self.files, h.key, &h.file, offset, data.len() as u64)?;
        h.file.write_all_at(data, offset)?;
        self.stats.writes += 1;
        self.stats.bytes_written += data.len() as u64;
        Ok(len)
    }

    pub(crate) fn fallocate(&mut self, fh: u64, offset: u64, len: u64, mode: i32) -> io::Result<()> {
        const CHANGES_DATA: i32 = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE;
        if mode & !(libc::FALLOC_FL_KEEP_SIZE | CHANGES_DATA) != 0 {
            return Err(errno(libc::EOPNOTSUPP));
        }
        let h = self.handles.get(&fh).ok_or_else(|| errno(libc::EBADF))?;
        let end = offset.checked_add(len).ok_or_else(|| errno(libc::EFBIG))?;
        if mode & CHANGES_DATA != 0 {
            record(&mut self.files, h.key, &h.file, offset, len)?;
        } else if mode & libc::FALLOC_FL_KEEP_SIZE == 0 {
            let cur = h.file.metadata()?.len();
            record(&mut self.files, h.key, &h.file, cur, end.saturating_sub(cur))?;
        }
        sys::fallocate(&h.file, mode, offset, len)
    }

    pub(crate) fn release(&mut self, fh: u64) {
        self.handles.remove(&fh);
    }

    /// `fsync` or `fdatasync`: the file's current content is the synced one.
    pub(crate) fn fsync(&mut self, node: NodeId, fh: Option<u64>, datasync: bool) -> io::Result<()> {
        let key = match fh.and_then(|fh| self.handles.get(&fh)) {
            Some(h) => h.key,
            None => key(&fs::symlink_metadata(self.path(node)?)?),
        };
        self.files.remove(&key);
        if datasync {
            self.stats.fdatasyncs += 1;
        } else {
            self.stats.fsyncs += 1;
        }
        Ok(())
    }

    pub(crate) fn opendir(&mut self, node: NodeId) -> io::Result<u64> {
        if !fs::symlink_metadata(self.path(node)?)?.is_dir() {
            return Err(errno(libc::ENOTDIR));
        }
        let fh = self.fh();
        self.dir_handles.insert(fh, DirHandle { node, entries: Vec::new() });
        Ok(fh)
    }

    /// The entries of the open directory `fh` from `offset` on (entry `i` has the offset `i + 1`).
    /// Reading from offset 0 (again) lists the directory afresh.
    pub(crate) fn readdir(&mut self, fh: u64, offset: u64) -> io::Result<&[DirEntry]> {
        let node = self.dir_handles.get(&fh).ok_or_else(|| errno(libc::EBADF))?.node;
        if offset == 0 {
            let entries = self.list(node)?;
            if let Some(h) = self.dir_handles.get_mut(&fh) {
                h.entries = entries;
            }
        }
        let entries = self.dir_handles.get(&fh).map_or(&[][..], |h| &h.entries[..]);
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(entries.len());
        Ok(&entries[start..])
    }

    fn list(&mut self, node: NodeId) -> io::Result<Vec<DirEntry>> {
        let path = self.path(node)?;
        let dev = fs::symlink_metadata(&path)?.dev();
        let parent = match path.parent() {
            Some(p) if node != ROOT => self.nodes.at(p).unwrap_or(ROOT),
            _ => ROOT,
        };
        let mut entries = vec![
            DirEntry { node, kind: FileType::Directory, name: ".".into() },
            DirEntry { node: parent, kind: FileType::Directory, name: "..".into() },
        ];
        for entry in fs::read_dir(&path)? {
            let entry = entry?;
            let name = entry.file_name();
            if self.hidden(node, &name) {
                continue;
            }
            let kind = entry.file_type().ok().and_then(FileType::from_std).unwrap_or(FileType::RegularFile);
            let child = self.nodes.get_or_insert(&entry.path(), (dev, entry.ino()));
            entries.push(DirEntry { node: child, kind, name });
        }
        Ok(entries)
    }

    /// `statvfs` of the backing file system.
    pub(crate) fn statfs(&self) -> io::Result<libc::statvfs> {
        sys::statvfs(&self.backing)
    }

    /// The session ended: its open files and directories are gone.
    pub(crate) fn end_session(&mut self) {
        self.handles.clear();
        self.dir_handles.clear();
        self.mounted = false;
        self.epoch += 1;
    }
}
