//! The worker's phases and every transition between them, as pure functions: the actor
//! (`super::actor`) feeds in what happened (a tick, the clock check passed, a grant, a
//! failed registration, a written mark, a renewal, a request at the window's edge) with the
//! clock readings it needs, and carries out what the transition returns (start or stop the
//! generator, extend the lease, raise the limit, answer waiting requests).
//!
//! | phase | event | next phase |
//! |---|---|---|
//! | `AwaitingMembership` | a tick that finds the membership | `CheckingClock` |
//! | `CheckingClock` | clock check passed, state file lease left | `Starting` (unconfirmed) |
//! | `CheckingClock` | clock check passed, no lease left | `Registering` |
//! | `Registering` | grant | `Starting` |
//! | `Starting` | floor too far ahead of the clock | `Off` |
//! | `Starting` | first mark durable (floor unchanged) | `Serving` |
//! | `Serving` | grant with a higher mark, or another worker ID | `Starting` |
//! | `Starting` | grant for another worker ID | `Starting` (that ID) |
//! | `Starting`, `Serving` | renewal: worker ID lost | `Registering` |
//! | any but `Off` | clock check failed, state file refused | `Off` |
//!
//! `Off` is final until a restart. Registration through Raft runs alongside `Starting` and
//! `Serving` when the worker ID came from the state file (`confirmed` is false).
use std::time::Instant;

use leaf_raft_store::WorkerGrant;

use super::state_file::StateFile;

/// A start's first mark is at least this far above the floor, even when the floor is more
/// than the window ahead of the clock: a light load then never waits for the clock.
pub const START_MARGIN_MS: i64 = 50;

/// A worker ID this node holds or is about to serve under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    pub worker_id: u16,
    /// Issue strictly above this Unix millisecond.
    pub floor_ms: i64,
    /// Leader time of the lease end (kept in the state file).
    pub lease_expires_ms: i64,
    /// Lease end on the monotonic clock.
    pub lease_until: Instant,
    /// The Raft log confirmed this worker ID since the node started (otherwise it comes from
    /// the state file's unexpired lease, and registration runs alongside).
    pub confirmed: bool,
}

/// What a node without a serving worker ID waits on, for `/health` and refused requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holdup {
    /// Registration failed and is retried (or the worker ID was lost and is registered again).
    Retrying(String),
    /// Every worker ID is in use by another node.
    Exhausted(String),
}

/// Where the worker is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for the cluster membership, to ask the peers' clocks.
    AwaitingMembership,
    /// The startup peer clock check is in flight.
    CheckingClock,
    /// No worker ID: registering one through Raft.
    Registering { holdup: Option<Holdup> },
    /// A worker ID, and a first mark above its floor to make durable before serving.
    Starting { worker: Worker, holdup: Option<Holdup> },
    /// Issuing IDs under `worker` (while its lease lasts: the generator checks it per ID).
    Serving { worker: Worker },
    /// Refused until a restart.
    Off { reason: String },
}

/// What `/health` and refused requests say of snowflake mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Report {
    /// Turned off by configuration.
    Disabled,
    Starting(Option<String>),
    /// Not serving because every worker ID is in use (`/health`: `off`).
    Exhausted(String),
    Serving,
    Off(String),
}

/// What the actor reads before a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TickFacts {
    pub has_membership: bool,
    /// No registration in flight and its retry time has come.
    pub register_due: bool,
    /// The generator's clock reading and durable mark.
    pub now_ms: i64,
    pub limit_ms: i64,
    pub lease_remaining_ms: Option<u64>,
    pub window_ms: u64,
    pub lease_ttl_ms: u64,
}

/// What a tick does besides registering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickStep {
    Nothing,
    /// Ask the peers' clocks (the phase moved to `CheckingClock`).
    CheckClock,
    /// Check the floor against the clock and make the first mark durable.
    TryStart,
    /// Less than half the window left: raise the mark.
    RaiseMark,
    /// Less than half the lease left: renew it through Raft.
    Renew,
}

/// What a grant from the Raft log changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granted {
    /// Off (or not yet checked): nothing changes.
    Ignored,
    /// The worker ID held already, confirmed: its lease extends to this.
    Extended { lease_until: Instant },
    /// The worker ID held already, but the log knows a higher mark than the state file did:
    /// stop issuing and start again above it.
    Raised { lease_until: Instant, floor_ms: i64 },
    /// A new worker ID (`replaced`: another one was held, and the generator must stop).
    New { worker_id: u16, replaced: Option<u16> },
}

/// What a durable mark lets the actor do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persisted {
    /// Written for a worker no longer held (or snowflake turned off meanwhile): no effect.
    Stale,
    /// The floor rose while the first mark was written: check and write again.
    Recheck,
    /// Serving: raise the generator's limit to the mark.
    Raise,
    /// The first mark: start the generator (the phase is `Serving` now).
    Start(Worker),
}

