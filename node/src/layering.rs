//! The module rules, checked on the module graph. Every source file of the crate is parsed
//! (`syn`), and every `use` tree (groups expanded: `use crate::{http, ..}` names `http`) and
//! every path in its code is resolved to the top-level module of this crate, or the external
//! crate, that it names (`crate::`, `super::` and `self::` are followed from the file's own
//! module). Two rules follow, as ARCHITECTURE.md states them:
//!
//! 1. The service core and the layers under it never name an edge, nor the edges' frameworks;
//!    the two edges never name each other. Only [`crate::listener`] (which dispatches to both
//!    edges), the CLI and the crate root may know both.
//!
//!    | files under | must not name |
//!    |---|---|
//!    | `service/`, `access/`, `raft/`, `tags/`, `snowflake/`, `profiles/`, … (not an edge) | `http`, `grpc`, `listener`, `cli`, the crates `axum` and `tonic` |
//!    | `metrics/` | the same, but for the frameworks' two status types it counts by: `axum::http::StatusCode` and `tonic::Code` |
//!    | `http/` | `grpc`, `listener`, `cli` |
//!    | `grpc/` | `http`, `listener`, `cli` |
//!
//!    And only `raft/` names the crate `openraft`: consensus stays behind its interface.
//!
//!    `raft/` names no feature either: of this crate it names only itself and the node's
//!    plumbing ([`RAFT_MAY_NAME`]: the clock, the configuration, the ticker, TLS). Features add
//!    to the leader's execution through `raft::hooks`, so a new profile touches no file of it.
//!
//! 2. The core has no cycle: no two of its top-level modules name each other, directly or
//!    through others.
//!
//! Test code (`#[cfg(test)]` items, and the files of modules declared under it) is not held to
//! them: a test may check one layer against another (the configuration's variables against
//! the CLI's, say). What it cannot see: paths inside macro invocations (`format!(..)`, `tokio::select!`) are
//! tokens, not parsed code. A bare name imported from elsewhere is caught at its `use`.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// What a path names: a top-level module of this crate, or an external crate.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Module(String),
    Crate(String),
}

/// One path of a file, as written (`crate::http::router`), and what it names.
#[derive(Debug, Clone)]
struct Named {
    target: Target,
    path: String,
}

/// The modules that are edges or wire them together: rule 2 does not apply to them.
const NOT_CORE: [&str; 6] = ["http", "grpc", "listener", "cli", "", "main"];

/// The frameworks' types that `metrics/` may name (rule 1).
const METRICS_MAY_NAME: [&str; 2] = ["axum::http::StatusCode", "tonic::Code"];

/// The modules of this crate that `raft/` may name (rule 1): the node's plumbing, no feature.
const RAFT_MAY_NAME: [&str; 5] = ["raft", "clock", "config", "ticker", "tls"];

/// Collects what one file names.
struct Names {
    /// The module being read, from the crate root (`["service", "auth"]`; `[]` for `lib.rs`);
    /// an inline `mod` is pushed while its items are read.
    module: Vec<String>,
    found: Vec<Named>,
    /// The modules this file declares under `#[cfg(test)]` (`mod tests;`), whose files are
    /// test code.
    test_modules: Vec<Vec<String>>,
}

/// Whether `attrs` hold `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs
        .iter()
        .any(|a| a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string().trim() == "test"))
}

/// An item's attributes, for the kinds of item that hold code or name paths.
fn attrs_of(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        _ => &[],
    }
}

impl Names {
    /// Records the path `segments` (as written in the file).
    fn resolve(&mut self, segments: &[String], leading_colon: bool) {
        let Some(first) = segments.first() else { return };
        let path = segments.join("::");
        let (mut at, rest) = match first.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "self" => (self.module.clone(), &segments[1..]),
            "super" => {
                let mut at = self.module.clone();
                let ups = segments.iter().take_while(|s| *s == "super").count();
                at.truncate(at.len().saturating_sub(ups));
                (at, &segments[ups..])
            }
            // A bare first segment of a longer path is an external crate, or a name this
            // file imported (whose `use` was recorded) or defined.
            _ if segments.len() > 1 || leading_colon => {
                self.found.push(Named { target: Target::Crate(first.clone()), path });
                return;
            }
            _ => return,
        };
        at.extend(rest.iter().take(1).cloned());
        if let Some(top) = at.first() {
            self.found.push(Named { target: Target::Module(top.clone()), path });
        }
    }

    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>, leading_colon: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix, leading_colon);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.resolve(prefix, leading_colon);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.resolve(prefix, leading_colon);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => {
                prefix.push("*".into());
                self.resolve(prefix, leading_colon);
                prefix.pop();
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix, leading_colon);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Names {
    /// Test code (`#[cfg(test)]`) is skipped: a test may check one layer against another.
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if is_test(attrs_of(item)) {
            if let syn::Item::Mod(m) = item {
                self.test_modules.push(self.module.iter().cloned().chain([m.ident.to_string()]).collect());
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.module.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&u.tree, &mut Vec::new(), u.leading_colon.is_some());
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.resolve(&segments, p.leading_colon.is_some());
        syn::visit::visit_path(self, p);
    }
}

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
    out.sort();
    out
}

