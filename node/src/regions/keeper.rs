//! The region's leader keeps its cluster supplied from the global tier, ahead of its traffic:
//! - once: it joins the global tier (`POST /admin/regions`) and adopts the region's identity
//!   (`Op::AdoptRegion`); until then the cluster's snowflake workers wait and its tags have no
//!   block;
//! - every `region.check_ms`, and at once when an allocation found no block ([`Wanted`]): for
//!   each tag in use (one with a measured rate, or one refused for want of a block) whose IDs
//!   left in its blocks hold less than half a block's time at its rate, it asks for the next
//!   block (`POST /admin/regions/{name}/blocks/{tag}`) and adopts it (`Op::AdoptBlock`).
//!
//! A block is sized to `region.block_secs` of the tag's rate, at least `region.min_block`. A
//! grant whose adoption fails (a leader change, a refusal) is a gap: the next round asks again,
//! above it. Nothing here is on an ID's path, and only the leader runs a round.
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, StreamExt};
use leaf_api::regions::{BlockRequest, JoinRegionRequest};
use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError};
use leaf_raft_store::regions::{check_grant, Block, Identity, RegionAnswer, TagBlocks, MAX_QUEUED_BLOCKS};
use leaf_raft_store::{Applied, Op, StoredProfile};
use tokio::sync::watch;

use super::Wanted;
use crate::config::RegionConfig;
use crate::forecast::sampler::Forecasts;
use crate::metrics::region::RegionMetrics;
use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};
use crate::raft::{ProposeError, RaftNode};

/// Blocks asked for at once in one round.
const CONCURRENT_GRANTS: usize = 16;

/// Why a round stopped short.
#[derive(Debug, thiserror::Error)]
pub enum KeeperError {
    #[error("the global tier: {0}")]
    Global(#[from] ClientError),
    #[error("proposing through this region's Raft: {0}")]
    Propose(#[from] ProposeError),
    #[error(
        "this cluster is region {adopted:?}, and its configuration says region.name = {configured:?}: a cluster \
         is one region for good; fix the configuration"
    )]
    OtherRegion { adopted: String, configured: String },
    #[error("the global tier answered {0}: refused")]
    BadAnswer(String),
}

/// The region's leader's task (see the module's docs).
pub struct Keeper {
    raft: RaftNode,
    cfg: RegionConfig,
    name: String,
    global: Client,
    forecasts: Arc<Forecasts>,
    wanted: Wanted,
    metrics: Arc<RegionMetrics>,
}

impl Keeper {
    /// The keeper of region `cfg.name` (set, or there is no keeper), asking the global tier
    /// through `global`.
    pub fn new(raft: RaftNode, cfg: RegionConfig, global: Client, forecasts: Arc<Forecasts>, wanted: Wanted) -> Self {
        let name = cfg.name.clone().unwrap_or_default();
        Keeper { raft, cfg, name, global, forecasts, wanted, metrics: Arc::default() }
    }

    /// The keeper, setting `metrics` (`leaf_region_*`).
    pub fn with_metrics(self, metrics: Arc<RegionMetrics>) -> Self {
        Keeper { metrics, ..self }
    }

