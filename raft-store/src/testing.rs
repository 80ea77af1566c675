//! Helpers the unit tests share: for the pure [`crate::apply::apply`], commands at a fixed time
//! or a given one and a terse apply; for the state machine's, a runtime, a store opened (again)
//! and a state of many tags.
use crate::apply::{apply, Applied, ApplyResult, Changes};
use crate::command::{Command, Op};
use crate::state::State;
use crate::workers::WorkerGrant;

/// Applies without looking at the changes.
pub(crate) fn ap(s: &mut State, c: &Command) -> ApplyResult {
    apply(s, c, &mut Changes::default())
}

/// `op` at a fixed time.
pub(crate) fn cmd(op: Op) -> Command {
    Command { at_ms: 1_700_000_000_000, op }
}

/// `op` at leader time `at_ms`.
pub(crate) fn at(at_ms: i64, op: Op) -> Command {
    Command { at_ms, op }
}

/// Creates segment tag `tag`.
pub(crate) fn create(tag: &str, step: i64, max_id: i64) -> Command {
    cmd(Op::create_segment_tag(tag.into(), step, max_id, "d".into()))
}

/// Creates gapless series `tag` of `policy` at leader time `at_ms`.
pub(crate) fn create_series(tag: &str, policy: leaf_api::gapless::SeriesPolicy, at_ms: i64) -> Command {
    let profile = crate::profile::StoredProfile::Gapless { policy, period: 0, pruned_through: None };
    let t = crate::tags::NewTag {
        tag: tag.into(),
        step: 1,
        start_max_id: 1,
        description: String::new(),
        profile,
        upper_bound: None,
    };
    at(at_ms, Op::CreateTag { tag: t, cap: crate::TagCap::Full })
}

/// Allocates `step` IDs of `tag` for node 1.
pub(crate) fn alloc(tag: &str, step: i64) -> Command {
    cmd(Op::AllocateSegment { tag: tag.into(), step, node_id: 1 })
}

/// The worker grant of `r`; panics on anything else.
pub(crate) fn grant(r: ApplyResult) -> WorkerGrant {
    match r {
        Ok(Applied::Worker(g)) => g,
        other => panic!("expected a worker grant, got {other:?}"),
    }
}

/// Registers `node_id` for a worker ID at `at_ms` on a 10 s lease.
pub(crate) fn register(s: &mut State, at_ms: i64, node_id: u64) -> ApplyResult {
    ap(s, &at(at_ms, Op::RegisterWorker { node_id, lease_ms: 10_000, within: None }))
}

/// A runtime for the store's async tests.
pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Opens the store in `dir`, again if it was open: sled releases a dropped database's file
/// lock from a background thread, so a reopen may find it still held for a moment (seen in CI:
/// "could not acquire lock ... WouldBlock"); waits up to 10 s, as the node does.
pub(crate) fn open_store(dir: &std::path::Path) -> crate::StateMachineStore {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match crate::open(dir, &crate::StoreOptions::default()) {
            Err(e) if e.to_string().contains("could not acquire lock") && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.expect("open store").1,
        }
    }
}

/// A state of `tags` tags `tag-0000000` …, each with a description of `description` bytes,
/// applied up to log index `index`.
pub(crate) fn tags_state(tags: usize, description: usize, index: u64) -> crate::state_machine::SmData {
    use crate::profile::StoredProfile;
    use crate::tags::TagRecord;
    let applied = crate::types::LogId::new(openraft::CommittedLeaderId::new(2, 1), index);
    let mut data = crate::state_machine::SmData { last_applied: Some(applied), ..Default::default() };
    let description = "d".repeat(description);
    for i in 0..tags {
        let record = TagRecord { max_id: i as i64, step: 1000, created_ms: 1, updated_ms: 2, ..TagRecord::default() }
            .with_description(description.clone())
            .with_profile(StoredProfile::Obfuscated { key: [7; crate::OBFUSCATION_KEY_BYTES] })
            .with_upper_bound(Some(i64::MAX - 1));
        data.state.tags.insert(format!("tag-{i:07}"), record);
    }
    data
}

/// A [`crate::Disk`] on a new sled database in a temporary directory.
pub(crate) fn disk() -> (tempfile::TempDir, crate::Disk) {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::Config::new().path(dir.path()).open().unwrap();
    let files = crate::durable::Synced::open(db, dir.path()).unwrap();
    let disk = crate::Disk::new(files, dir.path(), &crate::StoreOptions::default());
    (dir, disk)
}
