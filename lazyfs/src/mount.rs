//! Mounting and unmounting: one FUSE session per mount, run on a thread of its own.
//!
//! fuser's own unmount on drop is disarmed (see [`Mounted::stop`]): the file system unmounts with
//! `umount2` itself, waiting while the mount is busy, and waits for the session thread to end
//! before the state is touched.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use fuser::{Config, MountOption, Session, SessionACL, SessionUnmounter};

use crate::fs::Fs;
use crate::sys;
use crate::{CutReport, Shared};

/// How long an unmount waits for a busy mount (processes still exiting) before it detaches it.
const BUSY_WAIT: Duration = Duration::from_secs(5);
/// How long an unmount waits for the session thread to end.
const THREAD_WAIT: Duration = Duration::from_secs(10);

/// A mounted [`LazyFs`](crate::LazyFs). Dropping it is a clean unmount, like [`Mounted::unmount`].
pub struct Mounted {
    shared: Arc<Shared>,
    path: PathBuf,
    /// The mount's device number (`st_dev` of its root), to abort the connection if need be.
    dev: u64,
    thread: Option<JoinHandle<io::Result<()>>>,
    unmounter: SessionUnmounter,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted").field("path", &self.path).field("dev", &self.dev).finish_non_exhaustive()
    }
}

pub(crate) fn mount(shared: &Arc<Shared>, mountpoint: &Path) -> io::Result<Mounted> {
    let path = mountpoint.canonicalize()?;
    reap(shared);
    let epoch = {
        let mut st = shared.state();
        if path.starts_with(&st.backing) || st.backing.starts_with(&path) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the mount point and the backing directory overlap",
            ));
        }
        if st.mounted {
            return Err(io::Error::new(io::ErrorKind::ResourceBusy, "the file system is mounted already"));
        }
        st.mounted = true;
        st.epoch += 1;
        st.epoch
    };
    let started = (|| {
        let mut config = Config::default();
        config.mount_options = vec![MountOption::FSName("lazyfs".into()), MountOption::DefaultPermissions];
        config.acl = SessionACL::All;
        let mut session = Session::new(Fs { shared: shared.clone(), epoch }, &path, &config)?;
        let unmounter = session.unmount_callable();
        let thread = match thread::Builder::new().name("lazyfs".into()).spawn(move || session.run()) {
            Ok(thread) => thread,
            Err(e) => {
                // The session was dropped with the closure: unmounted.
                return Err(e);
            }
        };
        Ok((thread, unmounter))
    })();
    let (thread, unmounter) = match started {
        Ok(started) => started,
        Err(e) => {
            shared.state().end_session();
            return Err(e);
        }
    };
    let mut mounted = Mounted { shared: shared.clone(), path, dev: 0, thread: Some(thread), unmounter };
    match std::fs::metadata(&mounted.path) {
        Ok(md) => mounted.dev = md.dev(),
        Err(e) => {
            let _ = mounted.stop();
            return Err(e);
        }
    }
    tracing::debug!(path = %mounted.path.display(), "lazyfs mounted");
    Ok(mounted)
}

/// Joins the lingering session threads that have ended.
fn reap(shared: &Shared) {
    let mut lingering = shared.lingering.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (done, still): (Vec<_>, Vec<_>) = lingering.drain(..).partition(|t| t.is_finished());
    *lingering = still;
    for t in done {
        let _ = t.join();
    }
}

/// Unmounts `path`, waiting while it is busy; then detaches it. Returns whether it detached.
fn unmount(path: &Path) -> io::Result<bool> {
    let deadline = Instant::now() + BUSY_WAIT;
    loop {
        match sys::umount2(path, 0) {
            Ok(()) => return Ok(false),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(10));
            }
            // Not mounted (any more): someone unmounted it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOENT)) => return Ok(false),
            Err(e) => {
                tracing::warn!(path = %path.display(), "lazyfs: cannot unmount ({e}), detaching it");
                sys::umount2(path, libc::MNT_DETACH)?;
                return Ok(true);
            }
        }
    }
}

/// Aborts the FUSE connection of the mount with device number `dev` (if the fusectl file system is
/// mounted): its session ends even while processes still use the detached mount.
fn abort_connection(dev: u64) {
    let kdev = (u64::from(libc::major(dev)) << 20) | u64::from(libc::minor(dev));
    let _ = std::fs::write(format!("/sys/fs/fuse/connections/{kdev}/abort"), "1");
}

/// Waits for `thread` to end; gives it back if it does not in time.
fn wait(thread: JoinHandle<io::Result<()>>, timeout: Duration) -> Result<(), JoinHandle<io::Result<()>>> {
    let deadline = Instant::now() + timeout;
    while !thread.is_finished() {
        if Instant::now() >= deadline {
            return Err(thread);
        }
        thread::sleep(Duration::from_millis(2));
    }
    match thread.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!("lazyfs: the session ended with an error: {e}"),
        Err(_) => tracing::warn!("lazyfs: the session thread panicked"),
    }
    Ok(())
}

impl Mounted {
    /// The mount point (canonical).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Cuts the power: unmounts, then takes back everything not synced. The state is ready to
    /// mount again.
    ///
    /// Every process using the mount must be dead by then (kill them with SIGKILL first). The
    /// unmount waits a few seconds while the mount is busy; if it still is, it detaches the mount
    /// and fences off its session: what still uses it gets `EIO` from then on, as from a dead disk.
    pub fn power_cut(mut self) -> io::Result<CutReport> {
        self.stop()?;
        let report = self.shared.state().revert();
        if report.problems.is_empty() {
            tracing::info!(path = %self.path.display(), "lazyfs: {report}");
        } else {
            tracing::warn!(path = %self.path.display(), "lazyfs: {report}");
        }
        Ok(report)
    }

    /// Unmounts cleanly: nothing is taken back, and everything becomes durable (a clean shutdown
    /// syncs the file system).
    pub fn unmount(mut self) -> io::Result<()> {
        self.stop()?;
        self.shared.state().commit()
    }

    /// Unmounts and ends the session: afterwards no request of it reaches the state.
    fn stop(&mut self) -> io::Result<()> {
        let Some(thread) = self.thread.take() else { return Ok(()) };
        let detached = match unmount(&self.path) {
            Ok(detached) => detached,
            Err(e) => {
                self.thread = Some(thread);
                return Err(e);
            }
        };
        // Disarm fuser's own unmount at the end of the session (it would unmount whatever is
        // mounted at the path by then): it finds nothing mounted now, and forgets the mount.
        let _ = self.unmounter.unmount();
        let timeout = if detached {
            abort_connection(self.dev);
            Duration::from_secs(1)
        } else {
            THREAD_WAIT
        };
        let ended = wait(thread, timeout);
        self.shared.state().end_session();
        if let Err(thread) = ended {
            tracing::warn!(path = %self.path.display(), "lazyfs: the detached mount is still in use; its session is fenced off");
            self.shared.lingering.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(thread);
        }
        Ok(())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.thread.is_none() {
            return;
        }
        if let Err(e) = self.stop() {
            tracing::warn!(path = %self.path.display(), "lazyfs: unmount failed: {e}");
            return;
        }
        if let Err(e) = self.shared.state().commit() {
            tracing::warn!(path = %self.path.display(), "lazyfs: emptying the trash failed: {e}");
        }
    }
}
