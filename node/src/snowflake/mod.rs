//! Snowflake mode: a worker ID registered through Raft, a durable time window, and the clock
//! checks that keep a node from ever issuing an ID twice.
//!
//! Layout:
//! - [`generator`]: the bit layout and the lock-free generator (the per-ID hot path);
//! - [`clock_check`]: the startup peer clock check's checked arithmetic;
//! - this file: [`Snowflake`], the request path's handle (waits on short stalls, turns the
//!   rest into errors), and the worker actor that owns everything slow: the startup peer clock
//!   check, registration and lease renewal through Raft, raising the durable high-water mark,
//!   and the local state file.
//!
//! # Guarantees and how they are kept
//! - **Worker IDs** come from the Raft log (`RegisterWorker`), keyed by node ID, so a node
//!   that restarts at another address gets its own ID back. The lowest free ID of 0..1023 is
//!   given; exhaustion is an error.
//! - **Time window** (PD's TSO): before an ID with timestamp `t` is issued, a high-water mark
//!   `>= t` is fsynced to `<data_dir>/snowflake.state` and then proposed through Raft
//!   (`RenewWorker`). The mark is raised to `now + time_window_ms` when less than half of the
//!   window is left, or when a request needs a later millisecond.
//! - **Logical milliseconds**: an ID's millisecond is the wall clock's when the clock is past
//!   the last issued one; otherwise the generator finishes the last millisecond's sequence and
//!   moves on to the next millisecond ahead of the clock, never above the durable mark. So a
//!   burst above 4,096 IDs per ms borrows later milliseconds instead of waiting.
//! - **Restart**: the node issues strictly above its *floor*, the larger of the local and the
//!   Raft mark, and starts **at once**: its first mark is `max(now + time_window_ms, floor +
//!   50 ms)`, fsynced before the first ID, and IDs run from the floor forward, ahead of the
//!   clock until it catches up. A floor more than `max_startup_wait_ms` ahead of the clock
//!   keeps snowflake off with the reason in `/health`. A damaged state file keeps snowflake off
//!   instead of forgetting the mark (Leaf #97 bypassed the check via its cache).
//! - **How far ahead of the clock**: an ID's timestamp is at most
//!   `max(now + time_window_ms, floor + 50)`, `now` being the issuing request's wall-clock
//!   reading (every mark is `time_window_ms` above some earlier reading, or a start's
//!   `floor + 50`, and no ID is issued while the clock reads below an earlier reading). With the
//!   startup check (`floor <= now + max_startup_wait_ms`) that is at most
//!   `max(time_window_ms, max_startup_wait_ms + 50)` ms ahead of the clock (defaults: 5,050
//!   ms). After an ordinary crash and restart the floor is below `now + time_window_ms`
//!   already, so the bound is `time_window_ms`, as in steady state; the floor term only binds
//!   when the clock went back across the restart or a recycled worker ID's floor is ahead of
//!   this clock. (Being only 50 ms above the floor, such a start cannot ratchet the floor up
//!   across a fast crash loop.)
//! - **Lease**: every renewal extends the worker's lease by `lease_ttl_ms`, measured locally
//!   from before the proposal on the monotonic clock; a node that cannot renew in time stops
//!   issuing. The state machine gives an ID to another node only after its holder left the
//!   membership and `2 × lease_ttl_ms` passed since its last renewal, and the new holder starts
//!   above the old high-water mark and the handover time.
//! - **Weak dependency**: the state file also keeps the worker ID and the lease end, so a node
//!   restarting with a lease that has not run out serves under its old ID at once, before (or
//!   without) reaching the quorum; the registration through Raft runs alongside, and a higher
//!   Raft mark for that ID restarts the generator above it.
//! - **Clock checks**: at start, RTT-compensated offsets against every reachable peer (samples
//!   with a negative or over-timeout round trip, or an offset beyond a year, are discarded and
//!   counted); if the average exceeds `max_peer_offset_ms`, snowflake stays off (segment mode
//!   is unaffected). At runtime a wall clock that reads below its highest earlier reading by at
//!   most `max_backward_ms` waits twice the gap; further is a 503 `clock_moved_backwards`,
//!   never a duplicate. Running ahead of the clock because of the floor or a burst is no error.
pub mod clock_check;
pub mod generator;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use leaf_api::codec;
use leaf_api::types::SnowflakeHealth;
use leaf_raft_store::{ApplyError, WorkerGrant};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::clock::Clock;
use crate::config::SnowflakeConfig;
use crate::raft::{ProposeError, RaftNode};
use generator::{Generator, Layout, Stall};

