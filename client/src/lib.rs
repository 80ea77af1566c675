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
//! are returned at once.
//!
//! **Retries only where safe** (details in [`retry`]): ID requests are retried — an ID range
//! whose answer was lost is never handed out again, so a retry leaves a *gap*, never a
//! duplicate; reads are retried; tag updates and membership changes are idempotent and
//! retried; creating a tag is not retried once it may have reached a node (a retry could turn
//! its success into `tag_exists`).
//!
//! The admin token is sent as a bearer token; it never appears in an error or in `Debug`.
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
//! let req = CreateTagRequest { tag: "orders".into(), step: 1000, max_id: None, description: None };
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
//! Building checks the URLs without touching the network:
//!
//! ```
//! use leaf_client::{BuildError, Client};
//!
//! assert!(Client::builder(["http://127.0.0.1:8080"]).build().is_ok());
//! assert!(matches!(Client::builder(["127.0.0.1:8080"]).build(), Err(BuildError::InvalidUrl { .. })));
//! assert_eq!(Client::builder(Vec::<String>::new()).build().unwrap_err(), BuildError::NoNodes);
//! ```
//!
//! Layout:
//! - [`builder`]: [`ClientBuilder`] (nodes, token, timeout, deadline, retries, backoff).
//! - `client`: [`Client`] and the attempt loop (failover, backoff, deadline).
//! - [`retry`]: which calls and errors are retried, and the backoff.
//! - `transport`: the connector and one attempt (timeout, bounded answer).
//! - `ids`, `monitor`, `admin`: the typed endpoint methods.
//! - [`error`]: [`BuildError`], [`ClientError`].

mod admin;
pub mod builder;
mod client;
pub mod error;
mod ids;
mod monitor;
pub mod retry;
mod transport;

pub use builder::ClientBuilder;
pub use client::Client;
pub use error::{BuildError, ClientError};
pub use hyper::{Method, StatusCode};
pub use leaf_api::ErrorCode;
pub use monitor::{HealthMode, HealthReport};
pub use transport::RawReply;
