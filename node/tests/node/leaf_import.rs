//! `leaf import` against a real MariaDB (Debian's `mariadb-server`, started by the test on a
//! private data directory and port): Leaf's own `leaf_alloc` schema with live rows, Leaf's
//! allocation SQL run as a Leaf server runs it (dynamic steps included), then the import.
//! Every imported tag starts above everything Leaf handed out, and the cluster's IDs never fall
//! in a segment Leaf could have issued. Without MariaDB the test says why and skips, unless
//! `LEAF_REQUIRE_MARIADB=1` (set by `.ci/run`), which makes it fail.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use leaf_client::Client;
use mysql_async::prelude::Queryable;
use tempfile::TempDir;

use crate::support::{config, start, TOKEN};

const PASSWORD: &str = "pw-S3cret-leaf";

/// Leaf's DDL (its README), unchanged.
const LEAF_DDL: &str = "CREATE TABLE leaf_alloc (
  biz_tag varchar(128) NOT NULL DEFAULT '',
  max_id bigint(20) NOT NULL DEFAULT '1',
  step int(11) NOT NULL,
  description varchar(256) DEFAULT NULL,
  update_time timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB";

/// A MariaDB server of the test's own; killed on drop.
struct MariaDb {
    dir: TempDir,
    child: Child,
    port: u16,
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let dirs = path.split(':').map(PathBuf::from).chain(["/usr/sbin".into(), "/usr/bin".into()]);
    let dirs: Vec<PathBuf> = dirs.collect();
    names.iter().find_map(|n| dirs.iter().map(|d| d.join(n)).find(|p| p.is_file()))
}

