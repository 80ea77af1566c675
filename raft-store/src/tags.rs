//! Tags in the replicated state: their records ([`TagRecord`]), the ranges an allocation
//! commits ([`Allocation`]), the bound on their number ([`MAX_TAGS`]), and how creation, update
//! and allocation change them (each profile's counter rules are in [`crate::profile`]). Pure,
//! like the rest of [`crate::apply::apply`].
use serde::{Deserialize, Serialize};

use crate::apply::{invalid, Applied, ApplyError, ApplyResult, Changes};
use crate::command::SegmentAsk;
use crate::profile::StoredProfile;
use crate::state::State;

/// Longest tag description, in bytes: the API's limit, enforced again by
/// [`crate::apply::apply`].
pub use leaf_api::tag::MAX_DESCRIPTION_BYTES;

/// Most tags the replicated state holds; creating one more is refused.
///
/// Snapshots are streamed files (no codec limit on their size, see `state_machine/snapshot`),
/// so what bounds this is memory and a snapshot's size on disk and on the wire. Worst case of
/// one tag in a snapshot file: the key, 2 + 128 bytes; the record, a codec header of 5 and at
/// most 1,112 bytes (bincode, variable-length integers: `max_id` 9, `step` 5, the description
/// 3 + 1,024, `created_ms` and `updated_ms` 9 each, the profile 1 + 32, `upper_bound` and
/// `archived_ms` 1 + 9 each); two lengths of 4: 1,255 bytes, 1.26 GB for a million tags.
/// Typical tags (a short name, a short description) take about 100 bytes.
///
/// Only [`Op::CreateTags`](crate::Op::CreateTags) creates past [`LEGACY_MAX_TAGS`]: earlier
/// releases apply the single creations with that bound, and cannot read a batch at all.
pub const MAX_TAGS: usize = 1_000_000;

/// Most tags a single creation under [`TagCap::Legacy`](crate::TagCap::Legacy) leaves in
/// the state: the bound of the releases before streamed snapshots, which apply those entries
/// too, so that every node of a cluster in the middle of an upgrade answers them alike. The
/// node proposes a creation under [`TagCap::Full`](crate::TagCap::Full) once the state holds
/// this many tags.
pub const LEGACY_MAX_TAGS: usize = 40_000;

/// A tag as stored.
///
/// In memory a tag that keeps the defaults (no description, the segment profile, no bound, not
/// archived: the tags of a batch of tenants) holds the four numbers only, 40 bytes; the rest is
/// [`TagExtra`], boxed, and present only when something differs from its default. A million
/// tags are one `BTreeMap` node slot each, so every byte here is a megabyte of every node's
/// memory. Encoded (sled, snapshots) it is the flat record of earlier releases, field for field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagRecord {
    /// The next counter value to allocate (for a daily tag, the counter within its day).
    pub max_id: i64,
    pub step: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// `None` exactly when every field of it is its default (the setters keep it so, which
    /// keeps the derived equality true to the fields).
    pub(crate) extra: Option<Box<TagExtra>>,
}

/// The fields of a [`TagRecord`] most tags leave at their defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TagExtra {
    description: String,
    profile: StoredProfile,
    upper_bound: Option<i64>,
    archived_ms: Option<i64>,
}

static SEGMENT: StoredProfile = StoredProfile::Segment;

impl TagRecord {
    /// A new segment tag created at `at_ms`, with no bound.
    pub(crate) fn new(at_ms: i64, step: i64, max_id: i64, description: &str) -> Self {
        TagRecord { max_id, step, created_ms: at_ms, updated_ms: at_ms, extra: None }
            .with_description(description.to_string())
    }

    /// A segment tag's record with the defaults but for its counter, step and times.
    pub fn plain(max_id: i64, step: i64, created_ms: i64, updated_ms: i64) -> Self {
        TagRecord { max_id, step, created_ms, updated_ms, extra: None }
    }

