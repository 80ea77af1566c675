//! Compiles the gRPC protos in `proto/` when the `grpc` feature is on: protox (a protobuf
//! compiler in pure Rust, so no `protoc` install) parses them into a `FileDescriptorSet`, and
//! tonic-prost-build generates the messages, client stubs and server traits into `OUT_DIR`
//! (included by `src/grpc.rs`). Without the feature it does nothing.

const PROTOS: [&str; 2] = ["proto/leaf/v1/leaf.proto", "proto/grpc/health/v1/health.proto"];

fn main() {
    for p in PROTOS {
        println!("cargo:rerun-if-changed={p}");
    }
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "grpc")]
    if let Err(e) = grpc() {
        // A build script reports failure by exiting non-zero; the message says which proto.
        eprintln!("compiling the gRPC protos failed: {e}");
        std::process::exit(1);
    }
}

#[cfg(feature = "grpc")]
fn grpc() -> Result<(), Box<dyn std::error::Error>> {
    let fds = protox::compile(PROTOS, ["proto"])?;
    tonic_prost_build::configure()
        // The node serves on its own listener and clients build their own channels.
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
