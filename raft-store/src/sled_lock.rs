//! Keeps sled's batches and the last drop of a sled database apart: one deadlock of sled 0.34.7
//! this store meets.
//!
//! sled guards its trees with one lock for the whole process (`concurrency_control.rs`, a
//! `static` parking_lot `RwLock`). Every operation takes it shared, `Tree::apply_batch`
//! exclusively. Dropping a database's last handle flushes it (`TreeInner::drop`), holding the
//! lock shared while it waits for its log to be stable. With a batch of *any* database of the
//! process waiting for the lock exclusively, sled's own threads that the flush waits for (the
//! "log flusher") cannot take it shared any more, and nothing moves again: neither that
//! database, nor any other.
//!
//! It hung CI for 75 minutes (stop 66) and a stress loop of `node/tests/node/batches.rs` three
//! times out of about sixty runs, each time with a database's last drop (a rewrite's old files
//! in `compact::rewrite_if_due`, a node dropped at the end of a test) in `make_stable`, an
//! `apply_batch` (a checkpoint) waiting for the exclusive lock, and a "log flusher" waiting for
//! the shared one. A node hangs the same way when a rewrite of sled's files ends during a
//! checkpoint.
//!
//! So every batch of this crate runs under [`batch`] (this lock, shared) and every last drop
//! of a database under [`last_drop`] (exclusive): while a database's last flush runs, no batch
//! waits on sled's lock, and one that comes waits on this one instead, holding nothing of sled.
//! [`Synced`](crate::durable::Synced) holds the only handle on its database that outlives a
//! call, and drops it with [`last_drop`].
//!
//! Not every hang of a last drop is this one. After the change the stress loop still hung once
//! in 215 runs: a last drop (a node's store, dropped by a snapshot build's blocking task as a
//! test's runtime shut down) waited in `make_stable` with no batch inside sled and its "log
//! flusher" idle; why its log never became stable is not known. A batch of another database
//! then waits here for that drop, where it would have gone on before.
use std::sync::RwLock;

/// Shared by batches, exclusive for a database's last drop (see the module's doc).
static LOCK: RwLock<()> = RwLock::new(());

/// Runs `f`, one of sled's batches, never during a database's last drop.
pub(crate) fn batch<T>(f: impl FnOnce() -> T) -> T {
    let _shared = LOCK.read().unwrap_or_else(|e| e.into_inner());
    f()
}

/// Drops `value`, the last handle on a sled database (or a value holding it), with no batch
/// running or waiting on sled's lock.
pub(crate) fn last_drop<T>(value: T) {
    let _exclusive = LOCK.write().unwrap_or_else(|e| e.into_inner());
    drop(value);
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// A last drop waits for the batch running, and a batch that comes meanwhile waits for the
    /// drop.
    #[test]
    fn a_last_drop_and_a_batch_never_overlap() {
        let in_batch = Arc::new(AtomicBool::new(false));
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let batcher = {
            let in_batch = in_batch.clone();
            std::thread::spawn(move || {
                batch(|| {
                    in_batch.store(true, Ordering::SeqCst);
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    in_batch.store(false, Ordering::SeqCst);
                })
            })
        };
        started_rx.recv().unwrap();
        /// Notes whether a batch ran while it was dropped.
        struct Probe(Arc<AtomicBool>, Arc<AtomicBool>);
        impl Drop for Probe {
            fn drop(&mut self) {
                self.1.store(self.0.load(Ordering::SeqCst), Ordering::SeqCst);
            }
        }
        let overlapped = Arc::new(AtomicBool::new(true));
        let dropper = {
            let probe = Probe(in_batch.clone(), overlapped.clone());
            std::thread::spawn(move || last_drop(probe))
        };
        // Not a wait for a condition: a window in which a drop that did not wait would run
        // during the batch (the probe then notes it). The batch then ends.
        std::thread::sleep(Duration::from_millis(50));
        release_tx.send(()).unwrap();
        batcher.join().unwrap();
        dropper.join().unwrap();
        assert!(!overlapped.load(Ordering::SeqCst), "the drop saw a batch running");
    }
}
