//! The disaster drill (issue 32): a 3-node TLS cluster serves every profile under load and
//! takes scheduled backups; traffic goes on after one; every node is killed (`kill -9`) and its
//! data deleted; `leaf restore` with the automatic margin makes a new 3-node cluster from that
//! backup, and traffic runs again. Every ID seen before and after is checked: no repeat, each
//! profile's guarantee held (monotonic IDs above every earlier one, bounded ones within their
//! bound, snowflake IDs after every earlier one), obfuscated IDs from before still decode to
//! the same sequence, a token from before still works, the audit trail and `/health` show the
//! restore. The restored nodes' clocks run behind the lost cluster's: only the snowflake floor
//! keeps their IDs after every earlier one. A gapless series issues numbers before and after
//! the backup: the restore voids its margin as lost with the cluster, so the numbers issued
//! after the restore are above every number the lost cluster issued, the keys from before the
//! backup keep their numbers, and the ledger still runs 1..=N with no gap. A second drill takes its backup with `leaf backup` from a leader that is killed in
//! the middle of writing it (crash point `backup-midway`): the command moves on to another
//! node, and the file it keeps restores like the first. Damaged and encrypted files are refused
//! with a clear error and leave no data directory behind.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use leaf_api::audit::{AuditAction, AuditFilter, AuditKind};
use leaf_api::profile::{DailyOptions, Profile};
use leaf_api::tokens::{CreateTokenRequest, Right, TagPattern};
use leaf_api::types::{CreateTagRequest, CreateTagsRequest};
use leaf_client::{Client, HealthMode};
use leaf_cluster_tests::cluster::{Cluster, NodeSpec, Options, TOKEN};

use crate::support::*;

/// The drill's tags: a name, its profile, its upper bound.
const TAGS: &[(&str, Profile, Option<i64>)] = &[
    ("drill-seg", Profile::Segment, None),
    ("drill-mono", Profile::Monotonic, None),
    ("drill-obf", Profile::Obfuscated, None),
    ("drill-daily", Profile::Daily, None),
    ("drill-bounded", Profile::Segment, Some(50_000_000)),
];

/// How far the restored nodes' clocks run behind, more than it takes them to serve, and less
/// than their [`STARTUP_WAIT_MS`], so they serve above the floor, ahead of their clocks.
const CLOCK_BEHIND_MS: &str = "-20000";

/// The restored nodes' `snowflake.max_startup_wait_ms`.
const STARTUP_WAIT_MS: &str = "30000";

/// IDs of every tag seen before the backup.
const WARM: usize = 5_000;

/// The crash point the second drill kills its leader at.
pub(crate) const CRASH_POINT: &str = "backup-midway";

/// The drill's gapless series (it never resets).
const INVOICES: &str = "drill-inv";

/// Numbers the gapless series issues before the backup, after it, and after the restore.
const NUMBERS: usize = 20;

/// Issues `NUMBERS` numbers of [`INVOICES`] for keys `prefix-0…`, in order; their numbers.
async fn issue_numbers(c: &Client, prefix: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for i in 0..NUMBERS {
        let key = format!("{prefix}-{i}");
        let n = retry_number(c, &key).await;
        out.push(n);
    }
    out
}

/// The number of `key`, retried while the cluster settles.
async fn retry_number(c: &Client, key: &str) -> u64 {
    let mut last = None;
    for _ in 0..100 {
        match c.gapless(INVOICES).issue(key).await {
            Ok(n) => return n.number,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no number for {key}: {last:?}")
}

/// An idle bounded tag with too little room for any margin: the restore must report it.
const TINY: &str = "drill-tiny";

/// The nodes' settings: small dynamic steps, quick forecasts (the backup records the rates the
/// margin comes from), a backup every 5 s to `dir`.
fn settings(backups: Option<&Path>) -> String {
    let mut toml = "[segment]\nmax_step = 2000\n\n[forecast]\nsample_interval_ms = 200\nwindow_secs = 5\n".to_string();
    if let Some(dir) = backups {
        toml.push_str(&format!("\n[backup]\ndir = {:?}\ninterval_secs = 5\nkeep = 50\n", dir.display().to_string()));
    }
    toml
}

/// Every ID the clients saw, by tag (`snowflake` for snowflake IDs).
#[derive(Default)]
struct Seen(Mutex<BTreeMap<String, Vec<i64>>>);

impl Seen {
    fn add(&self, tag: &str, ids: &[i64]) {
        self.0.lock().unwrap().entry(tag.to_string()).or_default().extend_from_slice(ids);
    }

    fn of(&self, tag: &str) -> Vec<i64> {
        self.0.lock().unwrap().get(tag).cloned().unwrap_or_default()
    }
}

/// Takes IDs of every tag and snowflake IDs from each client in turn until `stop`.
fn traffic(clients: Vec<Client>, seen: Arc<Seen>, stop: Arc<AtomicBool>) -> Vec<tokio::task::JoinHandle<()>> {
    clients
        .into_iter()
        .map(|c| {
            let (seen, stop) = (seen.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    for (tag, _, _) in TAGS {
                        if let Ok(ids) = c.segment_ids(tag, 20).await {
                            seen.add(tag, &ids);
                        }
                    }
                    if let Ok(ids) = c.snowflake_ids("drill", 20).await {
                        seen.add("snowflake", &ids);
                    }
                }
            })
        })
        .collect()
}

