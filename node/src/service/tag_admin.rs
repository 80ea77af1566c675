//! Admin changes through Raft: every one is an `Op::Admin` carrying who asked for it into the
//! audit trail, with the trail's retention stamped by whoever logs it ([`stamp`], a hook of
//! [`crate::raft::hooks`]). Here: the tag changes and the audit notes, and the checks of their
//! answers ([`crate::raft::answer`]); tokens and templates propose theirs beside their
//! operations.
use leaf_api::audit::{Actor, AuditAction, AuditRetention};
use leaf_api::gapless::SeriesLimits;
use leaf_api::tag::{validate_max_id, validate_step, validate_tag};
use leaf_raft_store::{Applied, NewTag, Op, TagCap, TagRecord};

use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};
use crate::raft::hooks::Stamp;
use crate::raft::{ProposeError, RaftNode};

/// `op` as an admin change by `actor`. Its retention is a placeholder until [`stamp`] (on the
/// proposer, then on the leader) puts the node's own in.
pub(crate) fn admin(actor: Actor, op: Op) -> Op {
    Op::admin(actor, leaf_raft_store::audit::DEFAULT_RETENTION, op)
}

/// Puts `retention` (`[audit]`) into every admin change: the leader's is the one in force,
/// whoever proposed the change.
pub(crate) fn stamp(retention: AuditRetention) -> Stamp {
    std::sync::Arc::new(move |op: &mut Op| {
        if let Op::Admin { retention: r, .. } = op {
            *r = retention;
        }
    })
}

/// Creates a tag. Not retried once the first attempt may have been delivered (a repeat would
/// answer `tag_exists`). Under [`TagCap::Legacy`] (logged in the forms every release applies)
/// until the state holds [`leaf_raft_store::LEGACY_MAX_TAGS`] tags, then [`TagCap::Full`].
pub async fn create_tag(raft: &RaftNode, new: NewTag, actor: Actor) -> Result<TagRecord, ProposeError> {
    let name = new.tag.clone();
    let cap = if raft.state().tag_count() >= leaf_raft_store::LEGACY_MAX_TAGS { TagCap::Full } else { TagCap::Legacy };
    let record = raft.propose(admin(actor, Op::CreateTag { tag: new, cap })).await?;
    seen_here(raft, name).await;
    Ok(record)
}

/// Creates the tags of `batch` that do not exist yet, in one entry (the caller keeps it under
/// [`leaf_raft_store::MAX_BATCH_COMMAND_BYTES`]). Retried across leader changes: a repeat
/// answers the tags an earlier delivery created as existing.
pub async fn create_tags(raft: &RaftNode, batch: Vec<NewTag>, actor: Actor) -> Result<CreatedTags, ProposeError> {
    let last = batch.last().map(|t| t.tag.clone());
    let created: CreatedTags = raft.propose(admin(actor, Op::CreateTags { tags: batch })).await?;
    if let Some(last) = last {
        // One entry, applied whole: its last tag seen means all of them are.
        seen_here(raft, last).await;
    }
    Ok(created)
}

/// Waits (up to the propose timeout) until `raft`'s node has applied the committed creation
/// of `tag`, so the node that answers a create knows the tag at once: a client that keeps
/// calling the node that answered it reads its own write, although a node caught up with its
/// leader answers a miss from its own state. A timeout is logged, not failed (the create is
/// committed).
pub async fn seen_here(raft: &RaftNode, tag: String) {
    if !raft.wait_applied("the created tag applied here", move |state| state.tag(&tag).is_some()).await {
        tracing::warn!("a created tag was not applied on this node within the propose timeout");
    }
}

/// Changes `tag`'s stored step and/or description.
pub async fn update_tag(
    raft: &RaftNode,
    tag: String,
    step: Option<i64>,
    description: Option<String>,
    actor: Actor,
) -> Result<TagRecord, ProposeError> {
    raft.propose(admin(actor, Op::UpdateTag { tag, step, description })).await
}

/// Sets gapless series `tag`'s limits.
pub async fn set_series_limits(
    raft: &RaftNode,
    tag: String,
    limits: SeriesLimits,
    actor: Actor,
) -> Result<SeriesLimits, ProposeError> {
    raft.propose(admin(actor, Op::SetSeriesLimits { tag, limits })).await
}

/// Archives `tag`: it allocates nothing more and its name is never reused.
pub async fn archive_tag(raft: &RaftNode, tag: String, actor: Actor) -> Result<TagRecord, ProposeError> {
    raft.propose(admin(actor, Op::ArchiveTag { tag })).await
}

/// Brings an archived `tag` back, its counter where it stopped.
pub async fn restore_tag(raft: &RaftNode, tag: String, actor: Actor) -> Result<TagRecord, ProposeError> {
    raft.propose(admin(actor, Op::RestoreTag { tag })).await
}

/// Records in the audit trail what changed no replicated state: a membership change made
/// through openraft, an obfuscated decode, a clock fault.
pub async fn note(raft: &RaftNode, action: AuditAction, actor: Actor) -> Result<(), ProposeError> {
    raft.propose(admin(actor, Op::NoteMembership(action))).await
}

/// What a batch of tag creations did: the names created and those that existed, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreatedTags {
    pub created: Vec<String>,
    pub existing: Vec<String>,
}

