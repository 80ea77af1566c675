//! A region's side of regions (`[region]`; book: Regions): its leader keeps the cluster
//! supplied from the global tier, whose replicated rules are [`leaf_raft_store::regions`].
//!
//! Layout:
//! - this file: [`Wanted`], the tags the leader's hooks found without a block
//!   ([`crate::allocation::group::Segments::in_region`]) or without a home here
//!   ([`lease::HomeLease`], [`crate::gapless::Numbers::in_region`], and
//!   [`crate::allocation::group::Segments::in_region`] for daily and obfuscated tags);
//! - [`keeper`]: the leader's task: join the global tier and adopt the region once, then keep
//!   each tag in use ahead of its traffic with blocks, and publish each one's runway;
//! - [`homes`]: the leader's other task: renew the region's lease of its homes, learn the
//!   homes it lists (moves away first), let go of tags that moved away, claim homes of the
//!   homed tags asked for here;
//! - [`lease`]: the lease as the leader measured it, which a monotonic take checks.
pub mod homes;
pub mod keeper;
pub mod lease;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Tags waiting for one of the leader's tasks: those whose allocation found no block (the
/// keeper's), or whose home is not known here (the homes task's). Bounded: a tag is one entry
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

    /// A closure that tells this set of a tag (for the leader's hooks).
    pub fn teller(&self) -> crate::allocation::group::OnNoBlock {
        let wanted = self.clone();
        Arc::new(move |tag: &str| wanted.tell(tag))
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
