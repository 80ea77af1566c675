//! The checker: reads a history and the nodes' allocation journals and decides whether the
//! run kept leaf's promises.
//!
//! - Uniqueness: no ID twice among `ok` results, per tag for segments and globally for
//!   snowflake; each duplicate is reported with both operations.
//! - Order: per (tag or snowflake, node), an operation invoked after another completed got
//!   larger IDs (trend-increasing per node, across restarts).
//! - Snowflake IDs decode to the serving node's worker ID and to a timestamp inside the
//!   operation's window, widened by the clock offsets injected into that node meanwhile, and
//!   up to the node's documented bound on running ahead of its clock at the top.
//! - Every `ok` segment ID lies in an allocation committed to the serving node (for a
//!   monotonic tag, to any node: the leader serves; obfuscated IDs are mapped, so exempt).
//! - Profiles (issue 19): a monotonic tag's IDs keep real-time order across the cluster; a
//!   daily tag's IDs are `yyyyMMdd` + counter of a day the run spans; obfuscated IDs are only
//!   required to be unique (not ordered, so the per-node order check skips them).
//! - Availability per phase: ok ratio, QPS and the longest gap between successes per node.
//!
//! The verdict is `true` (exit 0), `false` (a violation, exit 1) or `unknown` (exit 2: no
//! violation found, but something could not be verified, e.g. the journals have a gap that an
//! unexplained ID falls into, or the recovery bound was not met).
use std::collections::{BTreeMap, HashMap};

use leaf_api::types::{AllocationJournal, AllocationView};
use serde::{Deserialize, Serialize};

use super::history::{Event, FaultAction, Meta, Mode, OpEvent, Phase, TagProfile};
use crate::order::{check_real_time_order, OrderViolation as OrderViolationKind, TimedOp};

/// Slack for comparing a snowflake timestamp with the harness's clock (same machine).
const TIME_TOLERANCE_MS: i64 = 50;
/// How far ahead of its node's clock a snowflake timestamp may be (logical milliseconds: a
/// restarted node issues above its old high-water mark at once): `max(time_window_ms,
/// max_startup_wait_ms + 50)` with the defaults the chaos nodes run with.
const SNOWFLAKE_AHEAD_MS: i64 = 5_050;
/// A clock change is recorded before the request that makes it; it lands within this.
const CLOCK_CHANGE_SLACK_NS: u64 = 2_000_000_000;
/// Largest number of examples listed per kind of violation.
const EXAMPLES: usize = 20;

/// Counts a violation and keeps it as an example while fewer than [`EXAMPLES`] are kept.
fn tally<T>(count: &mut u64, examples: &mut Vec<T>, example: impl FnOnce() -> T) {
    *count += 1;
    if examples.len() < EXAMPLES {
        examples.push(example());
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    True,
    False,
    Unknown,
}

impl Verdict {
    /// The verdict of two checks together: false if either is, else unknown if either is.
    pub fn and(self, other: Verdict) -> Verdict {
        match (self, other) {
            (Verdict::False, _) | (_, Verdict::False) => Verdict::False,
            (Verdict::Unknown, _) | (_, Verdict::Unknown) => Verdict::Unknown,
            _ => Verdict::True,
        }
    }

    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::True => 0,
            Verdict::False => 1,
            Verdict::Unknown => 2,
        }
    }
}

/// One operation, as cited in a violation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpRef {
    pub op: u64,
    pub process: u32,
    pub node: u64,
    pub invoke_ns: u64,
    pub complete_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Duplicate {
    pub key: String,
    pub id: i64,
    pub first: OpRef,
    pub second: OpRef,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderViolation {
    pub key: String,
    pub node: u64,
    /// Completed before `later` was invoked...
    pub earlier: OpRef,
    pub earlier_max_id: i64,
    /// ...yet got an ID not above `earlier`'s.
    pub later: OpRef,
    pub later_min_id: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadId {
    pub key: String,
    pub id: i64,
    pub op: OpRef,
    pub reason: String,
}

/// Counts for one tag, or for snowflake.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyStats {
    /// IDs asked for by every invoked operation.
    pub attempted: u64,
    /// IDs in `ok` results.
    pub acknowledged: u64,
    pub duplicated: u64,
    pub min_id: Option<i64>,
    pub max_id: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PhaseStats {
    pub seconds: f64,
    pub invoked: u64,
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
    pub ok_ratio: f64,
    /// Successful operations per second.
    pub ok_per_sec: f64,
    /// Longest time without a success, per node, between the first and the last request the
    /// node was sent in the phase.
    pub longest_gap_ms: BTreeMap<u64, u64>,
    /// The longest such gap of any node counting only segment requests...
    pub longest_segment_gap_ms: u64,
    /// ...and only snowflake requests (an outage of one mode hides behind the other's
    /// successes in the per-node figure).
    pub longest_snowflake_gap_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Operations {
    pub invoked: u64,
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
    /// Invoked and never completed (the history was cut short).
    pub open: u64,
}

/// How the recovery phase went (`recovery.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// Every node served every kind of ID within the bound after the heal, and the final
    /// request of every kind on every node succeeded.
    pub ok: bool,
    /// From the heal until every node served.
    pub seconds: f64,
    pub bound_seconds: f64,
    pub notes: Vec<String>,
}

/// `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub valid: Verdict,
    pub seed: u64,
    pub nodes: u64,
    pub operations: Operations,
    /// Faults started, by kind.
    pub faults: BTreeMap<String, u64>,
    /// Connections the proxies blackholed or cut during partitions, packets the namespaces'
    /// drop rules dropped (`--netns`), or (Docker) cut-off containers that a node still on the
    /// network could not reach; 0 with partitions means they did not bite (e.g. nodes not
    /// sending from their own source address).
    pub partition_connections_cut: u64,
    /// Failed harness actions (a fault that could not be injected or healed as planned).
    pub fault_errors: Vec<String>,
    pub keys: BTreeMap<String, KeyStats>,
    pub duplicates: Vec<Duplicate>,
    pub duplicate_count: u64,
    pub order_violations: Vec<OrderViolation>,
    pub order_violation_count: u64,
    /// Segment IDs outside every allocation committed to the serving node, when the journals
    /// are complete (violations).
    pub outside_allocations: Vec<BadId>,
    pub outside_allocation_count: u64,
    /// Segment IDs outside the known allocations where the journals have a gap (unknown).
    pub unverifiable_ids: u64,
    /// Snowflake IDs with the wrong worker ID or a timestamp outside the operation's window.
    pub snowflake_violations: Vec<BadId>,
    pub snowflake_violation_count: u64,
    /// Snowflake IDs from nodes whose worker ID was never recorded (not checkable: the
    /// verdict is at best unknown).
    pub snowflake_unattributed: u64,
    /// IDs that break their tag's profile: a monotonic ID not above one returned before its
    /// request was sent (cluster-wide), a daily ID that is not `yyyyMMdd` + counter of a day
    /// the run spans.
    #[serde(default)]
    pub profile_violations: Vec<BadId>,
    #[serde(default)]
    pub profile_violation_count: u64,
    /// Journal entries two nodes disagree on.
    pub journal_conflicts: Vec<String>,
    /// Log index ranges no journal covers (allocations there are unknown to the checker).
    pub journal_gaps: Vec<(u64, u64)>,
    /// Highest log index the journals reach.
    pub journal_through: u64,
    pub availability: BTreeMap<String, PhaseStats>,
    /// Availability while each kind of fault held.
    #[serde(default)]
    pub by_fault: BTreeMap<String, super::by_fault::FaultStats>,
    pub recovery: Option<Recovery>,
    pub problems: Vec<String>,
    /// The gapless workload's check (`--gapless`), whose verdict is part of `valid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gapless: Option<super::gapless::GaplessResults>,
}

/// How an operation completed (the history's `ok`, `fail` and `info` lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Completion {
    Ok,
    /// A definite error answer.
    Fail,
    /// Outcome unknown.
    Info,
}

