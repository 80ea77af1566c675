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

use crate::support::{create_tag, error_of, start};

/// A node whose callers without a token may use gapless series (these tests' clients have
/// none; `gapless_security` tests the default).
fn config(dir: &TempDir) -> leaf_node::config::Config {
    let mut c = crate::support::config(dir);
    c.auth.anonymous_gapless = true;
    c
}

/// Limits no test here reaches: they are `gapless_security`'s.
fn unlimited(o: GaplessOptions) -> GaplessOptions {
    GaplessOptions { max_numbers: Some(1_000_000), issues_per_sec: Some(1_000_000), ..o }
}

fn invoices(tag: &str) -> CreateTagRequest {
    CreateTagRequest {
        tag: tag.into(),
        step: 1,
        profile: Some(Profile::Gapless),
        gapless: Some(unlimited(GaplessOptions {
            reset: Some(Reset::Year),
            utc_offset: Some("+01:00".into()),
            format: Some("INV-{yyyy}-{seq:06}".into()),
            ..Default::default()
        })),
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
    create_tag(&c, "seg", 10).await;
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
    assert_eq!((entries.len(), head.len()), (25, 64));
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
    assert!(
        csv.starts_with("period,number,display,key,state,actor,at_ms,deadline_ms,settled_by,settled_ms,reason,hash\n"),
        "{csv}"
    );
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
    // A caller without a token chooses its settlement secret; a repeat with it is answered.
    let secret = "grpc-caller-secret-0123456789";
    let ask =
        |tag: &str, key: &str| IssueNumberRequest { tag: tag.into(), key: key.into(), secret: Some(secret.into()) };
    let a = ids.issue_number(ask("inv", "g-1")).await.unwrap().into_inner();
    assert_eq!((a.number, a.replayed, a.tag.as_str(), a.key.as_str()), (1, false, "inv", "g-1"));
    assert_eq!(a.display, Some(format!("INV-{}-000001", a.period)));
    assert_eq!(a.secret.as_deref(), Some(secret));
    let b = ids.issue_number(ask("inv", "g-1")).await.unwrap().into_inner();
    assert_eq!((b.number, b.period, b.replayed), (1, a.period, true));
    // Another caller (the HTTP client, with its own secret) is refused, and learns nothing.
    match c.gapless("inv").issue("g-1").await {
        Err(leaf_client::ClientError::Api { status, code: ErrorCode::NumberConflict, message }) if status == 409 => {
            assert!(!message.contains("INV-") && !message.contains(" 1 "), "{message}")
        }
        other => panic!("{other:?}"),
    }
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

/// Reserve, then confirm or void, over HTTP, the CLI and gRPC: a reservation keeps its number
/// whatever happens to it; a confirm after a void (or a void after a confirm) is 409
/// `number_conflict`; a reservation left open is voided by the leader at its deadline
/// (`expired`); the gauges and counters follow; the export of the ledger with its settlements
/// verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_are_confirmed_voided_or_expire_and_keep_their_place() {
    use leaf_api::gapless::{LedgerQuery, NumberState, VoidCause};

    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    c.create_tag(&invoices("inv")).await.unwrap();
    let g = c.gapless("inv");
    let a = g.reserve("doc-a", None).await.unwrap();
    assert_eq!((a.number, a.state, a.replayed), (1, NumberState::Reserved, false));
    assert_eq!(a.deadline_ms, Some(a.issued_ms + 900_000), "the default hold is 15 minutes");
    let again = g.reserve("doc-a", Some(5)).await.unwrap();
    assert_eq!((again.number, again.deadline_ms, again.replayed), (1, a.deadline_ms, true));
    assert_eq!(g.issue("doc-b").await.unwrap().number, 2);
    let short = g.reserve("doc-c", Some(1)).await.unwrap();
    assert_eq!(short.number, 3);
    let d = g.reserve("doc-d", Some(600)).await.unwrap();
    // Confirm a, twice; void d with a reason, twice.
    let confirmed = g.confirm("doc-a").await.unwrap();
    assert_eq!((confirmed.state, confirmed.replayed), (NumberState::Confirmed, false));
    assert!(g.confirm("doc-a").await.unwrap().replayed);
    let voided = g.void("doc-d", "customer cancelled").await.unwrap();
    assert_eq!(
        (voided.number, voided.state, voided.reason.as_deref()),
        (d.number, NumberState::Voided, Some("customer cancelled"))
    );
    assert!(g.void("doc-d", "another reason").await.unwrap().replayed);
    // What a settled number refuses; what a key without a number answers.
    let conflict = |path: &str, body: serde_json::Value| {
        let c = c.clone();
        let path = path.to_string();
        async move { error_of(&c, Method::POST, &path, Some(body)).await }
    };
    let refused = |r: Result<leaf_api::gapless::IssuedNumber, leaf_client::ClientError>| match r {
        Err(leaf_client::ClientError::Api { status, code, message }) => (status.as_u16(), code, message),
        other => panic!("{other:?}"),
    };
    let (s, code, m) = refused(g.confirm("doc-d").await);
    assert_eq!((s, code), (409, ErrorCode::NumberConflict), "{m}");
    let (s, code, m) = refused(g.void("doc-a", "x").await);
    assert_eq!((s, code), (409, ErrorCode::NumberConflict), "{m}");
    let (s, code, m) = refused(g.void("doc-b", "x").await);
    assert_eq!((s, code), (409, ErrorCode::NumberConflict), "an issued number is final: {m}");
    let (s, code, m) = refused(g.confirm("nobody").await);
    assert_eq!((s, code), (404, ErrorCode::NumberNotFound), "{m}");
    // Without its secret, a caller without a token settles nothing.
    let (s, e) = conflict("/api/gapless/inv/confirm", json!({"key": "doc-d"})).await;
    assert_eq!((s.as_u16(), e.code), (401, ErrorCode::Unauthorized), "{}", e.message);
    for (path, body) in [
        ("/api/gapless/inv/void", json!({"key": "doc-c"})),
        ("/api/gapless/inv/void", json!({"key": "doc-c", "reason": ""})),
        ("/api/gapless/inv/void", json!({"key": "doc-c", "reason": "a\nb"})),
        ("/api/gapless/inv/reserve", json!({"key": "x", "hold_seconds": 0})),
        ("/api/gapless/inv/reserve", json!({"key": "x", "hold_seconds": 2_592_001})),
    ] {
        let (s, e) = conflict(path, body.clone()).await;
        assert_eq!((s.as_u16(), e.code), (400, ErrorCode::InvalidRequest), "{body}: {}", e.message);
    }
    // The 1-second reservation is voided by the leader once its deadline passed.
    let q = LedgerQuery { state: Some(NumberState::Reserved), ..LedgerQuery::default() };
    let (since, within) = (std::time::Instant::now(), std::time::Duration::from_secs(30));
    crate::support::eventually("doc-c expires", within, || async {
        let page = g.ledger_page(&q).await.unwrap();
        if page.open_reservations == 0 {
            assert!(page.entries.is_empty());
            return Ok(());
        }
        assert_eq!(page.entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(), ["doc-c"]);
        Err(page.open_reservations)
    })
    .await;
    let expired = g.issue("doc-c").await.unwrap();
    assert_eq!((expired.number, expired.state, expired.reason.as_deref()), (3, NumberState::Voided, Some("expired")));
    let (s, code, m) = refused(g.confirm("doc-c").await);
    assert_eq!((s, code), (409, ErrorCode::NumberConflict), "{m}");
    let (entries, _) = g.ledger(None).await.unwrap();
    let settled = entries[2].settled.as_ref().unwrap();
    assert_eq!((settled.cause, &settled.actor), (Some(VoidCause::Expired), &leaf_api::audit::Actor::Node { id: 1 }));
    let states: Vec<NumberState> = entries.iter().map(|e| e.state).collect();
    use NumberState::*;
    assert_eq!(states, [Confirmed, Issued, Voided, Voided]);
    let lines = [
        "leaf_gapless_settlements_total{outcome=\"confirmed\"} 1",
        "leaf_gapless_settlements_total{outcome=\"voided\"} 1",
        "leaf_gapless_settlements_total{outcome=\"expired\"} 1",
        "leaf_gapless_open_reservations 0",
        "leaf_gapless_overdue_reservations 0",
    ];
    // The gauges follow the void within the reservation task's tick (within the same 30 s).
    let left = within.saturating_sub(since.elapsed());
    crate::support::eventually("the settlement gauges and counters", left, || async {
        let metrics = c.metrics().await.unwrap();
        let missing: Vec<&&str> = lines.iter().filter(|l| !metrics.lines().any(|m| m == **l)).collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("no {missing:?} in\n{metrics}"))
        }
    })
    .await;

    // The CLI: reserve and void, then an export with every settlement verifies.
    let url = format!("http://{}", node.http_addr());
    let leaf = move |args: Vec<&'static str>| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_leaf"))
                .args(args)
                .env("LEAF_URL", url)
                .output()
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        })
    };
    let (code, out, err) = leaf(vec!["number", "reserve", "inv", "doc-e", "--hold", "60"]).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"reserved\""), "{out}");
    // Without a token, the reservation's secret settles it (another run of the CLI has
    // another one of its own).
    let reserved: leaf_api::gapless::IssuedNumber = serde_json::from_str(&out).unwrap();
    let secret: &'static str = Box::leak(reserved.secret.expect("a secret for a caller without a token").into());
    let (code, _, err) = leaf(vec!["number", "void", "inv", "doc-e", "--reason", "printed twice"]).await.unwrap();
    assert_eq!(code, Some(2), "refused without the secret: {err}");
    let void = vec!["number", "void", "inv", "doc-e", "--reason", "printed twice", "--secret", secret];
    let (code, out, err) = leaf(void).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("printed twice"), "{out}");
    let (code, export, err) = leaf(vec!["ledger", "export", "inv"]).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    let path = dir.path().join("export.jsonl");
    std::fs::write(&path, &export).unwrap();
    let p: &'static str = Box::leak(path.to_string_lossy().to_string().into_boxed_str());
    let (code, out, err) = leaf(vec!["ledger", "verify", p]).await.unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("ok: 5 numbers"), "{out}");
    // A void's reason altered in the export is found.
    std::fs::write(&path, export.replace("printed twice", "printed once")).unwrap();
    let (code, _, err) = leaf(vec!["ledger", "verify", p]).await.unwrap();
    assert_eq!(code, Some(1), "{err}");

    // gRPC: reserve, then void with a reason.
    use leaf_api::grpc::v1::id_service_client::IdServiceClient;
    use leaf_api::grpc::v1::{ReserveNumberRequest, VoidNumberRequest};
    let ch = leaf_loadgen::grpc::channel(&format!("http://{}", node.http_addr()), None).await.unwrap();
    let mut ids = IdServiceClient::new(ch);
    let r = ids
        .reserve_number(ReserveNumberRequest { tag: "inv".into(), key: "g-1".into(), hold_seconds: 0, secret: None })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((r.number, r.state()), (6, leaf_api::grpc::v1::NumberState::Reserved));
    let secret = r.secret.clone();
    assert!(secret.is_some(), "a caller without a token is answered its secret");
    let v = ids
        .void_number(VoidNumberRequest { tag: "inv".into(), key: "g-1".into(), reason: "test".into(), secret })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((v.state(), v.reason.as_deref()), (leaf_api::grpc::v1::NumberState::Voided, Some("test")));
    let e = ids
        .void_number(VoidNumberRequest { tag: "inv".into(), key: "doc-b".into(), reason: "x".into(), secret: r.secret })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition);
    node.shutdown().await;
}

