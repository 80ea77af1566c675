//! The `leaf` client commands against a running node.
use std::process::Command;
use std::time::Duration;

use crate::support::*;
use leaf_api::types::SnowflakeState;
use leaf_node::config::Config;
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_commands_work_against_a_node() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(Config { admin_token: Some(TOKEN.into()), ..config(&dir) }).await;
    // `leaf health` checks both modes.
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(10)).await;
    let url = format!("http://{}", node.http_addr());
    let leaf_url = url.clone();
    let leaf = move |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_leaf"))
            .args(args)
            .args(["--url", &leaf_url])
            .env("LEAF_ADMIN_TOKEN", TOKEN)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, out) = tokio::task::spawn_blocking(move || {
        let log = [
            leaf(&["health"]),
            leaf(&["tag", "create", "cli", "--step", "10", "--description", "from the CLI"]),
            leaf(&["tag", "create", "cli", "--step", "10"]),
            leaf(&["tag", "update", "cli", "--step", "20"]),
            leaf(&["get", "segment", "cli", "--count", "3"]),
            leaf(&["tag", "show", "cli"]),
            leaf(&["get", "segment", "missing"]),
            leaf(&["get", "segment", "cli", "--count", "5", "--ranges"]),
            leaf(&["template", "put", "t", "--pattern", "cli-*", "--step", "7", "--max-id", "70"]),
            leaf(&["get", "segment", "cli-made"]),
            leaf(&["template", "list"]),
            leaf(&["template", "delete", "t"]),
            leaf(&["template", "delete", "t"]),
        ];
        (log.iter().map(|l| l.0).collect::<Vec<_>>(), log.into_iter().map(|l| l.1).collect::<Vec<_>>())
    })
    .await
    .unwrap();
    let ok = Some(0);
    assert_eq!(code, [ok, ok, Some(2), ok, ok, ok, Some(2), ok, ok, ok, ok, ok, Some(2)], "{out:?}");
    assert!(out[0].contains("\"ready\":true"));
    assert_eq!(out[4].trim(), "1\n2\n3");
    assert!(out[5].contains("\"step\":20"));
    // The first segment was 1..11 (step 10): 4..9 are what is left of it.
    assert_eq!(out[7].trim(), r#"{"ranges":[{"start":4,"end":9}]}"#);
    // A template made `cli-made` on its first ID request, with its settings.
    assert!(out[8].contains("\"pattern\":\"cli-*\""), "{}", out[8]);
    assert_eq!(out[9].trim(), "70");
    assert!(out[10].contains("\"name\":\"t\""), "{}", out[10]);
    assert_eq!(c.tag("cli-made").await.unwrap().step, 7);
    // A batch from a file of JSON lines: 12,000 tags take two requests; the file's existing tag
    // (`cli`) and a blank line are fine; sent again, everything exists.
    let file = dir.path().join("tags.jsonl");
    let mut lines: Vec<String> = (0..12_000).map(|i| format!(r#"{{"tag":"f-{i}","step":10}}"#)).collect();
    lines.insert(7, r#"{"tag":"cli","step":5}"#.into());
    lines.insert(9, String::new());
    std::fs::write(&file, lines.join("\n")).unwrap();
    let batch_file = file.to_str().unwrap().to_string();
    let batch_url = url.clone();
    let (first, again, broken) = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str], url: &str| {
            let out = Command::new(env!("CARGO_BIN_EXE_leaf"))
                .args(args)
                .args(["--url", url])
                .env("LEAF_ADMIN_TOKEN", TOKEN)
                .output()
                .unwrap();
            (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
        };
        let first = run(&["tag", "create-batch", &batch_file], &batch_url);
        let again = run(&["tag", "create-batch", &batch_file], &batch_url);
        std::fs::write(&batch_file, "{\"tag\":\"ok-1\",\"step\":1}\nnot json\n").unwrap();
        (first, again, run(&["tag", "create-batch", &batch_file], &batch_url))
    })
    .await
    .unwrap();
    assert_eq!(first, (Some(0), "{\"created\":12000,\"existing\":1}\n".to_string()));
    assert_eq!(again, (Some(0), "{\"created\":0,\"existing\":12001}\n".to_string()));
    assert_ne!(broken.0, Some(0), "a file with a line that is not JSON fails");
    assert!(c.tag("ok-1").await.is_err(), "nothing of a broken file is sent");
    node.shutdown().await;
    // An unreachable node: health exits 1.
    let out = Command::new(env!("CARGO_BIN_EXE_leaf")).args(["health", "--url", &url]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}

/// `leaf token create --bearer-file` stores the bearer (mode 0600) and never prints it; run
/// again, it keeps the file and creates nothing (a setup step that may run twice).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_create_stores_its_bearer_in_a_file_once() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new().unwrap();
    let (node, c) = start(Config { admin_token: Some(TOKEN.into()), ..config(&dir) }).await;
    let url = format!("http://{}", node.http_addr());
    let file = dir.path().join("secrets").join("regions.token");
    std::fs::create_dir(file.parent().unwrap()).unwrap();
    let (leaf_url, path) = (url.clone(), file.display().to_string());
    let create = move || {
        let out = Command::new(env!("CARGO_BIN_EXE_leaf"))
            .args(["token", "create", "regions", "--rights", "regions,tags", "--tags", "*", "--bearer-file", &path])
            .args(["--url", &leaf_url])
            .env("LEAF_ADMIN_TOKEN", TOKEN)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (first, again) = tokio::task::spawn_blocking(move || (create(), create())).await.unwrap();
    assert_eq!(first.0, Some(0), "{first:?}");
    let bearer = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert!(bearer.starts_with("leaf_"), "{bearer}");
    assert!(!first.1.contains(&bearer), "the bearer was printed: {}", first.1);
    let info: leaf_api::tokens::TokenInfo = serde_json::from_str(first.1.trim()).unwrap();
    assert_eq!(info.name, "regions");
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    // Again: the file kept, nothing created.
    assert_eq!(again, (Some(0), String::new()));
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), bearer);
    assert_eq!(c.tokens().await.unwrap().iter().filter(|t| t.name == "regions").count(), 1);
    // A directory where the file should be: refused, nothing created.
    let (leaf_url, dir_path) = (url.clone(), dir.path().join("secrets").display().to_string());
    let refused = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_leaf"))
            .args(["token", "create", "other", "--rights", "tags", "--tags", "*", "--bearer-file", &dir_path])
            .args(["--url", &leaf_url])
            .env("LEAF_ADMIN_TOKEN", TOKEN)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(c.tokens().await.unwrap().iter().all(|t| t.name != "other"));
    // The stored bearer is the token's: it may create a tag (the `tags` right).
    let scoped = client(&url, Some(bearer));
    scoped.create_tag(&tag_req("by-regions", 10)).await.unwrap();
    node.shutdown().await;
}