/// The module of the file at `rel` (from `src/`): `service/auth.rs` is `service::auth`,
/// `service/mod.rs` is `service`, `lib.rs` the root (`[]`), `main.rs` the binary (`["main"]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap_or_default();
    match last.as_str() {
        "lib.rs" | "mod.rs" if parts.is_empty() || last == "mod.rs" => {}
        "main.rs" if parts.is_empty() => parts.push("main".into()),
        file => parts.push(file.trim_end_matches(".rs").into()),
    }
    parts
}

/// What each file of production code under the crate's `src/` directory `root` names:
/// `(file, its top-level module, what it names)`. Files of modules declared under
/// `#[cfg(test)]` are left out.
fn graph(root: &Path) -> Vec<(PathBuf, String, Vec<Named>)> {
    let mut read = Vec::new();
    let mut test_modules = Vec::new();
    for file in sources(root) {
        let rel = file.strip_prefix(root).unwrap().to_path_buf();
        let text = std::fs::read_to_string(&file).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
        let module = module_of(&rel);
        let mut names = Names { module: module.clone(), found: Vec::new(), test_modules: Vec::new() };
        names.visit_file(&ast);
        test_modules.extend(names.test_modules);
        read.push((rel, module, names.found));
    }
    read.into_iter()
        .filter(|(_, module, _)| !test_modules.iter().any(|t| module.starts_with(t)))
        .map(|(rel, module, found)| (rel, module.first().cloned().unwrap_or_default(), found))
        .collect()
}

/// Whether a file of top-level module `module` may name `n` (rule 1).
fn allowed(module: &str, n: &Named) -> bool {
    let edge_modules: &[&str] = match module {
        "listener" | "cli" | "" | "main" | "layering" => return true,
        "http" => &["grpc", "listener", "cli"],
        "grpc" => &["http", "listener", "cli"],
        _ => &["http", "grpc", "listener", "cli"],
    };
    match &n.target {
        Target::Module(m) if module == "raft" => RAFT_MAY_NAME.contains(&m.as_str()),
        Target::Module(m) => !edge_modules.contains(&m.as_str()),
        Target::Crate(c) if c == "openraft" => module == "raft",
        Target::Crate(c) if module != "http" && module != "grpc" && (c == "axum" || c == "tonic") => {
            module == "metrics"
                && METRICS_MAY_NAME.iter().any(|p| n.path == *p || n.path.starts_with(&format!("{p}::")))
        }
        Target::Crate(_) => true,
    }
}

/// Rule 1's violations: `(file, path as written)`.
fn violations(root: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    for (file, module, names) in graph(root) {
        for n in names {
            if !allowed(&module, &n) {
                found.push((file.clone(), n.path));
            }
        }
    }
    found
}

/// One cycle of rule 2: the sorted modules of a strongly connected set, and for each edge
/// inside it one file and the path it names.
type Cycle = (Vec<String>, Vec<(PathBuf, String)>);

