//! [`TagHandle`]: the request path's handle on one tag. Lock-free while the tag's buffers hold
//! IDs; it messages the actor only to trigger a refill or to wait for one, starting it first if
//! it sleeps (see `actor`'s module doc).
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use actix::{Actor, Addr};
use leaf_api::profile::DailyFormat;
use leaf_api::types::CacheEntry;
use leaf_raft_store::StoredProfile;

use crate::metrics::tag_series::TagCounters;
use crate::profiles::obfuscate::{Obfuscator, MAX_DOMAIN};

use super::actor::{ActorView, Memo, Refill, TagActor, TagActorParts, Wait};
use super::{AllocError, Spawner, TakeError};
use crate::segment::DoubleBuffer;

/// The request path's handle on one tag.
pub struct TagHandle {
    /// The tag's name, shared with the registry's key and the actor.
    pub(super) tag: Arc<str>,
    pub(super) buf: Arc<DoubleBuffer>,
    /// The tag's actor while it runs, what it left when it last slept, and what `/cache`
    /// shows of it.
    pub(super) actor: Mutex<ActorSlot>,
    /// This handle (for the actor it starts), what every actor is started with, and this
    /// tag's own parts of it.
    pub(super) me: Weak<TagHandle>,
    pub(super) spawner: Arc<Spawner>,
    pub(super) daily: Option<DailyFormat>,
    /// IDs served, refills, failed refills, and requests that found both buffers empty.
    pub(super) counts: TagCounters,
    pub(super) wait: Duration,
    /// How the tag's IDs are served.
    pub(super) serve: ServeAs,
}

/// A tag's actor, if it runs: its address and the messages sent to it (which it counts as it
/// handles them, so that it sleeps only with none on the way), or its [`Memo`].
pub(super) struct ActorSlot {
    pub(super) addr: Option<Addr<TagActor>>,
    pub(super) sent: u64,
    pub(super) memo: Memo,
    pub(super) view: ActorView,
}

/// How a tag's IDs are served: from this node's buffers (segment and daily tags), through the
/// tag's bijection (obfuscated tags), or by the leader (monotonic tags, whose buffers stay
/// empty).
#[derive(Debug, Clone)]
pub enum ServeAs {
    Buffer,
    Obfuscated(Arc<Obfuscator>),
    Leader,
    /// A gapless series: its numbers are issued one key at a time (`App::gapless_issue`),
    /// never taken as IDs.
    Gapless,
    /// A stored profile this node cannot serve (the reason; the state's checks make it
    /// unreachable for a state built by `apply`).
    Unservable(String),
}

impl ServeAs {
    /// How a tag with `profile` and `upper_bound` is served.
    pub fn of(profile: &StoredProfile, upper_bound: Option<i64>) -> Self {
        match profile {
            StoredProfile::Monotonic => ServeAs::Leader,
            StoredProfile::Segment | StoredProfile::Daily { .. } => ServeAs::Buffer,
            StoredProfile::Gapless { .. } => ServeAs::Gapless,
            StoredProfile::Obfuscated { key } => {
                // The counter stays below the tag's exclusive limit, which is the domain.
                let domain = upper_bound.map_or(MAX_DOMAIN, |b| u64::try_from(b).map_or(0, |b| b.saturating_add(1)));
                match Obfuscator::new(key, domain) {
                    Ok(o) => ServeAs::Obfuscated(Arc::new(o)),
                    Err(e) => ServeAs::Unservable(e.to_string()),
                }
            }
        }
    }
}

impl TagHandle {
    /// How this tag's IDs are served.
    pub fn serve(&self) -> &ServeAs {
        &self.serve
    }

    /// The tag's name.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// IDs of this tag this node handed out since the tag was loaded.
    pub fn served(&self) -> u64 {
        self.counts.served.get()
    }

    /// Counts `n` IDs served another way than [`TagHandle::take`] (`leaf_ids_served`).
    pub fn count_served(&self, n: u64) {
        self.counts.served.inc_by(n);
    }

    /// One ID if the buffers hold one, without waiting (lock-free, as [`TagHandle::take`]
    /// serves it: counted, and a preload asked for when due); `None` when they are empty, and
    /// [`TagHandle::take`] then waits for the refill.
    #[inline]
    pub fn take_one_now(&self) -> Option<i64> {
        let mut id = None;
        let out = self.buf.take(1, |first, _| id = Some(first));
        if out.missing == 0 {
            self.counts.served.inc();
        }
        // A refill this call asked for is sent whether or not it found an ID: the flag it set
        // stays set until the actor ends a refill, so nothing else would send it (a caller
        // that only ever takes at once would find the buffers empty for good).
        if out.want_refill {
            self.refill();
        }
        id
    }

