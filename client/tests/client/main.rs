//! The client against tiny in-process HTTP servers: failover, which errors are retried, typed
//! errors, bodies, token; TLS in [`tls`].

mod failover;
mod support;
mod tls;
