//! Tag operations (admin, over HTTP `/admin/tags*` and gRPC `AdminService`): create with a
//! profile (one or a batch), show, list a page, update, list, archive and restore, decode an obfuscated tag's IDs; and the
//! allocation journal and the clock fault. Every field is checked here ([`super::validate`]) before it is proposed.
use leaf_api::audit::AuditAction;
use leaf_api::gapless::{GaplessError, GaplessOptions, SeriesPolicy};
use leaf_api::profile::{validate_upper_bound, DailyFormat, DailyOptions, Profile, ProfileError, DAILY_FIRST};
use leaf_api::tag::MAX_TAGS_PER_REQUEST;
use leaf_api::tokens::Right;
use leaf_api::types::{
    AllocationJournal, ClockFault, CreateTagRequest, CreateTagsRequest, CreateTagsResponse, ObfuscatedDecoded, TagInfo,
    UpdateTagRequest,
};
use leaf_api::ErrorCode;
use leaf_raft_store::{StoredProfile, TagRecord};

use super::validate::Page;
use super::{validate, ApiError, App};
use crate::access::Principal;
use crate::tags::ServeAs;
use leaf_raft_store::NewTag;

impl App {
    /// A page of the tags, as stored, that `who` may see (a scoped token sees the tags its
    /// patterns cover), archived ones included.
    pub fn list_tags(&self, who: &Principal, page: &Page) -> Vec<TagInfo> {
        let state = self.raft.state();
        let tags = state.tags_page(&page.prefix, page.after.as_deref(), page.limit, |t, _| who.may_on(Right::Tags, t));
        tags.into_iter().map(|(t, r)| tag_info(t, r)).collect()
    }

    /// A page of Leaf's `/db` as `viewer` may read it (none: a public endpoint): every tag but
    /// the obfuscated ones, whose `max_id` would count their IDs, and the archived ones (the
    /// admin view, `GET /admin/tags`, lists both), and only the tags a scoped viewer's patterns
    /// match.
    pub fn public_tags(&self, viewer: Option<&Principal>, page: &Page) -> Vec<TagInfo> {
        let state = self.raft.state();
        let tags = state.tags_page(&page.prefix, page.after.as_deref(), page.limit, |t, r| {
            !matches!(r.profile(), StoredProfile::Obfuscated { .. })
                && r.archived_ms().is_none()
                && viewer.is_none_or(|p| p.sees_tag(t))
        });
        tags.into_iter().map(|(t, r)| tag_info(t, r)).collect()
    }

    /// Creates a tag from a request by `who`: every field checked, then proposed.
    pub async fn create_tag(&self, body: CreateTagRequest, who: &Principal) -> Result<TagInfo, ApiError> {
        let limits = asked_limits(&body)?;
        let new = new_tag(body, who)?;
        let tag = new.tag.clone();
        let record = super::tag_admin::create_tag(&self.raft, new, who.actor()).await?;
        if let Some(limits) = limits {
            self.set_limits_after_create(&tag, limits, who).await?;
        }
        Ok(self.with_limits(tag_info(tag, record)))
    }

    /// Sets a new series' limits (a second entry after its creation): a failure says the
    /// series exists with the default limits, and how to set them.
    async fn set_limits_after_create(
        &self,
        tag: &str,
        limits: leaf_api::gapless::SeriesLimits,
        who: &Principal,
    ) -> Result<(), ApiError> {
        if let Err(e) = super::tag_admin::set_series_limits(&self.raft, tag.to_string(), limits, who.actor()).await {
            let e = ApiError::from(e);
            let message = format!(
                "{} (series {tag:?} was created with the default limits: set max_numbers and issues_per_sec \
                 again with PATCH /admin/tags/{tag})",
                e.message
            );
            return Err(ApiError { message, ..e });
        }
        Ok(())
    }

    /// `info` with its series' limits, for a gapless tag.
    pub(crate) fn with_limits(&self, mut info: TagInfo) -> TagInfo {
        if let Some(g) = info.gapless.as_mut() {
            let l = self.raft.state().series_limits(&info.tag);
            (g.max_numbers, g.issues_per_sec) = (Some(l.max_numbers), Some(l.issues_per_sec));
        }
        info
    }

