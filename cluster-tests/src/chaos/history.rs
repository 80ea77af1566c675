//! The recorded history of a chaos run: one JSON object per line (`history.jsonl`).
//!
//! Operations are recorded Jepsen-style as an `invoke` line and a completion line (`ok`,
//! `fail` for a definite error answer, `info` when the outcome is unknown: a timeout or a
//! broken connection), linked by `op`. Times are nanoseconds on the harness's monotonic clock
//! since the run started; the `meta` line maps them to wall-clock time. Faults, heals, clock
//! offsets, phases and the worker ID of each node are recorded in the same stream.
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::schedule::FaultKind;

/// First line of every history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    pub seed: u64,
    pub nodes: u64,
    /// Wall-clock time (Unix ms) at `time_ns` 0.
    pub wall_start_ms: i64,
    /// Snowflake epoch of the nodes, to decode IDs.
    pub epoch_ms: i64,
    pub faults: Vec<String>,
    /// The planned phase lengths.
    pub warmup_ms: u64,
    pub faults_ms: u64,
    pub after_ms: u64,
    /// The workload's tags with another profile than `segment` (absent in older histories).
    #[serde(default)]
    pub profiles: std::collections::BTreeMap<String, TagProfile>,
}

/// A tag's profile as the checker needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TagProfile {
    /// Strictly increasing in real time across the cluster (served by the leader).
    Monotonic,
    /// Unique only (not ordered, not inside the journals' ranges: the IDs are mapped).
    Obfuscated,
    /// `yyyyMMdd` + counter: well-formed, dated within the run.
    Daily(leaf_api::profile::DailyFormat),
    /// A segment tag with an upper bound: no ID above it; past it, `tag_exhausted`.
    Bounded(i64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Warmup,
    Faults,
    Recovery,
    After,
    Done,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Faults => "faults",
            Phase::Recovery => "recovery",
            Phase::After => "after",
            Phase::Done => "done",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Segment,
    Snowflake,
}

/// An operation's invocation or completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpEvent {
    pub op: u64,
    /// The client worker (one outstanding operation each); the harness's own checks use
    /// [`HARNESS_PROCESS`].
    pub process: u32,
    pub time_ns: u64,
    pub mode: Mode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    pub node: u64,
    /// IDs asked for.
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a fault line is about: a kind of fault, or the heal of everything that ends the fault
/// phase. Recorded as the kind's name (`"kill"`, ...) or `"heal"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultSubject {
    Kind(FaultKind),
    /// Links opened, nodes restarted and clocks reset after the fault phase.
    HealAll,
}

impl FaultSubject {
    pub fn name(self) -> &'static str {
        match self {
            FaultSubject::Kind(k) => k.name(),
            FaultSubject::HealAll => "heal",
        }
    }
}

impl From<FaultKind> for FaultSubject {
    fn from(k: FaultKind) -> Self {
        FaultSubject::Kind(k)
    }
}

impl fmt::Display for FaultSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FaultSubject {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "heal" => Ok(FaultSubject::HealAll),
            kind => kind.parse().map(FaultSubject::Kind),
        }
    }
}

impl Serialize for FaultSubject {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for FaultSubject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// What a fault line records of its fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAction {
    /// Injected: the fault holds from here.
    Start,
    /// Healed: the fault is over.
    Heal,
    /// One step of a multi-step fault (a node of a rolling restart, a restart of the final heal).
    Step,
    /// A harness action that failed (a fault not injected or not healed as planned).
    Error,
}

impl FaultAction {
    pub fn name(self) -> &'static str {
        match self {
            FaultAction::Start => "start",
            FaultAction::Heal => "heal",
            FaultAction::Step => "step",
            FaultAction::Error => "error",
        }
    }
}

impl fmt::Display for FaultAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Process number of the harness's own requests (recovery checks, final requests).
pub const HARNESS_PROCESS: u32 = 1_000_000;

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Meta(Meta),
    Phase {
        time_ns: u64,
        phase: Phase,
    },
    Invoke(OpEvent),
    Ok(OpEvent),
    Fail(OpEvent),
    Info(OpEvent),
    /// A fault injected, healed, a step of a multi-step fault, or a failed harness action.
    Fault {
        time_ns: u64,
        kind: FaultSubject,
        action: FaultAction,
        nodes: Vec<u64>,
        detail: String,
        /// On a partition's heal: connections the proxies blackholed or cut while it held.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cut: Option<u64>,
    },
    /// Node `node`'s clock offset is about to become `offset_ms` (recorded before the change
    /// is sent; a restart resets it to 0).
    Clock {
        time_ns: u64,
        node: u64,
        offset_ms: i64,
    },
    /// Node `node` holds snowflake worker ID `worker_id` (from `/cluster/status`).
    Worker {
        time_ns: u64,
        node: u64,
        worker_id: u16,
    },
}

/// Appends events to `history.jsonl`. Shared by every client task.
pub struct History {
    out: Mutex<BufWriter<File>>,
    start: Instant,
    wall_start_ms: i64,
}

impl History {
    pub fn create(path: &Path) -> anyhow::Result<History> {
        let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
        let wall_start_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Ok(History { out: Mutex::new(BufWriter::new(file)), start: Instant::now(), wall_start_ms })
    }

    /// Wall-clock time (Unix ms) at `time_ns` 0.
    pub fn wall_start_ms(&self) -> i64 {
        self.wall_start_ms
    }

    /// Nanoseconds since the run started.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub fn write(&self, event: &Event) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        // A history that cannot be written is caught by the checker (missing completions).
        if serde_json::to_writer(&mut *out, event).is_ok() {
            let _ = out.write_all(b"\n");
        }
    }

    pub fn flush(&self) -> anyhow::Result<()> {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        out.flush()?;
        out.get_ref().sync_all()?;
        Ok(())
    }
}

/// Reads a history file.
pub fn read(path: &Path) -> anyhow::Result<Vec<Event>> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut events = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        events.push(serde_json::from_str(&line).with_context(|| format!("{}:{}", path.display(), n + 1))?);
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fault lines keep the strings recorded histories have: the kind's name (or `heal`) and
    /// `start`, `heal`, `step` or `error`.
    #[test]
    fn fault_lines_keep_their_recorded_strings() {
        let cases = [
            (FaultSubject::Kind(FaultKind::Kill), FaultAction::Start, r#""kind":"kill","action":"start""#),
            (FaultSubject::Kind(FaultKind::Netem), FaultAction::Heal, r#""kind":"netem","action":"heal""#),
            (FaultSubject::Kind(FaultKind::Restart), FaultAction::Step, r#""kind":"restart","action":"step""#),
            (FaultSubject::HealAll, FaultAction::Heal, r#""kind":"heal","action":"heal""#),
            (FaultSubject::HealAll, FaultAction::Error, r#""kind":"heal","action":"error""#),
        ];
        for (kind, action, text) in cases {
            let e = Event::Fault { time_ns: 7, kind, action, nodes: vec![1], detail: "d".into(), cut: None };
            let line = serde_json::to_string(&e).unwrap();
            assert!(line.contains(text), "{line}");
            assert_eq!(serde_json::from_str::<Event>(&line).unwrap(), e);
        }
        let old = r#"{"type":"fault","time_ns":1,"kind":"membership","action":"start","nodes":[1,4],"detail":"x"}"#;
        assert!(matches!(
            serde_json::from_str::<Event>(old).unwrap(),
            Event::Fault { kind: FaultSubject::Kind(FaultKind::Membership), action: FaultAction::Start, .. }
        ));
        assert!(serde_json::from_str::<Event>(&old.replace("membership", "nuke")).is_err());
    }
}
