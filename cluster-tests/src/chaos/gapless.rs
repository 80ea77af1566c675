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
//! The daily series' zone is chosen so that its midnight falls on the whole minute nearest
//! the middle of the fault phase (when the run spans one): its numbers restart at 1 while
//! leaders change and clocks are skewed, and each period must still be 1..=N.
//!
//! About three new keys in eight are reserved instead of issued (held [`HOLD_SECONDS`]), and a
//! reservation is then confirmed, voided with a reason, or left for the leader to void at its
//! deadline (a third each); the daily series voids what a closed day left open
//! (`on_period_close: void`). A confirm refused as `number_conflict` (its reservation expired
//! meanwhile) is a definite answer, not a retry. Before the ledgers are read every reservation
//! must be settled, and the checker then requires every number issued, confirmed or voided
//! with a reason, in the state each answer said.
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use leaf_api::gapless::{
    GaplessOptions, IssuedNumber, LedgerEntry, LedgerQuery, NumberState, PeriodClose, Reset, SeriesPolicy,
};
use leaf_api::profile::{format_utc_offset, Profile, MAX_UTC_OFFSET_MINUTES};
use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::Client;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::check::Verdict;
use super::history::History;
use crate::gapless_check::{self, Attempt, LedgerRow, Outcome};

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

/// The run's two series; the daily one in the zone of UTC offset `daily_offset_minutes`.
pub fn series(daily_offset_minutes: i16) -> Vec<Series> {
    vec![
        Series {
            tag: NEVER_TAG.into(),
            options: GaplessOptions { reset: Some(Reset::Never), ..GaplessOptions::default() },
        },
        Series {
            tag: DAILY_TAG.into(),
            options: GaplessOptions {
                reset: Some(Reset::Day),
                utc_offset: Some(format_utc_offset(daily_offset_minutes)),
                format: Some(DAILY_FORMAT.into()),
                on_period_close: Some(PeriodClose::Void),
                retain_periods: None,
            },
        },
    ]
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
        let line = AttemptLine { worker: id, node, op: op.clone(), try_no, repeat, inv_ms, done_ms, ok, error };
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

/// One series' ledger as a node answered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLedger {
    pub node: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numbers: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// How it differs from the reference ledger (a violation), if it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference: Option<String>,
    /// The whole ledger, kept only when it differs from the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<Vec<LedgerEntry>>,
    /// Why it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A series and its ledger read from every member after the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeriesLedger {
    pub series: Series,
    /// The node whose ledger is `entries` (the first that answered).
    pub reference: Option<u64>,
    pub entries: Vec<LedgerEntry>,
    pub head: String,
    pub nodes: Vec<NodeLedger>,
}

/// `gapless-ledgers.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgersFile {
    pub series: Vec<SeriesLedger>,
    /// What kept the run from verifying everything: operations never answered, ledgers not read.
    pub notes: Vec<String>,
}

/// A series' ledger as a node answers it: its entries and its chain's head.
type Ledger = (Vec<LedgerEntry>, String);

/// How `b` differs from the reference ledger `a`, if it does.
fn difference(a: &Ledger, b: &Ledger) -> Option<String> {
    if a == b {
        return None;
    }
    if let Some(i) = (0..a.0.len().min(b.0.len())).find(|&i| a.0[i] != b.0[i]) {
        return Some(format!("entry {i} differs: {:?} against the reference's {:?}", b.0[i], a.0[i]));
    }
    if a.0.len() != b.0.len() {
        return Some(format!("{} numbers against the reference's {}", b.0.len(), a.0.len()));
    }
    Some(format!("head {} against the reference's {}", b.1, a.1))
}

