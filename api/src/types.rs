//! JSON bodies of the admin and monitor endpoints.
use serde::{Deserialize, Serialize};

use crate::gapless::GaplessOptions;
use crate::profile::{DailyOptions, Profile};

// Membership and `/cluster/status`, kept where callers have always found them.
pub use crate::cluster::{
    AddLearnerRequest, ClusterStatus, MemberRole, MemberView, MembershipChange, ReplicationView, Role, VersionView,
};

/// `POST /admin/tags`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTagRequest {
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "orders")
    )]
    pub tag: String,
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000_000, example = 1000))]
    #[serde(deserialize_with = "crate::json_int::i64")]
    pub step: i64,
    /// First ID handed out; Leaf's `max_id` column default of 1 when absent.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 1))]
    #[serde(deserialize_with = "crate::json_int::opt_i64")]
    pub max_id: Option<i64>,
    #[serde(default)]
    /// Free text, at most 1,024 bytes of UTF-8 (1,024 ASCII characters, 341 CJK ones).
    #[cfg_attr(feature = "openapi", schema(max_length = 1024, example = "order IDs"))]
    pub description: Option<String>,
    /// How the tag's IDs are made (`segment` when absent); fixed for the tag's life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// Options of a `daily` tag (only with that profile).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::json_obj::opt")]
    pub daily: Option<DailyOptions>,
    /// Options of a `gapless` tag (only with that profile): its reset, zone and display.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::json_obj::opt")]
    pub gapless: Option<GaplessOptions>,
    /// The largest ID the tag may hand out (inclusive), e.g. 9007199254740991 (2^53 − 1) for
    /// IDs that must survive JavaScript. Not for `daily` tags (their digits bound them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 9223372036854775806_i64, example = 9007199254740991_i64)
    )]
    #[serde(deserialize_with = "crate::json_int::opt_i64")]
    pub upper_bound: Option<i64>,
}

/// `POST /admin/tags:batch`: tags to create, each as `POST /admin/tags` takes it; 1 to
/// 10,000 of them. A name given twice is created once, by its first mention; the later ones are
/// answered as existing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTagsRequest {
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 10_000))]
    pub tags: Vec<CreateTagRequest>,
}

/// What a batch did: the tags it created, and those that existed already and were left as they
/// were (whatever their settings), each in the request's order. Sending the same batch again
/// is safe: it reports every tag as existing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateTagsResponse {
    pub created: Vec<String>,
    pub existing: Vec<String>,
}

/// The query of a tag listing (`GET /admin/tags`, `/db`, `/cache`): tags in name order,
/// those starting with `prefix`, after the tag `after`, at most `limit` of them (default and
/// most: 50,000). A page shorter than its limit is the last; otherwise ask again with `after`
/// set to its last tag.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only tags that start with this.
    #[cfg_attr(feature = "openapi", param(max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]*$", example = "tenant-"))]
    pub prefix: Option<String>,
    /// Only tags after this one in name order: the last tag of the previous page.
    #[cfg_attr(
        feature = "openapi",
        param(min_length = 1, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]+$", example = "tenant-0042")
    )]
    pub after: Option<String>,
    /// Most tags on the page (default and most: 50000). A full page may have more after it.
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 50000))]
    pub limit: Option<u32>,
}

/// `PATCH /admin/tags/{tag}`: absent fields are left unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateTagRequest {
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000_000, example = 2000))]
    #[serde(deserialize_with = "crate::json_int::opt_i64")]
    pub step: Option<i64>,
    #[serde(default)]
    /// Free text, at most 1,024 bytes of UTF-8 (1,024 ASCII characters, 341 CJK ones).
    #[cfg_attr(feature = "openapi", schema(max_length = 1024, example = "order IDs"))]
    pub description: Option<String>,
    /// A gapless series' cap of numbers (1 to 1,000,000).
    #[serde(default, deserialize_with = "crate::json_int::opt_u64", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000000, example = 200000))]
    pub max_numbers: Option<u64>,
    /// A gapless series' rate of new numbers per caller and node (1 to 1,000,000 a second).
    #[serde(default, deserialize_with = "crate::json_int::opt_u32", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000000, example = 100))]
    pub issues_per_sec: Option<u32>,
}