    /// Creates the tags of a batch that do not exist yet, every field of every tag checked
    /// first; the existing ones are reported and left as they are. Committed in as few entries
    /// as [`leaf_raft_store::MAX_BATCH_COMMAND_BYTES`] allows, each all or nothing; if one
    /// fails, those before it stay created, and sending the batch again creates the rest.
    pub async fn create_tags(&self, body: CreateTagsRequest, who: &Principal) -> Result<CreateTagsResponse, ApiError> {
        let n = body.tags.len();
        if !(1..=MAX_TAGS_PER_REQUEST).contains(&n) {
            return Err(ApiError::invalid(format!("a batch creates 1 to {MAX_TAGS_PER_REQUEST} tags, not {n}")));
        }
        let mut names = std::collections::HashSet::with_capacity(n);
        // The request's names in order: a name given again is created once, by its first
        // mention, and its later ones are answered as existing (each is checked all the same).
        let mut order = Vec::with_capacity(n);
        let mut batch = Vec::with_capacity(n);
        let mut limits = std::collections::HashMap::new();
        for (i, t) in body.tags.into_iter().enumerate() {
            let at = |e: ApiError| ApiError { message: format!("tags[{i}]: {}", e.message), ..e };
            let again = !names.insert(t.tag.clone());
            order.push((t.tag.clone(), again));
            let asked = asked_limits(&t).map_err(at)?;
            let tag = new_tag(t, who).map_err(at)?;
            if again {
                continue;
            }
            if let Some(l) = asked {
                limits.insert(tag.tag.clone(), l);
            }
            batch.push(tag);
        }
        let mut done = CreateTagsResponse::default();
        for entry in entries(batch) {
            match super::tag_admin::create_tags(&self.raft, entry, who.actor()).await {
                Ok(r) => {
                    done.created.extend(r.created);
                    done.existing.extend(r.existing);
                }
                Err(e) => {
                    let e = ApiError::from(e);
                    if done.created.is_empty() && done.existing.is_empty() {
                        return Err(e);
                    }
                    let message = format!(
                        "{} (the batch's first {} tags are committed, {} of them created by it: sending it \
                         again creates the rest)",
                        e.message,
                        done.created.len() + done.existing.len(),
                        done.created.len()
                    );
                    return Err(ApiError { message, ..e });
                }
            }
        }
        // The limits of the series it created; existing ones are left as they are.
        for tag in &done.created {
            if let Some(l) = limits.get(tag) {
                self.set_limits_after_create(tag, *l, who).await?;
            }
        }
        let created: std::collections::HashSet<String> = done.created.drain(..).collect();
        done.existing.clear();
        for (tag, again) in order {
            if !again && created.contains(&tag) {
                done.created.push(tag);
            } else {
                done.existing.push(tag);
            }
        }
        tracing::info!(created = done.created.len(), existing = done.existing.len(), "tag batch committed");
        Ok(done)
    }

    /// One tag as `who` may see it, confirming an unknown one with the leader first.
    pub async fn show_tag(&self, tag: String, who: &Principal) -> Result<TagInfo, ApiError> {
        validate::tag(&tag)?;
        who.require_on(Right::Tags, &tag)?;
        let record = self.known(&tag, |app| app.raft.state().tag(&tag)).await?;
        Ok(self.with_limits(tag_info(tag, record)))
    }

