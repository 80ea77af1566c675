//! The `leaf` command line, built inside this package so its tests can spawn node processes.
fn main() -> std::process::ExitCode {
    leaf_node::cli::main()
}
