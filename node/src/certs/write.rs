//! Writing `leaf certs`' files so that a reader never sees half of one: each file is written to
//! a temporary file in the same directory, synced, then moved into place (`rename` when
//! replacing is allowed, a hard link when not, so a file that appeared meanwhile is never
//! overwritten), and the directory is synced. Secret files (keys) are created mode 0600.
use std::io::Write;
use std::path::{Path, PathBuf};

use super::CertsError;

/// One file to write.
pub(super) struct File<'a> {
    pub name: &'a str,
    pub contents: &'a [u8],
    /// A private key: mode 0600.
    pub secret: bool,
}

/// Writes `files` into `dir` (created if missing), in order. Without `force`, nothing is written
/// when any of them exists.
pub(super) fn write_files(dir: &Path, files: &[File<'_>], force: bool) -> Result<(), CertsError> {
    std::fs::create_dir_all(dir).map_err(|source| io(dir, source))?;
    if !force {
        for f in files {
            let path = dir.join(f.name);
            match std::fs::symlink_metadata(&path) {
                Ok(_) => return Err(CertsError::Exists { path }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(CertsError::Io { path, source }),
            }
        }
    }
    for f in files {
        write_one(dir, f, force)?;
    }
    sync_dir(dir)
}

fn write_one(dir: &Path, file: &File<'_>, force: bool) -> Result<(), CertsError> {
    let path = dir.join(file.name);
    let tmp = dir.join(format!(".{}.{}.{:016x}.tmp", file.name, std::process::id(), rand::random::<u64>()));
    let result = write_tmp(&tmp, file).and_then(|()| put_in_place(&tmp, &path, force));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_tmp(tmp: &Path, file: &File<'_>) -> Result<(), CertsError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if file.secret { 0o600 } else { 0o644 });
    }
    let mut f = options.open(tmp).map_err(|source| io(tmp, source))?;
    f.write_all(file.contents).map_err(|source| io(tmp, source))?;
    f.sync_all().map_err(|source| io(tmp, source))
}

/// Moves `tmp` to `path`: replacing it when `force`, else only if it still does not exist.
fn put_in_place(tmp: &Path, path: &Path, force: bool) -> Result<(), CertsError> {
    if force {
        return std::fs::rename(tmp, path).map_err(|source| io(path, source));
    }
    match std::fs::hard_link(tmp, path) {
        Ok(()) => std::fs::remove_file(tmp).map_err(|source| io(tmp, source)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(CertsError::Exists { path: path.to_path_buf() }),
        // A file system without hard links: check, then rename (a file created in between is
        // replaced, which only a concurrent `leaf certs` into the same directory could do).
        Err(_) => match std::fs::symlink_metadata(path) {
            Ok(_) => Err(CertsError::Exists { path: path.to_path_buf() }),
            Err(_) => std::fs::rename(tmp, path).map_err(|source| io(path, source)),
        },
    }
}

/// Makes the renames durable.
fn sync_dir(dir: &Path) -> Result<(), CertsError> {
    #[cfg(unix)]
    {
        let d = std::fs::File::open(dir).map_err(|source| io(dir, source))?;
        d.sync_all().map_err(|source| io(dir, source))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

fn io(path: &Path, source: std::io::Error) -> CertsError {
    CertsError::Io { path: PathBuf::from(path), source }
}
