//! Integration tests of one `leaf` node over real HTTP and gRPC, one module per area; what
//! they share is in [`support`].

mod batches;
mod certs_cli;
mod cli;
mod edge;
mod errors;
mod forecast;
mod gapless;
mod gapless_security;
mod grpc;
mod grpc_python;
mod ids;
mod leaf_import;
mod monitoring;
mod private_data;
mod profiles;
mod ranges;
mod refusals;
mod regions;
mod restart;
mod security;
mod snowflake;
mod snowflake_restart;
mod support;
mod templates;
mod tls;
mod tokens;
mod upgrade;
