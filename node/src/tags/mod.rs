//! Segment-mode tags: one actix actor per tag owning its refills, a [`TagHandle`] for the
//! lock-free request path, and the [`Tags`] registry.
//!
//! The request path ([`TagHandle::take`]) takes IDs straight from the tag's [`DoubleBuffer`]. It
//! messages the actor only to trigger a refill (fire and forget, once per refill) or, when both
//! buffers are empty, to wait for the refill in flight, up to `segment.wait_timeout_ms`. The
//! actor proposes `AllocateSegment` through the [`Allocator`] (Raft), installs the committed
//! segment and sizes the next one with Leaf's dynamic-step rule.
//!
//! Layout:
//! - this file: the errors, the [`Allocator`] seam, the [`ActorSystem`] the actors run on, and
//!   the [`Tags`] registry (lock-free lookups in a concurrent map, a tag loaded on its first
//!   request without copying the others, and dropped once archived);
//! - [`idle`]: the sweeper that unloads the tags idle for `segment.idle_unload_secs`;
//! - [`handle`]: [`TagHandle`], the lock-free request path and the `/cache` view;
//! - `actor`: the tag actor (refills, waiting requests, the queue of spare segments);
//! - [`step`]: Leaf's dynamic step as a pure type (the elapsed time is an argument);
//! - [`probe`]: a registry apart from Raft, for measuring what a loaded tag costs;
//! - `tests`: the actors end to end with a fake allocator.
mod actor;
pub mod handle;
pub mod idle;
pub mod probe;
pub mod step;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaf_raft_store::{Allocation, StoredProfile};

use crate::config::SegmentConfig;
use crate::metrics::Metrics;
use crate::segment::DoubleBuffer;
use actor::{ActorView, Memo};
use handle::ActorSlot;
pub use handle::{ServeAs, TagHandle};
use step::{DynamicStep, StepPolicy};

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Why a segment could not be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("tag {0:?} does not exist")]
    TagNotFound(String),
    #[error("{0}")]
    TagExhausted(String),
    /// This cluster does not serve the tag's profile (a region before the cluster version that
    /// serves it).
    #[error("{0}")]
    NotServed(String),
    /// A region serves the tag at its home alone, another region (the message names it).
    #[error("{0}")]
    NotHome(String),
    /// The cluster did not commit the segment.
    #[error("segment allocation failed: {0}")]
    NotCommitted(CommitFailure),
    /// The allocator answered an empty or inverted range: refused rather than installed.
    #[error("segment allocation failed: refused an empty segment [{start}, {end})")]
    EmptySegment { start: i64, end: i64 },
    #[error("the node is shutting down")]
    ShuttingDown,
}

/// Why the cluster did not commit a segment, as a client may read it: the kind of failure and
/// whether a retry may help, never a peer's address or error text (those are logged).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitFailure {
    #[error(
        "the cluster cannot commit right now (no Raft leader with a quorum is reachable from this node); retry later"
    )]
    NoQuorum,
    #[error("not committed within {0:?}; retry later")]
    Timeout(Duration),
    /// Raft stopped on this node (a storage error such as a full disk, or shutdown): the
    /// operator needs to see which.
    #[error("raft stopped on this node: {0}")]
    Stopped(String),
    /// The state machine refused it (its answer is the same on every node).
    #[error("{0}")]
    Rejected(String),
    /// A region's tag between blocks, or whose home it has not learnt yet: the leader has
    /// asked the global tier.
    #[error("{0}; retry shortly")]
    NoBlock(String),
}

/// Where committed segments come from (Raft in the node, a fake in tests).
pub trait Allocator: Send + Sync + 'static {
    /// Commits `[max_id, max_id + step)` of `tag` to this node.
    fn allocate(&self, tag: &str, step: i64) -> BoxFuture<Result<Allocation, AllocError>>;
}

/// Why a request got fewer IDs than it asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TakeError {
    #[error("no committed segment for tag {tag:?} within {waited:?} (both buffers empty)")]
    NotReady { tag: String, waited: Duration },
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

