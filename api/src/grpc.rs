//! The gRPC API's generated code (feature `grpc`): messages, client stubs and server traits,
//! compiled at build time from `api/proto/` by protox and tonic-prost-build (see `build.rs`).
//!
//! Layout:
//! - [`v1`]: `leaf.v1` (`IdService`: segment and snowflake IDs as ranges, decode;
//!   `AdminService`: tags with their profiles), from
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

impl From<crate::profile::Profile> for v1::Profile {
    fn from(p: crate::profile::Profile) -> Self {
        use crate::profile::Profile as P;
        match p {
            P::Segment => v1::Profile::Segment,
            P::Monotonic => v1::Profile::Monotonic,
            P::Obfuscated => v1::Profile::Obfuscated,
            P::Daily => v1::Profile::Daily,
            P::Gapless => v1::Profile::Gapless,
        }
    }
}

impl From<v1::Profile> for crate::profile::Profile {
    fn from(p: v1::Profile) -> Self {
        use crate::profile::Profile as P;
        match p {
            v1::Profile::Segment => P::Segment,
            v1::Profile::Monotonic => P::Monotonic,
            v1::Profile::Obfuscated => P::Obfuscated,
            v1::Profile::Daily => P::Daily,
            v1::Profile::Gapless => P::Gapless,
        }
    }
}

impl From<crate::types::TagInfo> for v1::Tag {
    fn from(t: crate::types::TagInfo) -> Self {
        v1::Tag {
            tag: t.tag,
            max_id: t.max_id,
            step: t.step,
            description: t.description,
            created_ms: t.created_ms,
            updated_ms: t.updated_ms,
            profile: v1::Profile::from(t.profile).into(),
            daily: t.daily.map(v1::DailyOptions::from),
            day: t.day,
            upper_bound: t.upper_bound,
            archived_ms: t.archived_ms,
        }
    }
}

impl From<crate::gapless::IssuedNumber> for v1::IssuedNumber {
    fn from(n: crate::gapless::IssuedNumber) -> Self {
        let state = match n.state {
            crate::gapless::NumberState::Issued => v1::NumberState::Issued,
            crate::gapless::NumberState::Reserved => v1::NumberState::Reserved,
            crate::gapless::NumberState::Confirmed => v1::NumberState::Confirmed,
            crate::gapless::NumberState::Voided => v1::NumberState::Voided,
        };
        v1::IssuedNumber {
            tag: n.tag,
            period: n.period,
            number: n.number,
            display: n.display,
            key: n.key,
            state: state.into(),
            issued_ms: n.issued_ms,
            replayed: n.replayed,
            deadline_ms: n.deadline_ms,
            reason: n.reason,
            secret: n.secret,
        }
    }
}

impl From<crate::profile::DailyOptions> for v1::DailyOptions {
    fn from(d: crate::profile::DailyOptions) -> Self {
        v1::DailyOptions { digits: d.digits.map_or(0, u32::from), utc_offset: d.utc_offset.unwrap_or_default() }
    }
}

impl From<crate::template::TemplateInfo> for v1::Template {
    fn from(t: crate::template::TemplateInfo) -> Self {
        v1::Template {
            name: t.name,
            pattern: t.pattern.into(),
            step: t.step,
            max_id: t.max_id,
            description: t.description,
            profile: v1::Profile::from(t.profile).into(),
            daily: t.daily.map(v1::DailyOptions::from),
            upper_bound: t.upper_bound,
            created_ms: t.created_ms,
            updated_ms: t.updated_ms,
        }
    }
}

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
