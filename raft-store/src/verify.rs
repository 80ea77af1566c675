//! Damage found at open: the store read back whole before the node serves from it.
//!
//! A byte flipped on a disk (bit rot, a bad sector, a botched copy) must stop the node, never
//! be read as another number or skipped. [`scan`] reads every record of every tree once at
//! open: sled checks each page's CRC as it reads it and reports a bad one with its offset in
//! its log file `db` (a value kept apart, with the blob file's name); every record of the trees
//! that hold [`codec`] records has its own checksum checked too. The `sm` tree is read whole
//! (and decoded, checksums included) by the state's load, so the open scans it only to locate
//! damage when the load fails. The current snapshot file is read through its checksums
//! ([`snapshot`]), on a thread of its own while the state loads.
//!
//! What a scan cannot see is what sled's own recovery dropped: at open it replays its log's
//! tail and takes a message that does not check out for the end of the log, right after a
//! torn write, silent after bit rot. The Raft log's end and vote are checked against
//! `log_end` for that. A flip in space sled no longer uses (a superseded page) harms nothing
//! and is not reported.
//!
//! The node refuses to start on any [`Damage`]. Its cure is the documented node replacement:
//! the peers hold every committed record.
use std::path::{Path, PathBuf};
use std::time::Instant;

use leaf_api::codec::{self, CodecError};

/// The trees whose every value is one [`codec`] record.
const CODEC_TREES: &[&str] = &["log", "raft_meta", "journal", "journal_meta", "snapshot"];

/// Where a data directory is damaged.
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    #[error("{}: sled reads a corrupted page at offset {offset}", file.display())]
    Log { file: PathBuf, offset: u64 },
    #[error("{}: sled reads a corrupted value (referenced from offset {offset} of the log)", file.display())]
    Blob { file: PathBuf, offset: u64 },
    #[error(
        "{}: sled's replay of its log stopped short of what it had made stable; the first message \
         of its newest segment that does not check out is at offset {offset}",
        file.display()
    )]
    Replay { file: PathBuf, offset: u64 },
    #[error(
        "{}: sled finds corrupted data while recovering its log (it reports no offset, and its \
         newest log segment and its config and snapshot files check out here)",
        file.display()
    )]
    Unlocated { file: PathBuf },
    #[error("{}: the record of tree `{tree}`, key {key}, is damaged at its byte {offset}: {error}", file.display())]
    Record { file: PathBuf, tree: String, key: String, offset: usize, error: CodecError },
    /// A file of this store's own layout (the snapshot, `log-end`).
    #[error("{}: damaged at offset {offset}: {why}", file.display())]
    File { file: PathBuf, offset: u64, why: String },
    /// sled recovered less of the Raft log or the vote than it had synced (see `log_end`).
    #[error("{}: {why}", file.display())]
    LogLost { file: PathBuf, why: String },
}

/// What a clean [`scan`] read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scanned {
    pub trees: usize,
    pub records: u64,
    /// Bytes of their keys and values.
    pub bytes: u64,
}

/// The damage `e` reports, if it is sled's corruption error, located in the store at `dir`.
/// sled reports no offset for damage in its config file or its own snapshot file (checked here,
/// [`sled_files`], to name the file), nor for a message of its log that stopped its recovery
/// short (found by walking the log, `sled_log`).
pub fn damage_of(dir: &Path, e: &sled::Error) -> Option<Damage> {
    let sled::Error::Corruption { at, .. } = e else { return None };
    let file = dir.join(crate::durable::LOG_FILE);
    Some(match at {
        Some(sled::DiskPtr::Inline(offset)) => Damage::Log { file, offset: *offset },
        Some(sled::DiskPtr::Blob(offset, blob)) => {
            Damage::Blob { file: dir.join(crate::durable::BLOB_DIR).join(blob.to_string()), offset: *offset }
        }
        None => match sled_files(dir) {
            Err(d) => d,
            Ok(()) => match crate::sled_log::first_bad_message(dir) {
                Some(offset) => Damage::Replay { file, offset },
                None => Damage::Unlocated { file },
            },
        },
    })
}

/// sled's small files in `dir` checked against their CRC-32 (sled 0.34.7's layouts: the bytes,
/// then the checksum, little-endian, last): its config file `conf` (sled only warns when it
/// fails, and then parses what it holds) and the snapshot file its open reads (the last
/// `snap.*` by name, not `.in___motion`; before the checksum, 8 bytes of length).
pub fn sled_files(dir: &Path) -> Result<(), Damage> {
    let check = |file: PathBuf, trailer: usize| -> Result<(), Damage> {
        let Ok(buf) = std::fs::read(&file) else { return Ok(()) };
        // What sled takes for no file at all (it writes its config again).
        if buf.len() <= trailer.max(8) {
            return Ok(());
        }
        let end = buf.len() - trailer;
        let stored =
            u32::from_le_bytes([buf[buf.len() - 4], buf[buf.len() - 3], buf[buf.len() - 2], buf[buf.len() - 1]]);
        if crc32fast::hash(&buf[..end]) == stored {
            return Ok(());
        }
        let why = format!("sled's CRC-32 at offset {} does not match its bytes 0 to {end}", buf.len() - 4);
        Err(Damage::File { file, offset: 0, why })
    };
    check(dir.join("conf"), 4)?;
    let mut snaps: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                name.starts_with("snap.") && !name.ends_with(".in___motion")
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    snaps.sort();
    match snaps.pop() {
        Some(snap) => check(snap, 12),
        None => Ok(()),
    }
}

/// Why a scan stopped: damage, or sled failing otherwise (an I/O error).
#[derive(Debug)]
pub enum ScanError {
    Damaged(Damage),
    Sled(sled::Error),
}

