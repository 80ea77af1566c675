//! [`IdPool`]: a client-side cache of ID ranges leased from the cluster, per tag — Leaf's double
//! buffer in the client — with a lock-free synchronous `next_id()`.
//!
//! ```no_run
//! use leaf_client::Client;
//! use leaf_client::pool::{IdPool, PoolOptions};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::builder(["http://10.0.0.1:8080", "http://10.0.0.2:8080"]).build()?;
//! // Inside a tokio runtime: the pool's refill tasks run on it.
//! let pool = IdPool::new(client, PoolOptions::default())?;
//! let orders = pool.segment("orders")?; // starts leasing at once
//! let id: i64 = orders.next_id_async().await?; // in async code
//! let worker = orders.clone();
//! std::thread::spawn(move || {
//!     for _ in 0..1_000_000 {
//!         let _id = worker.next_id(); // sync, lock-free while IDs are buffered
//!     }
//! });
//! let flakes = pool.snowflake("payments")?; // IDs at most max_staleness old
//! println!("{id} {:?} {:?}", flakes.try_next_id(), pool.stats());
//! # Ok(())
//! # }
//! ```
//!
//! **How it works.** Each tag (or snowflake key) has a buffer of leased ranges — the current
//! one and up to `depth` leases queued behind it — and a background task that fills it
//! through a [`RangeSource`] (a [`Client`](crate::Client): `segment_ranges` /
//! `snowflake_ranges`, with the client's failover across nodes, retries and deadline). When
//! 10% of a lease is used and fewer than `depth` leases are queued, the next lease is fetched
//! in the background; its size adapts so that a lease lasts about `lease_period`
//! ([`sizing`]). A failed lease is retried with backoff; callers notice nothing while
//! buffered IDs last, then wait up to `max_wait` ([`PoolError::Exhausted`]). Every ID handed
//! out lies in a range the service leased to this pool, and none twice; IDs still buffered
//! when the process dies are lost (a gap, never a duplicate).
//!
//! **Runtime.** The refill tasks run on the tokio runtime current at [`IdPool::new`] (or the
//! one given to [`IdPool::with_runtime`]). `next_id()` blocks its thread when nothing is
//! buffered: call it from plain threads or `spawn_blocking`, and use `next_id_async()` or
//! `try_next_id()` on async executor threads (blocking one could starve the very task that
//! refills the buffer on a single-threaded runtime). Dropping the pool and all its
//! [`TagPool`] handles stops the tasks.
//!
//! Layout:
//! - `mod.rs`: [`IdPool`], [`PoolOptions`], [`IdKind`].
//! - `handle.rs`: [`TagPool`] (`next_id`, `try_next_id`, `next_id_async`) and the waits.
//! - `local.rs`: [`LocalIds`], a per-thread cache taking a chunk of IDs per atomic operation.
//! - `buffer/`: the lock-free buffer of leased ranges (the fast path): a ring of slots and one
//!   cursor word; the refill side's queue (`queue.rs`).
//! - [`sizing`]: the adaptive lease size (pure).
//! - `refill.rs`: the background task per tag (prefetch, backoff, retirement).
//! - `snowflake.rs`: the freshness bound of snowflake IDs.
//! - [`source`]: [`RangeSource`], [`LeaseFailure`], the implementation for `Client`.
//! - `stats.rs`: [`TagStats`], [`PoolStats`]; `error.rs`: [`PoolError`].
mod buffer;
mod error;
mod handle;
mod local;
mod refill;
pub mod sizing;
mod snowflake;
pub mod source;
mod stats;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leaf_api::tag::{validate_tag, MAX_RANGE_BATCH};
use tokio::runtime::Handle;

pub use error::PoolError;
pub use handle::TagPool;
pub use local::LocalIds;
pub use source::{LeaseFailure, LeaseFuture, RangeSource};
pub use stats::{PoolStats, TagStats};

use buffer::Buffer;
use handle::TagShared;
use sizing::Sizing;
use snowflake::Freshness;

