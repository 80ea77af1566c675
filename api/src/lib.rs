//! Wire types of the leaf ID service: what crosses HTTP (JSON bodies, error codes), the
//! validation rules every layer shares (tag names, batch sizes, steps), and the one codec that
//! encodes persisted and replicated records.
//!
//! This crate has no runtime dependencies (no tokio, no I/O): it is shared by the node, the
//! Raft store, the CLI and the test harnesses.
//!
//! Layout:
//! - [`codec`]: versioned, checksummed bincode envelope for every record written to disk or sent
//!   between nodes.
//! - [`error`]: the stable error codes of the public API and their Leaf analogues.
//! - [`json_int`]: request-body integers in any JSON notation of an integral value.
//! - [`routes`]: the public HTTP route table (server, OpenAPI, client and CLI share it).
//! - [`tag`]: tag-name and count validation.
//! - [`types`]: JSON request and response bodies.

pub mod codec;
pub mod error;
pub mod json_int;
pub mod routes;
pub mod tag;
pub mod types;

pub use error::{ErrorBody, ErrorCode};