    pub fn description(&self) -> &str {
        self.extra.as_ref().map_or("", |e| &e.description)
    }

    pub fn profile(&self) -> &StoredProfile {
        self.extra.as_ref().map_or(&SEGMENT, |e| &e.profile)
    }

    /// The largest ID the tag may hand out (inclusive); none: up to `i64::MAX − 1`.
    pub fn upper_bound(&self) -> Option<i64> {
        self.extra.as_ref().and_then(|e| e.upper_bound)
    }

    /// Leader time (Unix ms) the tag was archived, if it is: an archived tag allocates nothing
    /// and its name is never given to a new tag, so its IDs are never handed out again; it
    /// keeps its counter (and an obfuscated tag its key) for a restore.
    pub fn archived_ms(&self) -> Option<i64> {
        self.extra.as_ref().and_then(|e| e.archived_ms)
    }

    pub fn with_description(mut self, description: String) -> Self {
        self.set(|e| e.description = description);
        self
    }

    pub fn with_profile(mut self, profile: StoredProfile) -> Self {
        self.set(|e| e.profile = profile);
        self
    }

    pub fn with_upper_bound(mut self, upper_bound: Option<i64>) -> Self {
        self.set(|e| e.upper_bound = upper_bound);
        self
    }

    pub fn with_archived_ms(mut self, archived_ms: Option<i64>) -> Self {
        self.set(|e| e.archived_ms = archived_ms);
        self
    }

    pub(crate) fn set_description(&mut self, description: String) {
        self.set(|e| e.description = description);
    }

    pub(crate) fn set_profile(&mut self, profile: StoredProfile) {
        self.set(|e| e.profile = profile);
    }

    pub(crate) fn set_archived_ms(&mut self, archived_ms: Option<i64>) {
        self.set(|e| e.archived_ms = archived_ms);
    }

    /// Changes the extra fields with `f`, boxing them only while one differs from its default.
    fn set(&mut self, f: impl FnOnce(&mut TagExtra)) {
        let mut extra = self.extra.take().unwrap_or_default();
        f(&mut extra);
        if *extra != TagExtra::default() {
            self.extra = Some(extra);
        }
    }
}

/// [`TagRecord`] as encoded: the flat layout, in this field order.
#[derive(Serialize)]
struct FlatRef<'a> {
    max_id: i64,
    step: i64,
    description: &'a str,
    created_ms: i64,
    updated_ms: i64,
    profile: &'a StoredProfile,
    upper_bound: Option<i64>,
    archived_ms: Option<i64>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize, Debug, PartialEq))]
struct Flat {
    max_id: i64,
    step: i64,
    description: String,
    created_ms: i64,
    updated_ms: i64,
    profile: StoredProfile,
    upper_bound: Option<i64>,
    archived_ms: Option<i64>,
}

impl Serialize for TagRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FlatRef {
            max_id: self.max_id,
            step: self.step,
            description: self.description(),
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            profile: self.profile(),
            upper_bound: self.upper_bound(),
            archived_ms: self.archived_ms(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for TagRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = Flat::deserialize(d)?;
        let extra = TagExtra {
            description: f.description,
            profile: f.profile,
            upper_bound: f.upper_bound,
            archived_ms: f.archived_ms,
        };
        let extra = (extra != TagExtra::default()).then(|| Box::new(extra));
        Ok(TagRecord { max_id: f.max_id, step: f.step, created_ms: f.created_ms, updated_ms: f.updated_ms, extra })
    }
}

/// Most tags one [`Op::CreateTags`](crate::Op::CreateTags) entry creates (its encoded size is
/// bounded apart, by [`crate::check::MAX_BATCH_COMMAND_BYTES`]).
pub const MAX_TAGS_PER_COMMAND: usize = 5_000;

/// Most allocations in one [`crate::Op::AllocateSegments`]: 256 asks with 128-byte tags encode
/// to about 40 KiB, well under [`crate::check::MAX_BATCH_COMMAND_BYTES`].
pub const MAX_SEGMENT_ASKS: usize = 256;

