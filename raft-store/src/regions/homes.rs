//! Home regions ([`crate::version`] 4): a monotonic tag or a gapless series is served by one
//! region, its home, and refused by every other with the home's name. Pure, like the rest of
//! [`crate::apply::apply`]: times are the leader's, carried in the entry.
//!
//! **The global tier** decides homes ([`Regions::homes`](super::Regions::homes)):
//! - The first region to claim a tag ([`Op::ClaimHome`](crate::Op::ClaimHome)) is its home,
//!   epoch 1; a later claim answers the home as it is.
//! - Each region renews one lease ([`Op::RenewLease`](crate::Op::RenewLease)), every few
//!   seconds, that covers all its homes; the answer lists the tags homed there and the tags
//!   moving away from there.
//! - An operator moves a monotonic tag's home ([`Op::MoveHome`](crate::Op::MoveHome)): the
//!   epoch rises, and the new home gets no block before the old home let go of the tag
//!   ([`Op::ReleaseHome`](crate::Op::ReleaseHome)) or its lease and [`HOME_GRACE_MS`] ran
//!   out. The new home's blocks then come from the tag's global counter, above every block the
//!   old home ever held: monotonic order holds across the move.
//! - A block of a homed tag goes only to its home, once ready, while its lease runs.
//!
//! **A region** records what it learnt ([`Op::AdoptHome`](crate::Op::AdoptHome)) and serves a
//! homed tag only where it is the home: a monotonic tag from its blocks, a gapless series from
//! its own counter. Its leader also hands out a monotonic ID only while the lease it measured
//! (from before it asked) runs (`node/src/regions/lease.rs`). A home that learns the tag moved
//! away drops the tag's blocks: their unused IDs become gaps.
//!
//! From [`crate::version`] 5 daily and obfuscated tags have homes too, served from the home's
//! own counter: a daily counter restarts each day, and an obfuscated tag's key is the one its
//! home made. A cluster that served such a tag before it became a region goes on from its own
//! counter if it is the home; what it cannot know is another cluster's past (the book).
//!
//! A home served from its own counter never moves: a gapless series' ledger lives there, and
//! a daily or obfuscated tag's counter (and key) too; numbering it anywhere else would repeat
//! numbers.
use serde::{Deserialize, Serialize};

use super::{conflict, Regions};
use crate::apply::{Applied, ApplyError, ApplyResult, Changes};
use crate::profile::StoredProfile;
use crate::state::State;
use crate::version::ClusterVersion;

/// How long a renewed lease runs on the global tier, from the leader time of the renewal.
pub const HOME_LEASE_MS: i64 = 10_000;
/// What a moved home waits past the old home's lease, for the skew between the clocks of the
/// global tier's leaders and the old home's measure of its lease.
pub const HOME_GRACE_MS: i64 = 2_000;
/// Most homes a renewal lists (the region's own and those moving away): the tags a region may
/// serve with a home.
pub const MAX_LEASE_HOMES: usize = 100_000;

/// A tag's home, as the global tier decided it and as a region learnt it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Home {
    /// The region that serves the tag.
    pub region: String,
    /// 1 at the claim, one more at each move.
    pub epoch: u32,
    /// The home before the latest move.
    pub from: Option<String>,
    /// Leader time of the claim or the latest move.
    pub since_ms: i64,
    /// Leader time from which the home may take blocks: the claim, or after a move the old
    /// home's release or the end of its lease and grace.
    pub ready_ms: i64,
}

/// What a renewal answers: the lease's end (the global tier's leader time) and the region's
/// homes, with the tags moving away from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub until_ms: i64,
    pub homes: Vec<(String, Home)>,
}

/// Whether tags of `profile` are served at a home rather than from blocks anywhere (from the
/// cluster version [`homed_at`] names).
pub fn is_homed(profile: &StoredProfile) -> bool {
    !matches!(profile, StoredProfile::Segment)
}

/// Whether tags of `profile` have homes at cluster version `version`: monotonic tags and
/// gapless series from 4, daily and obfuscated tags from 5. Deterministic: every node holds the
/// same active version at the same entry.
pub fn homed_at(version: ClusterVersion, profile: &StoredProfile) -> bool {
    match profile {
        StoredProfile::Segment => false,
        StoredProfile::Monotonic | StoredProfile::Gapless { .. } => version >= ClusterVersion(4),
        StoredProfile::Daily { .. } | StoredProfile::Obfuscated { .. } => version >= ClusterVersion(5),
    }
}