/// An archived series' expired reservations (apply refuses every ask of an archived tag) do
/// not hold back the voids of another series: 300 of them expire before the other's one, more
/// than the leader voids in one entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_series_does_not_hold_back_the_voids_of_others() {
    use leaf_api::gapless::{LedgerQuery, NumberState};

    let dir = TempDir::new().unwrap();
    let (node, c) = start(config(&dir)).await;
    c.create_tag(&invoices("old")).await.unwrap();
    c.create_tag(&invoices("inv")).await.unwrap();
    let tasks: Vec<_> = (0..4)
        .map(|t| {
            let c = c.clone();
            tokio::spawn(async move {
                for i in 0..75 {
                    c.gapless("old").reserve(&format!("old-{t}-{i}"), Some(1)).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    c.archive_tag("old").await.unwrap();
    let mine = c.gapless("inv").reserve("mine", Some(1)).await.unwrap();
    let q = LedgerQuery { state: Some(NumberState::Reserved), ..LedgerQuery::default() };
    let voided = || async { c.gapless("inv").ledger_page(&q).await.unwrap().open_reservations == 0 };
    crate::support::until("inv's reservation is voided", std::time::Duration::from_secs(30), voided).await;
    let got = c.gapless("inv").issue("mine").await.unwrap();
    assert_eq!((got.number, got.state, got.reason.as_deref()), (mine.number, NumberState::Voided, Some("expired")));
    // The archived series' reservations are left open, and not counted overdue.
    let metrics = crate::support::eventually("no reservation overdue", std::time::Duration::from_secs(30), || async {
        let metrics = c.metrics().await.unwrap();
        if metrics.lines().any(|l| l == "leaf_gapless_overdue_reservations 0") {
            Ok(metrics)
        } else {
            Err(metrics)
        }
    })
    .await;
    assert!(metrics.lines().any(|l| l == "leaf_gapless_open_reservations 300"), "{metrics}");
    node.shutdown().await;
}
