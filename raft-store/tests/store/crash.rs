//! Log entries, the vote and the state machine survive `kill -9` of a child process writing
//! through the store. The child is this test binary again, running only `crash_child_writer`.
use std::io::{BufRead, BufReader, Write};
use std::process::{Command as Proc, Stdio};
use std::time::{Duration, Instant};

use leaf_raft_store::types::{Entry, Vote};
use leaf_raft_store::{open, StoreOptions};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{EntryPayload, RaftLogReader};
use rand::{Rng, SeedableRng};
use tempfile::TempDir;

use crate::support::{alloc_op, blank, commit, create_op, entry, rt};

/// Child side of the crash test: appends entries one batch at a time and prints each
/// acknowledged index (and vote) as soon as the store returns. Runs only when spawned by
/// `acknowledged_writes_survive_kill_9`.
#[test]
fn crash_child_writer() {
    let Ok(dir) = std::env::var("LEAF_CRASH_CHILD_DIR") else { return };
    rt().block_on(async move {
        let (mut log, mut sm) = open(std::path::Path::new(&dir), &StoreOptions::default()).unwrap();
        let mut next = log.get_log_state().await.unwrap().last_log_id.map_or(0, |l| l.index + 1);
        let mut term = log.read_vote().await.unwrap().map_or(1, |v| v.leader_id.term);
        // The parent re-applied everything on disk before this round started.
        assert_eq!(sm.applied_state().await.unwrap().0.map_or(0, |l| l.index + 1), next);
        let out = std::io::stdout();
        loop {
            let batch = 1 + next % 3;
            commit(&mut log, &mut sm, (next..next + batch).map(crash_entry).collect()).await;
            next += batch;
            writeln!(out.lock(), "ack {}", next - 1).unwrap();
            if next % 7 == 0 {
                term += 1;
                log.save_vote(&Vote::new(term, 1)).await.unwrap();
                writeln!(out.lock(), "vote {term}").unwrap();
            }
        }
    });
}

/// Entry `i` of the crash test: a blank first entry, the tag's creation, then allocations of
/// `i` IDs.
fn crash_entry(i: u64) -> Entry {
    match i {
        0 => blank(0),
        1 => entry(1, 1, create_op()),
        _ => entry(1, i, alloc_op(i as i64)),
    }
}

/// Log entries, the vote and the state machine survive `kill -9` of a process writing through
/// the store: every acknowledged entry is there without holes, and re-applying from the
/// checkpoint (openraft's start-up, then the leader re-committing its log) reaches exactly the
/// state of every entry applied once.
#[test]
fn acknowledged_writes_survive_kill_9() {
    let seed: u64 = std::env::var("LEAF_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    println!("crash test seed: {seed} (rerun with LEAF_TEST_SEED={seed})");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = TempDir::new().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut acked_total = 0;
    for round in 0..4 {
        let mut child = Proc::new(&exe)
            // The test's full name in this target: a move to another module must follow here.
            .args(["--exact", "crash::crash_child_writer", "--nocapture", "--test-threads=1"])
            .env("LEAF_CRASH_CHILD_DIR", dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let run_for = Duration::from_millis(rng.gen_range(300..900));
        let start = Instant::now();
        let (mut last_ack, mut last_vote) = (0u64, 0u64);
        while start.elapsed() < run_for {
            match rx.recv_timeout(Duration::from_millis(10)) {
                Ok(line) => parse_line(&line, &mut last_ack, &mut last_vote),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(e) => panic!("child exited early: {e}"),
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        // Lines printed before the kill were acknowledged before it.
        while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            parse_line(&line, &mut last_ack, &mut last_vote);
        }
        assert!(last_ack > acked_total, "round {round}: the child acknowledged nothing new");
        acked_total = last_ack;

        rt().block_on(async {
            let (mut log, mut sm) = open(dir.path(), &StoreOptions::default()).unwrap();
            let state = log.get_log_state().await.unwrap();
            let last = state.last_log_id.unwrap().index;
            assert!(last >= last_ack, "round {round}: acked up to {last_ack} but only {last} survived");
            let entries = log.try_get_log_entries(0..=last).await.unwrap();
            assert_eq!(entries.len() as u64, last + 1, "round {round}: the log has holes");
            for (i, e) in entries.iter().enumerate().skip(1) {
                assert_eq!(e.log_id.index, i as u64);
                assert!(matches!((&e.payload, &crash_entry(i as u64).payload),
                    (EntryPayload::Normal(c), EntryPayload::Normal(want)) if c.op == want.op));
            }
            let vote = log.read_vote().await.unwrap().map_or(0, |v| v.leader_id.term);
            assert!(vote >= last_vote, "round {round}: vote {last_vote} was acked, {vote} survived");
            let checkpoint = sm.checkpointed_index().unwrap();
            openraft::StorageHelper::new(&mut log, &mut sm).get_initial_state().await.unwrap();
            let applied = sm.applied_state().await.unwrap().0.map_or(0, |l| l.index);
            assert!(applied >= checkpoint && applied <= last, "round {round}: applied {applied}");
            let rest: Vec<Entry> = entries.into_iter().skip(applied as usize + 1).collect();
            sm.apply(rest).await.unwrap();
            let max_id = sm.reader().tag("t").unwrap().max_id;
            assert_eq!(max_id, 1 + (2..=last as i64).sum::<i64>(), "round {round}: state after re-applying");
            sm.checkpoint().await.unwrap();
            println!("round {round}: {last_ack} acknowledged, {last} on disk, checkpoint {checkpoint}, vote {vote}");
        });
    }
}

fn parse_line(line: &str, last_ack: &mut u64, last_vote: &mut u64) {
    if let Some(n) = line.strip_prefix("ack ") {
        *last_ack = n.trim().parse().unwrap();
    } else if let Some(n) = line.strip_prefix("vote ") {
        *last_vote = n.trim().parse().unwrap();
    }
}
