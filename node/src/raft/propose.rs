//! What callers ask of the leader: typed proposals (each returns its own kind of result, so no
//! caller matches on the state machine's [`leaf_raft_store::Applied`]) and the linearizable read
//! barrier. Admin changes carry who asked for them ([`Actor`]) into the audit trail.
use leaf_api::audit::{Actor, AuditAction};
pub use leaf_raft_store::NewTag;
use leaf_raft_store::{
    Allocation, ApplyError, Issued, NumberAct, NumberAsk, NumberRules, Op, OwnedAsk, TagCap, TagRecord,
};
use tokio::time::Instant;

use super::answer::{Answer, CreatedTags};
use super::ops::{Propose, ReadIndex};
use super::{ProposeError, RaftNode};

impl RaftNode {
    /// `op` as an admin change by `actor`, with this node's audit retention (the leader puts
    /// its own in).
    pub(crate) fn admin(&self, actor: Actor, op: Op) -> Op {
        Op::admin(actor, self.audit_retention, op)
    }

    /// Creates a tag. Not retried once the first attempt may have been delivered (a repeat
    /// would answer `tag_exists`). Under [`TagCap::Legacy`] (logged in the forms every release
    /// applies) until the state holds [`leaf_raft_store::LEGACY_MAX_TAGS`] tags, then
    /// [`TagCap::Full`].
    pub async fn create_tag(&self, new: NewTag, actor: Actor) -> Result<TagRecord, ProposeError> {
        let name = new.tag.clone();
        let cap =
            if self.state.tag_count() >= leaf_raft_store::LEGACY_MAX_TAGS { TagCap::Full } else { TagCap::Legacy };
        let record = self.propose(self.admin(actor, Op::CreateTag { tag: new, cap })).await?;
        self.seen_here(name).await;
        Ok(record)
    }

    /// Creates the tags of `batch` that do not exist yet, in one entry (the caller keeps it
    /// under [`leaf_raft_store::MAX_BATCH_COMMAND_BYTES`]). Retried across leader changes: a
    /// repeat answers the tags an earlier delivery created as existing.
    pub async fn create_tags(&self, batch: Vec<NewTag>, actor: Actor) -> Result<CreatedTags, ProposeError> {
        let last = batch.last().map(|t| t.tag.clone());
        let created: CreatedTags = self.propose(self.admin(actor, Op::CreateTags { tags: batch })).await?;
        if let Some(last) = last {
            // One entry, applied whole: its last tag seen means all of them are.
            self.seen_here(last).await;
        }
        Ok(created)
    }

    /// Waits (up to the propose timeout) until this node has applied the committed creation
    /// of `tag`, so the node that answers a create knows the tag at once: a client that keeps
    /// calling the node that answered it reads its own write, although a node caught up with
    /// its leader answers a miss from its own state ([`super::caught_up`]). Waits on the
    /// applied-state notifications, never with a leader round; a timeout is logged, not
    /// failed (the create is committed).
    pub async fn seen_here(&self, tag: String) {
        if self.state.tag(&tag).is_some() {
            return;
        }
        let state = self.state.clone();
        let seen = self
            .raft
            .wait(Some(self.propose_timeout))
            .metrics(move |_| state.tag(&tag).is_some(), "the created tag applied here")
            .await;
        if let Err(e) = seen {
            tracing::warn!(error = %e, "a created tag was not applied on this node within the propose timeout");
        }
    }

    /// Changes `tag`'s stored step and/or description.
    pub async fn update_tag(
        &self,
        tag: String,
        step: Option<i64>,
        description: Option<String>,
        actor: Actor,
    ) -> Result<TagRecord, ProposeError> {
        self.propose(self.admin(actor, Op::UpdateTag { tag, step, description })).await
    }

    /// Sets gapless series `tag`'s limits.
    pub async fn set_series_limits(
        &self,
        tag: String,
        limits: leaf_api::gapless::SeriesLimits,
        actor: Actor,
    ) -> Result<leaf_api::gapless::SeriesLimits, ProposeError> {
        self.propose(self.admin(actor, Op::SetSeriesLimits { tag, limits })).await
    }

    /// Archives `tag`: it allocates nothing more and its name is never reused.
    pub async fn archive_tag(&self, tag: String, actor: Actor) -> Result<TagRecord, ProposeError> {
        self.propose(self.admin(actor, Op::ArchiveTag { tag })).await
    }

    /// Brings an archived `tag` back, its counter where it stopped.
    pub async fn restore_tag(&self, tag: String, actor: Actor) -> Result<TagRecord, ProposeError> {
        self.propose(self.admin(actor, Op::RestoreTag { tag })).await
    }

