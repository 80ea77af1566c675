//! The load of `leaf-failover-bench`: client tasks, each sending one kind of request at a steady
//! pace through one client (retrying over every node, or one attempt at one node), recording
//! every request, and noting each success in a shared [`Progress`] the driver waits on.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leaf_api::types::UpdateTagRequest;
use leaf_client::{Client, ClientError};
use tokio::task::JoinHandle;

use super::{Kind, Record, Via};

/// Most node IDs a [`Progress`] tracks (plain clients of nodes `1..SLOTS`).
const SLOTS: usize = 8;

/// When each kind last succeeded through each client, in nanoseconds since `base` (0: never).
pub struct Progress {
    base: Instant,
    last_ok: Vec<AtomicU64>,
    /// Errors seen per class, to print the first few messages of each.
    seen: Mutex<HashMap<String, u64>>,
}

impl Progress {
    pub fn new(base: Instant) -> Progress {
        Progress {
            base,
            last_ok: (0..Kind::ALL.len() * SLOTS).map(|_| AtomicU64::new(0)).collect(),
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Nanoseconds since the run's start.
    pub fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn slot(kind: Kind, via: Via) -> usize {
        let node = match via {
            Via::Retrying => 0,
            Via::Plain(id) => (id as usize).min(SLOTS - 1),
        };
        kind.index() * SLOTS + node
    }

    /// When `kind` last succeeded through `via` (0: never).
    pub fn last_ok(&self, kind: Kind, via: Via) -> u64 {
        self.last_ok[Self::slot(kind, via)].load(Ordering::Relaxed)
    }

    fn note_ok(&self, kind: Kind, via: Via, end_ns: u64) {
        self.last_ok[Self::slot(kind, via)].fetch_max(end_ns, Ordering::Relaxed);
    }

    /// Prints the first three messages of each error class (to stderr: the run's log).
    fn note_error(&self, kind: Kind, via: Via, class: &str, message: &str) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let n = seen.entry(format!("{kind:?} {via:?} {class}")).or_default();
        *n += 1;
        if *n <= 3 {
            eprintln!("  [{:.3} s] {} via {via:?}: {message}", self.now_ns() as f64 / 1e9, kind.name());
        }
    }
}

/// One client task: `kind` requests through `client` every `interval` (the next one at once
/// when a request took longer).
pub struct Target {
    pub kind: Kind,
    pub via: Via,
    pub client: Client,
    /// The segment or monotonic tag, the snowflake key, or the tag the admin writes update.
    pub tag: String,
    pub interval: Duration,
}

/// The running tasks.
pub struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<Vec<Record>>>,
}

impl Load {
    /// Starts one task per target.
    pub fn start(targets: Vec<Target>, progress: Arc<Progress>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = targets
            .into_iter()
            .map(|t| {
                let (stop, progress) = (stop.clone(), progress.clone());
                tokio::spawn(run(t, stop, progress))
            })
            .collect();
        Load { stop, tasks }
    }

    /// Stops every task and returns all their records.
    pub async fn finish(self) -> anyhow::Result<Vec<Record>> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for t in self.tasks {
            all.extend(t.await?);
        }
        all.sort_by_key(|r| r.end_ns);
        Ok(all)
    }
}

async fn run(t: Target, stop: Arc<AtomicBool>, progress: Arc<Progress>) -> Vec<Record> {
    let mut records = Vec::new();
    let mut n: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        let start_ns = progress.now_ns();
        let got = request(t.kind, &t.client, &t.tag, n).await;
        let end_ns = progress.now_ns();
        n += 1;
        let (ok, id, error) = match got {
            Ok(id) => {
                progress.note_ok(t.kind, t.via, end_ns);
                (true, id, None)
            }
            Err(e) => {
                let class = class_of(&e);
                progress.note_error(t.kind, t.via, &class, &e.to_string());
                (false, None, Some(class))
            }
        };
        records.push(Record { kind: t.kind, via: t.via, start_ns, end_ns, ok, id, error });
        let next = began + t.interval;
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
    }
    records
}

/// One request of `kind`; the ID for segment and monotonic tags.
async fn request(kind: Kind, c: &Client, tag: &str, n: u64) -> Result<Option<i64>, ClientError> {
    match kind {
        Kind::Segment | Kind::Monotonic => c.segment_id(tag).await.map(Some),
        Kind::Snowflake => c.snowflake_id(tag).await.map(|_| None),
        Kind::Admin => {
            let req = UpdateTagRequest { step: None, description: Some(format!("write {n}")), ..Default::default() };
            c.update_tag(tag, &req).await.map(|_| None)
        }
    }
}

/// A short class of an error for the tables: the API code, or what failed in transport.
pub fn class_of(e: &ClientError) -> String {
    match e {
        ClientError::Api { status, code, .. } => format!("{} {code}", status.as_u16()),
        ClientError::Transport { connect: true, .. } => "refused".into(),
        ClientError::Transport { .. } => "no answer".into(),
        ClientError::Timeout { .. } => "timeout".into(),
        ClientError::Decode { status, .. } => format!("{} undecodable", status.as_u16()),
        ClientError::AllNodesFailed { last, .. } => format!("gave up ({})", class_of(last)),
        ClientError::Tls { .. } => "tls".into(),
        ClientError::Request(_) => "request".into(),
    }
}