/// A tag to create, as a batch entry carries it (and as the node checks it before proposing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTag {
    pub tag: String,
    pub step: i64,
    /// The first counter value (the tag's `max_id` before its first segment).
    pub start_max_id: i64,
    pub description: String,
    pub profile: StoredProfile,
    /// The ID the tag never reaches, if bounded.
    pub upper_bound: Option<i64>,
}

impl NewTag {
    /// A plain segment tag without a bound.
    pub fn segment(tag: String, step: i64, start_max_id: i64, description: String) -> NewTag {
        NewTag { tag, step, start_max_id, description, profile: StoredProfile::Segment, upper_bound: None }
    }

    /// The record it starts as, created at leader time `at_ms`.
    pub(crate) fn record(&self, at_ms: i64) -> TagRecord {
        TagRecord::new(at_ms, self.step, self.start_max_id, &self.description)
            .with_profile(self.profile.clone())
            .with_upper_bound(self.upper_bound)
    }
}

/// A committed, half-open range of IDs `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub start: i64,
    pub end: i64,
    /// The tag's stored step at commit time (the floor for the dynamic step).
    pub stored_step: i64,
}

/// Creates `tag` with `record`; refused when it exists or the state holds `max` tags.
pub(crate) fn create(
    state: &mut State,
    tag: &str,
    record: TagRecord,
    max: usize,
    changes: &mut Changes,
) -> ApplyResult {
    if state.tags.contains_key(tag) {
        return Err(ApplyError::TagExists(tag.to_string()));
    }
    check_room(state, 1, max)?;
    state.tags.insert(tag.to_string(), record.clone());
    changes.tag(tag);
    Ok(Applied::Tag { tag: tag.to_string(), record })
}

/// Refuses a creation of `n` more tags that would take the state past `max` tags
/// ([`MAX_TAGS`] or [`LEGACY_MAX_TAGS`]).
pub(crate) fn check_room(state: &State, n: usize, max: usize) -> Result<(), ApplyError> {
    if state.tags.len().saturating_add(n) > max {
        let room = max.saturating_sub(state.tags.len());
        return Err(invalid(format!("the cluster holds {max} tags at most; there is room for {room} more")));
    }
    Ok(())
}

/// The record of `tag` if it exists and is not archived.
pub(crate) fn live<'a>(state: &'a mut State, tag: &str) -> Result<&'a mut TagRecord, ApplyError> {
    live_in(&mut state.tags, tag)
}

/// The record of `tag` in `tags` if it exists and is not archived.
pub(crate) fn live_in<'a>(
    tags: &'a mut std::collections::BTreeMap<String, TagRecord>,
    tag: &str,
) -> Result<&'a mut TagRecord, ApplyError> {
    match tags.get_mut(tag) {
        None => Err(ApplyError::TagNotFound(tag.to_string())),
        Some(r) if r.archived_ms().is_some() => Err(ApplyError::TagArchived(tag.to_string())),
        Some(r) => Ok(r),
    }
}

/// Archives `tag` at leader time `at_ms` (see [`TagRecord::archived_ms`]).
pub(crate) fn archive(state: &mut State, at_ms: i64, tag: &str, changes: &mut Changes) -> ApplyResult {
    let record = live(state, tag)?;
    record.set_archived_ms(Some(at_ms));
    record.updated_ms = at_ms;
    changes.tag(tag);
    Ok(Applied::Tag { tag: tag.to_string(), record: record.clone() })
}

/// Brings an archived `tag` back: it allocates again from where its counter stopped.
pub(crate) fn restore(state: &mut State, at_ms: i64, tag: &str, changes: &mut Changes) -> ApplyResult {
    let record = state.tags.get_mut(tag).ok_or_else(|| ApplyError::TagNotFound(tag.to_string()))?;
    if record.archived_ms().is_none() {
        return Err(invalid(format!("tag {tag:?} is not archived")));
    }
    record.set_archived_ms(None);
    record.updated_ms = at_ms;
    changes.tag(tag);
    Ok(Applied::Tag { tag: tag.to_string(), record: record.clone() })
}