impl MariaDb {
    /// Starts one, or says why not (`None`: skip).
    fn start() -> Option<MariaDb> {
        let (Some(server), Some(install), Some(cli)) = (
            find(&["mariadbd", "mysqld"]),
            find(&["mariadb-install-db", "mysql_install_db"]),
            find(&["mariadb", "mysql"]),
        ) else {
            let why = "no MariaDB here (apt-get install mariadb-server)";
            assert!(std::env::var("LEAF_REQUIRE_MARIADB").as_deref() != Ok("1"), "LEAF_REQUIRE_MARIADB=1 but {why}");
            eprintln!("skipping the MariaDB import test: {why}");
            return None;
        };
        let dir = TempDir::new().unwrap();
        let data = dir.path().join("data");
        let out = Command::new(install)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(["--user=root", "--auth-root-authentication-method=normal", "--skip-test-db"])
            .output()
            .unwrap();
        assert!(out.status.success(), "mariadb-install-db: {}", String::from_utf8_lossy(&out.stderr));
        let port = leaf_cluster_tests::cluster::free_port();
        let socket = dir.path().join("sock");
        let log = std::fs::File::create(dir.path().join("mariadb.log")).unwrap();
        let child = Command::new(server)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--port={port}"))
            .args(["--bind-address=127.0.0.1", "--user=root", "--skip-log-bin", "--innodb-buffer-pool-size=32M"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let db = MariaDb { dir, child, port };
        let deadline = Instant::now() + Duration::from_secs(60);
        while db.root_sql(&cli, "SELECT 1").is_err() {
            assert!(Instant::now() < deadline, "MariaDB did not start: {}", db.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        let setup = format!(
            "CREATE DATABASE leafdb; CREATE USER 'leaf'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; \
             GRANT ALL ON leafdb.* TO 'leaf'@'127.0.0.1'; USE leafdb; {LEAF_DDL};"
        );
        db.root_sql(&cli, &setup).unwrap_or_else(|e| panic!("setup: {e}"));
        Some(db)
    }

    fn root_sql(&self, cli: &Path, sql: &str) -> Result<(), String> {
        let out = Command::new(cli)
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.dir.path().join("sock").display()))
            .args(["-uroot", "-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mariadb.log")).unwrap_or_default()
    }

    fn url(&self, password: &str) -> String {
        format!("mysql://leaf:{password}@127.0.0.1:{}/leafdb", self.port)
    }
}

/// A Leaf server's allocation, with Leaf's own SQL in one transaction: the segment it would
/// hand out, `[max_id - increment, max_id)`.
async fn leaf_allocate(conn: &mut mysql_async::Conn, tag: &str, increment: i64) -> (i64, i64) {
    let mut tx = conn.start_transaction(mysql_async::TxOpts::default()).await.unwrap();
    tx.exec_drop("UPDATE leaf_alloc SET max_id = max_id + ? WHERE biz_tag = ?", (increment, tag)).await.unwrap();
    let max_id: i64 = tx.exec_first("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?", (tag,)).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    (max_id - increment, max_id)
}

/// Runs `leaf import` with `args` against the node at `url`: (exit code, stdout, stderr). A
/// `--url` goes in `LEAF_IMPORT_MYSQL_URL` instead, as an operator gives a URL with a
/// password (the command line refuses one).
fn leaf_import(url: &str, args: &[&str]) -> (i32, String, String) {
    let mut args = args.to_vec();
    let mut env = Vec::new();
    if let Some(i) = args.iter().position(|a| *a == "--url") {
        env.push(("LEAF_IMPORT_MYSQL_URL", args[i + 1]));
        args.drain(i..=i + 1);
    }
    leaf_import_with(url, &args, &env)
}

/// [`leaf_import`] with `args` as given and `env` set.
fn leaf_import_with(url: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_leaf"))
        .arg("import")
        .args(args)
        .args(["--node", url, "--token", TOKEN])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

fn statuses(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {json}"));
    v.as_array()
        .unwrap()
        .iter()
        .map(|o| (o["tag"].as_str().unwrap().to_string(), o["status"].as_str().unwrap().to_string()))
        .collect()
}

/// Draws `n` IDs of `tag` in batches and checks none falls in a Leaf segment.
async fn check_clear_of_leaf(c: &Client, tag: &str, leaf: &[(i64, i64)], n: u32) {
    for _ in 0..3 {
        for id in c.segment_ids(tag, n).await.unwrap() {
            assert!(!leaf.iter().any(|(s, e)| (*s..*e).contains(&id)), "{tag}: ID {id} is one Leaf issued");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_imported_from_a_live_leaf_mysql_never_collide_with_leafs_ids() {
    let Some(db) = MariaDb::start() else { return };
    let pool_url = db.url(PASSWORD);
    let mut conn = mysql_async::Conn::new(mysql_async::Opts::from_url(&pool_url).unwrap()).await.unwrap();
    conn.query_drop(
        "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES \
         ('orders', 1, 2000, 'order IDs'), ('users', 1, 100, 'users, \"quoted\"'), \
         ('big', 5000000000, 1000, NULL), ('payments', 1, 1500000, 'a step above Leaf''s cap'), \
         ('bad tag', 1, 10, 'a name this cluster refuses')",
    )
    .await
    .unwrap();
    // Leaf servers at work: each tag allocated a few times, the dynamic step growing (Leaf
    // doubles it up to 1,000,000, or keeps a larger stored step).
    let mut issued: std::collections::BTreeMap<&str, Vec<(i64, i64)>> = Default::default();
    for (tag, step) in [("orders", 2000i64), ("users", 100), ("big", 1000), ("payments", 1_500_000)] {
        for k in 0..4 {
            let inc = if step >= 1_000_000 { step } else { (step << k).min(1_000_000) };
            issued.entry(tag).or_default().push(leaf_allocate(&mut conn, tag, inc).await);
        }
    }
    let leaf_max: Vec<(String, i64)> = conn.query("SELECT biz_tag, max_id FROM leaf_alloc").await.unwrap();

    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, admin) = start(cfg).await;
    let url = format!("http://{}", node.http_addr());

    // A dry run creates nothing; without --skip-invalid the bad row blocks everything.
    let (code, out, err) =
        leaf_import(&url, &["leaf-mysql", "--url", &pool_url, "--settle-ms", "200", "--dry-run", "--json"]);
    assert_eq!(code, 2, "{out} {err}");
    assert!(!out.is_empty(), "{err}");
    assert!(statuses(&out).iter().any(|(t, s)| t == "bad tag" && s == "invalid"), "{out}");
    assert!(statuses(&out).iter().filter(|(t, _)| t != "bad tag").all(|(_, s)| s == "not_attempted"), "{out}");
    assert!(admin.tag("orders").await.is_err());

    let (code, out, err) =
        leaf_import(&url, &["leaf-mysql", "--url", &pool_url, "--settle-ms", "200", "--skip-invalid", "--json"]);
    assert_eq!(code, 2, "the invalid row makes the exit code 2: {out} {err}");
    let got = statuses(&out);
    for tag in ["orders", "users", "big", "payments"] {
        assert!(got.contains(&(tag.to_string(), "created".to_string())), "{tag}: {out}");
    }
    assert!(!err.contains(PASSWORD) && !out.contains(PASSWORD));

    for (tag, max_id) in &leaf_max {
        let Some(segments) = issued.get(tag.as_str()) else { continue };
        let info = admin.tag(tag).await.unwrap();
        let highest_leaf_id = segments.iter().map(|s| s.1 - 1).max().unwrap();
        assert!(info.max_id >= *max_id && info.max_id > highest_leaf_id, "{tag}: starts at {}", info.max_id);
        check_clear_of_leaf(&admin, tag, segments, 1000).await;
    }
    assert_eq!(admin.tag("users").await.unwrap().description, "users, \"quoted\"");

    // A re-run skips what is there.
    let (code, out, err) = leaf_import(
        &url,
        &["leaf-mysql", "--url", &pool_url, "--settle-ms", "200", "--tags", "orders,users", "--json"],
    );
    assert_eq!(code, 0, "{out} {err}");
    assert!(statuses(&out).iter().all(|(_, s)| s == "already_imported"), "{out}");

    // IDs in use that Leaf's max_id does not account for (rows copied from another system):
    // --check-column TAG=db.table.column raises the tag's first ID to MAX(column) + 1, and what
    // cannot be honoured is refused before anything is created.
    for sql in [
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('invoices', 1000, 100), ('refunds', 1000, 100)",
        "CREATE TABLE invoice (id bigint NOT NULL PRIMARY KEY, code varchar(20), amount decimal(12,0))",
        "INSERT INTO invoice VALUES (7, '99', 3), (5000000000, '100', 4)",
        "CREATE TABLE refund (id bigint unsigned NOT NULL PRIMARY KEY)",
        "CREATE TABLE credit (id int NOT NULL PRIMARY KEY)",
        "INSERT INTO credit VALUES (-5), (-9)",
        "CREATE TABLE huge (id bigint unsigned NOT NULL PRIMARY KEY)",
        "INSERT INTO huge VALUES (18446744073709551615)",
    ] {
        conn.query_drop(sql).await.unwrap();
    }
    let checked = |checks: &[&str], more: &[&str]| {
        let mut args = vec!["leaf-mysql", "--url", &pool_url, "--settle-ms", "0", "--tags", "invoices,refunds"];
        for c in checks {
            args.extend(["--check-column", c]);
        }
        args.extend(more);
        leaf_import(&url, &args)
    };
    for (checks, why) in [
        // Not in the table; in it but left out by --tags.
        (&["invoices=leafdb.invoice.id", "nosuch=leafdb.invoice.id"][..], "not being imported: nosuch"),
        (&["orders=leafdb.invoice.id"], "not being imported: orders"),
        // MAX of a string column is alphabetical ('99' above '100'), of a decimal no ID.
        (&["invoices=leafdb.invoice.code"], "not an integer column"),
        (&["invoices=invoice.amount"], "not an integer column"),
        (&["invoices=leafdb.credit.id"], "negative"),
        (&["invoices=leafdb.huge.id"], "above the largest 64-bit ID"),
        (&["invoices=leafdb.missing.id"], "missing"),
        // Not an identifier: refused by the argument parser, never sent.
        (&["invoices=leafdb.invoice.id;DROP TABLE invoice"], "TAG=db.table.column"),
    ] {
        let (code, out, err) = checked(checks, &[]);
        assert_eq!(code, 2, "{checks:?}: {out} {err}");
        assert!(err.contains(why), "{checks:?}: {err}");
        assert!(!err.contains(PASSWORD) && !out.contains(PASSWORD), "{err}");
    }
    assert!(admin.tag("invoices").await.is_err() && admin.tag("refunds").await.is_err(), "a refused import created");
    let checks = ["invoices=leafdb.invoice.id", "refunds=refund.id"];
    let (code, out, err) = checked(&checks, &["--dry-run"]);
    assert_eq!(code, 0, "{out} {err}");
    let line = out.lines().find(|l| l.starts_with("invoices ")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("5000000001") && line.contains("raised to MAX(leafdb.invoice.id)+1 = 5000000001"), "{out}");
    let (code, out, err) = checked(&checks, &["--json"]);
    assert_eq!(code, 0, "{out} {err}");
    let rows: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    let row = |tag: &str| rows.as_array().unwrap().iter().find(|r| r["tag"] == tag).unwrap().clone();
    assert_eq!(row("invoices")["status"], "created", "{out}");
    assert_eq!(row("invoices")["first_id"], 5_000_000_001i64, "{out}");
    assert_eq!(row("invoices")["note"], "raised to MAX(leafdb.invoice.id)+1 = 5000000001", "{out}");
    // An empty table constrains nothing: the margin rule's 1,000 + 1,000,000.
    assert_eq!(
        (row("refunds")["first_id"].clone(), row("refunds")["status"].clone()),
        (1_001_000.into(), "created".into())
    );
    assert_eq!(admin.tag("invoices").await.unwrap().max_id, 5_000_000_001);
    assert_eq!(admin.tag("refunds").await.unwrap().max_id, 1_001_000);
    let ids = admin.segment_ids("invoices", 100).await.unwrap();
    assert!(ids.iter().all(|id| *id > 5_000_000_000), "an ID in use in invoice: {ids:?}");

    // A Leaf that keeps allocating is caught between the two reads, and nothing is created.
    conn.query_drop("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('fresh', 1, 10)").await.unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let live = {
        let (stop, url) = (stop.clone(), pool_url.clone());
        tokio::spawn(async move {
            let mut c = mysql_async::Conn::new(mysql_async::Opts::from_url(&url).unwrap()).await.unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                leaf_allocate(&mut c, "orders", 2000).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        leaf_import(&url, &["leaf-mysql", "--url", &pool_url, "--settle-ms", "500"])
    })
    .await
    .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    live.await.unwrap();
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("still allocating") && err.contains("orders"), "{err}");
    assert!(admin.tag("fresh").await.is_err(), "a refused import created a tag");

    // A wrong password: refused, and the password is in no message, whether it came in the
    // URL or apart from it.
    let wrong = db.url("not-the-Password-42");
    let url = format!("http://{}", node.http_addr());
    let (code, out, err) = leaf_import(&url, &["leaf-mysql", "--url", &wrong, "--settle-ms", "0"]);
    assert_ne!(code, 0);
    assert!(!err.contains("not-the-Password-42") && !out.contains("not-the-Password-42"), "{err}");
    assert!(err.contains("***"), "{err}");
    let bare = format!("mysql://leaf@127.0.0.1:{}/leafdb", db.port);
    let env = [("LEAF_IMPORT_MYSQL_PASSWORD", "not-the-Password-42")];
    let (code, out, err) = leaf_import_with(&url, &["leaf-mysql", "--url", &bare, "--settle-ms", "0"], &env);
    assert_ne!(code, 0);
    assert!(!err.contains("not-the-Password-42") && !out.contains("not-the-Password-42"), "{err}");
    // The right one apart from the URL reads the table (a dry run: everything is imported).
    let env = [("LEAF_IMPORT_MYSQL_PASSWORD", PASSWORD)];
    let args = ["leaf-mysql", "--url", &bare, "--settle-ms", "0", "--dry-run", "--json"];
    let (code, out, err) = leaf_import_with(&url, &args, &env);
    assert!(statuses(&out).iter().any(|(t, _)| t == "orders"), "{code} {out} {err}");
    // A password on the command line, where `ps` shows it to every user: refused before use.
    let right = db.url(PASSWORD);
    let (code, out, err) = leaf_import_with(&url, &["leaf-mysql", "--url", &right, "--settle-ms", "0"], &[]);
    assert_eq!(code, 2, "{out} {err}");
    assert!(err.contains("LEAF_IMPORT_MYSQL_PASSWORD") && !err.contains(PASSWORD), "{err}");
    drop(conn);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csv_export_imports_with_the_margin_and_refuses_what_the_cluster_cannot_hold() {
    let dir = TempDir::new().unwrap();
    let cfg = leaf_node::Config { admin_token: Some(TOKEN.into()), ..config(&dir) };
    let (node, admin) = start(cfg).await;
    let url = format!("http://{}", node.http_addr());
    let csv = dir.path().join("leaf_alloc.csv");
    std::fs::write(
        &csv,
        "biz_tag,max_id,step,description,update_time\n\
         invoices,70001,500,\"invoices, \"\"EU\"\"\",2024-01-01 00:00:00\n\
         refunds,1,100,\\N,2024-01-01 00:00:00\n",
    )
    .unwrap();
    let (code, out, err) = leaf_import(&url, &["leaf-csv", "--file", csv.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{out} {err}");
    let inv = admin.tag("invoices").await.unwrap();
    // One allocation of Leaf's largest kind (max(500, 1,000,000)) above max_id.
    assert_eq!((inv.max_id, inv.step, inv.description.as_str()), (1_070_001, 500, "invoices, \"EU\""));
    assert_eq!(admin.tag("refunds").await.unwrap().max_id, 1_000_001);
    let ids = admin.segment_ids("invoices", 10).await.unwrap();
    assert!(ids.iter().all(|id| *id >= 1_070_001), "{ids:?}");
    // Fenced for certain: margin 0 starts right at max_id.
    std::fs::write(&csv, "biz_tag,max_id,step\nexact,42,10\nbad/name,1,1\n").unwrap();
    let (code, _, _) = leaf_import(&url, &["leaf-csv", "--file", csv.to_str().unwrap(), "--margin-allocations", "0"]);
    assert_eq!(code, 2, "an invalid row blocks the import");
    assert!(admin.tag("exact").await.is_err());
    let args = ["leaf-csv", "--file", csv.to_str().unwrap(), "--margin-allocations", "0", "--skip-invalid"];
    let (code, out, _) = leaf_import(&url, &args);
    assert_eq!(code, 2, "{out}");
    assert_eq!(admin.tag("exact").await.unwrap().max_id, 42);
    // A broken file is refused before anything.
    std::fs::write(&csv, "biz_tag,max_id,step\n\"unclosed,1,1\n").unwrap();
    let (code, _, err) = leaf_import(&url, &["leaf-csv", "--file", csv.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("never closed"), "{err}");
    node.shutdown().await;
}

/// Beside old Leaf snowflake servers: a node keeps to `snowflake.worker_ids`; restarted with a
/// range its old ID is outside of, it serves under a new ID inside it (never the old one, not
/// even on the unexpired lease in its state file), above every ID it issued before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snowflake_worker_ids_keep_to_the_configured_range_across_a_change() {
    use leaf_api::types::SnowflakeState;
    let dir = TempDir::new().unwrap();
    let mut cfg = config(&dir);
    cfg.snowflake.worker_ids = "512-1023".parse().unwrap();
    let (node, c) = start(cfg.clone()).await;
    let h = crate::support::wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(20)).await;
    assert_eq!(h.snowflake.worker_id, Some(512), "{h:?}");
    let before = c.snowflake_ids("k", 100).await.unwrap();
    for id in &before {
        assert_eq!(c.decode(*id).await.unwrap().worker_id, 512);
    }
    node.shutdown().await;

    cfg.snowflake.worker_ids = "700-700".parse().unwrap();
    let (node, c) = start(cfg).await;
    let h = crate::support::wait_snowflake(&c, SnowflakeState::Serving, Duration::from_secs(20)).await;
    assert_eq!(h.snowflake.worker_id, Some(700), "{h:?}");
    let after = c.snowflake_ids("k", 100).await.unwrap();
    let max_before = before.iter().max().unwrap();
    for id in &after {
        let d = c.decode(*id).await.unwrap();
        assert_eq!(d.worker_id, 700, "an ID outside the range: {d:?}");
        assert!(id > max_before);
    }
    node.shutdown().await;
}