/// Name of the state file in the data dir.
pub const STATE_FILE: &str = "snowflake.state";
/// How long a request may wait for the clock to catch up with IDs issued ahead of it (the
/// node issued a whole window ahead: more than 4,096 IDs per ms for seconds).
const CLOCK_WAIT: Duration = Duration::from_secs(1);
/// How long a request may wait for the high-water mark to be raised.
const WINDOW_WAIT: Duration = Duration::from_secs(2);
/// A request raises the mark itself only when that gains at least this many milliseconds
/// (`time_window_ms / 8`, at most this); otherwise it waits for the clock to move that far.
/// Bounds the fsyncs and Raft proposals of a node kept at the window's edge by overload.
const MIN_RAISE_MS: u64 = 50;
/// Pause between failed registrations.
const REGISTER_RETRY: Duration = Duration::from_secs(1);
/// Timeout of one peer's answer in the startup clock check. Short: the check sits on the
/// restart path, a peer that is down or cut off costs this much, and an answer that took
/// longer is too uncertain (± half the round trip) to judge a 1 s threshold anyway.
const PEER_TIME_TIMEOUT: Duration = Duration::from_millis(300);
/// A start's first mark is at least this far above the floor, even when the floor is more
/// than the window ahead of the clock: a light load then never waits for the clock.
const START_MARGIN_MS: i64 = 50;

/// Why a request got no (or not all) snowflake IDs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnowflakeError {
    #[error("snowflake service is off on this node: {0}")]
    NotServing(String),
    #[error("the clock moved back by {by_ms} ms (tolerance {tolerance_ms} ms); refusing to issue IDs")]
    ClockBackwards { by_ms: i64, tolerance_ms: u64 },
    #[error(
        "no millisecond within the durable time window was free for {0:?}: this node issued IDs as far ahead \
         of its clock as the window allows (more than 4,096 per ms) and the clock did not catch up"
    )]
    ClockStalled(Duration),
    #[error("the clock is outside the ID layout's range (epoch to 69 years after it)")]
    OutOfRange,
    #[error("{0}")]
    Exhausted(String),
}

/// What the state file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateFile {
    pub node_id: u64,
    pub worker_id: u16,
    /// No ID of this worker was issued above this Unix millisecond.
    pub high_water_ms: i64,
    /// Leader time at which the worker lease ends unless renewed.
    pub lease_expires_ms: i64,
}

