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
}

impl Default for GrpcConfig {
    fn default() -> Self {
        GrpcConfig { enabled: true }
    }
}

impl GrpcConfig {
    /// Nothing can be wrong with it today; kept so a new field gets its check here.
    pub(super) fn validate(&self, _errs: &mut [String]) {}
}
