//! The leader's group commit of segment allocations ([`crate::group_commit`]): a flood of
//! first requests for cold tags (each an allocation) commits one [`Op::AllocateSegments`]
//! entry per group, not one entry per tag. A lone allocation is still an
//! [`Op::AllocateSegment`], so a quiet cluster writes what earlier releases wrote. Each
//! allocation of a group is applied as if alone ([`leaf_raft_store::apply`]): a refused one (an
//! exhausted tag) fails only its own caller.
use std::sync::Arc;

use futures::future::BoxFuture;
use leaf_raft_store::{Allocation, Applied, ApplyError, Op, SegmentAsk, MAX_SEGMENT_ASKS};

use crate::group_commit::{GroupCommit, GroupResult};
use crate::raft::hooks::Grouping;
use crate::raft::{ProposeError, RaftNode};

/// Told of a tag whose allocation found no block left (a region's tag between blocks), or no
/// home known (a region's daily or obfuscated tag before its leader claimed its home).
pub type OnNoBlock = Arc<dyn Fn(&str) + Send + Sync>;

/// The allocations this node commits as leader, grouped into shared entries.
pub struct Segments {
    groups: Arc<GroupCommit<SegmentAsk, Allocation>>,
    /// Set on a region's node (`[region]`): told of each tag refused for want of a block, and
    /// every allocation refused until the cluster adopted its region.
    on_no_block: Option<OnNoBlock>,
    /// Set on a region's node: told of each tag refused because its home is not known here.
    on_homeless: Option<OnNoBlock>,
}

impl Default for Segments {
    fn default() -> Self {
        Segments { groups: Arc::new(GroupCommit::new(MAX_SEGMENT_ASKS)), on_no_block: None, on_homeless: None }
    }
}

impl Segments {
    /// The allocations of a region's node: refused (503, as a tag between blocks) until the
    /// cluster adopted its region, since before that its tags' counters are its own and may
    /// lie in another region's blocks; then cut from blocks by `apply`, telling `f` of each
    /// tag refused for want of one, so that the leader asks the global tier at once
    /// ([`crate::regions`]), and `homeless` of each daily or obfuscated tag refused because its
    /// home is not known here, so that the leader claims it.
    pub fn in_region(f: OnNoBlock, homeless: OnNoBlock) -> Self {
        Segments { on_no_block: Some(f), on_homeless: Some(homeless), ..Segments::default() }
    }
}

impl Grouping for Segments {
    fn join(&self, node: &RaftNode, op: Op) -> Result<BoxFuture<'static, Result<Applied, ProposeError>>, Op> {
        let Op::AllocateSegment { tag, step, node_id } = op else {
            return Err(op);
        };
        let ask = SegmentAsk { tag, step, node_id };
        // Checked alone before it joins a group: a malformed one (a peer's forwarded request
        // skipped this node's HTTP checks) must not fail the others with it.
        let alone = Op::AllocateSegment { tag: ask.tag.clone(), step, node_id };
        if let Err(e) = node.check_here(alone) {
            return Ok(Box::pin(async move { Err(e) }));
        }
        if let (Some(tell), false) = (&self.on_no_block, node.state().is_region()) {
            tell(&ask.tag);
            let refused = ProposeError::Rejected(ApplyError::NoBlock(ask.tag));
            return Ok(Box::pin(async move { Err(refused) }));
        }
        let (groups, node) = (self.groups.clone(), node.clone());
        let (no_block, homeless) = (self.on_no_block.clone(), self.on_homeless.clone());
        Ok(Box::pin(async move {
            let tag = no_block.as_ref().map(|_| ask.tag.clone());
            let answer = groups.join(ask, committer(node)).await?;
            let told = match &answer {
                Err(ApplyError::NoBlock(_)) => no_block,
                Err(ApplyError::HomeUnknown(_)) => homeless,
                _ => None,
            };
            if let (Some(tell), Some(tag)) = (told, tag) {
                tell(&tag);
            }
            Ok(Applied::Segment(answer?))
        }))
    }
}

/// Commits a group of allocations as one entry: a lone one as the `AllocateSegment` every
/// release applies, more as `AllocateSegments`.
fn committer(
    node: RaftNode,
) -> impl Fn(Vec<SegmentAsk>) -> BoxFuture<'static, GroupResult<Allocation>> + Send + Sync + 'static {
    move |mut asks: Vec<SegmentAsk>| {
        let node = node.clone();
        Box::pin(async move {
            let n = asks.len();
            let op = match n {
                1 => {
                    let SegmentAsk { tag, step, node_id } = asks.remove(0);
                    Op::AllocateSegment { tag, step, node_id }
                }
                _ => Op::AllocateSegments { asks },
            };
            match node.write_here(op).await {
                Ok(Applied::Segment(a)) => Ok(vec![Ok(a)]),
                Ok(Applied::Segments(results)) => Ok(results),
                // The entry refused whole (the same answer on every node): each ask with it.
                Err(ProposeError::Rejected(e)) => Ok(vec![Err(e); n]),
                Err(e) => Err(e),
                Ok(other) => Err(ProposeError::Unavailable(format!("an allocation was answered {other:?}"))),
            }
        })
    }
}
