//! Writing many keys of the `sm` tree as one atomic step without one huge sled batch.
//!
//! sled 0.34 keeps every copy of a tree node that a batch makes until the batch ends, and a
//! node is copied on each insert: a batch of 5,000 new tags left hundreds of megabytes
//! resident, and creating a million tags in batches of 5,000 took a node to 9.4 GB (measured:
//! 100,000 keys written in batches of 5,000 leave 290 MB resident, in batches of 500 45 MB,
//! one by one 28 MB). So a checkpoint of more than [`ATOMIC_KEYS`] keys is staged:
//!
//! 1. its writes go to tree `sm_pending` in batches of [`CHUNK_KEYS`] (`k<key>` → `1<value>`
//!    for a write, `0` for a removal), after whatever an interrupted staging left there;
//! 2. the key `!done` makes the staged checkpoint whole, in one insert;
//! 3. the writes are copied to `sm` in batches of [`CHUNK_KEYS`], `m/applied` last;
//! 4. `!done` is removed, then the staged writes.
//!
//! A crash before 2 leaves `sm` as it was and the staging incomplete: [`recover`] drops it.
//! A crash after 2 leaves a complete staging: [`recover`] copies it again (writing a value
//! twice is harmless) before the state is loaded. Either way the tree that is loaded is the
//! one before or the one after the checkpoint, never a mix with `m/applied` behind its keys.
use sled::{Batch, Tree};

/// Most keys a checkpoint writes in a single sled batch.
pub(super) const ATOMIC_KEYS: usize = 256;

/// Keys per sled batch when more are written.
pub(super) const CHUNK_KEYS: usize = 256;

const KEY_DONE: &[u8] = b"!done";
const WRITE: u8 = 1;
const REMOVE: u8 = 0;

/// A write of the `sm` tree: a value, or `None` to remove the key.
pub(super) type Op = (Vec<u8>, Option<Vec<u8>>);

/// Writes `ops` to `sm` and then `last` (the key that says how far the tree is), as one step:
/// in one batch when they are few, staged through `pending` otherwise.
pub(super) fn write(sm: &Tree, pending: &Tree, ops: Vec<Op>, last: Op) -> sled::Result<()> {
    if ops.len() < ATOMIC_KEYS {
        let mut batch = Batch::default();
        for (k, v) in ops.into_iter().chain([last]) {
            put(&mut batch, k, v);
        }
        return sm.apply_batch(batch);
    }
    clear(pending)?;
    for chunk in ops.chunks(CHUNK_KEYS) {
        let mut batch = Batch::default();
        for (k, v) in chunk {
            batch.insert(staged_key(k), staged_value(v.as_deref()));
        }
        pending.apply_batch(batch)?;
    }
    pending.insert(staged_key(&last.0), staged_value(last.1.as_deref()))?;
    pending.insert(KEY_DONE, &[])?;
    copy(sm, pending, &last.0)
}

/// At open: finishes a staged write that was whole, or drops one that was not.
pub(super) fn recover(sm: &Tree, pending: &Tree, last: &[u8]) -> sled::Result<()> {
    if pending.contains_key(KEY_DONE)? {
        tracing::warn!("finishing a checkpoint a crash interrupted");
        copy(sm, pending, last)
    } else {
        clear(pending)
    }
}

/// Copies the complete staging in `pending` to `sm`, the key `last` in the final batch, then
/// clears the staging.
fn copy(sm: &Tree, pending: &Tree, last: &[u8]) -> sled::Result<()> {
    let mut batch = Batch::default();
    let mut n = 0;
    let mut final_op = None;
    for item in pending.scan_prefix(b"k") {
        let (k, v) = item?;
        let (key, value) = (k[1..].to_vec(), unstage(&v));
        if key == last {
            final_op = Some((key, value));
            continue;
        }
        put(&mut batch, key, value);
        n += 1;
        if n == CHUNK_KEYS {
            sm.apply_batch(std::mem::take(&mut batch))?;
            n = 0;
        }
    }
    if let Some((k, v)) = final_op {
        put(&mut batch, k, v);
    }
    sm.apply_batch(batch)?;
    pending.remove(KEY_DONE)?;
    clear(pending)
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

fn staged_key(k: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(k.len() + 1);
    s.push(b'k');
    s.extend_from_slice(k);
    s
}

fn staged_value(v: Option<&[u8]>) -> Vec<u8> {
    match v {
        Some(v) => {
            let mut s = Vec::with_capacity(v.len() + 1);
            s.push(WRITE);
            s.extend_from_slice(v);
            s
        }
        None => vec![REMOVE],
    }
}

fn unstage(v: &[u8]) -> Option<Vec<u8>> {
    match v.split_first() {
        Some((&WRITE, rest)) => Some(rest.to_vec()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trees() -> (tempfile::TempDir, sled::Db, Tree, Tree) {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::Config::new().path(dir.path()).open().unwrap();
        let (sm, pending) = (db.open_tree("sm").unwrap(), db.open_tree("p").unwrap());
        (dir, db, sm, pending)
    }

    fn ops(n: usize, v: &str) -> Vec<Op> {
        (0..n).map(|i| (format!("t/{i:05}").into_bytes(), Some(v.as_bytes().to_vec()))).collect()
    }

    fn last(v: &str) -> Op {
        (b"m/applied".to_vec(), Some(v.as_bytes().to_vec()))
    }

    #[test]
    fn few_and_many_writes_land_whole_and_leave_no_staging() {
        let (_d, _db, sm, pending) = trees();
        write(&sm, &pending, ops(3, "a"), last("1")).unwrap();
        assert_eq!(sm.len(), 4);
        let mut many = ops(1000, "b");
        many[1].1 = None;
        write(&sm, &pending, many, last("2")).unwrap();
        assert_eq!(sm.len(), 1000, "999 tags written, one removed, and m/applied");
        assert_eq!(sm.get(b"t/00999").unwrap().as_deref(), Some(b"b".as_slice()));
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
        // Partial: some writes staged, no `!done`.
        pending.insert(staged_key(b"t/00007"), staged_value(Some(b"x"))).unwrap();
        recover(&sm, &pending, b"m/applied").unwrap();
        assert_eq!(sm.iter().map(|r| r.unwrap()).collect::<Vec<_>>(), before);
        assert!(pending.is_empty());
        // Whole, and half copied already (m/applied still old).
        for (k, v) in ops(600, "c").iter().chain([&last("2")]) {
            pending.insert(staged_key(k), staged_value(v.as_deref())).unwrap();
        }
        pending.insert(KEY_DONE, &[]).unwrap();
        for (k, v) in ops(300, "c") {
            sm.insert(k, v.unwrap()).unwrap();
        }
        recover(&sm, &pending, b"m/applied").unwrap();
        assert_eq!(sm.len(), 601);
        assert_eq!(sm.get(b"t/00599").unwrap().as_deref(), Some(b"c".as_slice()));
        assert_eq!(sm.get(b"m/applied").unwrap().as_deref(), Some(b"2".as_slice()));
        assert!(pending.is_empty());
    }
}
