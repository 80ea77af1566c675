//! `[snowflake]`: snowflake mode's epoch, clock safety and worker-ID leases.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::WorkerIds;

/// Snowflake mode: worker leases and clock safety.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SnowflakeConfig {
    /// Serve `/api/snowflake/get/*` on this node (registering a worker ID through Raft).
    /// Default `true`.
    pub enabled: bool,
    /// Epoch of the 41-bit timestamp, Unix ms; IDs run out 69 years after it. Must be the same on
    /// every node and never change: IDs made under two epochs can collide. From 0 to now; default
    /// `1288834974657` (Twitter's and Leaf's).
    pub epoch_ms: i64,
    /// Each new millisecond's sequence starts at a random value below this, like Leaf, so IDs of a
    /// quiet service are not all multiples of 4,096 plus 0 (which skews `id % n` sharding). Costs
    /// up to this many IDs of the 4,096 per millisecond. `0` or `1` start at 0. At most 1024;
    /// default `100` (Leaf's).
    pub sequence_random_start: u16,
    /// How far ahead of the clock the durable high-water mark is kept (PD's TSO window): no ID is
    /// issued above a mark that is not yet fsynced, the mark is raised when less than half the
    /// window is left, and each raise is proposed through Raft. After a crash the node issues above
    /// the mark at once (timestamps run ahead of the clock until it catches up), so IDs can be up
    /// to this far ahead of the clock. From 100 to 60000; default `3000` ms.
    pub time_window_ms: u64,
    /// A clock that moved back at most this far waits twice the difference and retries (Leaf's 5
    /// ms, #112); further, or still behind after waiting, the request gets 503
    /// `clock_moved_backwards`. At most 1000; default `5` ms.
    pub max_backward_ms: u64,
    /// At start, a high-water mark at most this far ahead of the clock is served from at once (IDs
    /// above the mark, ahead of the clock until it catches up); further ahead, snowflake service
    /// stays off until the clock is fixed and the node restarted. Above the window so a quick
    /// restart serves instead of failing. IDs are never more than `max(time_window_ms,
    /// max_startup_wait_ms + 50)` ms ahead of the clock. At most 600000; default `5000` ms.
    pub max_startup_wait_ms: u64,
    /// Lease of the worker ID, renewed through Raft with every raise of the high-water mark. A node
    /// that cannot renew for this long (cut off from the quorum) stops issuing snowflake IDs; a
    /// node's worker ID can go to another node only once the node has left the cluster and twice
    /// this has passed. Longer keeps a cut-off node serving longer, and lets a node restart from
    /// its cache file while the quorum is down for this long. From 1000 to 3600000, and at least
    /// twice `time_window_ms`; default `60000` ms.
    pub lease_ttl_ms: u64,
    /// At start the node compares its clock with every reachable peer (offsets compensated for half
    /// the round trip); if the average offset exceeds this, snowflake service stays off. NTP keeps
    /// healthy clocks within tens of ms; a second catches a misconfigured clock without failing on
    /// a busy network. From 1 to 3600000; default `1000` ms.
    pub max_peer_offset_ms: u64,
    /// The worker IDs this node may take, `"first-last"`: the same on every node. Give a
    /// cluster that runs beside old Leaf snowflake servers (numbered from 0) the part they do
    /// not use, e.g. `"512-1023"` (deploy/README.md, "Moving from Leaf"). A node holding an ID
    /// outside the range gets a new one inside it at its next start. Default `"0-1023"`.
    #[schemars(with = "String")]
    pub worker_ids: WorkerIds,
}

impl Default for SnowflakeConfig {
    fn default() -> Self {
        SnowflakeConfig {
            enabled: true,
            epoch_ms: 1_288_834_974_657,
            sequence_random_start: 100,
            time_window_ms: 3000,
            max_backward_ms: 5,
            max_startup_wait_ms: 5000,
            lease_ttl_ms: 60_000,
            max_peer_offset_ms: 1000,
            worker_ids: WorkerIds::ALL,
        }
    }
}

impl SnowflakeConfig {
    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        let now_ms =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        if !(0..=now_ms).contains(&self.epoch_ms) {
            errs.push("snowflake.epoch_ms must be from 0 to now".to_string());
        }
        if self.sequence_random_start > 1024 {
            errs.push("snowflake.sequence_random_start must be at most 1024".to_string());
        }
        if !(100..=60_000).contains(&self.time_window_ms) {
            errs.push("snowflake.time_window_ms must be from 100 to 60000".to_string());
        }
        if self.max_backward_ms > 1000 {
            errs.push("snowflake.max_backward_ms must be at most 1000".to_string());
        }
        if self.max_startup_wait_ms > 600_000 {
            errs.push("snowflake.max_startup_wait_ms must be at most 600000".to_string());
        }
        let lease = self.lease_ttl_ms as i64;
        if !(leaf_raft_store::state::MIN_LEASE_MS..=leaf_raft_store::state::MAX_LEASE_MS).contains(&lease) {
            errs.push("snowflake.lease_ttl_ms must be from 1000 to 3600000".to_string());
        }
        if self.lease_ttl_ms < 2 * self.time_window_ms {
            errs.push("snowflake.lease_ttl_ms must be at least twice snowflake.time_window_ms".to_string());
        }
        if !(1..=3_600_000).contains(&self.max_peer_offset_ms) {
            errs.push("snowflake.max_peer_offset_ms must be from 1 to 3600000".to_string());
        }
    }
}