struct Op {
    inv: OpEvent,
    done: Option<(Completion, OpEvent)>,
}

impl Op {
    fn reference(&self) -> OpRef {
        OpRef {
            op: self.inv.op,
            process: self.inv.process,
            node: self.inv.node,
            invoke_ns: self.inv.time_ns,
            complete_ns: self.done.as_ref().map_or(u64::MAX, |(_, e)| e.time_ns),
        }
    }

    fn key(&self) -> String {
        match self.inv.mode {
            Mode::Segment => format!("segment:{}", self.inv.tag.as_deref().unwrap_or("")),
            Mode::Snowflake => "snowflake".to_string(),
        }
    }

    fn ok_ids(&self) -> Option<&[i64]> {
        match &self.done {
            Some((Completion::Ok, e)) => Some(&e.ids),
            _ => None,
        }
    }
}

/// Checks a run. `recovery` is how the harness's recovery phase went, if it ran one.
pub fn check(events: &[Event], journals: &[AllocationJournal], recovery: Option<Recovery>) -> Results {
    let mut meta: Option<Meta> = None;
    let mut ops: Vec<Op> = Vec::new();
    let mut by_op: HashMap<u64, usize> = HashMap::new();
    let mut phases: Vec<(u64, Phase)> = Vec::new();
    let mut faults: BTreeMap<String, u64> = BTreeMap::new();
    let mut fault_errors = Vec::new();
    let mut clocks: BTreeMap<u64, Vec<(u64, i64)>> = BTreeMap::new();
    let mut workers: BTreeMap<u64, Vec<u16>> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut partition_cut = 0u64;
    for e in events {
        match e {
            Event::Meta(m) => meta = Some(m.clone()),
            Event::Phase { time_ns, phase } => phases.push((*time_ns, *phase)),
            Event::Invoke(o) => {
                by_op.insert(o.op, ops.len());
                ops.push(Op { inv: o.clone(), done: None });
            }
            Event::Ok(o) | Event::Fail(o) | Event::Info(o) => {
                let t = match e {
                    Event::Ok(_) => Completion::Ok,
                    Event::Fail(_) => Completion::Fail,
                    _ => Completion::Info,
                };
                match by_op.get(&o.op) {
                    Some(&i) if ops[i].done.is_none() => ops[i].done = Some((t, o.clone())),
                    _ => problems.push(format!("completion of op {} without a pending invocation", o.op)),
                }
            }
            Event::Fault { kind, action, detail, time_ns, cut, .. } => {
                partition_cut += cut.unwrap_or(0);
                if *action == FaultAction::Start {
                    *faults.entry(kind.to_string()).or_default() += 1;
                } else if *action == FaultAction::Error {
                    fault_errors.push(format!("{kind} at {:.1}s: {detail}", *time_ns as f64 / 1e9));
                }
            }
            Event::Clock { time_ns, node, offset_ms } => clocks.entry(*node).or_default().push((*time_ns, *offset_ms)),
            Event::Worker { node, worker_id, .. } => {
                let w = workers.entry(*node).or_default();
                if !w.contains(worker_id) {
                    w.push(*worker_id);
                }
            }
        }
    }
    for changes in clocks.values_mut() {
        changes.sort_by_key(|(t, _)| *t);
    }
    let meta = meta.unwrap_or_else(|| {
        problems.push("history has no meta line".into());
        Meta {
            seed: 0,
            nodes: 0,
            wall_start_ms: 0,
            epoch_ms: 0,
            faults: vec![],
            warmup_ms: 0,
            faults_ms: 0,
            after_ms: 0,
            profiles: BTreeMap::new(),
        }
    });

    let mut operations = Operations::default();
    for op in &ops {
        operations.invoked += 1;
        match op.done.as_ref().map(|(t, _)| *t) {
            Some(Completion::Ok) => operations.ok += 1,
            Some(Completion::Fail) => operations.fail += 1,
            Some(Completion::Info) => operations.info += 1,
            None => operations.open += 1,
        }
    }

    let mut results = Results {
        valid: Verdict::True,
        seed: meta.seed,
        nodes: meta.nodes,
        operations,
        faults,
        partition_connections_cut: partition_cut,
        fault_errors,
        keys: BTreeMap::new(),
        duplicates: Vec::new(),
        duplicate_count: 0,
        order_violations: Vec::new(),
        order_violation_count: 0,
        outside_allocations: Vec::new(),
        outside_allocation_count: 0,
        unverifiable_ids: 0,
        snowflake_violations: Vec::new(),
        snowflake_violation_count: 0,
        snowflake_unattributed: 0,
        profile_violations: Vec::new(),
        profile_violation_count: 0,
        journal_conflicts: Vec::new(),
        journal_gaps: Vec::new(),
        journal_through: 0,
        availability: BTreeMap::new(),
        by_fault: super::by_fault::by_fault(events),
        recovery,
        problems,
        gapless: None,
    };
    uniqueness(&ops, &mut results);
    order(&ops, &meta.profiles, &mut results);
    monotonic(&ops, &meta.profiles, &mut results);
    daily(&ops, &meta, &mut results);
    bounded(&ops, &meta.profiles, &mut results);
    allocations(&ops, journals, &meta.profiles, &mut results);
    snowflake(&ops, &meta, &clocks, &workers, &mut results);
    results.availability = availability(&ops, &phases);

    let violated = results.duplicate_count > 0
        || results.order_violation_count > 0
        || results.outside_allocation_count > 0
        || results.snowflake_violation_count > 0
        || results.profile_violation_count > 0
        || !results.journal_conflicts.is_empty();
    let unsure = results.unverifiable_ids > 0
        || results.snowflake_unattributed > 0
        || results.recovery.as_ref().is_some_and(|r| !r.ok)
        || !results.problems.is_empty()
        || results.operations.ok == 0;
    results.valid = if violated {
        Verdict::False
    } else if unsure {
        Verdict::Unknown
    } else {
        Verdict::True
    };
    results
}

