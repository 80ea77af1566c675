//! A typed async client of the leaf ID service's public HTTP API, used by the `leaf` CLI, the
//! test harnesses, `leaf-chaos` and the benchmark tools.
//!
//! Paths come only from [`leaf_api::routes`], bodies only from [`leaf_api::types`], and a
//! failed call is a [`ClientError`]: an answer with an error body becomes
//! [`ClientError::Api`] with its stable [`ErrorCode`].
//!
//! **Over several nodes.** Any node serves every call (a follower forwards writes to the
//! leader). A call starts at the node that answered last; when an attempt fails in a way worth
//! retrying (no answer, a timeout, or a 503 such as `unavailable`, `not_ready`,
//! `segments_not_ready` or `shutting_down`) the next attempt goes to the next node, after a
//! capped exponential backoff with jitter, until the retry budget or the call's total deadline
//! runs out ([`ClientError::AllNodesFailed`]). Other errors (bad input, unknown tag, conflict)
//! are returned at once — except a `tag_not_found` for a tag this client created in the last
//! few seconds, which is retried while the node catches up with the create (nodes answer a
//! miss from their own state when caught up with their leader; see `client/src/own_creates.rs`).
//!
//! **Retries only where safe** (details in [`retry`]): ID requests are retried — an ID range
//! whose answer was lost is never handed out again, so a retry leaves a *gap*, never a
//! duplicate; reads are retried; tag updates and membership changes are idempotent and
//! retried; creating a tag is not retried once it may have reached a node (a retry could turn
//! its success into `tag_exists`).
//!
//! The admin token is sent as a bearer token; it never appears in an error or in `Debug`.
//!
//! **TLS.** `https://` node URLs are checked against the CA given with
//! [`ClientBuilder::ca_file`] / [`ClientBuilder::ca_pem`] (else the platform's roots), and a
//! client certificate is presented when one is given (mutual TLS). A failed handshake is a
//! [`ClientError::Tls`] whose message says what is wrong (a CA this client does not trust, a
//! certificate for another host or out of date, a plaintext port, a client certificate
//! missing or refused); the node processed nothing, so the call moves on to another node, but
//! gives up once every node failed that way. [`tls::TlsOptions`] builds the same `rustls`
//! configuration for other tools (`leaf bench`).
//!
//! ```no_run
//! use leaf_client::{Client, HealthMode};
//! use leaf_api::types::CreateTagRequest;
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::builder(["http://10.0.0.1:8080", "http://10.0.0.2:8080", "http://10.0.0.3:8080"])
//!     .token("admin-token")
//!     .timeout(Duration::from_secs(2))
//!     .retries(4)
//!     .build()?;
//! let req = CreateTagRequest { tag: "orders".into(), step: 1000, max_id: None, description: None, ..Default::default() };
//! client.create_tag(&req).await?;
//! let id: i64 = client.segment_id("orders").await?;
//! let batch: Vec<i64> = client.segment_ids("orders", 100).await?;
//! assert!(batch.iter().all(|b| *b != id));
//! let flake = client.snowflake_id("payments").await?;
//! println!("{:?}", client.decode(flake).await?);
//! println!("ready: {}", client.health(HealthMode::Segment).await?.ready);
//! # Ok(())
//! # }
//! ```
//!
//! Errors carry the API's code:
//!
//! ```no_run
//! use leaf_client::{Client, ClientError};
//! use leaf_api::ErrorCode;
//!
//! # async fn demo(client: Client) {
//! match client.segment_id("no-such-tag").await {
//!     Ok(id) => println!("{id}"),
//!     Err(ClientError::Api { code: ErrorCode::TagNotFound, .. }) => eprintln!("create the tag first"),
//!     Err(e) if e.is_unavailable() => eprintln!("cluster unavailable, try later: {e}"),
//!     Err(e) => eprintln!("{e}"),
//! }
//! # }
//! ```
//!
//! For many IDs per second in one process, an [`IdPool`] leases ranges ahead of use and hands
//! IDs out without a network round trip (see [`pool`]):
//!
//! ```no_run
//! use leaf_client::{Client, IdPool, PoolOptions};
//!
//! # async fn demo(client: Client) -> Result<(), Box<dyn std::error::Error>> {
//! let pool = IdPool::new(client, PoolOptions::default())?;
//! let orders = pool.segment("orders")?;
//! let id: i64 = orders.next_id_async().await?;
//! let more: Option<i64> = orders.try_next_id();
//! # Ok(())
//! # }
//! ```
//!
//! Building checks the URLs and reads the TLS files without touching the network:
//!
//! ```
//! use leaf_client::{BuildError, Client};
//!
//! assert!(Client::builder(["http://127.0.0.1:8080"]).build().is_ok());
//! let missing_ca = Client::builder(["https://127.0.0.1:8443"]).ca_file("/no/such/ca.pem").build();
//! assert!(matches!(missing_ca, Err(BuildError::Tls(_))));
//! assert!(matches!(Client::builder(["127.0.0.1:8080"]).build(), Err(BuildError::InvalidUrl { .. })));
//! assert_eq!(Client::builder(Vec::<String>::new()).build().unwrap_err(), BuildError::NoNodes);
//! ```
//!
//! Layout:
//! - [`builder`]: [`ClientBuilder`] (nodes, token, timeout, deadline, retries, backoff, TLS).
//! - `client`: [`Client`] and the attempt loop (failover, backoff, deadline).
//! - [`retry`]: which calls and errors are retried, and the backoff.
//! - [`tls`]: [`TlsOptions`] → `rustls::ClientConfig`; [`tls::diagnose`], TLS failures in words.
//! - `transport`: the connector (plain or TLS) and one attempt (timeout, bounded answer).
//! - `ids`, `monitor`, `admin`: the typed endpoint methods.
//! - [`pool`]: [`IdPool`], per-tag buffers of leased ID ranges with a lock-free synchronous
//!   `next_id()` (prefetch, adaptive lease size, snowflake freshness bound, stats).
//! - [`error`]: [`BuildError`], [`TlsError`], [`ClientError`], [`TlsFailure`].

mod admin;
pub mod builder;
mod client;
pub mod error;
pub mod gapless;
mod ids;
mod monitor;
pub mod own_creates;
pub mod pool;
pub mod retry;
pub mod tls;
mod transport;

pub use builder::ClientBuilder;
pub use client::Client;
pub use error::{BuildError, ClientError, TlsError, TlsFailure};
pub use hyper::{Method, StatusCode};
pub use leaf_api::ErrorCode;
pub use monitor::{HealthMode, HealthReport};
pub use own_creates::OwnCreates;
pub use pool::{IdPool, PoolError, PoolOptions, TagPool};
pub use tls::TlsOptions;
pub use transport::RawReply;