/// Which IDs a [`TagPool`] hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IdKind {
    /// Segment IDs of a tag (`Client::segment_ranges`).
    Segment,
    /// Snowflake IDs (`Client::snowflake_ranges`), with a freshness bound.
    Snowflake,
}

impl std::fmt::Display for IdKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IdKind::Segment => "segment",
            IdKind::Snowflake => "snowflake",
        })
    }
}

/// How an [`IdPool`] leases and waits. The defaults suit a service taking from a few IDs a
/// second to tens of millions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolOptions {
    /// How long a call with nothing buffered waits for a lease before
    /// [`PoolError::Exhausted`]. Default 5 s: longer than a leader election plus the
    /// client's failover, so a node's crash costs callers a pause, not an error.
    pub max_wait: Duration,
    /// How long a lease should last at the measured consumption (the size doubles when one
    /// lasted less than half of it, halves when more than twice). Default 1 s: with the
    /// default depth the buffer holds 1–2 s of IDs, so a slow or failing lease is ridden over
    /// before callers wait at all, and a crashed process wastes at most about 2 s of its
    /// consumption (a gap, never a duplicate) at one lease request per tag per second.
    pub lease_period: Duration,
    /// Smallest lease. Default 100.
    pub min_lease: u32,
    /// Largest lease, at most [`MAX_RANGE_BATCH`] (the default).
    pub max_lease: u32,
    /// The first lease's size. Default 1000.
    pub initial_lease: u32,
    /// Leases queued behind the current range before prefetching stops. Default 1 (Leaf's
    /// double buffer: the current segment and the next).
    pub depth: u32,
    /// Snowflake IDs: no ID is handed out from a range more than this after its lease was
    /// requested (plus the refill task's scheduling delay). Default 1 s.
    pub max_staleness: Duration,
    /// How often the refill task wakes on its own (retiring stale snowflake ranges, catching
    /// up). Below `max_staleness`. Default 100 ms.
    pub tick: Duration,
    /// The first retry of a failed lease waits this, doubling up to `retry_max`. Default 50 ms.
    pub retry_min: Duration,
    /// Default 1 s.
    pub retry_max: Duration,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            max_wait: Duration::from_secs(5),
            lease_period: Duration::from_secs(1),
            min_lease: 100,
            max_lease: MAX_RANGE_BATCH,
            initial_lease: 1000,
            depth: 1,
            max_staleness: Duration::from_secs(1),
            tick: Duration::from_millis(100),
            retry_min: Duration::from_millis(50),
            retry_max: Duration::from_secs(1),
        }
    }
}

impl PoolOptions {
    /// Checks the options are usable together.
    pub fn validate(&self) -> Result<(), PoolError> {
        let bad = |m: String| Err(PoolError::InvalidOptions(m));
        if self.min_lease == 0 || self.min_lease > self.max_lease || self.max_lease > MAX_RANGE_BATCH {
            return bad(format!(
                "need 1 <= min_lease ({}) <= max_lease ({}) <= {MAX_RANGE_BATCH}",
                self.min_lease, self.max_lease
            ));
        }
        if !(self.min_lease..=self.max_lease).contains(&self.initial_lease) {
            return bad(format!("initial_lease ({}) must be within [min_lease, max_lease]", self.initial_lease));
        }
        if !(1..=16).contains(&self.depth) {
            return bad(format!("depth must be from 1 to 16, got {}", self.depth));
        }
        if self.lease_period.is_zero() || self.tick.is_zero() || self.retry_min.is_zero() {
            return bad("lease_period, tick and retry_min must be above zero".into());
        }
        if self.tick >= self.max_staleness {
            return bad(format!("tick ({:?}) must be below max_staleness ({:?})", self.tick, self.max_staleness));
        }
        if self.retry_min > self.retry_max {
            return bad("retry_min must not exceed retry_max".into());
        }
        Ok(())
    }
}

