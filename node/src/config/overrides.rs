//! Command-line overrides of `leaf serve`: the last layer of the configuration, above the
//! environment.
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

use super::Peers;

/// Command-line overrides; `None` leaves the lower layers' value.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_addr: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers: Option<Peers>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<FaultOverrides>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsOverrides>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure_plaintext_peers: Option<bool>,
}

/// `--tls-cert`, `--tls-key`, `--tls-ca`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TlsOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
}

/// `--enable-fault-injection`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FaultOverrides {
    pub enabled: bool,
}