    /// Runs a round every `check_ms` and whenever a tag is wanted, on the leader, until the
    /// node shuts down.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let every = Duration::from_millis(self.cfg.check_ms);
        let mut last_error = String::new();
        let mut failed = 0u32;
        loop {
            // After a failed round, the next waits longer (up to MAX_BACKOFF), and a wanted tag
            // does not cut the wait short: a refusal that lasts (a retired region, an
            // unreachable global tier) costs one request per wait, not one per client retry.
            let wait = backoff(every, failed);
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|stop| *stop) => return,
                _ = self.wanted.told(), if failed == 0 => {}
                _ = tokio::time::sleep(wait) => {}
            }
            self.metrics.set_adopted(self.raft.state().is_region());
            if !self.raft.is_leader() {
                self.metrics.clear_runways();
                continue;
            }
            match self.round().await {
                Ok(()) => {
                    last_error.clear();
                    failed = 0;
                }
                Err(e) => {
                    failed = failed.saturating_add(1);
                    // Once per distinct failure, not once per round.
                    let text = e.to_string();
                    if text != last_error {
                        tracing::warn!(region = self.name, error = %text, "region: could not supply the tags");
                        last_error = text;
                    }
                }
            }
        }
    }

    /// One round: the region's identity, then each tag that needs a block.
    pub async fn round(&self) -> Result<(), KeeperError> {
        self.identity().await?;
        let mut tags: BTreeSet<String> = self.wanted.take().into_iter().collect();
        tags.extend(self.forecasts.rates().into_iter().map(|(tag, _)| tag));
        let results: Vec<Result<Option<(String, f64)>, KeeperError>> = stream::iter(tags)
            .map(|tag| async move { self.supply(&tag).await })
            .buffer_unordered(CONCURRENT_GRANTS)
            .collect()
            .await;
        let mut runways = Vec::with_capacity(results.len());
        let mut failure = None;
        for r in results {
            match r {
                Ok(runway) => runways.extend(runway),
                Err(e) => failure = Some(e),
            }
        }
        self.metrics.runways(runways);
        failure.map_or(Ok(()), Err)
    }

    /// The region's identity, joining the global tier and adopting it if this cluster has none.
    async fn identity(&self) -> Result<Identity, KeeperError> {
        match self.raft.state().region_here() {
            Some(here) if here.name == self.name => Ok(here),
            Some(here) => Err(KeeperError::OtherRegion { adopted: here.name, configured: self.name.clone() }),
            None => {
                let req = JoinRegionRequest { name: self.name.clone(), workers: self.cfg.workers };
                let r = self.global.join_region(&req).await?;
                let identity =
                    Identity { name: r.name, id: r.id, first_worker: r.first_worker, last_worker: r.last_worker };
                let actor = leaf_api::audit::Actor::Unattributed;
                let adopted: Identity =
                    self.raft.propose(crate::service::tag_admin::admin(actor, Op::AdoptRegion(identity))).await?;
                tracing::info!(
                    region = adopted.name,
                    id = adopted.id,
                    first_worker = adopted.first_worker,
                    last_worker = adopted.last_worker,
                    "this cluster adopted its region: segment IDs come from the global tier's blocks from now on"
                );
                Ok(adopted)
            }
        }
    }

    /// Asks for `tag`'s next block if its runway is short, and adopts it; the tag's runway
    /// (seconds at its rate) once it has a rate.
    async fn supply(&self, tag: &str) -> Result<Option<(String, f64)>, KeeperError> {
        let state = self.raft.state();
        let Some(record) = state.tag(tag).filter(|r| r.archived_ms().is_none()) else { return Ok(None) };
        let served_here = match record.profile() {
            StoredProfile::Segment => true,
            // A monotonic tag's blocks go to its home alone (`super::homes` learns it).
            StoredProfile::Monotonic => {
                state.home(tag).is_some_and(|h| Some(h.region) == state.region_here().map(|i| i.name))
            }
            _ => false,
        };
        if !served_here {
            return Ok(None);
        }
        let Some((max_id, blocks)) = state.tag_blocks(tag) else { return Ok(None) };
        let rate = self.forecasts.tag(tag).and_then(|f| f.rate_per_sec).unwrap_or(0.0);
        let runway = |left: i64| (rate > 0.0).then(|| (tag.to_string(), left as f64 / rate));
        let size = block_size(rate, self.cfg.block_secs, self.cfg.min_block);
        if !short(&blocks, max_id, size) {
            return Ok(runway(blocks.remaining(max_id)));
        }
        match self.grant(tag, &record, (max_id, &blocks), size).await {
            Ok(now) => {
                self.metrics.grant(true);
                Ok(runway(now.remaining(max_id)))
            }
            Err(e) => {
                self.metrics.grant(false);
                Err(e)
            }
        }
    }

    /// Asks the global tier for a block of `size` IDs of `tag` above what it holds, and adopts
    /// it: the tag's blocks after.
    async fn grant(
        &self,
        tag: &str,
        record: &leaf_raft_store::TagRecord,
        (max_id, blocks): (i64, &TagBlocks),
        size: i64,
    ) -> Result<TagBlocks, KeeperError> {
        let req = BlockRequest { size, above: max_id.max(blocks.high) };
        let grant = match self.global.grant_block(&self.name, tag, &req).await {
            Err(e) if e.code() == Some(ErrorCode::TagNotFound) => {
                create_globally(&self.global, tag, record).await?;
                self.global.grant_block(&self.name, tag, &req).await?
            }
            other => other?,
        };
        // The global tier's answer crosses the network: held to what was asked before adopted.
        let block = Block { start: grant.start, end: grant.end };
        check_grant(block, size, req.above).map_err(KeeperError::BadAnswer)?;
        let AdoptedBlocks(now) = self.raft.propose(Op::AdoptBlock { tag: tag.to_string(), block }).await?;
        tracing::debug!(tag, start = block.start, end = block.end, left = now.remaining(max_id), "block adopted");
        Ok(now)
    }
}

