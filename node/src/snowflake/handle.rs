//! [`Snowflake`], the request path's handle on snowflake mode: takes IDs from the lock-free
//! generator, waits on short stalls (a mark to raise, a small clock rollback, a clock to catch
//! up with IDs issued ahead of it) and turns the rest into errors; reports `/health`.
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix::prelude::*;
use leaf_api::types::{SnowflakeHealth, SnowflakeState};

use super::actor::{RaiseWindow, WorkerActor};
use super::generator::{Generator, Layout, Stall};
use super::phase::Report;
use super::state_file::STATE_FILE;
use crate::clock::Clock;
use crate::config::SnowflakeConfig;
use crate::raft::RaftNode;

/// How long a request may wait for the clock to catch up with IDs issued ahead of it (the
/// node issued a whole window ahead: more than 4,096 IDs per ms for seconds).
pub(super) const CLOCK_WAIT: Duration = Duration::from_secs(1);
/// How long a request may wait for the high-water mark to be raised.
const WINDOW_WAIT: Duration = Duration::from_secs(2);
/// A request raises the mark itself only when that gains at least this many milliseconds
/// (`time_window_ms / 8`, at most this); otherwise it waits for the clock to move that far.
/// Bounds the fsyncs and Raft proposals of a node kept at the window's edge by overload.
const MIN_RAISE_MS: u64 = 50;
/// Why a lease that ran out stops the node.
const LEASE_RAN_OUT: &str = "the worker lease ran out: it could not be renewed through Raft";

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

/// What the worker actor publishes for `/health` and refused requests.
#[derive(Debug, Clone)]
pub(super) struct Status {
    /// From the worker's phase (see [`super::phase::Phase::report`]).
    pub(super) report: Report,
    pub(super) peer_offset_ms: Option<i64>,
    /// Peer clock samples the startup check discarded as out of range.
    pub(super) peer_samples_discarded: u32,
}

