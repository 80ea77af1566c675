//! Gapless series on one node: numbers from 1 with no gap, one per idempotency key (a repeat
//! gets its number back), the display format, a graceful restart, and the refusals.
use std::collections::{BTreeMap, BTreeSet};

use leaf_api::gapless::{GaplessOptions, Reset, SeriesPolicy};
use leaf_api::profile::Profile;
use leaf_api::types::CreateTagRequest;
use leaf_api::ErrorCode;
use leaf_client::Method;
use serde_json::json;
use tempfile::TempDir;

use crate::support::{config, create_tag, error_of, start};

fn invoices(tag: &str) -> CreateTagRequest {
    CreateTagRequest {
        tag: tag.into(),
        step: 1,
        profile: Some(Profile::Gapless),
        gapless: Some(GaplessOptions {
            reset: Some(Reset::Year),
            utc_offset: Some("+01:00".into()),
            format: Some("INV-{yyyy}-{seq:06}".into()),
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_issues_number_each_key_once_from_one_without_a_gap() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let info = c.create_tag(&invoices("inv")).await.unwrap();
    assert_eq!(info.profile, Profile::Gapless);
    assert_eq!(info.gapless.as_ref().and_then(|g| g.format.as_deref()), Some("INV-{yyyy}-{seq:06}"));
    assert_eq!(info.period, None, "no number yet");
    let policy = SeriesPolicy::from_options(info.gapless.as_ref().unwrap()).unwrap();
    // 8 callers, 40 keys each; every 4th key is sent twice (a retry).
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let c = c.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..40 {
                    let key = format!("order-{t}-{i}");
                    let n = c.gapless("inv").issue(&key).await.unwrap();
                    assert!(!n.replayed, "{n:?}");
                    if i % 4 == 0 {
                        let again = c.gapless("inv").issue(&key).await.unwrap();
                        assert!(again.replayed, "{again:?}");
                        assert_eq!((again.period, again.number, &again.display), (n.period, n.number, &n.display));
                    }
                    got.push(n);
                }
                got
            })
        })
        .collect();
    let mut by_number = BTreeMap::new();
    for t in tasks {
        for n in t.await.unwrap() {
            assert_eq!(Some(n.period), policy.period_at(n.issued_ms), "{n:?}");
            assert_eq!(n.display.as_deref(), Some(format!("INV-{}-{:06}", n.period, n.number).as_str()));
            assert!(by_number.insert(n.number, n.key.clone()).is_none(), "number {} twice", n.number);
        }
    }
    assert_eq!(by_number.keys().copied().collect::<Vec<_>>(), (1..=320).collect::<Vec<u64>>());
    let keys: BTreeSet<&String> = by_number.values().collect();
    assert_eq!(keys.len(), 320, "each key one number");
    let info = c.tag("inv").await.unwrap();
    assert_eq!(info.max_id, 321);
    let period = info.period.unwrap();
    // 320 new numbers and 80 repeats, each timed.
    let metrics = c.metrics().await.unwrap();
    for line in [
        "leaf_gapless_issues_total{outcome=\"issued\"} 320",
        "leaf_gapless_issues_total{outcome=\"replayed\"} 80",
        "leaf_gapless_issues_total{outcome=\"refused\"} 0",
        "leaf_gapless_issue_seconds_count 400",
    ] {
        assert!(metrics.lines().any(|l| l == line), "no {line:?} in\n{metrics}");
    }

    // After a graceful restart: the keys get their numbers back, and the series goes on.
    node.shutdown().await;
    let (node, c) = start(config(&dir)).await;
    let again = c.gapless("inv").issue("order-3-7").await.unwrap();
    assert!(again.replayed);
    assert_eq!(Some(&again.key), by_number.get(&again.number));
    let next = c.gapless("inv").issue("after-restart").await.unwrap();
    assert_eq!((next.period, next.number, next.replayed), (period, 321, false));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gapless_refusals_are_clear_and_change_nothing() {
    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    c.create_tag(&invoices("inv")).await.unwrap();
    create_tag(&c, "seg", 10, None).await;
    let issue = |tag: &str| format!("/api/gapless/{tag}/issue");
    // A gapless tag hands out no ID, and a segment tag no number.
    let (s, e) = error_of(&c, Method::GET, "/api/segment/get/inv", None).await;
    assert_eq!((s.as_u16(), e.code), (409, ErrorCode::WrongProfile));
    assert!(e.message.contains("gapless"), "{}", e.message);
    let (s, e) = error_of(&c, Method::POST, &issue("seg"), Some(json!({"key": "a"}))).await;
    assert_eq!((s.as_u16(), e.code), (409, ErrorCode::WrongProfile), "{}", e.message);
    let (s, e) = error_of(&c, Method::POST, &issue("nope"), Some(json!({"key": "a"}))).await;
    assert_eq!((s.as_u16(), e.code), (404, ErrorCode::TagNotFound));
    // Keys: 1 to 128 bytes of printable ASCII; the body has nothing else.
    for body in [
        json!({"key": ""}),
        json!({"key": "k".repeat(129)}),
        json!({"key": "a\tb"}),
        json!({}),
        json!({"key": "a", "x": 1}),
    ] {
        let (s, e) = error_of(&c, Method::POST, &issue("inv"), Some(body.clone())).await;
        assert_eq!((s.as_u16(), e.code), (400, ErrorCode::InvalidRequest), "{body}: {}", e.message);
    }
    // Creation: bad formats, bounds, options for another profile.
    let mut bad = vec![];
    for format in ["INV-{mm}-{seq}", "{seq}{seq}", "no seq", "{seq:0}"] {
        let mut r = invoices("bad");
        r.gapless.as_mut().unwrap().format = Some(format.into());
        bad.push(r);
    }
    bad.push(CreateTagRequest { upper_bound: Some(100), ..invoices("bad") });
    bad.push(CreateTagRequest { max_id: Some(5), ..invoices("bad") });
    bad.push(CreateTagRequest { profile: Some(Profile::Segment), ..invoices("bad") });
    for r in bad {
        let body = serde_json::to_value(&r).unwrap();
        let (s, e) = error_of(&c, Method::POST, "/admin/tags", Some(body)).await;
        assert_eq!((s.as_u16(), e.code), (400, ErrorCode::InvalidRequest), "{r:?}: {}", e.message);
    }
    assert!(c.tag("bad").await.is_err());
    // A template makes tags on their first ID request, which a gapless tag never serves.
    let body = json!({"pattern": "inv-*", "step": 1, "profile": "gapless"});
    let (s, e) = error_of(&c, Method::PUT, "/admin/templates/t", Some(body)).await;
    assert_eq!((s.as_u16(), e.code), (400, ErrorCode::InvalidRequest), "{}", e.message);
    assert!(e.message.contains("gapless"), "{}", e.message);
    // Nothing above consumed a number.
    let first = c.gapless("inv").issue("first").await.unwrap();
    assert_eq!(first.number, 1);
    node.shutdown().await;
}