/// Per-tag buffers of leased ID ranges over one [`RangeSource`] (usually a
/// [`Client`](crate::Client)). Cheap to clone; clones share the tags.
#[derive(Clone)]
pub struct IdPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    source: Arc<dyn RangeSource>,
    options: PoolOptions,
    runtime: Handle,
    tags: Mutex<BTreeMap<(IdKind, String), TagPool>>,
}

impl std::fmt::Debug for IdPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdPool").field("options", &self.inner.options).finish_non_exhaustive()
    }
}

impl IdPool {
    /// A pool over `source` whose refill tasks run on the current tokio runtime
    /// ([`PoolError::NoRuntime`] outside one).
    pub fn new(source: impl RangeSource, options: PoolOptions) -> Result<IdPool, PoolError> {
        let runtime = Handle::try_current().map_err(|_| PoolError::NoRuntime)?;
        IdPool::with_runtime(source, options, runtime)
    }

    /// A pool whose refill tasks run on `runtime`.
    pub fn with_runtime(source: impl RangeSource, options: PoolOptions, runtime: Handle) -> Result<IdPool, PoolError> {
        options.validate()?;
        let inner = PoolInner { source: Arc::new(source), options, runtime, tags: Mutex::new(BTreeMap::new()) };
        Ok(IdPool { inner: Arc::new(inner) })
    }

    /// The options the pool was built with.
    pub fn options(&self) -> &PoolOptions {
        &self.inner.options
    }

    /// The handle of `tag`'s segment IDs; the first call starts leasing at once, later calls
    /// return the same buffer.
    pub fn segment(&self, tag: &str) -> Result<TagPool, PoolError> {
        self.handle(IdKind::Segment, tag)
    }

    /// The handle of snowflake IDs leased under `key` (the service records the key for
    /// auditing; validated like a tag). IDs are at most
    /// [`PoolOptions::max_staleness`] old (see the `snowflake` module's bound).
    pub fn snowflake(&self, key: &str) -> Result<TagPool, PoolError> {
        self.handle(IdKind::Snowflake, key)
    }

    /// A snapshot of every tag's and key's metrics.
    pub fn stats(&self) -> PoolStats {
        let tags = self.inner.tags.lock().unwrap_or_else(|e| e.into_inner());
        PoolStats { tags: tags.values().map(TagPool::stats).collect() }
    }

    fn handle(&self, kind: IdKind, name: &str) -> Result<TagPool, PoolError> {
        validate_tag(name).map_err(|e| PoolError::InvalidName { kind, name: name.into(), reason: e.to_string() })?;
        let mut tags = self.inner.tags.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = tags.get(&(kind, name.to_string())) {
            return Ok(pool.clone());
        }
        let pool = self.start(kind, name);
        tags.insert((kind, name.to_string()), pool.clone());
        Ok(pool)
    }

    /// A new tag buffer and its refill task.
    fn start(&self, kind: IdKind, name: &str) -> TagPool {
        let o = &self.inner.options;
        let _enter = self.inner.runtime.enter();
        let buffer = Buffer::new(tokio::time::Instant::now());
        let shared = Arc::new(TagShared::new(kind, name.to_string(), buffer, o.max_wait));
        let freshness =
            (kind == IdKind::Snowflake).then_some(Freshness { max_staleness: o.max_staleness, tick: o.tick });
        let period = freshness.map_or(o.lease_period, |f| f.lease_period(o.lease_period));
        let refill = refill::Refill {
            shared: Arc::downgrade(&shared),
            wake: shared.wake.clone(),
            kind,
            name: name.to_string(),
            source: self.inner.source.clone(),
            sizing: Sizing { min: o.min_lease, max: o.max_lease, period },
            initial: o.initial_lease,
            depth: o.depth.into(),
            tick: o.tick,
            freshness,
            retry_min: o.retry_min,
            retry_max: o.retry_max,
        };
        self.inner.runtime.spawn(refill::run(refill));
        TagPool { shared }
    }
}
