//! Writing many keys of the `sm` tree as one atomic step without one huge sled batch.
//!
//! sled 0.34 keeps every copy of a tree node that a batch makes until the batch ends, and a
//! node is copied on each insert: a batch of 5,000 new tags left hundreds of megabytes
//! resident, and creating a million tags in batches of 5,000 took a node to 9.4 GB (measured:
//! 100,000 keys written in batches of 5,000 leave 290 MB resident, in batches of 500 45 MB,
//! one by one 28 MB). So a checkpoint of more than [`ATOMIC_KEYS`] keys is staged:
//!
//! 1. its writes, `m/applied` last, go to tree `sm_pending` as chunks: `c<n, 4 bytes BE>` →
//!    the codec's encoding of up to [`STAGE_CHUNK_BYTES`] of them ([`Op`]s), one insert each,
//!    after whatever an interrupted staging left there was removed;
//! 2. the key `!done` makes the staged checkpoint whole, in one insert;
//! 3. the writes are copied to `sm` in batches of [`CHUNK_KEYS`], `m/applied` in the last;
//! 4. `!done` is removed, then the chunks.
//!
//! A crash before 2 leaves `sm` as it was and the staging incomplete: [`recover`] drops it.
//! A crash after 2 leaves a complete staging: [`recover`] copies it again (writing a value
//! twice is harmless) before the state is loaded. Either way the tree that is loaded is the
//! one before or the one after the checkpoint, never a mix with `m/applied` behind its keys.
//!
//! Earlier builds (up to 771930f) staged one key per write (`k<key>` → `1<value>`, or `0` for
//! a removal): three sled writes per key instead of one, most of a node's CPU while it
//! created a million tags. [`recover`] still finishes a staging of theirs.
use crate::{Batch, Tree};
use leaf_api::codec;

use crate::failpoint::failpoint;

/// Most keys a checkpoint writes in a single sled batch.
pub(super) const ATOMIC_KEYS: usize = 256;

/// Keys per sled batch when more are written.
pub(super) const CHUNK_KEYS: usize = 256;

/// Bytes of keys and values per staged chunk (one more write may cross it): well under the
/// size past which sled writes an update as a file of its own (about a quarter of its 512 KiB
/// segments, `MINIMUM_ITEMS_PER_SEGMENT` = 4 in sled 0.34.7).
const STAGE_CHUNK_BYTES: usize = 16 * 1024;

const KEY_DONE: &[u8] = b"!done";
const CHUNK_PREFIX: u8 = b'c';
const LEGACY_PREFIX: u8 = b'k';
const WRITE: u8 = 1;

/// A write of the `sm` tree: a value, or `None` to remove the key.
pub(super) type Op = (Vec<u8>, Option<Vec<u8>>);

/// Writes `ops` to `sm` and then `last` (the key that says how far the tree is), as one step:
/// in one batch when they are few, staged through `pending` otherwise.
pub(super) fn write(sm: &Tree, pending: &Tree, mut ops: Vec<Op>, last: Op) -> sled::Result<()> {
    if ops.len() < ATOMIC_KEYS {
        let mut batch = Batch::default();
        for (k, v) in ops.into_iter().chain([last]) {
            put(&mut batch, k, v);
        }
        return sm.apply_batch(batch);
    }
    clear(pending)?;
    ops.push(last);
    let (mut chunk, mut bytes, mut n) = (0, 0, 0u32);
    for (i, (k, v)) in ops.iter().enumerate() {
        bytes += k.len() + v.as_ref().map_or(0, Vec::len);
        if bytes >= STAGE_CHUNK_BYTES || i + 1 == ops.len() {
            pending.insert(chunk_key(n), encode(&ops[chunk..=i])?)?;
            (chunk, bytes, n) = (i + 1, 0, n + 1);
        }
    }
    pending.insert(KEY_DONE, &[])?;
    failpoint!("sm-checkpoint-staged");
    copy_ops(sm, ops)?;
    failpoint!("sm-checkpoint-copied");
    pending.remove(KEY_DONE)?;
    clear(pending)
}