/// Rule 2's violations.
fn cycles(root: &Path) -> Vec<Cycle> {
    let mut edges: BTreeMap<String, BTreeMap<String, (PathBuf, String)>> = BTreeMap::new();
    for (file, module, names) in graph(root) {
        if NOT_CORE.contains(&module.as_str()) || module == "layering" {
            continue;
        }
        for n in names {
            if let Target::Module(to) = n.target {
                if to != module && !NOT_CORE.contains(&to.as_str()) {
                    edges.entry(module.clone()).or_default().entry(to).or_insert((file.clone(), n.path));
                }
            }
        }
    }
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for to in edges.get(&m).into_iter().flat_map(|e| e.keys()) {
                if seen.insert(to.clone()) {
                    todo.push(to.clone());
                }
            }
        }
        seen
    };
    let mut sets: BTreeSet<Vec<String>> = BTreeSet::new();
    for m in edges.keys() {
        let mut set: Vec<String> =
            reach(m).into_iter().filter(|o| o == m || reach(o).contains(m)).chain([m.clone()]).collect();
        set.sort();
        set.dedup();
        if set.len() > 1 {
            sets.insert(set);
        }
    }
    sets.into_iter()
        .map(|set| {
            let within: Vec<(PathBuf, String)> = set
                .iter()
                .flat_map(|a| {
                    edges.get(a).into_iter().flatten().filter(|(b, _)| set.contains(b)).map(|(_, w)| w.clone())
                })
                .collect();
            (set, within)
        })
        .collect()
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn no_layer_names_a_module_it_must_not() {
    let found = violations(&src());
    assert!(found.is_empty(), "module rules broken (see node/src/layering.rs): {found:#?}");
}

#[test]
fn the_core_has_no_cycle() {
    let found = cycles(&src());
    assert!(found.is_empty(), "cycles in the core (see node/src/layering.rs): {found:#?}");
}

/// Writes `files` under a new directory, for the checks' own tests.
fn planted(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in files {
        let path = dir.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

#[test]
fn the_rule_check_catches_an_edge_named_by_the_core() {
    let dir = planted(&[
        ("service/mod.rs", "use crate::{http, raft::Raft};\nfn f() { http::router(); }\n"),
        ("service/auth.rs", "fn f() { super::super::grpc::serve(); }\n"),
        ("grpc/ids.rs", "use crate::http::ids::decode_id;\n"),
        ("http/mod.rs", "fn f() { let g = crate::grpc::routes(app); }\n"),
        ("access/mod.rs", "use axum::http::StatusCode;\n"),
        ("metrics/mod.rs", "use axum::http::StatusCode;\nfn f(c: tonic::Code) { let _ = axum::Router::new(); }\n"),
        ("raft/mod.rs", "use self::http::X; mod http {}\nfn f() { monotonic::Windows; leaf_grpc::x(); }\n"),
        ("listener/mod.rs", "use crate::http::router; use crate::grpc::routes;\n"),
        ("raft/network.rs", "use openraft::BasicNode;\n"),
        (
            "raft/leader.rs",
            "use crate::{clock::Clock, allocation::group::Segments};\nfn f() { super::super::gapless::lapse(); }\n",
        ),
        ("backup/restore.rs", "fn f(_: openraft::BasicNode) {}\n"),
        ("config/mod.rs", "#[cfg(test)]\nmod tests;\n#[cfg(test)]\nfn t() { crate::cli::Cli::parse(); }\n"),
        ("config/tests.rs", "use crate::cli::Cli;\n"),
        ("tags/mod.rs", "mod inner { use super::super::http::X; }\n"),
    ]);
    let mut found: Vec<(String, String)> =
        violations(dir.path()).into_iter().map(|(f, what)| (f.display().to_string(), what)).collect();
    found.sort();
    let want: Vec<(String, String)> = [
        ("access/mod.rs", "axum::http::StatusCode"),
        ("backup/restore.rs", "openraft::BasicNode"),
        ("grpc/ids.rs", "crate::http::ids::decode_id"),
        ("http/mod.rs", "crate::grpc::routes"),
        ("metrics/mod.rs", "axum::Router::new"),
        ("raft/leader.rs", "crate::allocation::group::Segments"),
        ("raft/leader.rs", "super::super::gapless::lapse"),
        ("service/auth.rs", "super::super::grpc::serve"),
        ("service/mod.rs", "crate::http"),
        ("tags/mod.rs", "super::super::http::X"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(found, want);
}

#[test]
fn the_cycle_check_finds_a_cycle_through_a_third_module() {
    let dir = planted(&[
        ("service/mod.rs", "use crate::access::Principal;\n"),
        ("access/mod.rs", "use crate::profiles::Profile;\n"),
        ("profiles/mod.rs", "fn f(_: crate::service::ApiError) {}\n"),
        ("raft/mod.rs", "use crate::service::App;\n"),
        ("http/mod.rs", "use crate::service::App;\n"),
        ("service/edge.rs", "use crate::http::router;\n"),
    ]);
    let found: Vec<Vec<String>> = cycles(dir.path()).into_iter().map(|(set, _)| set).collect();
    assert_eq!(found, [vec!["access".to_string(), "profiles".into(), "service".into()]]);
}