/// A tag as stored in the replicated state machine (`GET /admin/tags`, `GET /db`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TagInfo {
    pub tag: String,
    /// Next unallocated ID: every ID below it has been allocated to some node.
    pub max_id: i64,
    /// Stored step, the floor of the dynamic step.
    pub step: i64,
    pub description: String,
    /// Milliseconds since the Unix epoch, stamped by the proposing node.
    pub created_ms: i64,
    pub updated_ms: i64,
    /// How the tag's IDs are made.
    #[serde(default)]
    pub profile: Profile,
    /// A daily tag's digits and zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily: Option<DailyOptions>,
    /// A daily tag's current day (`yyyyMMdd`, leader time), whose counter `max_id` is; absent
    /// before its first allocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<u32>,
    /// The largest ID the tag may hand out (inclusive), if bounded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<i64>,
    /// A gapless tag's reset, zone and display format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gapless: Option<GaplessOptions>,
    /// A gapless tag's current period (0, `yyyy`, `yyyyMM` or `yyyyMMdd`), whose last number
    /// is `max_id` − 1; absent before its first number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u32>,
    /// When the tag was archived (leader time, Unix ms), if it is: it hands out no ID until
    /// it is restored, and its name is never given to another tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived_ms: Option<i64>,
}

/// One segment of a tag's double buffer (`GET /cache`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SegmentView {
    /// First ID of the segment.
    pub start: i64,
    /// Next ID this segment would hand out (`end` once exhausted).
    pub position: i64,
    /// One past the last ID of the segment.
    pub end: i64,
    pub step: i64,
}

/// A tag's buffers on this node (`GET /cache`), like Leaf's `/cache` monitor page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CacheEntry {
    pub tag: String,
    /// A committed segment has been loaded at least once.
    pub initialised: bool,
    pub next_ready: bool,
    pub current: Option<SegmentView>,
    pub next: Option<SegmentView>,
    /// Committed segments queued after `next`, oldest first (kept by tags that refill often).
    #[serde(default)]
    pub spares: Vec<SegmentView>,
    /// Step the next refill will ask for (Leaf's dynamic step).
    pub dynamic_step: i64,
    pub refill_in_flight: bool,
    /// Last refill error, cleared by the next successful refill.
    pub last_error: Option<String>,
    /// How long the tag's IDs last at the cluster's current rate (`None` only if the tag is
    /// missing from this node's applied state).
    #[serde(default)]
    pub forecast: Option<TagForecast>,
}

/// A tag's exhaustion forecast (`GET /cache`), about the same on every node: it comes from the
/// replicated state (sampled every `forecast.sample_interval_ms`), not from this node's buffers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TagForecast {
    /// IDs the tag may still allocate: from its `max_id` to its last ID (today `2^63 - 2`).
    /// IDs already allocated count as spent even while they sit unserved in some node's
    /// buffers.
    pub ids_left: u64,
    /// IDs allocated per second across the cluster, exponentially weighted over
    /// `forecast.window_secs` (default 15 minutes) of committed allocations, so it moves in
    /// steps of a segment; `None` until this node has sampled the tag twice.
    pub rate_per_sec: Option<f64>,
    /// `ids_left / rate_per_sec`, rounded up: `0` once no ID is left, `None` while the rate is
    /// unknown or zero.
    pub exhausted_in_secs: Option<u64>,
}

/// A committed allocation: `[start, end)` of `tag`, reserved for node `node_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AllocationView {
    pub tag: String,
    /// The node the range was committed to (the only node that may hand out its IDs).
    pub node_id: u64,
    pub start: i64,
    pub end: i64,
    /// Raft log index of the committing entry.
    pub log_index: u64,
    /// The allocation's place in its entry: 0, or its position in a group of allocations the
    /// leader committed as one entry. `(log_index, position)` names one allocation.
    #[serde(default)]
    pub position: u32,
    /// Leader time of the committing entry (ms since the Unix epoch).
    pub at_ms: i64,
}

