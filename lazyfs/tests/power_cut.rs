//! The power-cut file system, mounted for real: what survives a cut and what does not.
//!
//! Needs root and `/dev/fuse`; without them every test says why and passes, unless
//! `LEAF_REQUIRE_FUSE=1`.

mod support;

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::process::{Command, Stdio};
use std::time::Instant;

use leaf_lazyfs::Options;
use support::{is_mount_point, pattern, sync_dir, Env};

fn strict() -> Options {
    Options::default()
}

/// Creates `rel` with `content`, fsynced, with its directory fsynced: durable.
fn durable_file(env: &Env, rel: &str, content: &[u8]) {
    let path = env.p(rel);
    let mut f = File::create(&path).unwrap();
    f.write_all(content).unwrap();
    f.sync_all().unwrap();
    sync_dir(path.parent().unwrap()).unwrap();
}

#[test]
fn fdatasync_keeps_data_and_a_cut_drops_the_rest() {
    let Some(mut env) = Env::new(strict()) else { return };
    let synced = pattern(1, 8192);
    {
        let mut f = OpenOptions::new().create_new(true).read(true).write(true).open(env.p("f")).unwrap();
        f.write_all(&synced).unwrap();
        f.sync_data().unwrap();
        sync_dir(env.mount_path()).unwrap();
        // Appended and overwritten without a sync.
        f.write_all(&pattern(2, 5000)).unwrap();
        f.write_all_at(&pattern(3, 100), 1000).unwrap();
        f.write_all_at(&pattern(4, 300), 8000).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 13192);
    }
    let stats = env.fs.stats();
    assert_eq!(stats.fdatasyncs, 1);
    assert_eq!(stats.unsynced_files, 1);
    assert_eq!(stats.saved_bytes, 100 + 192);
    let report = env.cut();
    assert_eq!(report.files_reverted, 1);
    assert_eq!(report.bytes_restored, 292);
    assert_eq!(report.bytes_truncated, 5000);
    assert_eq!(fs::read(env.p("f")).unwrap(), synced);
    assert_eq!(env.fs.stats().unsynced_files, 0);
}

#[test]
fn sync_file_range_does_not_make_data_survive() {
    let Some(mut env) = Env::new(strict()) else { return };
    durable_file(&env, "f", b"synced");
    {
        let mut f = OpenOptions::new().append(true).open(env.p("f")).unwrap();
        f.write_all(b" and more").unwrap();
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: a valid descriptor.
        let ret = unsafe { libc::sync_file_range(f.as_raw_fd(), 0, 0, flags) };
        assert_eq!(ret, 0, "{}", io::Error::last_os_error());
    }
    assert_eq!(fs::read(env.p("f")).unwrap(), b"synced and more");
    env.cut();
    assert_eq!(fs::read(env.p("f")).unwrap(), b"synced");
}

#[test]
fn an_unsynced_truncate_is_undone() {
    let Some(mut env) = Env::new(strict()) else { return };
    let synced = pattern(5, 10_000);
    durable_file(&env, "f", &synced);
    {
        let f = OpenOptions::new().write(true).open(env.p("f")).unwrap();
        f.set_len(100).unwrap();
        f.set_len(20_000).unwrap();
        f.write_all_at(b"over the cut range", 5000).unwrap();
    }
    assert_eq!(fs::metadata(env.p("f")).unwrap().len(), 20_000);
    env.cut();
    assert_eq!(fs::read(env.p("f")).unwrap(), synced);
}

#[test]
fn an_unsynced_o_trunc_is_undone() {
    let Some(mut env) = Env::new(strict()) else { return };
    let synced = pattern(6, 3000);
    durable_file(&env, "f", &synced);
    {
        let mut f = OpenOptions::new().write(true).truncate(true).open(env.p("f")).unwrap();
        f.write_all(b"new").unwrap();
    }
    fs::write(env.p("f"), b"again, by fs::write").unwrap();
    assert_eq!(fs::read(env.p("f")).unwrap(), b"again, by fs::write");
    assert!(env.fs.stats().truncates >= 2);
    env.cut();
    assert_eq!(fs::read(env.p("f")).unwrap(), synced);
}