fn uniqueness(ops: &[Op], r: &mut Results) {
    let mut seen: HashMap<(String, i64), usize> = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        let key = op.key();
        let stats = r.keys.entry(key.clone()).or_default();
        stats.attempted += u64::from(op.inv.count);
        let Some(ids) = op.ok_ids() else { continue };
        stats.acknowledged += ids.len() as u64;
        for &id in ids {
            stats.min_id = Some(stats.min_id.map_or(id, |m| m.min(id)));
            stats.max_id = Some(stats.max_id.map_or(id, |m| m.max(id)));
            if let Some(&first) = seen.get(&(key.clone(), id)) {
                stats.duplicated += 1;
                tally(&mut r.duplicate_count, &mut r.duplicates, || Duplicate {
                    key: key.clone(),
                    id,
                    first: ops[first].reference(),
                    second: op.reference(),
                });
            } else {
                seen.insert((key.clone(), id), i);
            }
        }
    }
}

fn order(ops: &[Op], profiles: &BTreeMap<String, TagProfile>, r: &mut Results) {
    // Per (key, node): the ok operations, by completion time. Obfuscated IDs are not ordered.
    let mut groups: BTreeMap<(String, u64), Vec<&Op>> = BTreeMap::new();
    for op in ops {
        let obfuscated = op.inv.tag.as_ref().is_some_and(|t| profiles.get(t) == Some(&TagProfile::Obfuscated));
        if !obfuscated && op.ok_ids().is_some_and(|ids| !ids.is_empty()) {
            groups.entry((op.key(), op.inv.node)).or_default().push(op);
        }
    }
    for ((key, node), mut group) in groups {
        group.sort_by_key(|o| o.reference().complete_ns);
        // prefix[i]: the op with the largest ID among the first i+1 completions.
        let mut prefix: Vec<(u64, i64, usize)> = Vec::with_capacity(group.len());
        for (i, o) in group.iter().enumerate() {
            let max = o.ok_ids().and_then(|ids| ids.iter().max().copied()).unwrap_or(i64::MIN);
            let best = match prefix.last() {
                Some(&(_, m, j)) if m >= max => (o.reference().complete_ns, m, j),
                _ => (o.reference().complete_ns, max, i),
            };
            prefix.push(best);
        }
        for later in &group {
            let min = later.ok_ids().and_then(|ids| ids.iter().min().copied()).unwrap_or(i64::MAX);
            // Operations that completed before `later` was invoked.
            let n = prefix.partition_point(|(done, _, _)| *done < later.inv.time_ns);
            if n == 0 {
                continue;
            }
            let (_, max, j) = prefix[n - 1];
            if max >= min {
                tally(&mut r.order_violation_count, &mut r.order_violations, || OrderViolation {
                    key: key.clone(),
                    node,
                    earlier: group[j].reference(),
                    earlier_max_id: max,
                    later: later.reference(),
                    later_min_id: min,
                });
            }
        }
    }
}

/// Monotonic tags: real-time order across the whole cluster (`crate::order`).
fn monotonic(ops: &[Op], profiles: &BTreeMap<String, TagProfile>, r: &mut Results) {
    for (tag, _) in profiles.iter().filter(|(_, p)| **p == TagProfile::Monotonic) {
        let of_tag: Vec<&Op> = ops.iter().filter(|o| o.inv.tag.as_ref() == Some(tag) && o.ok_ids().is_some()).collect();
        let timed: Vec<TimedOp> = of_tag
            .iter()
            .map(|o| TimedOp {
                invoked: o.inv.time_ns,
                completed: o.reference().complete_ns,
                ids: o.ok_ids().unwrap_or_default().to_vec(),
            })
            .collect();
        if let Err(v) = check_real_time_order(&timed) {
            // Duplicates are the uniqueness check's; report the order cases here.
            let (id, reason, at) = match &v {
                OrderViolationKind::Duplicate(id) => (*id, "returned twice".to_string(), None),
                OrderViolationKind::NotIncreasing(o) => (o.ids[0], "a batch not increasing".into(), Some(o.invoked)),
                OrderViolationKind::RealTime { earlier, later } => (
                    later.ids[0],
                    format!(
                        "not above {} returned by a request that completed at {} ns, before this one was sent",
                        earlier.ids[earlier.ids.len() - 1],
                        earlier.completed
                    ),
                    Some(later.invoked),
                ),
            };
            let op = at.and_then(|t| of_tag.iter().find(|o| o.inv.time_ns == t)).or(of_tag.first());
            if let Some(op) = op {
                tally(&mut r.profile_violation_count, &mut r.profile_violations, || BadId {
                    key: op.key(),
                    id,
                    op: op.reference(),
                    reason: format!("monotonic: {reason}"),
                });
            }
        }
    }
}

