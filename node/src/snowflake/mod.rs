//! Snowflake mode: a worker ID registered through Raft, a durable time window, and the clock
//! checks that keep a node from ever issuing an ID twice.
//!
//! Layout:
//! - [`generator`]: the bit layout and the lock-free generator (the per-ID hot path);
//! - [`handle`]: [`Snowflake`], the request path's handle (waits on short stalls, turns the
//!   rest into errors) and the `/health` view;
//! - [`phase`]: the worker's phases (clock check, registering, starting, serving, off) and
//!   every transition between them, as pure functions;
//! - `actor`: the worker actor that owns everything slow and carries out the transitions: the
//!   timers, the startup peer clock check, registration and lease renewal through Raft,
//!   raising the durable high-water mark;
//! - [`state_file`]: the local state file (fsync and rename, damage detection);
//! - [`clock_check`]: the startup peer clock check's checked arithmetic and verdict;
//! - `lease`: registering for a worker ID and renewing its lease through Raft, and the checks
//!   on the leader's grant.
//!
//! # Guarantees and how they are kept
//! - **Worker IDs** come from the Raft log (`RegisterWorker`), keyed by node ID, so a node
//!   that restarts at another address gets its own ID back. The lowest free ID of 0..1023 is
//!   given; exhaustion is an error.
//! - **Time window** (PD's TSO): before an ID with timestamp `t` is issued, a high-water mark
//!   `>= t` is fsynced to `<data_dir>/snowflake.state` and then proposed through Raft
//!   (`RenewWorker`). The mark is raised to `now + time_window_ms` when less than half of the
//!   window is left, or when a request needs a later millisecond.
//! - **Logical milliseconds**: an ID's millisecond is the wall clock's when the clock is past
//!   the last issued one; otherwise the generator finishes the last millisecond's sequence and
//!   moves on to the next millisecond ahead of the clock, never above the durable mark. So a
//!   burst above 4,096 IDs per ms borrows later milliseconds instead of waiting.
//! - **Restart**: the node issues strictly above its *floor*, the larger of the local and the
//!   Raft mark, and starts **at once**: its first mark is `max(now + time_window_ms, floor +
//!   50 ms)`, fsynced before the first ID, and IDs run from the floor forward, ahead of the
//!   clock until it catches up. A floor more than `max_startup_wait_ms` ahead of the clock
//!   keeps snowflake off with the reason in `/health`. A damaged state file keeps snowflake off
//!   instead of forgetting the mark (Leaf #97 bypassed the check via its cache).
//! - **How far ahead of the clock**: an ID's timestamp is at most
//!   `max(now + time_window_ms, floor + 50)`, `now` being the issuing request's wall-clock
//!   reading (every mark is `time_window_ms` above some earlier reading, or a start's
//!   `floor + 50`, and no ID is issued while the clock reads below an earlier reading). With the
//!   startup check (`floor <= now + max_startup_wait_ms`) that is at most
//!   `max(time_window_ms, max_startup_wait_ms + 50)` ms ahead of the clock (defaults: 5,050
//!   ms). After an ordinary crash and restart the floor is below `now + time_window_ms`
//!   already, so the bound is `time_window_ms`, as in steady state; the floor term only binds
//!   when the clock went back across the restart or a recycled worker ID's floor is ahead of
//!   this clock. (Being only 50 ms above the floor, such a start cannot ratchet the floor up
//!   across a fast crash loop.)
//! - **Lease**: every renewal extends the worker's lease by `lease_ttl_ms`, measured locally
//!   from before the proposal on the monotonic clock; a node that cannot renew in time stops
//!   issuing. The state machine gives an ID to another node only after its holder left the
//!   membership and `2 × lease_ttl_ms` passed since its last renewal, and the new holder starts
//!   above the old high-water mark and the handover time.
//! - **Weak dependency**: the state file also keeps the worker ID and the lease end, so a node
//!   restarting with a lease that has not run out serves under its old ID at once, before (or
//!   without) reaching the quorum; the registration through Raft runs alongside, and a higher
//!   Raft mark for that ID restarts the generator above it.
//! - **Clock checks**: at start, RTT-compensated offsets against every reachable peer (samples
//!   with a negative or over-timeout round trip, or an offset beyond a year, are discarded and
//!   counted); if the average exceeds `max_peer_offset_ms`, snowflake stays off (segment mode
//!   is unaffected). At runtime a wall clock that reads below its highest earlier reading by at
//!   most `max_backward_ms` waits twice the gap; further is a 503 `clock_moved_backwards`,
//!   never a duplicate. Running ahead of the clock because of the floor or a burst is no error.
mod actor;
pub mod clock_check;
pub mod generator;
pub mod handle;
mod lease;
pub mod phase;
pub mod state_file;

pub use handle::{Snowflake, SnowflakeError};
pub use state_file::{StateFile, STATE_FILE};
