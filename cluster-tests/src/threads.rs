//! What a live process's threads are doing, from `/proc`: for a test that gives up on a node that
//! does not answer, whether the node is busy, deadlocked on a lock, or stuck in I/O.
//!
//! - [`summary`], one line: the threads counted by name, state and wait channel (what the
//!   kernel waits on, readable by root), largest group first, e.g. `12× leaf S futex_do_wait,
//!   1× leaf R -`. `R` is busy, `T` stopped, `D` in uninterruptible I/O; a thread that waits on
//!   a FUSE request (the power-cut disks) shows `request_wait_answer`. An idle node's threads
//!   wait on futexes too, so a node that does not answer with all of them there waits on a lock.
//! - [`stacks`], when `gdb` is on the machine: where each thread is, in this workspace's and
//!   sled's functions, threads with the same frames counted together: what a lock wait is on.
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The summary of process `pid`'s threads, or why there is none.
pub fn summary(pid: u32) -> String {
    let dir = format!("/proc/{pid}/task");
    let tasks = match std::fs::read_dir(&dir) {
        Ok(tasks) => tasks,
        Err(e) => return format!("no threads to show ({dir}: {e})"),
    };
    let mut groups: BTreeMap<(String, char, String), usize> = BTreeMap::new();
    for task in tasks.flatten() {
        let path = task.path();
        let Some(state) = state_of(&path) else { continue };
        let name = read_trimmed(&path.join("comm")).unwrap_or_else(|| "?".into());
        let wchan = read_trimmed(&path.join("wchan")).filter(|w| !w.is_empty() && w != "0");
        *groups.entry((name, state, wchan.unwrap_or_else(|| "-".into()))).or_default() += 1;
    }
    let mut counted: Vec<_> = groups.into_iter().collect();
    counted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let parts: Vec<String> =
        counted.iter().map(|((name, state, wchan), n)| format!("{n}× {name} {state} {wchan}")).collect();
    format!("threads: {}", parts.join(", "))
}

