//! The `leaf` command line, built inside this package so its tests can spawn node processes.
//! Unlike `leaf`, it arms the storage crash points and disk faults named in `LEAF_FAILPOINTS`
//! and, with `LEAF_FAILPOINTS_FILE`, re-arms them whenever that file changes (this package
//! builds leaf-node with the `failpoints` feature): arming lives here, not in leaf-node, so a
//! `leaf` binary can never be crashed through its environment, even one built together with
//! this package (cargo then compiles the dormant points into it).
fn main() -> std::process::ExitCode {
    match leaf_raft_store::failpoint::arm_from_env() {
        Ok(armed) if !armed.is_empty() => eprintln!("leaf failpoints armed: {}", armed.join(", ")),
        Ok(_) => {}
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    }
    if let Some(path) = std::env::var_os("LEAF_FAILPOINTS_FILE") {
        if let Err(e) = leaf_raft_store::failpoint::watch_file(path.into()) {
            eprintln!("error: cannot watch LEAF_FAILPOINTS_FILE: {e}");
            return std::process::ExitCode::from(2);
        }
    }
    leaf_node::cli::main()
}