/// The actix system that runs the tag actors, on its own thread.
pub struct ActorSystem {
    system: actix::System,
    arbiter: actix::ArbiterHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ActorSystem {
    pub fn start() -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new().name("leaf-actors".into()).spawn(move || {
            let sys = actix::System::new();
            sys.block_on(async {
                let _ = tx.send((actix::System::current(), actix::Arbiter::current()));
            });
            if let Err(e) = sys.run() {
                tracing::error!(error = %e, "actor system stopped with an error");
            }
        })?;
        let (system, arbiter) = rx.recv().map_err(|_| std::io::Error::other("actor system failed to start"))?;
        Ok(ActorSystem { system, arbiter, thread: Some(thread) })
    }

    pub fn arbiter(&self) -> &actix::ArbiterHandle {
        &self.arbiter
    }

    /// Stops every actor and joins the thread.
    pub fn stop(mut self) {
        self.system.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ActorSystem {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.system.stop();
        }
    }
}

/// Looks up a tag's stored step and profile in the applied state; `None` if the tag does not
/// exist.
pub type TagLookup = Arc<dyn Fn(&str) -> Option<(i64, StoredProfile, Option<i64>)> + Send + Sync>;

/// Registry of the tags loaded on this node. Lookups are lock-free; a tag is loaded (its actor
/// started) on its first request, if it exists in the replicated state.
#[derive(Clone)]
pub struct Tags {
    inner: Arc<TagsInner>,
}

struct TagsInner {
    /// The loaded tags. Reads are lock-free; an insert or a removal touches one entry (an
    /// earlier copy-on-write map cost a copy of every loaded tag per load: with 20,000 loaded,
    /// about half of a leader's CPU under a load of first requests).
    map: papaya::HashMap<Arc<str>, Arc<TagHandle>>,
    /// The state's archive counter ([`leaf_raft_store::StateReader::archives`]), and the value
    /// `map` was last checked at.
    archives: Arc<AtomicU64>,
    checked: AtomicU64,
    loading: Mutex<()>,
    spawner: Arc<Spawner>,
    lookup: TagLookup,
    cfg: SegmentConfig,
    metrics: Arc<Metrics>,
}

/// What every tag's actor is started with (one, shared by every handle).
pub(crate) struct Spawner {
    arbiter: actix::ArbiterHandle,
    allocator: Arc<dyn Allocator>,
    metrics: Arc<Metrics>,
    /// How long an idle actor stays up, and how many have gone to sleep (the memory they
    /// free is given back to the system by the idle sweeper, see [`idle`]).
    sleep_after: Duration,
    slept: AtomicU64,
}

impl Tags {
    pub fn new(
        actors: &ActorSystem,
        allocator: Arc<dyn Allocator>,
        (lookup, archives): (TagLookup, Arc<AtomicU64>),
        cfg: SegmentConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self::with_actor_sleep(actors, allocator, (lookup, archives), cfg, metrics, actor::SLEEP_AFTER)
    }

    /// [`Tags::new`] whose idle actors sleep after `sleep_after` (tests: a short one).
    pub(crate) fn with_actor_sleep(
        actors: &ActorSystem,
        allocator: Arc<dyn Allocator>,
        (lookup, archives): (TagLookup, Arc<AtomicU64>),
        cfg: SegmentConfig,
        metrics: Arc<Metrics>,
        sleep_after: Duration,
    ) -> Self {
        Tags {
            inner: Arc::new(TagsInner {
                map: papaya::HashMap::new(),
                checked: AtomicU64::new(archives.load(Ordering::Acquire)),
                archives,
                loading: Mutex::new(()),
                spawner: Arc::new(Spawner {
                    arbiter: actors.arbiter().clone(),
                    allocator,
                    metrics: metrics.clone(),
                    sleep_after,
                    slept: AtomicU64::new(0),
                }),
                lookup,
                cfg,
                metrics,
            }),
        }
    }

    /// The handle of `tag`, loading it on first use; `None` if the tag does not exist (or is
    /// archived: a node that applied an archive serves the tag no more).
    pub fn get(&self, tag: &str) -> Option<Arc<TagHandle>> {
        self.check_archives();
        if let Some(h) = self.inner.map.pin().get(tag) {
            return Some(h.clone());
        }
        self.load(tag)
    }

