//! Regions: the bodies of the global tier's region endpoints (`/admin/regions*`), which a
//! region's leader calls to join and to take blocks of a tag's IDs, and an operator calls to
//! list and retire regions; and the rules of a region's name.
use serde::{Deserialize, Serialize};

/// Longest region name, in bytes.
pub const MAX_REGION_NAME: usize = 32;

/// Why a region name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "region name {0:?}: a region name is 1 to {MAX_REGION_NAME} lowercase letters, digits or '-', starting with a letter"
)]
pub struct RegionNameError(pub String);

/// Checks a region name: 1 to [`MAX_REGION_NAME`] bytes of lowercase ASCII letters, digits
/// and `-`, starting with a letter (it goes into metric labels and host names).
pub fn validate_region_name(name: &str) -> Result<(), RegionNameError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_REGION_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(RegionNameError(name.chars().take(MAX_REGION_NAME + 8).collect()))
    }
}

/// `POST /admin/regions`: register a region with the global tier (a region that joined
/// before gets its record again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JoinRegionRequest {
    /// The region's name.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 32, pattern = r"^[a-z][a-z0-9\-]*$", example = "eu-west")
    )]
    pub name: String,
    /// How many snowflake worker IDs the region holds (1 to 1024): at least its nodes.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1024, example = 32))]
    #[serde(deserialize_with = "crate::json_int::u16")]
    pub workers: u16,
}

/// A region as the global tier registered it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegionInfo {
    pub name: String,
    /// The region's ID, from 1 in join order; never reused.
    pub id: u16,
    /// The snowflake worker IDs `first_worker..=last_worker` are the region's alone, for good.
    pub first_worker: u16,
    pub last_worker: u16,
    /// When it joined (Unix ms, the global tier's leader clock).
    pub joined_ms: i64,
    /// When an operator retired it, if so: it gets no block any more.
    pub retired_ms: Option<i64>,
}

/// `GET /admin/regions`: every region ever registered, retired ones too, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RegionList {
    pub regions: Vec<RegionInfo>,
}

/// `POST /admin/regions/{name}/blocks/{tag}`: a block of the tag's IDs for the region.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BlockRequest {
    /// How many IDs (1 to 1,000,000,000); fewer only where the tag's space ends.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000_000, example = 1_000_000))]
    #[serde(deserialize_with = "crate::json_int::i64")]
    pub size: i64,
    /// The block starts at or above this: the region's own counter, so a cluster that served
    /// IDs before it became a region never gets them again.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 0))]
    #[serde(default, deserialize_with = "crate::json_int::i64")]
    pub above: i64,
}

/// A block granted: IDs `[start, end)` of `tag`, the region's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BlockGrant {
    pub start: i64,
    pub end: i64,
}

/// A tag's home region: the one region that serves a monotonic tag or a gapless series.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HomeInfo {
    #[cfg_attr(feature = "openapi", schema(example = "orders-seq"))]
    pub tag: String,
    /// The region that serves the tag.
    #[cfg_attr(feature = "openapi", schema(example = "eu-west"))]
    pub region: String,
    /// 1 when the first region claimed the tag, one more at each move.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, example = 1))]
    pub epoch: u32,
    /// The home before the latest move, if the tag moved.
    pub from: Option<String>,
    /// When the claim or the latest move happened (Unix ms, the global tier's leader clock).
    pub since_ms: i64,
    /// From when the home takes blocks of the tag: at once after a claim; after a move, once
    /// the old home let go of the tag or its lease ran out.
    pub ready_ms: i64,
}

/// `POST /admin/regions/{name}/lease`: the region's lease of its homes, and the tags homed
/// there or moving away from there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HomeLease {
    /// The lease's end on the global tier (Unix ms, its leader clock). The region counts its
    /// own lease from before it asked, on its own monotonic clock.
    pub until_ms: i64,
    pub homes: Vec<HomeInfo>,
}

/// `POST /admin/regions/{name}/homes/{tag}/release`: the region let go of the tag after its
/// home moved away in `epoch`, so the new home need not wait for the old one's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ReleaseHomeRequest {
    /// The epoch of the move away.
    #[cfg_attr(feature = "openapi", schema(value_type = u64, minimum = 1, maximum = 4294967295_u64, example = 2))]
    #[serde(deserialize_with = "crate::json_int::u32")]
    pub epoch: u32,
}

/// `POST /admin/homes/{tag}/move`: serve the tag in another region from now on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MoveHomeRequest {
    /// The new home.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 32, pattern = r"^[a-z][a-z0-9\-]*$", example = "us-east")
    )]
    pub region: String,
}

/// `GET /admin/homes`: homed tags in name order (a page, as `GET /admin/tags` pages).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HomeList {
    pub homes: Vec<HomeInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_names_are_short_lowercase_words() {
        for ok in ["eu", "eu-west-1", "a", &"a".repeat(MAX_REGION_NAME)] {
            assert!(validate_region_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "EU", "1eu", "-eu", "eu_west", "eu west", "eü", &"a".repeat(MAX_REGION_NAME + 1)] {
            assert!(validate_region_name(bad).is_err(), "{bad}");
        }
    }
}