impl StateFile {
    /// Reads the state file; `Ok(None)` when there is none (a new node).
    pub fn load(path: &Path) -> Result<Option<StateFile>, String> {
        match std::fs::read(path) {
            Ok(bytes) => codec::decode(&bytes).map(Some).map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Writes the state file atomically and durably: a temporary file, fsync, rename, fsync
    /// of the directory.
    pub fn store(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let bytes = codec::encode(self).map_err(std::io::Error::other)?;
        let tmp = path.with_extension("tmp");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

/// The request path's handle on snowflake mode.
#[derive(Clone)]
pub struct Snowflake {
    gen: Arc<Generator>,
    actor: Option<Addr<WorkerActor>>,
    status: Arc<Mutex<Status>>,
    max_backward_ms: u64,
    window_ms: u64,
}

/// What the actor reports for `/health`.
#[derive(Debug, Clone, Default)]
struct Status {
    state: &'static str,
    reason: Option<String>,
    peer_offset_ms: Option<i64>,
    /// Peer clock samples the startup check discarded as out of range.
    peer_samples_discarded: u32,
}

impl Snowflake {
    /// Snowflake mode turned off by configuration: every request is refused.
    pub fn disabled(cfg: &SnowflakeConfig, clock: Arc<dyn Clock>) -> Snowflake {
        let status =
            Status { state: "disabled", reason: Some("snowflake.enabled is false".into()), ..Default::default() };
        Snowflake {
            gen: Arc::new(Generator::new(Layout { epoch_ms: cfg.epoch_ms }, clock, cfg.sequence_random_start)),
            actor: None,
            status: Arc::new(Mutex::new(status)),
            max_backward_ms: cfg.max_backward_ms,
            window_ms: cfg.time_window_ms,
        }
    }

    /// Starts the worker actor on `arbiter`; it registers through `raft` in the background.
    pub fn start(
        cfg: &SnowflakeConfig,
        data_dir: &Path,
        raft: RaftNode,
        rt: tokio::runtime::Handle,
        arbiter: &actix::ArbiterHandle,
    ) -> Snowflake {
        let clock = raft.clock().clone();
        let gen = Arc::new(Generator::new(Layout { epoch_ms: cfg.epoch_ms }, clock, cfg.sequence_random_start));
        let status = Arc::new(Mutex::new(Status { state: "starting", ..Default::default() }));
        let actor = WorkerActor {
            gen: gen.clone(),
            raft,
            rt,
            cfg: cfg.clone(),
            path: data_dir.join(STATE_FILE),
            status: status.clone(),
            file: None,
            checked: false,
            checking: false,
            off: None,
            assigned: None,
            started: false,
            registered: false,
            registering: false,
            next_register: Instant::now(),
            renewing: false,
            persisting: false,
            waiters: Vec::new(),
        };
        let addr = WorkerActor::start_in_arbiter(arbiter, |_| actor);
        Snowflake {
            gen,
            actor: Some(addr),
            status,
            max_backward_ms: cfg.max_backward_ms,
            window_ms: cfg.time_window_ms,
        }
    }

    pub fn layout(&self) -> Layout {
        self.gen.layout()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn not_serving(&self) -> SnowflakeError {
        let s = self.lock();
        if s.state == "serving" && !self.gen.serving() {
            return SnowflakeError::NotServing(
                "the worker lease ran out: it could not be renewed through Raft in time".into(),
            );
        }
        let why = s.reason.clone().unwrap_or_else(|| format!("snowflake is {}", s.state));
        if s.state == "exhausted" {
            SnowflakeError::Exhausted(why)
        } else {
            SnowflakeError::NotServing(why)
        }
    }

    /// The smallest gain in milliseconds for which a request raises the mark itself.
    fn min_raise_ms(&self) -> i64 {
        (self.window_ms / 8).clamp(1, MIN_RAISE_MS) as i64
    }

    /// Takes `n` IDs, calling `sink(first, count)` for each run of consecutive IDs. Lock-free
    /// inside the durable window; waits for the window to be raised, for a small clock
    /// rollback, or, when it issued a whole window ahead of the clock, for the clock.
    pub async fn take(&self, n: u64, mut sink: impl FnMut(i64, u64) + Send) -> Result<(), SnowflakeError> {
        let mut left = n;
        let mut waited_back = false;
        let mut stalled_since: Option<Instant> = None;
        while left > 0 {
            match self.gen.try_take(left, &mut sink) {
                Ok(k) => {
                    left -= k;
                    waited_back = false;
                    stalled_since = None;
                }
                Err(Stall::Window { next_ms, ahead_ms }) => {
                    let since = *stalled_since.get_or_insert_with(Instant::now);
                    // A mark of now + window covers the next millisecond with room to spare.
                    let raise_from = (self.window_ms as i64).saturating_sub(self.min_raise_ms());
                    if ahead_ms <= raise_from {
                        if since.elapsed() > WINDOW_WAIT {
                            return Err(self.window_error());
                        }
                        self.raise_window(next_ms).await?;
                        continue;
                    }
                    // As far ahead of the clock as the window allows: wait for the clock.
                    if since.elapsed() > CLOCK_WAIT {
                        return Err(SnowflakeError::ClockStalled(CLOCK_WAIT));
                    }
                    let wait = ahead_ms.saturating_sub(raise_from).clamp(1, 10) as u64;
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                }
                Err(Stall::Backwards { by_ms }) => {
                    if waited_back || by_ms > self.max_backward_ms as i64 {
                        return Err(SnowflakeError::ClockBackwards { by_ms, tolerance_ms: self.max_backward_ms });
                    }
                    // Leaf: wait twice the offset, then try once more.
                    waited_back = true;
                    tokio::time::sleep(Duration::from_millis(2 * by_ms as u64)).await;
                }
                Err(Stall::NotServing) => return Err(self.not_serving()),
                Err(Stall::OutOfRange) => return Err(SnowflakeError::OutOfRange),
            }
        }
        Ok(())
    }

    fn window_error(&self) -> SnowflakeError {
        SnowflakeError::NotServing(format!("the time high-water mark could not be made durable within {WINDOW_WAIT:?}"))
    }

    /// Asks the actor to raise the high-water mark to at least Unix ms `need_ms` and waits
    /// until it is durable.
    async fn raise_window(&self, need_ms: i64) -> Result<(), SnowflakeError> {
        let Some(actor) = &self.actor else { return Err(self.not_serving()) };
        let rx = match tokio::time::timeout(WINDOW_WAIT, actor.send(RaiseWindow { need_ms })).await {
            Ok(Ok(rx)) => rx,
            _ => return Err(SnowflakeError::NotServing("the worker actor is not answering".into())),
        };
        match tokio::time::timeout(WINDOW_WAIT, rx).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(why))) => Err(SnowflakeError::NotServing(why)),
            _ => Err(self.window_error()),
        }
    }

    /// The `/health` view.
    pub fn health(&self) -> SnowflakeHealth {
        let s = self.lock().clone();
        let serving = self.gen.serving();
        let (state, reason) = match (s.state, serving) {
            ("serving", true) => ("serving", s.reason),
            ("serving", false) => {
                ("off", Some("the worker lease ran out: it could not be renewed through Raft".into()))
            }
            ("exhausted", _) => ("off", s.reason),
            (st, _) => (st, s.reason),
        };
        SnowflakeHealth {
            state: state.to_string(),
            worker_id: self.gen.worker_id(),
            reason,
            high_water_ms: self.gen.worker_id().map(|_| self.gen.limit_ms()),
            lease_remaining_ms: self.gen.lease_remaining_ms(),
            peer_clock_offset_ms: s.peer_offset_ms,
            peer_clock_samples_discarded: s.peer_samples_discarded,
        }
    }
}

/// Raise the high-water mark to at least `need_ms` now (a request reached it); answered once
/// a raise is durable.
#[derive(Message)]
#[rtype(result = "oneshot::Receiver<Result<(), String>>")]
struct RaiseWindow {
    need_ms: i64,
}

/// A worker ID this node holds or is about to serve under.
#[derive(Debug, Clone, Copy)]
struct Assigned {
    worker_id: u16,
    /// Issue strictly above this Unix millisecond.
    floor_ms: i64,
    /// Leader time of the lease end (kept in the state file).
    lease_expires_ms: i64,
    /// Lease end on the monotonic clock.
    lease_until: Instant,
}

/// Owns registration, renewal, the window and the state file.
struct WorkerActor {
    gen: Arc<Generator>,
    raft: RaftNode,
    rt: tokio::runtime::Handle,
    cfg: SnowflakeConfig,
    path: PathBuf,
    status: Arc<Mutex<Status>>,
    /// What the state file holds (as loaded or last written).
    file: Option<StateFile>,
    checked: bool,
    checking: bool,
    /// Why snowflake stays off until a restart.
    off: Option<String>,
    assigned: Option<Assigned>,
    started: bool,
    /// The Raft log confirmed `assigned` since start.
    registered: bool,
    registering: bool,
    next_register: Instant,
    renewing: bool,
    persisting: bool,
    waiters: Vec<oneshot::Sender<Result<(), String>>>,
}

impl Actor for WorkerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        match StateFile::load(&self.path) {
            Ok(Some(f)) if f.node_id != self.raft.node_id() => self.turn_off(format!(
                "{} belongs to node {}, not to this node {}; refusing to guess its time high-water mark",
                self.path.display(),
                f.node_id,
                self.raft.node_id()
            )),
            Ok(f) => self.file = f,
            Err(e) => self.turn_off(format!(
                "the snowflake state file is unreadable ({e}); without its time high-water mark this node could \
                 repeat IDs. Restore it or, once the clock is surely past every ID this node issued, delete it"
            )),
        }
        let tick = Duration::from_millis((self.cfg.time_window_ms / 6).max(20));
        ctx.run_interval(tick, |act, ctx| act.tick(ctx));
        self.tick(ctx);
    }