/// Daily tags: every ID is `yyyyMMdd` + counter, of a day between the run's start and a day
/// after it (the leader's clock may run a little ahead of the harness's).
fn daily(ops: &[Op], meta: &Meta, r: &mut Results) {
    for (tag, p) in &meta.profiles {
        let TagProfile::Daily(format) = p else { continue };
        let first = format.day_at(meta.wall_start_ms - 60_000);
        let last = first
            .and_then(|d| format.next_midnight_ms(d))
            .and_then(|m| format.next_midnight_ms(format.day_at(m)?))
            .and_then(|m| format.day_at(m));
        for op in ops.iter().filter(|o| o.inv.tag.as_ref() == Some(tag)) {
            for &id in op.ok_ids().unwrap_or_default() {
                let ok = match (format.split(id), first, last) {
                    (Some((day, _)), Some(a), Some(b)) => (a..=b).contains(&day),
                    _ => false,
                };
                if !ok {
                    tally(&mut r.profile_violation_count, &mut r.profile_violations, || BadId {
                        key: op.key(),
                        id,
                        op: op.reference(),
                        reason: format!("daily: not yyyyMMdd + {} digits of a day the run spans", format.digits),
                    });
                }
            }
        }
    }
}

/// Bounded tags: no ID above the bound (nor below the first ID, 1).
fn bounded(ops: &[Op], profiles: &BTreeMap<String, TagProfile>, r: &mut Results) {
    for (tag, p) in profiles {
        let TagProfile::Bounded(max) = *p else { continue };
        for op in ops.iter().filter(|o| o.inv.tag.as_ref() == Some(tag)) {
            for &id in op.ok_ids().unwrap_or_default() {
                if !(1..=max).contains(&id) {
                    tally(&mut r.profile_violation_count, &mut r.profile_violations, || BadId {
                        key: op.key(),
                        id,
                        op: op.reference(),
                        reason: format!("bounded: outside 1..={max}"),
                    });
                }
            }
        }
    }
}

fn allocations(ops: &[Op], journals: &[AllocationJournal], profiles: &BTreeMap<String, TagProfile>, r: &mut Results) {
    // One allocation per (log index, place in a group of allocations).
    let mut merged: BTreeMap<(u64, u32), AllocationView> = BTreeMap::new();
    for j in journals {
        for a in &j.allocations {
            if let Some(prev) = merged.get(&(a.log_index, a.position)) {
                if prev != a && r.journal_conflicts.len() < EXAMPLES {
                    r.journal_conflicts.push(format!(
                        "log index {} position {}: {prev:?} vs {a:?} (node {})",
                        a.log_index, a.position, j.node_id
                    ));
                }
            } else {
                merged.insert((a.log_index, a.position), a.clone());
            }
        }
    }
    (r.journal_gaps, r.journal_through) = coverage(journals);
    let complete = r.journal_gaps.is_empty() && !journals.is_empty();
    // Per (tag, node): allocations sorted by start. A monotonic tag's windows are committed
    // to the leader that served them, whichever node forwarded the request: node 0 stands for
    // "any node" there.
    let mut by_owner: HashMap<(&str, u64), Vec<(i64, i64)>> = HashMap::new();
    for a in merged.values() {
        let owner = if profiles.get(&a.tag) == Some(&TagProfile::Monotonic) { 0 } else { a.node_id };
        by_owner.entry((a.tag.as_str(), owner)).or_default().push((a.start, a.end));
    }
    for v in by_owner.values_mut() {
        v.sort_unstable();
    }
    for op in ops {
        let (Mode::Segment, Some(tag), Some(ids)) = (op.inv.mode, op.inv.tag.as_deref(), op.ok_ids()) else {
            continue;
        };
        // Obfuscated IDs are the bijection's images of the counter, not inside its ranges.
        let owner = match profiles.get(tag) {
            Some(TagProfile::Obfuscated) => continue,
            Some(TagProfile::Monotonic) => 0,
            _ => op.inv.node,
        };
        let owned = by_owner.get(&(tag, owner)).map(Vec::as_slice).unwrap_or(&[]);
        for &id in ids {
            let i = owned.partition_point(|(start, _)| *start <= id);
            if i > 0 && id < owned[i - 1].1 {
                continue;
            }
            if complete {
                tally(&mut r.outside_allocation_count, &mut r.outside_allocations, || BadId {
                    key: op.key(),
                    id,
                    op: op.reference(),
                    reason: format!("in no allocation committed to node {}", op.inv.node),
                });
            } else {
                r.unverifiable_ids += 1;
            }
        }
    }
}

/// The log index ranges in `1..=through` that no journal covers, and `through`, the highest
/// index any journal reaches. Journal `j` covers `[j.complete_from_index, j.complete_through_index]`.
fn coverage(journals: &[AllocationJournal]) -> (Vec<(u64, u64)>, u64) {
    let mut spans: Vec<(u64, u64)> = journals
        .iter()
        .map(|j| (j.complete_from_index.max(1), j.complete_through_index))
        .filter(|(from, through)| from <= through)
        .collect();
    spans.sort_unstable();
    let through = journals.iter().map(|j| j.complete_through_index).max().unwrap_or(0);
    let mut gaps = Vec::new();
    let mut reached = 0u64;
    for (from, to) in spans {
        if from > reached + 1 {
            gaps.push((reached + 1, from - 1));
        }
        reached = reached.max(to);
    }
    if reached < through {
        gaps.push((reached + 1, through));
    }
    (gaps, through)
}

/// Offsets node `node`'s clock may have had at some time in `[from_ns, to_ns]`.
fn offsets(clocks: &BTreeMap<u64, Vec<(u64, i64)>>, node: u64, from_ns: u64, to_ns: u64) -> (i64, i64) {
    let Some(changes) = clocks.get(&node) else { return (0, 0) };
    let settled = from_ns.saturating_sub(CLOCK_CHANGE_SLACK_NS);
    // The offset in force before the window (changes are recorded before they are sent, so
    // one recorded within the slack may not have landed yet)...
    let before = changes.iter().take_while(|(t, _)| *t <= settled).last().map_or(0, |(_, off)| *off);
    // ...and every offset set during it.
    let mut lo = before;
    let mut hi = before;
    for &(_, off) in changes.iter().filter(|(t, _)| *t > settled && *t <= to_ns) {
        lo = lo.min(off);
        hi = hi.max(off);
    }
    (lo, hi)
}

