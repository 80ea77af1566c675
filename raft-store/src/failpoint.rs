//! Crash points and disk faults for tests: with the cargo feature `failpoints`, each named
//! point at a storage boundary can be armed to end the process on the spot, as `kill -9` or a
//! power cut would (`std::process::abort`: no destructors, no flush), and the fsync of the Raft
//! store can be made slow or fail with EIO. Without the feature the points compile to nothing.
//!
//! Armed through the environment by the test binary (the cluster tests' `leaf-test-node` calls
//! [`arm_from_env`] at start-up and, with `LEAF_FAILPOINTS_FILE`, [`watch_file`] to re-arm
//! while running; `leaf` never does): `LEAF_FAILPOINTS="name[=actions];name2[=actions]"`, where
//! `actions` follows the `fail` crate's syntax and defaults to `return`.
//!
//! - A crash point ([`CRASH_POINTS`]) crashes when its action returns: plain `return` crashes
//!   at the first hit, `2*off->return` at the third, and `return(300)` stalls the hitting
//!   thread 300 ms first (other tasks' I/O lands meanwhile, the widest window). Just before
//!   aborting it prints `leaf failpoint <name>: crashing the process` to stderr.
//! - A disk fault ([`DISK_FAULTS`]) makes the I/O fail with EIO when its action returns and
//!   makes it slow with `sleep(ms)` (a slow fsync); `3*return` fails three times, then passes.
//! - [`flip_bytes`] (always compiled) damages a closed store's file, as bit rot would.

/// Bit rot for tests: XORs `len` bytes of the file at `path` from `offset` with `0x5a`, in
/// place (the store must be closed).
pub fn flip_bytes(path: &std::path::Path, offset: u64, len: usize) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let mut b = vec![0u8; len];
    f.read_exact_at(&mut b, offset)?;
    b.iter_mut().for_each(|x| *x ^= 0x5a);
    f.write_all_at(&b, offset)?;
    f.sync_data()
}

/// Every crash point, in the order an install, purge, commit, append, truncate, vote, snapshot
/// build, checkpoint or snowflake state-file write passes them.
pub const CRASH_POINTS: &[&str] = &[
    // `StateMachineStore::install_snapshot` (`sm-install-state-cleared` also when an open
    // restores the snapshot: the old state removed, the new one not yet written)
    "sm-install-begin",
    "sm-install-snapshot-written",
    "sm-install-snapshot-flushed",
    "sm-install-state-cleared",
    "sm-install-state-replaced",
    "sm-install-done",
    // `LogStore::purge` (and a deferred purge completed later)
    "log-purge-begin",
    "log-purge-meta-written",
    "log-purge-meta-flushed",
    "log-purge-entries-removed",
    "log-purge-done",
    // `LogStore::save_committed`
    "log-committed-written",
    // `LogStore::append`
    "log-append-written",
    "log-append-flushed",
    // `LogStore::truncate`
    "log-truncate-removed",
    "log-truncate-done",
    // `LogStore::save_vote`
    "log-vote-written",
    "log-vote-flushed",
    // `StateMachineStore::build_snapshot`
    "sm-build-begin",
    "sm-build-checkpointed",
    "sm-build-snapshot-written",
    "sm-build-rebase-midway",
    "sm-build-done",
    // `compact::rewrite_if_due` after a build: the new files copied and synced, `current` not
    // yet naming them; then `current` renamed, the directory not yet synced (writes held off)
    "compact-copied",
    "compact-renamed",
    // The periodic checkpoint of the `sm` tree in `StateMachineStore::apply`
    "sm-checkpoint-begin",
    // the staging of a checkpoint of many keys (`state_machine/staged`): whole, then copied to
    // `sm` but not yet removed
    "sm-checkpoint-staged",
    "sm-checkpoint-copied",
    "sm-checkpoint-written",
    // leaf-node's snowflake state file (`StateFile::store`): the temporary file fsynced but not
    // yet renamed, and renamed but the directory not yet fsynced
    "snowflake-state-synced",
    "snowflake-state-renamed",
    // `StateMachineStore::write_backup`, after its 1,000th pair (a node killed mid-backup)
    "backup-midway",
];

/// Every disk fault: `disk-fsync` is every fsync of the Raft store (log, vote, state machine,
/// snapshots), on the blocking thread that runs it.
pub const DISK_FAULTS: &[&str] = &["disk-fsync"];

/// Whether `name` is a crash point or a disk fault.
pub fn known(name: &str) -> bool {
    CRASH_POINTS.contains(&name) || DISK_FAULTS.contains(&name)
}

/// Crashes the process if the failpoint `$name` is armed (feature `failpoints`; otherwise
/// nothing).
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoint::hit($name);
    };
}
pub(crate) use failpoint;

/// Evaluates the failpoint `name`: crashes the process if its actions say so.
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    debug_assert!(CRASH_POINTS.contains(&name), "unknown crash point {name}");
    if let Some(arg) = fail::eval(name, |arg| arg) {
        if let Some(ms) = arg.and_then(|a| a.trim().parse::<u64>().ok()) {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        eprintln!("leaf failpoint {name}: crashing the process");
        std::process::abort();
    }
}