/// The ledger over HTTP, in pages, and through the CLI: `leaf tag create --profile gapless`,
/// `leaf get number`, `leaf ledger export` then `verify`, which refuses the export once a line
/// is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_pages_every_number_and_its_export_verifies() {
    use leaf_api::gapless::{LedgerQuery, NumberState};
    use std::process::Command;

    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    let url = format!("http://{}", node.http_addr());
    let leaf = move |args: &[&str], stdin: Option<String>| {
        use std::io::Write;
        let mut child = Command::new(env!("CARGO_BIN_EXE_leaf"))
            .args(args)
            .env("LEAF_URL", &url)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(stdin.unwrap_or_default().as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let run = |args: &'static [&'static str], stdin: Option<String>| {
        let leaf = leaf.clone();
        tokio::task::spawn_blocking(move || leaf(args, stdin))
    };
    let (code, _, err) = run(
        &[
            "tag",
            "create",
            "cn",
            "--step",
            "1",
            "--profile",
            "gapless",
            "--reset",
            "month",
            "--format",
            "CN{yy}{mm}-{seq}",
        ],
        None,
    )
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{err}");
    let (code, out, err) = run(&["get", "number", "cn", "refund-1"], None).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    let first: leaf_api::gapless::IssuedNumber = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (first.number, first.display.unwrap()),
        (1, format!("CN{:02}{:02}-1", first.period / 100 % 100, first.period % 100))
    );
    for i in 2..=25 {
        c.gapless("cn").issue(&format!("refund-{i}")).await.unwrap();
    }
    // Pages of 10: 10, 10, 5, each after the last.
    let mut q = LedgerQuery { limit: Some(10), ..LedgerQuery::default() };
    let mut seen = Vec::new();
    loop {
        let page = c.gapless("cn").ledger_page(&q).await.unwrap();
        assert_eq!(page.numbers, 25);
        seen.extend(page.entries.iter().map(|e| (e.number, e.key.clone(), e.state)));
        let Some(next) = page.next else { break };
        (q.after_period, q.after_number) = (Some(next.after_period), Some(next.after_number));
    }
    let want: Vec<_> = (1..=25u64).map(|i| (i, format!("refund-{i}"), NumberState::Issued)).collect();
    assert_eq!(seen, want);
    let (entries, head) = c.gapless("cn").ledger(Some(first.period)).await.unwrap();
    assert_eq!((entries.len(), entries.last().map(|e| e.hash.clone())), (25, Some(head)));
    assert!(c.gapless("cn").ledger(Some(first.period + 1)).await.unwrap().0.is_empty());

    // Export, verify; a line removed is refused.
    let (code, export, err) = run(&["ledger", "export", "cn"], None).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(export.lines().count(), 26, "a header and 25 numbers");
    let (code, out, err) = run(&["ledger", "verify", "-"], Some(export.clone())).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("ok: 25 numbers"), "{out}");
    let tampered: String = export.lines().enumerate().filter(|(i, _)| *i != 7).map(|(_, l)| format!("{l}\n")).collect();
    let (code, _, err) = run(&["ledger", "verify", "-"], Some(tampered)).await.unwrap();
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("missing"), "{err}");
    let (code, csv, _) = run(&["ledger", "export", "cn", "--csv"], None).await.unwrap();
    assert_eq!(code, Some(0));
    assert!(csv.starts_with("period,number,display,key,state,actor,at_ms,hash\n"), "{csv}");
    assert_eq!(csv.lines().count(), 26);
    // A page of another profile's tag, or a bad query, is refused.
    let (s, e) = error_of(&c, Method::GET, "/admin/tags/leaf-segment-test/ledger", None).await;
    assert_eq!((s.as_u16(), e.code), (409, ErrorCode::WrongProfile));
    // A value that is no period matches nothing; a cursor of only a period starts after it.
    assert!(c.gapless("cn").ledger(Some(13)).await.unwrap().0.is_empty());
    let q = LedgerQuery { after_period: Some(first.period), ..LedgerQuery::default() };
    assert!(c.gapless("cn").ledger_page(&q).await.unwrap().entries.is_empty());
    let q = LedgerQuery { after_period: Some(first.period - 1), ..LedgerQuery::default() };
    assert_eq!(c.gapless("cn").ledger_page(&q).await.unwrap().entries.len(), 25);
    for q in ["limit=0", "limit=10001", "x=1", "period=-1"] {
        let (s, e) = error_of(&c, Method::GET, &format!("/admin/tags/cn/ledger?{q}"), None).await;
        assert_eq!((s.as_u16(), e.code), (400, ErrorCode::InvalidRequest), "{q}: {}", e.message);
    }
    node.shutdown().await;
}