/// Changes the given fields of `tag` (its step, its description) at leader time `at_ms`.
pub(crate) fn update(
    state: &mut State,
    at_ms: i64,
    tag: &str,
    (step, description): (Option<i64>, Option<&str>),
    changes: &mut Changes,
) -> ApplyResult {
    let record = live(state, tag)?;
    if let Some(step) = step {
        record.step = step;
    }
    if let Some(d) = description {
        record.set_description(d.to_string());
    }
    record.updated_ms = at_ms;
    changes.tag(tag);
    Ok(Applied::Tag { tag: tag.to_string(), record: record.clone() })
}

/// Reserves up to `step` IDs of `tag` at leader time `at_ms`, as its profile counts them
/// ([`crate::profile::allocate`]).
pub(crate) fn allocate(state: &mut State, at_ms: i64, tag: &str, step: i64, changes: &mut Changes) -> ApplyResult {
    allocation(state, at_ms, tag, step, changes).map(Applied::Segment)
}

/// Applies the allocations of a group in order, each as if alone: one that fails (an unknown
/// or exhausted tag) changes nothing and leaves the others as they are.
pub(crate) fn allocate_each(state: &mut State, at_ms: i64, asks: &[SegmentAsk], changes: &mut Changes) -> ApplyResult {
    let results = asks.iter().map(|a| allocation(state, at_ms, &a.tag, a.step, changes)).collect();
    Ok(Applied::Segments(results))
}

fn allocation(
    state: &mut State,
    at_ms: i64,
    tag: &str,
    step: i64,
    changes: &mut Changes,
) -> Result<Allocation, ApplyError> {
    if crate::regions::from_blocks(state, tag)? {
        return crate::regions::cut(state, at_ms, tag, step, changes);
    }
    let record = live(state, tag)?;
    let allocation = crate::profile::allocate(tag, record, step, at_ms)?;
    record.updated_ms = at_ms;
    changes.tag(tag);
    Ok(allocation)
}

#[cfg(test)]
mod tests {
    use super::{Allocation, TagRecord, LEGACY_MAX_TAGS, MAX_TAGS};
    use crate::apply::{apply, Applied, ApplyError, Changes};
    use crate::command::{Command, Op};
    use crate::profile::StoredProfile;
    use crate::state::State;
    use crate::testing::{alloc, ap, at, cmd, create};

    fn batch(tags: &[&str]) -> Command {
        let tags = tags.iter().map(|t| super::NewTag::segment(t.to_string(), 10, 5, String::new())).collect();
        cmd(Op::CreateTags { tags })
    }

