//! The HTTP/1.1 load generator behind `leaf bench`, for leaf (or any HTTP server), and its gRPC
//! mode (`leaf bench grpc`).
//!
//! N keep-alive connections, each its own hyper connection driven by one task, spread over one
//! or more base URLs. Closed loop (each connection sends its next request when the previous
//! answer arrived) or open loop at a fixed total rate. Open-loop latency is measured from when
//! a request was *due*, not when it was sent, whenever the connection was still busy at that
//! moment (coordinated-omission correction, as in wrk2); a request sent late only because of
//! the timer's 1 ms granularity is measured from its send. Latencies go into hdrhistograms
//! (ns, 3 significant digits), merged at the end.
//!
//! `https://` URLs are measured over TLS (`rustls`, the configuration of
//! [`leaf_client::tls::TlsOptions`]: `--ca` / `LEAF_CA`, else the platform's roots, and
//! `--client-cert` / `--client-key` for nodes that demand a client certificate); the TLS
//! handshake is part of connecting, not of any measured request. A run whose every attempt
//! failed in the handshake ends with the reason in words.
//!
//! A library: the `leaf` binary's `bench` subcommand parses [`BenchArgs`], builds a runtime
//! with `--threads` workers, calls [`run`] and prints [`render`] or the [`Report`] as JSON.
//!
//! Layout:
//! - [`args`]: the command-line arguments and [`parse_duration`].
//! - [`drive`]: [`run`]: connections, the closed and open loops, the merged histogram.
//! - [`report`]: what a run measured and its text form.
//! - [`zipf`]: `{zipf}` in the path, a Zipf-distributed tag rank per request.
//! - [`error`]: why a run could not start.
//! - [`grpc`]: `leaf bench grpc`, unary `GetSegmentIds` calls over HTTP/2 (tonic), and
//!   [`grpc::channel`], a tonic channel to a node (h2c or TLS).

pub mod args;
pub mod drive;
pub mod error;
pub mod grpc;
pub mod report;
pub mod zipf;

pub use args::{parse_duration, BenchArgs};
pub use drive::run;
pub use error::BenchError;
pub use report::{render, Latency, Report};
