//! TLS of the node: HTTPS on its one listener (clients and peers), mutual TLS between nodes,
//! and certificate reload without a restart. Configured by `[tls]` ([`TlsConfig`]).
//!
//! Layout:
//! - this file: [`Tls`], the current configs behind an `ArcSwap` (every new connection, in or
//!   out, takes the current one; open connections keep theirs) and the TLS metrics;
//! - [`load`]: reads the PEM files into a [`Loaded`] set of rustls configs and verifiers;
//! - [`accept`]: the server side of one connection: a plaintext request gets a clear
//!   plaintext 400 instead of a hang, then the handshake, then who the peer is;
//! - [`identity`]: whom a verified certificate speaks for (a node of the cluster CA, or a
//!   client of the client CA);
//! - [`resume`]: session resumption on the listener (tickets and a bounded cache);
//! - [`reload`]: the task that reloads on file change and on SIGHUP.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;

use crate::config::TlsConfig;

pub mod accept;
pub mod identity;
pub mod load;
pub mod reload;
pub mod resume;

pub use load::{Loaded, TlsError};

/// The node's TLS: the current configs and what reloading needs.
pub struct Tls {
    config: TlsConfig,
    node_id: u64,
    current: ArcSwap<Loaded>,
    /// Bumped by every successful reload; a peer client rebuilds its pool when it changes.
    generation: AtomicU64,
    counters: TlsCounters,
}

/// TLS metrics (registered in [`crate::metrics::Metrics`]).
#[derive(Debug, Clone, Default)]
pub struct TlsCounters {
    /// Handshakes that failed (bad or missing client certificate, protocol errors, timeouts).
    pub handshake_failures: Counter,
    /// Completed handshakes that were full ones (certificates sent and verified).
    pub full_handshakes: Counter,
    /// Completed handshakes that resumed an earlier session ([`resume`]).
    pub resumed_handshakes: Counter,
    /// Plaintext requests answered 400 on the TLS port.
    pub plaintext_refused: Counter,
    /// Successful reloads of the files.
    pub reloads: Counter,
    /// Reloads that failed (the old files stay in use).
    pub reload_failures: Counter,
    /// Expiry of the node's certificate, Unix seconds.
    pub cert_not_after: Gauge,
}

impl Tls {
    /// Loads the files of `config` (which must have TLS on) for node `node_id`.
    pub fn load(config: &TlsConfig, node_id: u64, counters: TlsCounters) -> Result<Arc<Tls>, TlsError> {
        let loaded = Loaded::from_files(config, node_id)?;
        counters.cert_not_after.set(loaded.not_after);
        Ok(Arc::new(Tls {
            config: config.clone(),
            node_id,
            current: ArcSwap::from_pointee(loaded),
            generation: AtomicU64::new(0),
            counters,
        }))
    }

    /// The configs new connections use.
    pub fn current(&self) -> Arc<Loaded> {
        self.current.load_full()
    }

    /// Changes with every successful reload.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn config(&self) -> &TlsConfig {
        &self.config
    }

    pub fn counters(&self) -> &TlsCounters {
        &self.counters
    }

    /// Re-reads the files; on failure the configs in use stay.
    pub fn reload(&self) -> Result<(), TlsError> {
        match Loaded::from_files(&self.config, self.node_id) {
            Ok(loaded) => {
                self.counters.cert_not_after.set(loaded.not_after);
                self.current.store(Arc::new(loaded));
                self.generation.fetch_add(1, Ordering::AcqRel);
                self.counters.reloads.inc();
                Ok(())
            }
            Err(e) => {
                self.counters.reload_failures.inc();
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_resume;
