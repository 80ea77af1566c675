//! The audit trail in the replicated state: every admin change (tags, tokens, membership)
//! appended by [`crate::apply::apply`] with who asked for it and the leader's time, numbered
//! 1, 2, 3… alike on every node, and trimmed to the retention the leader stamped into the
//! latest change. It travels in snapshots with the rest of the state.
use std::collections::VecDeque;

use leaf_api::audit::{Actor, AuditAction, AuditFilter, AuditRecord, AuditRetention, MAX_AUDIT_ADDR};
use serde::{Deserialize, Serialize};

use crate::apply::{Applied, ApplyError, Changes};
use crate::command::Op;
use crate::regions::RegionAnswer;
use crate::tags::NewTag;

/// Most records the trail keeps, whatever the configured retention. Bounds the snapshot: a
/// record is at most about 1.3 KB (a token creation with eight 128-byte patterns), so the
/// trail stays under 6.5 MB (see `the_largest_possible_state_still_encodes`).
pub const MAX_AUDIT_RECORDS: u32 = 5_000;
/// Longest retention by age: ten years.
pub const MAX_AUDIT_AGE_MS: i64 = 10 * 365 * 86_400_000;
/// Retention until a leader stamps its own: every record the bound allows, for a year.
pub const DEFAULT_RETENTION: AuditRetention =
    AuditRetention { max_records: MAX_AUDIT_RECORDS, max_age_ms: 365 * 86_400_000 };

/// The trail as the state holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditLog {
    pub retention: AuditRetention,
    /// The number the next record gets.
    pub next_seq: u64,
    /// Oldest first, by `seq`.
    pub records: VecDeque<AuditRecord>,
}

impl Default for AuditLog {
    fn default() -> Self {
        AuditLog { retention: DEFAULT_RETENTION, next_seq: 1, records: VecDeque::new() }
    }
}

/// The trail's counters without its records (what the `sm` tree keeps under one key; each
/// record has its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditMeta {
    pub retention: AuditRetention,
    pub next_seq: u64,
}

impl AuditLog {
    pub fn meta(&self) -> AuditMeta {
        AuditMeta { retention: self.retention, next_seq: self.next_seq }
    }

    /// Up to `limit` records after `after_seq` that pass `filter`, oldest first, and the
    /// `after_seq` of the next page when more may follow.
    pub fn page(&self, filter: &AuditFilter, after_seq: u64, limit: usize) -> (Vec<AuditRecord>, Option<u64>) {
        let start = self.records.partition_point(|r| r.seq <= after_seq);
        let mut out = Vec::with_capacity(limit.min(64));
        for r in self.records.iter().skip(start).filter(|r| r.matches(filter)) {
            if out.len() == limit {
                let next = out.last().map(|r: &AuditRecord| r.seq);
                return (out, next);
            }
            out.push(r.clone());
        }
        (out, None)
    }

    /// Appends a record of `action` by `actor` at leader time `at_ms`, then trims.
    pub(crate) fn push(&mut self, at_ms: i64, actor: Actor, action: AuditAction, trim: Trim, changes: &mut Changes) {
        let security = action.is_security();
        self.append(at_ms, actor, action, changes);
        self.trim_for(at_ms, trim, security, changes);
    }

    /// Adds a record without trimming (a batch trims once, after its last record).
    fn append(&mut self, at_ms: i64, actor: Actor, action: AuditAction, changes: &mut Changes) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.records.push_back(AuditRecord { seq, at_ms, actor, action });
        changes.audit.insert(seq);
        changes.audit_meta = true;
    }

    /// Trims as `trim` says after records of the kind `security` were added.
    fn trim_for(&mut self, at_ms: i64, trim: Trim, security: bool, changes: &mut Changes) {
        match trim {
            Trim::Together => self.trim(at_ms, changes),
            Trim::Apart => self.trim_apart(at_ms, security, changes),
        }
    }

    /// Drops the records the retention no longer covers at leader time `at_ms`.
    fn trim(&mut self, at_ms: i64, changes: &mut Changes) {
        let oldest_kept = at_ms.saturating_sub(self.retention.max_age_ms);
        while let Some(front) = self.records.front() {
            if self.records.len() <= self.retention.max_records as usize && front.at_ms >= oldest_kept {
                break;
            }
            changes.audit.insert(front.seq);
            self.records.pop_front();
        }
    }

    /// Drops the records older than the retention's age, and the oldest records of the new
    /// record's kind (security or tag) beyond `max_records` of that kind, in one pass.
    fn trim_apart(&mut self, at_ms: i64, security: bool, changes: &mut Changes) {
        let oldest_kept = at_ms.saturating_sub(self.retention.max_age_ms);
        while let Some(front) = self.records.front().filter(|r| r.at_ms < oldest_kept) {
            changes.audit.insert(front.seq);
            self.records.pop_front();
        }
        let max = self.retention.max_records as usize;
        let of_kind = self.records.iter().filter(|r| r.action.is_security() == security).count();
        let mut excess = of_kind.saturating_sub(max);
        if excess > 0 {
            self.records.retain(|r| {
                if excess > 0 && r.action.is_security() == security {
                    excess -= 1;
                    changes.audit.insert(r.seq);
                    return false;
                }
                true
            });
        }
    }
}