    fn stopping(&mut self, _: &mut Context<Self>) -> Running {
        self.gen.stop();
        Running::Stop
    }
}

impl WorkerActor {
    fn set_status(&self, state: &'static str, reason: Option<String>) {
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        s.state = state;
        s.reason = reason;
    }

    fn turn_off(&mut self, reason: String) {
        tracing::error!(reason = %reason, "snowflake service is OFF on this node");
        self.gen.stop();
        self.started = false;
        self.set_status("off", Some(reason.clone()));
        self.off = Some(reason);
        for w in self.waiters.drain(..) {
            let _ = w.send(Err("snowflake service is off".into()));
        }
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        if self.off.is_some() {
            return;
        }
        if !self.checked {
            self.check_clock(ctx);
            return;
        }
        if !self.registered && !self.registering && Instant::now() >= self.next_register {
            self.register(ctx);
        }
        if !self.started {
            self.try_start(ctx);
            return;
        }
        let now = self.gen.now_ms();
        let half = self.cfg.time_window_ms as i64 / 2;
        if self.gen.limit_ms().saturating_sub(now) < half {
            self.persist(ctx);
        } else if self.registered && self.gen.lease_remaining_ms().unwrap_or(0) < self.cfg.lease_ttl_ms / 2 {
            self.renew(ctx, self.gen.limit_ms());
        }
    }

