//! The region's leader keeps its homes (`leaf_raft_store::regions::homes` holds the rules):
//! - it renews the region's lease with the global tier (`POST /admin/regions/{name}/lease`)
//!   well before it runs out, and measures it from before it asked ([`HomeLease`]);
//! - it adopts each home the renewal lists that is newer than the one it knows
//!   (`Op::AdoptHome`), **before** it extends the lease: a move away is known to the state
//!   before the lease that follows it is, so the old home stops first;
//! - for a tag that moved away it lets go at once (`POST .../homes/{tag}/release`), so the new
//!   home need not wait for the lease to run out;
//! - for a homed tag (monotonic, gapless, daily or obfuscated) a client asked for here whose
//!   home it does not know, or knows elsewhere ([`Wanted`], told by [`HomeLease`]), it claims the home
//!   (`POST .../homes/{tag}`; the first claim wins) and adopts the answer.
//!
//! Every answer of the global tier is checked before it is believed. Only the leader runs a
//! round; a node that does not lead holds no lease.
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use leaf_api::regions::HomeInfo;
use leaf_api::ErrorCode;
use leaf_client::Client;
use leaf_raft_store::regions::{homes::is_homed, Home, HOME_LEASE_MS};
use leaf_raft_store::{ApplyError, Op};
use tokio::sync::watch;
use tokio::time::Instant;

use super::keeper::{create_globally, KeeperError};
use super::lease::HomeLease;
use super::Wanted;
use crate::raft::{ProposeError, RaftNode};
use crate::service::homes::{check_home, check_lease, TagHome};

/// Claims asked for at once in one round.
const CONCURRENT_CLAIMS: usize = 16;
/// The lease is renewed once less than this is left: two tries fit before it runs out.
const RENEW_BELOW: Duration = Duration::from_millis(HOME_LEASE_MS as u64 / 2);
/// The wait after a failed round.
const RETRY: Duration = Duration::from_millis(500);
/// How often a node that does not lead looks again: a new leader holds no lease until its
/// first renewal, so its homes' monotonic tags wait about this long after an election.
const NOT_LEADING_POLL: Duration = Duration::from_millis(100);

/// The region's leader's task (see the module's docs).
pub struct Homes {
    raft: RaftNode,
    name: String,
    global: Client,
    lease: Arc<HomeLease>,
    homeless: Wanted,
}

impl Homes {
    /// The homes task of region `name`, over the global tier `global`; `homeless` is told of
    /// tags whose home must be claimed or learnt again.
    pub fn new(raft: RaftNode, name: String, global: Client, lease: Arc<HomeLease>, homeless: Wanted) -> Self {
        Homes { raft, name, global, lease, homeless }
    }

    /// Runs a round when the lease needs renewing and whenever a tag is told, on the leader,
    /// until the node shuts down.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut last_error = String::new();
        let mut wait = Duration::ZERO;
        loop {
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|stop| *stop) => return,
                _ = self.homeless.told() => {}
                _ = tokio::time::sleep(wait) => {}
            }
            if !self.raft.is_leader() || !self.raft.state().is_region() {
                self.lease.end();
                wait = NOT_LEADING_POLL;
                continue;
            }
            wait = match self.round().await {
                Ok(()) => {
                    last_error.clear();
                    self.lease.remaining().saturating_sub(RENEW_BELOW).max(Duration::from_millis(100))
                }
                Err(e) => {
                    let text = e.to_string();
                    if text != last_error {
                        tracing::warn!(region = self.name, error = %text, "region: could not keep its homes");
                        last_error = text;
                    }
                    RETRY
                }
            };
        }
    }

    /// One round: the lease if it is due, then the homes of the tags told.
    pub async fn round(&self) -> Result<(), KeeperError> {
        if self.lease.remaining() < RENEW_BELOW {
            self.renew().await?;
        }
        let tags = self.homeless.take();
        let results: Vec<Result<(), KeeperError>> = stream::iter(tags)
            .map(|tag| async move { self.claim(&tag).await })
            .buffer_unordered(CONCURRENT_CLAIMS)
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// Renews the lease: adopts what the renewal lists, lets go of what moved away, then
    /// extends the lease from before it asked.
    async fn renew(&self) -> Result<(), KeeperError> {
        let asked = Instant::now();
        let lease = self.global.renew_lease(&self.name).await?;
        check_lease(&self.name, &lease).map_err(KeeperError::BadAnswer)?;
        for home in &lease.homes {
            self.learn(home).await?;
        }
        self.lease.extend(asked);
        Ok(())
    }

    /// Adopts `info` if it is newer than the home this region knows; lets go of the tag if it
    /// moved away from here.
    async fn learn(&self, info: &HomeInfo) -> Result<(), KeeperError> {
        let known = self.raft.state().home(&info.tag);
        if known.is_none_or(|k| k.epoch < info.epoch) {
            let home = Home {
                region: info.region.clone(),
                epoch: info.epoch,
                from: info.from.clone(),
                since_ms: info.since_ms,
                ready_ms: info.ready_ms,
            };
            match self.raft.propose::<TagHome>(Op::AdoptHome { tag: info.tag.clone(), home }).await {
                Ok(TagHome(tag, home)) => {
                    tracing::info!(tag, home = home.region, epoch = home.epoch, "home learnt");
                }
                // A tag this region does not serve: nothing here to stop or to start.
                Err(ProposeError::Rejected(
                    ApplyError::TagNotFound(_) | ApplyError::TagArchived(_) | ApplyError::RegionConflict(_),
                )) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if info.region != self.name && info.from.as_deref() == Some(self.name.as_str()) {
            // Adopted above (or before): this region serves the tag no more. If the release
            // fails, the new home waits for the lease instead (and the next renewal asks again).
            match self.global.release_home(&self.name, &info.tag, info.epoch).await {
                Ok(_) => tracing::info!(
                    tag = info.tag,
                    to = info.region,
                    epoch = info.epoch,
                    "let go of a tag that moved away"
                ),
                Err(e) => tracing::warn!(tag = info.tag, error = %e, "could not let go of a tag that moved away"),
            }
        }
        Ok(())
    }

    /// Claims the home of `tag` (a homed tag of this region) and adopts
    /// the answer: this region, or the one that claimed it first.
    async fn claim(&self, tag: &str) -> Result<(), KeeperError> {
        let Some(record) = self.raft.state().tag(tag).filter(|r| r.archived_ms().is_none()) else { return Ok(()) };
        if !is_homed(record.profile()) {
            return Ok(());
        }
        let info = match self.global.claim_home(&self.name, tag).await {
            Err(e) if e.code() == Some(ErrorCode::TagNotFound) => {
                create_globally(&self.global, tag, &record).await?;
                self.global.claim_home(&self.name, tag).await?
            }
            other => other?,
        };
        check_home(&info).map_err(KeeperError::BadAnswer)?;
        if info.tag != tag {
            return Err(KeeperError::BadAnswer(format!("the home of {:?} to a claim of {tag:?}", info.tag)));
        }
        self.learn(&info).await
    }
}
