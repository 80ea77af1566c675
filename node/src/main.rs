//! The `leaf` binary: see `leaf --help`.

/// mimalloc returns the memory of closed connections to the OS; glibc's malloc kept a flood's
/// peak (BENCHMARKS.md, "Connection flood").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    leaf_node::cli::main()
}
