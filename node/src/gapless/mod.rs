//! Gapless numbers through Raft: how an issue (or a reservation's confirm, void or lapse)
//! becomes a committed number of its series (the series' rules are `leaf_raft_store::gapless`;
//! the operations clients call, `crate::service::gapless`).
//!
//! Layout:
//! - this file: [`Numbers`], which sends this node's issues to the leader in groups, voids
//!   the reservations that are due, and, as the leader's hook ([`crate::raft::hooks`]), commits
//!   the issues it receives in groups: one series serves thousands of numbers a second from
//!   one commit per group, not one per number;
//! - [`answer`]: the check of the leader's answer (one number per ask, each consistent with
//!   what the ask did).
pub mod answer;

use std::sync::Arc;

use futures::future::BoxFuture;
use leaf_api::audit::Actor;
use leaf_raft_store::{Applied, ApplyError, Issued, NumberAct, NumberAsk, NumberRules, Op, OwnedAsk, MAX_NUMBER_ASKS};

use crate::allocation::group::OnNoBlock;
use crate::group_commit::{GroupCommit, GroupResult};
use crate::raft::hooks::Grouping;
use crate::raft::{ProposeError, RaftNode};

/// One node's gapless issues: its own callers' (sent to the leader in groups) and, when it
/// leads, everyone's (committed in groups).
pub struct Numbers {
    /// Told of each series a region's leader refused for want of its home (a region's node),
    /// so that the homes task claims or learns it ([`crate::regions`]).
    on_homeless: Option<OnNoBlock>,
    /// Issues of this node's own callers, sent to the leader in groups: one forwarded call
    /// (and one entry) per group rather than per number.
    sent: Arc<GroupCommit<OwnedAsk, Issued>>,
    /// Issues this node commits as leader, grouped into shared entries.
    committed: Arc<GroupCommit<OwnedAsk, Issued>>,
}

impl Default for Numbers {
    fn default() -> Self {
        Numbers {
            on_homeless: None,
            sent: Arc::new(GroupCommit::new(MAX_NUMBER_ASKS)),
            committed: Arc::new(GroupCommit::new(MAX_NUMBER_ASKS)),
        }
    }
}

impl Numbers {
    /// A region's node's: `f` is told of each series whose issue found its home unknown.
    pub fn in_region(f: OnNoBlock) -> Self {
        Numbers { on_homeless: Some(f), ..Numbers::default() }
    }

    /// The number of gapless series `ask.tag` for `ask.key`: the next one, committed before
    /// this returns, or the one the key has (a retry). This node's concurrent issues go to the
    /// leader together, as one owned `IssueNumbers` of several asks (one forwarded call, one
    /// entry); a lone one goes alone and the leader groups it with others. Safe to repeat: the
    /// router retries a group across leader changes, and each key keeps it to one number.
    pub async fn issue(&self, raft: &RaftNode, ask: OwnedAsk) -> Result<Issued, ProposeError> {
        let raft = raft.clone();
        let send = move |asks: Vec<OwnedAsk>| {
            let raft = raft.clone();
            async move {
                // `Answer::check` made it one result per ask, in order.
                let results: Vec<Result<Issued, ApplyError>> =
                    raft.propose(Op::IssueNumbers { asks, rules: NumberRules::Owned }).await?;
                Ok(results)
            }
        };
        Ok(self.sent.join(ask, send).await??)
    }
}

/// Voids the reservations `due` (tag, key) as `raft`'s node, the leader ([`NumberAct::Lapse`]),
/// in one entry of at most [`MAX_NUMBER_ASKS`]: apply refuses any that is not due at the
/// entry's time, so a stale list is harmless. Nothing when this node is not the leader (the
/// leader's own task does it).
pub async fn lapse(
    raft: &RaftNode,
    due: Vec<(String, String)>,
) -> Result<Vec<Result<Issued, ApplyError>>, ProposeError> {
    if !raft.is_leader() || due.is_empty() {
        return Ok(Vec::new());
    }
    let actor = Actor::Node { id: raft.node_id() };
    let asks = due
        .into_iter()
        .take(MAX_NUMBER_ASKS)
        .map(|(tag, key)| OwnedAsk {
            ask: NumberAsk { tag, key, actor: actor.clone(), act: NumberAct::Lapse },
            proof: None,
        })
        .collect();
    raft.propose(Op::IssueNumbers { asks, rules: NumberRules::Owned }).await
}

