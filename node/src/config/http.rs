//! `[http]`: limits of the HTTP listener (body size, slow clients, connections per node and per
//! address, the peers' reserve, idle HTTP/2 connections, shutdown).
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// HTTP limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Largest accepted request body; larger ones get 413. From 1024 to 16777216; default `65536`
    /// bytes.
    pub max_body_bytes: usize,
    /// Largest accepted body of a batch request (`POST /admin/tags:batch`, up to 10,000 tags);
    /// larger ones get 413. From 65536 to 67108864; default `4194304` bytes (4 MiB: 10,000 tags
    /// with names and short descriptions).
    pub max_batch_body_bytes: usize,
    /// A client that has not sent a complete request head within this time is disconnected; this
    /// also closes a keep-alive connection idle for that long. From 100 to 600000; default `10000`
    /// ms.
    pub header_read_timeout_ms: u64,
    /// On shutdown, how long in-flight requests may take to finish. At most 600000; default `10000`
    /// ms.
    pub shutdown_grace_ms: u64,
    /// Open client connections at most (idle keep-alive ones included). A connection beyond it is
    /// answered `503 unavailable` with `Retry-After: 1` and closed, so a connection flood costs a
    /// bounded amount of memory. From 1 to 1000000; default `4096`; each open connection costs tens
    /// of KiB.
    pub max_connections: usize,
    /// Of those, the most one client address holds (an IPv6 address counts by its /64), so one
    /// host cannot take every connection. From 1 to 1000000; default `1024`. Raise it for a
    /// proxy or NAT that carries many clients from one address.
    pub max_connections_per_address: usize,
    /// Connections beyond `max_connections` that only member nodes may hold: with TLS, a
    /// connection that finds every client slot taken may handshake on one of these, and keeps it
    /// only if its certificate speaks for a current member (without TLS nothing proves a peer
    /// before its first request, so they are not used). From 0 to 10000; default `64`.
    pub reserved_peer_connections: usize,
    /// An HTTP/2 connection (gRPC channels, h2c) with no request in flight for this long is
    /// closed gracefully (GOAWAY; clients reconnect when they need to). HTTP/1.1 keep-alive
    /// connections go after `header_read_timeout_ms`. From 100 to 86400000; default `300000`
    /// ms.
    pub idle_timeout_ms: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_body_bytes: 64 * 1024,
            max_batch_body_bytes: 4 * 1024 * 1024,
            header_read_timeout_ms: 10_000,
            shutdown_grace_ms: 10_000,
            max_connections: 4096,
            max_connections_per_address: 1024,
            reserved_peer_connections: 64,
            idle_timeout_ms: 300_000,
        }
    }
}

impl HttpConfig {
    /// Appends what is wrong with the section to `errs`.
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if !(1024..=16 * 1024 * 1024).contains(&self.max_body_bytes) {
            errs.push("http.max_body_bytes must be from 1024 to 16777216".to_string());
        }
        if !(64 * 1024..=64 * 1024 * 1024).contains(&self.max_batch_body_bytes) {
            errs.push("http.max_batch_body_bytes must be from 65536 to 67108864".to_string());
        }
        if !(100..=600_000).contains(&self.header_read_timeout_ms) {
            errs.push("http.header_read_timeout_ms must be from 100 to 600000".to_string());
        }
        if !(1..=1_000_000).contains(&self.max_connections) {
            errs.push("http.max_connections must be from 1 to 1000000".to_string());
        }
        if !(1..=1_000_000).contains(&self.max_connections_per_address) {
            errs.push("http.max_connections_per_address must be from 1 to 1000000".to_string());
        }
        if self.reserved_peer_connections > 10_000 {
            errs.push("http.reserved_peer_connections must be at most 10000".to_string());
        }
        if !(100..=86_400_000).contains(&self.idle_timeout_ms) {
            errs.push("http.idle_timeout_ms must be from 100 to 86400000".to_string());
        }
        if self.shutdown_grace_ms > 600_000 {
            errs.push("http.shutdown_grace_ms must be at most 600000".to_string());
        }
    }
}
