//! The worker actor: owns everything slow in snowflake mode. It runs the timers, the startup
//! peer clock check, registration and lease renewal through Raft, and writes the state file;
//! its [`Phase`] decides what each of those leads to (see [`super::phase`]), the actor carries
//! it out on the generator and answers the requests waiting for a raised mark.
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use leaf_raft_store::{ApplyError, WorkerGrant};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::oneshot;

use super::clock_check;
use super::generator::Generator;
use super::handle::Status;
use super::phase::{Granted, Holdup, Persisted, Phase, RaiseAnswer, Renewed, TickFacts, TickStep, Worker};
use super::state_file::StateFile;
use crate::config::SnowflakeConfig;
use crate::raft::{ProposeError, RaftNode};

/// Pause between failed registrations.
const REGISTER_RETRY: Duration = Duration::from_secs(1);
/// Timeout of one peer's answer in the startup clock check. Short: the check sits on the
/// restart path, a peer that is down or cut off costs this much, and an answer that took
/// longer is too uncertain (± half the round trip) to judge a 1 s threshold anyway.
const PEER_TIME_TIMEOUT: Duration = Duration::from_millis(300);

/// Raise the high-water mark to at least `need_ms` now (a request reached it); answered once
/// a raise is durable.
#[derive(Message)]
#[rtype(result = "oneshot::Receiver<Result<(), String>>")]
pub(super) struct RaiseWindow {
    pub(super) need_ms: i64,
}

/// Registration through Raft: when the next one may start, or one in flight.
#[derive(Debug, Clone, Copy)]
enum Registration {
    Idle { retry_at: Instant },
    InFlight,
}

/// Owns registration, renewal, the window and the state file.
pub(super) struct WorkerActor {
    gen: Arc<Generator>,
    raft: RaftNode,
    cfg: SnowflakeConfig,
    path: PathBuf,
    /// Published for `/health` and refused requests after every transition.
    status: Arc<Mutex<Status>>,
    phase: Phase,
    /// What the state file holds (as loaded or last written).
    file: Option<StateFile>,
    registration: Registration,
    /// In-flight guards of the actor's own tasks: one write of the state file, one renewal.
    persisting: bool,
    renewing: bool,
    /// Requests waiting for a raised mark.
    waiters: Vec<oneshot::Sender<Result<(), String>>>,
    /// Failed writes of the state file (`leaf_storage_errors_total{store="snowflake_state"}`).
    file_errors: Counter,
    /// A region's node (`[region]`) registers only once the cluster adopted its region: a
    /// worker ID outside the region's run would hold off the adoption (and might collide).
    pub(super) awaits_region: bool,
}

impl Actor for WorkerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        match StateFile::load_for(&self.path, self.raft.node_id()) {
            // A worker ID outside `snowflake.worker_ids` (the range changed, say to make room
            // for old Leaf servers) is never served, not even on its unexpired lease: the
            // registration gives one inside, starting above that ID's own Raft mark.
            Ok(Some(f)) if !self.cfg.worker_ids.contains(f.worker_id) => {
                tracing::warn!(
                    worker_id = f.worker_id,
                    range = %self.cfg.worker_ids,
                    "the state file's worker ID is outside snowflake.worker_ids; registering a new one"
                );
            }
            Ok(f) => self.file = f,
            Err(why) => self.turn_off(why),
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
    pub(super) fn new(
        gen: Arc<Generator>,
        raft: RaftNode,
        cfg: SnowflakeConfig,
        path: PathBuf,
        status: Arc<Mutex<Status>>,
        file_errors: Counter,
    ) -> Self {
        let actor = WorkerActor {
            gen,
            raft,
            cfg,
            path,
            status,
            file_errors,
            phase: Phase::AwaitingMembership,
            file: None,
            registration: Registration::Idle { retry_at: Instant::now() },
            persisting: false,
            renewing: false,
            waiters: Vec::new(),
            awaits_region: false,
        };
        actor.publish();
        actor
    }

    /// Publishes what the phase says for `/health` and refused requests.
    fn publish(&self) {
        self.status.lock().unwrap_or_else(|e| e.into_inner()).report = self.phase.report();
    }

    fn turn_off(&mut self, reason: String) {
        tracing::error!(reason = %reason, "snowflake service is OFF on this node");
        if self.phase.turn_off(reason) {
            self.gen.stop();
            for w in self.waiters.drain(..) {
                let _ = w.send(Err("snowflake service is off".into()));
            }
        }
        self.publish();
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        let facts = TickFacts {
            has_membership: self.raft.has_membership(),
            register_due: matches!(self.registration, Registration::Idle { retry_at } if Instant::now() >= retry_at),
            now_ms: self.gen.now_ms(),
            limit_ms: self.gen.limit_ms(),
            lease_remaining_ms: self.gen.lease_remaining_ms(),
            window_ms: self.cfg.time_window_ms,
            lease_ttl_ms: self.cfg.lease_ttl_ms,
        };
        let (register, step) = self.phase.on_tick(&facts);
        self.publish();
        if register {
            self.register(ctx);
        }
        match step {
            TickStep::Nothing => {}
            TickStep::CheckClock => self.check_clock(ctx),
            TickStep::TryStart => self.try_start(ctx),
            TickStep::RaiseMark => self.persist(ctx),
            TickStep::Renew => self.renew(ctx, facts.limit_ms),
        }
    }

