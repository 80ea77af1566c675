//! A gapless series' limits in the replicated state ([`crate::Op::SetSeriesLimits`]): its cap
//! of numbers, which `apply` keeps for owned asks, and each caller's rate, which every node
//! keeps for itself. A series that never set them has the defaults
//! ([`leaf_api::gapless::SeriesLimits::default`]).
use leaf_api::gapless::SeriesLimits;

use crate::apply::{invalid, Applied, ApplyError, Changes};
use crate::profile::StoredProfile;
use crate::state::State;

/// Sets series `tag`'s limits (it must be a gapless tag; archived or not).
pub(crate) fn set_limits(
    state: &mut State,
    tag: &str,
    limits: SeriesLimits,
    changes: &mut Changes,
) -> Result<Applied, ApplyError> {
    limits.validate().map_err(|e| invalid(e.to_string()))?;
    let record = state.tags.get(tag).ok_or_else(|| ApplyError::TagNotFound(tag.to_string()))?;
    if !matches!(record.profile(), StoredProfile::Gapless { .. }) {
        return Err(invalid(format!("tag {tag:?} is not gapless: only a series has limits")));
    }
    state.ledger.limits.insert(tag.to_string(), limits);
    changes.limits.insert(tag.to_string());
    Ok(Applied::Limits(limits))
}
