//! Strictly increasing IDs for `monotonic` tags: the leader serves them from a window of the
//! tag's counter committed through Raft ahead of use (PD's TSO window), and confirms its
//! leadership with a quorum before answering. Followers forward ([`MonotonicTake`]).
//!
//! **Guarantee.** If one request completed before another was sent (anywhere in the cluster),
//! the later one's IDs are all larger. Why:
//! - A window is an `AllocateSegment` entry the leader proposed and saw committed in its own
//!   term `T`; it is used only while the node still leads in `T`. Windows are allocated in log
//!   order, so a window committed later (by any leader) lies wholly above every earlier one.
//! - Within a window, IDs are taken in order under the window's lock.
//! - An ID taken in term `T` is returned only after a leadership round that *started after
//!   the take* ([`RaftNode::leader_read_index`]) was acknowledged by a quorum, with the term still `T`
//!   before the take and after the round. A newer leader serves only from a window committed in
//!   its higher term, and once a quorum has seen that term no quorum acknowledges `T` again: a
//!   deposed leader cannot hand out a smaller ID after the new one has handed out a larger one.
//!   It fails instead (`unavailable`), and the client retries.
//! - A new leader never reuses a window of an earlier term (its own included): it commits a
//!   fresh one, above the committed bound. IDs of abandoned windows are skipped, never served.
//!
//! **Grouped like a timestamp oracle.** A node's callers waiting for IDs of one tag are served
//! together ([`Takers`]): the first caller's take goes out alone; the callers that arrive while
//! it is in flight wait, and the next take asks for all of their IDs at once (one forwarded
//! call from a follower, one window take and one quorum round on the leader) and hands each
//! caller its own run of the answer, in arrival order. The guarantee holds for every caller:
//! a caller joins only a take that starts after it arrived, so a request sent after another
//! completed is in a later take than that one's, and a later take's IDs are all larger.
//!
//! **In a region** the tag is served only at its home, while the region's lease of its homes
//! runs ([`HomeGate`], `crate::regions::lease`). A window belongs to the home's epoch it was
//! cut in, and an ID leaves only if, after the quorum round, the lease still runs and the home
//! is still here at that epoch: the region's leader adopts a move away before it extends its
//! lease, so an old home stops before the new one starts. A window that a block's end cut
//! short is left as a gap, and the next one comes from the next block.
//!
//! **Cost.** Every take (one per group of concurrent callers) costs a quorum round trip, and
//! every `step` IDs a Raft commit; only the leader serves. This profile is leader-bound by
//! design (BENCHMARKS.md).
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use leaf_api::profile::Profile;
use leaf_raft_store::{Allocation, ApplyError, Op, StateReader};
use tokio::time::Instant;

use crate::group_commit::{GroupCommit, GroupResult};
use crate::raft::answer::Answer;
use crate::raft::hooks::Served;
use crate::raft::ops::MonotonicTake;
use crate::raft::{ProposeError, RaftNode};

/// The window of one tag on the leader: IDs `[next, end)` of an allocation committed in
/// `term`, in a region while the tag's home was here at `epoch`.
#[derive(Debug, Default)]
struct Window {
    term: u64,
    epoch: Option<u32>,
    next: i64,
    end: i64,
}

/// What a region adds to a take: the tag is served only at its home, while the region's lease
/// of its homes runs (`crate::regions::lease` implements it).
pub trait HomeGate: Send + Sync {
    /// The epoch of `tag`'s home if this region may serve it now: the lease runs (read first)
    /// and the home is here. Otherwise why not; the region's leader is told to claim, renew or
    /// learn the home.
    fn serving(&self, state: &StateReader, tag: &str) -> Result<u32, ProposeError>;
    /// `tag`'s allocation found no block: the region's leader is told to ask for one.
    fn no_block(&self, tag: &str);
}

/// Windows cut in a row before a take gives up, when blocks' ends cut each one short.
const MAX_CUTS: usize = 3;

/// Callers in one take at most: their counts (each at most 1,000,000, the largest request)
/// then add up to less than `u32::MAX`.
const MAX_TAKERS: usize = 1024;

