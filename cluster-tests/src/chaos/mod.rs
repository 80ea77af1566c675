//! Jepsen-style chaos runs against a local cluster of real `leaf` processes, or against the
//! containers of the `deploy/` docker-compose cluster.
//!
//! Layout:
//! - [`schedule`]: the seeded fault schedule (a seed replays the same schedule).
//! - [`proxy`]: per-link TCP proxies in front of every node's Raft address, for network
//!   partitions without root.
//! - [`netns`]: a network namespace per node (root): iptables partitions, link degradation.
//! - [`delay`]: the userspace NFQUEUE delayer (delay, jitter, reordering) for kernels
//!   without `sch_netem`.
//! - [`nodes`]: what faults act on — local processes behind proxies or in namespaces, or
//!   compose containers.
//! - [`history`]: the JSONL history of operations, faults and clock changes.
//! - [`run`]: one run — cluster, clients, faults, recovery, journal dump.
//! - [`tags`]: the many-tags workload of `--tags N` (batch-created tags, Zipf picks).
//! - [`gapless`]: the gapless-series workload of `--gapless` (invoice numbers issued through
//!   the faults, every key retried until answered, ledgers compared across nodes, checked by
//!   [`crate::gapless_check`]).
//! - [`check`]: the checker over a history and the allocation journals.
//! - [`by_fault`]: availability while each kind of fault held.
//! - [`upgrade`]: a rolling upgrade run's client of every node (failover, retries), which
//!   must see no error.
//!
//! The binary is `src/bin/leaf-chaos.rs`; the README's "Chaos testing" section explains the
//! flags and what to do with a failing seed.
pub mod by_fault;
pub mod check;
pub mod delay;
pub mod gapless;
pub mod history;
pub mod netns;
pub mod nodes;
pub mod proxy;
pub mod run;
pub mod schedule;
pub mod tags;
pub mod upgrade;
