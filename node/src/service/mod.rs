//! The service core: the one place where requests become work, called by every edge (the HTTP
//! edge in `node/src/http/`, the gRPC edge in `node/src/grpc/`, the internal RPC mount) and
//! naming none of them (`layering.rs` checks it).
//!
//! An edge parses its wire form, calls an operation here with typed arguments, and maps the
//! typed answer or the [`ApiError`] back to its wire form (an HTTP status in `http/error.rs`,
//! a gRPC status in `grpc/error.rs`). What a client may read in an error is decided once, in
//! [`error`].
//!
//! Layout:
//! - this file: [`App`] (what every operation needs; private fields, one constructor) and the
//!   one "known tag, or ask the leader" rule ([`App::known`]).
//! - [`error`]: [`ApiError`] and the conversions from every layer's typed errors (peer details
//!   never reach a client).
//! - [`validate`]: one function per input rule (tags, keys, counts, steps, descriptions, node
//!   IDs), shared by the edges.
//! - [`auth`]: who is calling an admin or internal operation, over the credential checks of
//!   [`crate::access::credentials`].
//! - [`gapless`]: a gapless series' number for an idempotency key: issue, reserve, confirm,
//!   void, and the ledger's pages.
//! - [`reservations`]: the task that voids expired reservations (on the leader) and keeps
//!   their gauges.
//! - [`ids`]: segment takes (buffers, monotonic takes, obfuscated tags), ranges,
//!   snowflake takes and decoding — the per-ID path.
//! - [`tags`]: create, show, update, list, decode obfuscated IDs, the allocation journal, the
//!   clock fault.
//! - [`tag_admin`]: the tag changes and audit notes as admin changes through Raft, the checks
//!   of their answers, and the audit retention's stamp.
//! - [`templates`]: tag templates (put, list, delete) and making a tag from its template on
//!   its first ID request.
//! - [`tokens`]: scoped tokens and the audit trail.
//! - [`regions`]: a global tier's regions: join, list, retire, and blocks of a tag's IDs.
//! - [`homes`]: a global tier's homes of monotonic tags and gapless series: claims, a region's
//!   lease, releases, an operator's moves, and their list.
//! - [`backup`]: a backup on request, and the scheduled ones' status.
//! - [`cluster`]: status, membership changes, the internal RPC.
//! - [`health`]: readiness, `/cache` and `/db` views, the metrics' node facts.
//! - [`dashboard`]: the dashboard's data (every member probed over the internal RPC).
//! - [`recent`]: the ring of recent error answers the dashboard shows.
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use leaf_api::ErrorCode;

use crate::clock::SystemClock;
use crate::config::Config;
use crate::forecast::sampler::Forecasts;
use crate::metrics::Metrics;
use crate::raft::RaftNode;
use crate::snowflake::Snowflake;
use crate::tags::Tags;

pub mod auth;
pub mod backup;
pub mod cluster;
pub mod dashboard;
pub mod error;
pub mod gapless;
pub mod health;
pub mod homes;
pub mod ids;
pub mod recent;
pub mod regions;
pub mod reservations;
pub mod tag_admin;
pub mod tags;
pub mod templates;
pub mod tokens;
pub mod validate;

pub use error::ApiError;

/// What the node is made of, for [`App::new`].
pub struct Parts {
    pub access: crate::access::Access,
    pub config: Arc<Config>,
    pub raft: RaftNode,
    pub tags: Tags,
    pub snowflake: Snowflake,
    pub clock: Arc<SystemClock>,
    pub metrics: Arc<Metrics>,
    pub bootstrapped: Arc<AtomicBool>,
    pub tls: Option<Arc<crate::tls::Tls>>,
    pub forecasts: Arc<Forecasts>,
    pub peer_clocks: Arc<crate::clock_watch::PeerClocks>,
    pub backups: crate::backup::Backups,
    pub monotonic: Arc<crate::profiles::monotonic::Monotonic>,
    pub numbers: Arc<crate::gapless::Numbers>,
}

