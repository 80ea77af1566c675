//! Data at rest is its owner's alone. The data directory holds token hashes, obfuscation keys
//! and every gapless ledger, so whatever the umask it starts with, a node:
//! - sets its process umask to `077` ([`restrict_umask`]), so every file it creates from then
//!   on (sled's log and snapshots, the state machine's snapshot files, backups, rewrites) is
//!   `0600` and every directory `0700` (`leaf restore` sets it too, before it writes a data
//!   directory);
//! - tightens what an earlier run, an older release or an operator left wider
//!   ([`tighten_tree`]): the data directory and everything in it, and the TLS private key,
//!   lose every group and other permission, with one log line saying how many paths it
//!   changed.
//!
//! Symbolic links are not followed (one in the data directory is left as it is).
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Group and other permission bits.
const OTHERS: u32 = 0o077;

/// Sets the process umask to `077`. The umask is per process: in a process that embeds a node
/// (the tests), files it creates later are private too.
pub fn restrict_umask() {
    // SAFETY: umask(2) only sets the calling process's file mode creation mask; it cannot fail.
    unsafe {
        libc::umask(0o077);
    }
}

/// Removes group and other permissions from `path` and, for a directory, from everything
/// under it. Answers the paths it changed.
pub fn tighten_tree(path: &Path) -> io::Result<Vec<PathBuf>> {
    let mut changed = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            // Gone meanwhile (a snapshot file replaced): nothing to tighten.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if meta.file_type().is_symlink() {
            continue;
        }
        let mode = meta.permissions().mode();
        if mode & OTHERS != 0 {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode & !OTHERS & 0o7777))?;
            changed.push(p.clone());
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(&p)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(changed)
}

/// [`tighten_tree`] of each of `paths` that exists, logging what it changed (a path that
/// cannot be tightened is logged and left: the node still starts).
pub fn tighten_at_start(paths: &[&Path]) {
    for path in paths {
        if !path.exists() {
            continue;
        }
        match tighten_tree(path) {
            Ok(changed) if changed.is_empty() => {}
            Ok(changed) => tracing::warn!(
                path = %path.display(),
                tightened = changed.len(),
                first = %changed[0].display(),
                "other users could read this node's private files: removed their group and other permissions"
            ),
            Err(e) => tracing::error!(
                path = %path.display(),
                error = %e,
                "could not make this node's private files owner-only; other users may read them"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_tree_loses_group_and_other_bits_and_keeps_the_owners() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join("raft/snapshots")).unwrap();
        std::fs::write(data.join("raft/db"), b"x").unwrap();
        std::fs::write(data.join("raft/snapshots/snap"), b"x").unwrap();
        std::fs::write(data.join("run.sh"), b"x").unwrap();
        for (p, m) in [
            ("", 0o755),
            ("raft", 0o755),
            ("raft/snapshots", 0o750),
            ("raft/db", 0o644),
            ("run.sh", 0o775),
            ("raft/snapshots/snap", 0o600),
        ] {
            std::fs::set_permissions(data.join(p), std::fs::Permissions::from_mode(m)).unwrap();
        }
        std::os::unix::fs::symlink("/etc/passwd", data.join("link")).unwrap();
        let changed = tighten_tree(&data).unwrap();
        assert_eq!(changed.len(), 5, "{changed:?}");
        assert_eq!(mode(&data), 0o700);
        assert_eq!(mode(&data.join("raft")), 0o700);
        assert_eq!(mode(&data.join("raft/snapshots")), 0o700);
        assert_eq!(mode(&data.join("raft/db")), 0o600);
        assert_eq!(mode(&data.join("run.sh")), 0o700);
        assert_eq!(mode(&data.join("raft/snapshots/snap")), 0o600);
        assert!(tighten_tree(&data).unwrap().is_empty(), "a second pass changes nothing");
        assert_eq!(mode(Path::new("/etc/passwd")) & 0o044, 0o044, "a link is not followed");
    }
}