/// The state letter of a task (`R`, `S`, `D`...), the field after the name in `stat`; the name
/// is in parentheses and may hold spaces, so it is found after the last `)`.
fn state_of(task: &Path) -> Option<char> {
    let stat = std::fs::read_to_string(task.join("stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// How long [`stacks`] lets `gdb` take.
const GDB_WAIT: Duration = Duration::from_secs(60);

/// The frames that say where a thread is: this workspace's crates and sled.
const OURS: [&str; 2] = ["leaf_", "sled::"];

/// Process `pid`'s threads as `gdb` sees them (`thread apply all bt`), condensed: for each group
/// of threads with the same frames, their count, name, what they block in (the innermost Rust
/// function before [`OURS`]) and the first few frames of [`OURS`]. `None` without `gdb`, or when it fails.
pub fn stacks(pid: u32) -> Option<String> {
    let mut gdb = Command::new("gdb")
        .args(["-p", &pid.to_string(), "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt 60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = gdb.stdout.take()?;
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut out, &mut text).map(|_| text)
    });
    let deadline = Instant::now() + GDB_WAIT;
    while gdb.try_wait().ok()?.is_none() {
        if Instant::now() >= deadline {
            let _ = gdb.kill();
            let _ = gdb.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = reader.join().ok()?.ok()?;
    let condensed = condense(&text);
    (!condensed.is_empty()).then_some(condensed)
}

/// [`stacks`]' condensing of `gdb`'s output: a line per group of threads, largest first.
fn condense(bt: &str) -> String {
    let mut groups: BTreeMap<String, usize> = BTreeMap::new();
    let mut thread: Option<(String, Vec<String>)> = None;
    let mut finish = |t: Option<(String, Vec<String>)>| {
        if let Some((name, frames)) = t {
            // By the function's own path (`<leaf_x::T as Trait>::f` too), not its generics.
            let is_ours = |f: &String| OURS.iter().any(|o| f.trim_start_matches('<').starts_with(o));
            // What it blocks in: the innermost Rust function before our frames (past
            // `syscall` and the like), else the innermost frame.
            let mut before = frames.iter().take_while(|f| !is_ours(f));
            let inner = before.find(|f| f.contains("::")).or(frames.first()).cloned().unwrap_or_default();
            let ours = frames.iter().filter(|f| is_ours(f)).take(4).map(String::as_str);
            let line = std::iter::once(inner.as_str()).chain(ours).collect::<Vec<_>>().join(" <- ");
            *groups.entry(format!("{name}: {line}")).or_default() += 1;
        }
    };
    for line in bt.lines() {
        if line.starts_with("Thread ") {
            finish(thread.take());
            // `Thread 3 (Thread 0x7f.. (LWP 12) "name"):`
            let name = line.split('"').nth(1).unwrap_or("?").to_owned();
            thread = Some((name, Vec::new()));
        } else if let (Some((_, frames)), Some(frame)) = (thread.as_mut(), line.strip_prefix('#')) {
            frames.push(function_of(frame));
        }
    }
    finish(thread);
    let mut counted: Vec<_> = groups.into_iter().collect();
    counted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counted.iter().map(|(what, n)| format!("{n}× {what}")).collect::<Vec<_>>().join("\n")
}

/// The function of a `gdb` frame line after its `#`: `3  0x55.. in a::b::c::h0123456789abcdef ()`
/// or `5  a::b (x=1) at f.rs:2`, without the address, arguments and symbol hash.
fn function_of(frame: &str) -> String {
    let rest = frame.trim_start_matches(|c: char| c.is_ascii_digit()).trim_start();
    let rest = match rest.split_once(" in ") {
        Some((addr, f)) if addr.starts_with("0x") => f,
        _ => rest,
    };
    let name = rest.split(" (").next().unwrap_or(rest).trim();
    let name = match name.rsplit_once("::h") {
        Some((f, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => f,
        _ => name,
    };
    // Generic arguments can run to hundreds of characters.
    match name.char_indices().nth(MAX_FRAME) {
        Some((cut, _)) => format!("{}…", &name[..cut]),
        None => name.to_owned(),
    }
}

/// The characters of a frame's function kept in [`stacks`]' lines.
const MAX_FRAME: usize = 120;

#[cfg(test)]
mod tests {
    use super::{condense, summary};

    #[test]
    fn gdb_threads_are_condensed_to_where_they_wait_in_our_code() {
        let bt = "\
[New LWP 7637]
Thread 3 (Thread 0x7f27 (LWP 7651) \"leaf\"):
#0  syscall () at ../sysdeps/unix/sysv/linux/x86_64/syscall.S:38
#1  0x000056016f289b3f in std::sys::sync::rwlock::futex::RwLock::read_contended::h4e602242f4e643ff ()
#2  0x000056016f26dd28 in leaf_raft_store::disk::Tree::write::hbc2ca56ab8c6ce29 ()
#3  leaf_raft_store::state_machine::StateMachineStore::apply_entries (self=0x1) at raft-store/src/state_machine.rs:230
#4  0x000056016f267fd1 in core::ops::function::FnOnce::call_once::h7ec17a81a822911e ()

Thread 2 (Thread 0x7f28 (LWP 7650) \"leaf\"):
#0  syscall () at ../sysdeps/unix/sysv/linux/x86_64/syscall.S:38
#1  0x000056016f289b3f in std::sys::sync::rwlock::futex::RwLock::read_contended::h4e602242f4e643ff ()
#2  0x000056016f26dd28 in leaf_raft_store::disk::Tree::write::hbc2ca56ab8c6ce29 ()
#3  leaf_raft_store::state_machine::StateMachineStore::apply_entries (self=0x2) at raft-store/src/state_machine.rs:230

Thread 1 (Thread 0x7f29 (LWP 7635) \"sled-io-0\"):
#0  0x00007f in epoll_wait (epfd=3) at ../sysdeps/unix/sysv/linux/epoll_wait.c:30
#1  0x000056016f in sled::threadpool::perform_work::hc96d4f37b89a2425 ()
#2  0x000056016f in __rust_begin_short_backtrace<leaf_node::tags::{impl#0}::start::{closure_env#0}, ()> ()
";
        let condensed = condense(bt);
        let lines: Vec<&str> = condensed.lines().collect();
        assert_eq!(
            lines,
            [
                "2× leaf: std::sys::sync::rwlock::futex::RwLock::read_contended <- \
                 leaf_raft_store::disk::Tree::write <- leaf_raft_store::state_machine::StateMachineStore::apply_entries",
                "1× sled-io-0: epoll_wait <- sled::threadpool::perform_work",
            ]
        );
    }

    #[test]
    fn the_summary_counts_this_process_threads_and_names_a_sleeping_one() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::Builder::new().name("sleeper-x".into()).spawn(move || rx.recv()).unwrap();
        // The thread shows as sleeping once it blocks in recv; /proc has it from its start.
        let mut last = String::new();
        for _ in 0..500 {
            last = summary(std::process::id());
            if last.contains("sleeper-x S ") {
                break;
            }
            std::thread::yield_now();
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        tx.send(()).unwrap();
        sleeper.join().unwrap().unwrap();
        assert!(last.starts_with("threads: "), "{last}");
        assert!(last.contains("1× sleeper-x S "), "no sleeping sleeper-x thread in {last}");
    }

    #[test]
    fn a_process_that_is_gone_says_so() {
        let s = summary(u32::MAX);
        assert!(s.starts_with("no threads to show"), "{s}");
    }
}
