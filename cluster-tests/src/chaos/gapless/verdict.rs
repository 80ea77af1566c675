//! The verdict of a gapless run: every series' ledger read from every member after the run
//! ([`read_ledgers`], kept in `gapless-ledgers.json`), and the attempts of `gapless.jsonl`
//! checked against it ([`check`], [`check_dir`]), with the lines of the run's summary.
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use leaf_api::gapless::{LedgerEntry, LedgerQuery, NumberState};
use leaf_client::Client;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{AttemptLine, GaplessOp, Series, ATTEMPTS_FILE, EXAMPLES, LEDGERS_FILE};
use crate::chaos::check::Verdict;
use crate::gapless_check::{self, Attempt, LedgerRow};

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
    for s in series.iter().filter(|_| !nodes.is_empty()) {
        let q = LedgerQuery { limit: Some(1), state: Some(NumberState::Reserved), ..LedgerQuery::default() };
        let mut at = 0;
        loop {
            let id = nodes[at % nodes.len()];
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
        if l.refused {
            // A definite refusal answers the operation; the ledger must agree with it.
            answered.insert(&l.op);
            if let Some(v) = refusal_contradicted(&l.op, &rows) {
                violations.push(v);
            }
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

/// What the ledger says against a `number_conflict` refusal of `op`, if it contradicts it: a
/// refused confirm leaves its number voided (its reservation expired or its period closed); a
/// refused void finds its number final; an issue or a reservation is never refused.
fn refusal_contradicted(op: &GaplessOp, rows: &[LedgerRow]) -> Option<String> {
    let (_, tag, key) = op.parts();
    let state = rows.iter().find(|r| r.tag == tag && r.key == key).map(|r| r.state);
    let agrees = match op {
        GaplessOp::Confirm { .. } => state == Some(NumberState::Voided),
        GaplessOp::Void { .. } => matches!(state, Some(NumberState::Issued | NumberState::Confirmed)),
        GaplessOp::Issue { .. } | GaplessOp::Reserve { .. } => false,
    };
    (!agrees).then(|| format!("{}: refused as number_conflict, but the ledger holds it {state:?}", op.describe()))
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
    use leaf_api::gapless::{IssuedNumber, Settlement};

    use crate::chaos::gapless::{series, workers, GaplessOp, NEVER_TAG};

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
            secret: None,
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
            refused: false,
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
                series: series(0, true).remove(0),
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
    fn a_refused_confirm_is_an_answer_the_ledger_must_agree_with() {
        let reserved = IssuedNumber {
            state: NumberState::Reserved,
            deadline_ms: Some(4_000),
            ..number(NEVER_TAG, "k1", 1, false)
        };
        let confirm = GaplessOp::Confirm { tag: NEVER_TAG.into(), key: "k1".into() };
        let refused = AttemptLine {
            op: confirm.clone(),
            error: Some("number_conflict: the reservation expired".into()),
            refused: true,
            ..line("k1", 1, false, None)
        };
        let lines = vec![
            AttemptLine {
                op: GaplessOp::Reserve { tag: NEVER_TAG.into(), key: "k1".into() },
                ..line("k1", 1, false, Some(reserved))
            },
            refused.clone(),
        ];
        let mut expired = entry(1, "k1");
        expired.deadline_ms = Some(4_000);
        expired.state = NumberState::Voided;
        expired.settled = Some(Settlement {
            state: NumberState::Voided,
            cause: Some(leaf_api::gapless::VoidCause::Expired),
            reason: Some("expired".into()),
            actor: Actor::Unattributed,
            at_ms: 4_001,
            seq: 2,
            hash: format!("{:064}", 2),
        });
        let r = check(&lines, &ledgers(vec![expired.clone()], &[1, 2]), Vec::new());
        assert_eq!(r.valid, Some(Verdict::True), "{}", summary(&r));
        // Without its flag the refusal leaves the confirm unanswered: unknown.
        let unflagged = vec![lines[0].clone(), AttemptLine { refused: false, ..refused.clone() }];
        assert_eq!(
            check(&unflagged, &ledgers(vec![expired.clone()], &[1, 2]), Vec::new()).valid,
            Some(Verdict::Unknown)
        );
        // A refused confirm whose number the ledger holds confirmed contradicts it.
        let mut confirmed = expired;
        confirmed.state = NumberState::Confirmed;
        confirmed.settled =
            confirmed.settled.map(|s| Settlement { state: NumberState::Confirmed, cause: None, reason: None, ..s });
        let r = check(&lines, &ledgers(vec![confirmed], &[1, 2]), Vec::new());
        assert_eq!(r.valid, Some(Verdict::False), "{}", summary(&r));
        assert!(r.violations.iter().any(|v| v.contains("refused as number_conflict")), "{:?}", r.violations);
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
