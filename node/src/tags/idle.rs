//! Unloading the tags nobody asks for: a node may hold many thousand tags, and a loaded tag
//! keeps an actor, two buffers and its counters. A background task ([`Tags::unload_idle`])
//! looks at each loaded tag's served counter every so often (no cost on the per-ID path);
//! a tag whose count has not moved for `segment.idle_unload_secs` is unloaded like an archived
//! one: out of the registry, its buffered IDs dropped (never handed out), its counters out of
//! `/metrics` (its IDs stay in its profile's total). Its next request loads it again and
//! commits a new segment, above every ID it handed out before.
//!
//! A request that took the handle just before the unload finishes on it: it may still take
//! from a segment it already held (each ID once: the segment's counter is shared), or wait
//! for one more refill, which commits a fresh range. Nothing is handed out twice; at worst a
//! segment is wasted.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::Tags;

/// Tags unloaded or actors asleep (each about a kilobyte) before the sweeper asks glibc to give
/// free memory back.
const RELEASED_BEFORE_TRIM: u64 = 1024;

/// What the sweeper remembers of each loaded tag: its served count when it last moved, and
/// when that was.
#[derive(Debug, Default)]
pub struct IdleWatch {
    seen: HashMap<Arc<str>, (u64, Instant)>,
}

impl IdleWatch {
    /// The room of its table, for tests.
    #[cfg(test)]
    pub fn room(&self) -> usize {
        self.seen.capacity()
    }
}

impl Tags {
    /// Unloads the tags idle for `idle`, looking every `idle / 4` (at most every minute), until
    /// `shutdown` turns true. A zero `idle` keeps every tag.
    pub async fn unload_idle(self, idle: Duration, shutdown: watch::Receiver<bool>) {
        if idle.is_zero() {
            return;
        }
        let every = (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(60));
        let mut tick = crate::ticker::Ticker::new(every, shutdown);
        let mut watch = IdleWatch::default();
        let slept = || self.inner.spawner.slept.load(std::sync::atomic::Ordering::Relaxed);
        let (mut released, mut slept_before) = (0, slept());
        while tick.next().await {
            released += self.sweep_idle(&mut watch, Instant::now(), idle) as u64;
            // Tags unloaded and actors gone to sleep free memory glibc keeps in its arenas:
            // given back once there is enough of it, so RSS follows the tags in use.
            let now_slept = slept();
            released += now_slept.saturating_sub(slept_before);
            slept_before = now_slept;
            if released >= RELEASED_BEFORE_TRIM {
                crate::memory::trim();
                released = 0;
            }
        }
    }

    /// One look: notes each loaded tag's served count and unloads those whose count has not
    /// moved since `idle` before `now`. Returns how many it unloaded.
    pub fn sweep_idle(&self, watch: &mut IdleWatch, now: Instant, idle: Duration) -> usize {
        let loaded = self.inner.map.pin();
        let before = loaded.len();
        watch.seen.retain(|t, _| loaded.contains_key(&**t));
        crate::memory::shrink_sparse(&mut watch.seen);
        let mut cold = Vec::new();
        for (tag, h) in loaded.iter() {
            let served = h.served();
            match watch.seen.get_mut(tag) {
                Some((s, since)) if *s == served => {
                    if now.saturating_duration_since(*since) >= idle {
                        cold.push(tag.clone());
                    }
                }
                Some(seen) => *seen = (served, now),
                None => {
                    watch.seen.insert(tag.clone(), (served, now));
                }
            }
        }
        if cold.is_empty() {
            return 0;
        }
        let unloaded = self.unload(&cold, |h| h.served() == watch.seen.get(&*h.tag).map_or(u64::MAX, |s| s.0));
        for tag in &cold {
            watch.seen.remove(tag);
        }
        crate::memory::shrink_sparse(&mut watch.seen);
        if unloaded > 0 {
            tracing::info!(unloaded, loaded = before.saturating_sub(unloaded), "idle tags unloaded");
        }
        unloaded
    }

    /// Takes `tags` out of the registry where `still` holds for their handle (checked under the
    /// loading lock), drops their buffered IDs and their counters; returns how many went.
    fn unload(&self, tags: &[Arc<str>], still: impl Fn(&super::TagHandle) -> bool) -> usize {
        let i = &self.inner;
        let _guard = i.loading.lock().unwrap_or_else(|e| e.into_inner());
        let map = i.map.pin();
        let mut gone = 0;
        for tag in tags {
            let Some(h) = map.get(&**tag).filter(|h| still(h)).map(Arc::clone) else { continue };
            map.remove(&**tag);
            i.metrics.unload_tag(tag);
            let dropped = h.buf.retire_below(i64::MAX);
            tracing::debug!(tag = %tag, dropped, "idle tag unloaded");
            gone += 1;
        }
        gone
    }
}
