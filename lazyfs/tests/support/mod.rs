//! A mounted file system on temporary directories, unmounted even when a test fails.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use leaf_lazyfs::{CutReport, LazyFs, Mounted, Options};
use tempfile::TempDir;

/// Whether mounts can be made here (root and `/dev/fuse`). If not, says why and returns `false`,
/// unless `LEAF_REQUIRE_FUSE=1`, which makes it a failure.
pub fn fuse_available() -> bool {
    // SAFETY: geteuid cannot fail.
    let problem = if !Path::new("/dev/fuse").exists() {
        Some("/dev/fuse is missing")
    } else if unsafe { libc::geteuid() } != 0 {
        Some("mounting needs root")
    } else {
        None
    };
    match problem {
        None => true,
        Some(why) if std::env::var("LEAF_REQUIRE_FUSE").is_ok_and(|v| v == "1") => {
            panic!("LEAF_REQUIRE_FUSE=1 but {why}")
        }
        Some(why) => {
            eprintln!("skipping the lazyfs test: {why}");
            false
        }
    }
}

/// A file system mounted on a temporary directory over another. Fields drop in order: the mount
/// goes before its directories.
pub struct Env {
    mounted: Option<Mounted>,
    pub fs: LazyFs,
    mnt: TempDir,
    pub backing: TempDir,
}

impl Env {
    /// A mounted file system, or `None` when mounts cannot be made here.
    pub fn new(opts: Options) -> Option<Env> {
        Self::with_backing(opts, |_| {})
    }

    /// Like `new`, with `prepare` filling the backing directory before the file system exists.
    pub fn with_backing(opts: Options, prepare: impl FnOnce(&Path)) -> Option<Env> {
        if !fuse_available() {
            return None;
        }
        let backing = tempfile::tempdir().expect("backing dir");
        prepare(backing.path());
        let mnt = tempfile::tempdir().expect("mount dir");
        let fs = LazyFs::new(backing.path(), opts).expect("LazyFs::new");
        let mounted = Some(fs.mount(mnt.path()).expect("mount"));
        Some(Env { mounted, fs, mnt, backing })
    }

    /// `rel` under the mount point.
    pub fn p(&self, rel: &str) -> PathBuf {
        self.mnt.path().join(rel)
    }

    pub fn mount_path(&self) -> &Path {
        self.mnt.path()
    }

    /// Cuts the power and mounts again; the cut must have met no problem.
    pub fn cut(&mut self) -> CutReport {
        let report = self.mounted.take().expect("mounted").power_cut().expect("power cut");
        assert!(report.problems.is_empty(), "{report}");
        self.mounted = Some(self.fs.mount(self.mnt.path()).expect("mount after the cut"));
        report
    }

    /// Unmounts cleanly and mounts again.
    pub fn remount(&mut self) {
        self.mounted.take().expect("mounted").unmount().expect("unmount");
        self.mounted = Some(self.fs.mount(self.mnt.path()).expect("mount again"));
    }

    /// Takes the mount (to cut or drop it in the test).
    pub fn take(&mut self) -> Mounted {
        self.mounted.take().expect("mounted")
    }

    pub fn put(&mut self, mounted: Mounted) {
        self.mounted = Some(mounted);
    }
}

/// Whether `path` is a mount point now.
pub fn is_mount_point(path: &Path) -> bool {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let mounts = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = path.to_string_lossy();
    mounts.lines().any(|l| l.split(' ').nth(4) == Some(&*want))
}

impl Drop for Env {
    fn drop(&mut self) {
        drop(self.mounted.take());
        if is_mount_point(self.mnt.path()) {
            // The last resort: a lazy unmount.
            let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(self.mnt.path()).status();
        }
    }
}

/// fsyncs the directory `dir`.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Bytes from a seed, to tell contents apart.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_mul(31).wrapping_add((i % 251) as u8)).collect()
}