    /// The startup peer clock check; runs once the node knows its membership.
    fn check_clock(&mut self, ctx: &mut Context<Self>) {
        if self.checking || !self.raft.has_membership() {
            if !self.checking {
                self.set_status("starting", Some("waiting for the cluster membership (clock check)".into()));
            }
            return;
        }
        self.checking = true;
        let raft = self.raft.clone();
        let task = self.rt.spawn(async move {
            let calls = raft.peer_addrs().into_iter().map(|(id, addr)| {
                let raft = raft.clone();
                async move { (id, raft.peer_time(&addr, PEER_TIME_TIMEOUT).await) }
            });
            futures::future::join_all(calls).await
        });
        ctx.spawn(async move { task.await.unwrap_or_default() }.into_actor(self).map(|answers, act, ctx| {
            act.checking = false;
            let asked = answers.len();
            let mut samples = Vec::new();
            let mut discarded = 0u32;
            for (id, r) in answers {
                match r {
                    Ok((before, peer, after)) => match clock_check::sample(before, peer, after, PEER_TIME_TIMEOUT) {
                        Ok(s) => {
                            tracing::info!(peer = id, offset_ms = s.offset_ms, rtt_ms = s.rtt_ms, "peer clock");
                            samples.push(s);
                        }
                        Err(why) => {
                            discarded = discarded.saturating_add(1);
                            tracing::warn!(peer = id, before, peer_ms = peer, after, %why, "peer clock sample discarded");
                        }
                    },
                    Err(e) => tracing::info!(peer = id, error = %e, "peer clock unknown (unreachable)"),
                }
            }
            let avg = clock_check::average_offset(&samples);
            {
                let mut status = act.status.lock().unwrap_or_else(|e| e.into_inner());
                status.peer_offset_ms = avg;
                status.peer_samples_discarded = discarded;
            }
            match avg {
                Some(avg) if avg.unsigned_abs() > act.cfg.max_peer_offset_ms => {
                    act.turn_off(format!(
                        "this node's clock is {} ms {} the average of {} reachable peer(s), beyond \
                         snowflake.max_peer_offset_ms = {}; fix the clock (NTP) and restart the node",
                        avg.unsigned_abs(),
                        if avg > 0 { "behind" } else { "ahead of" },
                        samples.len(),
                        act.cfg.max_peer_offset_ms
                    ));
                }
                _ => {
                    if avg.is_none() && asked > 0 {
                        tracing::warn!(
                            peers = asked,
                            discarded,
                            "no usable peer clock sample; relying on the high-water marks alone"
                        );
                    }
                    act.checked = true;
                    act.use_state_file();
                    act.tick(ctx);
                }
            }
        }));
    }

    /// Weak dependency: a lease in the state file that has not run out lets the node serve
    /// under its old worker ID before (or without) reaching the quorum.
    fn use_state_file(&mut self) {
        let Some(f) = self.file else { return };
        let now = self.gen.now_ms();
        let left = f.lease_expires_ms.saturating_sub(now);
        if left <= 0 {
            return;
        }
        tracing::info!(worker_id = f.worker_id, lease_left_ms = left, "using the worker ID from the state file");
        self.assigned = Some(Assigned {
            worker_id: f.worker_id,
            floor_ms: f.high_water_ms,
            lease_expires_ms: f.lease_expires_ms,
            lease_until: Instant::now() + Duration::from_millis(left as u64),
        });
    }

