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
use leaf_api::gapless::{hash_hex, parse_hash, LedgerEntry};
use leaf_client::Client;
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
                    println!("ok: {} numbers of {:?} in {} period(s), head {}", v.numbers, v.tag, v.periods, v.head);
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

async fn export(client: &Client, tag: &str, csv: bool) -> ExitCode {
    let (entries, head) = match client.gapless(tag).ledger(None).await {
        Ok(got) => got,
        Err(e) => return fail(&e),
    };
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    let header = Header { tag: tag.to_string(), numbers: entries.len() as u64, head };
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
    writeln!(out, "period,number,display,key,state,actor,at_ms,hash")?;
    for e in entries {
        let state = serde_json::to_string(&e.state)?;
        let actor = serde_json::to_string(&e.actor)?;
        let fields = [
            e.period.to_string(),
            e.number.to_string(),
            e.display.clone().unwrap_or_default(),
            e.key.clone(),
            state.trim_matches('"').to_string(),
            actor,
            e.at_ms.to_string(),
            e.hash.clone(),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        writeln!(out, "{}", line.join(","))?;
    }
    Ok(())
}

/// A CSV field, quoted (quotes doubled) when it holds a comma, a quote or a space at either end.
fn csv_field(f: &str) -> String {
    if f.contains([',', '"', '\n']) || f.starts_with(' ') || f.ends_with(' ') {
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
    pub head: String,
}

/// Checks an export read from `input` (see the module's documentation).
pub fn verify(input: impl BufRead) -> Result<Verified, String> {
    let mut lines = input.lines().enumerate();
    let header: Header = match lines.next() {
        Some((_, Ok(l))) => serde_json::from_str(&l).map_err(|e| format!("line 1 is not an export header: {e}"))?,
        Some((_, Err(e))) => return Err(format!("reading line 1: {e}")),
        None => return Err("the export is empty".into()),
    };
    let mut prev = leaf_raft_store::CHAIN_GENESIS;
    let mut last: Option<(u32, u64)> = None;
    let mut keys = BTreeSet::new();
    let mut periods = BTreeMap::new();
    let mut count = 0u64;
    for (i, line) in lines {
        let n = i + 1;
        let line = line.map_err(|e| format!("reading line {n}: {e}"))?;
        let e: LedgerEntry =
            serde_json::from_str(&line).map_err(|err| format!("line {n}: not a ledger entry: {err}"))?;
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
        if !keys.insert(e.key.clone()) {
            return Err(format!("line {n}: key {:?} has a number already", e.key));
        }
        let link = leaf_raft_store::chain_hash(&prev, &header.tag, (e.period, e.number), &e.key, &e.actor, e.at_ms);
        if parse_hash(&e.hash) != Some(link) {
            return Err(format!(
                "line {n}: number {} of period {}: its hash does not follow from the numbers before it (altered)",
                e.number, e.period
            ));
        }
        prev = link;
        last = Some((e.period, e.number));
        *periods.entry(e.period).or_insert(0u64) += 1;
        count += 1;
    }
    let head = hash_hex(&prev);
    if head != header.head || count != header.numbers {
        return Err(format!(
            "the export holds {count} numbers ending at {head}; its header says {} ending at {}: numbers were removed \
             or added",
            header.numbers, header.head
        ));
    }
    Ok(Verified { tag: header.tag, numbers: count, periods: periods.len(), head })
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::Actor;
    use leaf_api::gapless::NumberState;

    use super::*;

    /// A genuine export of `n` numbers: periods 2026 then 2027 after the first `split`.
    fn export(n: u64, split: u64) -> (Header, Vec<LedgerEntry>) {
        let mut prev = leaf_raft_store::CHAIN_GENESIS;
        let mut out = Vec::new();
        for i in 0..n {
            let (period, number) = if i < split { (2026, i + 1) } else { (2027, i - split + 1) };
            let key = format!("order-{i}");
            let actor = Actor::Token { id: leaf_api::tokens::TokenId(3), name: "billing".into() };
            let at_ms = 1_000 + i as i64;
            prev = leaf_raft_store::chain_hash(&prev, "inv", (period, number), &key, &actor, at_ms);
            let hash = hash_hex(&prev);
            out.push(LedgerEntry {
                period,
                number,
                display: None,
                key,
                state: NumberState::Issued,
                actor,
                at_ms,
                hash,
            });
        }
        (Header { tag: "inv".into(), numbers: n, head: hash_hex(&prev) }, out)
    }

    fn text(h: &Header, entries: &[LedgerEntry]) -> Vec<u8> {
        let mut out = Vec::new();
        write_lines(&mut out, h, entries).unwrap();
        out
    }

    #[test]
    fn a_genuine_export_verifies() {
        let (h, e) = export(7, 4);
        let v = verify(&text(&h, &e)[..]).unwrap();
        assert_eq!((v.numbers, v.periods, v.head), (7, 2, h.head));
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
    }
}
