//! The stores' handle on sled's database, which a rewrite (`compact`) swaps while they run.
//!
//! sled 0.34.7 never gives back the space of its files; `compact` copies every tree into a new
//! database and makes it current. The stores never hold a sled tree: they hold [`Tree`]s, whose
//! every call looks the tree up in the database current at that moment, under a read lock. The
//! swap takes that lock for writing, so no write lands in the old database after the copy
//! read it:
//! - while the copy runs, the database stays current and every write through a [`Tree`] (and a
//!   [`Batch`]) notes its tree and keys ([`Disk::track`]);
//! - the copy then re-reads the keys noted meanwhile, a round at a time, until few are left;
//! - the last round runs under the write lock, with the switch (`current` renamed, the store's
//!   directory synced): writers wait for this round only, not for the copy.
//!
//! Every read looks the tree up again too, an [`Iter`] at each step (one made before a swap goes
//! on in the new database after the last key it returned), and [`Disk::sync`] holds the read
//! lock while it syncs: nothing reads or syncs the old files once the swap removes them.
use std::collections::BTreeSet;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use sled::IVec;

use crate::durable::Synced;

/// The database current for the stores, and their trees in it.
pub(crate) struct Current {
    /// The stores' trees, in the order of [`Tree::index`]; every database made current opens
    /// them all (see [`Disk::switch`]). Before `files`, so dropped first: the database's last
    /// handle is then `files`, whose drop keeps sled's batches away (`sled_lock`).
    trees: Vec<(&'static str, sled::Tree)>,
    pub(crate) files: Synced,
    /// Raised at each swap: an [`Iter`] made before it seeks again.
    epoch: u64,
}

/// The keys written while a rewrite copies, by tree name.
pub(crate) type Touched = BTreeSet<(&'static str, IVec)>;

/// The most keys noted between two takes: past it, noting stops and the take reports an
/// overflow, and the rewrite gives up (writes come faster than it copies), so the notes never
/// hold more than this in memory.
pub const MAX_NOTED: usize = 1 << 20;

/// What is noted while a copy runs: the keys, or `None` once they passed [`MAX_NOTED`].
type Notes = Option<Touched>;

struct Shared {
    /// The store's directory: sled's files are in it, or in the `sled-<n>` that `current` names.
    store_dir: PathBuf,
    current: RwLock<Current>,
    /// Some while a rewrite copies: the keys written since the last take.
    touched: Mutex<Option<Notes>>,
    /// Held by the one rewrite that may run at a time.
    rewriting: Mutex<()>,
    /// When sled's files are rewritten (see `compact::due`).
    bounds: crate::compact::Bounds,
    /// sled's page cache, for a new database too.
    cache_bytes: u64,
}

/// The store's sled database, which a rewrite may swap (see the module's doc). Cheap to clone.
#[derive(Clone)]
pub struct Disk {
    inner: Arc<Shared>,
}

impl Disk {
    /// The handle on `files`, sled's database in the store `store_dir`.
    pub(crate) fn new(files: Synced, store_dir: &Path, opts: &crate::StoreOptions) -> Disk {
        Disk {
            inner: Arc::new(Shared {
                store_dir: store_dir.to_owned(),
                current: RwLock::new(Current { files, trees: Vec::new(), epoch: 0 }),
                touched: Mutex::new(None),
                rewriting: Mutex::new(()),
                bounds: crate::compact::Bounds { above: opts.compact_above, min: opts.compact_min },
                cache_bytes: opts.cache_bytes,
            }),
        }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Current> {
        self.inner.current.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Current> {
        self.inner.current.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The tree `name`, opened (created if new) in the current database.
    pub fn tree(&self, name: &'static str) -> sled::Result<Tree> {
        let mut cur = self.write();
        let index = match cur.trees.iter().position(|(n, _)| *n == name) {
            Some(i) => i,
            None => {
                let tree = cur.files.open_tree(name)?;
                cur.trees.push((name, tree));
                cur.trees.len() - 1
            }
        };
        Ok(Tree { disk: self.clone(), name, index })
    }

    /// The current database, for reading at open (no rewrite runs then); derefs to
    /// `sled::Db`.
    pub fn db(&self) -> Synced {
        self.read().files.clone()
    }

    /// The directory of the current database's files.
    pub fn dir(&self) -> PathBuf {
        self.read().files.dir().to_owned()
    }

    /// The store's directory.
    pub fn store_dir(&self) -> &Path {
        &self.inner.store_dir
    }

    pub(crate) fn bounds(&self) -> crate::compact::Bounds {
        self.inner.bounds
    }

    /// sled's configuration for a new database in `path`.
    pub(crate) fn config(&self, path: &Path) -> sled::Config {
        sled::Config::new().path(path).cache_capacity(self.inner.cache_bytes)
    }

    pub(crate) fn rewriting(&self) -> std::sync::TryLockResult<std::sync::MutexGuard<'_, ()>> {
        self.inner.rewriting.try_lock()
    }

    /// sled's next unique ID in the current database.
    pub fn generate_id(&self) -> sled::Result<u64> {
        self.read().files.generate_id()
    }

    /// Makes everything written so far durable ([`Synced::sync_now`]), on tokio's blocking pool.
    ///
    /// Not `flush_async`: that hands the flush to sled's own thread pool, whose every task wakes
    /// all of its idle threads (seven); on a segment refill that was a quarter of the context
    /// switches. The blocking pool wakes one thread.
    pub async fn sync(&self) -> sled::Result<()> {
        let disk = self.clone();
        match tokio::task::spawn_blocking(move || disk.sync_now()).await {
            Ok(r) => r,
            Err(e) => Err(sled::Error::Io(std::io::Error::other(format!("sync task failed: {e}")))),
        }
    }

    /// [`Disk::sync`] on the calling thread.
    pub fn sync_now(&self) -> sled::Result<()> {
        self.read().files.sync_now()
    }

    /// Starts noting the keys every write changes (a rewrite's copy begins). Under the write
    /// lock, so no write that began before is left unnoted and unread by the copy.
    pub(crate) fn track(&self) {
        let _cur = self.write();
        *self.lock_touched() = Some(Some(Touched::new()));
    }

    /// The keys noted since [`track`](Self::track) or the last take (`None`: more than
    /// [`MAX_NOTED`]); noting goes on.
    pub(crate) fn take_touched(&self) -> Notes {
        match self.lock_touched().as_mut() {
            Some(notes) => notes.replace(Touched::new()),
            None => Some(Touched::new()),
        }
    }

    /// Stops noting (a rewrite gave up).
    pub(crate) fn untrack(&self) {
        *self.lock_touched() = None;
    }

    fn lock_touched(&self) -> std::sync::MutexGuard<'_, Option<Notes>> {
        self.inner.touched.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes keys written in `tree`, while a copy runs.
    fn note<'k>(&self, tree: &'static str, keys: impl IntoIterator<Item = &'k [u8]>) {
        let mut touched = self.lock_touched();
        let Some(notes) = touched.as_mut() else { return };
        if let Some(t) = notes.as_mut() {
            t.extend(keys.into_iter().map(|k| (tree, IVec::from(k))));
            if t.len() > MAX_NOTED {
                *notes = None;
            }
        }
    }

    /// The last round of a rewrite: with every write held off, `finish` gets the current
    /// database, the new one and the keys written since the last take (to copy them, sync, and
    /// name the new one in `current`). If it succeeds, or fails after it renamed `current`
    /// (`Err((e, true))`), `new` becomes current with every tree of the stores. Noting stops
    /// either way.
    pub(crate) fn switch<E: From<sled::Error>>(
        &self,
        new: Synced,
        finish: impl FnOnce(&Synced, &Synced, Notes) -> Result<(), (E, bool)>,
    ) -> Result<(), E> {
        let mut cur = self.write();
        let touched = self.lock_touched().take().unwrap_or(Some(Touched::new()));
        let opened: sled::Result<Vec<_>> =
            cur.trees.iter().map(|(name, _)| new.open_tree(name).map(|t| (*name, t))).collect();
        // On an error nothing is renamed yet: the old database stays current.
        let trees = opened?;
        let (result, renamed) = match finish(&cur.files, &new, touched) {
            Ok(()) => (Ok(()), true),
            Err((e, renamed)) => (Err(e), renamed),
        };
        if renamed {
            let epoch = cur.epoch + 1;
            *cur = Current { files: new, trees, epoch };
        }
        result
    }
}

/// A tree of the stores: each call goes to the tree in the database current at that moment.
/// Cheap to clone.
#[derive(Clone)]
pub struct Tree {
    disk: Disk,
    name: &'static str,
    /// Its place in [`Current::trees`], which only grows and which every database made current
    /// holds whole: always in bounds.
    index: usize,
}

impl Tree {
    /// Runs `f` on the tree in the current database, under the read lock.
    fn with<T>(&self, f: impl FnOnce(&sled::Tree) -> T) -> T {
        let cur = self.disk.read();
        f(&cur.trees[self.index].1)
    }

    /// Runs the write `f` under the read lock, then notes `keys` (after the write: a copy
    /// round that takes the notes before this reads the key after it).
    fn write<'k, T>(&self, keys: impl IntoIterator<Item = &'k [u8]>, f: impl FnOnce(&sled::Tree) -> T) -> T {
        let cur = self.disk.read();
        let out = f(&cur.trees[self.index].1);
        self.disk.note(self.name, keys);
        out
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> sled::Result<Option<IVec>> {
        self.with(|t| t.get(key))
    }

    pub fn contains_key(&self, key: impl AsRef<[u8]>) -> sled::Result<bool> {
        self.with(|t| t.contains_key(key))
    }

    pub fn insert(&self, key: impl AsRef<[u8]>, value: impl Into<IVec>) -> sled::Result<Option<IVec>> {
        let key = key.as_ref();
        self.write([key], |t| t.insert(key, value))
    }

    pub fn remove(&self, key: impl AsRef<[u8]>) -> sled::Result<Option<IVec>> {
        let key = key.as_ref();
        self.write([key], |t| t.remove(key))
    }

    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        old: Option<impl AsRef<[u8]>>,
        new: Option<impl Into<IVec>>,
    ) -> sled::Result<Result<(), sled::CompareAndSwapError>> {
        let key = key.as_ref();
        self.write([key], |t| t.compare_and_swap(key, old, new))
    }

    /// Applies `batch` atomically.
    pub fn apply_batch(&self, batch: Batch) -> sled::Result<()> {
        let mut b = sled::Batch::default();
        for (k, v) in &batch.ops {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        self.write(batch.ops.iter().map(|(k, _)| k.as_ref()), |t| crate::sled_lock::batch(|| t.apply_batch(b)))
    }

    pub fn iter(&self) -> Iter {
        self.iter_over(Bound::Unbounded, Bound::Unbounded)
    }

    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(IVec::from(k.as_ref())),
            Bound::Excluded(k) => Bound::Excluded(IVec::from(k.as_ref())),
            Bound::Unbounded => Bound::Unbounded,
        };
        self.iter_over(own(range.start_bound()), own(range.end_bound()))
    }

    pub fn scan_prefix(&self, prefix: impl AsRef<[u8]>) -> Iter {
        let prefix = prefix.as_ref();
        // The first key after every key that starts with `prefix`: its last byte below 0xff
        // raised, the 0xff bytes after it dropped (none when it is all 0xff).
        let hi = match prefix.iter().rposition(|&b| b != 0xff) {
            Some(i) => {
                let mut end = prefix[..=i].to_vec();
                end[i] += 1;
                Bound::Excluded(IVec::from(end))
            }
            None => Bound::Unbounded,
        };
        self.iter_over(Bound::Included(IVec::from(prefix)), hi)
    }

    fn iter_over(&self, lo: Bound<IVec>, hi: Bound<IVec>) -> Iter {
        let cur = self.disk.read();
        let inner = cur.trees[self.index].1.range((lo.clone(), hi.clone()));
        Iter { tree: self.clone(), inner, epoch: cur.epoch, lo, hi }
    }

    pub fn first(&self) -> sled::Result<Option<(IVec, IVec)>> {
        self.with(|t| t.first())
    }

    pub fn last(&self) -> sled::Result<Option<(IVec, IVec)>> {
        self.with(|t| t.last())
    }

    pub fn len(&self) -> usize {
        self.with(|t| t.len())
    }

    pub fn is_empty(&self) -> bool {
        self.with(|t| t.is_empty())
    }
}

/// Writes to one [`Tree`], applied atomically by [`Tree::apply_batch`] (sled's batch, with its
/// keys kept for a rewrite's notes).
#[derive(Debug, Default, Clone)]
pub struct Batch {
    ops: Vec<(IVec, Option<IVec>)>,
}

impl Batch {
    pub fn insert(&mut self, key: impl Into<IVec>, value: impl Into<IVec>) {
        self.ops.push((key.into(), Some(value.into())));
    }

