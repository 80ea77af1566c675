//! The recorded history of a chaos run: one JSON object per line (`history.jsonl`).
//!
//! Operations are recorded Jepsen-style as an `invoke` line and a completion line (`ok`,
//! `fail` for a definite error answer, `info` when the outcome is unknown: a timeout or a
//! broken connection), linked by `op`. Times are nanoseconds on the harness's monotonic clock
//! since the run started; the `meta` line maps them to wall-clock time. Faults, heals, clock
//! offsets, phases and the worker ID of each node are recorded in the same stream.
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};

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
    /// A fault injected (`action` "start"), healed ("heal"), a step of a multi-step fault
    /// ("step"), or a failed harness action ("error").
    Fault {
        time_ns: u64,
        kind: String,
        action: String,
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