/// How the trail trims when a record is added: all records together (entries of releases
/// before the split), or each kind apart (what this release proposes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trim {
    Together,
    Apart,
}

/// Checks a retention a leader stamped.
pub(crate) fn check_retention(r: &AuditRetention) -> Result<(), ApplyError> {
    if !(1..=MAX_AUDIT_RECORDS).contains(&r.max_records) {
        return Err(ApplyError::Invalid(format!(
            "audit retention of {} records is outside 1..={MAX_AUDIT_RECORDS}",
            r.max_records
        )));
    }
    if !(60_000..=MAX_AUDIT_AGE_MS).contains(&r.max_age_ms) {
        return Err(ApplyError::Invalid(format!(
            "audit retention of {} ms is outside a minute to ten years",
            r.max_age_ms
        )));
    }
    Ok(())
}

/// Checks what a membership note may hold.
pub(crate) fn check_note(action: &AuditAction) -> Result<(), ApplyError> {
    const MAX_CLOCK_FAULT_MS: u64 = 365 * 86_400_000;
    match action {
        AuditAction::LearnerAdded { node_id, addr } if *node_id > 0 && addr.len() <= MAX_AUDIT_ADDR => Ok(()),
        AuditAction::NodePromoted { node_id } | AuditAction::NodeRemoved { node_id } if *node_id > 0 => Ok(()),
        AuditAction::ObfuscatedDecoded { tag, id } if leaf_api::tag::validate_tag(tag).is_ok() && *id >= 0 => Ok(()),
        AuditAction::ClockFaultSet { node_id, offset_ms }
            if *node_id > 0 && offset_ms.unsigned_abs() <= MAX_CLOCK_FAULT_MS =>
        {
            Ok(())
        }
        other => Err(ApplyError::Invalid(format!("not an audit note: {:?}", other.kind()))),
    }
}

/// Records the admin change `op` that produced `applied`, by `actor`, with `retention` when
/// the leader stamped one (an unwrapped change from an earlier release keeps the last one).
pub(crate) fn record(
    log: &mut AuditLog,
    at_ms: i64,
    (actor, retention, trim): (&Actor, Option<AuditRetention>, Trim),
    (op, applied): (&Op, &Applied),
    changes: &mut Changes,
) {
    if let Some(r) = retention {
        if r != log.retention {
            log.retention = r;
            changes.audit_meta = true;
        }
    }
    if let (Op::CreateTags { tags }, Applied::Tags { created, existing }) = (op, applied) {
        // A record per tag created, as if each had been created alone: the trail answers
        // "who created this tag" for a batch too, and keeps tag records apart (`trim`).
        let existing: std::collections::BTreeSet<&str> = existing.iter().map(String::as_str).collect();
        for t in tags.iter().filter(|t| !existing.contains(t.tag.as_str())) {
            log.append(at_ms, actor.clone(), tag_created(t), changes);
        }
        if !created.is_empty() {
            log.trim_for(at_ms, trim, false, changes);
        }
        return;
    }
    // A region's join again (its leader retrying an adoption) is no new change: recorded once,
    // when it registered the region.
    if let (Op::JoinRegion { .. }, Applied::Region(RegionAnswer::Registered { record, .. })) = (op, applied) {
        if record.joined_ms != at_ms {
            return;
        }
    }
    // A move answered as it was (a repeat, or a move to where the home is) is no new change.
    if let (Op::MoveHome { .. }, Applied::Region(RegionAnswer::Home { home, .. })) = (op, applied) {
        if home.since_ms != at_ms || home.from.is_none() {
            return;
        }
    }
    if let Some(action) = action_of(op, applied) {
        log.push(at_ms, actor.clone(), action, trim, changes);
    }
}

