//! The built-in dashboard in a real browser: Debian's headless Chromium opens `/ui` on a
//! follower of a 3-node TLS cluster that requires tokens for IDs, with a scoped token (the
//! `cluster` right only) in the URL fragment, while clients take IDs on every node. The page
//! must show every member ready, the leader, the busy tags with their counts, the snowflake
//! workers, and refresh live; without a token it asks for one; with a node killed it shows
//! that node unreachable. Screenshots go to `target/ui-screenshots/`.
//!
//! Skipped when Chromium is not installed, unless `LEAF_REQUIRE_CHROMIUM=1` (CI installs it).
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
use leaf_api::types::SnowflakeState;
use leaf_cluster_tests::cluster::{Cluster, Options};

use crate::support::*;

/// The browser, if installed (`chromium`, Debian's package).
fn chromium() -> Option<&'static str> {
    match Command::new("chromium").arg("--version").output() {
        Ok(out) if out.status.success() => Some("chromium"),
        other => {
            assert!(std::env::var_os("LEAF_REQUIRE_CHROMIUM").is_none(), "chromium is required but: {other:?}");
            eprintln!("chromium is not installed: skipped");
            None
        }
    }
}

fn screenshots() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/ui-screenshots"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Loads `url` in headless Chromium for `budget_ms` of (virtual) time: the DOM then, and a
/// screenshot in `shot` when given. The cluster's certificates are self-signed for the test,
/// hence `--ignore-certificate-errors` (a browser profile of its own, thrown away).
fn browse(url: &str, budget_ms: u32, shot: Option<&std::path::Path>) -> String {
    let profile = tempfile::TempDir::new().unwrap();
    let mut cmd = Command::new(chromium().unwrap());
    cmd.args([
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--ignore-certificate-errors",
        "--window-size=1400,1200",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .arg(format!("--virtual-time-budget={budget_ms}"));
    match shot {
        Some(path) => cmd.arg(format!("--screenshot={}", path.display())),
        None => cmd.arg("--dump-dom"),
    };
    let out = cmd.arg(url).output().expect("run chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of attribute `name` on the first `<tag` element of `dom` carrying `marker`.
fn attr<'a>(dom: &'a str, marker: &str, name: &str) -> Option<&'a str> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let element = &dom[start..end];
    let key = format!("{name}=\"");
    let v = &element[element.find(&key)? + key.len()..];
    Some(&v[..v.find('"')?])
}

/// The text inside the element with `id`.
fn text_of<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let open = at + dom[at..].find('>')? + 1;
    Some(&dom[open..open + dom[open..].find('<')?])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_live_cluster_in_a_real_browser_behind_tls_and_tokens() {
    if chromium().is_none() {
        return;
    }
    let lane = alone().await;
    let mut opts = Options::new(bin());
    opts.tls = true;
    opts.extra_toml = "[auth]\nrequire_token_for_ids = true\n".into();
    let mut cluster = Cluster::start(3, opts).unwrap();
    let leader = cluster.wait_leader(FORM).await.unwrap();
    let follower = if leader == 1 { 2 } else { 1 };
    let admin = cluster.client(leader);
    for tag in ["orders", "users"] {
        create_tag(&admin, tag, 50).await;
    }
    // Tenants' tags by the ten thousand (`LEAF_UI_TAGS`, a million for BENCHMARKS.md),
    // created in batches: the page finds ten of them by their prefix.
    let tenants: usize = std::env::var("LEAF_UI_TAGS").ok().and_then(|v| v.parse().ok()).unwrap_or(50_000);
    assert!((20..=leaf_raft_store::MAX_TAGS - 10).contains(&tenants), "LEAF_UI_TAGS={tenants}");
    let started = std::time::Instant::now();
    let names: Vec<String> = (0..tenants).map(|i| format!("tenant-{i:07}")).collect();
    // A batch is idempotent, and one of 10,000 tags may take longer than the node's 5 s commit
    // wait on a loaded machine (CI builds beside this test): its 503 is retried.
    let batches = {
        let builder = leaf_client::Client::builder([cluster.url(leader)])
            .token(leaf_cluster_tests::cluster::TOKEN)
            .timeout(Duration::from_secs(30))
            .deadline(Duration::from_secs(180))
            .retries(10);
        let builder = match cluster.ca() {
            Some(ca) => builder.ca_file(ca),
            None => builder,
        };
        builder.build().unwrap()
    };
    for chunk in names.chunks(leaf_api::tag::MAX_TAGS_PER_REQUEST) {
        let tags = chunk
            .iter()
            .map(|t| leaf_api::types::CreateTagRequest { tag: t.clone(), step: 10, ..Default::default() })
            .collect();
        batches.create_tags(&leaf_api::types::CreateTagsRequest { tags }).await.unwrap();
    }
    eprintln!("{tenants} tenant tags created in {:?}", started.elapsed());
    let search = format!("tenant-{:06}", tenants / 20);
    let ui = CreateTokenRequest {
        name: "dashboard".into(),
        rights: vec![Right::Monitor],
        tags: vec![TagPattern::parse("*").unwrap()],
        quota: None,
        ..Default::default()
    };
    let ui = admin.create_token(&ui).await.unwrap().bearer;
    // The browsed node knows the token once it applied its creation (behind the tenants).
    let created_at = cluster.status(leader).await.unwrap().last_applied_index.unwrap();
    applied(&cluster, follower, created_at).await;
    // Clients on every node (admin token: IDs need one here) until the end of the test.
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (1..=3u64)
        .map(|id| {
            let c = cluster.client_with(id, Some(leaf_cluster_tests::cluster::TOKEN), Duration::from_secs(3));
            let stop = stop.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let tag = if n.is_multiple_of(3) { "users" } else { "orders" };
                    if c.segment_ids(tag, 5).await.is_err() {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    n += 1;
                }
            })
        })
        .collect();
    // Snowflake workers registered on every node.
    for id in 1..=3 {
        wait_snowflake(&cluster, id, SnowflakeState::Serving).await;
    }
    // The browsed node has served both tags (the page shows its counts).
    let typed = cluster.client_with(follower, Some(&ui), Duration::from_secs(10));
    eventually(&format!("node {follower} serves IDs of the tags"), FORM, || async {
        let d = typed.dashboard().await.unwrap();
        if ["orders", "users"].iter().all(|tag| d.tags.iter().any(|t| t.info.tag == *tag && t.served > 0)) {
            Ok(())
        } else {
            Err(d.tags)
        }
    })
    .await;

    let page = format!("{}/ui?refresh=1", cluster.url(follower));
    let with_token = format!("{page}#token={ui}");
    let dom = tokio::task::block_in_place(|| browse(&with_token, 8000, None));
    assert_eq!(attr(&dom, "<body", "data-state"), Some("ok"), "{dom}");
    let refreshes: u32 = attr(&dom, "<body", "data-refreshes").and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(refreshes >= 3, "the page refreshed {refreshes} times in 8 s at refresh=1");
    assert_eq!(text_of(&dom, "node-id"), Some(follower.to_string().as_str()), "answered by the node browsed");
    // The leader as the cluster has it now: the 50,000 creations and the browser load this
    // machine enough that an election may have moved it since the start (CI saw one).
    let leader = cluster.wait_leader(FORM).await.unwrap();
    assert_eq!(text_of(&dom, "leader").map(str::trim), Some(leader.to_string().as_str()));
    for id in 1..=3 {
        let row = format!("data-node-id=\"{id}\"");
        assert_eq!(attr(&dom, &row, "data-ready"), Some("true"), "node {id} not shown ready:\n{dom}");
        let is_leader = if id == leader { "true" } else { "false" };
        assert_eq!(attr(&dom, &row, "data-leader"), Some(is_leader), "node {id}");
    }
    assert_eq!(dom.matches("data-worker-id=").count(), 3, "a snowflake worker row per node:\n{dom}");
    for tag in ["orders", "users"] {
        assert!(dom.contains(&format!("data-tag=\"{tag}\"")), "tag {tag} missing");
    }
    assert!(dom.contains("<svg"), "no chart drawn");
    let dir = screenshots();
    tokio::task::block_in_place(|| browse(&with_token, 8000, Some(&dir.join("dashboard.png"))));

    // Searching: `?tag=` fills the search box; the node lists only the tags starting with it.
    let searched = format!("{page}&tag={search}#token={ui}");
    let started = std::time::Instant::now();
    let dom = tokio::task::block_in_place(|| browse(&searched, 6000, None));
    eprintln!("the search among {tenants} tags browsed in {:?}", started.elapsed());
    assert_eq!(attr(&dom, "<body", "data-state"), Some("ok"), "{dom}");
    assert_eq!(dom.matches(&format!("data-tag=\"{search}")).count(), 10, "{search}0 to 9:\n{dom}");
    let next = format!("tenant-{:06}0", tenants / 20 + 1);
    assert!(!dom.contains("data-tag=\"orders\"") && !dom.contains(&format!("data-tag=\"{next}\"")), "{dom}");
    let count = text_of(&dom, "tags-count").unwrap_or_default();
    assert!(count.contains(&format!("10 starting with \"{search}\"")), "{count}");
    let started = std::time::Instant::now();
    let d = typed.dashboard_matching(&search).await.unwrap();
    assert_eq!((d.tags.len(), d.tags_total), (10, 10));
    let whole = typed.dashboard().await.unwrap();
    eprintln!("dashboard answers: a search and the whole in {:?}", started.elapsed());
    assert_eq!((whole.tags_total, whole.tags.len()), (tenants + 2, leaf_api::dashboard::MAX_DASHBOARD_TAGS));
    // Showing a tag does not load it: the node browsed holds buffers for the tags it served.
    let cached = typed.cache().await.unwrap();
    assert!(cached.iter().all(|e| !e.tag.starts_with("tenant-")), "the dashboard loaded tags: {} cached", cached.len());

    // No token: the page asks for one rather than showing anything.
    let dom = tokio::task::block_in_place(|| browse(&page, 3000, None));
    assert_eq!(attr(&dom, "<body", "data-state"), Some("auth"), "{dom}");

    // A node dies: the page says it does not answer.
    let victim = (1..=3).find(|id| *id != leader && *id != follower).unwrap();
    cluster.kill(victim);
    let dom = tokio::task::block_in_place(|| browse(&with_token, 6000, None));
    let row = format!("data-node-id=\"{victim}\"");
    assert_ne!(attr(&dom, &row, "data-ready"), Some("true"), "a dead node shown ready:\n{dom}");
    assert_eq!(attr(&dom, &format!("data-node-id=\"{leader}\""), "data-ready"), Some("true"));
    tokio::task::block_in_place(|| browse(&with_token, 6000, Some(&dir.join("dashboard-node-down.png"))));
    stop.store(true, Ordering::Relaxed);
    for t in load {
        t.await.unwrap();
    }
    // The same data through the typed client, as the page got it.
    let d = typed.dashboard().await.unwrap();
    let dead = d.nodes.iter().find(|n| n.node_id == victim).unwrap();
    assert!(dead.health.is_none() && dead.error.is_some(), "{dead:?}");
    assert!(d.tags.iter().any(|t| t.info.tag == "orders" && t.served > 0), "{:?}", d.tags);
    drop(lane);
}