/// What a renewal's answer changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewed {
    /// Off, or the answer is for another worker ID: nothing changes.
    Ignored,
    Extended {
        lease_until: Instant,
    },
    /// The worker ID was lost: stop issuing (the phase is `Registering`).
    Lost,
}

/// The answer to a request at the window's edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaiseAnswer {
    Refuse(String),
    /// The mark is high enough already.
    Ready,
    /// Wait for a raise to be durable.
    Wait,
}

impl Phase {
    /// What `/health` and refused requests say of this phase.
    pub fn report(&self) -> Report {
        let holdup = |h: &Option<Holdup>| match h {
            None => Report::Starting(None),
            Some(Holdup::Retrying(why)) => Report::Starting(Some(why.clone())),
            Some(Holdup::Exhausted(why)) => Report::Exhausted(why.clone()),
        };
        match self {
            Phase::AwaitingMembership => {
                Report::Starting(Some("waiting for the cluster membership (clock check)".into()))
            }
            Phase::CheckingClock => Report::Starting(None),
            Phase::Registering { holdup: h } | Phase::Starting { holdup: h, .. } => holdup(h),
            Phase::Serving { .. } => Report::Serving,
            Phase::Off { reason } => Report::Off(reason.clone()),
        }
    }

    /// The worker ID held, if any (not while off).
    pub fn worker(&self) -> Option<&Worker> {
        match self {
            Phase::Starting { worker, .. } | Phase::Serving { worker } => Some(worker),
            _ => None,
        }
    }

    fn worker_mut(&mut self) -> Option<&mut Worker> {
        match self {
            Phase::Starting { worker, .. } | Phase::Serving { worker } => Some(worker),
            _ => None,
        }
    }

    /// A worker ID to register (none yet, or one from the state file only).
    pub fn needs_registration(&self) -> bool {
        match self {
            Phase::Registering { .. } => true,
            Phase::Starting { worker, .. } | Phase::Serving { worker } => !worker.confirmed,
            Phase::AwaitingMembership | Phase::CheckingClock | Phase::Off { .. } => false,
        }
    }

    /// Turns snowflake off until a restart; returns false if it was off already.
    pub fn turn_off(&mut self, reason: String) -> bool {
        if matches!(self, Phase::Off { .. }) {
            return false;
        }
        *self = Phase::Off { reason };
        true
    }

    /// A tick: whether to register now, and what else to do.
    pub fn on_tick(&mut self, f: &TickFacts) -> (bool, TickStep) {
        let register = f.register_due && self.needs_registration();
        let step = match self {
            Phase::Off { .. } | Phase::CheckingClock | Phase::Registering { .. } => TickStep::Nothing,
            Phase::AwaitingMembership if f.has_membership => {
                *self = Phase::CheckingClock;
                TickStep::CheckClock
            }
            Phase::AwaitingMembership => TickStep::Nothing,
            Phase::Starting { .. } => TickStep::TryStart,
            Phase::Serving { worker } => {
                let half = f.window_ms as i64 / 2;
                if f.limit_ms.saturating_sub(f.now_ms) < half {
                    TickStep::RaiseMark
                } else if worker.confirmed && f.lease_remaining_ms.unwrap_or(0) < f.lease_ttl_ms / 2 {
                    TickStep::Renew
                } else {
                    TickStep::Nothing
                }
            }
        };
        (register, step)
    }

    /// The startup clock check passed (a failed one turns snowflake off): the node serves
    /// under the state file's worker ID if its lease has not run out (`now_ms` is the
    /// generator's reading, `now` the monotonic clock), and registers through Raft anyway.
    pub fn on_clock_checked(&mut self, file: Option<StateFile>, now_ms: i64, now: Instant) {
        if *self != Phase::CheckingClock {
            return;
        }
        let left = file.map_or(0, |f| f.lease_expires_ms.saturating_sub(now_ms));
        *self = match file {
            Some(f) if left > 0 => Phase::Starting {
                worker: Worker {
                    worker_id: f.worker_id,
                    floor_ms: f.high_water_ms,
                    lease_expires_ms: f.lease_expires_ms,
                    lease_until: now + std::time::Duration::from_millis(left.unsigned_abs()),
                    confirmed: false,
                },
                holdup: None,
            },
            _ => Phase::Registering { holdup: None },
        };
    }

