//! The cluster version on this node ([`leaf_raft_store::version`]): what it advertises to its
//! peers, what it last heard each member supports, and, as leader, raising the cluster's
//! version once every member supports a newer one.
//!
//! - Every member advertises the newest version it applies in its peer status
//!   ([`super::bootstrap::PeerStatus`]); a release before cluster versions answers without
//!   one, which reads as version 1.
//! - The leader asks every member (voters and learners) for it, every [`POLL_RAISING`] while
//!   the cluster's version is below its own and every [`POLL_SETTLED`] after, and proposes
//!   `SetClusterVersion` with the lowest version they all support, once that is above the
//!   cluster's. A member that does not answer holds the raise back.
//! - An owned gapless issue that meets a cluster below version 2 first raises it inline when
//!   every member is known to support it (a cluster just formed, before the first poll), so
//!   that no number of a new cluster is issued without its owner.
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use leaf_raft_store::types::NodeId;
use leaf_raft_store::version::{ClusterVersion, SUPPORTED};
use leaf_raft_store::Op;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{ProposeError, RaftNode};
use crate::ticker::Ticker;

/// How often the leader asks its members while the cluster's version is below its own.
const POLL_RAISING: Duration = Duration::from_millis(250);
/// How often it asks once the cluster runs its version (for `/cluster/status`).
const POLL_SETTLED: Duration = Duration::from_secs(5);
/// How old a complete answer may be for an inline raise.
const FRESH: Duration = Duration::from_secs(2);

/// The environment variable that makes a node advertise an older version than it supports:
/// a mixed-version cluster for tests, without an older build. It can only hold the cluster
/// back (the node still applies everything it supports).
pub const ADVERTISE_ENV: &str = "LEAF_ADVERTISE_CLUSTER_VERSION";

/// What this node advertises, and what the leader last heard from each member.
#[derive(Debug)]
pub(crate) struct Versions {
    advertised: ClusterVersion,
    /// Member → the version it advertised, and when this node (as leader) last asked all.
    seen: Mutex<(BTreeMap<NodeId, ClusterVersion>, Option<Instant>)>,
    /// The leader this node last asked, and what it advertised.
    leader: Mutex<Option<(NodeId, ClusterVersion)>>,
    /// One raise at a time (the leader's rounds and an operation's inline raise).
    raising: tokio::sync::Mutex<()>,
}

impl Versions {
    /// [`SUPPORTED`], or the lower version [`ADVERTISE_ENV`] names (logged).
    pub(crate) fn from_env() -> Self {
        let advertised = match std::env::var(ADVERTISE_ENV).ok().and_then(|v| v.parse::<u32>().ok()) {
            Some(v) if (1..SUPPORTED.0).contains(&v) => {
                tracing::warn!(
                    advertised = v,
                    supported = %SUPPORTED,
                    "{ADVERTISE_ENV} is set: this node advertises an older cluster version than it supports, \
                     which holds the cluster's version back"
                );
                ClusterVersion(v)
            }
            None if std::env::var_os(ADVERTISE_ENV).is_none() => SUPPORTED,
            _ => {
                tracing::warn!(
                    supported = %SUPPORTED,
                    "{ADVERTISE_ENV} is not a version from 1 to {} below this node's: ignored, this node advertises {SUPPORTED}",
                    SUPPORTED.0 - 1
                );
                SUPPORTED
            }
        };
        Versions {
            advertised,
            seen: Mutex::new((BTreeMap::new(), None)),
            leader: Mutex::new(None),
            raising: tokio::sync::Mutex::new(()),
        }
    }

    pub(crate) fn advertised(&self) -> ClusterVersion {
        self.advertised
    }

    /// What each member advertised when the leader last asked (empty on a follower).
    pub(crate) fn seen(&self) -> BTreeMap<NodeId, ClusterVersion> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).0.clone()
    }

    fn record(&self, seen: BTreeMap<NodeId, ClusterVersion>, complete: bool) {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = (seen, complete.then(Instant::now));
    }

    /// The lowest version of the last complete round, if it is fresh.
    fn fresh_lowest(&self) -> Option<ClusterVersion> {
        let g = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let at = g.1?;
        (at.elapsed() < FRESH).then(|| g.0.values().copied().min()).flatten()
    }
}

