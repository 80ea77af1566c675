//! The gapless workload of `leaf-chaos --gapless`: two gapless series (invoice numbers), one
//! that never resets and one that resets each day with a display format, created before the
//! faults; dedicated workers issue their numbers next to the ID workload, each key retried with
//! the same key after any error or timeout until it is answered, and about one call in eight
//! asking again for a key already answered (it must get the same number, `replayed`).
//!
//! Every attempt is a line of `gapless.jsonl` as it completes (the workers keep only a bounded
//! pool of answered keys to repeat). Keys unanswered when the faults end must be answered by
//! the recovery deadline; after the clients stop and the cluster is quiet, the ledger of each
//! series is read from every member and must be identical on all (`gapless-ledgers.json` keeps
//! one copy, and every node's that differs). [`check_dir`] then runs
//! [`crate::gapless_check::check`] over the attempts and the ledger; `leaf-chaos check DIR`
//! re-runs it from the two files.
//!
//! Layout: this file is the workload (the series, the workers, the attempt log); [`verdict`]
//! reads the ledgers after the run and checks them against the attempts.
//!
//! The daily series' zone is chosen so that its midnight falls on the whole minute nearest
//! the middle of the fault phase (when the run spans one): its numbers restart at 1 while
//! leaders change and clocks are skewed, and each period must still be 1..=N.
//!
//! About three new keys in eight are reserved instead of issued (held [`HOLD_SECONDS`]), and a
//! reservation is then confirmed, voided with a reason, or left for the leader to void at its
//! deadline (a third each); the daily series voids what a closed day left open
//! (`on_period_close: void`). A confirm refused as `number_conflict` (its reservation expired
//! meanwhile) is a definite answer, not a retry: its attempt is logged `refused`, and the
//! verdict requires the ledger to hold that number voided. Before the ledgers are read every reservation
//! must be settled, and the checker then requires every number issued, confirmed or voided
//! with a reason, in the state each answer said.
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use leaf_api::gapless::{GaplessOptions, IssuedNumber, PeriodClose, Reset, SeriesPolicy};
use leaf_api::profile::{format_utc_offset, Profile, MAX_UTC_OFFSET_MINUTES};
use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::Client;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::history::History;
use crate::gapless_check::{Attempt, Outcome};

/// The series that never resets.
pub const NEVER_TAG: &str = "chaos-gl-never";
/// The series that resets each day.
pub const DAILY_TAG: &str = "chaos-gl-daily";
/// The daily series' display format.
pub const DAILY_FORMAT: &str = "R{yyyy}{mm}{dd}-{seq:04}";
/// The attempts, one JSON object a line.
pub const ATTEMPTS_FILE: &str = "gapless.jsonl";
/// The series and the ledgers read after the run.
pub const LEDGERS_FILE: &str = "gapless-ledgers.json";
/// Seconds a reservation is held: short, so that some expire during the run.
pub const HOLD_SECONDS: u64 = 3;
/// The reason of a worker's void.
pub const VOID_REASON: &str = "voided by leaf-chaos";
/// Answered keys a worker keeps to ask for again (a random one is replaced when full).
const REPEAT_POOL: usize = 256;
/// Most examples of each kind of problem `results.json` lists.
const EXAMPLES: usize = 20;

/// Dedicated gapless workers of a run with `clients` ID workers.
pub fn workers(clients: u32) -> u32 {
    (clients / 3).max(2)
}

/// A gapless series of the run: its tag and the options it was created with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Series {
    pub tag: String,
    pub options: GaplessOptions,
}

impl Series {
    fn policy(&self) -> Option<SeriesPolicy> {
        SeriesPolicy::from_options(&self.options).ok()
    }
}

/// The run's two series; the daily one in the zone of UTC offset `daily_offset_minutes`. With
/// `limits`, the widest (an upgrade run creates them on a release before series limits, and
/// sets them once the cluster runs a version that has them).
pub fn series(daily_offset_minutes: i16, limits: bool) -> Vec<Series> {
    let unlimited = || if limits { unlimited() } else { GaplessOptions::default() };
    vec![
        Series { tag: NEVER_TAG.into(), options: GaplessOptions { reset: Some(Reset::Never), ..unlimited() } },
        Series {
            tag: DAILY_TAG.into(),
            options: GaplessOptions {
                reset: Some(Reset::Day),
                utc_offset: Some(format_utc_offset(daily_offset_minutes)),
                format: Some(DAILY_FORMAT.into()),
                on_period_close: Some(PeriodClose::Void),
                ..unlimited()
            },
        },
    ]
}

/// Options with the widest limits: the run's callers all come from one address, and its
/// verdict is about gaps, not rates.
pub fn unlimited() -> GaplessOptions {
    GaplessOptions {
        max_numbers: Some(leaf_api::gapless::MAX_SERIES_NUMBERS),
        issues_per_sec: Some(leaf_api::gapless::MAX_ISSUES_PER_SEC),
        ..GaplessOptions::default()
    }
}