/// Creates `tag` on the global tier, as this region has it: a segment or monotonic tag's
/// counter lives there now; the entry of a gapless series, a daily or an obfuscated tag there
/// only holds its home (its counter stays at the home).
pub(super) async fn create_globally(
    global: &Client,
    tag: &str,
    record: &leaf_raft_store::TagRecord,
) -> Result<(), KeeperError> {
    let gapless = matches!(record.profile(), StoredProfile::Gapless { .. });
    let daily = match record.profile() {
        StoredProfile::Daily { format, .. } => Some(format.options()),
        _ => None,
    };
    let req = CreateTagRequest {
        tag: tag.to_string(),
        step: record.step,
        max_id: (!gapless && daily.is_none()).then_some(0),
        description: Some(record.description().to_string()),
        profile: Some(record.profile().kind()),
        daily,
        gapless: None,
        upper_bound: record.upper_bound(),
    };
    match global.create_tag(&req).await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some(ErrorCode::TagExists) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The client of the global tier `cfg` names, with its token (read from its file; never
/// logged) and CA.
pub fn global_client(cfg: &RegionConfig) -> Result<Client, String> {
    let path = cfg.global_token_file.as_ref().ok_or("region.global_token_file is not set")?;
    let token =
        std::fs::read_to_string(path).map_err(|e| format!("region.global_token_file {}: {e}", path.display()))?;
    let token = token.trim();
    if token.is_empty() {
        return Err(format!("region.global_token_file {} is empty", path.display()));
    }
    let mut builder = Client::builder(cfg.global.clone()).token(token.to_string()).timeout(Duration::from_secs(5));
    if let Some(ca) = &cfg.global_ca_file {
        builder = builder.ca_file(ca.clone());
    }
    builder.build().map_err(|e| format!("region.global: {e}"))
}

/// The longest wait between rounds after failures.
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// The wait before the next round after `failed` failed rounds in a row: `every`, doubled per
/// failure, at most [`MAX_BACKOFF`] (or `every`, if that is longer).
pub fn backoff(every: Duration, failed: u32) -> Duration {
    every.saturating_mul(1 << failed.min(16)).min(MAX_BACKOFF.max(every))
}

/// A block of `block_secs` at `rate` IDs a second, at least `min_block`, at most a step's most.
pub fn block_size(rate: f64, block_secs: u64, min_block: i64) -> i64 {
    let want = (rate.max(0.0) * block_secs as f64).min(leaf_api::tag::MAX_STEP as f64) as i64;
    want.clamp(min_block, leaf_api::tag::MAX_STEP)
}

/// Whether a tag whose counter is at `max_id` needs its next block of `size`: less than half
/// of one left, and room for one more.
pub fn short(blocks: &TagBlocks, max_id: i64, size: i64) -> bool {
    blocks.remaining(max_id) < size / 2 + 1 && blocks.queued.len() < MAX_QUEUED_BLOCKS
}

/// The answer to a region's adoption: the identity asked for.
impl Answer for Identity {
    const ASKED: &'static str = "a region adoption";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::AdoptRegion(asked), Applied::Region(RegionAnswer::Adopted(got))) => {
                if got != asked {
                    return Err(invalid(format!("region {:?} adopted, {:?} asked for", got.name, asked.name)));
                }
                Ok(())
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Region(RegionAnswer::Adopted(i)) => Ok(i),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

/// The answer to a block's adoption: the tag's blocks, ending with the one adopted.
pub struct AdoptedBlocks(pub TagBlocks);

impl Answer for AdoptedBlocks {
    const ASKED: &'static str = "a block adoption";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::AdoptBlock { tag, block }, Applied::Region(RegionAnswer::Blocks { tag: got, blocks, .. })) => {
                if got != tag || blocks.queued.back() != Some(block) || blocks.high != block.end {
                    return Err(invalid(format!("blocks of {got:?} answered to the adoption of a block of {tag:?}")));
                }
                Ok(())
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Region(RegionAnswer::Blocks { blocks, .. }) => Ok(AdoptedBlocks(blocks)),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_holds_block_secs_of_the_rate_within_its_bounds() {
        assert_eq!(block_size(0.0, 600, 100_000), 100_000, "no rate yet: the smallest block");
        assert_eq!(block_size(1_000.0, 600, 100_000), 600_000);
        assert_eq!(block_size(f64::MAX, 600, 100_000), leaf_api::tag::MAX_STEP);
        assert_eq!(block_size(-5.0, 600, 10), 10);
    }

    #[test]
    fn failed_rounds_back_off_to_a_cap() {
        let every = Duration::from_millis(100);
        assert_eq!(backoff(every, 0), every);
        assert_eq!(backoff(every, 3), Duration::from_millis(800));
        assert_eq!(backoff(every, 40), MAX_BACKOFF);
        assert_eq!(backoff(Duration::from_secs(60), 5), Duration::from_secs(60), "never below the period");
    }

    #[test]
    fn the_next_block_is_asked_for_with_half_a_block_left() {
        let blocks = |end: i64, queued: Vec<Block>| TagBlocks { end, queued: queued.into(), high: end };
        assert!(short(&blocks(100, vec![]), 100, 1_000), "nothing left");
        assert!(short(&blocks(600, vec![]), 100, 1_000), "500 left of a 1,000 block");
        assert!(!short(&blocks(700, vec![]), 100, 1_000), "600 left");
        assert!(!short(&blocks(100, vec![Block { start: 200, end: 900 }]), 100, 1_000), "700 queued");
        let full = vec![Block { start: 200, end: 201 }; MAX_QUEUED_BLOCKS];
        assert!(!short(&blocks(100, full), 100, 1_000), "no room for one more");
    }
}
