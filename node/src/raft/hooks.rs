//! What the features add to the leader's execution of proposals, without `raft/` naming them.
//!
//! `lib.rs` builds the features' hooks and gives them to [`RaftNode::start`](super::RaftNode):
//! - a **stamp** amends every operation before it is logged (the audit trail's retention,
//!   [`crate::service::tag_admin`]);
//! - **groups** take the operations they commit together into shared entries (segment
//!   allocations, [`crate::allocation`]; gapless numbers, [`crate::gapless`]) and give back the
//!   others, which are logged alone;
//! - **served** answers the requests the leader serves from its own state rather than the log
//!   (monotonic takes, [`crate::profiles::monotonic`]).
//!
//! A new profile or feature adds a hook here from its own module; no file of `raft/` changes.
use std::sync::Arc;

use futures::future::BoxFuture;
use leaf_raft_store::{Applied, Op};
use tokio::time::Instant;

use super::ops::MonotonicTake;
use super::{ProposeError, RaftNode};

/// Amends an operation before the leader logs it.
pub type Stamp = Arc<dyn Fn(&mut Op) + Send + Sync>;

/// Commits some kinds of operations in groups on the leader.
pub trait Grouping: Send + Sync + 'static {
    /// Takes `op` into a group with others of its kind, answering it from the group's entry,
    /// or gives it back (`Err`) to be logged alone. Called on the leader only, with `op` in
    /// the form the cluster's version reads.
    #[allow(clippy::result_large_err)]
    fn join(&self, node: &RaftNode, op: Op) -> Result<BoxFuture<'static, Result<Applied, ProposeError>>, Op>;
}

/// Requests the leader answers from its own state.
pub trait Served: Send + Sync + 'static {
    /// `take.count` strictly increasing IDs of a monotonic tag, as this node leads.
    fn monotonic_take(
        &self,
        node: &RaftNode,
        take: MonotonicTake,
        deadline: Instant,
    ) -> BoxFuture<'static, Result<i64, ProposeError>>;
}

/// The hooks of one node (none: every operation logged alone, as proposed).
#[derive(Clone, Default)]
pub struct LeaderHooks {
    pub stamp: Option<Stamp>,
    pub groups: Vec<Arc<dyn Grouping>>,
    pub served: Option<Arc<dyn Served>>,
}
