//! Admission of snapshot chunks before openraft sees them.
//!
//! openraft 0.9 writes each chunk at its `offset` into the receiving file: a chunk claiming
//! offset 2^40 would make it a terabyte long, and a sender that never stops would fill the disk.
//! A sender (it needs the cluster secret, but may be broken) therefore gets its chunks
//! admitted only in order: offset 0 starts a snapshot, and after that only the next offset (or
//! the previous chunk's, a retry) of the same snapshot is accepted, up to
//! [`MAX_SNAPSHOT_BYTES`] in total. Anything else is a 400 and the node lives.
use std::sync::Mutex;

/// Largest snapshot a node accepts. Snapshot files have no limit of their own; the replicated
/// state is bounded below this ([`leaf_raft_store::MAX_TAGS`] tags of at most 1,255 bytes
/// each in a snapshot file, and 256 MiB for the rest, far more than tokens, workers and the
/// audit trail take), so a larger one is a broken sender's and is refused.
pub const MAX_SNAPSHOT_BYTES: u64 = leaf_raft_store::MAX_TAGS as u64 * 1_255 + 256 * 1024 * 1024;

/// The snapshot being received: its ID, the offset of the last accepted chunk and the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Receiving {
    snapshot_id: String,
    last_offset: u64,
    next_offset: u64,
}

/// Decides which chunks may reach openraft.
#[derive(Debug, Default)]
pub(crate) struct ChunkGate {
    receiving: Mutex<Option<Receiving>>,
}

impl ChunkGate {
    /// Whether a chunk of `len` bytes at `offset` of `snapshot_id` may be handed to openraft.
    pub(crate) fn admit(&self, snapshot_id: &str, offset: u64, len: usize) -> Result<(), String> {
        if offset.checked_add(len as u64).is_none_or(|end| end > MAX_SNAPSHOT_BYTES) {
            return Err(format!(
                "snapshot chunk at offset {offset} of {len} bytes passes the {MAX_SNAPSHOT_BYTES}-byte limit"
            ));
        }
        if offset == 0 {
            return Ok(());
        }
        let r = self.receiving.lock().unwrap_or_else(|e| e.into_inner());
        match r.as_ref() {
            Some(r) if r.snapshot_id == snapshot_id && (offset == r.next_offset || offset == r.last_offset) => Ok(()),
            Some(r) if r.snapshot_id == snapshot_id => Err(format!(
                "snapshot {snapshot_id}: chunk at offset {offset}, expected {} (or a retry of {})",
                r.next_offset, r.last_offset
            )),
            _ => Err(format!("snapshot {snapshot_id}: chunk at offset {offset} without its start")),
        }
    }

    /// Records a chunk openraft accepted; `done` ends the snapshot.
    pub(crate) fn accepted(&self, snapshot_id: &str, offset: u64, len: usize, done: bool) {
        let mut r = self.receiving.lock().unwrap_or_else(|e| e.into_inner());
        *r = (!done).then(|| Receiving {
            snapshot_id: snapshot_id.to_string(),
            last_offset: offset,
            next_offset: offset.saturating_add(len as u64),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_next_chunk_or_a_retry_is_admitted() {
        let g = ChunkGate::default();
        // Nothing started: only offset 0.
        assert!(g.admit("s1", 1 << 40, 10).is_err());
        assert!(g.admit("s1", 5, 10).is_err());
        assert!(g.admit("s1", 0, 10).is_ok());
        g.accepted("s1", 0, 10, false);
        assert!(g.admit("s1", 10, 10).is_ok());
        assert!(g.admit("s1", 0, 10).is_ok(), "a restart from 0");
        assert!(g.admit("s1", 20, 10).is_err(), "a hole");
        assert!(g.admit("s1", 1 << 40, 10).is_err());
        assert!(g.admit("s2", 10, 10).is_err(), "another snapshot's middle");
        g.accepted("s1", 10, 10, false);
        assert!(g.admit("s1", 10, 10).is_ok(), "a retry of the last chunk");
        assert!(g.admit("s1", 20, 5).is_ok());
        g.accepted("s1", 20, 5, true);
        assert!(g.admit("s1", 25, 5).is_err(), "after the last chunk");
        // The size cap, and offsets that overflow.
        assert!(g.admit("s3", 0, (MAX_SNAPSHOT_BYTES + 1) as usize).is_err());
        assert!(g.admit("s3", u64::MAX, 1).is_err());
    }
}
