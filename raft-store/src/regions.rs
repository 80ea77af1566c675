//! Regions: several leaf clusters serving one ID space, each from what a global tier granted it
//! ([`crate::version`] 3). Pure, like the rest of [`crate::apply::apply`].
//!
//! Two sides, each in the replicated state of its own cluster ([`Regions`]):
//! - **The global tier** is a leaf cluster whose voters sit in three or more regions. It keeps
//!   the registry ([`Regions::registry`]): each region's ID and snowflake worker range
//!   ([`Op::JoinRegion`](crate::Op::JoinRegion)), never given to another region, not even once
//!   the region is retired ([`Op::RetireRegion`](crate::Op::RetireRegion)). It hands each
//!   region blocks of a tag's counter ([`Op::GrantBlock`](crate::Op::GrantBlock)): an ordinary
//!   allocation of the tag on the global tier, so two blocks never overlap for the same reason
//!   two segments never do.
//! - **A regional cluster** records once which region it is
//!   ([`Op::AdoptRegion`](crate::Op::AdoptRegion), [`Regions::here`]) and, per tag, the blocks
//!   the global tier granted it ([`Op::AdoptBlock`](crate::Op::AdoptBlock),
//!   [`Regions::blocks`]). From then on its segment allocations are cut from its blocks
//!   ([`cut`]) and its snowflake workers keep to its range ([`Identity::workers`]).
//!
//! A cluster is one or the other: a global tier never adopts a region, a region never
//! registers one.
use std::collections::{BTreeMap, VecDeque};
use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

use crate::apply::{invalid, Applied, ApplyError, ApplyResult, Changes};
use crate::profile::StoredProfile;
use crate::state::State;
use crate::tags::Allocation;
use crate::workers::WORKER_IDS;

pub mod homes;
pub use homes::{Home, Lease, HOME_GRACE_MS, HOME_LEASE_MS, MAX_LEASE_HOMES};

/// Most regions a global tier registers over its life (retired ones count: their IDs and
/// worker ranges are never reused).
pub const MAX_REGIONS: usize = 64;
pub use leaf_api::regions::MAX_REGION_NAME;
/// Most blocks a tag of a region holds beyond the one it serves from: the refill asks for the
/// next block well before the current one runs out, so one or two are the rule.
pub const MAX_QUEUED_BLOCKS: usize = 8;

/// A region as the global tier registered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionRecord {
    /// The region's ID, from 1, in the order regions joined; never reused.
    pub id: u16,
    /// The snowflake worker IDs `first_worker..=last_worker` are the region's alone.
    pub first_worker: u16,
    pub last_worker: u16,
    /// Leader time of the join (Unix ms).
    pub joined_ms: i64,
    /// Leader time of the retirement, if an operator retired the region: it gets no block
    /// and no worker range any more, and its name, ID and range stay taken.
    pub retired_ms: Option<i64>,
}

impl RegionRecord {
    /// The worker IDs the region holds.
    pub fn workers(&self) -> RangeInclusive<u16> {
        self.first_worker..=self.last_worker
    }
}

/// Which region a regional cluster is, as the global tier granted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub name: String,
    pub id: u16,
    pub first_worker: u16,
    pub last_worker: u16,
}

impl Identity {
    /// The worker IDs this region's snowflake workers keep to.
    pub fn workers(&self) -> RangeInclusive<u16> {
        self.first_worker..=self.last_worker
    }
}

/// A half-open range `[start, end)` of a tag's counter granted to a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub start: i64,
    pub end: i64,
}

/// A tag's blocks in a regional cluster. The tag's counter (`max_id`) is the next ID of the
/// block it serves from, which ends at `end`; once the counter reaches `end` the next queued
/// block begins.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagBlocks {
    /// The end of the block the counter is in (the counter itself when there is none).
    pub end: i64,
    /// Blocks adopted and not begun, in order.
    pub queued: VecDeque<Block>,
    /// The highest end ever adopted: a block must start at or above it.
    pub high: i64,
}

