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
//!   the take* ([`super::coalesce`]) was acknowledged by a quorum, with the term still `T`
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
//! **Cost.** Every take (one per group of concurrent callers) costs a quorum round trip, and
//! every `step` IDs a Raft commit; only the leader serves. This profile is leader-bound by
//! design (BENCHMARKS.md).
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use leaf_api::profile::Profile;
use leaf_raft_store::{ApplyError, Op};
use openraft::ServerState;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::answer::AnswerError;
use super::group_commit::{GroupCommit, GroupResult};
use super::leader::LeaderOp;
use super::ops::{ForwardOp, OpKind, Propose};
use super::{ProposeError, RaftNode};

/// Take `count` consecutive IDs of a monotonic tag; the leader answers the first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonotonicTake {
    pub tag: String,
    pub count: u32,
}

impl ForwardOp for MonotonicTake {
    /// The first ID: the IDs are `[first, first + count)`.
    type Reply = i64;
    const KIND: OpKind = OpKind::MonotonicTake;
}

/// The window of one tag on the leader: IDs `[next, end)` of an allocation committed in
/// `term`.
#[derive(Debug, Default)]
struct Window {
    term: u64,
    next: i64,
    end: i64,
}

/// The windows of the monotonic tags this node has served as leader (bounded by the number of
/// tags, which the state bounds).
#[derive(Default)]
pub(crate) struct Windows {
    tags: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Window>>>>,
}

impl Windows {
    fn of(&self, tag: &str) -> Arc<tokio::sync::Mutex<Window>> {
        let mut tags = self.tags.lock().unwrap_or_else(|e| e.into_inner());
        tags.entry(tag.to_string()).or_default().clone()
    }
}

/// Callers in one take at most: their counts (each at most 1,000,000, the largest request)
/// then add up to less than `u32::MAX`.
const MAX_TAKERS: usize = 1024;

/// This node's callers of each monotonic tag, grouped into shared takes (bounded by the number
/// of tags, which the state bounds).
#[derive(Default)]
pub(crate) struct Takers {
    tags: Mutex<HashMap<String, Arc<GroupCommit<u32, i64>>>>,
}

impl Takers {
    fn of(&self, tag: &str) -> Arc<GroupCommit<u32, i64>> {
        let mut tags = self.tags.lock().unwrap_or_else(|e| e.into_inner());
        tags.entry(tag.to_string()).or_insert_with(|| Arc::new(GroupCommit::new(MAX_TAKERS))).clone()
    }
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

impl RaftNode {
    /// `count` strictly increasing IDs of the monotonic tag `tag`, from the leader: the first
    /// of `[first, first + count)`. Taken in one go with the other callers of this node
    /// waiting for the same tag ([`Takers`]).
    pub async fn monotonic_take(&self, tag: String, count: u32) -> Result<i64, ProposeError> {
        let group = self.takers.of(&tag);
        let me = self.clone();
        let take = move |counts: Vec<u32>| {
            let (me, tag) = (me.clone(), tag.clone());
            async move { me.take_for(tag, counts).await }
        };
        Ok(group.join(count, take).await??)
    }

