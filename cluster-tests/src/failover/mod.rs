//! Failover windows (`leaf-failover-bench`, issue 34): steady load of every request kind while
//! a node is killed, paused or restarted, every request recorded, and afterwards how long each
//! kind went without a success at the nodes that stayed up, the errors clients saw and the
//! segment IDs the fault wasted.
//!
//! Layout:
//! - `mod.rs`: what a request is ([`Kind`], [`Via`], [`Record`]).
//! - [`load`]: the paced client tasks and their shared progress.
//! - [`drive`]: the faults, applied to a running cluster and recorded as events.
//! - [`analysis`]: pure: windows, errors and wasted IDs from the records.
pub mod analysis;
pub mod drive;
pub mod load;

/// A request kind of the load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// One ID of a `segment` tag (any node serves it from its buffers).
    Segment,
    /// One snowflake ID (any node with a worker lease).
    Snowflake,
    /// One ID of a `monotonic` tag (the leader serves it; followers forward).
    Monotonic,
    /// A tag update (`PATCH /admin/tags/{tag}`): a Raft write through the leader.
    Admin,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Segment, Kind::Snowflake, Kind::Monotonic, Kind::Admin];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Segment => "segment ID",
            Kind::Snowflake => "snowflake ID",
            Kind::Monotonic => "monotonic ID",
            Kind::Admin => "admin write",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Via {
    /// `leaf-client` over all nodes, with its default retries, backoff and failover.
    Retrying,
    /// One attempt at this node only (the client's retries off).
    Plain(u64),
}

impl Via {
    pub fn is_plain(self) -> bool {
        matches!(self, Via::Plain(_))
    }
}

/// One request: when it started and ended (nanoseconds since the run's start), whether it
/// succeeded, the ID it got (segment and monotonic IDs), and the error it saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub kind: Kind,
    pub via: Via,
    pub start_ns: u64,
    pub end_ns: u64,
    pub ok: bool,
    pub id: Option<i64>,
    pub error: Option<String>,
}