impl TagBlocks {
    /// IDs left to allocate with the counter at `max_id`: the rest of the current block and
    /// every queued one.
    pub fn remaining(&self, max_id: i64) -> i64 {
        let current = self.end.saturating_sub(max_id).max(0);
        self.queued.iter().fold(current, |sum, b| sum.saturating_add(b.end - b.start))
    }
}

/// What a cluster holds of regions (empty in a cluster that is neither side).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Regions {
    /// The global tier's registry, by region name.
    pub registry: BTreeMap<String, RegionRecord>,
    /// The region this cluster is, once adopted.
    pub here: Option<Identity>,
    /// A regional cluster's blocks, by tag.
    pub blocks: BTreeMap<String, TagBlocks>,
    /// Homed tags' homes ([`homes`]): on the global tier as decided, in a region as learnt.
    pub homes: BTreeMap<String, Home>,
    /// The global tier's leases of regions' homes: the end of each region's (leader time).
    pub leases: BTreeMap<String, i64>,
}

/// What a region adoption or a block adoption answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegionAnswer {
    /// A region as registered (join, retire) on the global tier.
    Registered { name: String, record: RegionRecord },
    /// The region this cluster adopted.
    Adopted(Identity),
    /// A tag's blocks after an adoption, with the tag's counter.
    Blocks { tag: String, max_id: i64, blocks: TagBlocks },
    /// A tag's home after a claim, a move, a release or an adoption.
    Home { tag: String, home: Home },
    /// A region's renewed lease.
    Lease(Lease),
}

/// Whether region ID `id` with worker IDs `first..=last` can be a region's: IDs start at 1,
/// and the worker IDs are a range within the 1024. What a command carries and what a peer or
/// the global tier answers are both held to it.
pub fn check_region_fields(id: u16, first: u16, last: u16) -> Result<(), String> {
    if id == 0 || first > last || last >= WORKER_IDS {
        return Err(format!(
            "region ID {id} with worker IDs {first}..={last}: IDs start at 1, and the worker IDs are a range \
             within 0..{WORKER_IDS}"
        ));
    }
    Ok(())
}

/// Whether `[start, end)` can be the block granted for a request of `size` IDs at or above
/// `above`: not empty, no longer than asked (shorter only where the tag's space ends), and not
/// below `above`. The global tier's leader's answer and the block a region adopts are both
/// held to it.
pub fn check_grant(block: Block, size: i64, above: i64) -> Result<(), String> {
    let len = block.end.checked_sub(block.start);
    if block.start < above || len.is_none_or(|len| len < 1 || len > size) {
        return Err(format!("block [{}, {}) for a grant of {size} IDs at or above {above}", block.start, block.end));
    }
    Ok(())
}

/// An [`ApplyError::RegionConflict`] saying `msg`.
pub(crate) fn conflict(msg: impl Into<String>) -> ApplyError {
    ApplyError::RegionConflict(msg.into())
}

/// Checks a region name ([`leaf_api::regions::validate_region_name`]).
pub fn validate_name(name: &str) -> Result<(), ApplyError> {
    leaf_api::regions::validate_region_name(name).map_err(|e| invalid(e.to_string()))
}

/// Registers region `name` with `workers` worker IDs at leader time `at_ms` (global tier). A
/// region that joined before gets its record again; a retired one is refused.
pub(crate) fn join(state: &mut State, at_ms: i64, name: &str, workers: u16, changes: &mut Changes) -> ApplyResult {
    if state.regions.here.is_some() {
        return Err(conflict("this cluster is a region: only the global tier registers regions"));
    }
    let registered = |name: &str, record: &RegionRecord| {
        Applied::Region(RegionAnswer::Registered { name: name.to_string(), record: record.clone() })
    };
    if let Some(record) = state.regions.registry.get(name) {
        if record.retired_ms.is_some() {
            return Err(ApplyError::RegionRetired(name.to_string()));
        }
        return Ok(registered(name, record));
    }
    if state.regions.registry.len() >= MAX_REGIONS {
        return Err(conflict(format!("the global tier has registered {MAX_REGIONS} regions, its most")));
    }
    let first = free_workers(state, workers).ok_or_else(|| {
        conflict(format!(
            "no {workers} consecutive snowflake worker IDs are free: every region ever registered keeps its range, \
             and the global tier's own workers hold theirs"
        ))
    })?;
    let id = state.regions.registry.values().map(|r| r.id).max().unwrap_or(0) + 1;
    let record = RegionRecord {
        id,
        first_worker: first,
        last_worker: first + (workers - 1),
        joined_ms: at_ms,
        retired_ms: None,
    };
    state.regions.registry.insert(name.to_string(), record.clone());
    changes.regions.insert(name.to_string());
    Ok(registered(name, &record))
}