impl RaftNode {
    /// As leader, raises the cluster's version as its members allow, until shutdown.
    pub async fn raise_cluster_version(self, shutdown: watch::Receiver<bool>) {
        let mut fast = Ticker::new(POLL_RAISING, shutdown);
        let mut last_round: Option<Instant> = None;
        while fast.next().await {
            if !self.is_leader() {
                if last_round.take().is_some() {
                    self.versions.record(BTreeMap::new(), false);
                }
                continue;
            }
            let raising = self.state.cluster_version() < self.versions.advertised;
            if !raising && last_round.is_some_and(|t| t.elapsed() < POLL_SETTLED) {
                continue;
            }
            last_round = Some(Instant::now());
            if let Err(e) = self.raise_if_all_support().await {
                tracing::warn!(error = %e, "raising the cluster version failed; trying again");
            }
        }
    }

    /// Asks every member which version it supports and, if the lowest is above the cluster's,
    /// proposes it. Returns the cluster's version after.
    async fn raise_if_all_support(&self) -> Result<ClusterVersion, ProposeError> {
        let mut seen = BTreeMap::from([(self.node_id, self.versions.advertised)]);
        let mut complete = true;
        for (id, (_, addr)) in self.members() {
            if id == self.node_id {
                continue;
            }
            match self.peer_status(id, &addr).await {
                Some(s) => {
                    seen.insert(id, s.supports);
                }
                None => complete = false,
            }
        }
        let lowest = seen.values().copied().min().unwrap_or(self.versions.advertised);
        self.versions.record(seen, complete);
        let active = self.state.cluster_version();
        if !complete || lowest <= active {
            return Ok(active);
        }
        self.raise_to(lowest).await
    }

    /// Proposes `version` (boxed: a leader's own proposals run through here).
    fn raise_to(&self, version: ClusterVersion) -> BoxFuture<'_, Result<ClusterVersion, ProposeError>> {
        Box::pin(async move {
            let _one = self.versions.raising.lock().await;
            let before = self.state.cluster_version();
            if before >= version {
                return Ok(before);
            }
            let after: ClusterVersion = self.propose(Op::SetClusterVersion { version }).await?;
            if after > before {
                tracing::info!(from = %before, to = %after, "raised the cluster version: every member supports it");
            }
            Ok(after)
        })
    }

    /// Whether the current leader applies operations of `needs` (asked once per leader, and
    /// only while the cluster's version is below an operation's).
    pub(super) async fn leader_supports(&self, needs: ClusterVersion) -> bool {
        let (leader, addr) = self.leader_and_addr();
        let (Some(leader), Some(addr)) = (leader, addr) else { return false };
        if leader == self.node_id {
            return self.versions.advertised >= needs;
        }
        let known = *self.versions.leader.lock().unwrap_or_else(|e| e.into_inner());
        let supports = match known {
            Some((id, v)) if id == leader => v,
            _ => match self.peer_status(leader, &addr).await {
                Some(s) => {
                    *self.versions.leader.lock().unwrap_or_else(|e| e.into_inner()) = Some((leader, s.supports));
                    s.supports
                }
                None => return false,
            },
        };
        supports >= needs
    }

    /// Before an operation that needs `needs`, on a cluster below it: raises the cluster's
    /// version at once when the last complete round of answers (fresh) or a new one shows
    /// that every member supports it. The caller then proposes in the form the version
    /// allows ([`leaf_raft_store::version::form`]).
    pub(super) async fn raise_for(&self, needs: ClusterVersion) {
        if self.state.cluster_version() >= needs || self.versions.advertised < needs || !self.is_leader() {
            return;
        }
        let result = match self.versions.fresh_lowest() {
            Some(lowest) if lowest < needs => return,
            Some(lowest) => self.raise_to(lowest).await,
            None => Box::pin(self.raise_if_all_support()).await,
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "raising the cluster version before an operation failed");
        }
    }
}
