//! The allocation journal's view: every committed segment and the node it went to, as this
//! node applied them (`/admin/allocations`, backups, forecasts).
use leaf_api::types::{AllocationJournal, AllocationView};
use leaf_raft_store::types::NodeId;

use crate::raft::RaftNode;

/// The allocations `raft`'s journal holds (complete from
/// [`AllocationJournal::complete_from_index`]), optionally one tag's and/or one node's.
pub fn allocations(raft: &RaftNode, tag: Option<&str>, node_id: Option<NodeId>) -> Result<AllocationJournal, String> {
    let dump = raft.store().journal().dump(tag, node_id).map_err(|e| e.to_string())?;
    Ok(AllocationJournal {
        node_id: raft.node_id(),
        complete_from_index: dump.complete_from_index,
        complete_through_index: dump.complete_through_index,
        allocations: dump
            .records
            .into_iter()
            .map(|(place, r)| AllocationView {
                tag: r.tag,
                node_id: r.node_id,
                start: r.start,
                end: r.end,
                log_index: place.index,
                position: place.position,
                at_ms: r.at_ms,
            })
            .collect(),
    })
}
