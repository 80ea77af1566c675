//! Helpers the unit tests of the pure [`crate::apply::apply`] share: commands at a fixed time
//! or a given one, and a terse apply.
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
    cmd(Op::CreateTag { tag: tag.into(), step, start_max_id: max_id, description: "d".into() })
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
    ap(s, &at(at_ms, Op::RegisterWorker { node_id, lease_ms: 10_000 }))
}