impl Answer for CreatedTags {
    const ASKED: &'static str = "a batch of tag creations";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::CreateTags { tags }, Applied::Tags { created, existing }) => {
                // Every name asked for, each once, as created or existing: nothing else.
                let asked: std::collections::BTreeSet<&str> = tags.iter().map(|t| t.tag.as_str()).collect();
                let mut seen = std::collections::BTreeSet::new();
                for name in created.iter().chain(existing) {
                    if !asked.contains(name.as_str()) || !seen.insert(name.as_str()) {
                        return Err(invalid(format!("batch answered tag {name:?} it did not ask for, or twice")));
                    }
                }
                if seen.len() != asked.len() {
                    return Err(invalid(format!("batch of {} tags answered for {}", asked.len(), seen.len())));
                }
                Ok(())
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Tags { created, existing } => Ok(CreatedTags { created, existing }),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

impl Answer for () {
    const ASKED: &'static str = "a membership note";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::NoteMembership(_), Applied::Nothing) => Ok(()),
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Nothing => Ok(()),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

impl Answer for TagRecord {
    const ASKED: &'static str = "a tag creation or update";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (
                Op::CreateTag { tag: NewTag { tag, .. }, .. }
                | Op::UpdateTag { tag, .. }
                | Op::ArchiveTag { tag }
                | Op::RestoreTag { tag },
                Applied::Tag { tag: got, record },
            ) => {
                if got != tag {
                    return Err(invalid(format!("result for tag {got:?}, asked for {tag:?}")));
                }
                validate_tag(got).map_err(|e| invalid(e.to_string()))?;
                validate_step(record.step).map_err(|e| invalid(e.to_string()))?;
                validate_max_id(record.max_id).map_err(|e| invalid(e.to_string()))
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Tag { record, .. } => Ok(record),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use leaf_raft_store::{Allocation, WorkerGrant};

    use super::*;

    #[test]
    fn tags_must_match_the_request() {
        let grant = |worker_id, lease_expires_ms| {
            Applied::Worker(WorkerGrant { worker_id, not_before_ms: 0, lease_expires_ms })
        };
        let segment = Applied::Segment(Allocation { start: 0, end: 20, stored_step: 10 });
        let record = TagRecord::plain(1, 10, 0, 0);
        let create = Op::create_segment_tag("a".into(), 10, 1, String::new());
        let tag = |t: &str, record: TagRecord| Applied::Tag { tag: t.into(), record };
        assert!(TagRecord::check(&create, &tag("a", record.clone())).is_ok());
        assert!(TagRecord::check(&create, &tag("b", record.clone())).is_err());
        assert!(TagRecord::check(&create, &tag("a", TagRecord::plain(-1, 10, 0, 0))).is_err());
        assert!(TagRecord::check(&create, &tag("a", TagRecord::plain(1, 0, 0, 0))).is_err());
        assert!(matches!(TagRecord::check(&create, &grant(3, 1)), Err(AnswerError::WrongKind { .. })));
        let update = Op::UpdateTag { tag: "a".into(), step: Some(20), description: None };
        assert!(TagRecord::check(&update, &tag("a", record)).is_ok());
        assert!(matches!(TagRecord::check(&update, &segment), Err(AnswerError::WrongKind { .. })));
    }

    #[test]
    fn a_batch_answer_names_each_tag_asked_for_once() {
        let batch =
            Op::CreateTags { tags: ["a", "b"].map(|t| NewTag::segment(t.into(), 10, 0, String::new())).to_vec() };
        let answer = |created: &[&str], existing: &[&str]| Applied::Tags {
            created: created.iter().map(|t| t.to_string()).collect(),
            existing: existing.iter().map(|t| t.to_string()).collect(),
        };
        assert!(CreatedTags::check(&batch, &answer(&["a"], &["b"])).is_ok());
        for (created, existing) in
            [(&["a"][..], &[][..]), (&["a", "b", "c"], &[]), (&["a", "a"], &["b"]), (&["a"], &["a"])]
        {
            assert!(CreatedTags::check(&batch, &answer(created, existing)).is_err(), "{created:?} {existing:?}");
        }
    }

    #[test]
    fn each_admin_change_gets_its_own_kind_of_result_or_a_typed_error() {
        let r = TagRecord::plain(1, 10, 1, 2).with_description("d".into());
        assert_eq!(TagRecord::take(Applied::Tag { tag: "t".into(), record: r.clone() }), Ok(r));
        assert_eq!(
            TagRecord::take(Applied::Nothing),
            Err(AnswerError::WrongKind { asked: "a tag creation or update", got: "no result" })
        );
        assert_eq!(<()>::take(Applied::Nothing), Ok(()));
        let note = Op::NoteMembership(AuditAction::ClockFaultSet { node_id: 1, offset_ms: 0 });
        assert!(<()>::check(&note, &Applied::Nothing).is_ok());
    }

    #[test]
    fn the_stamp_puts_the_retention_into_admin_changes_only() {
        let kept = AuditRetention { max_records: 7, max_age_ms: 3 };
        let mut op = admin(Actor::AdminToken, Op::ArchiveTag { tag: "t".into() });
        stamp(kept)(&mut op);
        assert!(matches!(op, Op::Admin { retention, .. } if retention == kept));
        let mut plain = Op::ArchiveTag { tag: "t".into() };
        stamp(kept)(&mut plain);
        assert_eq!(plain, Op::ArchiveTag { tag: "t".into() });
    }
}
