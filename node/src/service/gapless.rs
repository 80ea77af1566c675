//! Gapless series: a number of a series for the caller's idempotency key, committed through
//! Raft before it is answered (`leaf_raft_store::gapless` holds the rules). The ID routes'
//! credentials apply (a scoped token needs the `ids` right on the tag); the caller is recorded
//! in the ledger with the number.
use leaf_api::audit::Actor;
use leaf_api::gapless::{validate_key, IssuedNumber, NumberState};
use leaf_raft_store::{NumberAsk, StoredProfile};

use super::{ApiError, App};
use crate::access::IdRequester;

impl App {
    /// The number of gapless series `tag` (validated) for `key`: the next one, or the one the
    /// key has (`replayed`). A retry with the same key, after a timeout or a leader change,
    /// never consumes a second number.
    pub async fn gapless_issue(&self, tag: &str, key: &str, who: IdRequester) -> Result<IssuedNumber, ApiError> {
        validate_key(key).map_err(|e| ApiError::invalid(e.to_string()))?;
        let record = self.known(tag, |app| app.raft.state().tag(tag).filter(|r| r.archived_ms().is_none())).await?;
        let StoredProfile::Gapless { policy, .. } = record.profile() else {
            return Err(ApiError::invalid(format!(
                "tag {tag:?} is a {} tag: only a gapless tag issues numbers",
                record.profile().kind().as_str()
            )));
        };
        let ask = NumberAsk { tag: tag.to_string(), key: key.to_string(), actor: self.id_actor(who) };
        let issued = self.raft.issue_number(ask).await?;
        Ok(IssuedNumber {
            tag: tag.to_string(),
            period: issued.period,
            number: issued.number,
            display: policy.display(issued.period, issued.number),
            key: key.to_string(),
            state: NumberState::Issued,
            issued_ms: issued.at_ms,
            replayed: issued.replayed,
        })
    }

    /// Who an ID request stands for, as the ledger records it (an anonymous caller as
    /// `unattributed`).
    fn id_actor(&self, who: IdRequester) -> Actor {
        match who {
            IdRequester::Anonymous => Actor::Unattributed,
            IdRequester::Admin => Actor::AdminToken,
            IdRequester::Token(id) => {
                let name = self.raft.state().tokens().get(&id.0).map(|t| t.name.clone()).unwrap_or_default();
                Actor::Token { id, name }
            }
        }
    }
}