    /// A batch creates the tags that do not exist, answers the others untouched, is idempotent,
    /// writes a `TagCreated` record per tag it created, and fits `MAX_TAGS` whole or not at all.
    #[test]
    fn a_batch_creates_what_is_new_and_fits_the_limit_whole() {
        let mut s = State::default();
        ap(&mut s, &create("a", 10, 1)).unwrap();
        ap(&mut s, &alloc("a", 10)).unwrap();
        let mut c = Changes::default();
        let r = apply(&mut s, &batch(&["c", "a", "b"]), &mut c);
        assert_eq!(r, Ok(Applied::Tags { created: vec!["c".into(), "b".into()], existing: vec!["a".into()] }));
        assert_eq!(c.tags, ["b".to_string(), "c".to_string()].into(), "only the new tags are written");
        assert_eq!(s.tags["a"].max_id, 11, "an existing tag is left as it was");
        assert_eq!((s.tags["b"].max_id, s.tags["b"].step), (5, 10));
        let created: Vec<_> = s.audit.records.iter().filter_map(|r| r.action.tag()).collect();
        assert_eq!(created, ["a", "c", "b"], "a record per tag created, in the batch's order");
        // Again: every tag exists; nothing is written.
        let before = s.clone();
        let mut c = Changes::default();
        let r = apply(&mut s, &batch(&["a", "b", "c"]), &mut c);
        assert!(
            matches!(r, Ok(Applied::Tags { ref created, ref existing }) if created.is_empty() && existing.len() == 3)
        );
        assert!(c.is_empty(), "{c:?}");
        assert_eq!(s, before);
        // Names twice, an empty batch, an invalid field: refused whole.
        for bad in [batch(&["d", "d"]), batch(&[]), batch(&["e", "bad tag"])] {
            assert!(matches!(ap(&mut s, &bad), Err(ApplyError::Invalid(_))), "{bad:?}");
        }
        assert_eq!(s, before);
        // The bound: room for one more tag takes a batch with one new tag, not one with two.
        for i in s.tags.len()..MAX_TAGS - 1 {
            s.tags.insert(format!("z{i}"), TagRecord::default());
        }
        let full = s.clone();
        assert!(matches!(ap(&mut s, &batch(&["x", "y", "a"])), Err(ApplyError::Invalid(_))));
        assert_eq!(s, full, "a batch past the bound creates none of its tags");
        assert!(matches!(ap(&mut s, &batch(&["x", "a"])), Ok(Applied::Tags { ref created, .. }) if created.len() == 1));
        assert_eq!(s.tags.len(), MAX_TAGS);
    }

    /// A record encodes byte for byte as the flat layout and decodes from it; a plain tag
    /// holds no box, and clearing a field drops the box again (equality stays by field).
    #[test]
    fn a_record_encodes_flat_and_boxes_only_what_differs() {
        use leaf_api::codec;
        assert_eq!(std::mem::size_of::<TagRecord>(), 40);
        let plain = TagRecord::plain(7, 10, 1, 2);
        let full = plain
            .clone()
            .with_description("d".into())
            .with_profile(StoredProfile::Obfuscated { key: [9; crate::OBFUSCATION_KEY_BYTES] })
            .with_upper_bound(Some(99))
            .with_archived_ms(Some(5));
        let flat = |r: &TagRecord| super::Flat {
            max_id: r.max_id,
            step: r.step,
            description: r.description().to_string(),
            created_ms: r.created_ms,
            updated_ms: r.updated_ms,
            profile: r.profile().clone(),
            upper_bound: r.upper_bound(),
            archived_ms: r.archived_ms(),
        };
        for r in [&plain, &full] {
            let bytes = codec::encode(r).unwrap();
            assert_eq!(bytes, codec::encode(&flat(r)).unwrap());
            assert_eq!(&codec::decode::<TagRecord>(&bytes).unwrap(), r);
            assert_eq!(codec::decode::<super::Flat>(&bytes).unwrap(), flat(r));
        }
        assert_eq!((full.description(), full.upper_bound(), full.archived_ms()), ("d", Some(99), Some(5)));
        assert!(plain.extra.is_none());
        let mut r = plain.clone();
        r.set_archived_ms(Some(3));
        assert!(r.extra.is_some());
        r.set_archived_ms(None);
        assert!(r.extra.is_none());
        assert_eq!(r, plain);
        assert!(TagRecord::new(1, 10, 7, "").extra.is_none());
        assert!(codec::decode::<TagRecord>(&codec::encode(&flat(&plain)).unwrap()).unwrap().extra.is_none());
    }