/// The lowest first ID of `n` consecutive worker IDs that no region ever held and that this
/// cluster's own workers never held: a worker record of the global tier, even a reclaimable
/// one, carries a high-water mark a region's fresh record would not start above.
fn free_workers(state: &State, n: u16) -> Option<u16> {
    let taken =
        |id: u16| state.regions.registry.values().any(|r| r.workers().contains(&id)) || state.workers.contains_key(&id);
    let mut first = 0u16;
    while u32::from(first) + u32::from(n) <= u32::from(WORKER_IDS) {
        match (first..first + n).find(|id| taken(*id)) {
            None => return Some(first),
            Some(busy) => first = busy + 1,
        }
    }
    None
}

/// Retires region `name` at leader time `at_ms` (global tier): it gets no block any more.
/// Retiring it again answers the record as it is.
pub(crate) fn retire(state: &mut State, at_ms: i64, name: &str, changes: &mut Changes) -> ApplyResult {
    let record = state.regions.registry.get_mut(name).ok_or_else(|| ApplyError::RegionNotFound(name.to_string()))?;
    if record.retired_ms.is_none() {
        record.retired_ms = Some(at_ms);
        changes.regions.insert(name.to_string());
    }
    Ok(Applied::Region(RegionAnswer::Registered { name: name.to_string(), record: record.clone() }))
}

/// Grants region `region` a block of `size` IDs of `tag` (global tier), starting at or above
/// `above` (a region's counter from before it joined). An ordinary allocation of the tag, so
/// blocks never overlap one another or any segment the global tier itself allocated.
pub(crate) fn grant(
    state: &mut State,
    at_ms: i64,
    (region, tag): (&str, &str),
    (size, above): (i64, i64),
    changes: &mut Changes,
) -> ApplyResult {
    match state.regions.registry.get(region) {
        None => return Err(ApplyError::RegionNotFound(region.to_string())),
        Some(r) if r.retired_ms.is_some() => return Err(ApplyError::RegionRetired(region.to_string())),
        Some(_) => {}
    }
    let record = crate::tags::live_in(&mut state.tags, tag)?;
    check_blockable(tag, record.profile())?;
    homes::check_grant_to(&state.regions, at_ms, (region, tag), record.profile())?;
    // On a copy: a refused grant (past the tag's bound) changes nothing. Raising the counter
    // only skips IDs: none below it was handed out twice.
    let mut next = record.clone();
    next.max_id = next.max_id.max(above);
    let allocation = crate::profile::allocate(tag, &mut next, size, at_ms)?;
    next.updated_ms = at_ms;
    *record = next;
    changes.tag(tag);
    Ok(Applied::Segment(allocation))
}

/// Refuses a profile whose IDs are not cut from blocks: a daily counter restarts each day, a
/// gapless series numbers one key at a time at its home ([`homes`]), and an obfuscated tag's
/// key would differ between regions that each created it (their IDs could then meet). A
/// monotonic tag's are, at its home only ([`homes::check_here`], checked where it is served).
/// Daily and obfuscated tags are served at their home from its own counter instead, from
/// cluster version 5 ([`from_blocks`]).
fn check_blockable(tag: &str, profile: &StoredProfile) -> Result<(), ApplyError> {
    match profile {
        StoredProfile::Segment | StoredProfile::Monotonic => Ok(()),
        StoredProfile::Obfuscated { .. } | StoredProfile::Daily { .. } | StoredProfile::Gapless { .. } => {
            Err(ApplyError::NotBlockable { tag: tag.to_string(), profile: profile.kind().as_str().to_string() })
        }
    }
}

