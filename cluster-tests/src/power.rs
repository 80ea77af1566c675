//! Power cuts: every node's data directory on a file system of its own that forgets, at a cut,
//! whatever the node wrote and did not sync ([`leaf_lazyfs`], the LazyFS model).
//!
//! A [`Power`] owns one such file system per node (a backing directory and a mount point in a
//! temporary directory of its own, made before the [`Cluster`] so that it is dropped after it:
//! the nodes are dead before their mounts go). [`Power::wire`] mounts one for each node and
//! points the node's data directory into it; [`Power::cut`] is a power cut of some nodes at
//! once: `kill -9` of each (a cut stops a process as abruptly), then each file system takes
//! back what was not synced and is mounted anew (the kernel's cache goes with the cut, as with
//! a real one), then the nodes start again on what is left.
//!
//! `LEAF_POWER_STRICT_DIRS=0` turns the directory part of the model off (see [`disk_options`]).
//!
//! Mounting needs root and `/dev/fuse`; [`Power::available`] says whether this machine has
//! them, and `LEAF_REQUIRE_FUSE=1` (CI) turns their absence into a failure.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use leaf_lazyfs::{CutReport, LazyFs, Mounted};
use tempfile::TempDir;

use crate::cluster::{Cluster, NodeSpec, Options};

/// One node's disk.
struct Disk {
    fs: LazyFs,
    mountpoint: PathBuf,
    mounted: Option<Mounted>,
}

/// The nodes' disks. Drop it after the cluster (make it first).
pub struct Power {
    /// Before `dir`: fields drop in order, and the disks unmount before their directory goes.
    disks: BTreeMap<u64, Disk>,
    dir: TempDir,
    /// Disks cut so far; each one's state after its cut is copied to `node<N>-cut<K>`.
    cuts: usize,
}

/// What one cut took back from each node's disk.
#[derive(Debug, Clone)]
pub struct Cut {
    pub reports: BTreeMap<u64, CutReport>,
}

impl Cut {
    /// Bytes written and not synced that the cut took back, over every disk.
    pub fn bytes_lost(&self) -> u64 {
        self.reports.values().map(|r| r.bytes_restored + r.bytes_truncated).sum()
    }
}

/// The disks' model: strict directories (a new or renamed entry survives a cut only once its
/// directory was fsynced) unless `LEAF_POWER_STRICT_DIRS=0`, which keeps only the file-data
/// part (LazyFS's own model): to tell which of the two a failing build trips over.
fn disk_options() -> leaf_lazyfs::Options {
    let strict_dirs = std::env::var("LEAF_POWER_STRICT_DIRS").map_or(true, |v| v != "0");
    leaf_lazyfs::Options { strict_dirs }
}

impl Power {
    /// Whether power cuts can run here (root and `/dev/fuse`). Without them: `Ok(false)` with the
    /// reason printed, or an error when `LEAF_REQUIRE_FUSE=1` says they must run.
    pub fn available() -> anyhow::Result<bool> {
        // SAFETY: geteuid(2) has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let fuse = Path::new("/dev/fuse").exists();
        if root && fuse {
            return Ok(true);
        }
        let why = format!("power cuts need root and /dev/fuse (root: {root}, /dev/fuse: {fuse})");
        if std::env::var("LEAF_REQUIRE_FUSE").is_ok_and(|v| v == "1") {
            bail!("{why}, and LEAF_REQUIRE_FUSE=1");
        }
        eprintln!("skipped: {why}");
        Ok(false)
    }

    pub fn new() -> anyhow::Result<Power> {
        Ok(Power { disks: BTreeMap::new(), dir: tempfile::Builder::new().prefix("leaf-power-").tempdir()?, cuts: 0 })
    }

    /// Gives each node in `ids` a disk of its own and moves its data directory there (from its
    /// next start on: call before the nodes start).
    pub fn wire(&mut self, cluster: &mut Cluster, ids: &[u64]) -> anyhow::Result<()> {
        for &id in ids {
            let backing = self.dir.path().join(format!("node{id}-backing"));
            let mountpoint = self.dir.path().join(format!("node{id}"));
            std::fs::create_dir_all(&backing)?;
            std::fs::create_dir_all(&mountpoint)?;
            let fs = LazyFs::new(&backing, disk_options()).context("lazyfs")?;
            let mounted = fs.mount(&mountpoint).with_context(|| format!("mount {}", mountpoint.display()))?;
            cluster.set_data_dir(id, mounted.path().join("data"));
            self.disks.insert(id, Disk { fs, mountpoint, mounted: Some(mounted) });
        }
        Ok(())
    }

    /// Starts a cluster of `specs` whose every node has a disk of its own here.
    pub fn start(&mut self, specs: Vec<NodeSpec>, opts: Options) -> anyhow::Result<Cluster> {
        let mut cluster = Cluster::prepare_specs(specs, opts)?;
        let ids = cluster.ids();
        self.wire(&mut cluster, &ids)?;
        for id in ids {
            cluster.spawn(id)?;
        }
        Ok(cluster)
    }

    /// Cuts the power of the nodes `ids` at once and restarts them on what their disks kept.
    pub fn cut(&mut self, cluster: &mut Cluster, ids: &[u64]) -> anyhow::Result<Cut> {
        let cut = self.cut_off(cluster, ids)?;
        for &id in ids {
            cluster.spawn(id)?;
        }
        Ok(cut)
    }

    /// Cuts the power of the nodes `ids` at once and leaves them down (their disks mounted
    /// again, holding what they had synced): [`Cluster::spawn`] brings each back.
    pub fn cut_off(&mut self, cluster: &mut Cluster, ids: &[u64]) -> anyhow::Result<Cut> {
        for &id in ids {
            cluster.kill(id);
        }
        let mut reports = BTreeMap::new();
        for &id in ids {
            let disk = self.disks.get_mut(&id).with_context(|| format!("node {id} has no disk of ours"))?;
            let mounted = disk.mounted.take().with_context(|| format!("node {id}'s disk is not mounted"))?;
            let report = mounted.power_cut().with_context(|| format!("power cut of node {id}"))?;
            anyhow::ensure!(report.problems.is_empty(), "node {id}'s disk: {report}");
            self.cuts += 1;
            // What the cut left, before the node touches it again: a failed test keeps these.
            let kept = self.dir.path().join(format!("node{id}-cut{}", self.cuts));
            let backing = self.dir.path().join(format!("node{id}-backing"));
            let copied = std::process::Command::new("cp").arg("-a").arg(&backing).arg(&kept).status();
            anyhow::ensure!(copied.is_ok_and(|s| s.success()), "copying node {id}'s disk after the cut");
            disk.mounted = Some(disk.fs.mount(&disk.mountpoint).with_context(|| format!("remount node {id}"))?);
            reports.insert(id, report);
        }
        Ok(Cut { reports })
    }
}

impl Drop for Power {
    /// After a failed test the disks are unmounted (a clean unmount keeps what the nodes wrote
    /// since the last cut) and their backing directories kept, for whoever looks into it.
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.disks.clear();
            self.dir.disable_cleanup(true);
            eprintln!(
                "----- the nodes' disks are kept: {}/node<N>-backing, and as each cut left them, node<N>-cut<K> -----",
                self.dir.path().display()
            );
        }
    }
}