    /// Changes a tag's stored step and/or description, and a gapless series' limits.
    pub async fn update_tag(&self, tag: String, body: UpdateTagRequest, who: &Principal) -> Result<TagInfo, ApiError> {
        validate::tag(&tag)?;
        who.require_on(Right::Tags, &tag)?;
        let limits_asked = body.max_numbers.is_some() || body.issues_per_sec.is_some();
        if body.step.is_none() && body.description.is_none() && !limits_asked {
            return Err(ApiError::invalid(
                "nothing to update: give step, description, or a gapless series' max_numbers or issues_per_sec",
            ));
        }
        if let Some(step) = body.step {
            validate::step(step)?;
        }
        if let Some(d) = &body.description {
            validate::description(d)?;
        }
        if limits_asked {
            let record = self.known(&tag, |app| app.raft.state().tag(&tag)).await?;
            if !matches!(record.profile(), StoredProfile::Gapless { .. }) {
                return Err(ApiError::new(
                    ErrorCode::WrongProfile,
                    format!(
                        "tag {tag:?} is a {} tag: only a gapless series has max_numbers and issues_per_sec",
                        record.profile().kind().as_str()
                    ),
                ));
            }
            let limits = self.raft.state().series_limits(&tag).with(body.max_numbers, body.issues_per_sec);
            limits.validate().map_err(|e| ApiError::invalid(e.to_string()))?;
            super::tag_admin::set_series_limits(&self.raft, tag.clone(), limits, who.actor()).await?;
        }
        let record = if body.step.is_some() || body.description.is_some() {
            super::tag_admin::update_tag(&self.raft, tag.clone(), body.step, body.description, who.actor()).await?
        } else {
            self.raft.state().tag(&tag).ok_or_else(|| super::tag_not_found(&tag))?
        };
        Ok(self.with_limits(tag_info(tag, record)))
    }

    /// Archives a tag: every node stops serving it once it applied the archive (the IDs left in
    /// its buffers are dropped), no ID is allocated for it again, and its name is never given
    /// to a new tag. An archived tag is answered as it is.
    pub async fn archive_tag(&self, tag: String, who: &Principal) -> Result<TagInfo, ApiError> {
        self.set_archived(tag, true, who).await
    }

    /// Brings an archived tag back: it serves again from where its counter stopped. A tag
    /// that is not archived is answered as it is.
    pub async fn restore_tag(&self, tag: String, who: &Principal) -> Result<TagInfo, ApiError> {
        self.set_archived(tag, false, who).await
    }

    /// Archives or restores `tag`, unless the committed state has it so already (read after a
    /// barrier through the leader, so a retry after a lost answer is answered, not refused).
    async fn set_archived(&self, tag: String, archive: bool, who: &Principal) -> Result<TagInfo, ApiError> {
        validate::tag(&tag)?;
        who.require_on(Right::Tags, &tag)?;
        self.raft.read_barrier().await.map_err(|e| {
            ApiError::new(ErrorCode::NotReady, format!("cannot read tag {tag:?} as committed: {}", e.public_message()))
        })?;
        let record = self.raft.state().tag(&tag).ok_or_else(|| super::tag_not_found(&tag))?;
        if record.archived_ms().is_some() == archive {
            return Ok(tag_info(tag, record));
        }
        let record = if archive {
            super::tag_admin::archive_tag(&self.raft, tag.clone(), who.actor()).await?
        } else {
            super::tag_admin::restore_tag(&self.raft, tag.clone(), who.actor()).await?
        };
        tracing::info!(tag, max_id = record.max_id, archived = archive, "tag archived or restored");
        Ok(tag_info(tag, record))
    }

    /// An obfuscated tag's ID back to the sequence number it was made from (the key never
    /// leaves the cluster; this is how an operator reads it).
    pub async fn decode_obfuscated(
        &self,
        tag: String,
        id: u64,
        who: &Principal,
    ) -> Result<ObfuscatedDecoded, ApiError> {
        validate::tag(&tag)?;
        who.require_on(Right::Tags, &tag)?;
        // An existing tag only: a decode never makes one from a template.
        let h = self.segment_handle(&tag, crate::access::IdRequester::Anonymous).await?;
        let ServeAs::Obfuscated(o) = h.serve() else {
            return Err(ApiError::new(ErrorCode::WrongProfile, format!("tag {tag:?} is not obfuscated")));
        };
        // An ID outside the tag's space is none of its IDs: not found (the request is well
        // formed; whether an ID is in the space depends on the tag's bound).
        let sequence = o.decode(id).map_err(|e| ApiError::new(ErrorCode::NotFound, e.to_string()))?;
        // On record before it is answered: whoever decodes can count the tag's IDs.
        let action = AuditAction::ObfuscatedDecoded { tag: tag.clone(), id: id as i64 };
        super::tag_admin::note(&self.raft, action, who.actor()).await?;
        Ok(ObfuscatedDecoded { tag, id: id as i64, sequence: sequence as i64 })
    }