    fn register(&mut self, ctx: &mut Context<Self>) {
        self.registering = true;
        let raft = self.raft.clone();
        let lease_ms = self.cfg.lease_ttl_ms as i64;
        let sent = Instant::now();
        let task = self.rt.spawn(async move { raft.register_worker(lease_ms).await });
        ctx.spawn(task.into_actor(self).map(move |res, act, ctx| {
            act.registering = false;
            let res = res.unwrap_or_else(|e| Err(ProposeError::Fatal(e.to_string())));
            match res {
                Ok(g) => act.registered_as(g, sent),
                Err(ProposeError::Rejected(ApplyError::WorkersExhausted)) => {
                    let why = ApplyError::WorkersExhausted.to_string();
                    if !act.started {
                        act.set_status("exhausted", Some(why));
                    }
                    act.next_register = Instant::now() + 10 * REGISTER_RETRY;
                }
                Err(e) => {
                    if !act.started {
                        act.set_status("starting", Some(format!("registering a worker ID through Raft: {e}")));
                    }
                    tracing::debug!(error = %e, "worker registration failed; retrying");
                    act.next_register = Instant::now() + REGISTER_RETRY;
                }
            }
            act.tick(ctx);
        }));
    }

    fn registered_as(&mut self, g: WorkerGrant, sent: Instant) {
        let lease_until = sent + Duration::from_millis(self.cfg.lease_ttl_ms);
        self.registered = true;
        match self.assigned {
            Some(a) if a.worker_id == g.worker_id => {
                let raised = g.not_before_ms > a.floor_ms;
                let a = self.assigned.insert(Assigned {
                    floor_ms: a.floor_ms.max(g.not_before_ms),
                    lease_expires_ms: g.lease_expires_ms,
                    lease_until: a.lease_until.max(lease_until),
                    ..a
                });
                self.gen.extend_lease(a.lease_until);
                if raised && self.started {
                    // The log knows a higher mark for this ID than the state file did (a file
                    // restored from a backup?): start again above it, through the startup check.
                    tracing::warn!(
                        worker_id = a.worker_id,
                        floor_ms = a.floor_ms,
                        "the Raft mark is above the state file's; restarting above it"
                    );
                    self.gen.stop();
                    self.started = false;
                }
            }
            other => {
                if let Some(old) = other {
                    tracing::warn!(old = old.worker_id, new = g.worker_id, "the Raft log gave another worker ID");
                    self.gen.stop();
                    self.started = false;
                }
                // The state file's mark covers this node's IDs of that worker ID only.
                let local = self.file.filter(|f| f.worker_id == g.worker_id).map_or(i64::MIN, |f| f.high_water_ms);
                self.assigned = Some(Assigned {
                    worker_id: g.worker_id,
                    floor_ms: g.not_before_ms.max(local),
                    lease_expires_ms: g.lease_expires_ms,
                    lease_until,
                });
                tracing::info!(worker_id = g.worker_id, "registered snowflake worker ID through Raft");
            }
        }
    }

    /// Starts issuing at once from the floor forward (ahead of the clock if the floor is),
    /// after making the first mark durable; refuses a floor too far ahead of the clock.
    fn try_start(&mut self, ctx: &mut Context<Self>) {
        let Some(a) = self.assigned else { return };
        if self.persisting {
            return;
        }
        let now = self.gen.now_ms();
        let ahead = a.floor_ms.saturating_sub(now);
        if ahead > 0 && ahead.unsigned_abs() > self.cfg.max_startup_wait_ms {
            self.turn_off(format!(
                "the clock is {ahead} ms behind the time high-water mark of worker ID {} (the node may have \
                 issued IDs up to {} ms); more than snowflake.max_startup_wait_ms = {}. Fix the clock and \
                 restart the node",
                a.worker_id, a.floor_ms, self.cfg.max_startup_wait_ms
            ));
            return;
        }
        if ahead > 0 {
            tracing::info!(
                worker_id = a.worker_id,
                ahead_ms = ahead,
                "the high-water mark is ahead of the clock: issuing above it at once, ahead of the clock until it \
                 catches up"
            );
        }
        self.persist(ctx);
    }

