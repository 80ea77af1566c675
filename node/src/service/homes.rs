//! The global tier's side of home regions (`/admin/regions/{name}/homes*`, `/lease`,
//! `/admin/homes*`; the rules are [`leaf_raft_store::regions::homes`]): a region's leader
//! claims a tag's home, renews its lease and lets go of a tag that moved away (the `regions`
//! right, on the tag where there is one); an operator lists homes and moves one (the `cluster`
//! right). Each change is one proposal; the leader's answer is checked against what was asked
//! before it is believed, and a region checks the global tier's answers the same way
//! ([`check_home`], [`check_lease`]).
use leaf_api::regions::{HomeInfo, HomeLease, HomeList, MoveHomeRequest, ReleaseHomeRequest};
use leaf_api::tokens::Right;
use leaf_api::types::ListQuery;
use leaf_raft_store::regions::{Home, Lease, RegionAnswer, HOME_LEASE_MS, MAX_LEASE_HOMES};
use leaf_raft_store::{Applied, Op};

use super::tag_admin::admin;
use super::{validate, ApiError, App};
use crate::access::Principal;
use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};

impl App {
    /// Claims `tag`'s home for region `name` (the home as it is if another claimed it first).
    pub async fn claim_home(&self, name: String, tag: String, who: &Principal) -> Result<HomeInfo, ApiError> {
        check_name(&name)?;
        validate::tag(&tag)?;
        who.require_on(Right::Regions, &tag)?;
        let home: TagHome = self.raft.propose(Op::ClaimHome { region: name, tag }).await?;
        Ok(home.info())
    }

    /// Renews region `name`'s lease of its homes: its end, and the tags homed there or moving
    /// away from there.
    pub async fn renew_lease(&self, name: String, who: &Principal) -> Result<HomeLease, ApiError> {
        check_name(&name)?;
        who.require(Right::Regions)?;
        let lease: Lease = self.raft.propose(Op::RenewLease { region: name }).await?;
        Ok(lease_info(lease))
    }

    /// Region `name` let go of `tag`, whose home moved away in `req.epoch`.
    pub async fn release_home(
        &self,
        name: String,
        tag: String,
        req: ReleaseHomeRequest,
        who: &Principal,
    ) -> Result<HomeInfo, ApiError> {
        check_name(&name)?;
        validate::tag(&tag)?;
        who.require_on(Right::Regions, &tag)?;
        if req.epoch == 0 {
            return Err(ApiError::invalid("epoch must be at least 1"));
        }
        let op = Op::ReleaseHome { region: name.clone(), tag, epoch: req.epoch };
        let home: TagHome = self.raft.propose(op).await?;
        tracing::info!(region = name, tag = home.0, epoch = req.epoch, "a region let go of a tag that moved away");
        Ok(home.info())
    }

    /// Moves `tag`'s home to `req.region` (audited).
    pub async fn move_home(&self, tag: String, req: MoveHomeRequest, who: &Principal) -> Result<HomeInfo, ApiError> {
        validate::tag(&tag)?;
        check_name(&req.region)?;
        who.require(Right::Cluster)?;
        let home: TagHome = self.raft.propose(admin(who.actor(), Op::MoveHome { tag, to: req.region })).await?;
        let (tag, h) = (&home.0, &home.1);
        tracing::warn!(tag, to = h.region, from = h.from, epoch = h.epoch, ready_ms = h.ready_ms, "home moved");
        Ok(home.info())
    }

    /// Homed tags' homes, a page in name order.
    pub fn homes(&self, q: ListQuery, who: &Principal) -> Result<HomeList, ApiError> {
        who.require(Right::Cluster)?;
        let page = validate::page(q)?;
        let homes = self.raft.state().homes(&page.prefix, page.after.as_deref(), page.limit);
        Ok(HomeList { homes: homes.into_iter().map(|(tag, h)| home_info(tag, h)).collect() })
    }
}

fn check_name(name: &str) -> Result<(), ApiError> {
    leaf_api::regions::validate_region_name(name).map_err(|e| ApiError::invalid(e.to_string()))
}

/// A home as the API shows it.
pub fn home_info(tag: String, h: Home) -> HomeInfo {
    HomeInfo { tag, region: h.region, epoch: h.epoch, from: h.from, since_ms: h.since_ms, ready_ms: h.ready_ms }
}

/// A lease as the API shows it.
pub fn lease_info(l: Lease) -> HomeLease {
    HomeLease { until_ms: l.until_ms, homes: l.homes.into_iter().map(|(t, h)| home_info(t, h)).collect() }
}

/// The home of a tag, as an operation on homes answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagHome(pub String, pub Home);

impl TagHome {
    fn info(self) -> HomeInfo {
        home_info(self.0, self.1)
    }
}

/// Whether `h` can be a home at all: a region's name, an epoch from 1, a previous home only
/// after a move, and a start no later than the ready time. The leader's answers and the
/// global tier's, crossing the network to a region, are held to it.
pub fn check_home(h: &HomeInfo) -> Result<(), String> {
    let named = |r: &str| leaf_api::regions::validate_region_name(r).is_ok();
    let from_ok = match &h.from {
        None => h.epoch == 1,
        Some(from) => named(from) && from != &h.region && h.epoch > 1,
    };
    if !named(&h.region) || h.epoch == 0 || !from_ok || h.ready_ms < h.since_ms || validate::tag(&h.tag).is_err() {
        return Err(format!("home {h:?} is not one the rules make"));
    }
    Ok(())
}

