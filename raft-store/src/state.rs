//! The replicated application state ([`State`]) and how an applied membership updates its
//! members ([`record_members`]). [`crate::apply::apply`] changes it; the state machine keeps
//! it in memory, checkpoints it and ships it in snapshots.
use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::apply::Changes;
use crate::audit::AuditLog;
use crate::gapless::Ledger;
use crate::restore::Lineage;
use crate::tags::TagRecord;
use crate::templates::TemplateRecord;
use crate::tokens::TokenRecord;
use crate::workers::WorkerRecord;

// Paths of releases before `state` was split into modules, used by the node.
pub use crate::workers::{MAX_LEASE_MS, MIN_LEASE_MS};

/// The whole replicated application state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub tags: BTreeMap<String, TagRecord>,
    /// Every node ID that has ever been in a membership, so a removed node's ID is never given
    /// to another node (its old log, votes and allocations must stay unambiguous).
    pub members_ever: BTreeSet<u64>,
    /// The node IDs of the current membership (voters and learners).
    pub members: BTreeSet<u64>,
    /// Snowflake worker IDs in use, by worker ID.
    pub workers: BTreeMap<u16, WorkerRecord>,
    /// Scoped tokens, by ID.
    pub tokens: BTreeMap<u64, TokenRecord>,
    /// The audit trail of admin changes.
    pub audit: AuditLog,
    /// Tag templates, by name. Not in the single-record snapshot layout of earlier releases
    /// (`SmData` as they encoded it): a state read from one has none.
    #[serde(skip)]
    pub templates: BTreeMap<String, TemplateRecord>,
    /// The restores this state descends from (`leaf restore`); written by the restore alone,
    /// never by an entry. Not in the single-record layout of earlier releases either.
    #[serde(skip)]
    pub lineage: Lineage,
    /// The numbers of every gapless series. Not in the single-record layout either.
    #[serde(skip)]
    pub ledger: Ledger,
    /// The cluster's active version ([`crate::version`]). Not in the single-record layout
    /// either: a state read from one is at [`crate::version::BASE`].
    #[serde(skip)]
    pub version: crate::version::ClusterVersion,
    /// Regions: a global tier's registry, or a region's identity and blocks
    /// ([`crate::regions`]). Not in the single-record layout either.
    #[serde(skip)]
    pub regions: crate::regions::Regions,
}

impl State {
    /// Whether `node_id` was a member once and is not in `current` any more.
    pub fn is_retired(&self, node_id: u64, current: impl IntoIterator<Item = u64>) -> bool {
        self.members_ever.contains(&node_id) && !current.into_iter().any(|id| id == node_id)
    }
}

/// Records the node IDs of an applied membership entry as the current members; returns
/// whether any was new. Notes in `changes` that the members were written.
pub fn record_members(state: &mut State, node_ids: impl IntoIterator<Item = u64>, changes: &mut Changes) -> bool {
    state.members = node_ids.into_iter().collect();
    changes.members = true;
    let mut changed = false;
    for id in &state.members {
        changed |= state.members_ever.insert(*id);
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_ever_remembers_removed_nodes() {
        let mut s = State::default();
        assert!(record_members(&mut s, [1, 2, 3], &mut Changes::default()));
        assert!(!record_members(&mut s, [1, 2, 3], &mut Changes::default()));
        assert!(record_members(&mut s, [1, 2, 4], &mut Changes::default()));
        assert!(s.is_retired(3, [1, 2, 4]));
        assert!(!s.is_retired(4, [1, 2, 4]));
        assert!(!s.is_retired(9, [1, 2, 4]), "never a member");
    }
}
