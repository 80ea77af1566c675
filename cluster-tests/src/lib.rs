//! Cluster and chaos testing of leaf.
//!
//! Layout:
//! - [`chaos`]: the chaos harness (`leaf-chaos`): seeded faults, recorded history, checker.
//! - [`checker`]: verifies what clients received against what the cluster committed —
//!   uniqueness per tag and "every ID lies inside a committed allocation".
//! - [`cluster`]: a local cluster of real `leaf` processes on loopback (start, SIGTERM,
//!   `kill -9`, restart, membership), used by `tests/cluster/` and the benchmark tool.
//! - [`docker`]: the same as a docker-compose project of the `deploy/` files (image, compose,
//!   container faults), used by the Docker deployment test and `leaf-chaos --docker`.
//! - [`failover`]: failover windows (`leaf-failover-bench`): load of every request kind, the
//!   faults, and what clients saw.
//! - [`gapless_check`]: the gapless check of invoice-number series: history against final ledger.
//! - [`power`]: power cuts of some or all nodes: each node's data directory on a file system
//!   that forgets what was not synced ([`leaf_lazyfs`]), cut, remounted, the node restarted.
//! - [`order`]: the real-time order check of `monotonic` tags (a call completed before another
//!   was invoked got smaller IDs).
//! - [`regions_check`]: the check of several regions' IDs put together: no duplicate anywhere,
//!   each region's order, monotonic order across regions.
//! - [`threads`]: what a live node's threads are doing (`/proc`), for a test that gives up on it.
//! - `src/bin/leaf-test-node.rs`: the `leaf` CLI under a name this package's tests can spawn.
pub mod chaos;
pub mod checker;
pub mod cluster;
pub mod docker;
pub mod failover;
pub mod gapless_check;
pub mod order;
pub mod power;
pub mod regions_check;
pub mod threads;