/// The UTC offset (minutes) of a zone whose midnight falls on the whole UTC minute nearest
/// `target_ms` among those strictly inside `from_ms..to_ms` (Unix ms); `None` when that span
/// holds no whole minute.
pub fn midnight_offset(from_ms: i64, to_ms: i64, target_ms: i64) -> Option<i16> {
    let first = from_ms.div_euclid(60_000) + 1;
    let last = (to_ms - 1).div_euclid(60_000);
    if first > last {
        return None;
    }
    let minute = (target_ms + 30_000).div_euclid(60_000).clamp(first, last);
    // Local time is UTC + offset: midnight at this minute of the UTC day needs offset -m (or
    // 1440 - m, whichever is within ±14 h).
    let m = minute.rem_euclid(1440) as i16;
    Some(if m <= MAX_UTC_OFFSET_MINUTES { -m } else { 1440 - m })
}

/// Creates `series` through `admin` (retried; a series that exists already is fine).
pub async fn create(admin: &Client, series: &[Series]) -> anyhow::Result<()> {
    for s in series {
        let req = CreateTagRequest {
            tag: s.tag.clone(),
            step: 1,
            profile: Some(Profile::Gapless),
            gapless: Some(s.options.clone()),
            ..Default::default()
        };
        let mut attempt = 1;
        loop {
            match admin.create_tag(&req).await {
                Ok(_) => break,
                Err(e) if e.code() == Some(ErrorCode::TagExists) && attempt > 1 => break,
                Err(e) if attempt >= 5 => anyhow::bail!("creating gapless series {}: {e}", s.tag),
                Err(e) => {
                    eprintln!("leaf-chaos: creating gapless series {} (attempt {attempt}): {e}; retrying", s.tag);
                    attempt += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
    Ok(())
}

/// One operation of the workload.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum GaplessOp {
    /// `POST /api/gapless/{tag}/issue {"key"}`: the series' next number, or the key's.
    Issue { tag: String, key: String },
    /// `POST /api/gapless/{tag}/reserve`: the next number held [`HOLD_SECONDS`], or the key's.
    Reserve { tag: String, key: String },
    /// `POST /api/gapless/{tag}/confirm`: the key's reservation made final.
    Confirm { tag: String, key: String },
    /// `POST /api/gapless/{tag}/void` with [`VOID_REASON`].
    Void { tag: String, key: String },
}

impl GaplessOp {
    fn describe(&self) -> String {
        let (what, tag, key) = self.parts();
        format!("{what} {tag} {key}")
    }

    fn parts(&self) -> (&'static str, &str, &str) {
        match self {
            GaplessOp::Issue { tag, key } => ("issue", tag, key),
            GaplessOp::Reserve { tag, key } => ("reserve", tag, key),
            GaplessOp::Confirm { tag, key } => ("confirm", tag, key),
            GaplessOp::Void { tag, key } => ("void", tag, key),
        }
    }

    /// Whether it asks for a number (and so stamps a new one's time).
    fn takes_a_number(&self) -> bool {
        matches!(self, GaplessOp::Issue { .. } | GaplessOp::Reserve { .. })
    }

    async fn send(&self, c: &Client) -> Result<IssuedNumber, leaf_client::ClientError> {
        match self {
            GaplessOp::Issue { tag, key } => c.gapless(tag).issue(key).await,
            GaplessOp::Reserve { tag, key } => c.gapless(tag).reserve(key, Some(HOLD_SECONDS)).await,
            GaplessOp::Confirm { tag, key } => c.gapless(tag).confirm(key).await,
            GaplessOp::Void { tag, key } => c.gapless(tag).void(key, VOID_REASON).await,
        }
    }
}

/// One attempt of an operation (a line of `gapless.jsonl`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptLine {
    pub worker: u32,
    pub node: u64,
    pub op: GaplessOp,
    /// 1 for an operation's first attempt, 2 for its first retry, ….
    pub try_no: u32,
    /// The operation asks again for a key that was answered before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeat: bool,
    /// Harness wall-clock time (Unix ms) of the call and of its answer.
    pub inv_ms: i64,
    pub done_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<IssuedNumber>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The error was a definite refusal (`number_conflict`: a confirm of a reservation that
    /// expired meanwhile): the operation is answered, and the number must not be confirmed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
}

impl AttemptLine {
    /// The attempt as the gapless checker takes it.
    fn attempt(&self) -> Attempt {
        let (_, tag, key) = self.op.parts();
        let outcome = match (&self.ok, &self.error) {
            (Some(n), _) => Outcome::Ok(n.clone()),
            (None, e) => Outcome::Failed(e.clone().unwrap_or_default()),
        };
        Attempt { tag: tag.to_string(), key: key.to_string(), outcome }
    }
}

/// An operation in flight: a worker's current one and its sequence number.
type Pending = BTreeMap<u32, (u64, GaplessOp)>;

/// The workload's shared state: the attempt log, the operations in flight, the stop.
pub struct Workload {
    series: Vec<Series>,
    out: Mutex<BufWriter<File>>,
    history: Arc<History>,
    pending: Mutex<Pending>,
    next_seq: AtomicU64,
    stop: AtomicBool,
    /// After the stop: until when a worker keeps retrying its operation.
    drain_until: Mutex<Option<Instant>>,
    /// What kept the run from verifying everything (operations never answered).
    notes: Mutex<Vec<String>>,
    pub answered: AtomicU64,
}

impl Workload {
    /// A workload over `series`, writing its attempts to `dir`/[`ATTEMPTS_FILE`].
    pub fn create(dir: &Path, series: Vec<Series>, history: Arc<History>) -> anyhow::Result<Workload> {
        let path = dir.join(ATTEMPTS_FILE);
        let file = File::create(&path).with_context(|| format!("create {}", path.display()))?;
        Ok(Workload {
            series,
            out: Mutex::new(BufWriter::new(file)),
            history,
            pending: Mutex::default(),
            next_seq: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            drain_until: Mutex::new(None),
            notes: Mutex::default(),
            answered: AtomicU64::new(0),
        })
    }

    pub fn series(&self) -> &[Series] {
        &self.series
    }

    fn wall_ms(&self) -> i64 {
        self.history.wall_start_ms() + (self.history.now_ns() / 1_000_000) as i64
    }

    fn write(&self, line: &AttemptLine) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // A line that cannot be written shows as an unknown outcome (a key never answered).
        if serde_json::to_writer(&mut *out, line).is_ok() {
            let _ = out.write_all(b"\n");
        }
    }

    fn note(&self, note: String) {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).push(note);
    }

    /// The operations in flight now (worker → sequence number).
    pub fn in_flight(&self) -> BTreeMap<u32, u64> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(w, (s, _))| (*w, *s)).collect()
    }

    /// Waits until every operation of `snapshot` has been answered, or `deadline`; each one
    /// still unanswered then is noted (the verdict can then be no better than unknown).
    /// Returns how many were unanswered.
    pub async fn await_answered(&self, snapshot: &BTreeMap<u32, u64>, deadline: Instant, when: &str) -> usize {
        loop {
            let left: Vec<String> = {
                let pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                snapshot
                    .iter()
                    .filter_map(|(w, s)| pending.get(w).filter(|(p, _)| p == s).map(|(_, op)| op.describe()))
                    .collect()
            };
            if left.is_empty() {
                return 0;
            }
            if Instant::now() >= deadline {
                for op in &left {
                    self.note(format!("{op}: in flight {when}, still unanswered at the recovery deadline"));
                }
                return left.len();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Stops the workers: each finishes its operation, retrying until `drain_until`.
    pub fn stop(&self, drain_until: Instant) {
        *self.drain_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(drain_until);
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Stops at once (the run is being torn down): a stop without a drain deadline.
    pub fn abort(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Past the drain deadline (or stopped without one).
    fn drained(&self) -> bool {
        self.stopped() && self.drain_until.lock().unwrap_or_else(|e| e.into_inner()).is_none_or(|d| Instant::now() >= d)
    }

    pub fn flush(&self) -> anyhow::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.flush()?;
        out.get_ref().sync_all()?;
        Ok(())
    }

    /// The notes so far.
    pub fn notes(&self) -> Vec<String> {
        self.notes.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The nodes a worker may call, with a client each (the run's current members).
pub type Targets = Arc<std::sync::RwLock<BTreeMap<u64, Client>>>;

/// How an operation ended.
enum Ended {
    Answered,
    /// A definite refusal (a confirm of an expired reservation).
    Refused,
    /// No answer by the drain deadline, after this many attempts.
    Unanswered(u32),
}

/// A gapless worker: one operation at a time, paced to `period`, each attempt to the next node
/// round-robin, an operation retried until it is answered (after the stop, until the drain
/// deadline). A new key is issued, or reserved and then confirmed, voided or left to expire.
pub async fn worker(w: Arc<Workload>, id: u32, seed: u64, period: Duration, targets: Targets) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6761_706c_6573_7300 ^ u64::from(id));
    let mut answered: Vec<(String, String)> = Vec::new();
    let mut next_node = id as usize;
    let mut n = 0u64;
    while !w.stopped() {
        let started = Instant::now();
        let repeat = !answered.is_empty() && rng.gen_ratio(1, 8);
        let (tag, key) = if repeat {
            answered[rng.gen_range(0..answered.len())].clone()
        } else {
            n += 1;
            let tag = w.series[rng.gen_range(0..w.series.len())].tag.clone();
            (tag, format!("chaos-{seed}-{id}-{n}"))
        };
        let reserve = !repeat && rng.gen_ratio(3, 8);
        let op = if reserve {
            GaplessOp::Reserve { tag: tag.clone(), key: key.clone() }
        } else {
            GaplessOp::Issue { tag: tag.clone(), key: key.clone() }
        };
        if let Ended::Answered = perform(&w, id, &op, repeat, &targets, &mut rng, &mut next_node).await {
            w.answered.fetch_add(1, Ordering::Relaxed);
            if !repeat {
                if answered.len() < REPEAT_POOL {
                    answered.push((tag.clone(), key.clone()));
                } else {
                    let i = rng.gen_range(0..answered.len());
                    answered[i] = (tag.clone(), key.clone());
                }
            }
            let settle = match (reserve, rng.gen_range(0..3)) {
                (true, 0) => Some(GaplessOp::Confirm { tag, key }),
                (true, 1) => Some(GaplessOp::Void { tag, key }),
                _ => None,
            };
            if let Some(op) = settle {
                perform(&w, id, &op, false, &targets, &mut rng, &mut next_node).await;
            }
        }
        let jitter = period.mul_f64(rng.gen_range(0.5..1.5));
        tokio::time::sleep(jitter.saturating_sub(started.elapsed())).await;
    }
}

/// Sends `op` until it is answered or definitely refused (after the stop, until the drain
/// deadline), each attempt a line of the log.
async fn perform(
    w: &Workload,
    id: u32,
    op: &GaplessOp,
    repeat: bool,
    targets: &Targets,
    rng: &mut StdRng,
    next_node: &mut usize,
) -> Ended {
    let seq = w.next_seq.fetch_add(1, Ordering::Relaxed);
    w.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(id, (seq, op.clone()));
    let mut try_no = 0;
    let ended = loop {
        let pick = {
            let t = targets.read().unwrap_or_else(|e| e.into_inner());
            let nodes: Vec<(&u64, &Client)> = t.iter().collect();
            *next_node = next_node.wrapping_add(1);
            (!nodes.is_empty()).then(|| {
                let (id, c) = nodes[*next_node % nodes.len()];
                (*id, c.clone())
            })
        };
        let Some((node, client)) = pick else {
            if w.drained() {
                break Ended::Unanswered(try_no);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        try_no += 1;
        let inv_ms = w.wall_ms();
        let res = op.send(&client).await;
        let done_ms = w.wall_ms();
        let refused = matches!(&res, Err(e) if e.code() == Some(ErrorCode::NumberConflict));
        let (ok, error) = match res {
            Ok(n) => (Some(n), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let line =
            AttemptLine { worker: id, node, op: op.clone(), try_no, repeat, inv_ms, done_ms, ok, error, refused };
        w.write(&line);
        if line.ok.is_some() {
            break Ended::Answered;
        }
        if refused {
            break Ended::Refused;
        }
        if w.drained() {
            break Ended::Unanswered(try_no);
        }
        // A dead node answers at once: do not spin.
        tokio::time::sleep(Duration::from_millis(rng.gen_range(20..80))).await;
    };
    w.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    if let Ended::Unanswered(tries) = ended {
        w.note(format!("{}: unanswered after {tries} attempts when the workers stopped", op.describe()));
    }
    ended
}
mod verdict;

pub use self::verdict::*;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daily_midnight_falls_on_the_minute_nearest_the_target() {
        // 2026-11-28 00:00 UTC; midnight of zone +00:00.
        const DAY: i64 = 1_795_824_000_000;
        assert_eq!(midnight_offset(DAY - 10_000, DAY + 50_000, DAY + 5_000), Some(0));
        // 10:30 UTC is midnight at -10:30; 20:00 UTC at +04:00.
        let at = |h: i64, m: i64| DAY + (h * 60 + m) * 60_000;
        assert_eq!(midnight_offset(at(10, 29), at(10, 31), at(10, 30) + 20_000), Some(-630));
        assert_eq!(midnight_offset(at(20, 0) - 1, at(20, 2), at(20, 0)), Some(240));
        // The target clamps into the span; a span without a whole minute has none.
        assert_eq!(midnight_offset(at(3, 0) - 1, at(3, 0) + 1, at(9, 0)), Some(-180));
        assert_eq!(midnight_offset(at(3, 0) + 1, at(3, 0) + 59_000, at(3, 0)), None);
        for m in 0..1440 {
            let o = midnight_offset(at(0, m) - 1, at(0, m) + 1, at(0, m)).unwrap();
            let p = SeriesPolicy::from_options(&series(o, true)[1].options).unwrap();
            assert_ne!(p.period_at(at(0, m) - 1), p.period_at(at(0, m)), "minute {m}, offset {o}");
        }
    }
}
