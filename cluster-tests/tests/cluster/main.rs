//! Multi-process cluster tests: real `leaf` processes on loopback (and, where the tools are
//! there, in containers, network namespaces, a real Prometheus and a real browser). One
//! test binary, a module per topic; [`support`] holds what they share.
//!
//! The tests that start nodes hold one of the machine's two lanes, or both
//! ([`support::LANES`]): a test whose verdict depends on how quickly the cluster reacts runs
//! alone, one that checks only what the cluster answered and stored runs beside one other.
mod support;

mod alerts;
mod backup_restore;
mod bit_rot;
mod chaos;
mod checker;
mod crash_points;
mod dashboard_ui;
mod data_loss;
mod disk_faults;
mod disk_full;
mod elections;
mod failover;
mod flood;
mod formation;
mod forwarding;
mod gapless;
mod governance;
mod id_pool;
mod internal_auth;
mod local_misses;
mod membership;
mod monotonic;
mod pool_single;
mod power_cut;
mod quorum;
mod regions;
mod regions_wan;
mod snapshot_crash;
mod snowflake;
mod tls;
mod versions;
// Named to sort last: libtest starts tests in name order, so the two Docker tests come after
// the others, by when the image that CI builds in the background (`.ci/run`) is ready. The
// first of them to run builds it (or waits for CI's build) while holding its lane, which
// earlier in the order held other tests back for the minutes of a first build.
mod with_docker;
