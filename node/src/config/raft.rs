//! `[raft]`: Raft timing, snapshots, proposals, the address peer connections leave from, and
//! what the node does when its Raft storage fails.
use std::net::IpAddr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Raft timing, snapshots and proposals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RaftConfig {
    /// Leader heartbeat interval. openraft also uses it as the timeout of every append-entries and
    /// read-index round trip, so it must exceed a follower's worst fsync plus network time; too
    /// small and a slow disk looks like a dead follower (the leader retries; nobody campaigns while
    /// a majority still hears it). From 10 to 10000; default `100` ms (a LAN). Across zones or
    /// regions use the WAN profile of the book's "Clusters" chapter (`300`, `2000`, `4000`).
    pub heartbeat_ms: u64,
    /// The lease: a follower that heard its leader this recently votes for no one and grants no
    /// pre-vote. A voter that has heard no leader for a random time between this and
    /// `election_timeout_max_ms` asks the other voters for a pre-vote, and campaigns once a
    /// majority grants it (`raft/election.rs`), so a dead leader is replaced that long after its
    /// last heartbeat (writes back within a second by default, BENCHMARKS.md "Failover windows").
    /// At least 3 × `heartbeat_ms`; default `400` ms.
    pub election_timeout_min_ms: u64,
    /// Upper end of the random wait without a leader before a pre-vote (the spread keeps two
    /// voters from campaigning at once). Also the quorum contact limit: a leader no quorum has
    /// acknowledged for longer is reported in `/health` and refuses new writes with a retryable
    /// 503. Above `election_timeout_min_ms`, at most 600000; default `800` ms.
    pub election_timeout_max_ms: u64,
    /// Build a snapshot after this many applied entries, then purge the log behind it. Also
    /// when the log since the last snapshot weighs this much, a batch of tags weighing as many
    /// entries as it has tags (and at least a sixteenth of the state's tags), and after 10 s
    /// without an applied entry once it weighs a tenth of this (and 1/256 of the state's
    /// tags). At least 1; default `10000`.
    pub snapshot_every: u64,
    /// Entries kept behind a snapshot so slightly lagging followers catch up from the log (a
    /// batch of tags counts each of its tags). Default `1000`.
    pub keep_logs_after_snapshot: u64,
    /// sled, which keeps the Raft log and state, never shrinks its files: they stay at the
    /// largest size they reached (about 5 times the state after a million tags were created).
    /// Once they pass this many MiB, or a quarter of the snapshot file if that is less (but at
    /// least 1 MiB), and hold more than 16 times their records, the node copies what they hold into
    /// new files and switches to them: at its start, and while it runs after a snapshot build or
    /// a purge of the log (writes wait only for the keys written during the copy's last round).
    /// From 1 to 1048576; default `64`.
    pub rewrite_above_mib: u64,
    /// How long a proposal (segment allocation, tag change) may take before it fails with 503. From
    /// 100 to 600000; default `5000` ms.
    pub propose_timeout_ms: u64,
    /// Local IP address that connections to peers leave from. Set it on a host with several
    /// addresses so firewall rules, or the chaos harness's per-link proxies, can tell which node a
    /// connection comes from. A unicast address of this host; default unset: the OS picks.
    pub source_ip: Option<IpAddr>,
    /// What the node does once its Raft storage fails (a failed read, write or fsync of the
    /// log or state machine; after a failed fsync the page cache cannot be trusted, so Raft is
    /// never resumed in the same process). `"stay"`: keep running, answer 503 with
    /// `raft stopped: ...` until an operator restarts it. `"exit"`: the same until a `/metrics`
    /// scrape has counted the failure (`leaf_storage_errors_total`, so `LeafDiskErrors` fires;
    /// at most 30 s), then shut down and exit with status 75 (`EX_TEMPFAIL`), so a supervisor
    /// (`restart: unless-stopped`, systemd's `Restart=on-failure`, Kubernetes) restarts it and
    /// it recovers from its durable log.
    /// Default `"stay"`; `deploy/` sets `"exit"`, where a supervisor restarts the node. `leaf
    /// serve` acts on it; a program embedding the node awaits
    /// `NodeHandle::storage_failure_reported` itself.
    pub on_storage_failure: OnStorageFailure,
    /// How a node answers a request for a tag it does not hold. `"leader"`: it asks the
    /// leader for a read index first (one round through the leader per batch of such
    /// requests), so a tag created through any node is usable on every node at once.
    /// `"local"`: a node caught up with a leader it heard from within `2 × heartbeat_ms`
    /// answers 404 from its own state, without a leader round (a flood of unknown tags then
    /// costs the leader nothing), at the price of a window of about two heartbeats in which a
    /// tag just created through *another* node may be 404 here; `leaf-client` retries its own
    /// creates through that window. Default `"local"`.
    pub unknown_tags: UnknownTags,
}

