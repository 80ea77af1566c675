//! A node whose disk fills up: writes stop with clear 503s (never a 500, never an
//! acknowledgement that was not fsynced), buffered IDs keep flowing, and after space is freed
//! and the node is killed and restarted, every acknowledged tag is there and every ID is above
//! those handed out before.
//!
//! Needs root (it mounts a 16 MiB ext4 image on a loop device); otherwise it prints why and
//! passes.
use std::cell::RefCell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use leaf_api::types::CreateTagRequest;
use leaf_client::{Client, HealthMode, StatusCode};
use leaf_cluster_tests::cluster::{free_port, node_client, TOKEN};

use crate::support::*;

/// A loop-mounted ext4 file system, unmounted on drop.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount() -> Result<SmallDisk, String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root (mounting a small file system needs it)".to_string());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let img = dir.path().join("disk.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
        std::fs::File::create(&img).and_then(|f| f.set_len(16 << 20)).map_err(|e| e.to_string())?;
        let run = |cmd: &mut Command| match cmd.output() {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr).trim())),
            Err(e) => Err(format!("{cmd:?}: {e}")),
        };
        run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img))?;
        run(Command::new("mount").args(["-o", "loop"]).arg(&img).arg(&mnt))?;
        Ok(SmallDisk { dir })
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }

    /// Writes a filler file until the file system refuses (ENOSPC).
    fn fill(&self) -> u64 {
        let mut f = std::fs::File::create(self.path().join("filler")).unwrap();
        let chunk = vec![0u8; 64 << 10];
        let mut written = 0u64;
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
                    break;
                }
            }
        }
        let _ = f.sync_all();
        written
    }

    fn free(&self) {
        std::fs::remove_file(self.path().join("filler")).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.path()).status();
    }
}

/// A node process, killed when dropped (a failing assertion must not leave it running on
/// the port and the mounted disk).
struct Node(Child);

impl Node {
    fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

fn start_node(data: &Path, port: u16, log: &Path) -> Node {
    let child = Command::new(bin())
        .args(["serve", "--node-id", "1", "--http-addr", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(data)
        .env("LEAF_ADMIN_TOKEN", TOKEN)
        .env("LEAF_BOOTSTRAP_TAGS", "[]")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    Node(child)
}

async fn wait_ready(c: &Client) {
    let ready = || async { c.health(HealthMode::All).await.is_ok_and(|r| r.ready) };
    until("the node is ready", Duration::from_secs(30), ready).await;
}

/// Ten snowflake IDs, once the node serves them (it registers its worker after start).
async fn flakes_within(c: &Client, bound: Duration) -> Vec<i64> {
    eventually("snowflake IDs", bound, || snowflake_get(c, 10)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_stops_writes_with_503s_and_after_recovery_every_id_is_above_those_before() {
    let disk = match SmallDisk::mount() {
        Ok(d) => d,
        Err(why) => {
            println!("SKIPPED the disk-full test: {why}");
            return;
        }
    };
    let _lane = beside().await;
    let data = disk.path().join("data");
    let port = free_port();
    let mut node = start_node(&data, port, &disk.dir.path().join("node-1.log"));
    let c = node_client(&format!("http://127.0.0.1:{port}"), Some(TOKEN), None, Duration::from_secs(10));
    wait_ready(&c).await;
    create_tag(&c, "df", 10).await;
    let mut served = try_get_ids(&c, "df", Some(5)).await.unwrap();
    let mut flakes = flakes_within(&c, Duration::from_secs(10)).await;

    let filled = disk.fill();
    assert!(filled > 0);

    // Writes: acknowledged (201, fsynced before the disk filled up) or refused with 503. sled
    // writes into log segments it already holds, so a few hundred may still fit.
    let mut acked = Vec::new();
    let mut refused = 0;
    for i in 0..3000 {
        if refused == 3 {
            break;
        }
        let tag = format!("df-full-{i}");
        let req = CreateTagRequest { description: Some("x".repeat(1000)), ..tag_req(&tag, 1) };
        match c.create_tag(&req).await {
            Ok(_) => acked.push(tag),
            Err(e) if e.status() == Some(StatusCode::SERVICE_UNAVAILABLE) => refused += 1,
            Err(e) => panic!("creating a tag on a full disk: {e}"),
        }
    }
    assert!(refused > 0, "a full disk refused no write");
    let r = c.health(HealthMode::All).await.unwrap();
    let health = r.health;
    assert!(!r.ready);
    let reason = health.reason.unwrap_or_default();
    assert!(reason.contains("raft stopped") && reason.contains("No space left"), "{reason}");

    // Buffered IDs keep coming until the buffers run dry; then a 503 `unavailable` that says why.
    let error = loop {
        match try_get_ids(&c, "df", Some(3)).await {
            Ok(ids) => served.extend(ids),
            Err(e) => break e,
        }
        assert!(served.len() < 1000, "IDs kept coming without segment allocations");
    };
    assert!(error.contains("503") && error.contains("unavailable") && error.contains("No space left"), "{error}");
    // Snowflake stops once its high-water mark can no longer be made durable (within the window).
    // The IDs it serves meanwhile count as handed out.
    let served_meanwhile = RefCell::new(Vec::new());
    let error = eventually("snowflake stops serving on a full disk", Duration::from_secs(10), || async {
        match snowflake_get(&c, 10).await {
            Ok(ids) => {
                served_meanwhile.borrow_mut().extend(ids);
                Err("still serving")
            }
            Err(refusal) => Ok(refusal),
        }
    })
    .await;
    flakes.extend(served_meanwhile.into_inner());
    assert_eq!(error.0, StatusCode::SERVICE_UNAVAILABLE, "{}", error.1);

    // Free space, crash, restart: acknowledged writes survived, IDs continue above.
    disk.free();
    node.kill();
    let mut node = start_node(&data, port, &disk.dir.path().join("node-2.log"));
    wait_ready(&c).await;
    println!("{} tag creations acknowledged on the full disk, {refused} refused", acked.len());
    acked.push("df".to_string());
    for tag in &acked {
        c.tag(tag).await.unwrap_or_else(|e| panic!("acknowledged tag {tag} is gone: {e}"));
    }
    let max_before = *served.iter().max().unwrap();
    let after = try_get_ids(&c, "df", Some(25)).await.unwrap();
    assert!(after.iter().all(|id| *id > max_before), "IDs at or below {max_before} after the restart: {after:?}");
    let flake_max = *flakes.iter().max().unwrap();
    let flakes_after = flakes_within(&c, Duration::from_secs(10)).await;
    assert!(flakes_after.iter().all(|id| *id > flake_max));
    served.extend(after);
    let unique: std::collections::HashSet<i64> = served.iter().copied().collect();
    assert_eq!(unique.len(), served.len(), "duplicate segment IDs");
    node.kill();
}