/// Whether a home numbers tags of `profile` from its own counter rather than from blocks: a
/// daily or obfuscated tag (a gapless series too, but through its ledger, never as segments).
pub fn own_counter(profile: &StoredProfile) -> bool {
    matches!(profile, StoredProfile::Daily { .. } | StoredProfile::Obfuscated { .. })
}

/// Whether a home of tags of `profile` can move: a monotonic tag's, served from blocks. Every
/// other lives on its home's own counter or ledger.
fn movable(profile: &StoredProfile) -> bool {
    matches!(profile, StoredProfile::Monotonic)
}

/// The home `regions` knows of `tag`'s, answered as an [`ApplyError`] unless it is this region:
/// [`ApplyError::NotHome`] naming it, or [`ApplyError::HomeUnknown`] before the region learnt it.
pub(crate) fn check_here(regions: &Regions, tag: &str) -> Result<(), ApplyError> {
    let Some(here) = &regions.here else { return Ok(()) };
    match regions.homes.get(tag) {
        Some(home) if home.region == here.name => Ok(()),
        Some(home) => Err(ApplyError::NotHome { tag: tag.to_string(), home: home.region.clone() }),
        None => Err(ApplyError::HomeUnknown(tag.to_string())),
    }
}

/// Checks a grant of `tag` (of `profile`) to `region` at leader time `at_ms` (global tier): a
/// homed tag's blocks go to its home alone, once ready, while its lease runs.
pub(crate) fn check_grant_to(
    regions: &Regions,
    at_ms: i64,
    (region, tag): (&str, &str),
    profile: &StoredProfile,
) -> Result<(), ApplyError> {
    if !is_homed(profile) {
        return Ok(());
    }
    let home = regions.homes.get(tag).ok_or_else(|| {
        conflict(format!("tag {tag:?} has no home region yet: its home claims it before it takes a block"))
    })?;
    if home.region != region {
        return Err(ApplyError::NotHome { tag: tag.to_string(), home: home.region.clone() });
    }
    if at_ms < home.ready_ms {
        return Err(conflict(format!(
            "tag {tag:?} moved to region {region:?} (epoch {}): it takes blocks from {} ms, once the old home \
             let go of it or its lease ran out",
            home.epoch, home.ready_ms
        )));
    }
    if regions.leases.get(region).is_none_or(|until| *until <= at_ms) {
        return Err(conflict(format!("region {region:?} holds no lease: it renews one before it takes a block")));
    }
    Ok(())
}

/// A live region of the registry, or why not (global tier).
fn live_region(state: &State, region: &str) -> Result<(), ApplyError> {
    match state.regions.registry.get(region) {
        None => Err(ApplyError::RegionNotFound(region.to_string())),
        Some(r) if r.retired_ms.is_some() => Err(ApplyError::RegionRetired(region.to_string())),
        Some(_) => Ok(()),
    }
}

fn answer(tag: &str, home: &Home) -> ApplyResult {
    Ok(Applied::Region(super::RegionAnswer::Home { tag: tag.to_string(), home: home.clone() }))
}

/// Makes `region` the home of `tag` if it has none (global tier); answers the tag's home.
pub(crate) fn claim(state: &mut State, at_ms: i64, (region, tag): (&str, &str), changes: &mut Changes) -> ApplyResult {
    if let Some(home) = state.regions.homes.get(tag) {
        return answer(tag, home);
    }
    live_region(state, region)?;
    let version = state.version;
    let record = crate::tags::live(state, tag)?;
    if !homed_at(version, record.profile()) {
        return Err(conflict(format!(
            "tag {tag:?} is {}: it has no home at this cluster version",
            record.profile().kind().as_str()
        )));
    }
    let home = Home { region: region.to_string(), epoch: 1, from: None, since_ms: at_ms, ready_ms: at_ms };
    state.regions.homes.insert(tag.to_string(), home.clone());
    changes.homes.insert(tag.to_string());
    answer(tag, &home)
}

