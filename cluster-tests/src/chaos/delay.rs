//! A userspace link delayer for kernels without `sch_netem` (root): delay, jitter and
//! reordering of the packets an iptables `NFQUEUE` rule hands it.
//!
//! A thread enters a node's network namespace (`setns`, which moves only that thread), binds
//! an NFQUEUE there, and holds each queued packet until its release time before it accepts
//! it: `delay ± jitter` (uniform), or at once for `reorder_pct` percent of the packets, which
//! then overtake the held ones (netem's `reorder` semantics). Packets released behind one that
//! left after them are counted as reordered, so a fault's record proves it bit.
//!
//! Each delayer binds a queue number of its own ([`Delayer::queue`]): the netlink socket is
//! opened without close-on-exec (the `nfq` crate has no way to ask for it), so a process
//! spawned meanwhile — a restarted node, a concurrent test's child — can keep the old socket,
//! and with it the old queue's binding, alive after the delayer stops. A fresh number never
//! collides with such a leftover (binding a queue another socket holds fails with `EPERM`).
//!
//! The iptables rule uses `--queue-bypass`: a packet finds no listener only before the thread
//! binds or after it stops, and then passes undelayed instead of being dropped. On stop, the
//! rules are already gone ([`super::netns::Netns::clear_netem`] removes them first) and every
//! held packet is released.
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The first queue number a delayer binds (queues are per namespace); each delayer of the
/// process takes the next one.
const FIRST_QUEUE: u16 = 7;

static NEXT_QUEUE: AtomicU16 = AtomicU16::new(FIRST_QUEUE);

/// A queue number no earlier delayer of this process bound (until 65,529 delayers wrap it).
fn next_queue() -> u16 {
    loop {
        let q = NEXT_QUEUE.fetch_add(1, Ordering::Relaxed);
        if q >= FIRST_QUEUE {
            return q;
        }
    }
}

/// Packets queued to userspace before the kernel bypasses the queue.
const QUEUE_MAX_LEN: u32 = 8192;

/// How a delayed link behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelaySpec {
    pub delay_ms: u32,
    pub jitter_ms: u32,
    pub reorder_pct: u32,
    pub seed: u64,
}

impl DelaySpec {
    /// Whether the spec holds any packet back at all.
    pub fn is_noop(&self) -> bool {
        self.delay_ms == 0 && self.jitter_ms == 0
    }

    /// How long a packet is held: at once for `reorder_pct` percent, else `delay ± jitter`.
    fn hold(&self, rng: &mut StdRng) -> Duration {
        if self.reorder_pct > 0 && rng.gen_range(0..100) < self.reorder_pct {
            return Duration::ZERO;
        }
        let jitter = i64::from(self.jitter_ms);
        let ms = i64::from(self.delay_ms) + if jitter > 0 { rng.gen_range(-jitter..=jitter) } else { 0 };
        Duration::from_millis(ms.max(0) as u64)
    }
}

/// What a delayer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DelayStats {
    /// Packets held for a nonzero time.
    pub delayed: u64,
    /// Packets released after a packet queued later than them.
    pub reordered: u64,
    /// Every packet accepted.
    pub packets: u64,
}

/// A running delayer thread.
pub struct Delayer {
    queue: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<DelayStats>>>,
}

impl Delayer {
    /// Starts a delayer in the namespace at `netns` (e.g. `/run/netns/<name>`), bound to a
    /// queue number of its own ([`Delayer::queue`]); returns once the queue is bound.
    pub fn start(netns: &Path, spec: DelaySpec) -> anyhow::Result<Delayer> {
        let ns = File::open(netns).with_context(|| format!("open {}", netns.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let flag = stop.clone();
        let queue = next_queue();
        let thread = std::thread::Builder::new().name("leaf-chaos-delay".into()).spawn(move || {
            let bound = match bind(&ns, queue) {
                Ok(q) => {
                    let _ = ready_tx.send(Ok(()));
                    q
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("{e:#}")));
                    return Err(e);
                }
            };
            serve(bound, spec, &flag)
        })?;
        match ready_rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Ok(())) => Ok(Delayer { queue, stop, thread: Some(thread) }),
            Ok(Err(e)) => bail!("delayer (queue {queue}): {e}"),
            Err(_) => bail!("delayer: the queue was not bound within 5 s"),
        }
    }

    /// The NFQUEUE number this delayer serves (the iptables rule's `--queue-num`).
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Releases every held packet and stops; returns what the delayer did.
    pub fn stop(mut self) -> anyhow::Result<DelayStats> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(res)) => res,
            Some(Err(_)) => bail!("the delayer thread panicked"),
            None => Ok(DelayStats::default()),
        }
    }
}