/// Refuses the creation of a tag a region would not serve, in a region: a tag of a profile
/// that is homed only from a later cluster version ([`homes::homed_at`]) — a monotonic tag or
/// a gapless series before version 4, a daily or obfuscated tag before version 5 — since
/// without claims it would wait for a home for ever. From then on its region's leader claims
/// its home (`node/src/regions/homes.rs`). Deterministic: every node holds the same active
/// version at the same entry.
pub(crate) fn check_new_tag(state: &State, tag: &str, profile: &StoredProfile) -> Result<(), ApplyError> {
    if state.regions.here.is_none() || homes::homed_at(state.version, profile) {
        return Ok(());
    }
    if homes::is_homed(profile) {
        return Err(ApplyError::NotBlockable { tag: tag.to_string(), profile: profile.kind().as_str().to_string() });
    }
    check_blockable(tag, profile)
}

/// Checks that `tag`, of `profile`, is served from blocks here: anywhere for a plain tag, at
/// its home for a monotonic one.
fn check_served(regions: &Regions, tag: &str, profile: &StoredProfile) -> Result<(), ApplyError> {
    check_blockable(tag, profile)?;
    if homes::is_homed(profile) {
        homes::check_here(regions, tag)?;
    }
    Ok(())
}

/// Makes this cluster region `identity` at leader time `at_ms`. Adopting the same identity
/// again answers it; another one is refused. Refused while a snowflake worker of this cluster
/// outside the region's range may still be issuing IDs (its lease and grace not run out): it
/// may collide with a worker of the region that holds that ID.
pub(crate) fn adopt(state: &mut State, at_ms: i64, identity: &Identity, changes: &mut Changes) -> ApplyResult {
    if !state.regions.registry.is_empty() {
        return Err(conflict("this cluster is a global tier: it registers regions and is none"));
    }
    match &state.regions.here {
        Some(here) if here == identity => return Ok(Applied::Region(RegionAnswer::Adopted(here.clone()))),
        Some(here) => {
            return Err(conflict(format!(
                "this cluster is region {:?} (ID {}): a cluster adopts one region, once",
                here.name, here.id
            )))
        }
        None => {}
    }
    let range = identity.workers();
    let outside =
        state.workers.iter().find(|(id, w)| !range.contains(id) && !w.reclaimable(at_ms, &Default::default()));
    if let Some((id, w)) = outside {
        return Err(conflict(format!(
            "snowflake worker ID {id} (node {}) lies outside the region's worker IDs {}..={} and its lease may run until \
             {} ms: stop its node's snowflake service or let the lease and its grace run out, then adopt again",
            w.node_id,
            identity.first_worker,
            identity.last_worker,
            w.lease_expires_ms.saturating_add(w.lease_ms)
        )));
    }
    state.regions.here = Some(identity.clone());
    changes.region = true;
    Ok(Applied::Region(RegionAnswer::Adopted(identity.clone())))
}

/// Adds `block` to `tag`'s blocks (regional cluster). A block must lie above everything the
/// tag could have handed out: above its counter when it adopts its first block, above every
/// block adopted before it after that. One below is refused (a grant whose answer came late,
/// after a later one): its IDs become a gap.
pub(crate) fn adopt_block(state: &mut State, tag: &str, block: Block, changes: &mut Changes) -> ApplyResult {
    if state.regions.here.is_none() {
        return Err(conflict("this cluster is no region: it adopts no block"));
    }
    let record = crate::tags::live_in(&mut state.tags, tag)?;
    check_served(&state.regions, tag, record.profile())?;
    let max_id = record.max_id;
    let mut blocks = state.regions.blocks.get(tag).cloned().unwrap_or_else(|| TagBlocks {
        end: max_id,
        queued: VecDeque::new(),
        high: max_id,
    });
    if block.start < blocks.high {
        return Err(conflict(format!(
            "block [{}, {}) of tag {tag:?} starts below {}, where the tag's adopted IDs end: its IDs stay unused",
            block.start, block.end, blocks.high
        )));
    }
    if blocks.queued.len() >= MAX_QUEUED_BLOCKS {
        return Err(conflict(format!("tag {tag:?} holds {MAX_QUEUED_BLOCKS} blocks not begun, its most")));
    }
    blocks.queued.push_back(block);
    blocks.high = block.end;
    state.regions.blocks.insert(tag.to_string(), blocks.clone());
    changes.blocks.insert(tag.to_string());
    let answer = RegionAnswer::Blocks { tag: tag.to_string(), max_id, blocks: blocks.clone() };
    Ok(Applied::Region(answer))
}

