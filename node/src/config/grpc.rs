//! `[grpc]`: the gRPC API (`leaf.v1.IdService`, `grpc.health.v1.Health`) on the node's one
//! listener.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// gRPC on the HTTP listener: same port, same TLS (ALPN `h2`), HTTP/2 cleartext (h2c, prior
/// knowledge) without TLS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GrpcConfig {
    /// Serve gRPC requests (`content-type: application/grpc*`). Off: they take the HTTP path and
    /// get its 404. Default `true`.
    pub enabled: bool,
    /// Most `grpc.health.v1.Health/Watch` streams open at once on this node (each re-reads the
    /// node's state every 250 ms and needs no credential); one more gets `RESOURCE_EXHAUSTED`.
    /// 1 to 100000; default `1024`.
    pub max_health_watches: u32,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        GrpcConfig { enabled: true, max_health_watches: 1024 }
    }
}

impl GrpcConfig {
    pub(super) fn validate(&self, errs: &mut Vec<String>) {
        if !(1..=100_000).contains(&self.max_health_watches) {
            errs.push(format!("grpc.max_health_watches must be 1 to 100000, not {}", self.max_health_watches));
        }
    }
}
