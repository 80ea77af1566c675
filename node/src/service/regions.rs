//! The global tier's side of regions (`/admin/regions*`, [`leaf_raft_store::regions`]): a
//! region joins (its leader, with the `regions` right), takes blocks of a tag's IDs (the same
//! right on the tag), and an operator lists and retires regions (the `cluster` right). Each is
//! one proposal; the leader's answer is checked against what was asked before it is believed.
use leaf_api::regions::{validate_region_name, BlockGrant, BlockRequest, JoinRegionRequest, RegionInfo, RegionList};
use leaf_api::tag::validate_step;
use leaf_api::tokens::Right;
use leaf_raft_store::regions::{check_grant, check_region_fields, Block, RegionAnswer, RegionRecord};
use leaf_raft_store::workers::WORKER_IDS;
use leaf_raft_store::{Applied, Op};

use super::tag_admin::admin;
use super::{validate, ApiError, App};
use crate::access::Principal;
use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};

impl App {
    /// Registers the region `req` names with this global tier (its record again if it joined
    /// before).
    pub async fn join_region(&self, req: JoinRegionRequest, who: &Principal) -> Result<RegionInfo, ApiError> {
        who.require(Right::Regions)?;
        check_name(&req.name)?;
        if !(1..=WORKER_IDS).contains(&req.workers) {
            return Err(ApiError::invalid(format!("workers must be from 1 to {WORKER_IDS}, got {}", req.workers)));
        }
        let op = admin(who.actor(), Op::JoinRegion { name: req.name, workers: req.workers });
        let (name, record): (String, RegionRecord) = self.raft.propose(op).await?;
        tracing::info!(
            region = name,
            id = record.id,
            first_worker = record.first_worker,
            last_worker = record.last_worker,
            "region joined"
        );
        Ok(region_info(name, record))
    }

    /// Every region this global tier registered, retired ones too, by name.
    pub fn regions(&self, who: &Principal) -> Result<RegionList, ApiError> {
        who.require(Right::Cluster)?;
        let regions = self.raft.state().regions().into_iter().map(|(n, r)| region_info(n, r)).collect();
        Ok(RegionList { regions })
    }

    /// Retires region `name`: it gets no block any more; its name, ID and worker IDs stay
    /// taken for good.
    pub async fn retire_region(&self, name: String, who: &Principal) -> Result<RegionInfo, ApiError> {
        who.require(Right::Cluster)?;
        check_name(&name)?;
        let (name, record): (String, RegionRecord) =
            self.raft.propose(admin(who.actor(), Op::RetireRegion { name })).await?;
        tracing::warn!(region = name, id = record.id, "region retired: it gets no block any more");
        Ok(region_info(name, record))
    }

    /// A block of `tag`'s IDs for region `name`, at or above `req.above`.
    pub async fn grant_block(
        &self,
        name: String,
        tag: String,
        req: BlockRequest,
        who: &Principal,
    ) -> Result<BlockGrant, ApiError> {
        check_name(&name)?;
        validate::tag(&tag)?;
        who.require_on(Right::Regions, &tag)?;
        validate_step(req.size).map_err(|e| ApiError::invalid(format!("size: {e}")))?;
        if req.above < 0 {
            return Err(ApiError::invalid(format!("above must be at least 0, got {}", req.above)));
        }
        let op = Op::GrantBlock { region: name.clone(), tag: tag.clone(), size: req.size, above: req.above };
        let block: Block = self.raft.propose(op).await?;
        tracing::debug!(region = name, tag, start = block.start, end = block.end, "block granted");
        Ok(BlockGrant { start: block.start, end: block.end })
    }
}

fn check_name(name: &str) -> Result<(), ApiError> {
    validate_region_name(name).map_err(|e| ApiError::invalid(e.to_string()))
}

/// A region as the API shows it.
pub fn region_info(name: String, r: RegionRecord) -> RegionInfo {
    RegionInfo {
        name,
        id: r.id,
        first_worker: r.first_worker,
        last_worker: r.last_worker,
        joined_ms: r.joined_ms,
        retired_ms: r.retired_ms,
    }
}

