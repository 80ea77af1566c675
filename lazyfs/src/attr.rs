//! Backing file metadata as FUSE attributes.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{FileAttr, FileType, INodeNo};

use crate::nodes::{Key, NodeId};

/// The backing file's identity.
pub(crate) fn key(md: &Metadata) -> Key {
    (md.dev(), md.ino())
}

/// The attributes of the backing file `md`, under the node number `node`.
pub(crate) fn attr(node: NodeId, md: &Metadata) -> FileAttr {
    let mtime = time(md.mtime(), md.mtime_nsec());
    FileAttr {
        ino: INodeNo(node),
        size: md.size(),
        blocks: md.blocks(),
        atime: time(md.atime(), md.atime_nsec()),
        mtime,
        ctime: time(md.ctime(), md.ctime_nsec()),
        crtime: mtime,
        kind: kind(md.mode()),
        perm: (md.mode() & 0o7777) as u16,
        nlink: md.nlink() as u32,
        uid: md.uid(),
        gid: md.gid(),
        rdev: md.rdev() as u32,
        blksize: md.blksize() as u32,
        flags: 0,
    }
}

/// The file type of a `st_mode`.
pub(crate) fn kind(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    let nsecs = nsecs.clamp(0, 999_999_999) as u32;
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + Duration::from_nanos(u64::from(nsecs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_the_epoch_convert() {
        assert_eq!(time(-1, 500_000_000), UNIX_EPOCH - Duration::from_millis(500));
        assert_eq!(time(2, 5), UNIX_EPOCH + Duration::new(2, 5));
    }

    #[test]
    fn modes_map_to_kinds() {
        assert_eq!(kind(libc::S_IFDIR | 0o755), FileType::Directory);
        assert_eq!(kind(libc::S_IFREG | 0o644), FileType::RegularFile);
        assert_eq!(kind(libc::S_IFLNK | 0o777), FileType::Symlink);
    }
}