/// Moves `tag`'s home to region `to` at leader time `at_ms` (global tier, an operator's
/// change). Moving it where it is answers the home as it is.
pub(crate) fn move_home(state: &mut State, at_ms: i64, (tag, to): (&str, &str), changes: &mut Changes) -> ApplyResult {
    live_region(state, to)?;
    let record = crate::tags::live(state, tag)?;
    let profile = record.profile().clone();
    let home = state.regions.homes.get(tag).ok_or_else(|| {
        conflict(format!("tag {tag:?} has no home region yet: the first region to serve it claims it"))
    })?;
    if home.region == to {
        return answer(tag, home);
    }
    if !movable(&profile) {
        return Err(conflict(format!(
            "tag {tag:?} is {}: its counter lives at its home, region {:?}, and it never moves",
            profile.kind().as_str(),
            home.region
        )));
    }
    if at_ms < home.ready_ms {
        return Err(conflict(format!(
            "tag {tag:?} is moving to region {:?} until {} ms: move it again once that move is done",
            home.region, home.ready_ms
        )));
    }
    let old = home.region.clone();
    let lease_end = state.regions.leases.get(&old).copied().unwrap_or(i64::MIN);
    let moved = Home {
        region: to.to_string(),
        epoch: home.epoch.saturating_add(1),
        from: Some(old),
        since_ms: at_ms,
        ready_ms: at_ms.max(lease_end.saturating_add(HOME_GRACE_MS)),
    };
    state.regions.homes.insert(tag.to_string(), moved.clone());
    changes.homes.insert(tag.to_string());
    answer(tag, &moved)
}

/// Region `region` let go of `tag` after its home moved away in `epoch` (global tier): the
/// new home is ready at once. Any other release changes nothing and answers the home.
pub(crate) fn release(
    state: &mut State,
    at_ms: i64,
    (region, tag, epoch): (&str, &str, u32),
    changes: &mut Changes,
) -> ApplyResult {
    let home = state
        .regions
        .homes
        .get_mut(tag)
        .ok_or_else(|| conflict(format!("tag {tag:?} has no home region: there is nothing to let go of")))?;
    if home.epoch == epoch && home.from.as_deref() == Some(region) && home.ready_ms > at_ms {
        home.ready_ms = at_ms;
        changes.homes.insert(tag.to_string());
    }
    answer(tag, home)
}

/// Renews region `region`'s lease at leader time `at_ms` (global tier): until
/// `at_ms + HOME_LEASE_MS`; answers it with the tags homed at the region and those moving away
/// from it.
pub(crate) fn renew(state: &mut State, at_ms: i64, region: &str, changes: &mut Changes) -> ApplyResult {
    live_region(state, region)?;
    let until_ms = at_ms.saturating_add(HOME_LEASE_MS);
    state.regions.leases.insert(region.to_string(), until_ms);
    changes.leases.insert(region.to_string());
    let homes = state
        .regions
        .homes
        .iter()
        .filter(|(_, h)| h.region == region || (h.from.as_deref() == Some(region) && h.ready_ms > at_ms))
        .take(MAX_LEASE_HOMES)
        .map(|(t, h)| (t.clone(), h.clone()))
        .collect();
    Ok(Applied::Region(super::RegionAnswer::Lease(Lease { until_ms, homes })))
}

/// Records `tag`'s home as the global tier answered it (regional cluster). An epoch no newer
/// than the one known changes nothing. A newer one drops the tag's blocks: their unused IDs
/// become gaps, and the home takes new blocks, above every block of the epochs before.
pub(crate) fn adopt(state: &mut State, tag: &str, home: &Home, changes: &mut Changes) -> ApplyResult {
    let regions = &mut state.regions;
    if regions.here.is_none() {
        return Err(conflict("this cluster is no region: it adopts no home"));
    }
    let record = crate::tags::live_in(&mut state.tags, tag)?;
    if !homed_at(state.version, record.profile()) {
        return Err(conflict(format!("tag {tag:?} is {}: it has no home", record.profile().kind().as_str())));
    }
    let max_id = record.max_id;
    if let Some(known) = regions.homes.get(tag).filter(|known| known.epoch >= home.epoch) {
        return answer(tag, known);
    }
    // Blocks of an earlier epoch may lie below what another home issued since (this region
    // may not have learnt of a move away before the tag came back): never served from.
    if let Some(blocks) = regions.blocks.get_mut(tag) {
        blocks.queued.clear();
        blocks.end = max_id;
        blocks.high = blocks.high.max(max_id);
        changes.blocks.insert(tag.to_string());
    }
    regions.homes.insert(tag.to_string(), home.clone());
    changes.homes.insert(tag.to_string());
    answer(tag, home)
}

#[cfg(test)]
mod tests;