    /// The journal of committed segments and the node each went to, optionally of one tag
    /// and/or to one node, as `who` may see it (a scoped token: the tags its patterns match,
    /// obfuscated ones never).
    pub fn allocations(
        &self,
        tag: Option<&str>,
        node: Option<u64>,
        who: &Principal,
    ) -> Result<AllocationJournal, ApiError> {
        if let Some(t) = tag {
            validate::tag(t)?;
        }
        if let Some(node) = node {
            validate::node_id_range(node)?;
        }
        let mut journal = crate::allocation::journal::allocations(&self.raft, tag, node)
            .map_err(|e| ApiError::new(ErrorCode::Unavailable, format!("allocation journal unreadable: {e}")))?;
        // A scoped token sees the tags its patterns match, never an obfuscated one: its
        // segments would count the tag's IDs, which is what obfuscation hides.
        if let Principal::Token { .. } = who {
            let state = self.raft.state();
            journal.allocations.retain(|a| {
                who.sees_tag(&a.tag)
                    && !state.tag(&a.tag).is_some_and(|r| matches!(r.profile(), StoredProfile::Obfuscated { .. }))
            });
        }
        Ok(journal)
    }

    /// Whether fault injection is on (the clock fault endpoint exists only then).
    pub fn fault_injection(&self) -> Result<(), ApiError> {
        if !self.config.fault.enabled {
            return Err(ApiError::new(
                ErrorCode::NotFound,
                "fault injection is disabled (start the node with --enable-fault-injection)",
            ));
        }
        Ok(())
    }

    /// Skews this node's clock (only with fault injection enabled).
    pub fn fault_clock(&self, fault: ClockFault, who: &Principal) -> Result<ClockFault, ApiError> {
        self.fault_injection()?;
        validate::clock_offset(fault.offset_ms)?;
        let before = self.clock.offset_ms();
        self.clock.set_offset_ms(fault.offset_ms);
        tracing::warn!(before, offset_ms = fault.offset_ms, "FAULT INJECTED: clock offset changed");
        // Recorded in the background: a node cut off from its quorum (what chaos tests make)
        // must take the fault at once; a record that cannot be written is logged.
        let action = AuditAction::ClockFaultSet { node_id: self.config.node_id, offset_ms: fault.offset_ms };
        let (raft, actor) = (self.raft.clone(), who.actor());
        tokio::spawn(async move {
            if let Err(e) = super::tag_admin::note(&raft, action, actor).await {
                tracing::warn!(error = %e, "the clock fault is in force but its audit record failed");
            }
        });
        Ok(fault)
    }
}

/// A tag to create from a request by `who`, every field checked.
pub(super) fn new_tag(body: CreateTagRequest, who: &Principal) -> Result<NewTag, ApiError> {
    validate::tag(&body.tag)?;
    who.require_on(Right::Tags, &body.tag)?;
    validate::step(body.step)?;
    validate::max_id(body.max_id.unwrap_or(1))?;
    let description = body.description.unwrap_or_default();
    validate::description(&description)?;
    let (profile, start_max_id) = stored_profile(
        body.profile.unwrap_or_default(),
        (body.daily.as_ref(), body.gapless.as_ref()),
        body.max_id,
        body.upper_bound,
    )?;
    Ok(NewTag { tag: body.tag, step: body.step, start_max_id, description, profile, upper_bound: body.upper_bound })
}

/// The limits a create request asks of a gapless series, validated; `None` when it asks none.
fn asked_limits(body: &CreateTagRequest) -> Result<Option<leaf_api::gapless::SeriesLimits>, ApiError> {
    match &body.gapless {
        Some(g) if g.max_numbers.is_some() || g.issues_per_sec.is_some() => {
            g.limits().map(Some).map_err(|e| ApiError::invalid(e.to_string()))
        }
        _ => Ok(None),
    }
}

