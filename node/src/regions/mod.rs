//! A region's side of regions (`[region]`; book: Regions): its leader keeps the cluster
//! supplied from the global tier, whose replicated rules are [`leaf_raft_store::regions`].
//!
//! Layout:
//! - this file: [`Wanted`], the tags an allocation found without a block, which the leader's
//!   group commit of allocations reports ([`crate::allocation::group::Segments::telling`]);
//! - [`keeper`]: the leader's task: join the global tier and adopt the region once, then keep
//!   each tag in use ahead of its traffic with blocks, and publish each one's runway.
pub mod keeper;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Tags whose allocation found no block, waiting for the keeper (bounded: a tag is one entry
/// however often it is refused, and only tags that exist are refused so).
#[derive(Clone, Default)]
pub struct Wanted {
    tags: Arc<Mutex<HashSet<String>>>,
    wake: Arc<Notify>,
}

/// The most tags waiting at once: past it a refused tag waits for the keeper's next round,
/// which finds it by its rate or its next refusal.
const MAX_WANTED: usize = 100_000;

impl Wanted {
    /// Notes that `tag` has no block and wakes the keeper.
    pub fn tell(&self, tag: &str) {
        {
            let mut tags = self.tags.lock().unwrap_or_else(|e| e.into_inner());
            if tags.len() < MAX_WANTED && !tags.contains(tag) {
                tags.insert(tag.to_string());
            }
        }
        self.wake.notify_one();
    }

    /// The tags told since the last call.
    pub fn take(&self) -> HashSet<String> {
        std::mem::take(&mut *self.tags.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits until a tag is told.
    pub async fn told(&self) {
        self.wake.notified().await
    }
}