/// At open: finishes a staged write that was whole, or drops one that was not. `last` is the
/// key a staging of an earlier release wrote last.
pub(super) fn recover(sm: &Tree, pending: &Tree, last: &[u8]) -> sled::Result<()> {
    if pending.contains_key(KEY_DONE)? {
        tracing::warn!("finishing a checkpoint a crash interrupted");
        let mut ops = Vec::new();
        for item in pending.scan_prefix([CHUNK_PREFIX]) {
            ops.extend(decode(&item?.1)?);
        }
        // An earlier release's staging: one key per write, `last` among them.
        let mut final_op = None;
        for item in pending.scan_prefix([LEGACY_PREFIX]) {
            let (k, v) = item?;
            let op = (k[1..].to_vec(), unstage(&v));
            if op.0 == last {
                final_op = Some(op);
            } else {
                ops.push(op);
            }
        }
        ops.extend(final_op);
        copy_ops(sm, ops)?;
        pending.remove(KEY_DONE)?;
    }
    clear(pending)
}

/// Writes `ops` to `sm` in order, in batches of [`CHUNK_KEYS`]: the last op lands in the last
/// batch.
fn copy_ops(sm: &Tree, ops: Vec<Op>) -> sled::Result<()> {
    let mut batch = Batch::default();
    for (i, (k, v)) in ops.into_iter().enumerate() {
        put(&mut batch, k, v);
        if (i + 1) % CHUNK_KEYS == 0 {
            sm.apply_batch(std::mem::take(&mut batch))?;
        }
    }
    sm.apply_batch(batch)
}

/// Removes every key of `tree`, in batches.
fn clear(tree: &Tree) -> sled::Result<()> {
    loop {
        let mut batch = Batch::default();
        let mut n = 0;
        for k in tree.iter().keys().take(CHUNK_KEYS) {
            batch.remove(k?);
            n += 1;
        }
        if n == 0 {
            return Ok(());
        }
        tree.apply_batch(batch)?;
    }
}

fn put(batch: &mut Batch, k: Vec<u8>, v: Option<Vec<u8>>) {
    match v {
        Some(v) => batch.insert(k, v),
        None => batch.remove(k),
    }
}

fn chunk_key(n: u32) -> [u8; 5] {
    let mut k = [CHUNK_PREFIX; 5];
    k[1..].copy_from_slice(&n.to_be_bytes());
    k
}

fn encode(ops: &[Op]) -> sled::Result<Vec<u8>> {
    codec::encode(ops).map_err(|e| sled::Error::Io(std::io::Error::other(e)))
}

fn decode(v: &[u8]) -> sled::Result<Vec<Op>> {
    codec::decode(v).map_err(|e| sled::Error::Io(std::io::Error::other(format!("a staged checkpoint chunk: {e}"))))
}