    /// Records in the audit trail what changed no replicated state: a membership change made
    /// through openraft, an obfuscated decode, a clock fault.
    pub async fn note(&self, action: AuditAction, actor: Actor) -> Result<(), ProposeError> {
        self.propose(self.admin(actor, Op::NoteMembership(action))).await
    }

    /// The number of gapless series `ask.tag` for `ask.key`: the next one, committed before
    /// this returns, or the one the key has (a retry). This node's concurrent issues go to the
    /// leader together, as one owned `IssueNumbers` of several asks (one forwarded call, one entry);
    /// a lone one goes alone and the leader groups it with others. Safe to repeat: the router
    /// retries a group across leader changes, and each key keeps it to one number.
    pub async fn issue_number(&self, ask: OwnedAsk) -> Result<Issued, ProposeError> {
        let me = self.clone();
        let send = move |asks: Vec<OwnedAsk>| {
            let me = me.clone();
            async move {
                // `Answer::check` made it one result per ask, in order.
                let results: Vec<Result<Issued, ApplyError>> =
                    me.propose(Op::IssueNumbers { asks, rules: NumberRules::Owned }).await?;
                Ok(results)
            }
        };
        Ok(self.sent_numbers.join(ask, send).await??)
    }

    /// Voids the reservations `due` (tag, key) as this node, the leader ([`NumberAct::Lapse`]),
    /// in one entry of at most [`leaf_raft_store::MAX_NUMBER_ASKS`]: apply refuses any that is
    /// not due at the entry's time, so a stale list is harmless. Nothing when this node is not
    /// the leader (the leader's own task does it).
    pub async fn lapse_reservations(
        &self,
        due: Vec<(String, String)>,
    ) -> Result<Vec<Result<Issued, ApplyError>>, ProposeError> {
        let leader = self.raft.metrics().borrow().state == openraft::ServerState::Leader;
        if !leader || due.is_empty() {
            return Ok(Vec::new());
        }
        let actor = Actor::Node { id: self.node_id };
        let asks = due
            .into_iter()
            .take(leaf_raft_store::MAX_NUMBER_ASKS)
            .map(|(tag, key)| OwnedAsk {
                ask: NumberAsk { tag, key, actor: actor.clone(), act: NumberAct::Lapse },
                proof: None,
            })
            .collect();
        self.propose(Op::IssueNumbers { asks, rules: NumberRules::Owned }).await
    }

    /// Reserves the next `step` IDs of `tag` for this node: a non-empty range of exactly `step`.
    pub async fn allocate(&self, tag: String, step: i64) -> Result<Allocation, ProposeError> {
        self.propose(Op::AllocateSegment { tag, step, node_id: self.node_id }).await
    }

    /// Commits `op` through the leader (this node or, forwarded, another) and returns its
    /// checked, typed result. The leader stamps its clock into the command. Retried across
    /// leader changes until `raft.propose_timeout_ms`.
    pub(crate) async fn propose<R: Answer>(&self, op: Op) -> Result<R, ProposeError> {
        // An operation newer than the cluster's version (as this node applied it) goes as it is
        // to a leader that reads it, which chooses its form by its own state; to a leader of an
        // earlier release, only in a form that release reads ([`leaf_raft_store::version::form`]).
        let active = self.state.cluster_version();
        let op = if op.version() > active && self.leader_supports(op.version()).await {
            op
        } else {
            leaf_raft_store::version::form(op, active)?
        };
        let req = Propose { op };
        let applied = self.on_leader(&req).await?;
        // The result checked against what was asked, by the type that answers it.
        R::check(req.op.inner(), &applied).map_err(|why| self.refuse_answer(&why, &req, Some(&applied)))?;
        // After that check, a mismatch here is a bug.
        R::take(applied).map_err(|why| self.refuse_answer(&why, &req, None))
    }

    /// Waits until this node has applied everything committed before the call (a
    /// linearizable read barrier through the leader's read index): a tag created on any node
    /// is visible here afterwards. Writes nothing to the log.
    pub async fn read_barrier(&self) -> Result<(), ProposeError> {
        let deadline = self.deadline();
        let me = self.clone();
        let round = move || {
            let me = me.clone();
            async move { me.on_leader(&ReadIndex).await }
        };
        let index = match tokio::time::timeout_at(deadline, self.barriers.read(round)).await {
            Ok(r) => r?,
            Err(_) => return Err(ProposeError::Timeout(self.propose_timeout)),
        };
        if self.state.last_applied().map(|l| l.index) >= index {
            return Ok(());
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        self.raft
            .wait(Some(wait))
            .applied_index_at_least(index, "read index")
            .await
            .map_err(|_| ProposeError::Timeout(self.propose_timeout))?;
        Ok(())
    }
}