/// gRPC's `IssueNumber` is the HTTP issue: the same series, the same key's number, the same
/// refusals (with `leaf-code`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_issues_numbers_of_the_same_series() {
    use leaf_api::grpc::v1::id_service_client::IdServiceClient;
    use leaf_api::grpc::v1::IssueNumberRequest;

    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    c.create_tag(&invoices("inv")).await.unwrap();
    let url = format!("http://{}", node.http_addr());
    let ch = leaf_loadgen::grpc::channel(&url, None).await.unwrap();
    let mut ids = IdServiceClient::new(ch);
    let ask = |tag: &str, key: &str| IssueNumberRequest { tag: tag.into(), key: key.into() };
    let a = ids.issue_number(ask("inv", "g-1")).await.unwrap().into_inner();
    assert_eq!((a.number, a.replayed, a.tag.as_str(), a.key.as_str()), (1, false, "inv", "g-1"));
    assert_eq!(a.display, Some(format!("INV-{}-000001", a.period)));
    let b = c.gapless("inv").issue("g-1").await.unwrap();
    assert_eq!((b.number, b.period, b.replayed), (1, a.period, true));
    let next = ids.issue_number(ask("inv", "g-2")).await.unwrap().into_inner();
    assert_eq!((next.number, next.replayed), (2, false));
    let code = |s: &tonic::Status| s.metadata().get("leaf-code").and_then(|v| v.to_str().ok()).map(str::to_string);
    for (req, grpc, leaf) in [
        (ask("inv", ""), tonic::Code::InvalidArgument, "invalid_request"),
        (ask("leaf-segment-test", "k"), tonic::Code::FailedPrecondition, "wrong_profile"),
        (ask("nope", "k"), tonic::Code::NotFound, "tag_not_found"),
        (ask("bad tag", "k"), tonic::Code::InvalidArgument, "invalid_tag"),
    ] {
        let e = ids.issue_number(req.clone()).await.unwrap_err();
        assert_eq!((e.code(), code(&e).as_deref()), (grpc, Some(leaf)), "{req:?}: {e:?}");
    }
    node.shutdown().await;
}