fn snowflake(
    ops: &[Op],
    meta: &Meta,
    clocks: &BTreeMap<u64, Vec<(u64, i64)>>,
    workers: &BTreeMap<u64, Vec<u16>>,
    r: &mut Results,
) {
    let bad = |r: &mut Results, op: &Op, id: i64, reason: String| {
        tally(&mut r.snowflake_violation_count, &mut r.snowflake_violations, || BadId {
            key: op.key(),
            id,
            op: op.reference(),
            reason,
        });
    };
    for op in ops {
        let (Mode::Snowflake, Some(ids), Some((_, done))) = (op.inv.mode, op.ok_ids(), op.done.as_ref()) else {
            continue;
        };
        let (lo, hi) = offsets(clocks, op.inv.node, op.inv.time_ns, done.time_ns);
        let wall = |ns: u64| meta.wall_start_ms + (ns / 1_000_000) as i64;
        let earliest = wall(op.inv.time_ns) + lo - TIME_TOLERANCE_MS;
        let latest = wall(done.time_ns) + hi + TIME_TOLERANCE_MS + SNOWFLAKE_AHEAD_MS;
        let owned = workers.get(&op.inv.node);
        for &id in ids {
            if id < 0 {
                bad(r, op, id, "negative ID".into());
                continue;
            }
            let ts = (id >> 22) + meta.epoch_ms;
            let worker = ((id >> 12) & 0x3ff) as u16;
            match owned {
                None => r.snowflake_unattributed += 1,
                Some(w) if !w.contains(&worker) => {
                    bad(r, op, id, format!("worker ID {worker}, but node {} holds {w:?}", op.inv.node))
                }
                Some(_) => {}
            }
            if ts < earliest || ts > latest {
                bad(
                    r,
                    op,
                    id,
                    format!(
                        "timestamp {ts} outside the operation's window [{earliest}, {latest}] \
                         (clock offsets {lo}..{hi} ms)"
                    ),
                );
            }
        }
    }
}

/// Completion times of successes, and the first invocation and last completion, in ns.
type Span = (Vec<u64>, u64, u64);

fn availability(ops: &[Op], phases: &[(u64, Phase)]) -> BTreeMap<String, PhaseStats> {
    let mut out = BTreeMap::new();
    for (i, &(start, phase)) in phases.iter().enumerate() {
        if phase == Phase::Done {
            continue;
        }
        let end = phases.get(i + 1).map_or(u64::MAX, |(t, _)| *t);
        let mut s = PhaseStats::default();
        // Per node, and per node and mode: successes, and the span in which it was sent
        // requests.
        let mut oks: BTreeMap<(u64, Option<Mode>), Span> = BTreeMap::new();
        let mut last_ns = start;
        for op in ops.iter().filter(|o| o.inv.time_ns >= start && o.inv.time_ns < end) {
            s.invoked += 1;
            let done_ns = op.done.as_ref().map_or(op.inv.time_ns, |(_, e)| e.time_ns);
            last_ns = last_ns.max(done_ns);
            let ok = match op.done.as_ref().map(|(t, _)| *t) {
                Some(Completion::Ok) => {
                    s.ok += 1;
                    true
                }
                Some(Completion::Fail) => {
                    s.fail += 1;
                    false
                }
                Some(Completion::Info) | None => {
                    s.info += 1;
                    false
                }
            };
            for key in [(op.inv.node, None), (op.inv.node, Some(op.inv.mode))] {
                let span = oks.entry(key).or_insert((Vec::new(), op.inv.time_ns, done_ns));
                span.1 = span.1.min(op.inv.time_ns);
                span.2 = span.2.max(done_ns);
                if ok {
                    span.0.push(done_ns);
                }
            }
        }
        let end = if end == u64::MAX { last_ns } else { end };
        s.seconds = end.saturating_sub(start) as f64 / 1e9;
        s.ok_ratio = if s.invoked > 0 { s.ok as f64 / s.invoked as f64 } else { 0.0 };
        s.ok_per_sec = if s.seconds > 0.0 { s.ok as f64 / s.seconds } else { 0.0 };
        // A node added or removed during the phase is measured from its first request to
        // its last, not across the whole phase.
        for ((node, mode), (mut times, first, last)) in oks {
            times.sort_unstable();
            let mut prev = first;
            let mut gap = 0;
            for t in times.iter().copied().chain(std::iter::once(last)) {
                gap = gap.max(t.saturating_sub(prev));
                prev = prev.max(t);
            }
            let gap_ms = gap / 1_000_000;
            match mode {
                None => {
                    s.longest_gap_ms.insert(node, gap_ms);
                }
                Some(Mode::Segment) => s.longest_segment_gap_ms = s.longest_segment_gap_ms.max(gap_ms),
                Some(Mode::Snowflake) => s.longest_snowflake_gap_ms = s.longest_snowflake_gap_ms.max(gap_ms),
            }
        }
        out.insert(phase.name().to_string(), s);
    }
    out
}