impl Grouping for Numbers {
    /// A lone owned issue joins the leader's group; a group sent by a node is logged as it is.
    fn join(&self, node: &RaftNode, op: Op) -> Result<BoxFuture<'static, Result<Applied, ProposeError>>, Op> {
        let ask = lone_owned_ask(op)?;
        // Checked alone first, as an allocation is.
        let alone = Op::IssueNumbers { asks: vec![ask.clone()], rules: NumberRules::Owned };
        if let Err(e) = node.check_here(alone) {
            return Ok(Box::pin(async move { Err(e) }));
        }
        let (committed, node, told) = (self.committed.clone(), node.clone(), self.on_homeless.clone());
        Ok(Box::pin(async move {
            let tag = told.as_ref().map(|_| ask.ask.tag.clone());
            let answer = committed.join(ask, committer(node)).await?;
            if let (Err(ApplyError::HomeUnknown(_)), Some(tell), Some(tag)) = (&answer, told, tag) {
                tell(&tag);
            }
            Ok(Applied::Numbers(vec![answer]))
        }))
    }
}

/// The ask of an owned `IssueNumbers` of exactly one ask, which the leader groups with
/// others; any other op back as it was (a node's own group, which is logged as it came, or an
/// op of another kind).
#[allow(clippy::result_large_err)]
fn lone_owned_ask(op: Op) -> Result<OwnedAsk, Op> {
    let Op::IssueNumbers { asks, rules: NumberRules::Owned } = op else {
        return Err(op);
    };
    <[OwnedAsk; 1]>::try_from(asks)
        .map(|[ask]| ask)
        .map_err(|asks| Op::IssueNumbers { asks, rules: NumberRules::Owned })
}

/// Commits a group of gapless issues as one owned `IssueNumbers` entry.
fn committer(
    node: RaftNode,
) -> impl Fn(Vec<OwnedAsk>) -> BoxFuture<'static, GroupResult<Issued>> + Send + Sync + 'static {
    move |asks: Vec<OwnedAsk>| {
        let node = node.clone();
        Box::pin(async move {
            let n = asks.len();
            match node.write_here(Op::IssueNumbers { asks, rules: NumberRules::Owned }).await {
                Ok(Applied::Numbers(results)) => Ok(results),
                Err(ProposeError::Rejected(e)) => Ok(vec![Err(e); n]),
                Err(e) => Err(e),
                Ok(other) => Err(ProposeError::Unavailable(format!("an issue of numbers was answered {other:?}"))),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(key: &str) -> OwnedAsk {
        let ask = NumberAsk { tag: "inv".into(), key: key.into(), actor: Actor::AdminToken, act: NumberAct::Issue };
        OwnedAsk { ask, proof: None }
    }

    /// The leader's hook takes only a lone owned issue; a node's group and every other op are
    /// given back unchanged, to be logged as they came.
    #[test]
    fn only_a_lone_owned_issue_joins_the_leaders_group() {
        assert_eq!(lone_owned_ask(Op::IssueNumbers { asks: vec![ask("a")], rules: NumberRules::Owned }), Ok(ask("a")));
        let given_back = [
            Op::IssueNumbers { asks: vec![ask("a"), ask("b")], rules: NumberRules::Owned },
            Op::IssueNumbers { asks: vec![], rules: NumberRules::Owned },
            Op::IssueNumbers { asks: vec![ask("a")], rules: NumberRules::Plain },
            Op::AllocateSegment { tag: "t".into(), step: 10, node_id: 1 },
        ];
        for op in given_back {
            assert_eq!(lone_owned_ask(op.clone()), Err(op));
        }
    }
}