    /// The startup peer clock check (the phase is `CheckingClock`).
    fn check_clock(&mut self, ctx: &mut Context<Self>) {
        let raft = self.raft.clone();
        let task = async move {
            let calls = raft.peer_addrs().into_iter().map(|(id, addr)| {
                let raft = raft.clone();
                async move { (id, raft.peer_time(id, &addr, PEER_TIME_TIMEOUT).await) }
            });
            futures::future::join_all(calls).await
        };
        ctx.spawn(task.into_actor(self).map(|answers, act, ctx| {
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
            let verdict = clock_check::verdict(avg, samples.len(), act.cfg.max_peer_offset_ms);
            if let Err(why) = verdict {
                act.turn_off(why);
                return;
            }
            if avg.is_none() && asked > 0 {
                tracing::warn!(peers = asked, discarded, "no usable peer clock sample; relying on the high-water marks alone");
            }
            act.phase.on_clock_checked(act.file, act.gen.now_ms(), Instant::now());
            if let Some(w) = act.phase.worker() {
                tracing::info!(
                    worker_id = w.worker_id,
                    lease_left_ms = w.lease_expires_ms.saturating_sub(act.gen.now_ms()),
                    "using the worker ID from the state file"
                );
            }
            act.publish();
            act.tick(ctx);
        }));
    }

    fn register(&mut self, ctx: &mut Context<Self>) {
        if self.awaits_region && !self.raft.state().is_region() {
            let why = "waiting for this cluster to adopt its region from the global tier ([region])";
            self.phase.on_register_failed(Holdup::Retrying(why.to_string()));
            self.registration = Registration::Idle { retry_at: Instant::now() + REGISTER_RETRY };
            self.publish();
            return;
        }
        self.registration = Registration::InFlight;
        let (raft, lease_ms) = (self.raft.clone(), self.cfg.lease_ttl_ms as i64);
        let range = (self.cfg.worker_ids.first, self.cfg.worker_ids.last);
        let task = async move { super::lease::register(&raft, lease_ms, range).await };
        let sent = Instant::now();
        ctx.spawn(task.into_actor(self).map(move |res, act, ctx| {
            let retry = match res {
                Ok(g) => {
                    act.registered_as(g, sent);
                    Duration::ZERO
                }
                Err(ProposeError::Rejected(ApplyError::WorkersExhausted)) => {
                    act.phase.on_register_failed(Holdup::Exhausted(ApplyError::WorkersExhausted.to_string()));
                    10 * REGISTER_RETRY
                }
                Err(e) => {
                    act.phase
                        .on_register_failed(Holdup::Retrying(format!("registering a worker ID through Raft: {e}")));
                    tracing::debug!(error = %e, "worker registration failed; retrying");
                    REGISTER_RETRY
                }
            };
            act.registration = Registration::Idle { retry_at: Instant::now() + retry };
            act.publish();
            act.tick(ctx);
        }));
    }

    fn registered_as(&mut self, g: WorkerGrant, sent: Instant) {
        let lease_until = sent + Duration::from_millis(self.cfg.lease_ttl_ms);
        match self.phase.on_granted(g, lease_until, self.file) {
            Granted::Ignored => {}
            Granted::Extended { lease_until } => self.gen.extend_lease(lease_until),
            Granted::Raised { lease_until, floor_ms } => {
                self.gen.extend_lease(lease_until);
                // The log knows a higher mark for this ID than the state file did (a file
                // restored from a backup?): start again above it, through the startup check.
                tracing::warn!(
                    worker_id = g.worker_id,
                    floor_ms,
                    "the Raft mark is above the state file's; restarting above it"
                );
                self.gen.stop();
            }
            Granted::New { worker_id, replaced } => {
                if let Some(old) = replaced {
                    tracing::warn!(old, new = worker_id, "the Raft log gave another worker ID");
                    self.gen.stop();
                }
                tracing::info!(worker_id, "registered snowflake worker ID through Raft");
            }
        }
    }

    /// Starts issuing at once from the floor forward (ahead of the clock if the floor is),
    /// after making the first mark durable; refuses a floor too far ahead of the clock.
    fn try_start(&mut self, ctx: &mut Context<Self>) {
        let Phase::Starting { worker, .. } = &self.phase else { return };
        let worker = *worker;
        if self.persisting {
            return;
        }
        match Phase::start_check(&worker, self.gen.now_ms(), self.cfg.max_startup_wait_ms) {
            Err(why) => {
                self.turn_off(why);
                return;
            }
            Ok(ahead) if ahead > 0 => tracing::info!(
                worker_id = worker.worker_id,
                ahead_ms = ahead,
                "the high-water mark is ahead of the clock: issuing above it at once, ahead of the clock until it \
                 catches up"
            ),
            Ok(_) => {}
        }
        self.persist(ctx);
    }