/// The record of the creation of `t`.
fn tag_created(t: &NewTag) -> AuditAction {
    AuditAction::TagCreated {
        tag: t.tag.clone(),
        profile: t.profile.kind(),
        step: t.step,
        first_id: t.start_max_id,
        upper_bound: t.upper_bound,
    }
}

/// What the trail says of `op`, an admin change that succeeded with `applied`.
fn action_of(op: &Op, applied: &Applied) -> Option<AuditAction> {
    let action = match (op, applied) {
        // The same record whichever form the creation came in.
        (Op::CreateTag { tag, .. }, _) => tag_created(tag),
        (Op::ArchiveTag { tag }, Applied::Tag { record, .. }) => {
            AuditAction::TagArchived { tag: tag.clone(), max_id: record.max_id }
        }
        (Op::RestoreTag { tag }, _) => AuditAction::TagRestored { tag: tag.clone() },
        (Op::PutTemplate(t), _) => AuditAction::TemplatePut {
            name: t.name.clone(),
            pattern: t.pattern.to_string(),
            profile: t.settings.profile,
            step: t.settings.step,
        },
        (Op::DeleteTemplate { name }, Applied::Template { record, .. }) => {
            AuditAction::TemplateDeleted { name: name.clone(), pattern: record.pattern.to_string() }
        }
        (Op::UpdateTag { tag, step, description }, _) => {
            AuditAction::TagUpdated { tag: tag.clone(), step: *step, description: description.is_some() }
        }
        (Op::CreateToken { token: t, limits: None }, _) => AuditAction::TokenCreated {
            token: t.id,
            name: t.name.clone(),
            rights: t.rights.iter().copied().collect(),
            tags: t.tags.clone(),
            quota: t.quota,
        },
        (Op::CreateToken { token: t, limits: Some(limits) }, _) => AuditAction::TokenCreatedWithLimits {
            token: t.id,
            name: t.name.clone(),
            rights: t.rights.iter().copied().collect(),
            tags: t.tags.clone(),
            quota: t.quota,
            id_quota: limits.id_quota,
            max_tags: limits.max_tags,
        },
        (Op::RotateToken { id, grace_ms, .. }, Applied::Token { record, .. }) => {
            AuditAction::TokenRotated { token: *id, name: record.name.clone(), grace_ms: *grace_ms }
        }
        (Op::RevokeToken { id }, Applied::Token { record, .. }) => {
            AuditAction::TokenRevoked { token: *id, name: record.name.clone() }
        }
        (Op::NoteMembership(action), _) => action.clone(),
        (Op::SetSeriesLimits { tag, limits }, _) => AuditAction::SeriesLimitsSet {
            tag: tag.clone(),
            max_numbers: limits.max_numbers,
            issues_per_sec: limits.issues_per_sec,
        },
        (Op::JoinRegion { name, .. }, Applied::Region(RegionAnswer::Registered { record: r, .. })) => {
            AuditAction::RegionJoined {
                name: name.clone(),
                region_id: r.id,
                first_worker: r.first_worker,
                last_worker: r.last_worker,
            }
        }
        (Op::RetireRegion { name }, Applied::Region(RegionAnswer::Registered { record, .. })) => {
            AuditAction::RegionRetired { name: name.clone(), region_id: record.id }
        }
        (Op::MoveHome { tag, to }, Applied::Region(RegionAnswer::Home { home, .. })) => AuditAction::HomeMoved {
            tag: tag.clone(),
            from: home.from.clone().unwrap_or_default(),
            to: to.clone(),
            epoch: home.epoch,
        },
        (Op::AdoptRegion(i), _) => AuditAction::RegionAdopted {
            name: i.name.clone(),
            region_id: i.id,
            first_worker: i.first_worker,
            last_worker: i.last_worker,
        },
        _ => return None,
    };
    Some(action)
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::AuditKind;
    use leaf_api::tokens::TokenId;

    use super::*;
    use crate::apply::apply;
    use crate::state::{record_members, State};
    use crate::testing::{alloc, ap, at, create, grant, register};

    fn log_with(n: u64, retention: AuditRetention) -> (AuditLog, Changes) {
        let mut log = AuditLog { retention, ..AuditLog::default() };
        let mut c = Changes::default();
        for i in 0..n {
            let action = AuditAction::NodePromoted { node_id: i + 1 };
            log.push(i as i64 * 1000, Actor::AdminToken, action, Trim::Together, &mut c);
        }
        (log, c)
    }

    #[test]
    fn records_are_numbered_and_trimmed_by_count_and_age() {
        let (log, c) = log_with(10, AuditRetention { max_records: 4, max_age_ms: 1_000_000 });
        let seqs: Vec<u64> = log.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [7, 8, 9, 10]);
        assert_eq!(log.next_seq, 11);
        // Every written or removed key is noted, so a checkpoint deletes the trimmed ones.
        assert_eq!(c.audit, (1..=10).collect());
        let (log, _) = log_with(10, AuditRetention { max_records: 100, max_age_ms: 2_500 });
        let seqs: Vec<u64> = log.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [8, 9, 10], "records older than 2.5 s before the newest (9 s) are gone");
    }

    /// A tenant with the `tags` right could push every token and membership record out of the
    /// trail with `max_records` tag updates. Trimmed apart, each kind keeps its own newest.
    #[test]
    fn tag_records_never_push_security_records_out_when_trimmed_apart() {
        let retention = AuditRetention { max_records: 3, max_age_ms: 1_000_000 };
        let tag = |i: u64| AuditAction::TagUpdated { tag: format!("t-{i}"), step: None, description: true };
        for (trim, kept) in [(Trim::Together, false), (Trim::Apart, true)] {
            let mut log = AuditLog { retention, ..AuditLog::default() };
            let mut c = Changes::default();
            log.push(0, Actor::AdminToken, AuditAction::NodeRemoved { node_id: 2 }, trim, &mut c);
            for i in 1..=10 {
                log.push(i as i64, Actor::Token { id: TokenId(7), name: "tenant".into() }, tag(i), trim, &mut c);
            }
            let security = log.records.iter().filter(|r| r.action.is_security()).count();
            assert_eq!(security == 1, kept, "{trim:?}: {:?}", log.records);
            let tags: Vec<u64> = log.records.iter().filter(|r| !r.action.is_security()).map(|r| r.seq).collect();
            assert_eq!(tags, [9, 10, 11], "{trim:?}: the newest tag records");
            // Ordered by seq still (pages and the store's binary search rely on it).
            assert!(log.records.iter().zip(log.records.iter().skip(1)).all(|(a, b)| a.seq < b.seq));
            // Every removed record is noted for the store.
            assert_eq!(c.audit, (1..=11).collect());
        }
        // Apart, security records have their own bound, and age still applies to both.
        let mut log = AuditLog { retention: AuditRetention { max_records: 2, max_age_ms: 100 }, ..AuditLog::default() };
        let mut c = Changes::default();
        for i in 0..5 {
            log.push(i, Actor::AdminToken, AuditAction::NodePromoted { node_id: 1 }, Trim::Apart, &mut c);
        }
        assert_eq!(log.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [4, 5]);
        log.push(1_000, Actor::AdminToken, tag(1), Trim::Apart, &mut c);
        assert_eq!(log.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [6], "the old ones aged out");
    }

    #[test]
    fn pages_follow_after_seq_and_filters() {
        let (log, _) = log_with(10, DEFAULT_RETENTION);
        let all = AuditFilter::default();
        let (p, next) = log.page(&all, 0, 4);
        assert_eq!(p.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(next, Some(4));
        let (p, next) = log.page(&all, 8, 4);
        assert_eq!(p.iter().map(|r| r.seq).collect::<Vec<_>>(), [9, 10]);
        assert_eq!(next, None);
        let (p, next) = log.page(&all, 6, 4);
        assert_eq!(p.len(), 4);
        assert_eq!(next, None, "exactly the rest: no further page");
        let since = AuditFilter { since_ms: Some(5_000), kind: Some(AuditKind::NodePromoted), ..all.clone() };
        assert_eq!(log.page(&since, 0, 100).0.first().map(|r| r.seq), Some(6));
        let none = AuditFilter { kind: Some(AuditKind::TagCreated), ..all };
        assert_eq!(log.page(&none, 0, 100), (vec![], None));
    }

    #[test]
    fn retention_and_notes_are_checked() {
        assert!(check_retention(&DEFAULT_RETENTION).is_ok());
        for bad in [
            AuditRetention { max_records: 0, max_age_ms: 86_400_000 },
            AuditRetention { max_records: MAX_AUDIT_RECORDS + 1, max_age_ms: 86_400_000 },
            AuditRetention { max_records: 10, max_age_ms: 59_999 },
            AuditRetention { max_records: 10, max_age_ms: MAX_AUDIT_AGE_MS + 1 },
        ] {
            assert!(check_retention(&bad).is_err(), "{bad:?}");
        }
        assert!(check_note(&AuditAction::NodeRemoved { node_id: 3 }).is_ok());
        assert!(check_note(&AuditAction::NodeRemoved { node_id: 0 }).is_err());
        assert!(check_note(&AuditAction::LearnerAdded { node_id: 4, addr: "x".repeat(MAX_AUDIT_ADDR + 1) }).is_err());
        let tag = AuditAction::TagUpdated { tag: "t".into(), step: None, description: true };
        assert!(check_note(&tag).is_err(), "a note cannot forge a tag change");
    }

    fn admin(actor: Actor, op: Op) -> Op {
        Op::Admin { actor, retention: crate::audit::DEFAULT_RETENTION, trim: crate::Trim::Together, op: Box::new(op) }
    }

    fn create_op(tag: &str) -> Op {
        Op::create_segment_tag(tag.into(), 10, 1, "d".into())
    }

    /// Every successful admin change is in the trail with its actor and the command's time;
    /// a refused one, an allocation or a worker lease is not.
    #[test]
    fn admin_changes_are_audited_with_their_actor() {
        let mut s = State::default();
        record_members(&mut s, [1], &mut Changes::default());
        let token = Actor::Token { id: TokenId(5), name: "svc".into() };
        ap(&mut s, &at(100, admin(token.clone(), create_op("t")))).unwrap();
        ap(&mut s, &at(101, create_op("u"))).unwrap();
        assert_eq!(
            ap(&mut s, &at(102, admin(Actor::AdminToken, create_op("t")))),
            Err(ApplyError::TagExists("t".into()))
        );
        ap(&mut s, &alloc("t", 5)).unwrap();
        grant(register(&mut s, 103, 1));
        let upd = Op::UpdateTag { tag: "t".into(), step: Some(20), description: None };
        ap(&mut s, &at(104, admin(Actor::Loopback, upd))).unwrap();
        let note = Op::NoteMembership(AuditAction::NodeRemoved { node_id: 2 });
        ap(&mut s, &at(105, admin(Actor::client_cert("ops"), note))).unwrap();
        let got: Vec<(u64, i64, Actor, leaf_api::audit::AuditKind)> =
            s.audit.records.iter().map(|r| (r.seq, r.at_ms, r.actor.clone(), r.action.kind())).collect();
        use leaf_api::audit::AuditKind::*;
        assert_eq!(
            got,
            vec![
                (1, 100, token, TagCreated),
                (2, 101, Actor::Unattributed, TagCreated),
                (3, 104, Actor::Loopback, TagUpdated),
                (4, 105, Actor::client_cert("ops"), NodeRemoved),
            ]
        );
        assert!(matches!(
            &s.audit.records[2].action,
            AuditAction::TagUpdated { step: Some(20), description: false, .. }
        ));
    }

    #[test]
    fn admin_wrappers_are_checked() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, 1)).unwrap();
        let before = s.clone();
        let bad = [
            ("allocation", admin(Actor::AdminToken, Op::AllocateSegment { tag: "t".into(), step: 1, node_id: 1 })),
            ("nested", admin(Actor::AdminToken, admin(Actor::AdminToken, create_op("x")))),
            ("long name", admin(Actor::ClientCert { name: "x".repeat(65) }, create_op("x"))),
            (
                "retention",
                Op::Admin {
                    actor: Actor::AdminToken,
                    retention: AuditRetention { max_records: 0, max_age_ms: 86_400_000 },
                    trim: crate::Trim::Together,
                    op: Box::new(create_op("x")),
                },
            ),
            (
                "forged note",
                Op::NoteMembership(AuditAction::TagUpdated { tag: "t".into(), step: None, description: true }),
            ),
            ("inner field", admin(Actor::AdminToken, Op::create_segment_tag("a b".into(), 1, 0, String::new()))),
        ];
        for (what, op) in bad {
            let mut c = Changes::default();
            let r = apply(&mut s, &at(5, op), &mut c);
            assert!(matches!(r, Err(ApplyError::Invalid(_))), "{what}: {r:?}");
            assert_eq!(s, before, "{what}");
            assert!(c.is_empty(), "{what}");
        }
    }
}