/// One node's monotonic tags: the windows it serves from as leader, and its own callers,
/// grouped into shared takes (both bounded by the number of tags, which the state bounds).
#[derive(Default)]
pub struct Monotonic {
    windows: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Window>>>>,
    takers: Mutex<HashMap<String, Arc<GroupCommit<u32, i64>>>>,
    /// In a region: where and while the tags may be served.
    gate: Option<Arc<dyn HomeGate>>,
}

/// The first ID of each caller's run, for runs of `counts` laid end to end from `first`.
fn runs_from(first: i64, counts: &[u32]) -> Vec<Result<i64, ApplyError>> {
    let mut next = first;
    counts
        .iter()
        .map(|&c| {
            let at = next;
            next = next.saturating_add(i64::from(c));
            Ok(at)
        })
        .collect()
}

impl Monotonic {
    /// A region's: each tag served only as `gate` allows.
    pub fn in_region(gate: Arc<dyn HomeGate>) -> Self {
        Monotonic { gate: Some(gate), ..Monotonic::default() }
    }

    /// The home's epoch if the tag may be served here now (`None` outside a region).
    fn serving(&self, node: &RaftNode, tag: &str) -> Result<Option<u32>, ProposeError> {
        self.gate.as_ref().map(|g| g.serving(node.state(), tag)).transpose()
    }

    fn window(&self, tag: &str) -> Arc<tokio::sync::Mutex<Window>> {
        let mut tags = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        tags.entry(tag.to_string()).or_default().clone()
    }

    fn takers(&self, tag: &str) -> Arc<GroupCommit<u32, i64>> {
        let mut tags = self.takers.lock().unwrap_or_else(|e| e.into_inner());
        tags.entry(tag.to_string()).or_insert_with(|| Arc::new(GroupCommit::new(MAX_TAKERS))).clone()
    }

    /// `count` strictly increasing IDs of the monotonic tag `tag`, from the leader: the first
    /// of `[first, first + count)`. Taken in one go with the other callers of this node
    /// waiting for the same tag.
    pub async fn take(&self, raft: &RaftNode, tag: String, count: u32) -> Result<i64, ProposeError> {
        let group = self.takers(&tag);
        let raft = raft.clone();
        let take = move |counts: Vec<u32>| {
            let (raft, tag) = (raft.clone(), tag.clone());
            async move { take_for(&raft, tag, counts).await }
        };
        Ok(group.join(count, take).await??)
    }

    /// Serves a take as the leader in `term`, from the tag's window.
    async fn serve(&self, node: &RaftNode, take: MonotonicTake, deadline: Instant) -> Result<i64, ProposeError> {
        let term = node.leading_term().ok_or_else(|| node.not_leader())?;
        let record = node
            .state()
            .tag(&take.tag)
            .ok_or_else(|| ProposeError::Rejected(ApplyError::TagNotFound(take.tag.clone())))?;
        if record.archived_ms().is_some() {
            return Err(ProposeError::Rejected(ApplyError::TagArchived(take.tag.clone())));
        }
        if record.profile().kind() != Profile::Monotonic {
            return Err(ProposeError::Rejected(ApplyError::Invalid(format!(
                "tag {:?} has the {} profile, not monotonic",
                take.tag,
                record.profile().kind().as_str()
            ))));
        }
        let count = i64::from(take.count);
        // Read before the window is cut: a window is never labelled with a later epoch than
        // the one it was cut in.
        let epoch = self.serving(node, &take.tag)?;
        let window = self.window(&take.tag);
        let first = {
            let mut w = tokio::time::timeout_at(deadline, window.lock())
                .await
                .map_err(|_| ProposeError::Timeout(node.propose_timeout()))?;
            if w.term != term || w.epoch != epoch || w.end - w.next < count {
                let a = self.cut(node, (&take.tag, &record), count, (term, deadline)).await?;
                *w = Window { term, epoch, next: a.start, end: a.end };
            }
            let first = w.next;
            w.next += count;
            first
        };
        // Leadership confirmed by a round that started after the take, in the same term.
        node.leader_read_index(deadline).await?;
        if node.leading_term() != Some(term) {
            return Err(node.not_leader());
        }
        // In a region: the lease still runs and the home is still here, at the window's epoch.
        if self.serving(node, &take.tag)? != epoch {
            return Err(ProposeError::Unavailable(format!(
                "the home of tag {:?} changed during the take: ask again",
                take.tag
            )));
        }
        Ok(first)
    }