/// Bytes a command holds besides its tags (the actor's name, the retention, framing), kept
/// free in every batch entry.
const ENTRY_OVERHEAD_BYTES: usize = 4096;

/// The most a tag takes in an encoded batch entry: its name and description, and at most 64
/// bytes of numbers and profile (varints, an obfuscated tag's 32-byte key, the daily options).
fn entry_bytes(t: &NewTag) -> usize {
    t.tag.len() + t.description.len() + 64
}

/// `batch` cut into Raft entries, in order: each under
/// [`leaf_raft_store::MAX_BATCH_COMMAND_BYTES`] and [`leaf_raft_store::MAX_TAGS_PER_COMMAND`].
fn entries(batch: Vec<NewTag>) -> Vec<Vec<NewTag>> {
    let budget = leaf_raft_store::MAX_BATCH_COMMAND_BYTES - ENTRY_OVERHEAD_BYTES;
    let mut out: Vec<Vec<NewTag>> = Vec::new();
    let mut bytes = 0;
    for t in batch {
        let size = entry_bytes(&t);
        match out.last_mut() {
            Some(last) if last.len() < leaf_raft_store::MAX_TAGS_PER_COMMAND && bytes + size <= budget => {
                bytes += size;
                last.push(t);
            }
            _ => {
                bytes = size;
                out.push(vec![t]);
            }
        }
    }
    out
}

/// A stored tag as the API shows it.
pub fn tag_info(tag: String, r: TagRecord) -> TagInfo {
    TagInfo {
        tag,
        max_id: r.max_id,
        step: r.step,
        description: r.description().to_string(),
        created_ms: r.created_ms,
        updated_ms: r.updated_ms,
        profile: r.profile().kind(),
        daily: match r.profile() {
            StoredProfile::Daily { format, .. } => Some(format.options()),
            _ => None,
        },
        day: match r.profile() {
            StoredProfile::Daily { day, .. } if *day != 0 => Some(*day),
            _ => None,
        },
        upper_bound: r.upper_bound(),
        gapless: match r.profile() {
            StoredProfile::Gapless { policy, .. } => Some(policy.options()),
            _ => None,
        },
        period: match r.profile() {
            StoredProfile::Gapless { period, .. } if r.max_id > 1 => Some(*period),
            _ => None,
        },
        archived_ms: r.archived_ms(),
    }
}

/// Checks a create request's profile fields and builds the stored profile with the tag's first
/// counter value (an obfuscated tag's key is generated here, from the OS's random source).
fn stored_profile(
    profile: Profile,
    (daily, gapless): (Option<&DailyOptions>, Option<&GaplessOptions>),
    max_id: Option<i64>,
    upper_bound: Option<i64>,
) -> Result<(StoredProfile, i64), ApiError> {
    let bad = |e: ProfileError| ApiError::invalid(e.to_string());
    if daily.is_some() && profile != Profile::Daily {
        return Err(bad(ProfileError::OptionsWithoutDaily));
    }
    if gapless.is_some() && profile != Profile::Gapless {
        return Err(ApiError::invalid(GaplessError::OptionsWithoutGapless.to_string()));
    }
    let start = max_id.unwrap_or(1);
    if let Some(b) = upper_bound {
        // A bound below the first ID is well-formed, each field alone, but leaves the tag no
        // ID to hand out: it would be exhausted from birth (409, as a tag that ran out).
        // No request schema can compare two fields, so this is the contract's one such rule.
        validate_upper_bound(b, start).map_err(|e| match b < start.max(0) {
            true => ApiError::new(ErrorCode::TagExhausted, format!("{e}: a tag with no ID to hand out")),
            false => bad(e),
        })?;
    }
    let profile = match profile {
        Profile::Segment => StoredProfile::Segment,
        Profile::Monotonic => StoredProfile::Monotonic,
        Profile::Obfuscated => StoredProfile::Obfuscated { key: crate::profiles::new_key()? },
        Profile::Daily => {
            if upper_bound.is_some() || max_id.is_some() {
                return Err(bad(ProfileError::DailyBound));
            }
            let format = DailyFormat::from_options(daily.unwrap_or(&DailyOptions::default())).map_err(bad)?;
            return Ok((StoredProfile::Daily { format, day: 0 }, DAILY_FIRST));
        }
        Profile::Gapless => {
            if upper_bound.is_some() || max_id.is_some_and(|m| m != 1) {
                return Err(ApiError::invalid(GaplessError::Bound.to_string()));
            }
            let policy = SeriesPolicy::from_options(gapless.unwrap_or(&GaplessOptions::default()))
                .map_err(|e| ApiError::invalid(e.to_string()))?;
            return Ok((StoredProfile::Gapless { policy, period: 0, pruned_through: None }, 1));
        }
    };
    Ok((profile, start))
}