/// Runs the `leaf` binary with `args` (the admin token in its environment); its exit status and
/// everything it printed.
fn leaf(args: &[&str]) -> (bool, String) {
    let out = Command::new(bin()).args(args).env("LEAF_ADMIN_TOKEN", TOKEN).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Creates the drill's tags and a token for them; returns the token's bearer.
async fn setup(c: &Client) -> String {
    for (tag, profile, upper_bound) in TAGS {
        let daily = (*profile == Profile::Daily).then_some(DailyOptions { digits: Some(8), utc_offset: None });
        let req = CreateTagRequest { profile: Some(*profile), upper_bound: *upper_bound, daily, ..tag_req(tag, 50) };
        c.create_tag(&req).await.unwrap_or_else(|e| panic!("create {tag}: {e}"));
    }
    let gapless = leaf_api::gapless::GaplessOptions::default();
    let inv = CreateTagRequest { profile: Some(Profile::Gapless), gapless: Some(gapless), ..tag_req(INVOICES, 1) };
    c.create_tag(&inv).await.unwrap();
    let tiny = CreateTagRequest { upper_bound: Some(30), ..tag_req(TINY, 5) };
    c.create_tag(&tiny).await.unwrap();
    // Filler, so a backup writes more than the 1,000 pairs after which `backup-midway` crashes.
    let filler = (0..1_500).map(|i| tag_req(&format!("filler-{i:04}"), 10)).collect();
    c.create_tags(&CreateTagsRequest { tags: filler }).await.unwrap();
    let req = CreateTokenRequest {
        name: "drill-svc".into(),
        rights: vec![Right::Ids],
        tags: vec![TagPattern::parse("drill-*").unwrap()],
        ..Default::default()
    };
    c.create_token(&req).await.unwrap().bearer
}

/// A scheduled backup in `dir` written after `after`, once there is one.
async fn scheduled_after(dir: &Path, after: SystemTime) -> PathBuf {
    let what = format!("a scheduled backup in {} after the traffic began", dir.display());
    eventually(&what, Duration::from_secs(30), || {
        let newer = std::fs::read_dir(dir).into_iter().flatten().flatten().find(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(".leafbak") && e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t > after)
        });
        std::future::ready(newer.map(|e| e.path()).ok_or("none yet"))
    })
    .await
}

/// The counters a backup holds, by tag, and the highest snowflake high-water mark (Unix ms).
fn backed_up(file: &Path) -> (BTreeMap<String, i64>, i64) {
    let (_, data) = leaf_raft_store::read_backup(std::fs::File::open(file).unwrap()).unwrap();
    let marks = data.state.workers.values().map(|w| w.high_water_ms).max().unwrap_or(i64::MIN);
    (data.state.tags.iter().map(|(t, r)| (t.clone(), r.max_id)).collect(), marks)
}

/// The Unix ms of a snowflake ID (the default epoch).
fn snowflake_ms(id: i64) -> i64 {
    (id >> 22) + 1_288_834_974_657
}

/// How the drill's backup is taken.
#[derive(Clone, Copy, PartialEq)]
enum Take {
    /// The leader's scheduled backup.
    Scheduled,
    /// `leaf backup` from the leader, which is killed in the middle of writing it.
    LeaderKilledMidway,
}

