//! The alert rules of `deploy/prometheus/alerts.yml` in Debian's real Prometheus, scraping a
//! local 3-node TLS cluster every second (over HTTPS with the cluster's CA): with every node up nothing fires; killing a follower
//! fires `LeafNodeDown` for it; killing the leader too leaves one node without a quorum, and
//! `LeafQuorumLost` and `LeafNoLeader` fire; restarting both resolves every one of them.
//!
//! The rules are the committed file with each `for:` cut to 1 s (the only change), so the
//! expressions themselves are what is tested. Skipped when `prometheus` is not installed,
//! unless `LEAF_REQUIRE_PROMETHEUS=1` (CI installs it).
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

/// The Prometheus server of the test, killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `deploy/prometheus/alerts.yml` with every `for:` duration replaced by `1s`.
fn fast_rules() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/prometheus/alerts.yml");
    let rules = std::fs::read_to_string(path).expect("deploy/prometheus/alerts.yml");
    let fast: Vec<String> = rules
        .lines()
        .map(|l| match l.find("for:") {
            Some(i) if l[..i].trim().is_empty() => format!("{}for: 1s", &l[..i]),
            _ => l.to_string(),
        })
        .collect();
    assert!(fast.iter().any(|l| l.trim() == "for: 1s"), "no `for:` in the rules: {path}");
    fast.join("\n")
}

