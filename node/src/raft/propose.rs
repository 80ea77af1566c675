//! What callers ask of the leader: proposals and the linearizable read barrier.
use leaf_raft_store::{Applied, Op};
use tokio::time::Instant;

use super::{Forward, Forwarded, ProposeError, RaftNode};

impl RaftNode {
    /// Commits `op` through the leader (this node or, forwarded, another) and returns its
    /// result and log index. The leader stamps its clock into the command. Retried across
    /// leader changes until `raft.propose_timeout_ms`.
    pub async fn propose(&self, op: Op) -> Result<(Applied, u64), ProposeError> {
        // A repeated allocation only wastes a range and a repeated update is idempotent; a
        // repeated create would turn a success into `tag_exists`, so it is not retried when
        // the first attempt may have been delivered.
        let retry_unknown = !matches!(op, Op::CreateTag { .. });
        match self.on_leader(Forward::Propose(op), retry_unknown).await? {
            Forwarded::Proposed { applied, log_index } => Ok((applied, log_index)),
            other => Err(ProposeError::Fatal(format!("unexpected answer {other:?}"))),
        }
    }

    /// Waits until this node has applied everything committed before the call (a
    /// linearizable read barrier through the leader's read index): a tag created on any node
    /// is visible here afterwards. Writes nothing to the log.
    pub async fn read_barrier(&self) -> Result<(), ProposeError> {
        let deadline = self.deadline();
        let me = self.clone();
        let round = move || {
            let me = me.clone();
            async move {
                match me.on_leader(Forward::ReadIndex, true).await? {
                    Forwarded::ReadIndex(i) => Ok(i),
                    other => Err(ProposeError::Fatal(format!("unexpected answer {other:?}"))),
                }
            }
        };
        let index = match tokio::time::timeout_at(deadline, self.barriers.read(round)).await {
            Ok(r) => r?,
            Err(_) => return Err(ProposeError::Timeout(self.propose_timeout)),
        };
        if self.state.last_applied().map(|l| l.index) >= index {
            return Ok(());
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        self.raft
            .wait(Some(wait))
            .applied_index_at_least(index, "read index")
            .await
            .map_err(|_| ProposeError::Timeout(self.propose_timeout))?;
        Ok(())
    }
}
