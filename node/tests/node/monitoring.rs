//! What an operator sees of one node: `/metrics` in either text format (negotiated, and clean
//! under `promtool check metrics` when Debian's prometheus is installed), the request latency,
//! process, build, Raft and snowflake series; the dashboard's data (`/admin/dashboard`) behind
//! the admin credentials; and the `/ui` page and its assets with their security headers.
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};
use hyper::{Method, StatusCode};
use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
use leaf_api::types::SnowflakeState;
use leaf_api::ErrorCode;
use tempfile::TempDir;

use crate::edge::send;
use crate::support::{client, config, create_tag, get_ids, start, wait_snowflake, TOKEN};

async fn get(addr: std::net::SocketAddr, path: &str, accept: Option<&str>) -> (StatusCode, hyper::HeaderMap, Bytes) {
    let mut req = hyper::Request::builder().method(Method::GET).uri(path).header("host", "localhost");
    if let Some(a) = accept {
        req = req.header(ACCEPT, a);
    }
    send(addr, req.body(Full::new(Bytes::new())).unwrap()).await
}

/// `promtool check metrics` on `text`: `Ok(())` when clean, the problems otherwise; `None`
/// when promtool is not installed (then the check is skipped, unless
/// `LEAF_REQUIRE_PROMETHEUS=1`, as in CI).
fn promtool_check(text: &str) -> Option<Result<(), String>> {
    use std::io::Write;
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            assert!(std::env::var_os("LEAF_REQUIRE_PROMETHEUS").is_none(), "promtool is required but: {e}");
            eprintln!("promtool not installed ({e}): the lint check is skipped");
            return None;
        }
    };
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Some(if out.status.success() && said.trim().is_empty() { Ok(()) } else { Err(said) })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_negotiate_their_format_cover_every_area_and_pass_promtool() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(leaf_node::Config { bootstrap_tags: vec![], ..config(&dir) }).await;
    let addr = node.http_addr();
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(20)).await;
    create_tag(&c, "orders", 100).await;
    assert_eq!(get_ids(&c, "orders", Some(7)).await.len(), 7);
    c.snowflake_id("k").await.unwrap();
    let _ = c.segment_id("missing").await.unwrap_err();

    // No Accept (curl, promtool): the 0.0.4 text, counters named with `_total` in HELP/TYPE.
    let (status, headers, body) = get(addr, "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[CONTENT_TYPE], "text/plain; version=0.0.4; charset=utf-8");
    let text = String::from_utf8(body.to_vec()).unwrap();
    for needle in [
        "# TYPE leaf_ids_served_total counter",
        "# HELP leaf_ids_served_total ",
        "leaf_ids_served_total{mode=\"segment\",tag=\"orders\"} 7",
        "# TYPE leaf_http_request_duration_seconds histogram",
        "leaf_http_request_duration_seconds_count{route=\"/api/segment/get/{tag}\",status=\"200\"} 1",
        "leaf_http_request_duration_seconds_count{route=\"/api/segment/get/{tag}\",status=\"404\"} 1",
        "leaf_http_request_duration_seconds_count{route=\"/admin/tags\",status=\"201\"} 1",
        "leaf_raft_members{role=\"voter\"} 1",
        "leaf_tags_by_profile{profile=\"segment\"} 1",
        "leaf_snowflake_serving 1",
        "leaf_snowflake_worker_ids 1024",
        "leaf_storage_errors_total{store=\"raft\"} 0",
        "leaf_storage_errors_total{store=\"snowflake_state\"} 0",
        &format!("leaf_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION")),
        "process_resident_memory_bytes ",
        "process_cpu_seconds_total ",
        "process_open_fds ",
        "leaf_raft_quorum_contact_age_seconds ",
        "leaf_snowflake_high_water_ahead_seconds ",
        "leaf_snowflake_lease_remaining_seconds ",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "OpenMetrics-only lines in the 0.0.4 text");
    // One node: no followers, so no replication lag series; no peers, no clock offsets.
    assert!(!text.contains("leaf_raft_replication_lag_entries{"), "{text}");
    assert!(!text.contains("leaf_peer_clock_offset_seconds{"), "{text}");
    if let Some(verdict) = promtool_check(&text) {
        verdict.unwrap_or_else(|problems| panic!("promtool check metrics:\n{problems}"));
    }

    // Prometheus' own Accept header: OpenMetrics, ending in `# EOF`.
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                      text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let (status, headers, body) = get(addr, "/metrics", Some(prometheus)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[CONTENT_TYPE], "application/openmetrics-text; version=1.0.0; charset=utf-8");
    let om = String::from_utf8(body.to_vec()).unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(om.contains("# TYPE leaf_ids_served counter\n"), "{om}");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_data_needs_the_monitor_right_and_the_page_is_served_with_a_strict_csp() {
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), bootstrap_tags: vec![], ..config(&dir) };
    let (node, admin) = start(cfg).await;
    let (addr, base) = (node.http_addr(), format!("http://{}", node.http_addr()));
    create_tag(&admin, "orders", 100).await;
    create_tag(&admin, "idle", 100).await;
    assert_eq!(get_ids(&admin, "orders", Some(30)).await.len(), 30);
    let _ = admin.segment_id("missing").await.unwrap_err();

    // Without a token, and with scoped tokens lacking the monitor right: refused.
    let anonymous = client(&base, None);
    let e = anonymous.dashboard().await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(StatusCode::UNAUTHORIZED), Some(ErrorCode::Unauthorized)));
    let scoped = |rights: Vec<Right>, name: &str| CreateTokenRequest {
        name: name.into(),
        rights,
        tags: vec![TagPattern::parse("*").unwrap()],
        quota: None,
        ..Default::default()
    };
    let ids_only = admin.create_token(&scoped(vec![Right::Ids, Right::Tags], "ids-only")).await.unwrap();
    let e = client(&base, Some(ids_only.bearer)).dashboard().await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(StatusCode::FORBIDDEN), Some(ErrorCode::Forbidden)));
    let ops = admin.create_token(&scoped(vec![Right::Cluster], "ops")).await.unwrap();
    let e = client(&base, Some(ops.bearer)).dashboard().await.unwrap_err();
    assert_eq!((e.status(), e.code()), (Some(StatusCode::FORBIDDEN), Some(ErrorCode::Forbidden)));
    let watch = admin.create_token(&scoped(vec![Right::Monitor], "watch")).await.unwrap();

    let d = client(&base, Some(watch.bearer)).dashboard().await.unwrap();
    assert_eq!(d.node_id, 1);
    assert_eq!(d.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(d.cluster.leader_id, Some(1));
    assert_eq!(d.nodes.len(), 1);
    let me = &d.nodes[0];
    assert_eq!((me.node_id, me.rtt_ms, me.clock_offset_ms), (1, Some(0), Some(0)));
    assert!(me.health.as_ref().is_some_and(|h| h.segment_ready), "{me:?}");
    // Tags: the busiest first, every tag counted.
    assert_eq!(d.tags_total, 2);
    let names: Vec<&str> = d.tags.iter().map(|t| t.info.tag.as_str()).collect();
    assert_eq!(names, ["orders", "idle"]);
    assert_eq!(d.tags[0].served, 30);
    let cache = d.tags[0].cache.as_ref().expect("orders is loaded here");
    assert!(cache.initialised && cache.forecast.is_some(), "{cache:?}");
    assert!(d.tags[1].cache.is_none() && d.tags[1].served == 0, "{:?}", d.tags[1]);
    assert_eq!(d.totals.segment_ids, 30);
    // A scoped token sees no recent errors (their messages name any tenant's tags); the admin
    // does, newest first: the two 403s and the 401 above, the 404 before them.
    assert!(d.recent_errors.is_empty(), "{:?}", d.recent_errors);
    let d = admin.dashboard().await.unwrap();
    let seen: Vec<(u16, ErrorCode, &str)> =
        d.recent_errors.iter().map(|e| (e.status, e.code, e.route.as_str())).collect();
    assert_eq!(
        seen,
        [
            (403, ErrorCode::Forbidden, "/admin/dashboard"),
            (403, ErrorCode::Forbidden, "/admin/dashboard"),
            (401, ErrorCode::Unauthorized, "/admin/dashboard"),
            (404, ErrorCode::TagNotFound, "/api/segment/get/{tag}"),
        ]
    );
    assert!(d.recent_errors[3].message.contains("missing"), "{:?}", d.recent_errors[3]);
    assert!(d.totals.errors >= 3, "{:?}", d.totals);

    // The page and its assets: public, embedded, with the security headers.
    for (path, kind) in [("/ui", "text/html"), ("/ui/app.js", "text/javascript"), ("/ui/app.css", "text/css")] {
        let (status, headers, body) = get(addr, path, None).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(headers[CONTENT_TYPE].to_str().unwrap().starts_with(kind), "{path}: {:?}", headers[CONTENT_TYPE]);
        let csp = headers[CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
        assert_eq!(headers[X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
        assert!(!body.is_empty(), "{path}");
    }
    let (status, _, body) = get(addr, "/ui/secrets.txt", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let e: leaf_api::ErrorBody = serde_json::from_slice(&body).unwrap();
    assert_eq!(e.code, ErrorCode::NotFound);
    node.shutdown().await;
}

/// Past [`MAX_DASHBOARD_TAGS`] the dashboard lists the tags this node served, busiest first,
/// then idle ones by name up to the bound; it counts every tag it sees, lists no archived
/// one, and a search narrows both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_lists_the_busiest_tags_then_idle_ones_by_name_up_to_its_bound() {
    use leaf_api::dashboard::MAX_DASHBOARD_TAGS;
    use leaf_api::types::{CreateTagRequest, CreateTagsRequest};
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { bootstrap_tags: vec![], ..config(&dir) };
    let (node, c) = start(cfg).await;
    let n = MAX_DASHBOARD_TAGS + 100;
    let tags = (0..n).map(|i| CreateTagRequest { tag: format!("t-{i:04}"), step: 10, ..Default::default() }).collect();
    c.create_tags(&CreateTagsRequest { tags }).await.unwrap();
    create_tag(&c, "u-other", 10).await;
    // Served counts: t-0590 most, then t-0001, then t-0300 (archived afterwards).
    for (tag, count) in [("t-0590", 7), ("t-0001", 5), ("t-0300", 9), ("t-0002", 0)] {
        if count > 0 {
            assert_eq!(get_ids(&c, tag, Some(count)).await.len(), count as usize);
        }
    }
    c.archive_tag("t-0300").await.unwrap();
    let d = c.dashboard().await.unwrap();
    assert_eq!(d.tags_total, n, "every live tag counted, the archived one not");
    assert_eq!(d.tags.len(), MAX_DASHBOARD_TAGS);
    let listed: Vec<(&str, u64)> = d.tags.iter().map(|t| (t.info.tag.as_str(), t.served)).collect();
    assert_eq!(listed[..4], [("t-0590", 7), ("t-0001", 5), ("t-0000", 0), ("t-0002", 0)]);
    let idle: Vec<&str> = listed[2..].iter().map(|(t, _)| *t).collect();
    let mut sorted = idle.clone();
    sorted.sort_unstable();
    assert_eq!(idle, sorted, "idle tags by name");
    assert!(!idle.contains(&"t-0300") && !idle.contains(&"t-0001"), "archived or already listed");
    let d = c.dashboard_matching("t-05").await.unwrap();
    assert_eq!(d.tags_total, 100);
    let listed: Vec<&str> = d.tags.iter().map(|t| t.info.tag.as_str()).collect();
    assert_eq!((listed.len(), listed[0], listed[1]), (100, "t-0590", "t-0500"));
    let d = c.dashboard_matching("u-").await.unwrap();
    assert_eq!((d.tags_total, d.tags.len()), (1, 1));
    node.shutdown().await;
}

/// Every `leaf_*` and `process_*` name in `text` (rules, dashboards, docs).
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        if word(bytes[i]) && (i == 0 || !word(bytes[i - 1])) {
            let end = (i..bytes.len()).find(|&j| !word(bytes[j])).unwrap_or(bytes.len());
            let w = &text[i..end];
            if w.starts_with("leaf_") || w.starts_with("process_") {
                out.insert(w.to_string());
            }
            i = end;
        } else {
            i += 1;
        }
    }
    out
}

/// `promtool` with `args` in `dir`: `None` when it is not installed (and not required).
fn promtool(dir: &std::path::Path, args: &[&str]) -> Option<std::process::Output> {
    match std::process::Command::new("promtool").args(args).current_dir(dir).output() {
        Ok(out) => Some(out),
        Err(e) => {
            assert!(std::env::var_os("LEAF_REQUIRE_PROMETHEUS").is_none(), "promtool is required but: {e}");
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alert_rules_and_the_grafana_dashboard_query_only_exported_metrics() {
    let deploy = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy"));
    let dir = TempDir::new().unwrap();
    // Scheduled backups on, so their series exist: the first is taken once the node leads.
    let mut cfg = config(&dir);
    cfg.backup.dir = Some(dir.path().join("backups"));
    let (node, c) = start(cfg).await;
    wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(20)).await;
    // Every family, with a histogram's series names.
    let text = crate::support::eventually("a scheduled backup", Duration::from_secs(20), || async {
        let text = c.metrics().await.unwrap();
        if text.contains("# TYPE leaf_backup_last_success_timestamp_seconds gauge") {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await;
    let backups: Vec<_> = std::fs::read_dir(dir.path().join("backups")).unwrap().flatten().collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    let mut exported = std::collections::BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let (name, kind) = rest.split_once(' ').unwrap();
        exported.insert(name.to_string());
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                exported.insert(format!("{name}{suffix}"));
            }
        }
    }
    node.shutdown().await;
    for file in ["prometheus/alerts.yml", "prometheus/alerts_test.yml", "grafana/leaf-dashboard.json"] {
        let used = metric_names(&std::fs::read_to_string(deploy.join(file)).unwrap());
        assert!(used.len() >= 5, "{file}: {used:?}");
        let unknown: Vec<&String> = used.iter().filter(|m| !exported.contains(*m)).collect();
        assert!(unknown.is_empty(), "{file} queries metrics no node exports: {unknown:?}");
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(deploy.join("grafana/leaf-dashboard.json")).unwrap()).unwrap();
    assert!(dashboard["panels"].as_array().is_some_and(|p| p.len() > 20), "the dashboard has its panels");

    // The rules pass promtool's own checks and unit tests.
    let prometheus = deploy.join("prometheus");
    for args in [
        &["check", "rules", "alerts.yml"][..],
        &["test", "rules", "alerts_test.yml"],
        &["check", "config", "prometheus.yml"],
    ] {
        let Some(out) = promtool(&prometheus, args) else { return };
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "promtool {args:?}:\n{said}");
    }
}