/// Everything an operation needs. The edges hold an `Arc<App>` and call its operations; they
/// read only the configuration, metrics, access and TLS through accessors.
pub struct App {
    /// Scoped tokens and quotas ([`crate::access`]).
    access: crate::access::Access,
    config: Arc<Config>,
    raft: RaftNode,
    tags: Tags,
    snowflake: Snowflake,
    /// The node's clock, skewed by `POST /admin/fault/clock` when fault injection is on.
    clock: Arc<SystemClock>,
    metrics: Arc<Metrics>,
    /// Set once the configured bootstrap tags exist; the node is not ready before.
    bootstrapped: Arc<AtomicBool>,
    /// The listener's TLS (`[tls]`); `None`: plaintext.
    tls: Option<Arc<crate::tls::Tls>>,
    /// The exhaustion forecasts (`/cache`, `/health`, `/metrics`).
    forecasts: Arc<Forecasts>,
    /// The peers' clock offsets (`/metrics`).
    peer_clocks: Arc<crate::clock_watch::PeerClocks>,
    /// Backups on request and the scheduled ones' status.
    backups: crate::backup::Backups,
    /// Monotonic tags: this node's grouped takes ([`crate::profiles::monotonic`]).
    monotonic: Arc<crate::profiles::monotonic::Monotonic>,
    /// Gapless numbers: this node's grouped issues ([`crate::gapless`]).
    numbers: Arc<crate::gapless::Numbers>,
    /// The latest error answers (the dashboard).
    recent_errors: recent::RecentErrors,
    /// When the node started (the dashboard's uptime).
    started: std::time::Instant,
}

impl App {
    pub fn new(p: Parts) -> App {
        App {
            access: p.access,
            config: p.config,
            raft: p.raft,
            tags: p.tags,
            snowflake: p.snowflake,
            clock: p.clock,
            metrics: p.metrics,
            bootstrapped: p.bootstrapped,
            tls: p.tls,
            forecasts: p.forecasts,
            peer_clocks: p.peer_clocks,
            backups: p.backups,
            monotonic: p.monotonic,
            numbers: p.numbers,
            recent_errors: Default::default(),
            started: std::time::Instant::now(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The listener's TLS, if any.
    pub fn tls(&self) -> Option<&Arc<crate::tls::Tls>> {
        self.tls.as_ref()
    }

    /// The node's clock (for timestamps the edges record).
    pub fn now_ms(&self) -> i64 {
        use crate::clock::Clock;
        self.clock.now_ms()
    }

    /// Keeps an error answer for the dashboard.
    pub fn record_error(&self, e: leaf_api::dashboard::RecentError) {
        self.recent_errors.record(e);
    }

    /// What `look` finds for `tag`. A tag unknown here may have just been created through
    /// another node: under `raft.unknown_tags = "local"` (the default), a node caught up with a leader it
    /// heard from recently
    /// ([`RaftNode::caught_up`](crate::raft::RaftNode::caught_up)) answers from its own state,
    /// at most `2 × raft.heartbeat_ms` behind; any other node first waits until it has applied
    /// everything committed so far (a read index through the leader, no log write) and looks
    /// again. A tag nowhere is 404 `tag_not_found`.
    pub async fn known<T>(&self, tag: &str, look: impl Fn(&App) -> Option<T>) -> Result<T, ApiError> {
        if let Some(found) = look(self) {
            return Ok(found);
        }
        if self.raft.caught_up() {
            self.metrics.local_miss();
            return Err(self.missing(tag));
        }
        self.raft.read_barrier().await.map_err(|e| {
            tracing::debug!(tag, error = %e, "read barrier failed");
            ApiError::new(
                ErrorCode::NotReady,
                format!("cannot confirm whether tag {tag:?} exists: {}", e.public_message()),
            )
        })?;
        look(self).ok_or_else(|| self.missing(tag))
    }

    /// 404 `tag_not_found` for a tag `look` did not find: archived, or not there at all.
    fn missing(&self, tag: &str) -> ApiError {
        match self.raft.state().tag(tag) {
            Some(r) if r.archived_ms().is_some() => ApiError::new(
                ErrorCode::TagNotFound,
                format!("tag {tag:?} is archived: it hands out no ID until it is restored"),
            ),
            _ => tag_not_found(tag),
        }
    }
}

/// 404 `tag_not_found`.
pub fn tag_not_found(tag: &str) -> ApiError {
    ApiError::new(ErrorCode::TagNotFound, format!("tag {tag:?} does not exist"))
}
