//! Cluster versions: which operations a node can apply, and which the cluster may log.
//!
//! - A build supports every operation up to [`SUPPORTED`]; it advertises that to its peers.
//! - The replicated state holds the cluster's active version ([`crate::State::version`],
//!   [`BASE`] until raised). Only an [`crate::Op::SetClusterVersion`] entry raises it, and
//!   nothing lowers it: the leader proposes one once every member supports the new version.
//! - An operation newer than the active version is refused when proposed and when applied
//!   ([`crate::ApplyError::FeatureNotActive`], the same answer on every node), so no member that
//!   could not read it ever meets it in the log.
//! - An entry of a version this build does not support decodes as
//!   [`crate::Op::Undecodable`]: the state machine stops there and names its version.
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::apply::{check_version, ApplyError};
use crate::command::{NumberRules, Op};
use crate::gapless::OwnedAsk;

/// A cluster version: a set of operations a node can apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClusterVersion(pub u32);

/// What every release before cluster versions applies: the version of a cluster that never
/// raised its own.
pub const BASE: ClusterVersion = ClusterVersion(1);

/// The newest version this build applies: what it advertises.
pub const SUPPORTED: ClusterVersion = ClusterVersion(5);

/// What each version adds, for errors and the book.
pub const ADDED: &[(ClusterVersion, &str)] = &[
    (ClusterVersion(1), "everything of the releases before cluster versions"),
    (ClusterVersion(2), "owned gapless numbers (only the reserver settles), series limits and cluster versions"),
    (ClusterVersion(3), "regions: a global tier's registry and blocks, and a region's identity and blocks"),
    (ClusterVersion(4), "home regions: monotonic tags and gapless series served by one region each"),
    (ClusterVersion(5), "daily and obfuscated tags in regions, each served by one region from its own counter"),
];

impl Default for ClusterVersion {
    fn default() -> Self {
        BASE
    }
}

impl fmt::Display for ClusterVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The form in which `op` is proposed to a cluster at version `active`: the one place where a
/// proposal's version is chosen. An operation with an earlier form that the cluster's members
/// all apply is proposed in it (owned gapless numbers as the plain ones of version 1, which
/// check no owner and no cap, as those releases did); any other operation newer than `active`
/// is refused ([`ApplyError::FeatureNotActive`]).
pub fn form(op: Op, active: ClusterVersion) -> Result<Op, ApplyError> {
    let op = match op {
        Op::IssueNumbers { asks, rules: NumberRules::Owned } if active < ClusterVersion(2) => Op::IssueNumbers {
            asks: asks.into_iter().map(|a| OwnedAsk { ask: a.ask, proof: None }).collect(),
            rules: NumberRules::Plain,
        },
        op => op,
    };
    check_version(&op, active)?;
    Ok(op)
}

impl ClusterVersion {
    /// What the version adds, if this build knows it.
    pub fn adds(self) -> Option<&'static str> {
        ADDED.iter().find(|(v, _)| *v == self).map(|(_, what)| *what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_up_to_the_supported_one_says_what_it_adds() {
        for v in BASE.0..=SUPPORTED.0 {
            assert!(ClusterVersion(v).adds().is_some(), "version {v}");
        }
        assert_eq!(ClusterVersion(SUPPORTED.0 + 1).adds(), None);
        assert_eq!(ClusterVersion::default(), BASE);
    }
}