#[test]
fn a_new_file_needs_its_directory_fsynced() {
    let Some(mut env) = Env::new(strict()) else { return };
    fs::create_dir(env.p("d")).unwrap();
    sync_dir(env.mount_path()).unwrap();
    for name in ["d/lost", "kept"] {
        let mut f = File::create(env.p(name)).unwrap();
        f.write_all(b"data").unwrap();
        f.sync_all().unwrap();
    }
    // Only the root is fsynced: "kept" is durable, "d/lost" is not.
    sync_dir(env.mount_path()).unwrap();
    let report = env.cut();
    assert_eq!(report.dir_ops_undone, 1);
    assert!(env.p("d").is_dir());
    assert!(!env.p("d/lost").exists());
    assert_eq!(fs::read(env.p("kept")).unwrap(), b"data");
}

#[test]
fn a_new_directory_and_everything_in_it_needs_its_parent_fsynced() {
    let Some(mut env) = Env::new(strict()) else { return };
    fs::create_dir(env.p("d")).unwrap();
    fs::create_dir(env.p("d/e")).unwrap();
    durable_file(&env, "d/e/f", b"deep");
    sync_dir(&env.p("d")).unwrap();
    env.cut();
    assert!(!env.p("d").exists());
    assert_eq!(fs::read_dir(env.mount_path()).unwrap().count(), 0, "the trash is hidden and empty");
    assert_eq!(fs::read_dir(env.backing.path().join(".lazyfs-trash")).unwrap().count(), 0);

    fs::create_dir(env.p("d")).unwrap();
    sync_dir(env.mount_path()).unwrap();
    durable_file(&env, "d/f", b"kept");
    env.cut();
    assert_eq!(fs::read(env.p("d/f")).unwrap(), b"kept");
}

#[test]
fn an_unsynced_rename_is_undone_and_the_replaced_target_restored() {
    let Some(mut env) = Env::new(strict()) else { return };
    durable_file(&env, "a", b"A");
    durable_file(&env, "b", b"B");
    fs::rename(env.p("a"), env.p("b")).unwrap();
    assert!(!env.p("a").exists());
    assert_eq!(fs::read(env.p("b")).unwrap(), b"A");
    let report = env.cut();
    assert_eq!(report.dir_ops_undone, 1);
    assert_eq!(fs::read(env.p("a")).unwrap(), b"A");
    assert_eq!(fs::read(env.p("b")).unwrap(), b"B");
}

#[test]
fn a_synced_rename_stays_and_its_victim_is_purged() {
    let Some(mut env) = Env::new(strict()) else { return };
    durable_file(&env, "a", b"A");
    durable_file(&env, "b", b"B");
    fs::rename(env.p("a"), env.p("b")).unwrap();
    assert_eq!(fs::read_dir(env.backing.path().join(".lazyfs-trash")).unwrap().count(), 1);
    sync_dir(env.mount_path()).unwrap();
    assert_eq!(fs::read_dir(env.backing.path().join(".lazyfs-trash")).unwrap().count(), 0);
    env.cut();
    assert!(!env.p("a").exists());
    assert_eq!(fs::read(env.p("b")).unwrap(), b"A");
}

#[test]
fn a_rename_across_directories_needs_both_fsynced() {
    let Some(mut env) = Env::new(strict()) else { return };
    for d in ["d1", "d2"] {
        fs::create_dir(env.p(d)).unwrap();
    }
    sync_dir(env.mount_path()).unwrap();
    durable_file(&env, "d1/x", b"x");
    fs::rename(env.p("d1/x"), env.p("d2/x")).unwrap();
    sync_dir(&env.p("d2")).unwrap();
    env.cut();
    assert_eq!(fs::read(env.p("d1/x")).unwrap(), b"x");
    assert!(!env.p("d2/x").exists());

    fs::rename(env.p("d1/x"), env.p("d2/x")).unwrap();
    sync_dir(&env.p("d2")).unwrap();
    sync_dir(&env.p("d1")).unwrap();
    env.cut();
    assert!(!env.p("d1/x").exists());
    assert_eq!(fs::read(env.p("d2/x")).unwrap(), b"x");
}

