//! Gapless series: a number of a series for the caller's idempotency key, issued or reserved
//! and committed through Raft before it is answered, and a reservation's confirm or void
//! (`leaf_raft_store::gapless` holds the rules). The ID routes' credentials apply (a scoped
//! token needs the `ids` right on the tag); the caller is recorded in the ledger with the
//! number and with a settlement, and a number is its caller's: only it repeats, confirms or
//! voids it (a root caller may settle it). A caller without a token, where
//! `auth.anonymous_gapless` lets it in, is known by a settlement secret: its own, or one made
//! here and answered once; the log holds only its hash. Each caller's issues of a series are
//! held to the series' rate on this node. The leader's voids of expired reservations are in
//! the reservation task ([`super::reservations`]).
use leaf_api::audit::Actor;
use leaf_api::gapless::{
    hash_hex, validate_hold, validate_key, validate_reason, validate_secret, IssuedNumber, LedgerCursor, LedgerEntry,
    LedgerPage, LedgerQuery, NumberState, SeriesPolicy, Settlement, VoidCause, DEFAULT_HOLD_SECONDS, MAX_LEDGER_PAGE,
    MAX_PERIOD,
};
use leaf_api::tokens::Right;
use leaf_api::ErrorCode;
use leaf_raft_store::gapless::ledger::Outcome;
use leaf_raft_store::{Issued, NumberAct, NumberAsk, NumberRecord, OwnedAsk, Proof, StoredProfile, TagRecord};

use super::{ApiError, App};
use crate::access::{IdRequester, Principal};
use crate::metrics::gapless::{IssueOutcome, Settlement as Settled};

/// Who asks, as the ID credentials proved it, and from where.
#[derive(Debug, Clone, Copy)]
pub struct NumberCaller {
    pub who: IdRequester,
    pub addr: std::net::IpAddr,
}

/// What a caller asks of a gapless series for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NumberRequest {
    /// The next number, final at once.
    Issue,
    /// The next number, held for `hold_seconds` (900 when `None`).
    Reserve { hold_seconds: Option<u64> },
    /// The key's reservation made final.
    Confirm,
    /// The key's reservation voided for `reason`.
    Void { reason: String },
}

impl App {
    /// The number of gapless series `tag` (validated) for `key`, after `req`: an issue or a
    /// reservation answers the next number or the one the key has (`replayed`), so a retry
    /// with the same key, after a timeout or a leader change, never consumes a second number;
    /// a confirm or a void settles the key's reservation once (a repeat answers `replayed`).
    pub async fn gapless_number(
        &self,
        tag: &str,
        key: &str,
        (req, secret): (NumberRequest, Option<String>),
        caller: NumberCaller,
    ) -> Result<IssuedNumber, ApiError> {
        let started = std::time::Instant::now();
        let issues = matches!(req, NumberRequest::Issue | NumberRequest::Reserve { .. });
        let answer = self.number(tag, key, (req, secret), caller).await;
        let m = self.metrics.gapless();
        match &answer {
            Ok(n) if issues => {
                m.observe(if n.replayed { IssueOutcome::Replayed } else { IssueOutcome::Issued }, started.elapsed())
            }
            Err(_) if issues => m.observe(IssueOutcome::Refused, started.elapsed()),
            Ok(n) if !n.replayed && n.state == NumberState::Confirmed => m.settled(Settled::Confirmed),
            Ok(n) if !n.replayed && n.state == NumberState::Voided => m.settled(Settled::Voided),
            _ => {}
        }
        answer
    }

    async fn number(
        &self,
        tag: &str,
        key: &str,
        (req, secret): (NumberRequest, Option<String>),
        NumberCaller { who, addr }: NumberCaller,
    ) -> Result<IssuedNumber, ApiError> {
        validate_key(key).map_err(|e| ApiError::invalid(e.to_string()))?;
        let act = match req {
            NumberRequest::Issue => NumberAct::Issue,
            NumberRequest::Reserve { hold_seconds } => {
                let hold = hold_seconds.unwrap_or(DEFAULT_HOLD_SECONDS);
                validate_hold(hold).map_err(|e| ApiError::invalid(e.to_string()))?;
                NumberAct::Reserve { hold_ms: hold * 1000 }
            }
            NumberRequest::Confirm => NumberAct::Confirm,
            NumberRequest::Void { reason } => {
                validate_reason(&reason).map_err(|e| ApiError::invalid(e.to_string()))?;
                NumberAct::Void { reason }
            }
        };
        let issues = matches!(act, NumberAct::Issue | NumberAct::Reserve { .. });
        // A sent secret has its documented shape, whoever sends it.
        if let Some(s) = &secret {
            validate_secret(s).map_err(|e| ApiError::invalid(e.to_string()))?;
        }
        // A caller without a token is known by its secret; a token's or the admin token's
        // caller by its credential (a well-formed secret it sends is ignored).
        let secret = match who {
            IdRequester::Anonymous => {
                self.access.check_anonymous_gapless()?;
                match secret {
                    Some(s) => Some(s),
                    None if issues => Some(new_settlement_secret()?),
                    None => {
                        return Err(ApiError::new(
                            ErrorCode::Unauthorized,
                            "a caller without a token confirms or voids a number with its settlement secret \
                             (the 'secret' its issue or reservation answered)",
                        ))
                    }
                }
            }
            IdRequester::Admin | IdRequester::Token(_) => None,
        };
        let record = self.known(tag, |app| app.raft.state().tag(tag).filter(|r| r.archived_ms().is_none())).await?;
        let policy = policy_of(tag, &record)?;
        if issues {
            let limits = self.raft.state().series_limits(tag);
            self.access.charge_series(tag, who, addr, limits.issues_per_sec)?;
        }
        let ask = NumberAsk { tag: tag.to_string(), key: key.to_string(), actor: self.id_actor(who), act };
        let proof = secret.as_deref().map(proof_of);
        let issued = self.numbers.issue(&self.raft, OwnedAsk { ask, proof }).await?;
        Ok(IssuedNumber { secret, ..answer(tag, key, &policy, issued) })
    }

