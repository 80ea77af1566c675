//! Snowflake worker IDs in the replicated state: who holds which ([`WorkerRecord`]), what a
//! node gets ([`WorkerGrant`]), and how registration and renewal hand IDs out, fence a node
//! that left and recycle its ID. Pure, like the rest of [`crate::apply::apply`].
use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::apply::{Applied, ApplyError, ApplyResult, Changes};
use crate::state::State;

/// Number of snowflake worker IDs (10 bits).
pub const WORKER_IDS: u16 = 1024;
/// Bounds of a worker lease: at least a second, at most an hour.
pub const MIN_LEASE_MS: i64 = 1_000;
pub const MAX_LEASE_MS: i64 = 3_600_000;

/// How far a worker's high-water mark may run ahead of the leader's time stamp of its renewal
/// (a day). A node proposes its clock plus the time window (at most a minute) and refuses to
/// serve with a clock a second off its peers; a mark far beyond that would keep the worker ID
/// from issuing IDs for as long, so it is refused.
pub const MAX_HIGH_WATER_AHEAD_MS: i64 = 86_400_000;

/// A snowflake worker ID as held by a node.
///
/// Fencing: the holder stops issuing IDs when its lease runs out by its own monotonic clock,
/// measured from *before* it proposed the renewal, so it stops no later than
/// `lease_expires_ms` (stamped later, by the leader). The ID is given to another node only
/// once its holder has left the membership (it can no longer renew) and the leader's clock is
/// past `lease_expires_ms + lease_ms`: the extra lease length absorbs clock differences
/// between leaders and the old holder up to the lease TTL. The new holder starts strictly
/// after `high_water_ms`, which is then at least the time of the handover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerRecord {
    pub node_id: u64,
    /// No ID of this worker ID has a timestamp above this (Unix ms) as far as the log knows;
    /// a new holder starts strictly after it.
    pub high_water_ms: i64,
    /// Leader time (Unix ms) at which the lease runs out unless renewed.
    pub lease_expires_ms: i64,
    /// The lease length of the last registration or renewal.
    pub lease_ms: i64,
    /// When the current holder got the ID.
    pub since_ms: i64,
    /// The node that held the ID before, if it was recycled.
    pub previous_node_id: Option<u64>,
}

impl WorkerRecord {
    /// Whether the ID may go to another node at leader time `at_ms`.
    pub fn reclaimable(&self, at_ms: i64, members: &BTreeSet<u64>) -> bool {
        !members.contains(&self.node_id) && at_ms > self.lease_expires_ms.saturating_add(self.lease_ms)
    }
}

/// A worker ID given to (or kept by) a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerGrant {
    pub worker_id: u16,
    /// The holder must only issue timestamps strictly above this (Unix ms).
    pub not_before_ms: i64,
    pub lease_expires_ms: i64,
}

/// The node ID a worker record gets when its holder moved to an ID inside a new range: no
/// node has it (IDs start at 1), so the record is reclaimable once its lease and grace ran
/// out, and the next holder starts after its high-water mark.
pub const RELEASED: u64 = 0;

/// Gives `node_id` a worker ID within `range` at leader time `at_ms` on a lease of `lease_ms`:
/// the one it holds there again, or the lowest free or reclaimable one (releasing an ID it
/// holds outside the range). Only a member gets one.
pub(crate) fn register(
    state: &mut State,
    at_ms: i64,
    (node_id, lease_ms): (u64, i64),
    range: std::ops::RangeInclusive<u16>,
    changes: &mut Changes,
) -> ApplyResult {
    if !state.members.contains(&node_id) {
        return Err(ApplyError::NotAMember(node_id));
    }
    let lease_expires_ms = at_ms.saturating_add(lease_ms);
    let regions = &state.regions;
    let held = state.workers.iter_mut().find(|(_, r)| r.node_id == node_id);
    let outside = match held {
        Some((id, rec)) if range.contains(id) && crate::regions::may_hold_in(regions, *id) => {
            rec.lease_expires_ms = rec.lease_expires_ms.max(lease_expires_ms);
            rec.lease_ms = lease_ms;
            changes.workers.insert(*id);
            return Ok(Applied::Worker(WorkerGrant {
                worker_id: *id,
                not_before_ms: rec.high_water_ms,
                lease_expires_ms: rec.lease_expires_ms,
            }));
        }
        Some((id, _)) => Some(*id),
        None => None,
    };
    let members = &state.members;
    let free = range.clone().find(|id| {
        crate::regions::may_hold(state, *id) && state.workers.get(id).is_none_or(|r| r.reclaimable(at_ms, members))
    });
    let worker_id = free.ok_or(ApplyError::WorkersExhausted)?;
    if let Some(old) = outside.and_then(|id| state.workers.get_mut(&id).map(|r| (id, r))) {
        // The node's ID is outside the range it keeps to now: let the old one go, fenced like
        // the ID of a node that left (its lease and grace must run out before anyone gets it,
        // and the next holder starts after its high-water mark).
        old.1.node_id = RELEASED;
        changes.workers.insert(old.0);
    }
    let previous = state.workers.get(&worker_id);
    // A recycled ID starts after everything its previous holder may have issued: its recorded
    // high-water mark, and the handover time (the old lease ended before it).
    let high_water_ms = previous.map_or(i64::MIN, |r| r.high_water_ms.max(at_ms));
    let record = WorkerRecord {
        node_id,
        high_water_ms,
        lease_expires_ms,
        lease_ms,
        since_ms: at_ms,
        previous_node_id: previous.map(|r| r.node_id),
    };
    state.workers.insert(worker_id, record);
    changes.workers.insert(worker_id);
    Ok(Applied::Worker(WorkerGrant { worker_id, not_before_ms: high_water_ms, lease_expires_ms }))
}