    /// Takes `n` IDs, calling `sink(first, count)` for each increasing run. Lock-free while the
    /// buffers hold IDs; otherwise waits (bounded) for the actor's refill.
    pub async fn take(&self, n: u64, mut sink: impl FnMut(i64, u64) + Send) -> Result<(), TakeError> {
        // Set by the first wait: a take served at once reads no clock.
        let mut deadline = None;
        let mut missing = n;
        loop {
            let out = self.buf.take(missing, &mut sink);
            self.counts.served.inc_by(missing - out.missing);
            if out.missing == 0 {
                if out.want_refill {
                    // Preload: fire and forget.
                    self.refill();
                }
                return Ok(());
            }
            // Both buffers are empty: `Wait` starts the refill, sized for what is missing.
            self.counts.waits.inc();
            missing = out.missing;
            let deadline = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + self.wait);
            let not_ready = || TakeError::NotReady { tag: self.tag.to_string(), waited: self.wait };
            let rx = match tokio::time::timeout_at(deadline, self.send_wait(missing)).await {
                Err(_) => return Err(not_ready()),
                Ok(Err(_)) => return Err(AllocError::ShuttingDown.into()),
                Ok(Ok(rx)) => rx,
            };
            match tokio::time::timeout_at(deadline, rx).await {
                Err(_) => return Err(not_ready()),
                Ok(Err(_)) => return Err(AllocError::ShuttingDown.into()),
                Ok(Ok(Err(e))) => return Err(e.into()),
                Ok(Ok(Ok(()))) => {}
            }
        }
    }

    /// Sends the actor a refill (fire and forget), starting it if it sleeps.
    fn refill(&self) {
        let mut slot = self.actor.lock().unwrap_or_else(|e| e.into_inner());
        let addr = self.running(&mut slot);
        slot.sent += 1;
        addr.do_send(Refill);
    }

    /// Asks the actor to answer once the buffers hold IDs again, starting it if it sleeps.
    async fn send_wait(&self, missing: u64) -> Result<tokio::sync::oneshot::Receiver<Result<(), AllocError>>, ()> {
        let request = {
            let mut slot = self.actor.lock().unwrap_or_else(|e| e.into_inner());
            let addr = self.running(&mut slot);
            slot.sent += 1;
            addr.send(Wait { missing })
        };
        request.await.map_err(|_| ())
    }

    /// The actor's address, started from its memo if it sleeps (or stopped: at shutdown, an
    /// actor started on the stopped arbiter never runs, and a send to it fails at once).
    fn running(&self, slot: &mut ActorSlot) -> Addr<TagActor> {
        if let Some(addr) = slot.addr.as_ref().filter(|a| a.connected()) {
            return addr.clone();
        }
        let actor = TagActor::new(self.parts(slot));
        let addr = TagActor::start_in_arbiter(&self.spawner.arbiter, move |_| actor);
        slot.addr = Some(addr.clone());
        slot.sent = 0;
        addr
    }

    /// What this tag's next actor starts with: its parts and what the last one left.
    pub(super) fn parts(&self, slot: &ActorSlot) -> TagActorParts {
        let s = &self.spawner;
        TagActorParts {
            tag: self.tag.clone(),
            buf: self.buf.clone(),
            allocator: s.allocator.clone(),
            memo: slot.memo,
            view: slot.view.clone(),
            metrics: s.metrics.clone(),
            counts: self.counts.clone(),
            daily: self.daily,
            handle: self.me.clone(),
            sleep_after: s.sleep_after,
        }
    }

    /// Called by the actor that has handled `handled` messages and nothing since its last look:
    /// it may sleep (and leaves `memo`) only if it is still this tag's actor and no message is
    /// on its way to it. The slot's lock orders this with every send.
    pub(super) fn put_to_sleep(&self, me: &Addr<TagActor>, handled: u64, memo: impl FnOnce() -> Memo) -> bool {
        let mut slot = self.actor.lock().unwrap_or_else(|e| e.into_inner());
        // Another actor's slot (one started after this one was found disconnected) is not
        // this one's to empty, nor its count this one's to compare.
        if slot.sent != handled || slot.addr.as_ref() != Some(me) {
            return false;
        }
        slot.addr = None;
        slot.memo = memo();
        self.spawner.slept.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// Sets what `/cache` shows of the actor (its actor, after each change).
    pub(super) fn set_view(&self, view: ActorView) {
        self.actor.lock().unwrap_or_else(|e| e.into_inner()).view = view;
    }

    /// Whether the tag's actor runs now (tests: an idle one sleeps).
    #[cfg(test)]
    pub(super) fn actor_runs(&self) -> bool {
        self.actor.lock().unwrap_or_else(|e| e.into_inner()).addr.as_ref().is_some_and(|a| a.connected())
    }

    /// The monitor's view of this tag (`/cache`), from the lock-free buffer and the state the
    /// actor publishes into the slot (read under its lock, held for a copy): it never messages
    /// the actor, so a `/cache` flood cannot delay refills or the snowflake lease renewals that
    /// share the actor thread, nor wake a sleeping actor.
    pub fn inspect(&self) -> CacheEntry {
        let (current, queued) = self.buf.views();
        let next = queued.first().cloned();
        let spares = queued.into_iter().skip(1).collect();
        let a = self.actor.lock().unwrap_or_else(|e| e.into_inner()).view.clone();
        CacheEntry {
            tag: self.tag.to_string(),
            initialised: a.initialised,
            next_ready: next.is_some(),
            current,
            next,
            spares,
            dynamic_step: a.dynamic_step,
            refill_in_flight: a.refill_in_flight,
            last_error: a.last_error.clone(),
            // Filled in by `/cache`, which has the replicated state.
            forecast: None,
        }
    }
}