    /// A page of gapless series `tag`'s ledger (the `tags` right on the tag), as of a read
    /// barrier: every number committed before the request is on it (or on a later page).
    pub async fn gapless_ledger(&self, tag: &str, q: LedgerQuery, who: &Principal) -> Result<LedgerPage, ApiError> {
        who.require_on(Right::Tags, tag)?;
        let limit = q.limit.unwrap_or(MAX_LEDGER_PAGE);
        if !(1..=MAX_LEDGER_PAGE).contains(&limit) {
            return Err(ApiError::invalid(format!("limit must be from 1 to {MAX_LEDGER_PAGE}, got {limit}")));
        }
        for (what, p) in [("period", q.period), ("after_period", q.after_period)] {
            if p.is_some_and(|p| p > MAX_PERIOD) {
                return Err(ApiError::invalid(format!("{what} is 0, yyyy, yyyyMM or yyyyMMdd (at most {MAX_PERIOD})")));
            }
        }
        if q.after_number.is_some_and(|n| n > i64::MAX as u64) {
            return Err(ApiError::invalid(format!("after_number is at most {}", i64::MAX)));
        }
        let after = match (q.after_period, q.after_number) {
            (None, None) => None,
            (p, n) => Some((p.unwrap_or(0), n.unwrap_or(u64::MAX))),
        };
        // Any node answers, as of everything committed before the request.
        let record = self.known(tag, |app| app.raft.state().tag(tag)).await?;
        self.raft.read_barrier().await?;
        let policy = policy_of(tag, &record)?;
        // The record as of the barrier: retention may have moved on.
        let pruned_through = match self.raft.state().tag(tag).map(|r| r.profile().clone()) {
            Some(StoredProfile::Gapless { pruned_through, .. }) => pruned_through,
            _ => None,
        };
        let slice = self.raft.state().ledger_page(tag, q.period, q.state, after, limit as usize);
        let page = slice.numbers;
        let next = (page.len() == limit as usize)
            .then(|| page.last().map(|((p, n), _)| LedgerCursor { after_period: *p, after_number: *n }))
            .flatten();
        let entries = page.into_iter().map(|(at, r)| entry(&policy, at, r)).collect();
        Ok(LedgerPage {
            tag: tag.to_string(),
            numbers: slice.count as u64,
            open_reservations: slice.open,
            pruned_through,
            head: hash_hex(&slice.head),
            entries,
            next,
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

/// A new settlement secret: 32 bytes from the OS's random source, as 64 hex digits.
fn new_settlement_secret() -> Result<String, ApiError> {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.try_fill_bytes(&mut bytes).map_err(|e| {
        tracing::error!(error = %e, "the OS random source failed");
        ApiError::new(ErrorCode::Unavailable, "the node's random source failed; try again")
    })?;
    Ok(hash_hex(&bytes))
}

/// What the log keeps of a settlement secret: its SHA-256.
fn proof_of(secret: &str) -> Proof {
    let d = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The answer to an ask of `key` in `tag`.
fn answer(tag: &str, key: &str, policy: &SeriesPolicy, i: Issued) -> IssuedNumber {
    IssuedNumber {
        tag: tag.to_string(),
        period: i.period,
        number: i.number,
        display: policy.display(i.period, i.number),
        key: key.to_string(),
        state: i.state,
        issued_ms: i.at_ms,
        deadline_ms: i.deadline_ms,
        reason: i.void.map(|(_, why)| why),
        replayed: i.replayed,
        secret: None,
    }
}

/// A ledger entry as the API answers it.
fn entry(policy: &SeriesPolicy, (period, number): (u32, u64), r: NumberRecord) -> LedgerEntry {
    let state = r.state();
    let settled = r.settled.map(|s| {
        let (state, cause, reason) = match s.outcome {
            Outcome::Confirmed => (NumberState::Confirmed, None, None),
            Outcome::Voided { cause, reason } => (NumberState::Voided, Some(cause), Some(reason.to_string())),
        };
        Settlement { state, cause, reason, actor: s.actor, at_ms: s.at_ms, seq: s.seq, hash: hash_hex(&s.hash) }
    });
    LedgerEntry {
        period,
        number,
        display: policy.display(period, number),
        key: r.key.to_string(),
        state,
        actor: r.actor,
        at_ms: r.at_ms,
        deadline_ms: r.deadline_ms,
        seq: r.seq,
        hash: hash_hex(&r.hash),
        settled,
    }
}

/// The metric of a void by `cause`.
pub(crate) fn void_metric(cause: VoidCause) -> Settled {
    match cause {
        VoidCause::Caller => Settled::Voided,
        VoidCause::Expired => Settled::Expired,
        VoidCause::PeriodClosed => Settled::PeriodClosed,
        // Only a restore voids a number as lost, never the reservation task.
        VoidCause::Lost => Settled::Voided,
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