/// Extends the lease of `worker_id`, held by `node_id`, and raises its high-water mark; a node
/// that lost the ID (or left the membership) is refused.
pub(crate) fn renew(
    state: &mut State,
    at_ms: i64,
    (node_id, worker_id): (u64, u16),
    high_water_ms: i64,
    lease_ms: i64,
    changes: &mut Changes,
) -> ApplyResult {
    let member = state.members.contains(&node_id);
    let rec = match state.workers.get_mut(&worker_id) {
        Some(r) if r.node_id == node_id && member => r,
        _ => return Err(ApplyError::WorkerLost { worker_id, node_id }),
    };
    rec.lease_expires_ms = rec.lease_expires_ms.max(at_ms.saturating_add(lease_ms));
    rec.lease_ms = lease_ms;
    rec.high_water_ms = rec.high_water_ms.max(high_water_ms);
    changes.workers.insert(worker_id);
    Ok(Applied::Worker(WorkerGrant {
        worker_id,
        not_before_ms: rec.high_water_ms,
        lease_expires_ms: rec.lease_expires_ms,
    }))
}

#[cfg(test)]
mod tests {
    use super::{RELEASED, WORKER_IDS};
    use crate::apply::{ApplyError, Changes};
    use crate::command::Op;
    use crate::state::{record_members, State};
    use crate::testing::{ap, at, grant, register};

    #[test]
    fn workers_get_the_lowest_free_id_and_keep_it() {
        let mut s = State::default();
        record_members(&mut s, [1, 2, 3], &mut Changes::default());
        assert_eq!(grant(register(&mut s, 1000, 2)).worker_id, 0);
        assert_eq!(grant(register(&mut s, 1000, 1)).worker_id, 1);
        assert_eq!(grant(register(&mut s, 1000, 3)).worker_id, 2);
        // Re-registering (a restart) gives the same ID back, with the recorded high-water mark.
        let renew = Op::RenewWorker { node_id: 1, worker_id: 1, high_water_ms: 5000, lease_ms: 10_000 };
        assert_eq!(grant(ap(&mut s, &at(2000, renew))).not_before_ms, 5000);
        let again = grant(register(&mut s, 3000, 1));
        assert_eq!((again.worker_id, again.not_before_ms, again.lease_expires_ms), (1, 5000, 13_000));
        assert_eq!(register(&mut s, 3000, 9), Err(ApplyError::NotAMember(9)));
        assert!(matches!(
            ap(&mut s, &at(0, Op::RegisterWorker { node_id: 1, lease_ms: 5, within: None })),
            Err(ApplyError::Invalid(_))
        ));
    }