    /// One take of `sum(counts)` IDs of `tag`, split into one run per count in order. A group
    /// that a tag's upper bound cuts short is taken again one caller at a time, so each gets
    /// what it alone would have.
    async fn take_for(&self, tag: String, counts: Vec<u32>) -> GroupResult<i64> {
        let total = counts.iter().try_fold(0u32, |sum, &c| sum.checked_add(c));
        let Some(total) = total else {
            return Err(ProposeError::Unavailable(format!("{} monotonic takes add up to more than u32", counts.len())));
        };
        match self.on_leader(&MonotonicTake { tag: tag.clone(), count: total }).await {
            Ok(first) => Ok(runs_from(first, &counts)),
            Err(ProposeError::Rejected(e @ ApplyError::UpperBoundReached { .. })) if counts.len() > 1 => {
                tracing::debug!(tag, error = %e, callers = counts.len(), "a grouped monotonic take was cut short");
                let mut out = Vec::with_capacity(counts.len());
                for count in counts {
                    out.push(match self.on_leader(&MonotonicTake { tag: tag.clone(), count }).await {
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

    /// The term this node leads in, if it leads.
    fn leading_term(&self) -> Option<u64> {
        let m = self.raft.metrics();
        let m = m.borrow();
        (m.state == ServerState::Leader && m.current_leader == Some(self.node_id)).then_some(m.current_term)
    }

    fn not_leader(&self) -> ProposeError {
        ProposeError::NotLeader { leader: self.raft.metrics().borrow().current_leader }
    }
}

impl LeaderOp for MonotonicTake {
    fn retry_unknown(&self) -> bool {
        // A repeated take skips the IDs of the first (nobody received them): order holds.
        true
    }

    fn check(&self, first: &i64) -> Result<(), AnswerError> {
        if *first < 0 || first.checked_add(i64::from(self.count)).is_none() {
            return Err(AnswerError::Invalid(format!("{} monotonic IDs from {first}", self.count)));
        }
        Ok(())
    }

    async fn execute(self, node: &RaftNode, deadline: Instant) -> Result<i64, ProposeError> {
        let term = node.leading_term().ok_or_else(|| node.not_leader())?;
        let record = node
            .state
            .tag(&self.tag)
            .ok_or_else(|| ProposeError::Rejected(ApplyError::TagNotFound(self.tag.clone())))?;
        if record.archived_ms().is_some() {
            return Err(ProposeError::Rejected(ApplyError::TagArchived(self.tag.clone())));
        }
        if record.profile().kind() != Profile::Monotonic {
            return Err(ProposeError::Rejected(ApplyError::Invalid(format!(
                "tag {:?} has the {} profile, not monotonic",
                self.tag,
                record.profile().kind().as_str()
            ))));
        }
        let count = i64::from(self.count);
        let window = node.monotonic.of(&self.tag);
        let first = {
            let mut w = tokio::time::timeout_at(deadline, window.lock())
                .await
                .map_err(|_| ProposeError::Timeout(node.propose_timeout))?;
            if w.term != term || w.end - w.next < count {
                // A window of this term, committed by this node as leader: never forwarded.
                let op =
                    Op::AllocateSegment { tag: self.tag.clone(), step: record.step.max(count), node_id: node.node_id };
                let applied = Propose { op: op.clone() }.execute(node, deadline).await?;
                use super::answer::Answer;
                leaf_raft_store::Allocation::check(&op, &applied)
                    .map_err(|why| node.refuse_answer(&why, &op, Some(&applied)))?;
                let a =
                    leaf_raft_store::Allocation::take(applied).map_err(|why| node.refuse_answer(&why, &op, None))?;
                if node.leading_term() != Some(term) {
                    return Err(node.not_leader());
                }
                if a.end - a.start < count {
                    // The tag's upper bound cut the window short: fewer IDs left than asked.
                    return Err(ProposeError::Rejected(ApplyError::UpperBoundReached {
                        tag: self.tag.clone(),
                        upper_bound: record.upper_bound().unwrap_or(i64::MAX - 1),
                    }));
                }
                *w = Window { term, next: a.start, end: a.end };
            }
            let first = w.next;
            w.next += count;
            first
        };
        // Leadership confirmed by a round that started after the take, in the same term.
        let raft = node.raft.clone();
        let round = move || {
            let raft = raft.clone();
            async move {
                raft.get_read_log_id()
                    .await
                    .map(|(read, _)| read.map(|l| l.index))
                    .map_err(|e| ProposeError::Unavailable(e.to_string()))
            }
        };
        match tokio::time::timeout_at(deadline, node.leader_reads.read(round)).await {
            Err(_) => return Err(ProposeError::Timeout(node.propose_timeout)),
            Ok(r) => r?,
        };
        if node.leading_term() != Some(term) {
            return Err(node.not_leader());
        }
        Ok(first)
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