    /// Raises the high-water mark to now + window (the first one of a start: at least
    /// `START_MARGIN_MS` above the floor): fsync first, then let the generator use it, then propose
    /// it through Raft (renewing the lease).
    fn persist(&mut self, ctx: &mut Context<Self>) {
        let Some(a) = self.assigned else { return };
        if self.persisting {
            return;
        }
        self.persisting = true;
        // A reading through the generator: no ID is issued while the clock reads below it, so
        // no mark is more than the window ahead of the clock of a request that uses it.
        let now = self.gen.now_ms();
        let mut hw = now.saturating_add(self.cfg.time_window_ms as i64).max(self.gen.limit_ms());
        if !self.started {
            hw = hw.max(a.floor_ms.saturating_add(START_MARGIN_MS));
        }
        let record = StateFile {
            node_id: self.raft.node_id(),
            worker_id: a.worker_id,
            high_water_ms: hw,
            lease_expires_ms: a.lease_expires_ms,
        };
        let path = self.path.clone();
        let task = self.rt.spawn_blocking(move || record.store(&path));
        ctx.spawn(task.into_actor(self).map(move |res, act, ctx| {
            act.persisting = false;
            let res = match res {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = res {
                tracing::error!(error = %e, "cannot fsync the snowflake state file");
                let why = format!("cannot make the time high-water mark durable: {e}");
                for w in act.waiters.drain(..) {
                    let _ = w.send(Err(why.clone()));
                }
                return;
            }
            act.file = Some(record);
            // The worker may have changed (or snowflake turned off) while the file was written.
            if act.off.is_some() || act.assigned.map(|a| a.worker_id) != Some(record.worker_id) {
                return;
            }
            // A start needs a mark above the floor it starts from and a floor that passed the
            // startup check; a floor raised meanwhile goes through `try_start` again.
            if !act.started && act.assigned.map(|b| b.floor_ms) != Some(a.floor_ms) {
                act.try_start(ctx);
                return;
            }
            if act.started {
                act.gen.raise_limit(hw);
            } else if let Some(a) = act.assigned {
                act.gen.start(a.worker_id, a.floor_ms, hw, a.lease_until);
                act.started = true;
                act.set_status("serving", None);
                // A first start has no floor (i64::MIN); log it as absent rather than as a number.
                let floor_ms = (a.floor_ms > i64::MIN).then_some(a.floor_ms);
                tracing::info!(worker_id = a.worker_id, ?floor_ms, "snowflake service started");
            }
            for w in act.waiters.drain(..) {
                let _ = w.send(Ok(()));
            }
            act.renew(ctx, hw);
        }));
    }

    /// Proposes the high-water mark through Raft and extends the lease.
    fn renew(&mut self, ctx: &mut Context<Self>, hw: i64) {
        let Some(a) = self.assigned else { return };
        if self.renewing || !self.registered {
            return;
        }
        self.renewing = true;
        let raft = self.raft.clone();
        let lease_ms = self.cfg.lease_ttl_ms as i64;
        let sent = Instant::now();
        let task = self.rt.spawn(async move { raft.renew_worker(a.worker_id, hw, lease_ms).await });
        ctx.spawn(task.into_actor(self).map(move |res, act, _ctx| {
            act.renewing = false;
            let res = res.unwrap_or_else(|e| Err(ProposeError::Fatal(e.to_string())));
            match res {
                Ok(g) if Some(g.worker_id) == act.assigned.map(|a| a.worker_id) => {
                    let until = sent + Duration::from_millis(act.cfg.lease_ttl_ms);
                    if let Some(a) = &mut act.assigned {
                        a.lease_until = a.lease_until.max(until);
                        a.lease_expires_ms = g.lease_expires_ms;
                    }
                    act.gen.extend_lease(until);
                    if act.started {
                        act.set_status("serving", None);
                    }
                }
                Err(ProposeError::Rejected(e @ ApplyError::WorkerLost { .. })) => {
                    tracing::error!(error = %e, "snowflake worker ID lost; stopping and registering again");
                    act.gen.stop();
                    act.started = false;
                    act.assigned = None;
                    act.registered = false;
                    act.set_status("starting", Some(format!("{e} (removed from the cluster?)")));
                }
                // The node lost or replaced that worker ID while the renewal was in flight.
                Ok(g) => {
                    tracing::warn!(worker_id = g.worker_id, "ignored a lease renewal of a worker ID no longer held")
                }
                Err(e) => tracing::warn!(error = %e, "cannot renew the worker lease through Raft"),
            }
        }));
    }
}

impl Handler<RaiseWindow> for WorkerActor {
    type Result = MessageResult<RaiseWindow>;