    pub fn remove(&mut self, key: impl Into<IVec>) {
        self.ops.push((key.into(), None));
    }
}

/// An iterator over a [`Tree`]'s pairs in key order, in the database current at each step.
pub struct Iter {
    tree: Tree,
    inner: sled::Iter,
    /// The database `inner` reads.
    epoch: u64,
    /// What is left to return, narrowed at each step.
    lo: Bound<IVec>,
    hi: Bound<IVec>,
}

impl Iter {
    /// The next pair from the front or the back, read under the read lock after a seek into a
    /// database swapped in since the last step.
    fn step(&mut self, back: bool) -> Option<sled::Result<(IVec, IVec)>> {
        let cur = self.tree.disk.read();
        if cur.epoch != self.epoch {
            self.inner = cur.trees[self.tree.index].1.range((self.lo.clone(), self.hi.clone()));
            self.epoch = cur.epoch;
        }
        let item = if back { self.inner.next_back() } else { self.inner.next() };
        if let Some(Ok((k, _))) = &item {
            if back {
                self.hi = Bound::Excluded(k.clone());
            } else {
                self.lo = Bound::Excluded(k.clone());
            }
        }
        item
    }

    /// The keys alone.
    pub fn keys(self) -> impl DoubleEndedIterator<Item = sled::Result<IVec>> {
        self.map(|r| r.map(|(k, _)| k))
    }
}

impl Iterator for Iter {
    type Item = sled::Result<(IVec, IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Notes past [`MAX_NOTED`] between two takes are dropped whole and the take says so (the
    /// rewrite gives up); the next round notes afresh.
    #[test]
    fn notes_past_the_bound_are_dropped_and_reported() {
        let (_dir, disk) = crate::testing::disk();
        disk.note("t", [b"before tracking".as_slice()]);
        disk.track();
        for i in 0..=MAX_NOTED as u32 {
            disk.note("t", [i.to_be_bytes().as_slice()]);
        }
        assert!(disk.take_touched().is_none(), "more than MAX_NOTED keys were kept");
        disk.note("t", [b"k".as_slice()]);
        assert_eq!(disk.take_touched().map(|t| t.len()), Some(1));
        disk.untrack();
        disk.note("t", [b"after".as_slice()]);
        assert_eq!(disk.take_touched().map(|t| t.len()), Some(0));
    }
}