/// The drill; returns the backup file it restored from (in a directory that outlives it).
async fn drill(take: Take, keep: &Path) -> PathBuf {
    let _lane = beside().await;
    let backups = keep.join("scheduled");
    std::fs::create_dir_all(&backups).unwrap();
    let (arms, mut old) = armed_cluster(3, &settings(Some(&backups)));
    let leader = old.wait_leader(FORM).await.unwrap();
    let bearer = setup(&old.client(leader)).await;
    let numbered = issue_numbers(&old.client(leader), "before").await;
    let seen = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let began = SystemTime::now();
    let tasks = traffic((1..=3).map(|id| old.client(id)).collect(), seen.clone(), stop.clone());
    // Steady traffic before the backup: the rates it records are the margins' basis.
    until_holds("traffic on every tag", Duration::from_secs(30), || {
        TAGS.iter().all(|(t, _, _)| seen.of(t).len() >= WARM) && seen.of("snowflake").len() >= WARM
    })
    .await;

    let file = match take {
        Take::Scheduled => scheduled_after(&backups, began).await,
        Take::LeaderKilledMidway => {
            arms.arm(&old, leader, CRASH_POINT).await;
            let out = keep.join("manual.leafbak");
            let (urls, ca) = ((1..=3).map(|id| old.url(id)).collect::<Vec<_>>(), old.ca().unwrap());
            let others: Vec<&str> =
                urls.iter().enumerate().filter(|(i, _)| *i as u64 + 1 != leader).map(|(_, u)| u.as_str()).collect();
            let args = ["backup", "--out", out.to_str().unwrap(), "--url", &urls[leader as usize - 1]];
            let also = others.join(",");
            let (ok, text) = leaf(&[&args[..], &["--also", &also, "--ca", ca.to_str().unwrap()]].concat());
            assert!(ok, "leaf backup: {text}");
            assert!(text.contains("failed"), "the leader's attempt should have failed: {text}");
            until_holds("the leader crashed at backup-midway", Duration::from_secs(10), || {
                old.log_tail(leader, 50).contains("leaf failpoint backup-midway: crashing the process")
            })
            .await;
            // One more, encrypted to a new key, for the checks after the drill.
            let key = keep.join("key.txt");
            let (ok, recipient) = leaf(&["backup", "keygen", "--out", key.to_str().unwrap()]);
            assert!(ok, "{recipient}");
            let recipient = recipient.lines().next().unwrap().trim().to_string();
            let sealed = keep.join("sealed.leafbak.age");
            let args = ["backup", "--out", sealed.to_str().unwrap(), "--recipient", &recipient, "--url", others[0]];
            let (ok, text) = leaf(&[&args[..], &["--ca", ca.to_str().unwrap()]].concat());
            assert!(ok, "leaf backup --recipient: {text}");
            out
        }
    };
    // More traffic after the backup: the lost cluster allocates beyond what it holds.
    let (at_backup, marks) = backed_up(&file);
    let survivor = (1..=3).find(|id| old.alive(*id)).unwrap();
    let lost_numbers = issue_numbers(&old.client(survivor), "lost").await;
    // Snowflake IDs past every mark the backup holds: only the restore's floor covers them.
    until_holds("snowflake IDs past the backup's marks", Duration::from_secs(30), || {
        seen.of("snowflake").iter().any(|id| snowflake_ms(*id) > marks + 500)
    })
    .await;
    until_holds("allocations past the backup on every tag", Duration::from_secs(30), || {
        TAGS.iter().filter(|(_, p, _)| *p != Profile::Obfuscated).all(|(t, _, _)| {
            seen.of(t)
                .iter()
                .any(|id| *id >= at_backup[*t] && (*t != "drill-daily" || id % 100_000_000 >= at_backup[*t]))
        })
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    // Decodes from before, to compare after.
    let obf: Vec<i64> = seen.of("drill-obf").into_iter().take(5).collect();
    let mut decoded = BTreeMap::new();
    let survivor = (1..=3).find(|id| old.alive(*id)).unwrap();
    for id in &obf {
        decoded.insert(*id, old.client(survivor).decode_obfuscated("drill-obf", *id).await.unwrap().sequence);
    }

    // The loss: every node killed, every data directory gone.
    for id in 1..=3 {
        old.kill(id);
        std::fs::remove_dir_all(old.data_dir(id)).unwrap();
    }
    drop(old);

    // The restore, into a new cluster's first node; the others start blank and may not form a
    // cluster of their own.
    let mut opts = Options::new(bin());
    opts.extra_toml = settings(None);
    let mut new = Cluster::prepare_specs((1..=3).map(NodeSpec::direct).collect(), opts).unwrap();
    let config = new.write_config(1).unwrap();
    let restore = |extra: &[&str]| {
        leaf(&[&["restore", file.to_str().unwrap(), "--config", config.to_str().unwrap()], extra].concat())
    };
    let (ok, text) = restore(&[]);
    assert!(!ok && text.contains(TINY) && text.contains("--allow-exhausted"), "{text}");
    assert!(!new.data_dir(1).exists(), "a refused restore wrote {}", new.data_dir(1).display());
    let (ok, text) = restore(&["--allow-exhausted"]);
    assert!(ok, "leaf restore: {text}");
    assert!(text.contains("numbers voided as lost"), "{text}");
    // What it wrote is the node's alone (the test process's umask is the usual 022).
    let mut stack = vec![new.data_dir(1)];
    while let Some(p) = stack.pop() {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::symlink_metadata(&p).unwrap();
        assert_eq!(meta.permissions().mode() & 0o077, 0, "{} is readable by others", p.display());
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    let (ok, text) = restore(&["--allow-exhausted"]);
    assert!(!ok && text.contains("already restored from this backup"), "{text}");
    let node1 = format!("1={}", new.peer_addr(1).unwrap());
    // The new machines' clocks run behind the lost cluster's (all alike, so the peers agree):
    // only the restore's snowflake floor keeps their IDs after every earlier one.
    let skew = [
        ("LEAF_FAULT__ENABLED", "true"),
        ("LEAF_FAULT__CLOCK_OFFSET_MS", CLOCK_BEHIND_MS),
        ("LEAF_SNOWFLAKE__MAX_STARTUP_WAIT_MS", STARTUP_WAIT_MS),
    ];
    new.set_env(1, &skew);
    for id in [2, 3] {
        new.set_env(id, &[&skew[..], &[("LEAF_PEERS", node1.as_str())]].concat());
    }
    for id in 1..=3 {
        new.spawn(id).unwrap();
    }
    new.wait_leader(FORM).await.unwrap();
    for id in 1..=3 {
        let c = new.client(id);
        let h = tokio::time::timeout(FORM, async {
            loop {
                if let Ok(h) = c.health(HealthMode::All).await {
                    if h.ready {
                        return h.health;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("node {id} not ready: {}", new.log_tail(id, 30)));
        assert_eq!(h.restore_generation, 1, "node {id}");
    }

    // Traffic again, then every check.
    let after = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = traffic((1..=3).map(|id| new.client(id)).collect(), after.clone(), stop.clone());
    until_holds("traffic after the restore", Duration::from_secs(30), || {
        TAGS.iter().all(|(t, _, _)| after.of(t).len() >= 100) && after.of("snowflake").len() >= 100
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    for (tag, profile, bound) in
        TAGS.iter().map(|(t, p, b)| (t.to_string(), p, b)).chain([("snowflake".into(), &Profile::Segment, &None)])
    {
        let before: BTreeSet<i64> = seen.of(&tag).into_iter().collect();
        let now = after.of(&tag);
        let repeats: Vec<&i64> = now.iter().filter(|id| before.contains(id)).take(5).collect();
        assert!(repeats.is_empty(), "{tag}: IDs handed out before the loss again after the restore: {repeats:?}");
        let unique: BTreeSet<i64> = now.iter().copied().collect();
        assert_eq!(unique.len(), now.len(), "{tag}: a repeat after the restore");
        if *profile == Profile::Monotonic || tag == "snowflake" {
            let (last, first) = (before.iter().max().unwrap(), now.iter().min().unwrap());
            assert!(first > last, "{tag}: {first} after the restore is not above {last} from before");
        }
        if let Some(b) = bound {
            assert!(now.iter().all(|id| id <= b), "{tag}: an ID above its bound {b}");
        }
    }
    let c = new.client(1);
    // The gapless series: the keys from before the backup keep their numbers, a new one comes
    // after every number the lost cluster issued, and the ledger has no gap.
    for (i, n) in numbered.iter().enumerate() {
        assert_eq!(retry_number(&c, &format!("before-{i}")).await, *n, "before-{i}");
    }
    let after_numbers = issue_numbers(&c, "after").await;
    let lost_max = lost_numbers.iter().max().unwrap();
    assert!(after_numbers.iter().all(|n| n > lost_max), "{after_numbers:?} after the lost {lost_numbers:?}");
    let (entries, _) = c.gapless(INVOICES).ledger(None).await.unwrap();
    let numbers: Vec<u64> = entries.iter().map(|e| e.number).collect();
    assert_eq!(numbers, (1..=entries.len() as u64).collect::<Vec<_>>(), "the ledger has a gap");
    let lost =
        entries.iter().filter(|e| e.settled.as_ref().and_then(|s| s.cause) == Some(leaf_api::gapless::VoidCause::Lost));
    assert!(lost.count() >= 100, "the margin (at least 100) voided as lost");
    for (id, sequence) in &decoded {
        assert_eq!(c.decode_obfuscated("drill-obf", *id).await.unwrap().sequence, *sequence, "obfuscated {id}");
    }
    let (status, _, message) = api_error(c.segment_id(TINY).await);
    assert!(
        status.is_client_error() || status.is_server_error(),
        "{TINY} served after being restored exhausted: {message}"
    );
    let with_token = new.client_with(2, Some(&bearer), Duration::from_secs(10));
    try_get_ids(&with_token, "drill-seg", Some(3)).await.unwrap();
    let restored = AuditFilter { kind: Some(AuditKind::ClusterRestored), ..AuditFilter::default() };
    let page = c.audit(&restored, None, None).await.unwrap();
    assert!(
        matches!(&page.records[..], [r] if matches!(&r.action, AuditAction::ClusterRestored { generation: 1, tags_exhausted: 1, .. })),
        "{:?}",
        page.records
    );
    let metrics = c.metrics().await.unwrap();
    assert!(metrics.lines().any(|l| l == "leaf_restore_generation 1"), "{metrics}");
    file
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_restored_from_a_scheduled_backup_repeats_no_id_of_the_lost_one() {
    let keep = tempfile::tempdir().unwrap();
    let file = drill(Take::Scheduled, keep.path()).await;
    assert!(file.starts_with(keep.path().join("scheduled")));
    let mode = std::fs::metadata(&file).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600, "{}", file.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_whose_leader_dies_midway_comes_from_another_node_and_damaged_files_restore_nothing() {
    let keep = tempfile::tempdir().unwrap();
    let file = drill(Take::LeaderKilledMidway, keep.path()).await;
    let bytes = std::fs::read(&file).unwrap();
    let target = keep.path().join("target");
    let restore_into = |f: &Path, extra: &[&str]| {
        let args =
            ["restore", f.to_str().unwrap(), "--data-dir", target.to_str().unwrap(), "--http-addr", "127.0.0.1:9"];
        leaf(&[&args[..], extra, &["--allow-exhausted"]].concat())
    };
    let cases: [(&str, Vec<u8>, &str); 3] = [
        ("truncated", bytes[..bytes.len() / 2].to_vec(), "truncated"),
        (
            "corrupted",
            {
                let mut b = bytes.clone();
                let i = b.len() / 2;
                b[i] ^= 0x20;
                b
            },
            "corrupt",
        ),
        ("padded", [&bytes[..], b"x"].concat(), "after its end"),
    ];
    for (name, content, says) in cases {
        let f = keep.path().join(name);
        std::fs::write(&f, content).unwrap();
        let (ok, text) = restore_into(&f, &[]);
        assert!(!ok && text.contains(says), "{name}: {text}");
        assert!(!target.exists(), "{name}: a refused restore left {}", target.display());
    }
    // Encrypted to a key: refused without it, read whole with it.
    let (key, sealed) = (keep.path().join("key.txt"), keep.path().join("sealed.leafbak.age"));
    assert!(!std::fs::read(&sealed).unwrap().starts_with(b"LEAFBAK1"), "not encrypted");
    let (ok, text) = restore_into(&sealed, &[]);
    assert!(!ok && text.contains("encrypted"), "{text}");
    let (ok, text) = restore_into(&sealed, &["--identity", key.to_str().unwrap(), "--dry-run"]);
    assert!(ok, "{text}");
}
