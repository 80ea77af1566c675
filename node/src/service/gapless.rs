//! Gapless series: a number of a series for the caller's idempotency key, committed through
//! Raft before it is answered (`leaf_raft_store::gapless` holds the rules). The ID routes'
//! credentials apply (a scoped token needs the `ids` right on the tag); the caller is recorded
//! in the ledger with the number.
use leaf_api::audit::Actor;
use leaf_api::gapless::{
    hash_hex, validate_key, IssuedNumber, LedgerCursor, LedgerEntry, LedgerPage, LedgerQuery, NumberState,
    SeriesPolicy, MAX_LEDGER_PAGE,
};
use leaf_api::tokens::Right;
use leaf_api::ErrorCode;
use leaf_raft_store::{NumberAsk, StoredProfile, TagRecord};

use super::{ApiError, App};
use crate::access::{IdRequester, Principal};
use crate::metrics::gapless::IssueOutcome;

impl App {
    /// The number of gapless series `tag` (validated) for `key`: the next one, or the one the
    /// key has (`replayed`). A retry with the same key, after a timeout or a leader change,
    /// never consumes a second number.
    pub async fn gapless_issue(&self, tag: &str, key: &str, who: IdRequester) -> Result<IssuedNumber, ApiError> {
        let started = std::time::Instant::now();
        let answer = self.issue_number(tag, key, who).await;
        let outcome = match &answer {
            Ok(n) if n.replayed => IssueOutcome::Replayed,
            Ok(_) => IssueOutcome::Issued,
            Err(_) => IssueOutcome::Refused,
        };
        self.metrics.gapless().observe(outcome, started.elapsed());
        answer
    }

    async fn issue_number(&self, tag: &str, key: &str, who: IdRequester) -> Result<IssuedNumber, ApiError> {
        validate_key(key).map_err(|e| ApiError::invalid(e.to_string()))?;
        let record = self.known(tag, |app| app.raft.state().tag(tag).filter(|r| r.archived_ms().is_none())).await?;
        let policy = policy_of(tag, &record)?;
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

    /// A page of gapless series `tag`'s ledger (the `tags` right on the tag), as of a read
    /// barrier: every number committed before the request is on it (or on a later page).
    pub async fn gapless_ledger(&self, tag: &str, q: LedgerQuery, who: &Principal) -> Result<LedgerPage, ApiError> {
        who.require_on(Right::Tags, tag)?;
        let limit = q.limit.unwrap_or(MAX_LEDGER_PAGE);
        if !(1..=MAX_LEDGER_PAGE).contains(&limit) {
            return Err(ApiError::invalid(format!("limit must be from 1 to {MAX_LEDGER_PAGE}, got {limit}")));
        }
        let after = match (q.after_period, q.after_number) {
            (None, None) => None,
            (p, n) => Some((p.unwrap_or(0), n.unwrap_or(u64::MAX))),
        };
        // Any node answers, as of everything committed before the request.
        let record = self.known(tag, |app| app.raft.state().tag(tag)).await?;
        self.raft.read_barrier().await?;
        let policy = policy_of(tag, &record)?;
        let slice = self.raft.state().ledger_page(tag, q.period, after, limit as usize);
        let page = slice.numbers;
        let next = (page.len() == limit as usize)
            .then(|| page.last().map(|((p, n), _)| LedgerCursor { after_period: *p, after_number: *n }))
            .flatten();
        let entries = page
            .into_iter()
            .map(|((period, number), r)| LedgerEntry {
                period,
                number,
                display: policy.display(period, number),
                key: r.key.to_string(),
                state: r.state,
                actor: r.actor,
                at_ms: r.at_ms,
                hash: hash_hex(&r.hash),
            })
            .collect();
        Ok(LedgerPage { tag: tag.to_string(), numbers: slice.count as u64, head: hash_hex(&slice.head), entries, next })
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

/// A gapless tag's policy, or 400 for a tag of another profile.
fn policy_of(tag: &str, record: &TagRecord) -> Result<SeriesPolicy, ApiError> {
    match record.profile() {
        StoredProfile::Gapless { policy, .. } => Ok(policy.clone()),
        other => Err(ApiError::new(
            ErrorCode::WrongProfile,
            format!("tag {tag:?} is a {} tag: only a gapless tag issues numbers", other.kind().as_str()),
        )),
    }
}