impl Drop for Delayer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Moves this thread into the namespace `ns` and binds queue number `queue` there.
fn bind(ns: &File, queue: u16) -> anyhow::Result<nfq::Queue> {
    // SAFETY: setns on a valid namespace fd; CLONE_NEWNET changes only the calling thread's
    // network namespace, which this thread owns for its whole life.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error()).context("setns");
    }
    let mut q = nfq::Queue::open().context("open an NFQUEUE socket")?;
    q.bind(queue).context("bind the NFQUEUE")?;
    // Metadata only: the verdict does not rewrite the packet, and a whole packet would not
    // fit the receive buffer.
    q.set_copy_range(queue, 0).context("set the copy range")?;
    q.set_queue_max_len(queue, QUEUE_MAX_LEN).context("set the queue length")?;
    q.set_fail_open(queue, true).context("set fail-open")?;
    q.set_nonblocking(true);
    Ok(q)
}

/// Holds and releases packets until `stop` is set, then releases the rest.
fn serve(mut queue: nfq::Queue, spec: DelaySpec, stop: &AtomicBool) -> anyhow::Result<DelayStats> {
    let mut rng = StdRng::seed_from_u64(spec.seed);
    let mut stats = DelayStats::default();
    // (release time, arrival sequence) → the message, in the same slot order.
    let mut held: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut msgs: std::collections::HashMap<u64, nfq::Message> = std::collections::HashMap::new();
    let mut seq = 0u64;
    let mut highest_released: Option<u64> = None;
    loop {
        let stopping = stop.load(Ordering::SeqCst);
        loop {
            match queue.recv() {
                Ok(msg) => {
                    let hold = spec.hold(&mut rng);
                    if !hold.is_zero() {
                        stats.delayed += 1;
                    }
                    held.push(Reverse((Instant::now() + hold, seq)));
                    msgs.insert(seq, msg);
                    seq += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("receive from the NFQUEUE"),
            }
        }
        let now = Instant::now();
        while let Some(Reverse((at, s))) = held.peek().copied() {
            if at > now && !stopping {
                break;
            }
            held.pop();
            if let Some(mut msg) = msgs.remove(&s) {
                msg.set_verdict(nfq::Verdict::Accept);
                queue.verdict(msg).context("accept a held packet")?;
                stats.packets += 1;
                match highest_released {
                    Some(h) if s < h => stats.reordered += 1,
                    _ => highest_released = Some(s),
                }
            }
        }
        if stopping {
            return Ok(stats);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_follow_the_spec() {
        let mut rng = StdRng::seed_from_u64(3);
        let fixed = DelaySpec { delay_ms: 40, jitter_ms: 0, reorder_pct: 0, seed: 0 };
        assert!((0..100).all(|_| fixed.hold(&mut rng) == Duration::from_millis(40)));
        let jittery = DelaySpec { delay_ms: 10, jitter_ms: 30, reorder_pct: 0, seed: 0 };
        let holds: Vec<Duration> = (0..1000).map(|_| jittery.hold(&mut rng)).collect();
        assert!(holds.iter().all(|h| *h <= Duration::from_millis(40)));
        assert!(holds.iter().any(|h| h.is_zero()), "negative holds clamp to zero");
        assert!(holds.iter().any(|h| *h > Duration::from_millis(30)));
        let reorder = DelaySpec { delay_ms: 50, jitter_ms: 0, reorder_pct: 30, seed: 0 };
        let at_once = (0..10_000).filter(|_| reorder.hold(&mut rng).is_zero()).count();
        assert!((2500..3500).contains(&at_once), "{at_once} of 10000 sent at once");
        assert!(DelaySpec { delay_ms: 0, jitter_ms: 0, reorder_pct: 50, seed: 0 }.is_noop());
    }
}
