//! What a live process's threads are doing, from `/proc`: for a test that gives up on a node that
//! does not answer, whether the node is busy, deadlocked on a lock, or stuck in I/O.
//!
//! One line: the threads counted by name, state and wait channel (what the kernel waits on,
//! readable by root), busiest group first, e.g. `5× tokio-runtime-w S futex_wait_queue,
//! 1× leaf R -`. A thread that waits on a FUSE request shows `request_wait_answer`.
use std::collections::BTreeMap;
use std::path::Path;

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

#[cfg(test)]
mod tests {
    use super::summary;

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
