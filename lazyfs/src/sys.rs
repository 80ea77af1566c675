//! The few system calls std does not wrap.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn cpath(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| errno(libc::EINVAL))
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A time to set: `None` leaves it, `Some(None)` is now.
pub(crate) type SetTime = Option<Option<SystemTime>>;

fn timespec(t: SetTime) -> libc::timespec {
    match t {
        None => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        Some(None) => libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW },
        Some(Some(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long },
            Err(e) => {
                let d = e.duration();
                let (mut secs, mut nsecs) = (-(d.as_secs() as i64), -(i64::from(d.subsec_nanos())));
                if nsecs < 0 {
                    secs -= 1;
                    nsecs += 1_000_000_000;
                }
                libc::timespec { tv_sec: secs as libc::time_t, tv_nsec: nsecs as libc::c_long }
            }
        },
    }
}

/// `utimensat(path, [atime, mtime], AT_SYMLINK_NOFOLLOW)`.
pub(crate) fn set_times(path: &Path, atime: SetTime, mtime: SetTime) -> io::Result<()> {
    let path = cpath(path)?;
    let times = [timespec(atime), timespec(mtime)];
    // SAFETY: a valid C string and an array of two timespecs.
    check(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) })
}

/// `chmod(path, mode)`.
pub(crate) fn chmod(path: &Path, mode: u32) -> io::Result<()> {
    let path = cpath(path)?;
    // SAFETY: a valid C string.
    check(unsafe { libc::chmod(path.as_ptr(), mode as libc::mode_t) })
}

/// `lchown(path, uid, gid)`; `u32::MAX` leaves one as it is.
pub(crate) fn lchown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let path = cpath(path)?;
    // SAFETY: a valid C string.
    check(unsafe { libc::lchown(path.as_ptr(), uid, gid) })
}

/// `mknod(path, mode, rdev)`.
pub(crate) fn mknod(path: &Path, mode: u32, rdev: u32) -> io::Result<()> {
    let path = cpath(path)?;
    // SAFETY: a valid C string.
    check(unsafe { libc::mknod(path.as_ptr(), mode as libc::mode_t, libc::dev_t::from(rdev)) })
}

/// `fallocate(fd, mode, offset, len)`.
pub(crate) fn fallocate(file: &File, mode: i32, offset: u64, len: u64) -> io::Result<()> {
    let offset = i64::try_from(offset).map_err(|_| errno(libc::EFBIG))?;
    let len = i64::try_from(len).map_err(|_| errno(libc::EFBIG))?;
    // SAFETY: a valid file descriptor.
    check(unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, len) })
}

/// `statvfs(path)`.
pub(crate) fn statvfs(path: &Path) -> io::Result<libc::statvfs> {
    let path = cpath(path)?;
    // SAFETY: all-zero is a valid statvfs, and the call fills it in.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a valid out pointer.
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    Ok(st)
}

/// `umount2(path, flags)`.
pub(crate) fn umount2(path: &Path, flags: i32) -> io::Result<()> {
    let path = cpath(path)?;
    // SAFETY: a valid C string.
    check(unsafe { libc::umount2(path.as_ptr(), flags) })
}

/// The effective user and group of this process.
pub(crate) fn euid_egid() -> (u32, u32) {
    // SAFETY: these calls cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}
