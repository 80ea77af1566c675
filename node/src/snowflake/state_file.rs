//! The local state file, `<data_dir>/snowflake.state`: the worker ID, its time high-water mark
//! and its lease end, written atomically and durably (temporary file, fsync, rename, fsync of
//! the directory) before any ID uses the mark. The encoding carries a checksum, so a damaged
//! file is an error, never a mark silently read as another number.
use std::path::Path;

use leaf_api::codec;
use serde::{Deserialize, Serialize};

/// Name of the state file in the data dir.
pub const STATE_FILE: &str = "snowflake.state";

/// What the state file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    pub node_id: u64,
    pub worker_id: u16,
    /// No ID of this worker was issued above this Unix millisecond.
    pub high_water_ms: i64,
    /// Leader time at which the worker lease ends unless renewed.
    pub lease_expires_ms: i64,
}

impl StateFile {
    /// Reads the state file; `Ok(None)` when there is none (a new node).
    pub fn load(path: &Path) -> Result<Option<StateFile>, String> {
        match std::fs::read(path) {
            Ok(bytes) => codec::decode(&bytes).map(Some).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Reads the state file of node `node_id`: `Err` is why snowflake must stay off (a file
    /// that cannot be read, or one of another node), since without its mark this node could
    /// repeat IDs.
    pub fn load_for(path: &Path, node_id: u64) -> Result<Option<StateFile>, String> {
        match StateFile::load(path) {
            Ok(Some(f)) if f.node_id != node_id => Err(format!(
                "{} belongs to node {}, not to this node {node_id}; refusing to guess its time high-water mark",
                path.display(),
                f.node_id,
            )),
            Ok(f) => Ok(f),
            Err(e) => Err(format!(
                "the snowflake state file is unreadable ({e}); without its time high-water mark this node could \
                 repeat IDs. Restore it or, once the clock is surely past every ID this node issued, delete it"
            )),
        }
    }

    /// At start, before anything else opens: a state file that exists but does not read back
    /// whole is damage the node must not start on (without its mark it could repeat IDs).
    /// `Err` names the file and the offset. A missing file is a new node; a file of another
    /// node is the snowflake service's to refuse (it stays off with the reason).
    pub fn check_at_start(path: &Path) -> Result<(), String> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        codec::decode::<StateFile>(&bytes)
            .map(|_| ())
            .map_err(|e| format!("{}: damaged at offset {}: {e}", path.display(), e.offset()))
    }

    /// Writes the state file atomically and durably: a temporary file, fsync, rename, fsync
    /// of the directory.
    pub fn store(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let bytes = codec::encode(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        #[cfg(feature = "failpoints")]
        leaf_raft_store::failpoint::hit("snowflake-state-synced");
        std::fs::rename(&tmp, path)?;
        #[cfg(feature = "failpoints")]
        leaf_raft_store::failpoint::hit("snowflake-state-renamed");
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_file_round_trips_and_detects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        assert_eq!(StateFile::load(&path), Ok(None));
        let f = StateFile { node_id: 3, worker_id: 9, high_water_ms: 1_700_000_000_000, lease_expires_ms: 5 };
        f.store(&path).unwrap();
        assert_eq!(StateFile::load(&path), Ok(Some(f)));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        assert!(StateFile::load(&path).is_err());
    }

    #[test]
    fn a_damaged_file_stops_the_start_with_its_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        assert_eq!(StateFile::check_at_start(&path), Ok(()));
        let f = StateFile { node_id: 3, worker_id: 9, high_water_ms: 1_700_000_000_000, lease_expires_ms: 5 };
        f.store(&path).unwrap();
        assert_eq!(StateFile::check_at_start(&path), Ok(()));
        let good = std::fs::read(&path).unwrap();
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x21;
            std::fs::write(&path, bad).unwrap();
            let e = StateFile::check_at_start(&path).unwrap_err();
            let at = if i == 0 { 0 } else { 1 };
            assert!(e.starts_with(&format!("{}: damaged at offset {at}: ", path.display())), "byte {i}: {e}");
        }
    }

    #[test]
    fn another_nodes_or_a_damaged_file_is_refused_a_missing_one_is_a_new_node() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        assert_eq!(StateFile::load_for(&path, 3), Ok(None));
        let f = StateFile { node_id: 3, worker_id: 9, high_water_ms: 1_700_000_000_000, lease_expires_ms: 5 };
        f.store(&path).unwrap();
        assert_eq!(StateFile::load_for(&path, 3), Ok(Some(f)));
        let e = StateFile::load_for(&path, 4).unwrap_err();
        assert!(e.contains("belongs to node 3, not to this node 4"), "{e}");
        std::fs::write(&path, b"garbage").unwrap();
        let e = StateFile::load_for(&path, 3).unwrap_err();
        assert!(e.contains("state file is unreadable"), "{e}");
    }
}