/// Reads each series' whole ledger from each of `nodes` (through `admin`, each read retried
/// for up to `bound`), and compares them. A transient difference (a node still applying) is
/// read again, for up to `bound` too; one that stays is kept as a violation.
pub async fn read_ledgers(
    series: &[Series],
    nodes: &[u64],
    admin: impl Fn(u64) -> Client,
    bound: Duration,
) -> LedgersFile {
    let mut file = LedgersFile::default();
    // Every reservation settled first: those left open are voided by the leader at their
    // deadline (or as their day closes).
    let deadline = Instant::now() + bound;
    for s in series {
        let q = LedgerQuery { limit: Some(1), state: Some(NumberState::Reserved), ..LedgerQuery::default() };
        let mut at = 0;
        loop {
            let id = nodes[at % nodes.len().max(1)];
            at += 1;
            match admin(id).gapless(&s.tag).ledger_page(&q).await {
                Ok(p) if p.open_reservations == 0 => break,
                Ok(p) if Instant::now() >= deadline => {
                    file.notes.push(format!("{} reservations of {} still open when read", p.open_reservations, s.tag));
                    break;
                }
                _ if Instant::now() >= deadline => break,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    for s in series {
        let deadline = Instant::now() + bound;
        let mut answers: Vec<(u64, Result<Ledger, String>)>;
        loop {
            answers = Vec::new();
            for &id in nodes {
                let c = admin(id);
                let got = loop {
                    match c.gapless(&s.tag).ledger(None).await {
                        Ok(l) => break Ok(l),
                        Err(e) if Instant::now() >= deadline => break Err(e.to_string()),
                        Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                    }
                };
                answers.push((id, got));
            }
            let oks: Vec<&Ledger> = answers.iter().filter_map(|(_, r)| r.as_ref().ok()).collect();
            let agree = oks.windows(2).all(|w| w[0] == w[1]);
            if agree || Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let reference = answers.iter().find_map(|(id, r)| r.as_ref().ok().map(|l| (*id, l.clone())));
        let mut out = SeriesLedger {
            series: s.clone(),
            reference: reference.as_ref().map(|(id, _)| *id),
            entries: Vec::new(),
            head: String::new(),
            nodes: Vec::new(),
        };
        for (id, r) in answers {
            let mut n =
                NodeLedger { node: id, numbers: None, head: None, difference: None, entries: None, error: None };
            match r {
                Ok(l) => {
                    n.numbers = Some(l.0.len());
                    n.head = Some(l.1.clone());
                    n.difference = reference.as_ref().and_then(|(_, r)| difference(r, &l));
                    if n.difference.is_some() {
                        n.entries = Some(l.0);
                    }
                }
                Err(e) => {
                    file.notes.push(format!("the ledger of {} could not be read from node {id}: {e}", s.tag));
                    n.error = Some(e);
                }
            }
            out.nodes.push(n);
        }
        if let Some((_, (entries, head))) = reference {
            (out.entries, out.head) = (entries, head);
        }
        file.series.push(out);
    }
    file
}

/// Writes `gapless-ledgers.json` into `dir`.
pub fn write_ledgers(dir: &Path, ledgers: &LedgersFile) -> anyhow::Result<()> {
    std::fs::write(dir.join(LEDGERS_FILE), serde_json::to_vec(ledgers)?)?;
    Ok(())
}

/// A series' numbers in the final ledger.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeriesStats {
    /// Numbers per period (0, or `yyyyMMdd` for the daily series).
    pub periods: BTreeMap<u32, u64>,
    /// Members whose ledger was read and compared.
    pub nodes_compared: usize,
}

/// The gapless part of `results.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GaplessResults {
    pub valid: Option<Verdict>,
    pub series: BTreeMap<String, SeriesStats>,
    /// Numbers in the ledgers.
    pub numbers: usize,
    /// Distinct keys asked for.
    pub keys: usize,
    pub attempts: usize,
    pub ok_answers: usize,
    pub failed_attempts: usize,
    /// Keys that needed more than one attempt (a failure or timeout first).
    pub keys_retried: usize,
    /// Operations that asked again for a key answered before.
    pub repeats: usize,
    /// Answers flagged `replayed` (repeats, and retries whose first attempt had committed).
    pub replays: usize,
    /// Keys never answered that the ledger holds (their lost answer committed).
    pub unconfirmed_issued: usize,
    /// Farthest a new number's leader stamp (`issued_ms`) was behind or ahead of the
    /// harness's clock around its call, ms: clock faults on the leader move it.
    pub stamp_behind_ms: i64,
    pub stamp_ahead_ms: i64,
    /// Numbers by how they ended: issued, confirmed, voided (by a worker), expired (voided by
    /// the leader at the deadline), period_closed (by the leader as their day closed).
    #[serde(default)]
    pub ended: BTreeMap<String, usize>,
    pub violation_count: usize,
    /// The violations (the first few): of the gapless checker, ledgers that differ between
    /// nodes, repeats not flagged `replayed`, displays not in the series' format.
    pub violations: Vec<String>,
    /// What could not be verified (the verdict is then at best unknown).
    pub notes: Vec<String>,
}

/// Reads the attempts and ledgers of the run in `dir` and checks them; `None` when the run had
/// no gapless workload.
pub fn check_dir(dir: &Path) -> anyhow::Result<Option<GaplessResults>> {
    let path = dir.join(ATTEMPTS_FILE);
    if !path.exists() {
        return Ok(None);
    }
    let mut lines = Vec::new();
    let mut notes = Vec::new();
    for (i, line) in BufReader::new(File::open(&path)?).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<AttemptLine>(&line) {
            Ok(l) => lines.push(l),
            // A torn last line (the run was stopped) leaves an attempt unknown.
            Err(e) => notes.push(format!("{}:{}: {e}", path.display(), i + 1)),
        }
    }
    let ledgers: LedgersFile = match std::fs::read(dir.join(LEDGERS_FILE)) {
        Ok(b) => serde_json::from_slice(&b).with_context(|| format!("{}/{LEDGERS_FILE}", dir.display()))?,
        Err(e) => {
            notes.push(format!("{LEDGERS_FILE}: {e}: the ledgers were never read"));
            LedgersFile::default()
        }
    };
    Ok(Some(check(&lines, &ledgers, notes)))
}

/// Checks attempts against the ledgers: the gapless checker over the reference ledgers, every
/// node's ledger the same, repeats answered `replayed`, displays in the series' format.
pub fn check(lines: &[AttemptLine], ledgers: &LedgersFile, mut notes: Vec<String>) -> GaplessResults {
    notes.extend(ledgers.notes.iter().cloned());
    let mut violations: Vec<String> = Vec::new();
    let mut r = GaplessResults::default();
    let mut rows = Vec::new();
    for s in &ledgers.series {
        let stats = r.series.entry(s.series.tag.clone()).or_default();
        stats.nodes_compared = s.nodes.iter().filter(|n| n.error.is_none()).count();
        let policy = s.series.policy();
        for e in &s.entries {
            *stats.periods.entry(e.period).or_default() += 1;
            let display = policy.as_ref().and_then(|p| p.display(e.period, e.number));
            if e.display != display || policy.as_ref().is_some_and(|p| !p.is_period(e.period)) {
                violations.push(format!(
                    "{} number {} of period {}: display {:?}, the format makes {display:?}",
                    s.series.tag, e.number, e.period, e.display
                ));
            }
            let how = match (e.state, e.settled.as_ref().and_then(|s| s.cause)) {
                (NumberState::Voided, Some(leaf_api::gapless::VoidCause::Expired)) => "expired",
                (NumberState::Voided, Some(leaf_api::gapless::VoidCause::PeriodClosed)) => "period_closed",
                (NumberState::Voided, _) => "voided",
                (NumberState::Confirmed, _) => "confirmed",
                (NumberState::Reserved, _) => "reserved",
                (NumberState::Issued, _) => "issued",
            };
            *r.ended.entry(how.to_string()).or_default() += 1;
            rows.push(LedgerRow::of(&s.series.tag, e));
        }
        for n in &s.nodes {
            if let Some(d) = &n.difference {
                violations.push(format!("the ledger of {} on node {} differs: {d}", s.series.tag, n.node));
            }
        }
    }
    // Answers can only be judged against a ledger that was read.
    let read: BTreeSet<&str> =
        ledgers.series.iter().filter(|s| s.reference.is_some()).map(|s| s.series.tag.as_str()).collect();
    for s in ledgers.series.iter().filter(|s| s.reference.is_none()) {
        notes.push(format!("the ledger of {} was read from no node: its answers are not checked", s.series.tag));
    }
    let attempts: Vec<Attempt> =
        lines.iter().map(AttemptLine::attempt).filter(|a| read.contains(a.tag.as_str())).collect();
    let report = gapless_check::check(&attempts, &rows);
    violations.splice(0..0, report.violations.iter().map(|v| format!("{v:?}")));
    let mut tries: BTreeMap<(&GaplessOp, bool), u32> = BTreeMap::new();
    let mut answered: BTreeSet<&GaplessOp> = BTreeSet::new();
    for l in lines {
        let t = tries.entry((&l.op, l.repeat)).or_default();
        *t = (*t).max(l.try_no);
        if l.try_no == 1 && l.repeat {
            r.repeats += 1;
        }
        if let Some(n) = &l.ok {
            answered.insert(&l.op);
            if l.repeat && !n.replayed {
                violations.push(format!("{}: asked again after an answer, not flagged replayed", l.op.describe()));
            }
            if !n.replayed && l.op.takes_a_number() {
                r.stamp_behind_ms = r.stamp_behind_ms.min(n.issued_ms - l.inv_ms);
                r.stamp_ahead_ms = r.stamp_ahead_ms.max(n.issued_ms - l.done_ms);
            }
        }
    }
    r.keys_retried = tries.iter().filter(|((_, repeat), t)| !repeat && **t > 1).count();
    let unanswered = tries.keys().filter(|(op, _)| !answered.contains(op)).count();
    if unanswered > 0 {
        notes.push(format!("{unanswered} keys never answered"));
    }
    if report.ok_answers == 0 {
        notes.push("no issue was answered".into());
    }
    if ledgers.series.is_empty() {
        notes.push("no ledger was read".into());
    }
    r.numbers = report.numbers;
    r.keys = report.keys;
    r.attempts = lines.len();
    r.ok_answers = report.ok_answers;
    r.failed_attempts = report.failed_attempts;
    r.replays = report.replays;
    r.unconfirmed_issued = report.unconfirmed_issued;
    r.violation_count = violations.len();
    violations.truncate(EXAMPLES);
    notes.truncate(EXAMPLES);
    r.valid = Some(match (violations.is_empty(), notes.is_empty()) {
        (false, _) => Verdict::False,
        (true, false) => Verdict::Unknown,
        (true, true) => Verdict::True,
    });
    r.violations = violations;
    r.notes = notes;
    r
}

/// The gapless lines of the run's summary.
pub fn summary(g: &GaplessResults) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let verdict = g.valid.map_or("-".to_string(), |v| format!("{v:?}"));
    let _ = writeln!(s, "\ngapless: verdict {verdict}");
    for (tag, st) in &g.series {
        let periods: Vec<String> = st.periods.iter().map(|(p, n)| format!("{p}: {n}")).collect();
        let _ = writeln!(
            s,
            "  {tag}: {} numbers ({}), ledger identical on {} nodes",
            st.periods.values().sum::<u64>(),
            if periods.is_empty() { "none".into() } else { format!("period {}", periods.join(", period ")) },
            st.nodes_compared
        );
    }
    let _ = writeln!(
        s,
        "  {} numbers issued, {} keys ({} retried, {} unconfirmed issued), {} attempts ({} ok, {} failed), \
         {} repeats of answered keys, {} answers replayed",
        g.numbers,
        g.keys,
        g.keys_retried,
        g.unconfirmed_issued,
        g.attempts,
        g.ok_answers,
        g.failed_attempts,
        g.repeats,
        g.replays
    );
    let _ = writeln!(
        s,
        "  leader stamps against the harness clock: up to {} ms behind, {} ms ahead",
        -g.stamp_behind_ms, g.stamp_ahead_ms
    );
    let ended: Vec<String> = g.ended.iter().map(|(how, n)| format!("{n} {how}")).collect();
    let _ = writeln!(s, "  numbers ended: {}", if ended.is_empty() { "none".into() } else { ended.join(", ") });
    let _ = writeln!(s, "  violations: {}", g.violation_count);
    for v in &g.violations {
        let _ = writeln!(s, "    {v}");
    }
    for n in &g.notes {
        let _ = writeln!(s, "  not verified: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::Actor;
    use leaf_api::gapless::NumberState;

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
            let p = SeriesPolicy::from_options(&series(o)[1].options).unwrap();
            assert_ne!(p.period_at(at(0, m) - 1), p.period_at(at(0, m)), "minute {m}, offset {o}");
        }
    }

    fn number(tag: &str, key: &str, number: u64, replayed: bool) -> IssuedNumber {
        IssuedNumber {
            tag: tag.into(),
            period: 0,
            number,
            display: None,
            key: key.into(),
            state: NumberState::Issued,
            issued_ms: 1_000,
            deadline_ms: None,
            reason: None,
            replayed,
        }
    }

    fn line(key: &str, try_no: u32, repeat: bool, ok: Option<IssuedNumber>) -> AttemptLine {
        AttemptLine {
            worker: 0,
            node: 1,
            op: GaplessOp::Issue { tag: NEVER_TAG.into(), key: key.into() },
            try_no,
            repeat,
            inv_ms: 990,
            done_ms: 1_010,
            error: ok.is_none().then(|| "timeout".into()),
            ok,
        }
    }

    fn entry(number: u64, key: &str) -> LedgerEntry {
        LedgerEntry {
            period: 0,
            number,
            display: None,
            key: key.into(),
            state: NumberState::Issued,
            actor: Actor::Unattributed,
            at_ms: 1_000,
            deadline_ms: None,
            seq: number,
            hash: format!("{number:064}"),
            settled: None,
        }
    }

    fn ledgers(entries: Vec<LedgerEntry>, nodes: &[u64]) -> LedgersFile {
        let head = entries.last().map_or(String::new(), |e| e.hash.clone());
        let node = |id| NodeLedger {
            node: id,
            numbers: Some(entries.len()),
            head: Some(head.clone()),
            difference: None,
            entries: None,
            error: None,
        };
        LedgersFile {
            series: vec![SeriesLedger {
                series: series(0).remove(0),
                reference: Some(nodes[0]),
                entries: entries.clone(),
                head: head.clone(),
                nodes: nodes.iter().map(|&id| node(id)).collect(),
            }],
            notes: Vec::new(),
        }
    }

    #[test]
    fn attempt_lines_round_trip_and_a_clean_run_is_valid() {
        let lines = vec![
            line("k1", 1, false, None),
            line("k1", 2, false, Some(number(NEVER_TAG, "k1", 1, true))),
            line("k2", 1, false, Some(number(NEVER_TAG, "k2", 2, false))),
            line("k1", 1, true, Some(number(NEVER_TAG, "k1", 1, true))),
        ];
        for l in &lines {
            let text = serde_json::to_string(l).unwrap();
            assert!(text.contains(r#""op":{"kind":"issue","tag":"chaos-gl-never""#), "{text}");
            assert_eq!(&serde_json::from_str::<AttemptLine>(&text).unwrap(), l);
        }
        let l = ledgers(vec![entry(1, "k1"), entry(2, "k2")], &[1, 2, 3]);
        let r = check(&lines, &l, Vec::new());
        assert_eq!(r.valid, Some(Verdict::True), "{}", summary(&r));
        assert_eq!((r.numbers, r.keys, r.keys_retried, r.repeats, r.replays), (2, 2, 1, 1, 2));
        assert_eq!(r.series[NEVER_TAG].nodes_compared, 3);
        assert!(summary(&r).contains("2 numbers issued"), "{}", summary(&r));
    }

    #[test]
    fn a_new_number_for_a_repeat_a_gap_or_a_diverging_node_is_a_violation() {
        let clean = vec![
            line("k1", 1, false, Some(number(NEVER_TAG, "k1", 1, false))),
            line("k2", 1, false, Some(number(NEVER_TAG, "k2", 2, false))),
        ];
        let l = ledgers(vec![entry(1, "k1"), entry(2, "k2")], &[1, 2]);
        // A repeat answered with a new number (the ledger holds the key twice).
        let mut lines = clean.clone();
        lines.push(line("k1", 1, true, Some(number(NEVER_TAG, "k1", 3, false))));
        let mut twice = l.clone();
        twice.series[0].entries.push(entry(3, "k1"));
        let r = check(&lines, &twice, Vec::new());
        assert_eq!(r.valid, Some(Verdict::False));
        assert!(r.violations.iter().any(|v| v.contains("KeyAnsweredTwoNumbers")), "{:?}", r.violations);
        assert!(r.violations.iter().any(|v| v.contains("not flagged replayed")), "{:?}", r.violations);
        // A skipped number.
        let mut gap = l.clone();
        gap.series[0].entries[1].number = 3;
        let r = check(&clean[..1], &gap, Vec::new());
        assert!(r.violations.iter().any(|v| v.contains("Gap")), "{:?}", r.violations);
        // A node whose ledger differs.
        let mut diverged = l.clone();
        diverged.series[0].nodes[1].difference = Some("1 numbers against the reference's 2".into());
        let r = check(&clean, &diverged, Vec::new());
        assert_eq!(r.valid, Some(Verdict::False));
        assert!(r.violations[0].contains("on node 2 differs"), "{:?}", r.violations);
        // A key never answered, or no ledgers (answers then unjudged): unknown, never valid.
        let mut lines = clean.clone();
        lines.push(line("k3", 1, false, None));
        assert_eq!(check(&lines, &l, Vec::new()).valid, Some(Verdict::Unknown));
        assert_eq!(check(&clean, &LedgersFile::default(), Vec::new()).valid, Some(Verdict::Unknown));
        let mut unread = l.clone();
        unread.series[0].reference = None;
        unread.series[0].entries.clear();
        assert_eq!(check(&clean, &unread, Vec::new()).valid, Some(Verdict::Unknown));
    }

    #[test]
    fn ledgers_that_differ_say_where() {
        let a = (vec![entry(1, "a"), entry(2, "b")], "h".to_string());
        assert_eq!(difference(&a, &a.clone()), None);
        let short = (vec![entry(1, "a")], "h".to_string());
        assert!(difference(&a, &short).unwrap().contains("1 numbers against the reference's 2"));
        let other = (vec![entry(1, "a"), entry(2, "c")], "h".to_string());
        assert!(difference(&a, &other).unwrap().starts_with("entry 1 differs"));
        assert!(workers(12) == 4 && workers(1) == 2);
    }
}
