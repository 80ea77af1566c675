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
//! **Cost.** Every request (or batch of concurrent requests, which share rounds) costs a
//! quorum round trip, and every `step` IDs a Raft commit; only the leader serves. This profile
//! is leader-bound by design (BENCHMARKS.md).
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use leaf_api::profile::Profile;
use leaf_raft_store::{ApplyError, Op};
use openraft::ServerState;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::answer::AnswerError;
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

impl RaftNode {
    /// `count` strictly increasing IDs of the monotonic tag `tag`, from the leader: the first
    /// of `[first, first + count)`.
    pub async fn monotonic_take(&self, tag: String, count: u32) -> Result<i64, ProposeError> {
        self.on_leader(&MonotonicTake { tag, count }).await
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
                super::answer::check_applied(&op, &applied)
                    .map_err(|why| node.refuse_answer(&why, &op, Some(&applied)))?;
                let a = <leaf_raft_store::Allocation as super::answer::FromApplied>::from_applied(applied)
                    .map_err(|why| node.refuse_answer(&why, &op, None))?;
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