/// Starts Prometheus on `targets` (job `leaf`), scraping and evaluating every second; `None`
/// when it is not installed (and not required).
fn start_prometheus(targets: &[String], ca: Option<&std::path::Path>) -> Option<Prometheus> {
    let dir = tempfile::TempDir::new().unwrap();
    std::fs::write(dir.path().join("alerts.yml"), fast_rules()).unwrap();
    let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    // Over HTTPS with the cluster's CA, as deploy/prometheus/prometheus.yml scrapes a TLS cluster.
    let tls = match ca {
        Some(ca) => format!("    scheme: https\n    tls_config:\n      ca_file: {}\n", ca.display()),
        None => String::new(),
    };
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
         rule_files: [alerts.yml]\n\
         scrape_configs:\n  - job_name: leaf\n{tls}    static_configs:\n      - targets: [{}]\n",
        targets.join(", ")
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let port = leaf_cluster_tests::cluster::free_port();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let spawned = Command::new("prometheus")
        .arg(format!("--config.file={}", dir.path().join("prometheus.yml").display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn();
    match spawned {
        Ok(child) => Some(Prometheus { child, port, _dir: dir }),
        Err(e) => {
            assert!(std::env::var_os("LEAF_REQUIRE_PROMETHEUS").is_none(), "prometheus is required but: {e}");
            eprintln!("prometheus is not installed ({e}): skipped");
            None
        }
    }
}

impl Prometheus {
    /// `GET path` of the Prometheus HTTP API, as JSON.
    async fn get(&self, path: &str) -> anyhow::Result<serde_json::Value> {
        use http_body_util::BodyExt;
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req =
            hyper::Request::get(path).header("host", "prometheus").body(http_body_util::Empty::<bytes::Bytes>::new())?;
        let body = sender.send_request(req).await?.into_body().collect().await?.to_bytes();
        Ok(serde_json::from_slice(&body)?)
    }

    /// The alerts now firing, as `(alertname, instance)` (instance empty when it has none).
    async fn firing(&self) -> BTreeSet<(String, String)> {
        let Ok(v) = self.get("/api/v1/alerts").await else { return BTreeSet::new() };
        let alerts = v["data"]["alerts"].as_array().cloned().unwrap_or_default();
        alerts
            .iter()
            .filter(|a| a["state"] == "firing")
            .map(|a| {
                let l = &a["labels"];
                (l["alertname"].as_str().unwrap_or("").to_string(), l["instance"].as_str().unwrap_or("").to_string())
            })
            .collect()
    }

    /// Targets Prometheus scraped successfully last time.
    async fn up(&self) -> usize {
        let Ok(v) = self.get("/api/v1/targets").await else { return 0 };
        let targets = v["data"]["activeTargets"].as_array().cloned().unwrap_or_default();
        targets.iter().filter(|t| t["health"] == "up").count()
    }

    /// The time of each rule group's last evaluation (empty while Prometheus does not answer).
    async fn last_evaluations(&self) -> Vec<String> {
        let Ok(v) = self.get("/api/v1/rules").await else { return Vec::new() };
        let groups = v["data"]["groups"].as_array().cloned().unwrap_or_default();
        groups.iter().map(|g| g["lastEvaluation"].as_str().unwrap_or("").to_string()).collect()
    }

    /// Waits until every rule group has been evaluated `n` more times.
    async fn evaluations(&self, n: usize) {
        // The last evaluation times, and how many times each group's has changed since the start.
        let last = RefCell::new(self.last_evaluations().await);
        let seen = RefCell::new(vec![0; last.borrow().len()]);
        eventually(&format!("Prometheus evaluates its rules {n} times"), Duration::from_secs(30), || async {
            let now = self.last_evaluations().await;
            let (mut last, mut seen) = (last.borrow_mut(), seen.borrow_mut());
            if now.len() != last.len() {
                *seen = vec![0; now.len()];
            } else {
                for (s, (a, b)) in seen.iter_mut().zip(now.iter().zip(last.iter())) {
                    *s += usize::from(a != b);
                }
            }
            *last = now;
            if last.is_empty() || seen.iter().any(|s| *s < n) {
                Err(seen.to_vec())
            } else {
                Ok(())
            }
        })
        .await;
    }

    /// Waits until `done(firing alerts)` holds; panics with the last set after `timeout`.
    async fn wait_for(&self, what: &str, timeout: Duration, done: impl Fn(&BTreeSet<(String, String)>) -> bool) {
        let firing = eventually(what, timeout, || async {
            let firing = self.firing().await;
            if done(&firing) {
                Ok(firing)
            } else {
                Err(firing)
            }
        })
        .await;
        eprintln!("{what}: firing {firing:?}");
    }
}

fn fires(f: &BTreeSet<(String, String)>, alert: &str, instance: Option<&str>) -> bool {
    f.iter().any(|(a, i)| a == alert && instance.is_none_or(|want| want == i))
}

/// The alerts that say the cluster is broken.
const OUTAGE: [&str; 3] = ["LeafNodeDown", "LeafQuorumLost", "LeafNoLeader"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_fires_and_resolves_the_outage_alerts_as_nodes_die_and_return() {
    let (_lane, mut cluster, leader) = cluster(3, "").await;
    let targets: Vec<String> = (1..=3).map(|id| cluster.addr(id)).collect();
    let Some(prom) = start_prometheus(&targets, cluster.ca().as_deref()) else { return };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while prom.up().await < 3 {
        if tokio::time::Instant::now() > deadline {
            let targets = prom.get("/api/v1/targets").await.map(|v| v.to_string());
            let log = std::fs::read_to_string(prom._dir.path().join("prometheus.log")).unwrap_or_default();
            panic!("Prometheus never scraped all three nodes: {targets:?}\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Healthy: a few evaluations (with `for: 1s`) and none of the outage alerts.
    prom.evaluations(4).await;
    let firing = prom.firing().await;
    assert!(OUTAGE.iter().all(|a| !fires(&firing, a, None)), "a healthy cluster fires {firing:?}");

    // A follower dies: it is down, the others keep a quorum and a leader.
    let follower = if leader == 1 { 2 } else { 1 };
    cluster.kill(follower);
    let gone = cluster.addr(follower);
    prom.wait_for("one follower down", Duration::from_secs(30), |f| fires(f, "LeafNodeDown", Some(&gone))).await;
    prom.evaluations(3).await;
    let firing = prom.firing().await;
    assert!(!fires(&firing, "LeafQuorumLost", None) && !fires(&firing, "LeafNoLeader", None), "{firing:?}");

    // The leader dies too: the survivor has neither a quorum nor a leader.
    cluster.kill(leader);
    let survivor = (1..=3).find(|id| *id != leader && *id != follower).unwrap();
    let alone = cluster.addr(survivor);
    prom.wait_for("two of three down", Duration::from_secs(60), |f| {
        fires(f, "LeafQuorumLost", Some(&alone)) && fires(f, "LeafNoLeader", None) && fires(f, "LeafNodeDown", None)
    })
    .await;

    // Both come back: every outage alert resolves.
    cluster.spawn(follower).unwrap();
    cluster.spawn(leader).unwrap();
    cluster.wait_leader(FORM).await.unwrap();
    prom.wait_for("all three back", Duration::from_secs(60), |f| OUTAGE.iter().all(|a| !fires(f, a, None))).await;
}