    /// Raises the high-water mark to now + window (a start's first one: at least
    /// `START_MARGIN_MS` above the floor): fsync first, then let the generator use it, then
    /// propose it through Raft (renewing the lease).
    fn persist(&mut self, ctx: &mut Context<Self>) {
        if self.persisting {
            return;
        }
        // A reading through the generator: no ID is issued while the clock reads below it, so
        // no mark is more than the window ahead of the clock of a request that uses it.
        let Some((worker, hw)) = self.phase.next_mark(self.gen.now_ms(), self.cfg.time_window_ms, self.gen.limit_ms())
        else {
            return;
        };
        self.persisting = true;
        let record = StateFile {
            node_id: self.raft.node_id(),
            worker_id: worker.worker_id,
            high_water_ms: hw,
            lease_expires_ms: worker.lease_expires_ms,
        };
        let path = self.path.clone();
        let task = tokio::task::spawn_blocking(move || record.store(&path));
        ctx.spawn(task.into_actor(self).map(move |res, act, ctx| {
            act.persisting = false;
            let res = match res {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = res {
                act.file_errors.inc();
                tracing::error!(error = %e, "cannot fsync the snowflake state file");
                let why = format!("cannot make the time high-water mark durable: {e}");
                for w in act.waiters.drain(..) {
                    let _ = w.send(Err(why.clone()));
                }
                return;
            }
            act.file = Some(record);
            act.marked(ctx, &worker, hw);
        }));
    }

    /// The mark `hw` written for `worker` is durable.
    fn marked(&mut self, ctx: &mut Context<Self>, worker: &Worker, hw: i64) {
        match self.phase.on_persisted(worker) {
            // The worker changed (or snowflake turned off) while the file was written.
            Persisted::Stale => return,
            // A start needs a mark above the floor it starts from and a floor that passed the
            // startup check; a floor raised meanwhile goes through `try_start` again.
            Persisted::Recheck => {
                self.try_start(ctx);
                return;
            }
            Persisted::Raise => self.gen.raise_limit(hw),
            Persisted::Start(w) => {
                self.gen.start(w.worker_id, w.floor_ms, hw, w.lease_until);
                self.publish();
                // A first start has no floor (i64::MIN); log it as absent rather than as a number.
                let floor_ms = (w.floor_ms > i64::MIN).then_some(w.floor_ms);
                tracing::info!(worker_id = w.worker_id, ?floor_ms, "snowflake service started");
            }
        }
        for w in self.waiters.drain(..) {
            let _ = w.send(Ok(()));
        }
        self.renew(ctx, hw);
    }

    /// Proposes the high-water mark through Raft and extends the lease.
    fn renew(&mut self, ctx: &mut Context<Self>, hw: i64) {
        let Some(worker) = self.phase.worker().copied() else { return };
        if self.renewing || !worker.confirmed {
            return;
        }
        self.renewing = true;
        let (raft, lease_ms, worker_id) = (self.raft.clone(), self.cfg.lease_ttl_ms as i64, worker.worker_id);
        let task = async move { super::lease::renew(&raft, worker_id, hw, lease_ms).await };
        let sent = Instant::now();
        ctx.spawn(task.into_actor(self).map(move |res, act, _ctx| {
            act.renewing = false;
            let until = sent + Duration::from_millis(act.cfg.lease_ttl_ms);
            let answer = match res {
                Ok(g) => Ok(g),
                Err(ProposeError::Rejected(e @ ApplyError::WorkerLost { .. })) => {
                    tracing::error!(error = %e, "snowflake worker ID lost; stopping and registering again");
                    Err(e.to_string())
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot renew the worker lease through Raft");
                    return;
                }
            };
            let granted = answer.as_ref().ok().copied();
            match act.phase.on_renewed(answer, until) {
                Renewed::Extended { lease_until } => act.gen.extend_lease(lease_until),
                Renewed::Lost => act.gen.stop(),
                Renewed::Ignored => {
                    if let Some(g) = granted {
                        tracing::error!(?g, "a lease renewal answered for another worker ID");
                    }
                }
            }
            act.publish();
        }));
    }
}

impl Handler<RaiseWindow> for WorkerActor {
    type Result = MessageResult<RaiseWindow>;

    fn handle(&mut self, RaiseWindow { need_ms }: RaiseWindow, ctx: &mut Context<Self>) -> Self::Result {
        let (tx, rx) = oneshot::channel();
        match self.phase.on_raise(self.gen.limit_ms(), need_ms) {
            RaiseAnswer::Refuse(why) => {
                let _ = tx.send(Err(why));
            }
            RaiseAnswer::Ready => {
                let _ = tx.send(Ok(()));
            }
            RaiseAnswer::Wait => {
                self.waiters.push(tx);
                self.persist(ctx);
            }
        }
        MessageResult(rx)
    }
}