/// The worker IDs of `within` a node of this cluster may register: in a region only its own;
/// on a global tier (checked by [`may_hold`] as the registration looks for a free ID) none of
/// a region's.
pub(crate) fn worker_range(state: &State, within: RangeInclusive<u16>) -> Result<RangeInclusive<u16>, ApplyError> {
    let Some(here) = &state.regions.here else { return Ok(within) };
    let (first, last) = ((*within.start()).max(here.first_worker), (*within.end()).min(here.last_worker));
    if first > last {
        return Err(invalid(format!(
            "worker IDs {}..={} hold none of region {:?}'s, {}..={}",
            within.start(),
            within.end(),
            here.name,
            here.first_worker,
            here.last_worker
        )));
    }
    Ok(first..=last)
}

/// Whether a worker of this cluster may hold worker ID `id`: in a region one of its own, on a
/// global tier none that a region ever held.
pub(crate) fn may_hold(state: &State, id: u16) -> bool {
    may_hold_in(&state.regions, id)
}

/// [`may_hold`] of the regions a state holds.
pub(crate) fn may_hold_in(regions: &Regions, id: u16) -> bool {
    match &regions.here {
        Some(here) => here.workers().contains(&id),
        None => !regions.registry.values().any(|r| r.workers().contains(&id)),
    }
}

/// How this cluster numbers a segment of `tag`: `true` from blocks ([`cut`]), as a region does
/// its plain and monotonic tags; `false` from the tag's own counter, as a cluster that is no
/// region does every tag, and a region its daily and obfuscated tags from cluster version 5,
/// at their home alone ([`homes`]). A region refuses one of those whose home is elsewhere or
/// not yet learnt, and before version 5 every one.
pub(crate) fn from_blocks(state: &State, tag: &str) -> Result<bool, ApplyError> {
    let regions = &state.regions;
    if regions.here.is_none() {
        return Ok(false);
    }
    let Some(profile) = state.tags.get(tag).map(|r| r.profile()) else { return Ok(true) };
    if !homes::own_counter(profile) {
        return Ok(true);
    }
    if !homes::homed_at(state.version, profile) {
        return Err(ApplyError::NotBlockable { tag: tag.to_string(), profile: profile.kind().as_str().to_string() });
    }
    homes::check_here(regions, tag)?;
    Ok(false)
}

/// Cuts up to `step` IDs of `tag` from its blocks (regional cluster) at leader time `at_ms`:
/// from the block the counter is in, else from the next queued one. A segment never crosses a
/// block's end, so it may be shorter than `step`. On error nothing changes.
pub(crate) fn cut(
    state: &mut State,
    at_ms: i64,
    tag: &str,
    step: i64,
    changes: &mut Changes,
) -> Result<Allocation, ApplyError> {
    let State { tags, regions, .. } = state;
    let record = crate::tags::live_in(tags, tag)?;
    check_served(regions, tag, record.profile())?;
    let no_block = || ApplyError::NoBlock(tag.to_string());
    let blocks = regions.blocks.get_mut(tag).ok_or_else(no_block)?;
    let (mut max_id, mut end, mut begins_next) = (record.max_id, blocks.end, false);
    if max_id >= end {
        let next = blocks.queued.front().ok_or_else(no_block)?;
        (max_id, end, begins_next) = (next.start, next.end, true);
    }
    let mut next = record.clone();
    next.max_id = max_id;
    let allocation = crate::profile::allocate(tag, &mut next, step.min(end - max_id), at_ms)?;
    next.updated_ms = at_ms;
    *record = next;
    if begins_next {
        blocks.queued.pop_front();
        blocks.end = end;
    }
    changes.tag(tag);
    changes.blocks.insert(tag.to_string());
    Ok(allocation)
}

#[cfg(test)]
mod tests;