/// [`RaftConfig::unknown_tags`]: confirm a miss with the leader, or answer it locally when
/// caught up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UnknownTags {
    /// A read index through the leader before every 404.
    Leader,
    /// 404 from the node's own state when it is caught up with a leader it heard from
    /// recently.
    #[default]
    Local,
}

/// [`RaftConfig::on_storage_failure`]: stay up answering 503, or exit for a supervisor.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnStorageFailure {
    /// Keep running and answer 503 until an operator restarts the node.
    #[default]
    Stay,
    /// Shut down and exit with [`STORAGE_FAILURE_EXIT`], for a supervisor to restart.
    Exit,
}

/// The exit status of `leaf serve` after a storage failure under `on_storage_failure = "exit"`
/// (`EX_TEMPFAIL` of sysexits.h: try again).
pub const STORAGE_FAILURE_EXIT: u8 = 75;

impl Default for RaftConfig {
    fn default() -> Self {
        RaftConfig {
            heartbeat_ms: 100,
            election_timeout_min_ms: 400,
            election_timeout_max_ms: 800,
            snapshot_every: 10_000,
            keep_logs_after_snapshot: 1000,
            rewrite_above_mib: 64,
            propose_timeout_ms: 5000,
            source_ip: None,
            on_storage_failure: OnStorageFailure::Stay,
            unknown_tags: UnknownTags::Local,
        }
    }
}

impl RaftConfig {
    /// The Raft store's options this section sets.
    pub fn store_options(&self) -> leaf_raft_store::StoreOptions {
        leaf_raft_store::StoreOptions {
            compact_above: self.rewrite_above_mib * 1024 * 1024,
            ..leaf_raft_store::StoreOptions::default()
        }
    }

    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if !(10..=10_000).contains(&self.heartbeat_ms) {
            errs.push("raft.heartbeat_ms must be from 10 to 10000".to_string());
        }
        if self.election_timeout_min_ms < 3 * self.heartbeat_ms {
            errs.push(
                "raft.election_timeout_min_ms must be at least 3 x raft.heartbeat_ms (a lease of several heartbeats)"
                    .to_string(),
            );
        }
        if self.election_timeout_max_ms > 600_000 {
            errs.push("raft.election_timeout_max_ms must be at most 600000".to_string());
        }
        if self.election_timeout_max_ms <= self.election_timeout_min_ms {
            errs.push("raft.election_timeout_max_ms must exceed raft.election_timeout_min_ms".to_string());
        }
        if self.snapshot_every == 0 {
            errs.push("raft.snapshot_every must be at least 1".to_string());
        }
        if !(1..=1_048_576).contains(&self.rewrite_above_mib) {
            errs.push("raft.rewrite_above_mib must be from 1 to 1048576".to_string());
        }
        if !(100..=600_000).contains(&self.propose_timeout_ms) {
            errs.push("raft.propose_timeout_ms must be from 100 to 600000".to_string());
        }
        if let Some(ip) = self.source_ip {
            let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
            if ip.is_unspecified() || ip.is_multicast() || broadcast {
                errs.push(format!(
                    "raft.source_ip {ip} is not a unicast address of this host (leave it unset to let the OS pick)"
                ));
            }
        }
    }
}
