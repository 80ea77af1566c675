//! The `leaf` binary: see `leaf --help`.
fn main() -> std::process::ExitCode {
    leaf_node::cli::main()
}