#[test]
fn an_unsynced_unlink_and_rmdir_are_undone() {
    let Some(mut env) = Env::new(strict()) else { return };
    fs::create_dir(env.p("d")).unwrap();
    sync_dir(env.mount_path()).unwrap();
    durable_file(&env, "d/f", b"still here");
    durable_file(&env, "g", b"me too");
    fs::remove_file(env.p("d/f")).unwrap();
    fs::remove_dir(env.p("d")).unwrap();
    fs::remove_file(env.p("g")).unwrap();
    assert!(!env.p("d").exists());
    assert_eq!(fs::read_dir(env.mount_path()).unwrap().count(), 0);
    let report = env.cut();
    assert_eq!(report.dir_ops_undone, 3);
    assert_eq!(fs::read(env.p("d/f")).unwrap(), b"still here");
    assert_eq!(fs::read(env.p("g")).unwrap(), b"me too");

    // A removal made durable stays.
    fs::remove_file(env.p("g")).unwrap();
    sync_dir(env.mount_path()).unwrap();
    env.cut();
    assert!(!env.p("g").exists());
}

#[test]
fn an_unlinked_file_still_open_keeps_working() {
    let Some(env) = Env::new(strict()) else { return };
    let mut f = OpenOptions::new().create_new(true).read(true).write(true).open(env.p("tmp")).unwrap();
    fs::remove_file(env.p("tmp")).unwrap();
    f.write_all(b"anonymous").unwrap();
    f.sync_all().unwrap();
    let mut back = String::new();
    File::open(format!("/proc/self/fd/{}", f.as_raw_fd())).unwrap().read_to_string(&mut back).unwrap();
    assert_eq!(back, "anonymous");
    assert_eq!(f.metadata().unwrap().len(), 9);
}

#[test]
fn readdir_lists_large_directories_and_hides_the_trash() {
    let Some(mut env) = Env::new(strict()) else { return };
    fs::create_dir(env.p("d")).unwrap();
    for i in 0..500 {
        fs::write(env.p(&format!("d/a-rather-long-file-name-to-fill-the-buffers-{i:04}")), b"").unwrap();
    }
    sync_dir(&env.p("d")).unwrap();
    fs::remove_file(env.p("d/a-rather-long-file-name-to-fill-the-buffers-0000")).unwrap();
    let list = |env: &Env| {
        let mut names: Vec<_> = fs::read_dir(env.p("d")).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        names
    };
    assert_eq!(list(&env).len(), 499);
    let root: Vec<_> = fs::read_dir(env.mount_path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(root, ["d"]);
    assert!(fs::metadata(env.p(".lazyfs-trash")).is_err());
    assert!(fs::create_dir(env.p(".lazyfs-trash")).is_err());
    // The root is not fsynced: "d" goes, and everything in it.
    env.cut();
    assert!(!env.p("d").exists());
}

#[test]
fn attributes_pass_through() {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let Some(env) = Env::new(strict()) else { return };
    let f = OpenOptions::new().create_new(true).write(true).mode(0o600).open(env.p("f")).unwrap();
    assert_eq!(f.metadata().unwrap().mode() & 0o7777, 0o600);
    let when = std::time::UNIX_EPOCH + std::time::Duration::new(1_600_000_000, 123_456_789);
    f.set_modified(when).unwrap();
    drop(f);
    fs::set_permissions(env.p("f"), fs::Permissions::from_mode(0o640)).unwrap();
    let md = fs::metadata(env.p("f")).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o640);
    assert_eq!(md.modified().unwrap(), when);
    assert_eq!(md.nlink(), 1);
    let backing = fs::metadata(env.backing.path().join("f")).unwrap();
    assert_eq!(backing.mode(), md.mode());
    assert_eq!(backing.modified().unwrap(), when);
    fs::DirBuilder::new().mode(0o750).create(env.p("d")).unwrap();
    assert_eq!(fs::metadata(env.p("d")).unwrap().mode() & 0o7777, 0o750);
    std::os::unix::fs::symlink("f", env.p("l")).unwrap();
    assert_eq!(fs::read_link(env.p("l")).unwrap(), std::path::Path::new("f"));
    assert!(fs::hard_link(env.p("f"), env.p("h")).is_err(), "hard links are not supported");
    assert_eq!(fs::metadata(env.p("l")).unwrap().ino(), fs::metadata(env.p("f")).unwrap().ino());
}

