//! Numbers lost with a cluster: what a restore from a backup does to a gapless series.
//!
//! The backup holds the series up to its counter; the lost cluster may have issued more after
//! it, which no one can list. Reissuing them would number two documents alike, and skipping
//! them silently would leave a gap: so the restore voids a block of them, each in its place
//! with the cause `lost` and the backup's ID in the reason, and the series goes on after the
//! block. The block is the restore's margin ([`crate::restore`]): in the backup's period after
//! its counter, and, when the restore runs in a later period (the lost cluster may have moved
//! there), numbers 1 to the margin of that period too. A lost number has an empty key (no
//! caller's key is empty) and is recorded as the restoring tool's.
use std::ops::RangeInclusive;
use std::sync::Arc;

use leaf_api::audit::Actor;
use leaf_api::gapless::VoidCause;

use super::chain::{chain_hash, ChainEvent, CHAIN_GENESIS};
use super::ledger::{NumberRecord, Outcome, Settled};
use crate::state::State;

/// The reason a lost number's void carries.
pub fn lost_reason(backup_id: u128) -> String {
    format!("lost with the cluster: restored from backup {backup_id:032x}")
}

/// Voids `numbers` of `period` of series `tag` as lost, at `at_ms` by `actor`: each gets a
/// reservation event and a void event in its period's chain.
pub(crate) fn void_lost(
    state: &mut State,
    tag: &str,
    period: u32,
    numbers: RangeInclusive<u64>,
    (at_ms, actor): (i64, &Actor),
    reason: &str,
) {
    let reason: Arc<str> = Arc::from(reason);
    for number in numbers {
        let (seq, prev) = state.ledger.series.get(tag).map_or((1, CHAIN_GENESIS), |s| s.next_event(period));
        let created = ChainEvent::Reserve { key: "", actor, at_ms, deadline_ms: at_ms };
        let hash = chain_hash(&prev, tag, (period, number), seq, &created);
        let void = ChainEvent::Void { actor, at_ms, cause: VoidCause::Lost, reason: &reason };
        let void_hash = chain_hash(&hash, tag, (period, number), seq + 1, &void);
        let outcome = Outcome::Voided { cause: VoidCause::Lost, reason: reason.clone() };
        let settled = Settled { outcome, actor: actor.clone(), at_ms, seq: seq + 1, hash: void_hash };
        let record = NumberRecord {
            key: Arc::from(""),
            actor: actor.clone(),
            at_ms,
            deadline_ms: Some(at_ms),
            seq,
            hash,
            settled: Some(settled),
            proof: None,
        };
        state.ledger.insert(tag, (period, number), record);
    }
}