/// `GET /admin/allocations`: the answering node's journal of committed allocations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AllocationJournal {
    /// The node that answered.
    pub node_id: u64,
    /// Every allocation committed at this log index or later is listed (subject to the
    /// filters); earlier ones may be missing (trimmed, or inside a snapshot this node
    /// installed). `0` means complete since the cluster began.
    pub complete_from_index: u64,
    /// ...up to this log index: every allocation this node had applied when it answered.
    pub complete_through_index: u64,
    /// Oldest first.
    pub allocations: Vec<AllocationView>,
}

/// `GET /health` (`?mode=segment` or `?mode=snowflake` for one mode).
///
/// What "ready" means, per mode:
/// - **segment**: this node can commit a new segment now: it is a member, knows a leader that
///   had a quorum acknowledgement within the longest election timeout (`quorum_ack_age_ms`),
///   has applied the log it had at start, and the configured bootstrap tags exist. A node that
///   is not segment-ready still serves the IDs it has buffered.
/// - **snowflake**: `snowflake.state` is `serving` (a worker ID on an unexpired lease and a
///   durable high-water mark), or snowflake is disabled by configuration.
///
/// `ready` is both; the endpoint answers 200 when the asked-for readiness holds, 503 otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// Segment-ready and snowflake-ready (see above).
    pub ready: bool,
    /// Segment mode can commit new segments on this node (see above).
    #[serde(default)]
    pub segment_ready: bool,
    pub node_id: u64,
    pub leader_id: Option<u64>,
    pub term: u64,
    pub last_applied_index: Option<u64>,
    /// Milliseconds since this node last confirmed that a quorum follows its leader (the
    /// leader: its last quorum acknowledgement; a follower: the leader's, probed every
    /// heartbeat). `None` when unknown.
    #[serde(default)]
    pub quorum_ack_age_ms: Option<u64>,
    /// Why the node is not ready, when it is not (the segment reason first).
    pub reason: Option<String>,
    /// Snowflake mode on this node.
    pub snowflake: SnowflakeHealth,
    /// How many times this cluster's state was restored from a backup (`leaf restore`): 0 for
    /// a cluster that never was, then the backup's generation plus one.
    #[serde(default)]
    pub restore_generation: u32,
}

/// Whether this node issues snowflake IDs, and why not.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SnowflakeHealth {
    /// `serving`, `starting` (clock check, registering, or making the first high-water mark
    /// durable), `off` (refused: see `reason`) or `disabled` (by configuration).
    pub state: SnowflakeState,
    pub worker_id: Option<u16>,
    /// Why the node is not serving, when it is not.
    pub reason: Option<String>,
    /// No ID has been or will be issued with a timestamp above this (Unix ms) before it is
    /// raised again; fsynced locally before any ID uses it.
    pub high_water_ms: Option<i64>,
    /// Time left on the worker lease (by this node's monotonic clock).
    pub lease_remaining_ms: Option<u64>,
    /// Average RTT-compensated offset of the peers' clocks from this node's at startup
    /// (positive: the peers are ahead); `None` when no peer answered.
    pub peer_clock_offset_ms: Option<i64>,
    /// Peer clock samples the startup check discarded: a negative round trip, one longer than
    /// the call's timeout, or an offset beyond a year (a broken or malicious answer).
    #[serde(default)]
    pub peer_clock_samples_discarded: u32,
    /// How long the snowflake layout and the worker IDs last (the same whether or not this node
    /// serves snowflake IDs).
    #[serde(default)]
    pub forecast: Option<SnowflakeForecast>,
}

