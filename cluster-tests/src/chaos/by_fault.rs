//! Availability per fault kind: of the operations invoked while a fault of a kind held (from
//! its `start` to its `heal`), how many succeeded. A soak's summary reports it per kind.
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::history::{Event, FaultAction, FaultSubject};

/// The operations invoked while faults of one kind held.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultStats {
    /// Faults of this kind that started (and were healed or ended by the next fault).
    pub faults: u64,
    /// Time they held, in total.
    pub seconds: f64,
    pub invoked: u64,
    pub ok: u64,
    pub fail: u64,
    pub info: u64,
    pub ok_ratio: f64,
}

/// The fault windows of a history: `(kind, start_ns, end_ns)`. A window ends at its fault's
/// `heal`, or (a fault that errored before its heal) at the next fault's start or the end of the
/// history.
fn windows(events: &[Event]) -> Vec<(FaultSubject, u64, u64)> {
    let mut out = Vec::new();
    let mut open: Option<(FaultSubject, u64)> = None;
    let mut last_ns = 0;
    for e in events {
        if let Event::Fault { time_ns, kind, action, .. } = e {
            last_ns = last_ns.max(*time_ns);
            match action {
                FaultAction::Start => {
                    if let Some((k, start)) = open.take() {
                        out.push((k, start, *time_ns));
                    }
                    open = Some((*kind, *time_ns));
                }
                FaultAction::Heal => {
                    if let Some((k, start)) = open.take_if(|(k, _)| k == kind) {
                        out.push((k, start, *time_ns));
                    }
                }
                FaultAction::Step | FaultAction::Error => {}
            }
        }
        if let Event::Invoke(o) | Event::Ok(o) | Event::Fail(o) | Event::Info(o) = e {
            last_ns = last_ns.max(o.time_ns);
        }
    }
    if let Some((k, start)) = open {
        out.push((k, start, last_ns + 1));
    }
    out
}

/// Availability per fault kind over a history.
pub fn by_fault(events: &[Event]) -> BTreeMap<String, FaultStats> {
    let windows = windows(events);
    let mut out: BTreeMap<String, FaultStats> = BTreeMap::new();
    for (kind, start, end) in &windows {
        let s = out.entry(kind.to_string()).or_default();
        s.faults += 1;
        s.seconds += end.saturating_sub(*start) as f64 / 1e9;
    }
    // Which window each operation was invoked in (windows are ordered and disjoint).
    let mut in_window: HashMap<u64, usize> = HashMap::new();
    for e in events {
        match e {
            Event::Invoke(o) => {
                let i = windows.partition_point(|(_, start, _)| *start <= o.time_ns);
                if let Some(w) = i.checked_sub(1).filter(|w| o.time_ns < windows[*w].2) {
                    in_window.insert(o.op, w);
                    if let Some(s) = out.get_mut(windows[w].0.name()) {
                        s.invoked += 1;
                    }
                }
            }
            Event::Ok(o) | Event::Fail(o) | Event::Info(o) => {
                let Some(&w) = in_window.get(&o.op) else { continue };
                let Some(s) = out.get_mut(windows[w].0.name()) else { continue };
                match e {
                    Event::Ok(_) => s.ok += 1,
                    Event::Fail(_) => s.fail += 1,
                    _ => s.info += 1,
                }
            }
            _ => {}
        }
    }
    for s in out.values_mut() {
        // Invoked and never completed (a history cut short) count as info.
        s.info += s.invoked.saturating_sub(s.ok + s.fail + s.info);
        s.ok_ratio = if s.invoked > 0 { s.ok as f64 / s.invoked as f64 } else { 0.0 };
    }
    out
}

/// The table of [`by_fault`] for a summary.
pub fn table(stats: &BTreeMap<String, FaultStats>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "\n| fault | faults | seconds held | invoked | ok | fail | info | ok ratio |");
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for (kind, f) in stats {
        let _ = writeln!(
            s,
            "| {kind} | {} | {:.0} | {} | {} | {} | {} | {:.3} |",
            f.faults, f.seconds, f.invoked, f.ok, f.fail, f.info, f.ok_ratio
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::history::{Mode, OpEvent};
    use super::super::schedule::FaultKind;
    use super::*;

    fn fault(t_ms: u64, kind: FaultKind, action: FaultAction) -> Event {
        Event::Fault {
            time_ns: t_ms * 1_000_000,
            kind: kind.into(),
            action,
            nodes: vec![1],
            detail: String::new(),
            cut: None,
        }
    }

    fn op(op: u64, t_ms: u64) -> OpEvent {
        OpEvent {
            op,
            process: 0,
            time_ns: t_ms * 1_000_000,
            mode: Mode::Snowflake,
            tag: None,
            node: 1,
            count: 1,
            status: None,
            ids: vec![],
            error: None,
        }
    }

    #[test]
    fn operations_count_in_the_window_they_were_invoked_in() {
        let events = vec![
            Event::Invoke(op(0, 5)), // before any fault
            Event::Ok(op(0, 6)),
            fault(10, FaultKind::Kill, FaultAction::Start),
            Event::Invoke(op(1, 11)),
            Event::Invoke(op(2, 12)),
            Event::Ok(op(1, 13)),
            Event::Fail(op(2, 30)), // completes after the heal: still the kill's
            fault(20, FaultKind::Kill, FaultAction::Heal),
            Event::Invoke(op(3, 25)), // between faults
            Event::Ok(op(3, 26)),
            fault(40, FaultKind::Netem, FaultAction::Start),
            Event::Invoke(op(4, 41)),
            Event::Info(op(4, 42)),
            fault(50, FaultKind::Membership, FaultAction::Start), // netem never healed: ends here
            fault(55, FaultKind::Membership, FaultAction::Error),
            Event::Invoke(op(5, 56)), // membership never healed: to the end
        ];
        let s = by_fault(&events);
        assert_eq!(
            s["kill"],
            FaultStats { faults: 1, seconds: 0.01, invoked: 2, ok: 1, fail: 1, info: 0, ok_ratio: 0.5 }
        );
        assert_eq!((s["netem"].invoked, s["netem"].info, s["netem"].faults), (1, 1, 1));
        assert_eq!((s["membership"].invoked, s["membership"].info), (1, 1));
        assert!(table(&s).contains("| kill | 1 | 0 | 2 | 1 | 1 | 0 | 0.500 |"));
    }
}