    /// A window of at least `count` IDs of `tag`, committed by this node as leader in `term`
    /// (never forwarded). In a region a block's end may cut a window short: its IDs are left
    /// as a gap and the next window comes from the next block.
    async fn cut(
        &self,
        node: &RaftNode,
        (tag, record): (&str, &leaf_raft_store::TagRecord),
        count: i64,
        (term, deadline): (u64, Instant),
    ) -> Result<Allocation, ProposeError> {
        for _ in 0..MAX_CUTS {
            let op =
                Op::AllocateSegment { tag: tag.to_string(), step: record.step.max(count), node_id: node.node_id() };
            let applied = match node.execute_here(op.clone(), deadline).await {
                Err(ProposeError::Rejected(e @ ApplyError::NoBlock(_))) => {
                    if let Some(g) = &self.gate {
                        g.no_block(tag);
                    }
                    return Err(ProposeError::Rejected(e));
                }
                other => other?,
            };
            Allocation::check(&op, &applied).map_err(|why| node.refuse_answer(&why, &op, Some(&applied)))?;
            let a = Allocation::take(applied).map_err(|why| node.refuse_answer(&why, &op, None))?;
            if node.leading_term() != Some(term) {
                return Err(node.not_leader());
            }
            if a.end - a.start >= count {
                return Ok(a);
            }
            let bounded = record.upper_bound().is_some_and(|ub| a.end > ub);
            if self.gate.is_none() || bounded {
                // The tag's upper bound cut the window short: fewer IDs left than asked.
                return Err(ProposeError::Rejected(ApplyError::UpperBoundReached {
                    tag: tag.to_string(),
                    upper_bound: record.upper_bound().unwrap_or(i64::MAX - 1),
                }));
            }
            tracing::debug!(tag, start = a.start, end = a.end, count, "a block's end cut a monotonic window short");
        }
        Err(ProposeError::Unavailable(format!(
            "{count} IDs of tag {tag:?} do not fit in this region's blocks, {MAX_CUTS} windows in a row: ask for fewer"
        )))
    }
}

impl Served for Arc<Monotonic> {
    fn monotonic_take(
        &self,
        node: &RaftNode,
        take: MonotonicTake,
        deadline: Instant,
    ) -> BoxFuture<'static, Result<i64, ProposeError>> {
        let (me, node) = (self.clone(), node.clone());
        Box::pin(async move { me.serve(&node, take, deadline).await })
    }
}

/// One take of `sum(counts)` IDs of `tag`, split into one run per count in order. A group that
/// a tag's upper bound cuts short is taken again one caller at a time, so each gets what it
/// alone would have.
async fn take_for(raft: &RaftNode, tag: String, counts: Vec<u32>) -> GroupResult<i64> {
    let total = counts.iter().try_fold(0u32, |sum, &c| sum.checked_add(c));
    let Some(total) = total else {
        return Err(ProposeError::Unavailable(format!("{} monotonic takes add up to more than u32", counts.len())));
    };
    match raft.on_leader(&MonotonicTake { tag: tag.clone(), count: total }).await {
        Ok(first) => Ok(runs_from(first, &counts)),
        Err(ProposeError::Rejected(e @ ApplyError::UpperBoundReached { .. })) if counts.len() > 1 => {
            tracing::debug!(tag, error = %e, callers = counts.len(), "a grouped monotonic take was cut short");
            let mut out = Vec::with_capacity(counts.len());
            for count in counts {
                out.push(match raft.on_leader(&MonotonicTake { tag: tag.clone(), count }).await {
                    Ok(first) => Ok(first),
                    Err(ProposeError::Rejected(e)) => Err(e),
                    Err(e) => return Err(e),
                });
            }
            Ok(out)
        }
        Err(ProposeError::Rejected(e)) => Ok(counts.iter().map(|_| Err(e.clone())).collect()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grouped_take_is_split_into_runs_end_to_end_in_arrival_order() {
        let firsts: Vec<i64> = runs_from(100, &[1, 3, 1_000_000, 2]).into_iter().map(|r| r.unwrap()).collect();
        assert_eq!(firsts, vec![100, 101, 104, 1_000_104]);
        assert!(runs_from(7, &[]).is_empty());
        // The largest group fits the forwarded count.
        assert!(u32::try_from(MAX_TAKERS as u64 * 1_000_000).is_ok());
    }
}