/// Evaluates the disk fault `name`: sleeps if armed with `sleep(ms)`, returns EIO if its action
/// returns.
#[cfg(feature = "failpoints")]
pub fn io_fault(name: &str) -> Option<std::io::Error> {
    debug_assert!(DISK_FAULTS.contains(&name), "unknown disk fault {name}");
    fail::eval(name, |_| {
        eprintln!("leaf failpoint {name}: failing the I/O with EIO");
        std::io::Error::from_raw_os_error(libc_eio())
    })
}

/// EIO's number on Linux (and every Unix this runs on), without a libc dependency.
#[cfg(feature = "failpoints")]
const fn libc_eio() -> i32 {
    5
}

/// Why `LEAF_FAILPOINTS` could not be applied.
#[cfg(feature = "failpoints")]
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    #[error("LEAF_FAILPOINTS names {0:?}, which is not a failpoint (known: {known})",
        known = CRASH_POINTS.iter().chain(DISK_FAULTS).copied().collect::<Vec<_>>().join(", "))]
    Unknown(String),
    #[error("LEAF_FAILPOINTS: bad actions for {name}: {reason}")]
    Actions { name: String, reason: String },
}

/// Arms the failpoints named in `LEAF_FAILPOINTS` (see the module doc); returns their names.
#[cfg(feature = "failpoints")]
pub fn arm_from_env() -> Result<Vec<String>, ArmError> {
    let spec = std::env::var("LEAF_FAILPOINTS").unwrap_or_default();
    arm(&spec)
}

/// Arms the failpoints of `spec` (`name[=actions];...`); returns their names.
#[cfg(feature = "failpoints")]
pub fn arm(spec: &str) -> Result<Vec<String>, ArmError> {
    let mut armed = Vec::new();
    for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, actions) = item.split_once('=').unwrap_or((item, "return"));
        let name = name.trim();
        if !known(name) {
            return Err(ArmError::Unknown(name.to_string()));
        }
        fail::cfg(name, actions.trim()).map_err(|reason| ArmError::Actions { name: name.to_string(), reason })?;
        armed.push(name.to_string());
    }
    Ok(armed)
}

/// Re-arms the failpoints from the file at `path` whenever its content changes (polled every
/// 50 ms, on a thread of its own): every point armed before is disarmed, then the file's spec
/// (the `LEAF_FAILPOINTS` syntax; empty disarms everything) is armed. A bad spec is reported
/// on stderr and leaves every point disarmed. Tests use it to start and end a disk fault on a
/// running node.
#[cfg(feature = "failpoints")]
pub fn watch_file(path: std::path::PathBuf) -> std::io::Result<()> {
    std::thread::Builder::new().name("failpoint-watch".into()).spawn(move || {
        let mut last: Option<String> = None;
        loop {
            let spec = std::fs::read_to_string(&path).unwrap_or_default();
            if last.as_deref() != Some(spec.as_str()) {
                for name in CRASH_POINTS.iter().chain(DISK_FAULTS) {
                    fail::remove(name);
                }
                match arm(&spec) {
                    Ok(armed) => eprintln!("leaf failpoints armed from {}: [{}]", path.display(), armed.join(", ")),
                    Err(e) => {
                        for name in CRASH_POINTS.iter().chain(DISK_FAULTS) {
                            fail::remove(name);
                        }
                        eprintln!("leaf failpoints from {}: {e}; all disarmed", path.display());
                    }
                }
                last = Some(spec);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    })?;
    Ok(())
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::*;

    #[test]
    fn arming_checks_names_and_actions() {
        assert!(matches!(arm("log-purge-bgein"), Err(ArmError::Unknown(n)) if n == "log-purge-bgein"));
        assert!(matches!(arm("log-purge-begin=bogus(1"), Err(ArmError::Actions { .. })));
        assert_eq!(arm(" log-purge-begin=off ; sm-install-done=off;").unwrap(), ["log-purge-begin", "sm-install-done"]);
        // Armed "off": the points are evaluated and do nothing.
        hit("log-purge-begin");
        hit("sm-install-done");
        assert!(arm("").unwrap().is_empty());
    }

    #[test]
    fn a_disk_fault_fails_with_eio_as_often_as_armed() {
        arm("disk-fsync=2*return").unwrap();
        for _ in 0..2 {
            assert_eq!(io_fault("disk-fsync").map(|e| e.raw_os_error()), Some(Some(5)));
        }
        assert!(io_fault("disk-fsync").is_none());
        arm("disk-fsync=sleep(30)").unwrap();
        let t = std::time::Instant::now();
        assert!(io_fault("disk-fsync").is_none());
        assert!(t.elapsed() >= std::time::Duration::from_millis(30));
        fail::remove("disk-fsync");
        // No crash point shares a disk fault's name.
        assert!(CRASH_POINTS.iter().all(|p| !DISK_FAULTS.contains(p)));
    }
}
