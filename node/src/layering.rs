//! The module rules, checked on the source: the service core and the layers under it never
//! name an edge, and the two edges never name each other. Only [`crate::listener`] (which
//! dispatches to both edges) and the crate root may know both.
//!
//! | files under | must not name |
//! |---|---|
//! | `service/`, `access/`, `raft/`, `tags/`, `snowflake/`, `profiles/`, … (not an edge) | `crate::http`, `crate::grpc`, `crate::listener`, `axum::`, `tonic::` |
//! | `http/` | `crate::grpc`, `crate::listener` |
//! | `grpc/` | `crate::http`, `crate::listener` |
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// Whether `line` names `path` as a path of its own (`monotonic::` does not name `tonic::`).
fn names(line: &str, path: &str) -> bool {
    line.match_indices(path)
        .any(|(at, _)| !line[..at].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_'))
}

/// What files under a top-level module of the crate must not name.
fn forbidden(module: &str) -> &'static [&'static str] {
    match module {
        "http" => &["crate::grpc", "crate::listener"],
        "grpc" => &["crate::http", "crate::listener"],
        // The listener knows both edges; the CLI and the crate root wire everything together;
        // metrics and TLS serve the listener and count per route (HTTP types, no edge module).
        "listener" | "cli" | "lib.rs" | "main.rs" | "layering.rs" => &[],
        "metrics" | "tls" => &["crate::http", "crate::grpc", "crate::listener"],
        _ => &["crate::http", "crate::grpc", "crate::listener", "axum::", "tonic::"],
    }
}

/// The violations in the crate's `src/` directory `root`: `(file, line number, what)`.
fn violations(root: &Path) -> Vec<(PathBuf, usize, &'static str)> {
    let mut found = Vec::new();
    for file in sources(root) {
        let rel = file.strip_prefix(root).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_str().unwrap();
        // A top-level file is its module (`segment.rs`), except the roots named as files.
        let module = match first {
            "lib.rs" | "main.rs" | "layering.rs" => first,
            other => other.trim_end_matches(".rs"),
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for name in forbidden(module) {
                if names(line, name) {
                    found.push((rel.to_path_buf(), n + 1, *name));
                }
            }
        }
    }
    found
}

#[test]
fn no_layer_names_a_module_it_must_not() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&root);
    assert!(found.is_empty(), "module rules broken (see node/src/layering.rs): {found:#?}");
}

#[test]
fn the_rule_check_catches_an_edge_named_by_the_core() {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in [
        ("service/mod.rs", "use crate::http::ApiError;\n"),
        ("grpc/ids.rs", "use crate::http::ids::decode_id;\n"),
        ("http/mod.rs", "let g = crate::grpc::routes(app);\n"),
        ("access/mod.rs", "use axum::http::StatusCode;\n"),
        ("raft/mod.rs", "monotonic::Windows; leaf_grpc::x; not_crate::http\n"),
        ("listener/mod.rs", "use crate::http::router; use crate::grpc::routes;\n"),
    ] {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let mut found: Vec<_> = violations(dir.path()).into_iter().map(|(f, _, what)| (f, what)).collect();
    found.sort();
    let want: Vec<(PathBuf, &str)> = vec![
        ("access/mod.rs".into(), "axum::"),
        ("grpc/ids.rs".into(), "crate::http"),
        ("http/mod.rs".into(), "crate::grpc"),
        ("service/mod.rs".into(), "crate::http"),
    ];
    assert_eq!(found, want);
}
