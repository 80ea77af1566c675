//! Group commit on the leader: of segment allocations, and of gapless numbers.
//!
//! openraft 0.9 writes each proposal as its own entry: one log append and one fsync on the
//! leader, one apply, one slot in every replication message. A flood of first requests for
//! cold tags (each a segment allocation) therefore committed one entry per tag. The leader now
//! writes the allocations that arrive while it is committing others as one
//! [`Op::AllocateSegments`] entry: a caller joins the waiting group; a driver task takes the
//! whole group (at most [`MAX_SEGMENT_ASKS`]), commits it and answers each caller with its own
//! allocation. A lone allocation is still an [`Op::AllocateSegment`], so a quiet cluster
//! writes what earlier releases wrote. Issues of gapless numbers are grouped the same way into
//! owned [`Op::IssueNumbers`] entries (at most [`leaf_raft_store::MAX_NUMBER_ASKS`]): one series
//! serves thousands of numbers a second from one commit per group, not one per number.
//!
//! [`Op::AllocateSegment`]: leaf_raft_store::Op::AllocateSegment
//! [`Op::AllocateSegments`]: leaf_raft_store::Op::AllocateSegments
//! [`Op::IssueNumbers`]: leaf_raft_store::Op::IssueNumbers
//!
//! Each allocation of a group is applied as if alone ([`leaf_raft_store::apply`]): it gets the
//! same kind of answer, and a refused one (an exhausted tag) fails only its own caller. Every
//! caller is answered from an entry that started after it arrived, and an entry is proposed
//! while this node leads, as for a single proposal. At most [`MAX_IN_FLIGHT`] entries are in
//! flight, so the next group gathers while the last one commits.
use std::future::Future;
use std::sync::{Arc, Mutex};

use leaf_raft_store::ApplyError;
#[cfg(doc)]
use leaf_raft_store::MAX_SEGMENT_ASKS;
use tokio::sync::oneshot;

use crate::raft::ProposeError;

/// What one ask of a group comes to: committed (answered `R` or refused by the state
/// machine), or not committed at all.
pub(crate) type Outcome<R> = Result<Result<R, ApplyError>, ProposeError>;

/// What committing a group returns: one result per ask, in order.
pub(crate) type GroupResult<R> = Result<Vec<Result<R, ApplyError>>, ProposeError>;

/// Groups asks `A` (answered `R` each) into shared entries of at most `max` asks.
pub(crate) struct GroupCommit<A, R> {
    state: Mutex<State<A, R>>,
    max: usize,
}

struct State<A, R> {
    /// Driver tasks committing groups (at most [`MAX_IN_FLIGHT`]).
    drivers: usize,
    /// Asks for the next group.
    waiting: Vec<(A, oneshot::Sender<Outcome<R>>)>,
}

/// Groups in flight at once: one committing while the next gathers and is appended.
const MAX_IN_FLIGHT: usize = 2;

impl<A: Send + 'static, R: Send + 'static> GroupCommit<A, R> {
    /// Groups of at most `max` asks.
    pub(crate) fn new(max: usize) -> Self {
        GroupCommit { state: Mutex::new(State { drivers: 0, waiting: Vec::new() }), max: max.max(1) }
    }