#[test]
fn lax_directories_make_entries_durable_at_once() {
    let Some(mut env) = Env::new(Options { strict_dirs: false }) else { return };
    durable_file(&env, "a", b"A");
    let mut f = File::create(env.p("new")).unwrap();
    f.write_all(b"unsynced").unwrap();
    drop(f);
    fs::rename(env.p("a"), env.p("b")).unwrap();
    fs::create_dir(env.p("d")).unwrap();
    let report = env.cut();
    assert_eq!(report.dir_ops_undone, 0);
    assert_eq!(fs::read(env.p("new")).unwrap(), b"", "the entry stays, its data does not");
    assert_eq!(fs::read(env.p("b")).unwrap(), b"A");
    assert!(env.p("d").is_dir());
    fs::remove_file(env.p("b")).unwrap();
    env.cut();
    assert!(!env.p("b").exists());
}

#[test]
fn files_from_before_the_mount_count_as_synced() {
    let old = pattern(7, 70_000);
    let Some(mut env) = Env::with_backing(strict(), |b| {
        fs::create_dir(b.join("dir")).unwrap();
        fs::write(b.join("dir/old"), &old).unwrap();
        fs::write(b.join("untouched"), b"as it was").unwrap();
    }) else {
        return;
    };
    assert_eq!(fs::read(env.p("dir/old")).unwrap(), old);
    {
        let f = OpenOptions::new().write(true).open(env.p("dir/old")).unwrap();
        f.write_all_at(&pattern(8, 1000), 100).unwrap();
        f.set_len(500).unwrap();
    }
    fs::write(env.p("dir/new"), b"new").unwrap();
    let report = env.cut();
    assert!(report.problems.is_empty());
    assert_eq!(fs::read(env.p("dir/old")).unwrap(), old);
    assert_eq!(fs::read(env.p("untouched")).unwrap(), b"as it was");
    assert!(!env.p("dir/new").exists());
    let names: Vec<_> = fs::read_dir(env.p("dir")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["old"]);
}

#[test]
fn two_cuts_in_a_row_and_a_clean_unmount() {
    let Some(mut env) = Env::new(strict()) else { return };
    durable_file(&env, "f", b"one");
    env.cut();
    let report = env.cut();
    assert_eq!(report, Default::default());
    assert_eq!(fs::read(env.p("f")).unwrap(), b"one");

    let mut f = OpenOptions::new().append(true).open(env.p("f")).unwrap();
    f.write_all(b" two").unwrap();
    f.sync_data().unwrap();
    f.write_all(b" three").unwrap();
    drop(f);
    env.cut();
    assert_eq!(fs::read(env.p("f")).unwrap(), b"one two");

    // A clean unmount syncs everything.
    fs::write(env.p("g"), b"written before a clean shutdown").unwrap();
    fs::OpenOptions::new().append(true).open(env.p("f")).unwrap().write_all(b" four").unwrap();
    env.remount();
    assert_eq!(env.fs.stats().unsynced_files, 0);
    env.cut();
    assert_eq!(fs::read(env.p("f")).unwrap(), b"one two four");
    assert_eq!(fs::read(env.p("g")).unwrap(), b"written before a clean shutdown");
    assert_eq!(env.fs.stats().cuts, 4);
}

#[test]
fn many_small_writes_keep_exactly_the_synced_prefix() {
    let Some(mut env) = Env::new(strict()) else { return };
    let start = Instant::now();
    let record = |i: usize| pattern(i as u8, 100);
    let mut f = File::create(env.p("log")).unwrap();
    sync_dir(env.mount_path()).unwrap();
    for i in 0..10_000 {
        f.write_all(&record(i)).unwrap();
        if i % 100 == 99 {
            f.sync_data().unwrap();
        }
    }
    for i in 10_000..10_050 {
        f.write_all(&record(i)).unwrap();
    }
    drop(f);
    let elapsed = start.elapsed();
    eprintln!("10,050 writes of 100 bytes and 100 fdatasyncs: {elapsed:?}");
    assert!(elapsed.as_secs() < 60, "too slow: {elapsed:?}");
    let stats = env.fs.stats();
    assert!(stats.writes >= 10_050, "{stats:?}");
    assert_eq!(stats.fdatasyncs, 100);
    env.cut();
    let data = fs::read(env.p("log")).unwrap();
    assert_eq!(data.len(), 1_000_000);
    for (i, chunk) in data.chunks(100).enumerate() {
        assert_eq!(chunk, record(i), "record {i}");
    }
}