/// Reads every record of every tree of `db` (the store at `dir`) and checks the codec trees'
/// checksums.
pub fn scan(db: &sled::Db, dir: &Path) -> Result<Scanned, ScanError> {
    scan_trees(db, dir, |_| true)
}

/// [`scan`] of the trees whose name `pick` accepts. The open reads the `sm` tree in loading
/// the state (every record, decoded with its checksum), so it scans the others only, and `sm`
/// only to locate damage when the load fails.
pub fn scan_trees(db: &sled::Db, dir: &Path, pick: impl Fn(&str) -> bool) -> Result<Scanned, ScanError> {
    let started = Instant::now();
    let fail = |e: sled::Error| match damage_of(dir, &e) {
        Some(d) => ScanError::Damaged(d),
        None => ScanError::Sled(e),
    };
    let mut scanned = Scanned::default();
    for name in db.tree_names() {
        let name = String::from_utf8_lossy(&name).into_owned();
        if !pick(&name) {
            continue;
        }
        let tree = db.open_tree(&name).map_err(fail)?;
        let checked = CODEC_TREES.contains(&name.as_str());
        for item in tree.iter() {
            let (k, v) = item.map_err(fail)?;
            if checked {
                if let Err(error) = codec::check(&v) {
                    return Err(ScanError::Damaged(Damage::Record {
                        file: dir.join(crate::durable::LOG_FILE),
                        tree: name,
                        key: printable(&k),
                        offset: error.offset(),
                        error,
                    }));
                }
            }
            scanned.records += 1;
            scanned.bytes += (k.len() + v.len()) as u64;
        }
        scanned.trees += 1;
    }
    tracing::info!(
        trees = scanned.trees,
        records = scanned.records,
        ms = started.elapsed().as_millis() as u64,
        "read the store back whole: no damage"
    );
    Ok(scanned)
}

/// Reads the current snapshot file of the store `db` (snapshot files in `snap_dir`) through its
/// checksums.
pub fn snapshot(db: &sled::Db, snap_dir: &Path) -> Result<(), Damage> {
    crate::state_machine::verify_current_snapshot(db, snap_dir)
}

/// A key as an operator can read it: text where it is text, hex bytes elsewhere.
fn printable(key: &[u8]) -> String {
    key.iter().map(|b| if b.is_ascii_graphic() { (*b as char).to_string() } else { format!("\\x{b:02x}") }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_print_as_text_or_hex() {
        assert_eq!(printable(b"t/a-1"), "t/a-1");
        assert_eq!(printable(&[0, 0, 1, 0xff]), "\\x00\\x00\\x01\\xff");
    }

    #[test]
    fn a_damaged_codec_record_is_named_by_tree_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        db.open_tree("log").unwrap().insert([0, 0, 0, 7], codec::encode(&7u64).unwrap()).unwrap();
        db.open_tree("sm").unwrap().insert(b"t/x", b"not a codec record".as_slice()).unwrap();
        assert_eq!(scan(&db, dir.path()).unwrap().records, 2);
        let mut bad = codec::encode(&7u64).unwrap();
        bad[5] ^= 1;
        db.open_tree("journal").unwrap().insert(b"j", bad).unwrap();
        let Err(ScanError::Damaged(d)) = scan(&db, dir.path()) else { panic!("not refused") };
        let text = d.to_string();
        assert!(text.contains("tree `journal`, key j") && text.contains("byte 1"), "{text}");
    }

    #[test]
    fn sled_corruption_is_located_in_its_file() {
        let dir = Path::new("/data/raft");
        let d = damage_of(dir, &sled::Error::Corruption { at: Some(sled::DiskPtr::Inline(4096)), bt: () }).unwrap();
        assert_eq!(d.to_string(), "/data/raft/db: sled reads a corrupted page at offset 4096");
        let d = damage_of(dir, &sled::Error::Corruption { at: None, bt: () }).unwrap();
        assert!(d.to_string().starts_with("/data/raft/db: sled finds corrupted data"), "{d}");
        assert!(damage_of(dir, &sled::Error::Io(std::io::Error::other("x"))).is_none());
    }

    /// sled's config and snapshot files are checked against their CRCs: a flipped byte is
    /// named by file, where sled itself reports no offset (or, for its config, only warns).
    #[test]
    fn sled_config_and_snapshot_damage_is_named_by_file() {
        let dir = tempfile::tempdir().unwrap();
        let snaps = || {
            std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("snap."))
                .max()
        };
        // sled writes its snapshot file when an open recovers a log written since the last.
        for round in 0..2u32 {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let db = loop {
                match sled::open(dir.path()) {
                    Err(e)
                        if e.to_string().contains("could not acquire lock") && std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(20))
                    }
                    other => break other.unwrap(),
                }
            };
            for i in 0..1_000u32 {
                db.insert((round * 1_000 + i).to_be_bytes(), b"v".as_slice()).unwrap();
            }
            db.flush().unwrap();
        }
        sled_files(dir.path()).unwrap();
        let snap = snaps().expect("sled wrote no snapshot file at its second open");
        let both = |path: &Path| {
            crate::failpoint::flip_bytes(path, 3, 1).unwrap();
            let d = sled_files(dir.path()).unwrap_err();
            assert!(matches!(&d, Damage::File { file, .. } if file == path), "{d}");
            let located = damage_of(dir.path(), &sled::Error::Corruption { at: None, bt: () }).unwrap();
            assert_eq!(located.to_string(), d.to_string());
            crate::failpoint::flip_bytes(path, 3, 1).unwrap();
        };
        both(&snap);
        both(&dir.path().join("conf"));
        sled_files(dir.path()).unwrap();
    }
}