    #[test]
    fn an_archived_tag_allocates_nothing_and_its_name_is_never_reused() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, 1)).unwrap();
        ap(&mut s, &alloc("t", 10)).unwrap();
        let archive = at(5, Op::ArchiveTag { tag: "t".into() });
        assert!(matches!(ap(&mut s, &archive), Ok(Applied::Tag { ref record, .. }) if record.archived_ms() == Some(5)));
        let archived = s.clone();
        for refused in [
            alloc("t", 10),
            create("t", 10, 1),
            archive.clone(),
            at(6, Op::UpdateTag { tag: "t".into(), step: Some(5), description: None }),
        ] {
            let mut c = Changes::default();
            let r = apply(&mut s, &refused, &mut c);
            assert!(matches!(r, Err(ApplyError::TagArchived(_) | ApplyError::TagExists(_))), "{refused:?}: {r:?}");
            assert!(c.is_empty());
            assert_eq!(s, archived);
        }
        // Restored, it goes on from where it stopped: no ID twice.
        ap(&mut s, &at(7, Op::RestoreTag { tag: "t".into() })).unwrap();
        assert_eq!(
            ap(&mut s, &alloc("t", 10)).unwrap(),
            Applied::Segment(Allocation { start: 11, end: 21, stored_step: 10 })
        );
        assert!(ap(&mut s, &at(8, Op::RestoreTag { tag: "t".into() })).is_err(), "not archived");
        assert_eq!(ap(&mut s, &at(8, Op::ArchiveTag { tag: "u".into() })), Err(ApplyError::TagNotFound("u".into())));
    }

    #[test]
    fn allocations_are_contiguous_and_disjoint() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, 1)).unwrap();
        let a = ap(&mut s, &alloc("t", 10)).unwrap();
        let b = ap(&mut s, &alloc("t", 25)).unwrap();
        assert_eq!(a, Applied::Segment(Allocation { start: 1, end: 11, stored_step: 10 }));
        assert_eq!(b, Applied::Segment(Allocation { start: 11, end: 36, stored_step: 10 }));
        assert_eq!(s.tags["t"].max_id, 36);
    }

    /// A group applies each allocation as if alone, in order: the same state and answers as
    /// the single entries, a failing one changing nothing, and each tag's key noted.
    #[test]
    fn a_group_of_allocations_is_each_allocation_alone_in_order() {
        use crate::command::SegmentAsk;
        let setup = || {
            let mut s = State::default();
            ap(&mut s, &create("a", 10, 1)).unwrap();
            ap(&mut s, &create("b", 10, i64::MAX - 15)).unwrap();
            s
        };
        let asks = [("a", 10), ("nope", 5), ("b", 10), ("a", 25), ("b", 10), ("b", 1)];
        let mut alone = setup();
        let expected: Vec<_> = asks
            .iter()
            .map(|(t, step)| match ap(&mut alone, &alloc(t, *step)) {
                Ok(Applied::Segment(a)) => Ok(a),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e),
            })
            .collect();
        let mut grouped = setup();
        let mut changes = Changes::default();
        let group = Op::AllocateSegments {
            asks: asks.iter().map(|(t, step)| SegmentAsk { tag: t.to_string(), step: *step, node_id: 1 }).collect(),
        };
        let got = apply(&mut grouped, &cmd(group), &mut changes).unwrap();
        assert_eq!(got, Applied::Segments(expected.clone()));
        assert_eq!(grouped, alone);
        assert!(matches!(expected[1], Err(ApplyError::TagNotFound(_))));
        assert!(matches!(expected[5], Err(ApplyError::TagExhausted { .. })));
        assert_eq!(changes.tags.iter().map(String::as_str).collect::<Vec<_>>(), vec!["a", "b"]);
        // Empty or too big: refused whole, nothing changed.
        let many = (0..=super::MAX_SEGMENT_ASKS).map(|_| SegmentAsk { tag: "a".into(), step: 1, node_id: 1 }).collect();
        for asks in [Vec::new(), many] {
            let before = grouped.clone();
            let r = ap(&mut grouped, &cmd(Op::AllocateSegments { asks }));
            assert!(matches!(r, Err(ApplyError::Invalid(_))), "{r:?}");
            assert_eq!(grouped, before);
        }
    }

    #[test]
    fn overflow_is_exhaustion_not_wrap() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, i64::MAX - 15)).unwrap();
        assert!(ap(&mut s, &alloc("t", 10)).is_ok());
        // The last five IDs come as a range cut short at i64::MAX (exclusive).
        let last = ap(&mut s, &alloc("t", 10)).unwrap();
        assert_eq!(last, Applied::Segment(Allocation { start: i64::MAX - 5, end: i64::MAX, stored_step: 10 }));
        let before = s.clone();
        let err = ap(&mut s, &alloc("t", 1)).unwrap_err();
        assert!(matches!(err, ApplyError::TagExhausted { max_id: i64::MAX, step: 1, .. }), "{err:?}");
        assert_eq!(s, before, "a failed allocation must not change the state");
    }

    #[test]
    fn unknown_tag() {
        let mut s = State::default();
        assert_eq!(ap(&mut s, &alloc("nope", 1)), Err(ApplyError::TagNotFound("nope".into())));
        let upd = cmd(Op::UpdateTag { tag: "nope".into(), step: Some(5), description: None });
        assert_eq!(ap(&mut s, &upd), Err(ApplyError::TagNotFound("nope".into())));
        assert_eq!(s, State::default());
    }

    #[test]
    fn duplicate_create_keeps_the_original() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, 1)).unwrap();
        ap(&mut s, &alloc("t", 10)).unwrap();
        assert_eq!(ap(&mut s, &create("t", 99, 0)), Err(ApplyError::TagExists("t".into())));
        assert_eq!(s.tags["t"].max_id, 11);
        assert_eq!(s.tags["t"].step, 10);
    }

    #[test]
    fn update_changes_only_given_fields_and_stamps_time() {
        let mut s = State::default();
        ap(&mut s, &create("t", 10, 1)).unwrap();
        let upd = Command {
            at_ms: 1_800_000_000_000,
            op: Op::UpdateTag { tag: "t".into(), step: Some(20), description: None },
        };
        ap(&mut s, &upd).unwrap();
        let r = &s.tags["t"];
        assert_eq!((r.step, r.description(), r.max_id), (20, "d", 1));
        assert_eq!((r.created_ms, r.updated_ms), (1_700_000_000_000, 1_800_000_000_000));
        let a = ap(&mut s, &alloc("t", 7)).unwrap();
        assert_eq!(a, Applied::Segment(Allocation { start: 1, end: 8, stored_step: 20 }));
    }

    /// A single creation stops at `LEGACY_MAX_TAGS`, the bound earlier releases apply to it
    /// (every node of a mixed cluster answers alike); a batch goes on to `MAX_TAGS`.
    #[test]
    fn the_tag_count_is_bounded() {
        let mut s = State::default();
        let record = TagRecord { max_id: 0, step: 1, ..TagRecord::default() }.with_profile(StoredProfile::Segment);
        for i in 0..LEGACY_MAX_TAGS {
            s.tags.insert(format!("t{i}"), record.clone());
        }
        let before = s.clone();
        let mut changes = Changes::default();
        let r = apply(&mut s, &create("one-more", 10, 1), &mut changes);
        assert!(matches!(r, Err(ApplyError::Invalid(ref m)) if m.contains("40000 tags")), "{r:?}");
        assert_eq!(s, before);
        assert!(changes.is_empty());
        // Existing tags still work at the bound; an existing name is still "exists".
        assert!(ap(&mut s, &alloc("t7", 5)).is_ok());
        assert_eq!(ap(&mut s, &create("t7", 10, 1)), Err(ApplyError::TagExists("t7".into())));
        s.tags.remove("t0");
        assert!(ap(&mut s, &create("one-more", 10, 1)).is_ok());
        // A batch of one passes the single creations' bound.
        assert!(matches!(ap(&mut s, &batch(&["beyond"])), Ok(Applied::Tags { ref created, .. }) if created.len() == 1));
        assert_eq!(s.tags.len(), LEGACY_MAX_TAGS + 1);
        assert!(matches!(ap(&mut s, &create("single", 10, 1)), Err(ApplyError::Invalid(_))));
    }
}
