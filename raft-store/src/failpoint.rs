//! Crash points for tests: with the cargo feature `failpoints`, each named point in the log
//! store and state machine can be armed to end the process on the spot, as `kill -9` or a power
//! cut would (`std::process::abort`: no destructors, no flush). Without the feature the points
//! compile to nothing.
//!
//! Armed through the environment, once at start-up by the test binary (the cluster tests'
//! `leaf-test-node` calls [`arm_from_env`]; `leaf` never does):
//! `LEAF_FAILPOINTS="name[=actions];name2[=actions]"`, where `actions` follows the `fail`
//! crate's syntax and defaults to `return`. The point crashes when its action returns: plain
//! `return` crashes at the first hit, `2*off->return` at the third, and `return(300)` stalls
//! the hitting thread 300 ms first (other tasks' I/O lands meanwhile, the widest window).
//! Just before aborting it prints `leaf failpoint <name>: crashing the process` to stderr.

/// Every failpoint, in the order an install, purge, commit, append or truncate passes them.
pub const FAILPOINTS: &[&str] = &[
    // `StateMachineStore::install_snapshot`
    "sm-install-begin",
    "sm-install-snapshot-written",
    "sm-install-snapshot-flushed",
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
];

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
    debug_assert!(FAILPOINTS.contains(&name), "unknown failpoint {name}");
    if let Some(arg) = fail::eval(name, |arg| arg) {
        if let Some(ms) = arg.and_then(|a| a.trim().parse::<u64>().ok()) {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        eprintln!("leaf failpoint {name}: crashing the process");
        std::process::abort();
    }
}

/// Why `LEAF_FAILPOINTS` could not be applied.
#[cfg(feature = "failpoints")]
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    #[error("LEAF_FAILPOINTS names {0:?}, which is not a failpoint (known: {known})", known = FAILPOINTS.join(", "))]
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
        if !FAILPOINTS.contains(&name) {
            return Err(ArmError::Unknown(name.to_string()));
        }
        fail::cfg(name, actions.trim()).map_err(|reason| ArmError::Actions { name: name.to_string(), reason })?;
        armed.push(name.to_string());
    }
    Ok(armed)
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
}