/// The summary table printed at the end of a run (and by `leaf-chaos check`).
pub fn summary(r: &Results) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let o = &r.operations;
    let _ = writeln!(s, "seed {}  nodes {}  verdict {:?}", r.seed, r.nodes, r.valid);
    let _ = writeln!(
        s,
        "operations: {} invoked, {} ok, {} fail, {} info, {} open",
        o.invoked, o.ok, o.fail, o.info, o.open
    );
    let faults: Vec<String> = r.faults.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let _ = writeln!(s, "faults: {}", if faults.is_empty() { "none".into() } else { faults.join(", ") });
    if r.faults.contains_key("partition") || r.faults.contains_key("link") {
        let _ = writeln!(
            s,
            "partitions bit {} times (connections the proxies blackholed or cut; packets the namespaces' rules \
             dropped; cut-off containers a connected peer could not reach)",
            r.partition_connections_cut
        );
    }
    if !r.fault_errors.is_empty() {
        let _ = writeln!(s, "fault actions that failed: {}", r.fault_errors.len());
    }
    let _ =
        writeln!(s, "\n| key | attempted | acknowledged | duplicated | min | max |\n|---|---:|---:|---:|---:|---:|");
    // The many-tags workload's tags are one row: a run may touch tens of thousands of them.
    let many_prefix = format!("segment:{}", super::tags::PREFIX);
    let mut many = (0u64, KeyStats::default());
    for (k, v) in &r.keys {
        if k.starts_with(&many_prefix) {
            many.0 += 1;
            many.1.attempted += v.attempted;
            many.1.acknowledged += v.acknowledged;
            many.1.duplicated += v.duplicated;
            continue;
        }
        let _ = writeln!(
            s,
            "| {k} | {} | {} | {} | {} | {} |",
            v.attempted,
            v.acknowledged,
            v.duplicated,
            v.min_id.map_or("-".into(), |x| x.to_string()),
            v.max_id.map_or("-".into(), |x| x.to_string())
        );
    }
    if many.0 > 0 {
        let (n, v) = many;
        let _ = writeln!(
            s,
            "| {many_prefix}* ({n} tags) | {} | {} | {} | - | - |",
            v.attempted, v.acknowledged, v.duplicated
        );
    }
    let _ = writeln!(
        s,
        "\nduplicates {}  order violations {}  outside allocations {}  snowflake violations {}  \
         profile violations {}  unverifiable {}  journal conflicts {}  journal gaps {:?} (through log index {})",
        r.duplicate_count,
        r.order_violation_count,
        r.outside_allocation_count,
        r.snowflake_violation_count,
        r.profile_violation_count,
        r.unverifiable_ids,
        r.journal_conflicts.len(),
        r.journal_gaps,
        r.journal_through
    );
    let _ = writeln!(
        s,
        "\n| phase | seconds | invoked | ok | fail | info | ok ratio | ok/s | longest gap per node (ms) \
         | worst segment / snowflake gap (ms) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    let mut phases: Vec<(&String, &PhaseStats)> = r.availability.iter().collect();
    let rank = |n: &str| ["warmup", "faults", "recovery", "after"].iter().position(|p| *p == n).unwrap_or(9);
    phases.sort_by_key(|(n, _)| rank(n));
    for (name, p) in phases {
        let gaps: Vec<String> = p.longest_gap_ms.iter().map(|(n, g)| format!("n{n}:{g}")).collect();
        let _ = writeln!(
            s,
            "| {name} | {:.1} | {} | {} | {} | {} | {:.3} | {:.0} | {} | {} / {} |",
            p.seconds,
            p.invoked,
            p.ok,
            p.fail,
            p.info,
            p.ok_ratio,
            p.ok_per_sec,
            gaps.join(" "),
            p.longest_segment_gap_ms,
            p.longest_snowflake_gap_ms
        );
    }
    s.push_str(&super::by_fault::table(&r.by_fault));
    if let Some(rec) = &r.recovery {
        let _ = writeln!(
            s,
            "\nrecovery: {} ({:.1} s after the heal, bound {:.0} s)",
            if rec.ok { "every node served every kind of ID" } else { "FAILED" },
            rec.seconds,
            rec.bound_seconds
        );
        for n in &rec.notes {
            let _ = writeln!(s, "  {n}");
        }
    }
    for p in &r.problems {
        let _ = writeln!(s, "problem: {p}");
    }
    if let Some(g) = &r.gapless {
        s.push_str(&super::gapless::summary(g));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn meta() -> Event {
        Event::Meta(Meta {
            seed: 1,
            nodes: 2,
            wall_start_ms: 1_800_000_000_000,
            epoch_ms: 1_288_834_974_657,
            faults: vec![],
            warmup_ms: 0,
            faults_ms: 0,
            after_ms: 0,
            profiles: BTreeMap::new(),
        })
    }

    /// [`meta`] with tag `t` of profile `p`.
    fn meta_with(p: TagProfile) -> Event {
        let Event::Meta(m) = meta() else { unreachable!("meta() is a meta line") };
        Event::Meta(Meta { profiles: [("t".to_string(), p)].into(), ..m })
    }

    fn profiled(p: TagProfile, ops: &[(u64, u64, u64, Vec<i64>)]) -> Vec<Event> {
        let mut h = vec![meta_with(p), Event::Phase { time_ns: 0, phase: Phase::Warmup }];
        for (n, node, at, ids) in ops {
            h.extend(op(*n, *node, Mode::Segment, *at, ids.clone()));
        }
        h
    }

    #[test]
    fn monotonic_order_is_checked_across_nodes() {
        // Node 1 returns 5 at 10..11 ms; node 2 returns 3 at 20..21 ms: per node fine, but a
        // monotonic tag must not go back across the cluster.
        let ops = [(1, 1, 10, vec![5]), (2, 2, 20, vec![3])];
        let r = check(&profiled(TagProfile::Monotonic, &ops), &allocs(), ok());
        assert_eq!((r.valid, r.profile_violation_count), (Verdict::False, 1), "{}", summary(&r));
        assert!(r.profile_violations[0].reason.contains("monotonic"));
        // The same history of a plain segment tag is fine... except that the IDs must be in the
        // serving node's allocations: a monotonic tag's windows count for every node.
        let r = check(&profiled(TagProfile::Monotonic, &[(1, 2, 10, vec![5]), (2, 2, 20, vec![6])]), &allocs(), ok());
        assert_eq!(r.valid, Verdict::True, "{}", summary(&r));
        let mut plain = profiled(TagProfile::Monotonic, &[(1, 2, 10, vec![5]), (2, 2, 20, vec![6])]);
        plain[0] = meta();
        assert_eq!(check(&plain, &allocs(), ok()).outside_allocation_count, 2);
    }

    #[test]
    fn obfuscated_ids_need_only_be_unique() {
        let ops = [(1, 1, 10, vec![900, 7]), (2, 1, 20, vec![3])];
        let r = check(&profiled(TagProfile::Obfuscated, &ops), &allocs(), ok());
        assert_eq!(r.valid, Verdict::True, "{}", summary(&r));
        let dup = [(1, 1, 10, vec![900, 7]), (2, 1, 20, vec![7])];
        assert_eq!(check(&profiled(TagProfile::Obfuscated, &dup), &allocs(), ok()).duplicate_count, 1);
    }

    #[test]
    fn daily_ids_must_be_dated_within_the_run() {
        let f = leaf_api::profile::DailyFormat { digits: 2, utc_offset_minutes: 480 };
        let today = f.day_at(1_800_000_000_000).unwrap();
        let good = f.compose(today, 5).unwrap();
        let allocs = vec![journal(&[(1, good, good + 10)])];
        let r = check(&profiled(TagProfile::Daily(f), &[(1, 1, 10, vec![good])]), &allocs, ok());
        assert_eq!(r.valid, Verdict::True, "{}", summary(&r));
        let old = f.compose(20200101, 5).unwrap();
        let allocs = vec![journal(&[(1, old, old + 10)])];
        let r = check(&profiled(TagProfile::Daily(f), &[(1, 1, 10, vec![old])]), &allocs, ok());
        assert_eq!((r.valid, r.profile_violation_count), (Verdict::False, 1), "{}", summary(&r));
        // Not a date at all (month 13).
        let bad = 2_027_130_105; // 2027-13-01, counter 05
        let allocs = vec![journal(&[(1, bad, bad + 10)])];
        assert_eq!(
            check(&profiled(TagProfile::Daily(f), &[(1, 1, 10, vec![bad])]), &allocs, ok()).profile_violation_count,
            1
        );
    }

    #[test]
    fn bounded_ids_stay_at_or_below_the_bound() {
        let r = check(&profiled(TagProfile::Bounded(9), &[(1, 1, 10, vec![8, 9])]), &allocs(), ok());
        assert_eq!(r.valid, Verdict::True, "{}", summary(&r));
        let r = check(&profiled(TagProfile::Bounded(10), &[(1, 2, 10, vec![10, 11])]), &allocs(), ok());
        assert_eq!((r.valid, r.profile_violation_count), (Verdict::False, 1), "{}", summary(&r));
        assert!(r.profile_violations[0].reason.contains("bounded"));
    }

    fn op(n: u64, node: u64, mode: Mode, at_ms: u64, ids: Vec<i64>) -> [Event; 2] {
        let inv = OpEvent {
            op: n,
            process: n as u32,
            time_ns: at_ms * 1_000_000,
            mode,
            tag: (mode == Mode::Segment).then(|| "t".to_string()),
            node,
            count: ids.len() as u32,
            status: None,
            ids: vec![],
            error: None,
        };
        let ok = OpEvent { time_ns: (at_ms + 1) * 1_000_000, status: Some(200), ids, ..inv.clone() };
        [Event::Invoke(inv), Event::Ok(ok)]
    }

    fn journal(allocs: &[(u64, i64, i64)]) -> AllocationJournal {
        AllocationJournal {
            node_id: 1,
            complete_from_index: 0,
            complete_through_index: allocs.len() as u64,
            allocations: allocs
                .iter()
                .enumerate()
                .map(|(i, &(node_id, start, end))| AllocationView {
                    tag: "t".into(),
                    node_id,
                    start,
                    end,
                    log_index: i as u64 + 1,
                    position: 0,
                    at_ms: 0,
                })
                .collect(),
        }
    }

    fn ok() -> Option<Recovery> {
        Some(Recovery { ok: true, seconds: 1.0, bound_seconds: 60.0, notes: vec![] })
    }

    fn failed() -> Option<Recovery> {
        Some(Recovery { ok: false, seconds: 60.0, bound_seconds: 60.0, notes: vec!["node 2 did not serve".into()] })
    }

    fn snowflake_id(wall_ms: i64, worker: i64, seq: i64) -> i64 {
        ((wall_ms - 1_288_834_974_657) << 22) | (worker << 12) | seq
    }

    fn clean() -> Vec<Event> {
        let mut h = vec![meta(), Event::Phase { time_ns: 0, phase: Phase::Warmup }];
        h.push(Event::Worker { time_ns: 0, node: 1, worker_id: 0 });
        h.push(Event::Worker { time_ns: 0, node: 2, worker_id: 1 });
        h.extend(op(1, 1, Mode::Segment, 10, vec![1, 2]));
        h.extend(op(2, 2, Mode::Segment, 10, vec![11]));
        h.extend(op(3, 1, Mode::Segment, 20, vec![3]));
        h.extend(op(4, 1, Mode::Snowflake, 30, vec![snowflake_id(1_800_000_000_030, 0, 5)]));
        h.extend(op(5, 2, Mode::Snowflake, 40, vec![snowflake_id(1_800_000_000_040, 1, 0)]));
        h
    }

    fn allocs() -> Vec<AllocationJournal> {
        vec![journal(&[(1, 1, 10), (2, 10, 20)])]
    }

    #[test]
    fn a_clean_history_is_valid() {
        let r = check(&clean(), &allocs(), ok());
        assert_eq!(r.valid, Verdict::True, "{}", summary(&r));
        assert_eq!(r.operations.ok, 5);
        assert_eq!(r.keys["segment:t"].acknowledged, 4);
        assert_eq!(r.availability["warmup"].ok, 5);
        // Node 1: segment successes at 11 and 21 ms, snowflake at 31 ms; its span is 10..31.
        let w = &r.availability["warmup"];
        assert_eq!((w.longest_gap_ms[&1], w.longest_segment_gap_ms, w.longest_snowflake_gap_ms), (10, 10, 1));
    }

    #[test]
    fn a_planted_duplicate_is_reported_with_both_operations() {
        let mut h = clean();
        h.extend(op(6, 2, Mode::Segment, 50, vec![12, 2]));
        let r = check(&h, &[journal(&[(1, 1, 10), (2, 10, 20), (2, 2, 3)])], ok());
        assert_eq!(r.valid, Verdict::False);
        assert_eq!(r.duplicate_count, 1);
        assert_eq!((r.duplicates[0].id, r.duplicates[0].first.op, r.duplicates[0].second.op), (2, 1, 6));
    }

    #[test]
    fn the_many_tags_are_one_row_of_the_summary_and_their_duplicates_count() {
        let mut h = clean();
        for (n, tag) in [(6, "chaos-z-0000000"), (7, "chaos-z-0000001"), (8, "chaos-z-0000001")] {
            let mut events = op(n, 1, Mode::Segment, 50 + n, vec![100]);
            for e in &mut events {
                if let Event::Invoke(o) | Event::Ok(o) = e {
                    o.tag = Some(tag.to_string());
                }
            }
            h.extend(events);
        }
        let r = check(&h, &allocs(), ok());
        assert_eq!(r.duplicate_count, 1, "{}", summary(&r));
        assert_eq!(r.duplicates[0].key, "segment:chaos-z-0000001");
        let s = summary(&r);
        assert!(s.contains("| segment:chaos-z-* (2 tags) | 3 | 3 | 1 | - | - |"), "{s}");
        assert!(!s.contains("| segment:chaos-z-0000000 |"), "{s}");
        assert!(s.contains("| segment:t |"), "{s}");
    }

    #[test]
    fn a_planted_order_violation_is_reported() {
        let mut h = clean();
        // Node 1 handed out 3 at 20 ms; at 60 ms it hands out 4 then, invoked later, 2.5 → use
        // an ID below 3 that is unique: none left in [1,10) below 3, so take a fresh range.
        h.extend(op(6, 1, Mode::Segment, 60, vec![5]));
        h.extend(op(7, 1, Mode::Segment, 70, vec![4]));
        let r = check(&h, &allocs(), ok());
        assert_eq!(r.valid, Verdict::False, "{}", summary(&r));
        assert_eq!(r.order_violation_count, 1);
        let v = &r.order_violations[0];
        assert_eq!((v.earlier.op, v.later.op, v.earlier_max_id, v.later_min_id), (6, 7, 5, 4));
        // Overlapping operations promise nothing: the same pair, concurrent, is fine.
        let mut h = clean();
        let [i6, mut o6] = op(6, 1, Mode::Segment, 60, vec![5]);
        let [i7, o7] = op(7, 1, Mode::Segment, 60, vec![4]);
        if let Event::Ok(e) = &mut o6 {
            e.time_ns += 5_000_000;
        }
        h.extend([i6, i7, o7, o6]);
        assert_eq!(check(&h, &allocs(), ok()).valid, Verdict::True);
    }

    #[test]
    fn an_id_outside_its_allocation_is_reported() {
        let mut h = clean();
        // 15 is committed, but to node 2, not node 1.
        h.extend(op(6, 1, Mode::Segment, 60, vec![15]));
        let r = check(&h, &allocs(), ok());
        assert_eq!(r.valid, Verdict::False);
        assert_eq!(r.outside_allocation_count, 1);
        assert_eq!(r.outside_allocations[0].id, 15);
        // With a gap in every journal it is unknown, not a violation.
        let mut gappy = allocs();
        gappy[0].complete_from_index = 5;
        let r = check(&h, &gappy, ok());
        assert_eq!((r.valid, r.unverifiable_ids), (Verdict::Unknown, 1));
    }

    /// The leader groups allocations that arrive together into one entry: the allocations
    /// of one log index, each in its place, are all in force, on every node that saw them.
    #[test]
    fn a_group_of_allocations_at_one_log_index_counts_each() {
        let mut grouped = allocs();
        for (position, a) in (0u32..).zip(grouped[0].allocations.iter_mut()) {
            (a.log_index, a.position) = (1, position);
        }
        grouped[0].complete_through_index = 1;
        let mut seen_by_node_2 = grouped[0].clone();
        seen_by_node_2.node_id = 2;
        grouped.push(seen_by_node_2);
        let r = check(&clean(), &grouped, ok());
        assert!(r.journal_conflicts.is_empty(), "{:?}", r.journal_conflicts);
        assert_eq!((r.valid, r.outside_allocation_count), (Verdict::True, 0));
    }

    #[test]
    fn journals_together_must_cover_the_log() {
        let j = |from, through| AllocationJournal {
            node_id: 1,
            complete_from_index: from,
            complete_through_index: through,
            allocations: vec![],
        };
        assert_eq!(coverage(&[j(0, 10)]), (vec![], 10));
        // A node removed at 10 and one that installed a snapshot at 6: together complete.
        assert_eq!(coverage(&[j(7, 30), j(0, 10)]), (vec![], 30));
        assert_eq!(coverage(&[j(12, 30), j(0, 10)]), (vec![(11, 11)], 30));
        assert_eq!(coverage(&[j(12, 30)]), (vec![(1, 11)], 30));
        assert_eq!(coverage(&[j(0, 10), j(11, 5)]), (vec![], 10), "an empty span covers nothing");
    }

    #[test]
    fn snowflake_ids_must_carry_the_nodes_worker_id_and_a_timestamp_in_the_window() {
        let mut h = clean();
        h.extend(op(6, 1, Mode::Snowflake, 60, vec![snowflake_id(1_800_000_000_060, 1, 9)]));
        let r = check(&h, &allocs(), ok());
        assert_eq!((r.valid, r.snowflake_violation_count), (Verdict::False, 1), "{}", summary(&r));
        assert!(r.snowflake_violations[0].reason.contains("worker ID 1"));

        let late = snowflake_id(1_800_000_000_060 + SNOWFLAKE_AHEAD_MS + 500, 0, 9);
        let mut h = clean();
        h.extend(op(6, 1, Mode::Snowflake, 60, vec![late]));
        assert_eq!(check(&h, &allocs(), ok()).snowflake_violation_count, 1);
        // The same ID is fine while node 1's clock was skewed 500 ms ahead.
        let mut h = clean();
        h.push(Event::Clock { time_ns: 55_000_000, node: 1, offset_ms: 500 });
        h.extend(op(6, 1, Mode::Snowflake, 60, vec![late]));
        assert_eq!(check(&h, &allocs(), ok()).valid, Verdict::True);
        // A node skewed +500 ms long before the operation must show it: an unskewed
        // timestamp means the skew was lost.
        let mut h = clean();
        h.insert(2, Event::Clock { time_ns: 1_000_000_000, node: 1, offset_ms: 500 });
        h.extend(op(6, 1, Mode::Snowflake, 3_000, vec![snowflake_id(1_800_000_003_000, 0, 9)]));
        h.extend(op(7, 1, Mode::Snowflake, 3_100, vec![snowflake_id(1_800_000_003_600, 0, 9)]));
        let r = check(&h, &allocs(), ok());
        assert_eq!(r.snowflake_violation_count, 1, "{}", summary(&r));
        assert_eq!(r.snowflake_violations[0].op.op, 6);
        // IDs of a node whose worker ID was never recorded cannot be checked: unknown.
        let mut h = clean();
        h.extend(op(6, 3, Mode::Snowflake, 60, vec![snowflake_id(1_800_000_000_060, 7, 9)]));
        let r = check(&h, &allocs(), ok());
        assert_eq!((r.valid, r.snowflake_unattributed), (Verdict::Unknown, 1));
    }

    #[test]
    fn a_failed_recovery_or_an_incomplete_history_is_unknown() {
        assert_eq!(check(&clean(), &allocs(), failed()).valid, Verdict::Unknown);
        let mut h = clean();
        h.push(Event::Fail(OpEvent {
            op: 99,
            process: 0,
            time_ns: 0,
            mode: Mode::Segment,
            tag: None,
            node: 1,
            count: 1,
            status: Some(503),
            ids: vec![],
            error: None,
        }));
        let r = check(&h, &allocs(), ok());
        assert_eq!(r.valid, Verdict::Unknown);
        assert!(r.problems[0].contains("op 99"));
    }
}
