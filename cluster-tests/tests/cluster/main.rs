//! Multi-process cluster tests: real `leaf` processes on loopback (and, where the tools are
//! there, in containers, network namespaces, a real Prometheus and a real browser). One
//! test binary, a module per topic; [`support`] holds what they share.
//!
//! The tests that start nodes run one at a time ([`support::SERIAL`]): several clusters at once
//! on a 2-core machine would test the scheduler more than leaf.
mod support;

mod alerts;
mod chaos;
mod checker;
mod crash_points;
mod dashboard_ui;
mod data_loss;
mod disk_faults;
mod disk_full;
mod docker;
mod failover;
mod flood;
mod formation;
mod forwarding;
mod governance;
mod id_pool;
mod internal_auth;
mod membership;
mod monotonic;
mod pool_single;
mod quorum;
mod snapshot_crash;
mod snowflake;
mod tls;