#[test]
fn concurrent_writers_keep_their_synced_prefixes() {
    let Some(mut env) = Env::new(strict()) else { return };
    let synced: Vec<usize> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let path = env.p(&format!("w{t}"));
                s.spawn(move || {
                    let mut f = File::create(&path).unwrap();
                    let mut synced = 0;
                    for i in 0..1000 + t * 37 {
                        f.write_all(&pattern((i + t) as u8, 100)).unwrap();
                        if i % 50 == 49 {
                            f.sync_data().unwrap();
                            synced = i + 1;
                        }
                    }
                    synced
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    sync_dir(env.mount_path()).unwrap();
    env.cut();
    for (t, n) in synced.into_iter().enumerate() {
        let data = fs::read(env.p(&format!("w{t}"))).unwrap();
        assert_eq!(data.len(), n * 100, "writer {t}");
        for (i, chunk) in data.chunks(100).enumerate() {
            assert_eq!(chunk, pattern((i + t) as u8, 100), "writer {t} record {i}");
        }
    }
}

#[test]
fn o_dsync_writes_are_synced_by_the_kernel() {
    let Some(mut env) = Env::new(strict()) else { return };
    durable_file(&env, "f", b"");
    let mut f = OpenOptions::new().append(true).custom_flags(libc::O_DSYNC).open(env.p("f")).unwrap();
    f.write_all(b"dsync").unwrap();
    drop(f);
    assert_eq!(env.fs.stats().unsynced_files, 0);
    env.cut();
    assert_eq!(fs::read(env.p("f")).unwrap(), b"dsync");
}

#[test]
fn fallocate_extension_is_undone() {
    let Some(mut env) = Env::new(strict()) else { return };
    durable_file(&env, "f", b"0123456789");
    {
        let f = OpenOptions::new().write(true).open(env.p("f")).unwrap();
        // SAFETY: a valid descriptor.
        let ret = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, 1 << 20) };
        assert_eq!(ret, 0, "{}", io::Error::last_os_error());
        assert_eq!(f.metadata().unwrap().len(), 1 << 20);
    }
    env.cut();
    assert_eq!(fs::read(env.p("f")).unwrap(), b"0123456789");
}

#[test]
fn flock_excludes_other_descriptors_and_statfs_is_the_backing_one() {
    let Some(env) = Env::new(strict()) else { return };
    durable_file(&env, "lock", b"");
    let a = File::open(env.p("lock")).unwrap();
    let b = File::open(env.p("lock")).unwrap();
    // SAFETY: valid descriptors.
    unsafe {
        assert_eq!(libc::flock(a.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB), 0);
        assert_eq!(libc::flock(b.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB), -1);
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EWOULDBLOCK));
        assert_eq!(libc::flock(a.as_raw_fd(), libc::LOCK_UN), 0);
        assert_eq!(libc::flock(b.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB), 0);
    }
    let statvfs = |p: &std::path::Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string and out pointer.
        unsafe {
            let mut st: libc::statvfs = std::mem::zeroed();
            assert_eq!(libc::statvfs(c.as_ptr(), &mut st), 0);
            st
        }
    };
    let (ours, theirs) = (statvfs(env.mount_path()), statvfs(env.backing.path()));
    assert_eq!(ours.f_blocks, theirs.f_blocks);
    assert_eq!(ours.f_frsize, theirs.f_frsize);
    assert!(ours.f_bavail > 0);
}

#[test]
fn dropping_the_mount_unmounts_cleanly() {
    let Some(mut env) = Env::new(strict()) else { return };
    fs::write(env.p("f"), b"unsynced").unwrap();
    let mounted = env.take();
    let path = mounted.path().to_path_buf();
    drop(mounted);
    assert!(!is_mount_point(&path));
    assert!(!env.fs.is_mounted());
    env.put(env.fs.mount(&path).unwrap());
    env.cut();
    assert_eq!(fs::read(env.p("f")).unwrap(), b"unsynced", "a clean unmount syncs");
}