/// Whether `lease` can be region `region`'s renewal: an end past the lease's own length, each
/// home the region's or moving away from it, at most [`MAX_LEASE_HOMES`], each tag once.
pub fn check_lease(region: &str, lease: &HomeLease) -> Result<(), String> {
    if lease.homes.len() > MAX_LEASE_HOMES {
        return Err(format!("a lease of {} homes, more than {MAX_LEASE_HOMES}", lease.homes.len()));
    }
    let mut tags = std::collections::HashSet::with_capacity(lease.homes.len());
    for h in &lease.homes {
        check_home(h)?;
        if h.region != region && h.from.as_deref() != Some(region) {
            return Err(format!("the lease of region {region:?} lists tag {:?}, homed at {:?}", h.tag, h.region));
        }
        if !tags.insert(h.tag.as_str()) {
            return Err(format!("the lease lists tag {:?} twice", h.tag));
        }
    }
    if lease.until_ms <= HOME_LEASE_MS {
        return Err(format!("a lease until {} ms", lease.until_ms));
    }
    Ok(())
}

fn to_info(tag: &str, h: &Home) -> HomeInfo {
    home_info(tag.to_string(), h.clone())
}

/// The leader's answer to a claim, a move, a release or an adoption: the tag asked about, a
/// home the rules can make, and where the op decides it, the home asked for.
impl Answer for TagHome {
    const ASKED: &'static str = "a tag's home";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        let Applied::Region(RegionAnswer::Home { tag, home }) = applied else {
            return Err(mismatch(op, applied));
        };
        let asked = match op.inner() {
            Op::ClaimHome { tag, .. } | Op::ReleaseHome { tag, .. } => tag,
            Op::MoveHome { tag, to } => {
                if &home.region != to {
                    return Err(invalid(format!("tag {tag:?} moved to {:?}, {to:?} asked for", home.region)));
                }
                tag
            }
            Op::AdoptHome { tag, home: asked } => {
                if home.epoch < asked.epoch {
                    return Err(invalid(format!(
                        "tag {tag:?}'s home at epoch {} after adopting {}",
                        home.epoch, asked.epoch
                    )));
                }
                tag
            }
            _ => return Err(mismatch(op, applied)),
        };
        if tag != asked {
            return Err(invalid(format!("the home of {tag:?} answered, {asked:?} asked about")));
        }
        check_home(&to_info(tag, home)).map_err(invalid)
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Region(RegionAnswer::Home { tag, home }) => Ok(TagHome(tag, home)),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

/// The leader's answer to a renewal: a lease of the region asked for.
impl Answer for Lease {
    const ASKED: &'static str = "a renewal of a region's lease";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op.inner(), applied) {
            (Op::RenewLease { region }, Applied::Region(RegionAnswer::Lease(lease))) => {
                check_lease(region, &lease_info(lease.clone())).map_err(invalid)
            }
            (_, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Region(RegionAnswer::Lease(lease)) => Ok(lease),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(region: &str, epoch: u32, from: Option<&str>) -> HomeInfo {
        HomeInfo {
            tag: "m".into(),
            region: region.into(),
            epoch,
            from: from.map(str::to_string),
            since_ms: 10,
            ready_ms: 20,
        }
    }

    #[test]
    fn a_home_must_be_one_the_rules_can_make() {
        assert!(check_home(&info("eu", 1, None)).is_ok());
        assert!(check_home(&info("us", 2, Some("eu"))).is_ok());
        for bad in [
            info("eu", 0, None),
            info("eu", 2, None),
            info("eu", 1, Some("us")),
            info("eu", 2, Some("eu")),
            info("EU", 1, None),
            HomeInfo { ready_ms: 5, ..info("eu", 1, None) },
            HomeInfo { tag: "a b".into(), ..info("eu", 1, None) },
        ] {
            assert!(check_home(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_lease_lists_only_the_region_s_homes_and_those_leaving_it_once_each() {
        let until_ms = 1_700_000_000_000;
        let ok = HomeLease { until_ms, homes: vec![info("eu", 1, None)] };
        assert!(check_lease("eu", &ok).is_ok());
        let leaving = HomeLease { until_ms, homes: vec![info("us", 2, Some("eu"))] };
        assert!(check_lease("eu", &leaving).is_ok());
        assert!(check_lease("us", &ok).is_err(), "another region's home");
        let twice = HomeLease { until_ms, homes: vec![info("eu", 1, None), info("eu", 1, None)] };
        assert!(check_lease("eu", &twice).is_err());
        assert!(check_lease("eu", &HomeLease { until_ms: 0, homes: vec![] }).is_err());
    }

    #[test]
    fn a_move_answers_the_region_asked_for_and_an_adoption_no_older_epoch() {
        let home = Home { region: "eu".into(), epoch: 2, from: Some("us".into()), since_ms: 1, ready_ms: 2 };
        let answer = Applied::Region(RegionAnswer::Home { tag: "m".into(), home: home.clone() });
        assert!(TagHome::check(&Op::MoveHome { tag: "m".into(), to: "eu".into() }, &answer).is_ok());
        assert!(TagHome::check(&Op::MoveHome { tag: "m".into(), to: "ap".into() }, &answer).is_err());
        assert!(TagHome::check(&Op::MoveHome { tag: "n".into(), to: "eu".into() }, &answer).is_err());
        let newer = Home { epoch: 3, ..home.clone() };
        assert!(TagHome::check(&Op::AdoptHome { tag: "m".into(), home: newer }, &answer).is_err());
        assert!(TagHome::check(&Op::AdoptHome { tag: "m".into(), home }, &answer).is_ok());
    }
}