    fn handle(&mut self, RaiseWindow { need_ms }: RaiseWindow, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        if let Some(why) = &self.off {
            let _ = tx.send(Err(why.clone()));
        } else if !self.started {
            let _ = tx.send(Err("snowflake service is not started".into()));
        } else if self.gen.limit_ms() >= need_ms {
            let _ = tx.send(Ok(()));
        } else {
            self.waiters.push(tx);
            self.persist(ctx);
        }
        MessageResult(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    const NOW: i64 = 1_700_000_000_000;

    fn serving(clock: Arc<ManualClock>) -> Snowflake {
        let gen = Arc::new(Generator::new(Layout { epoch_ms: 1_288_834_974_657 }, clock, 0));
        gen.start(5, NOW - 1, NOW + 3000, Instant::now() + Duration::from_secs(60));
        let status = Arc::new(Mutex::new(Status { state: "serving", ..Default::default() }));
        Snowflake { gen, actor: None, status, max_backward_ms: 5, window_ms: 3000 }
    }

    async fn one(sf: &Snowflake) -> Result<i64, SnowflakeError> {
        let mut id = 0;
        sf.take(1, |f, _| id = f).await.map(|_| id)
    }

    #[tokio::test]
    async fn small_rollback_waits_twice_the_gap_large_one_errors() {
        let clock = Arc::new(ManualClock::new(NOW));
        let sf = serving(clock.clone());
        let first = one(&sf).await.unwrap();
        clock.set(NOW - 3);
        // The clock catches up while the request sleeps its 6 ms.
        let c2 = clock.clone();
        let bump = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            c2.set(NOW + 1);
        });
        let started = Instant::now();
        let second = one(&sf).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(6), "waited {:?}", started.elapsed());
        assert!(second > first);
        bump.await.unwrap();
        // Still behind after the wait: an error, not an ID.
        clock.set(NOW - 2);
        assert_eq!(one(&sf).await, Err(SnowflakeError::ClockBackwards { by_ms: 3, tolerance_ms: 5 }));
        clock.set(NOW - 49);
        let started = Instant::now();
        assert_eq!(one(&sf).await, Err(SnowflakeError::ClockBackwards { by_ms: 50, tolerance_ms: 5 }));
        assert!(started.elapsed() < Duration::from_millis(50), "a large rollback must not wait");
    }

    #[tokio::test]
    async fn a_stopped_clock_does_not_spin_forever() {
        let clock = Arc::new(ManualClock::new(NOW));
        let sf = serving(clock);
        // The clock never moves: IDs run ahead of it through every millisecond of the durable
        // window (3,001 ms of 4,096), then the request waits for the clock and gives up.
        let mut n = 0;
        let started = Instant::now();
        let r = sf.take(4096 * 3001 + 1, |_, c| n += c).await;
        assert_eq!(r, Err(SnowflakeError::ClockStalled(CLOCK_WAIT)));
        assert_eq!(n, 4096 * 3001);
        assert!(started.elapsed() >= CLOCK_WAIT && started.elapsed() < CLOCK_WAIT * 3);
    }

    #[tokio::test]
    async fn a_whole_window_ahead_waits_for_the_clock_then_continues() {
        let sf = serving(Arc::new(ManualClock::new(NOW)));
        sf.take(4096 * 3001, |_, _| {}).await.unwrap();
        // The next millisecond is the window ahead of the clock; raising now would gain
        // nothing, so the request waits (rather than fails) until the mark is raised.
        let gen = sf.gen.clone();
        let mover = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            gen.raise_limit(NOW + 3100); // as the actor's tick does once the clock moved
        });
        let started = Instant::now();
        let id = one(&sf).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(30));
        assert_eq!(sf.layout().decode(id).unwrap().timestamp_ms, NOW + 3001);
        mover.await.unwrap();
    }

    #[tokio::test]
    async fn a_stopped_generator_refuses_with_the_reason() {
        let clock = Arc::new(ManualClock::new(NOW));
        let sf = serving(clock);
        sf.gen.stop();
        sf.status.lock().unwrap().state = "off";
        sf.status.lock().unwrap().reason = Some("clock check failed".into());
        assert_eq!(one(&sf).await, Err(SnowflakeError::NotServing("clock check failed".into())));
        assert_eq!(sf.health().state, "off");
    }

    #[test]
    fn state_file_round_trips_and_detects_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(STATE_FILE);
        assert_eq!(StateFile::load(&path), Ok(None));
        let f = StateFile { node_id: 3, worker_id: 9, high_water_ms: 1_700_000_000_000, lease_expires_ms: 5 };
        f.store(&path).unwrap();
        assert_eq!(StateFile::load(&path), Ok(Some(f)));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        assert!(StateFile::load(&path).is_err());
    }
}