/// The leader's answer to a join or a retirement: the region asked for, with a record that can
/// be right (an ID, a run of worker IDs within the 1024, as many as asked for a new join).
impl Answer for (String, RegionRecord) {
    const ASKED: &'static str = "a region's record";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        let (asked, retired) = match op {
            Op::JoinRegion { name, .. } => (name, false),
            Op::RetireRegion { name } => (name, true),
            op => return Err(mismatch(op, applied)),
        };
        let Applied::Region(RegionAnswer::Registered { name, record }) = applied else {
            return Err(mismatch(op, applied));
        };
        if name != asked {
            return Err(invalid(format!("region {name:?} answered, {asked:?} asked for")));
        }
        check_region_fields(record.id, record.first_worker, record.last_worker)
            .map_err(|why| invalid(format!("region {name:?}: {why}")))?;
        if record.retired_ms.is_some() != retired {
            return Err(invalid(format!("region {name:?} answered retired: {}", record.retired_ms.is_some())));
        }
        Ok(())
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Region(RegionAnswer::Registered { name, record }) => Ok((name, record)),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

/// The leader's answer to a grant: a non-empty block of at most the size asked for, at or
/// above `above`.
impl Answer for Block {
    const ASKED: &'static str = "a block grant";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::GrantBlock { size, above, .. }, Applied::Segment(a)) => {
                check_grant(Block { start: a.start, end: a.end }, *size, *above).map_err(invalid)
            }
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Segment(a) => Ok(Block { start: a.start, end: a.end }),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use leaf_raft_store::Allocation;

    use super::*;

    fn grant(size: i64, above: i64) -> Op {
        Op::GrantBlock { region: "eu".into(), tag: "t".into(), size, above }
    }

    fn segment(start: i64, end: i64) -> Applied {
        Applied::Segment(Allocation { start, end, stored_step: 1 })
    }

    #[test]
    fn a_block_must_be_non_empty_no_longer_than_asked_and_above_the_floor() {
        assert!(Block::check(&grant(10, 5), &segment(5, 15)).is_ok());
        assert!(Block::check(&grant(10, 5), &segment(100, 101)).is_ok(), "shorter where the space ends");
        for (start, end) in [(4, 14), (5, 16), (5, 5), (9, 5), (i64::MIN, i64::MAX)] {
            assert!(Block::check(&grant(10, 5), &segment(start, end)).is_err(), "[{start}, {end}) accepted");
        }
        let alloc = Op::AllocateSegment { tag: "t".into(), step: 10, node_id: 1 };
        assert!(matches!(Block::check(&alloc, &segment(0, 10)), Err(AnswerError::WrongKind { .. })));
    }

    #[test]
    fn a_region_s_record_must_be_the_one_asked_for_and_possible() {
        let join = Op::JoinRegion { name: "eu".into(), workers: 8 };
        let record = RegionRecord { id: 1, first_worker: 0, last_worker: 7, joined_ms: 1, retired_ms: None };
        let answer = |name: &str, record: &RegionRecord| {
            Applied::Region(RegionAnswer::Registered { name: name.into(), record: record.clone() })
        };
        assert!(<(String, RegionRecord)>::check(&join, &answer("eu", &record)).is_ok());
        assert!(<(String, RegionRecord)>::check(&join, &answer("us", &record)).is_err());
        for bad in [
            RegionRecord { id: 0, ..record.clone() },
            RegionRecord { first_worker: 8, ..record.clone() },
            RegionRecord { last_worker: WORKER_IDS, ..record.clone() },
            RegionRecord { retired_ms: Some(5), ..record.clone() },
        ] {
            assert!(<(String, RegionRecord)>::check(&join, &answer("eu", &bad)).is_err(), "{bad:?}");
        }
        let retire = Op::RetireRegion { name: "eu".into() };
        let retired = RegionRecord { retired_ms: Some(5), ..record.clone() };
        assert!(<(String, RegionRecord)>::check(&retire, &answer("eu", &retired)).is_ok());
        assert!(<(String, RegionRecord)>::check(&retire, &answer("eu", &record)).is_err());
    }
}