impl Status {
    pub(super) fn new(report: Report) -> Self {
        Status { report, peer_offset_ms: None, peer_samples_discarded: 0 }
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

impl Snowflake {
    /// Snowflake mode turned off by configuration: every request is refused.
    pub fn disabled(cfg: &SnowflakeConfig, clock: Arc<dyn Clock>) -> Snowflake {
        Snowflake {
            gen: Arc::new(Generator::new(Layout { epoch_ms: cfg.epoch_ms }, clock, cfg.sequence_random_start)),
            actor: None,
            status: Arc::new(Mutex::new(Status::new(Report::Disabled))),
            max_backward_ms: cfg.max_backward_ms,
            window_ms: cfg.time_window_ms,
        }
    }

    /// Starts the worker actor on `arbiter`; it registers through `raft` in the background (a
    /// region's node once its cluster adopted the region: `awaits_region`).
    pub fn start(
        cfg: &SnowflakeConfig,
        data_dir: &Path,
        raft: RaftNode,
        arbiter: &actix::ArbiterHandle,
        file_errors: prometheus_client::metrics::counter::Counter,
        awaits_region: bool,
    ) -> Snowflake {
        let clock = raft.clock().clone();
        let gen = Arc::new(Generator::new(Layout { epoch_ms: cfg.epoch_ms }, clock, cfg.sequence_random_start));
        let status = Arc::new(Mutex::new(Status::new(Report::Starting(None))));
        let mut actor =
            WorkerActor::new(gen.clone(), raft, cfg.clone(), data_dir.join(STATE_FILE), status.clone(), file_errors);
        actor.awaits_region = awaits_region;
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
        match self.lock().report.clone() {
            Report::Serving => SnowflakeError::NotServing(format!("{LEASE_RAN_OUT} in time")),
            Report::Exhausted(why) => SnowflakeError::Exhausted(why),
            Report::Starting(why) => SnowflakeError::NotServing(why.unwrap_or_else(|| "snowflake is starting".into())),
            Report::Off(why) => SnowflakeError::NotServing(why),
            Report::Disabled => SnowflakeError::NotServing("snowflake.enabled is false".into()),
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
        let (state, reason) = match s.report {
            Report::Serving if self.gen.serving() => (SnowflakeState::Serving, None),
            Report::Serving => (SnowflakeState::Off, Some(LEASE_RAN_OUT.to_string())),
            Report::Exhausted(why) | Report::Off(why) => (SnowflakeState::Off, Some(why)),
            Report::Starting(why) => (SnowflakeState::Starting, why),
            Report::Disabled => (SnowflakeState::Disabled, Some("snowflake.enabled is false".to_string())),
        };
        SnowflakeHealth {
            state,
            worker_id: self.gen.worker_id(),
            reason,
            high_water_ms: self.gen.worker_id().map(|_| self.gen.limit_ms()),
            lease_remaining_ms: self.gen.lease_remaining_ms(),
            peer_clock_offset_ms: s.peer_offset_ms,
            peer_clock_samples_discarded: s.peer_samples_discarded,
            // Filled in by the node (`App::health`), which has the replicated state.
            forecast: None,
        }
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
        let status = Arc::new(Mutex::new(Status::new(Report::Serving)));
        Snowflake { gen, actor: None, status, max_backward_ms: 5, window_ms: 3000 }
    }

    async fn one(sf: &Snowflake) -> Result<i64, SnowflakeError> {
        let mut id = 0;
        sf.take(1, |f, _| id = f).await.map(|_| id)
    }

    // Paused time makes the timers fire in deadline order: the clock's 2 ms bump always lands
    // inside the request's 6 ms wait, however loaded the machine (a real-time run lost that
    // race once under CI load).
    #[tokio::test(start_paused = true)]
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
        let started = tokio::time::Instant::now();
        let second = one(&sf).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(6), "waited {:?}", started.elapsed());
        assert!(second > first);
        bump.await.unwrap();
        // Still behind after the wait: an error, not an ID.
        clock.set(NOW - 2);
        assert_eq!(one(&sf).await, Err(SnowflakeError::ClockBackwards { by_ms: 3, tolerance_ms: 5 }));
        clock.set(NOW - 49);
        let started = tokio::time::Instant::now();
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
        sf.status.lock().unwrap().report = Report::Off("clock check failed".into());
        assert_eq!(one(&sf).await, Err(SnowflakeError::NotServing("clock check failed".into())));
        assert_eq!(sf.health().state, SnowflakeState::Off);
    }

    #[tokio::test]
    async fn each_report_is_told_in_health_and_in_the_error() {
        let clock = Arc::new(ManualClock::new(NOW));
        let sf = serving(clock);
        assert_eq!(sf.health().state, SnowflakeState::Serving);
        assert_eq!(sf.health().reason, None);
        sf.gen.stop();
        // Serving with a stopped generator: the lease ran out.
        assert_eq!(sf.health().state, SnowflakeState::Off);
        assert!(sf.health().reason.unwrap().contains("lease ran out"));
        assert!(matches!(one(&sf).await, Err(SnowflakeError::NotServing(m)) if m.contains("lease ran out")));
        let cases = [
            (
                Report::Starting(None),
                SnowflakeState::Starting,
                None,
                SnowflakeError::NotServing("snowflake is starting".into()),
            ),
            (
                Report::Starting(Some("registering".into())),
                SnowflakeState::Starting,
                Some("registering"),
                SnowflakeError::NotServing("registering".into()),
            ),
            (
                Report::Exhausted("all in use".into()),
                SnowflakeState::Off,
                Some("all in use"),
                SnowflakeError::Exhausted("all in use".into()),
            ),
            (
                Report::Disabled,
                SnowflakeState::Disabled,
                Some("snowflake.enabled is false"),
                SnowflakeError::NotServing("snowflake.enabled is false".into()),
            ),
        ];
        for (report, state, reason, err) in cases {
            sf.status.lock().unwrap().report = report;
            let h = sf.health();
            assert_eq!((h.state, h.reason.as_deref()), (state, reason));
            assert_eq!(one(&sf).await, Err(err));
        }
    }
}