/// A write as an earlier release staged it.
fn unstage(v: &[u8]) -> Option<Vec<u8>> {
    match v.split_first() {
        Some((&WRITE, rest)) => Some(rest.to_vec()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trees() -> (tempfile::TempDir, crate::Disk, Tree, Tree) {
        let (dir, db) = crate::testing::disk();
        let (sm, pending) = (db.tree("sm").unwrap(), db.tree("p").unwrap());
        (dir, db, sm, pending)
    }

    fn ops(n: usize, v: &str) -> Vec<Op> {
        (0..n).map(|i| (format!("t/{i:05}").into_bytes(), Some(v.as_bytes().to_vec()))).collect()
    }

    fn last(v: &str) -> Op {
        (b"m/applied".to_vec(), Some(v.as_bytes().to_vec()))
    }

    /// Stages `ops` and `last` as [`write`] does, up to `!done`, without copying them.
    fn stage(pending: &Tree, mut ops: Vec<Op>, last: Op) {
        ops.push(last);
        for (n, chunk) in ops.chunks(7).enumerate() {
            pending.insert(chunk_key(n as u32), encode(chunk).unwrap()).unwrap();
        }
        pending.insert(KEY_DONE, &[]).unwrap();
    }

    #[test]
    fn few_and_many_writes_land_whole_and_leave_no_staging() {
        let (_d, _db, sm, pending) = trees();
        write(&sm, &pending, ops(3, "a"), last("1")).unwrap();
        assert_eq!(sm.len(), 4);
        // Values big enough for several chunks.
        let big = "b".repeat(100);
        let mut many = ops(1000, &big);
        many[1].1 = None;
        write(&sm, &pending, many, last("2")).unwrap();
        assert_eq!(sm.len(), 1000, "999 tags written, one removed, and m/applied");
        assert_eq!(sm.get(b"t/00999").unwrap().as_deref(), Some(big.as_bytes()));
        assert_eq!(sm.get(b"m/applied").unwrap().as_deref(), Some(b"2".as_slice()));
        assert!(pending.is_empty());
    }

    /// A staging interrupted before it was whole is dropped; a whole one is finished, from
    /// any point of its copy.
    #[test]
    fn recovery_finishes_a_whole_staging_and_drops_a_partial_one() {
        let (_d, _db, sm, pending) = trees();
        write(&sm, &pending, ops(3, "a"), last("1")).unwrap();
        let before: Vec<_> = sm.iter().map(|r| r.unwrap()).collect();
        // Partial: a chunk staged, no `!done`.
        pending.insert(chunk_key(0), encode(&ops(600, "x")).unwrap()).unwrap();
        recover(&sm, &pending, b"m/applied").unwrap();
        assert_eq!(sm.iter().map(|r| r.unwrap()).collect::<Vec<_>>(), before);
        assert!(pending.is_empty());
        // Whole, and half copied already (m/applied still old).
        let mut whole = ops(600, "c");
        whole[5].1 = None;
        stage(&pending, whole, last("2"));
        for (k, v) in ops(300, "c") {
            sm.insert(k, v.unwrap()).unwrap();
        }
        recover(&sm, &pending, b"m/applied").unwrap();
        assert_eq!(sm.len(), 600, "599 tags and m/applied");
        assert_eq!(sm.get(b"t/00005").unwrap(), None);
        assert_eq!(sm.get(b"t/00599").unwrap().as_deref(), Some(b"c".as_slice()));
        assert_eq!(sm.get(b"m/applied").unwrap().as_deref(), Some(b"2".as_slice()));
        assert!(pending.is_empty());
    }

    /// A whole staging an earlier build left (one key per write) is finished too, `last` in
    /// the final batch.
    #[test]
    fn recovery_finishes_an_earlier_builds_staging() {
        let (_d, _db, sm, pending) = trees();
        let legacy = |k: &[u8], v: Option<&[u8]>| {
            let key = [&[LEGACY_PREFIX], k].concat();
            let value = v.map_or(vec![0], |v| [&[WRITE], v].concat());
            pending.insert(key, value).unwrap();
        };
        sm.insert(b"t/00001", b"old".as_slice()).unwrap();
        for (k, v) in ops(600, "d").iter().chain([&last("3")]) {
            legacy(k, v.as_deref());
        }
        legacy(b"t/00001", None);
        pending.insert(KEY_DONE, &[]).unwrap();
        recover(&sm, &pending, b"m/applied").unwrap();
        assert_eq!(sm.len(), 600);
        assert_eq!(sm.get(b"t/00001").unwrap(), None);
        assert_eq!(sm.get(b"t/00042").unwrap().as_deref(), Some(b"d".as_slice()));
        assert_eq!(sm.get(b"m/applied").unwrap().as_deref(), Some(b"3".as_slice()));
        assert!(pending.is_empty());
    }
}
