//! TLS session resumption on the listener: a client that connected once resumes its session on
//! its next connection instead of doing a full handshake (no certificate chain sent or
//! verified, no signature: a key exchange and a MAC), the cost that dominates a new connection
//! per request.
//!
//! - **Stateless tickets** (TLS 1.3, and TLS 1.2 clients that ask for them): the session is
//!   sealed (ChaCha20-Poly1305) under a random key only this process holds, never written
//!   anywhere; ring's [`Ticketer`] makes a new key every 6 hours (rustls's fixed period) and
//!   accepts tickets of the previous one, so a ticket lives at most 12 hours.
//! - **A session cache** for TLS 1.2 session IDs: [`SESSION_CACHE`] sessions at most, oldest
//!   dropped first.
//!
//! Both belong to one generation of the configs ([`super::Loaded`]): a reload of the TLS files
//! makes new ones, so no session made under the old certificates or CAs is resumed after it.
//! A resumed session carries the client certificate chain of its full handshake, which
//! [`super::identity::identify`] verifies again against the current CAs and clock on every
//! connection, resumed or not: resumption never makes a node or client of a certificate that
//! would not be one now. Tickets and session secrets are never logged (no key log is set).
use rustls::crypto::ring::Ticketer;
use rustls::server::ServerSessionMemoryCache;
use rustls::ServerConfig;

use super::TlsError;

/// Sessions kept for TLS 1.2 session-ID resumption. One holds the session's secret and the
/// client's certificate chain (under 2 KiB with `leaf certs` certificates), so the cache stays
/// under about 8 MiB; it is only for TLS 1.2 clients without tickets, TLS 1.3 uses tickets.
pub const SESSION_CACHE: usize = 4096;

/// Turns on stateless tickets and the bounded session cache on `server`.
pub fn enable(server: &mut ServerConfig) -> Result<(), TlsError> {
    server.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    server.ticketer = Ticketer::new().map_err(|e| TlsError::Config(format!("session tickets: {e}")))?;
    Ok(())
}