#[test]
fn a_cut_with_a_file_still_open_detaches_and_fences_the_mount() {
    let Some(mut env) = Env::new(strict()) else { return };
    durable_file(&env, "f", b"synced");
    let mut f = OpenOptions::new().read(true).append(true).open(env.p("f")).unwrap();
    f.write_all(b" lost").unwrap();
    let report = env.cut();
    assert_eq!(report.files_reverted, 1);
    assert_eq!(fs::read(env.p("f")).unwrap(), b"synced");
    // The process that survived the cut sees a dead disk.
    let err = f.write_all(b" after").unwrap_err();
    assert!(err.raw_os_error() == Some(libc::EIO) || err.raw_os_error() == Some(libc::ENOTCONN), "{err}");
    drop(f);
    assert_eq!(fs::read(env.p("f")).unwrap(), b"synced");
}

/// Records of the writer child: `[len u32][seq u64][payload][fnv64 of seq and payload]`.
fn encode(seq: u64) -> Vec<u8> {
    let payload = pattern(seq as u8, 20 + (seq % 50) as usize);
    let mut body = seq.to_le_bytes().to_vec();
    body.extend_from_slice(&payload);
    let mut rec = (body.len() as u32).to_le_bytes().to_vec();
    rec.extend_from_slice(&body);
    rec.extend_from_slice(&fnv(&body).to_le_bytes());
    rec
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Decodes the records of `data`; panics on a torn or corrupt one.
fn decode(data: &[u8]) -> u64 {
    let mut at = 0;
    let mut seq = 0;
    while at < data.len() {
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        let body = &data[at + 4..at + 4 + len];
        let sum = u64::from_le_bytes(data[at + 4 + len..at + 12 + len].try_into().unwrap());
        assert_eq!(fnv(body), sum, "record {seq} is corrupt");
        assert_eq!(u64::from_le_bytes(body[..8].try_into().unwrap()), seq, "record {seq} out of order");
        at += 12 + len;
        seq += 1;
    }
    seq
}

/// The writer child of `acknowledged_records_survive_a_kill_and_a_cut` (does nothing as a test of
/// its own): appends records with an fdatasync each, and prints `ack N` once record N is synced.
#[test]
fn record_writer_child() {
    let Ok(path) = std::env::var("LAZYFS_WRITER_FILE") else { return };
    let start: u64 = std::env::var("LAZYFS_WRITER_START").unwrap().parse().unwrap();
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    let mut out = io::stdout().lock();
    for seq in start.. {
        f.write_all(&encode(seq)).unwrap();
        f.sync_data().unwrap();
        writeln!(out, "ack {seq}").unwrap();
        out.flush().unwrap();
        // Unsynced writes in between, to be taken back.
        if seq % 3 == 0 {
            f.write_all(&encode(seq + 1)).unwrap();
            f.set_len(f.metadata().unwrap().len() - encode(seq + 1).len() as u64).unwrap();
        }
    }
}

#[test]
fn acknowledged_records_survive_a_kill_and_a_cut() {
    let Some(mut env) = Env::new(strict()) else { return };
    durable_file(&env, "records", b"");
    for round in 0..3 {
        let before = decode(&fs::read(env.p("records")).unwrap());
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "record_writer_child", "--nocapture"])
            .env("LAZYFS_WRITER_FILE", env.p("records"))
            .env("LAZYFS_WRITER_START", before.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The last record acknowledged: wait for 200, kill, then read what came after.
        let mut last = None;
        let next_ack = |lines: &mut std::io::Lines<_>| -> Option<u64> {
            loop {
                let line: String = lines.next()?.ok()?;
                if let Some(n) = line.strip_prefix("ack ") {
                    return Some(n.parse().unwrap());
                }
            }
        };
        while last.is_none_or(|a| a < before + 200) {
            last = Some(next_ack(&mut lines).expect("the writer ended"));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        while let Some(a) = next_ack(&mut lines) {
            last = Some(a);
        }
        let report = env.cut();
        let records = decode(&fs::read(env.p("records")).unwrap());
        let acked = last.unwrap() + 1;
        eprintln!("round {round}: {acked} records acknowledged, {records} after the cut; {report}");
        assert!(records >= acked, "acknowledged records lost: {records} < {acked}");
        assert!(records <= acked + 1, "more than the one record synced but not yet acknowledged");
    }
}