    /// A worker ID granted through Raft. `lease_until` is the lease end measured from before
    /// the proposal; `file` is what the state file holds (its mark covers this node's IDs of
    /// that worker ID only).
    pub fn on_granted(&mut self, g: WorkerGrant, lease_until: Instant, file: Option<StateFile>) -> Granted {
        let holdup = match self {
            Phase::Registering { holdup } | Phase::Starting { holdup, .. } => holdup.clone(),
            Phase::Serving { .. } => None,
            Phase::AwaitingMembership | Phase::CheckingClock | Phase::Off { .. } => return Granted::Ignored,
        };
        let serving = matches!(self, Phase::Serving { .. });
        let held = self.worker().copied();
        match held {
            Some(w) if w.worker_id == g.worker_id => {
                let raised = g.not_before_ms > w.floor_ms;
                let worker = Worker {
                    floor_ms: w.floor_ms.max(g.not_before_ms),
                    lease_expires_ms: g.lease_expires_ms,
                    lease_until: w.lease_until.max(lease_until),
                    confirmed: true,
                    ..w
                };
                if raised && serving {
                    *self = Phase::Starting { worker, holdup: None };
                    Granted::Raised { lease_until: worker.lease_until, floor_ms: worker.floor_ms }
                } else {
                    if let Some(w) = self.worker_mut() {
                        *w = worker;
                    }
                    Granted::Extended { lease_until: worker.lease_until }
                }
            }
            other => {
                let local = file.filter(|f| f.worker_id == g.worker_id).map_or(i64::MIN, |f| f.high_water_ms);
                let worker = Worker {
                    worker_id: g.worker_id,
                    floor_ms: g.not_before_ms.max(local),
                    lease_expires_ms: g.lease_expires_ms,
                    lease_until,
                    confirmed: true,
                };
                *self = Phase::Starting { worker, holdup };
                Granted::New { worker_id: g.worker_id, replaced: other.map(|w| w.worker_id) }
            }
        }
    }

    /// A failed registration (retried): shown while the node does not serve.
    pub fn on_register_failed(&mut self, why: Holdup) {
        if let Phase::Registering { holdup } | Phase::Starting { holdup, .. } = self {
            *holdup = Some(why);
        }
    }

    /// Before a start: the floor may be ahead of the clock by at most `max_startup_wait_ms`
    /// (then IDs run ahead of the clock until it catches up); `Err` is why snowflake must go
    /// off. `Ok` carries how far the floor is ahead (0 or less: behind the clock).
    pub fn start_check(worker: &Worker, now_ms: i64, max_startup_wait_ms: u64) -> Result<i64, String> {
        let ahead = worker.floor_ms.saturating_sub(now_ms);
        if ahead > 0 && ahead.unsigned_abs() > max_startup_wait_ms {
            return Err(format!(
                "the clock is {ahead} ms behind the time high-water mark of worker ID {} (the node may have \
                 issued IDs up to {} ms); more than snowflake.max_startup_wait_ms = {max_startup_wait_ms}. Fix the \
                 clock and restart the node",
                worker.worker_id, worker.floor_ms
            ));
        }
        Ok(ahead)
    }

    /// The next mark to make durable, and for which worker: `now + window`, never below the
    /// current limit, and a start's first mark at least [`START_MARGIN_MS`] above the floor.
    /// `None` without a worker ID.
    pub fn next_mark(&self, now_ms: i64, window_ms: u64, limit_ms: i64) -> Option<(Worker, i64)> {
        let hw = now_ms.saturating_add(window_ms as i64).max(limit_ms);
        match self {
            Phase::Starting { worker, .. } => Some((*worker, hw.max(worker.floor_ms.saturating_add(START_MARGIN_MS)))),
            Phase::Serving { worker } => Some((*worker, hw)),
            _ => None,
        }
    }

    /// A mark written for `written` (as [`Phase::next_mark`] gave it) is durable.
    pub fn on_persisted(&mut self, written: &Worker) -> Persisted {
        match self {
            Phase::Serving { worker } if worker.worker_id == written.worker_id => Persisted::Raise,
            Phase::Starting { worker, .. } if worker.worker_id == written.worker_id => {
                if worker.floor_ms != written.floor_ms {
                    return Persisted::Recheck;
                }
                let worker = *worker;
                *self = Phase::Serving { worker };
                Persisted::Start(worker)
            }
            _ => Persisted::Stale,
        }
    }

    /// A renewal's answer: a grant (`lease_until` measured from before the proposal), or the
    /// worker ID lost (`Err(why)`).
    pub fn on_renewed(&mut self, answer: Result<WorkerGrant, String>, lease_until: Instant) -> Renewed {
        match answer {
            Ok(g) => match self.worker_mut() {
                Some(w) if w.worker_id == g.worker_id => {
                    w.lease_until = w.lease_until.max(lease_until);
                    w.lease_expires_ms = g.lease_expires_ms;
                    Renewed::Extended { lease_until }
                }
                _ => Renewed::Ignored,
            },
            Err(why) if self.worker().is_some() => {
                *self =
                    Phase::Registering { holdup: Some(Holdup::Retrying(format!("{why} (removed from the cluster?)"))) };
                Renewed::Lost
            }
            Err(_) => Renewed::Ignored,
        }
    }

    /// A request reached the durable mark and needs `need_ms`.
    pub fn on_raise(&self, limit_ms: i64, need_ms: i64) -> RaiseAnswer {
        match self {
            Phase::Off { reason } => RaiseAnswer::Refuse(reason.clone()),
            Phase::Serving { .. } if limit_ms >= need_ms => RaiseAnswer::Ready,
            Phase::Serving { .. } => RaiseAnswer::Wait,
            _ => RaiseAnswer::Refuse("snowflake service is not started".into()),
        }
    }
}

#[cfg(test)]
mod tests;
