//! Wire types of the leaf ID service: what crosses HTTP (JSON bodies, error codes) and gRPC, the
//! validation rules every layer shares (tag names, batch sizes, steps), and the one codec that
//! encodes persisted and replicated records.
//!
//! This crate has no runtime dependencies (no tokio, no I/O): it is shared by the node, the
//! Raft store, the CLI and the test harnesses.
//!
//! Layout:
//! - [`audit`]: the audit trail's records (who changed what, when) and its query.
//! - [`cluster`]: membership changes and `GET /cluster/status` (re-exported by [`types`]).
//! - [`dashboard`]: the body of `GET /admin/dashboard`, what the built-in `/ui` page shows.
//! - [`codec`]: versioned, checksummed bincode envelope for every record written to disk or sent
//!   between nodes.
//! - [`error`]: the stable error codes of the public API and their Leaf analogues.
//! - [`gapless`]: gapless series (invoice numbers): a series' policy (reset, zone, display
//!   format), idempotency keys, and what an issue answers.
//! - `grpc` (feature `grpc`): the gRPC API (`leaf.v1`, `grpc.health.v1`) generated from
//!   `proto/` at build time.
//! - [`identity`]: whom a TLS certificate speaks for (`urn:leaf:node:<id>`,
//!   `urn:leaf:client:<name>`).
//! - [`json_int`]: request-body integers in any JSON notation of an integral value.
//! - [`profile`]: per-tag ID profiles (segment, monotonic, obfuscated, daily), daily ID
//!   layout and day arithmetic, upper bounds.
//! - [`ranges`]: batches as ranges `[start, end)` (`?format=ranges`, gRPC) and their checks.
//! - [`regions`]: the global tier's region endpoints' bodies and the rules of a region name.
//! - [`routes`]: the public HTTP route table, each route per method with its policy (the right it
//!   needs, or public) and whether it takes the fast path (server, OpenAPI, client and CLI share it).
//! - [`tag`]: tag-name and count validation (the batch limits).
//! - [`template`]: tag templates (`tenant-*-invoice`): patterns and the template endpoints'
//!   bodies.
//! - [`tokens`]: scoped tokens: rights, tag patterns, quotas, the bearer format and the token
//!   endpoints' bodies.
//! - [`types`]: JSON request and response bodies.

pub mod audit;
pub mod cluster;
pub mod codec;
pub mod dashboard;
pub mod error;
pub mod gapless;
#[cfg(feature = "grpc")]
pub mod grpc;
pub mod identity;
pub mod json_int;
pub mod json_obj;
pub mod profile;
pub mod ranges;
pub mod regions;
pub mod routes;
pub mod tag;
pub mod template;
pub mod tokens;
pub mod types;

pub use error::{ErrorBody, ErrorCode};