    /// Commits `ask` in a group with the asks waiting beside it. `commit` writes a group and
    /// returns one result per ask; it runs on a spawned task, so a caller that gives up does
    /// not cancel the others' entry (its own allocation is then wasted, as a single one whose
    /// caller left would be; its own number is issued to its key, which a retry gets back).
    pub(crate) async fn join<F, Fut>(self: &Arc<Self>, ask: A, commit: F) -> Outcome<R>
    where
        F: Fn(Vec<A>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = GroupResult<R>> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.waiting.push((ask, tx));
            let start = s.drivers < MAX_IN_FLIGHT;
            s.drivers += usize::from(start);
            start
        };
        if start {
            let me = self.clone();
            tokio::spawn(async move {
                while let Some(group) = me.next_group() {
                    let (asks, callers): (Vec<_>, Vec<_>) = group.into_iter().unzip();
                    let n = asks.len();
                    match commit(asks).await {
                        Ok(results) if results.len() == n => {
                            for (tx, r) in callers.into_iter().zip(results) {
                                let _ = tx.send(Ok(r));
                            }
                        }
                        Ok(results) => {
                            let why = format!("a group of {n} asks was answered with {} results", results.len());
                            tracing::error!(%why, "refused a group commit's answer");
                            for tx in callers {
                                let _ = tx.send(Err(ProposeError::Unavailable(why.clone())));
                            }
                        }
                        Err(e) => {
                            for tx in callers {
                                let _ = tx.send(Err(e.clone()));
                            }
                        }
                    }
                }
            });
        }
        rx.await.unwrap_or_else(|_| Err(ProposeError::Unavailable("the ask's group was dropped".into())))
    }

    /// The next group, oldest first, or `None` (and one driver fewer) when nobody waits.
    fn next_group(&self) -> Option<Vec<(A, oneshot::Sender<Outcome<R>>)>> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.waiting.is_empty() {
            s.drivers -= 1;
            return None;
        }
        let n = s.waiting.len().min(self.max);
        Some(s.waiting.drain(..n).collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use leaf_raft_store::{Allocation, SegmentAsk, MAX_SEGMENT_ASKS};
    use tokio::sync::Semaphore;

    use super::*;

    fn ask(tag: &str) -> SegmentAsk {
        SegmentAsk { tag: tag.into(), step: 10, node_id: 1 }
    }

    /// A fake state machine: every tag shares one counter; "full" is refused. Each commit
    /// waits for a permit, so the test decides when entries complete.
    fn committer(
        gate: Arc<Semaphore>,
        groups: Arc<Mutex<Vec<Vec<String>>>>,
    ) -> impl Fn(Vec<SegmentAsk>) -> std::pin::Pin<Box<dyn Future<Output = GroupResult<Allocation>> + Send>>
           + Send
           + Sync
           + 'static {
        let next = Arc::new(AtomicI64::new(1));
        move |asks: Vec<SegmentAsk>| {
            let (gate, groups, next) = (gate.clone(), groups.clone(), next.clone());
            Box::pin(async move {
                groups.lock().unwrap().push(asks.iter().map(|a| a.tag.clone()).collect());
                gate.acquire().await.unwrap().forget();
                Ok(asks
                    .iter()
                    .map(|a| {
                        if a.tag == "full" {
                            return Err(ApplyError::TagNotFound(a.tag.clone()));
                        }
                        let start = next.fetch_add(a.step, Ordering::SeqCst);
                        Ok(Allocation { start, end: start + a.step, stored_step: a.step })
                    })
                    .collect())
            })
        }
    }

    /// While two entries are in flight, every later caller waits and joins one group; each
    /// caller gets its own allocation or its own refusal.
    #[tokio::test]
    async fn callers_that_arrive_during_a_commit_share_the_next_entry() {
        let g = Arc::new(GroupCommit::<SegmentAsk, Allocation>::new(MAX_SEGMENT_ASKS));
        let gate = Arc::new(Semaphore::new(0));
        let groups = Arc::new(Mutex::new(Vec::new()));
        let commit = Arc::new(committer(gate.clone(), groups.clone()));
        let call = |tag: &str| {
            let (g, commit, a) = (g.clone(), commit.clone(), ask(tag));
            tokio::spawn(async move { g.join(a, move |asks| commit(asks)).await })
        };
        let until = |what: &'static str, cond: Box<dyn Fn() -> bool>| async move {
            let wait = async {
                while !cond() {
                    tokio::task::yield_now().await;
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(10), wait).await.expect(what);
        };
        // Two drivers, each committing one ask.
        let a = call("a");
        let seen = groups.clone();
        until("a's entry", Box::new(move || seen.lock().unwrap().len() == 1)).await;
        let b = call("b");
        let seen = groups.clone();
        until("b's entry", Box::new(move || seen.lock().unwrap().len() == 2)).await;
        let first = [a, b];
        let rest: Vec<_> = ["c", "full", "d", "e"].into_iter().map(call).collect();
        let g2 = g.clone();
        until("four waiting", Box::new(move || g2.state.lock().unwrap().waiting.len() == 4)).await;
        gate.add_permits(3);
        let mut got = Vec::new();
        for h in first.into_iter().chain(rest) {
            let answer = tokio::time::timeout(std::time::Duration::from_secs(10), h).await;
            got.push(answer.expect("every caller answered by three entries").unwrap().unwrap());
        }
        let committed = groups.lock().unwrap().clone();
        assert_eq!(committed, vec![vec!["a"], vec!["b"], vec!["c", "full", "d", "e"]]);
        assert!(matches!(got[3], Err(ApplyError::TagNotFound(_))), "{got:?}");
        let mut ranges: Vec<(i64, i64)> =
            got.iter().filter_map(|r| r.as_ref().ok()).map(|a| (a.start, a.end)).collect();
        ranges.sort_unstable();
        assert_eq!(ranges, vec![(1, 11), (11, 21), (21, 31), (31, 41), (41, 51)], "each caller its own range");
        // Once nobody waits the drivers stop; a later caller starts a fresh entry alone.
        let g2 = g.clone();
        until("the drivers to stop", Box::new(move || g2.state.lock().unwrap().drivers == 0)).await;
        let next = call("f");
        gate.add_permits(1);
        assert!(next.await.unwrap().unwrap().is_ok());
        assert_eq!(groups.lock().unwrap().last().unwrap(), &vec!["f".to_string()]);
    }

    /// A group that is not committed fails every caller in it with the same error.
    #[tokio::test]
    async fn a_failed_entry_fails_each_of_its_callers() {
        let g = Arc::new(GroupCommit::<SegmentAsk, Allocation>::new(MAX_SEGMENT_ASKS));
        let fail = |_asks: Vec<SegmentAsk>| async { Err(ProposeError::NotLeader { leader: Some(2) }) };
        let (a, b) = tokio::join!(g.join(ask("a"), fail), g.join(ask("b"), fail));
        for r in [a, b] {
            assert_eq!(r.unwrap_err(), ProposeError::NotLeader { leader: Some(2) });
        }
        let short = |_asks: Vec<SegmentAsk>| async { Ok(Vec::new()) };
        assert!(matches!(g.join(ask("a"), short).await, Err(ProposeError::Unavailable(_))));
    }
}