#[cfg(test)]
mod tests {
    use leaf_api::audit::{Actor, AuditRetention};
    use leaf_api::tokens::TokenId;
    use leaf_raft_store::{check_command, Command, Op, StoredProfile, MAX_TAGS_PER_COMMAND, OBFUSCATION_KEY_BYTES};

    use super::*;

    /// The largest tags there are (longest name and description, an obfuscated key, a bound)
    /// and the smallest, cut into entries: every entry passes the leader's size check with the
    /// longest actor, and the order is kept.
    #[test]
    fn batch_entries_fit_the_command_bound() {
        let big = |i: usize| NewTag {
            tag: format!("{i:0>128}"),
            step: leaf_api::tag::MAX_STEP,
            start_max_id: i64::MAX - 2,
            description: "\u{4e2d}".repeat(341) + "x",
            profile: StoredProfile::Obfuscated { key: [0xff; OBFUSCATION_KEY_BYTES] },
            upper_bound: Some(i64::MAX - 1),
        };
        let small = |i: usize| NewTag::segment(format!("t{i}"), 1, 0, String::new());
        for (batch, expect_full) in [
            ((0..MAX_TAGS_PER_REQUEST).map(big).collect::<Vec<_>>(), false),
            ((0..MAX_TAGS_PER_REQUEST).map(small).collect(), true),
        ] {
            let names: Vec<String> = batch.iter().map(|t| t.tag.clone()).collect();
            let cut = entries(batch);
            if expect_full {
                assert_eq!(cut.len(), MAX_TAGS_PER_REQUEST.div_ceil(MAX_TAGS_PER_COMMAND), "small tags fill entries");
            }
            let again: Vec<String> = cut.iter().flatten().map(|t| t.tag.clone()).collect();
            assert_eq!(again, names);
            let actor = Actor::Token { id: TokenId(u64::MAX), name: "n".repeat(leaf_api::audit::MAX_ACTOR_NAME) };
            let retention = AuditRetention { max_records: u32::MAX, max_age_ms: i64::MAX };
            for tags in cut {
                assert!(tags.len() <= MAX_TAGS_PER_COMMAND);
                let op = Op::Admin {
                    actor: actor.clone(),
                    retention: leaf_raft_store::audit::DEFAULT_RETENTION,
                    trim: leaf_raft_store::Trim::Apart,
                    op: Box::new(Op::CreateTags { tags }),
                };
                let cmd = Command { at_ms: i64::MAX, op };
                assert_eq!(check_command(&cmd), Ok(()));
                // Even a retention at its largest encoding leaves room (the leader stamps its own).
                let Op::Admin { op, actor, .. } = cmd.op else { unreachable!() };
                let len = leaf_api::codec::encode(&Command {
                    at_ms: i64::MAX,
                    op: Op::Admin { actor, retention, trim: leaf_raft_store::Trim::Apart, op },
                })
                .unwrap()
                .len();
                assert!(len <= leaf_raft_store::MAX_BATCH_COMMAND_BYTES, "{len}");
            }
        }
    }
}
