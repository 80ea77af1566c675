//! The gRPC API's generated code (feature `grpc`): messages, client stubs and server traits,
//! compiled at build time from `api/proto/` by protox and tonic-prost-build (see `build.rs`).
//!
//! Layout:
//! - [`v1`]: `leaf.v1` (`IdService`: segment and snowflake IDs as ranges, decode), from
//!   `proto/leaf/v1/leaf.proto`.
//! - [`health`]: the standard `grpc.health.v1.Health`, from `proto/grpc/health/v1/health.proto`.
//! - conversions between [`v1::IdRanges`] and [`crate::ranges::IdRanges`].

/// `leaf.v1`: the ID service.
pub mod v1 {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("leaf.v1");
}

/// `grpc.health.v1`: the standard health service.
pub mod health {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("grpc.health.v1");
}

/// The fully-qualified name of the ID service (a health check name too).
pub const ID_SERVICE: &str = "leaf.v1.IdService";

impl From<crate::ranges::IdRanges> for v1::IdRanges {
    fn from(r: crate::ranges::IdRanges) -> Self {
        v1::IdRanges { ranges: r.ranges.into_iter().map(|r| v1::IdRange { start: r.start, end: r.end }).collect() }
    }
}

impl From<v1::IdRanges> for crate::ranges::IdRanges {
    fn from(r: v1::IdRanges) -> Self {
        crate::ranges::IdRanges {
            ranges: r.ranges.into_iter().map(|r| crate::ranges::IdRange { start: r.start, end: r.end }).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_convert_both_ways() {
        let mut ours = crate::ranges::IdRanges::default();
        ours.push_run(1, 3);
        ours.push_run(10, 2);
        let wire = v1::IdRanges::from(ours.clone());
        assert_eq!(wire.ranges, vec![v1::IdRange { start: 1, end: 4 }, v1::IdRange { start: 10, end: 12 }]);
        assert_eq!(crate::ranges::IdRanges::from(wire), ours);
    }
}
