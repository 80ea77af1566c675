//! Data at rest (issue 52). The attack: under the usual umask 022 the data directory and
//! `raft/` were 0755 and sled's files and the snapshot files 0644, so every local user could
//! read the token hashes and the obfuscation keys in them. Now every directory of a node's
//! data is 0700 and every file 0600, whatever the umask, and a directory an earlier release
//! left wider is tightened at start.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use leaf_api::profile::Profile;
use leaf_api::types::CreateTagRequest;
use tempfile::TempDir;

use crate::support::{config, start};

/// Every path under `root` (itself included) with group or other permissions.
fn readable_by_others(root: &Path) -> Vec<String> {
    let mut wide = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&p) else { continue };
        if meta.permissions().mode() & 0o077 != 0 {
            wide.push(format!("{} {:o}", p.display(), meta.permissions().mode() & 0o7777));
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    wide
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_data_is_its_owners_alone_whatever_the_umask() {
    let dir = TempDir::new().unwrap();
    // What an earlier release left under umask 022: the directories 0755, a file 0644.
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("raft")).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(data.join("raft"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(data.join("left-behind"), b"x").unwrap();
    std::fs::set_permissions(data.join("left-behind"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // SAFETY: umask(2) only sets this process's mask. The usual one, as a shell leaves it.
    unsafe {
        libc::umask(0o022);
    }
    let cfg = leaf_node::Config { data_dir: data.clone(), ..config(&dir) };
    let (node, c) = start(cfg).await;
    // Token hashes, an obfuscation key, a ledger: what the files must keep private.
    let req = |tag: &str, profile| CreateTagRequest { tag: tag.into(), step: 10, profile, ..Default::default() };
    c.create_tag(&req("hidden", Some(Profile::Obfuscated))).await.unwrap();
    for i in 0..50 {
        c.create_tag(&req(&format!("t-{i}"), None)).await.unwrap();
    }
    c.segment_ids("hidden", 100).await.unwrap();
    let wide = readable_by_others(&data);
    assert!(wide.is_empty(), "readable by other users: {wide:?}");
    assert!(std::fs::read_dir(data.join("raft")).unwrap().count() > 0, "the store is there");
    node.shutdown().await;
    assert!(readable_by_others(&data).is_empty(), "after shutdown: {:?}", readable_by_others(&data));
}