    /// `f` of `tag`'s handle if this node has loaded it, without loading it or cloning the
    /// handle (the per-ID fast path: [`crate::service::App::segment_take_one_now`]).
    pub fn with_loaded<T>(&self, tag: &str, f: impl FnOnce(&TagHandle) -> T) -> Option<T> {
        self.check_archives();
        self.inner.map.pin().get(tag).map(|h| f(h))
    }

    /// `tag`'s handle if this node has loaded it, without loading it (views that list many
    /// tags must not start a buffer, a refill and metrics series for each).
    pub fn peek(&self, tag: &str) -> Option<Arc<TagHandle>> {
        self.check_archives();
        self.inner.map.pin().get(tag).cloned()
    }

    #[cold]
    fn load(&self, tag: &str) -> Option<Arc<TagHandle>> {
        let (stored_step, profile, upper_bound) = (self.inner.lookup)(tag)?;
        let _guard = self.inner.loading.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = self.inner.map.pin().get(tag) {
            return Some(h.clone());
        }
        let i = &self.inner;
        let buf = Arc::new(DoubleBuffer::new());
        let serve = ServeAs::of(&profile, upper_bound);
        // An obfuscated tag's IDs must not be countable: none of its counters is a series of
        // the public /metrics (they count, unregistered, for the admin dashboard alone).
        let counts = i.metrics.tag_counters(tag, profile.kind());
        let name: Arc<str> = Arc::from(tag);
        // Its actor starts with the first refill or wait, and sleeps when idle (`actor`).
        let memo = Memo::new(DynamicStep::new(StepPolicy::new(&i.cfg), stored_step));
        let handle = Arc::new_cyclic(|me| TagHandle {
            tag: name.clone(),
            buf,
            actor: Mutex::new(ActorSlot {
                addr: None,
                sent: 0,
                memo,
                view: ActorView { dynamic_step: stored_step, ..ActorView::default() },
            }),
            me: me.clone(),
            spawner: i.spawner.clone(),
            counts,
            daily: match &profile {
                StoredProfile::Daily { format, .. } => Some(*format),
                _ => None,
            },
            wait: Duration::from_millis(i.cfg.wait_timeout_ms),
            serve,
        });
        i.map.pin().insert(name, handle.clone());
        tracing::info!(tag, stored_step, "tag loaded");
        Some(handle)
    }

    /// Unloads the loaded tags the state no longer serves (archived since): their buffered IDs
    /// are dropped (skipped, never reused) and, with their handles gone, their actors stop. A
    /// request already holding a handle may still finish taking from it.
    /// Unloads archived tags if the state archived any since the last check: one atomic load.
    #[inline]
    fn check_archives(&self) {
        let archives = self.inner.archives.load(Ordering::Acquire);
        if archives != self.inner.checked.load(Ordering::Relaxed) {
            self.unload_archived(archives);
        }
    }

    #[cold]
    fn unload_archived(&self, archives: u64) {
        let i = &self.inner;
        let _guard = i.loading.lock().unwrap_or_else(|e| e.into_inner());
        if i.checked.load(Ordering::Relaxed) == archives {
            return;
        }
        let map = i.map.pin();
        let gone: Vec<Arc<str>> = map.keys().filter(|t| (i.lookup)(t).is_none()).cloned().collect();
        for tag in &gone {
            if let Some(h) = map.remove(tag) {
                i.metrics.unload_tag(tag);
                let dropped = h.buf.retire_below(i64::MAX);
                tracing::info!(tag = %tag, dropped, "archived tag unloaded");
            }
        }
        i.checked.store(archives, Ordering::Relaxed);
    }

    /// Every loaded tag, sorted by name.
    pub fn loaded(&self) -> Vec<Arc<TagHandle>> {
        self.check_archives();
        let mut v: Vec<_> = self.inner.map.pin().values().cloned().collect();
        v.sort_by(|a, b| a.tag.cmp(&b.tag));
        v
    }
}

#[cfg(test)]
mod tests;
