//! What loaded tags cost, measured apart from Raft and the disk: a [`Tags`] registry on its own
//! actor thread whose allocator commits every segment at once. `examples/tag_memory.rs` counts
//! the heap bytes each loaded tag keeps with it; nothing in the node uses this.
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use leaf_raft_store::{Allocation, StoredProfile};

use super::{ActorSystem, AllocError, Allocator, BoxFuture, TagLookup, Tags};
use crate::config::SegmentConfig;
use crate::metrics::Metrics;

/// Commits `[next, next + step)` at once.
struct AtOnce(AtomicI64);

impl Allocator for AtOnce {
    fn allocate(&self, _tag: &str, step: i64) -> BoxFuture<Result<Allocation, AllocError>> {
        let start = self.0.fetch_add(step, Ordering::Relaxed);
        Box::pin(async move { Ok(Allocation { start, end: start + step, stored_step: step }) })
    }
}

/// A registry in which every tag exists, as a segment tag of `step`.
pub struct Probe {
    tags: Tags,
    actors: Option<ActorSystem>,
}

impl Probe {
    pub fn start(step: i64) -> std::io::Result<Self> {
        let actors = ActorSystem::start()?;
        let lookup: TagLookup = Arc::new(move |_| Some((step, StoredProfile::Segment, None)));
        let metrics = Arc::new(Metrics::new());
        let allocator = Arc::new(AtOnce(AtomicI64::new(1)));
        let tags = Tags::new(&actors, allocator, (lookup, Arc::default()), SegmentConfig::default(), metrics);
        Ok(Probe { tags, actors: Some(actors) })
    }

    /// One ID of `tag`, loading it first if it is not loaded.
    pub async fn take_one(&self, tag: &str) -> Option<i64> {
        let h = self.tags.get(tag)?;
        let mut id = None;
        h.take(1, |first, _| id = Some(first)).await.ok()?;
        id
    }

    /// How many tags are loaded.
    pub fn loaded(&self) -> usize {
        self.tags.loaded().len()
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        if let Some(a) = self.actors.take() {
            a.stop();
        }
    }
}