    #[test]
    fn an_id_is_recycled_only_after_its_node_left_and_its_lease_and_grace_ran_out() {
        let mut s = State::default();
        record_members(&mut s, [1, 2], &mut Changes::default());
        assert_eq!(grant(register(&mut s, 0, 1)).worker_id, 0);
        let renew = |hw| Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: hw, lease_ms: 10_000 };
        ap(&mut s, &at(1000, renew(4000))).unwrap();
        // Lease runs to 11,000; grace to 21,000.
        record_members(&mut s, [2, 3], &mut Changes::default());
        // Node 1 left, but the lease plus grace has not run out: node 3 gets a new ID.
        assert_eq!(grant(register(&mut s, 21_000, 3)).worker_id, 1);
        record_members(&mut s, [2, 4], &mut Changes::default());
        // Node 1 still a member? No. Lease + grace over: ID 0 is recycled, starting after the
        // handover time (which is past the old high-water mark).
        let g = grant(register(&mut s, 21_001, 4));
        assert_eq!((g.worker_id, g.not_before_ms), (0, 21_001));
        assert_eq!(s.workers[&0].previous_node_id, Some(1));
        // The old holder is fenced: its renewals fail.
        assert_eq!(ap(&mut s, &at(21_002, renew(30_000))), Err(ApplyError::WorkerLost { worker_id: 0, node_id: 1 }));
        assert_eq!(s.workers[&0].node_id, 4);
    }

    #[test]
    fn a_member_keeps_its_id_however_late_it_renews() {
        let mut s = State::default();
        record_members(&mut s, [1, 2], &mut Changes::default());
        grant(register(&mut s, 0, 1));
        // Node 1 is silent far beyond its lease but is still a member: nobody else gets ID 0.
        assert_eq!(grant(register(&mut s, 1_000_000, 2)).worker_id, 1);
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 7, lease_ms: 10_000 };
        assert!(ap(&mut s, &at(1_000_001, renew)).is_ok());
        // A removed node cannot renew even if nobody took its ID yet.
        record_members(&mut s, [2], &mut Changes::default());
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 8, lease_ms: 10_000 };
        assert!(matches!(ap(&mut s, &at(1_000_002, renew)), Err(ApplyError::WorkerLost { .. })));
    }

    #[test]
    fn high_water_marks_only_rise() {
        let mut s = State::default();
        record_members(&mut s, [1], &mut Changes::default());
        grant(register(&mut s, 0, 1));
        let renew = |hw| Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: hw, lease_ms: 10_000 };
        ap(&mut s, &at(1, renew(500))).unwrap();
        assert_eq!(grant(ap(&mut s, &at(2, renew(100)))).not_before_ms, 500);
    }

    #[test]
    fn exhaustion_is_an_error() {
        let mut s = State::default();
        record_members(&mut s, 1..=1025, &mut Changes::default());
        for n in 1..=1024u64 {
            assert_eq!(grant(register(&mut s, 0, n)).worker_id, (n - 1) as u16);
        }
        let before = s.clone();
        assert_eq!(register(&mut s, 0, 1025), Err(ApplyError::WorkersExhausted));
        assert_eq!(s, before);
    }

    /// A cluster beside old Leaf snowflake servers keeps to its range; a node whose ID lies
    /// outside a new range gets one inside, and its old ID stays fenced until its lease and
    /// grace ran out.
    #[test]
    fn worker_ids_stay_in_their_range() {
        let mut s = State::default();
        record_members(&mut s, [1, 2, 3], &mut Changes::default());
        let reg = |node_id, first, last| Op::RegisterWorker { node_id, lease_ms: 10_000, within: Some((first, last)) };
        assert_eq!(grant(register(&mut s, 0, 1)).worker_id, 0);
        let g = grant(ap(&mut s, &at(1_000, reg(2, 512, 513))));
        assert_eq!(g.worker_id, 512);
        // Node 1 moves into the range: a new ID, and ID 0 is released but not free yet.
        let renew = Op::RenewWorker { node_id: 1, worker_id: 0, high_water_ms: 5_000, lease_ms: 10_000 };
        ap(&mut s, &at(2_000, renew)).unwrap();
        assert_eq!(grant(ap(&mut s, &at(3_000, reg(1, 512, 513)))).worker_id, 513);
        assert_eq!(s.workers[&0].node_id, RELEASED);
        // The range is full now: node 3 is refused and nothing changes.
        let before = s.clone();
        assert_eq!(ap(&mut s, &at(3_000, reg(3, 512, 513))), Err(ApplyError::WorkersExhausted));
        assert_eq!(s, before);
        // Re-registering inside the range keeps the ID.
        assert_eq!(grant(ap(&mut s, &at(4_000, reg(1, 512, 513)))).worker_id, 513);
        // ID 0 goes to someone else only after its lease (12,000) and grace (22,000), and
        // starts after its high-water mark.
        assert_eq!(grant(register(&mut s, 21_000, 3)).worker_id, 1);
        record_members(&mut s, [1, 2, 4], &mut Changes::default());
        let g = grant(register(&mut s, 22_001, 4));
        assert_eq!((g.worker_id, g.not_before_ms), (0, 22_001));
        assert!(matches!(ap(&mut s, &at(0, reg(1, 600, 599))), Err(ApplyError::Invalid(_))));
        assert!(matches!(ap(&mut s, &at(0, reg(1, 0, WORKER_IDS))), Err(ApplyError::Invalid(_))));
    }
}