/// How long snowflake mode lasts (`GET /health`, `snowflake.forecast`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SnowflakeForecast {
    /// The last Unix millisecond the 41-bit timestamp can express (`snowflake.epoch_ms` +
    /// 2^41 - 1): no snowflake ID can be issued after it.
    pub epoch_ends_ms: i64,
    /// Years (of 365.25 days) from this node's clock to the end of the timestamp; `0` once it
    /// has passed.
    pub epoch_years_left: f64,
    /// Worker IDs (of 1,024) a new node could register now: those without a record in the
    /// replicated state, or whose holder left the cluster and whose lease ran out a lease ago,
    /// judged by this node's clock.
    pub free_worker_ids: u16,
}

/// A decoded snowflake ID (`/api/snowflake/decode/{id}`, `/decodeSnowflakeId`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SnowflakeDecoded {
    pub id: i64,
    /// Milliseconds since the Unix epoch. A logical time: it may be ahead of the issuing
    /// node's clock, by at most `max(snowflake.time_window_ms, snowflake.max_startup_wait_ms +
    /// 50)` ms, and by at most `time_window_ms` except right after a restart whose high-water
    /// mark was more than that ahead of the clock.
    pub timestamp_ms: i64,
    /// The same instant in ISO-8601 (UTC, milliseconds).
    pub timestamp: String,
    pub worker_id: u16,
    pub sequence: u16,
}

/// An obfuscated tag's ID and the sequence number it hides (`GET /admin/tags/{tag}/decode/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ObfuscatedDecoded {
    pub tag: String,
    /// The ID as served.
    pub id: i64,
    /// The tag's counter value it was made from: the IDs of the tag were handed out in the
    /// order of their sequence numbers (per node, and trend-wise across nodes).
    pub sequence: i64,
}

/// A worker ID in use, as replicated (`/cluster/status`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkerView {
    pub worker_id: u16,
    pub node_id: u64,
    /// No ID of this worker has a timestamp above this (Unix ms), as far as the log knows.
    pub high_water_ms: i64,
    /// Leader time at which the lease runs out unless renewed.
    pub lease_expires_ms: i64,
    /// The node that held the ID before it was recycled.
    pub previous_node_id: Option<u64>,
}

/// `POST /admin/fault/clock` (only with `--enable-fault-injection`): skew this node's clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClockFault {
    /// Added to the system clock from now on (negative: the clock moves back). Replaces any
    /// earlier offset; `0` removes the fault.
    #[cfg_attr(feature = "openapi", schema(minimum = -31_536_000_000_i64, maximum = 31_536_000_000_i64, example = -50))]
    #[serde(deserialize_with = "crate::json_int::i64")]
    pub offset_ms: i64,
}

/// The snowflake worker's state as `/health` reports it (`snowflake.state`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnowflakeState {
    /// Issuing IDs: a worker ID on an unexpired lease and a durable high-water mark.
    Serving,
    /// Not yet: the startup clock check, registering a worker ID, or making the first
    /// high-water mark durable (`reason` says which problem it waits on, if any).
    #[default]
    Starting,
    /// Refused until the cause in `reason` is fixed (a clock beyond the limits, a damaged state
    /// file, every worker ID in use, a lease that ran out).
    Off,
    /// Turned off by configuration (`snowflake.enabled = false`).
    Disabled,
}

impl SnowflakeState {
    /// The serialized name (`serving`, `starting`, `off`, `disabled`).
    pub fn as_str(self) -> &'static str {
        match self {
            SnowflakeState::Serving => "serving",
            SnowflakeState::Starting => "starting",
            SnowflakeState::Off => "off",
            SnowflakeState::Disabled => "disabled",
        }
    }
}

impl std::fmt::Display for SnowflakeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod snowflake_state_tests {
    use super::SnowflakeState;

    #[test]
    fn snowflake_states_serialize_as_their_names() {
        for s in [SnowflakeState::Serving, SnowflakeState::Starting, SnowflakeState::Off, SnowflakeState::Disabled] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(serde_json::from_str::<SnowflakeState>(&json).unwrap(), s);
        }
        assert!(serde_json::from_str::<SnowflakeState>("\"exhausted\"").is_err());
    }
}
