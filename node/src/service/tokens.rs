//! Scoped tokens (create, list, show, rotate, revoke: the root credentials only) and the audit
//! trail (the `cluster` right).
//!
//! A token's secret is drawn here from the OS's random source, shown once in the answer, and
//! proposed only as its SHA-256: the Raft log, snapshots and backups never hold it.
use leaf_api::audit::{AuditFilter, AuditKind, AuditPage, DEFAULT_AUDIT_PAGE, MAX_AUDIT_PAGE};
use leaf_api::tokens::{
    format_bearer, rights_set, validate_max_tags, validate_name, validate_scope, CreateTokenRequest, IssuedToken,
    RotateTokenRequest, TokenError, TokenId, TokenInfo, MAX_GRACE_MS,
};
use leaf_api::ErrorCode;
use leaf_raft_store::{Applied, NewToken, Op, TokenLimits, TokenRecord};

use super::{validate, ApiError, App};
use crate::access::{hash_secret, new_secret, Principal};
use crate::raft::answer::{invalid, mismatch, wrong_kind, Answer, AnswerError};

fn bad(e: TokenError) -> ApiError {
    ApiError::invalid(e.to_string())
}

/// A token's ID as written in a path.
pub fn token_id(raw: &str) -> Result<TokenId, ApiError> {
    raw.parse().map_err(bad)
}

fn not_found(id: TokenId) -> ApiError {
    ApiError::new(ErrorCode::TokenNotFound, format!("no token with ID {id}"))
}

/// The audit trail's query, as given (every field optional, checked by [`App::audit`]).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    pub kind: Option<String>,
    pub tag: Option<String>,
    pub token: Option<String>,
    pub since_ms: Option<i64>,
    pub until_ms: Option<i64>,
    pub after_seq: Option<i64>,
    pub limit: Option<u32>,
}

impl App {
    /// Every token (their secrets are never shown again).
    pub fn list_tokens(&self) -> Vec<TokenInfo> {
        let tokens = self.raft.state().tokens();
        tokens.iter().map(|(id, r)| token_info(TokenId(*id), r.clone())).collect()
    }

    /// Creates a scoped token; the answer holds its bearer, the only time it is shown.
    pub async fn create_token(&self, body: CreateTokenRequest, who: &Principal) -> Result<IssuedToken, ApiError> {
        validate_name(&body.name).map_err(bad)?;
        let rights = rights_set(&body.rights).map_err(bad)?;
        validate_scope(&rights, &body.tags).map_err(bad)?;
        if let Some(q) = &body.quota {
            q.validate().map_err(bad)?;
        }
        if let Some(q) = &body.id_quota {
            q.validate().map_err(bad)?;
        }
        if let Some(m) = body.max_tags {
            validate_max_tags(m).map_err(bad)?;
        }
        let limits = TokenLimits { id_quota: body.id_quota, max_tags: body.max_tags };
        let (id, secret) = new_secret()?;
        let token = NewToken {
            id,
            name: body.name,
            rights,
            tags: body.tags,
            quota: body.quota,
            secret_hash: hash_secret(&secret),
        };
        let create = Op::CreateToken { token, limits: Some(limits) };
        let (id, record): (TokenId, TokenRecord) =
            self.raft.propose(super::tag_admin::admin(who.actor(), create)).await?;
        tracing::info!(token = %id, name = %record.name, "created a scoped token");
        Ok(IssuedToken { token: token_info(id, record), bearer: format_bearer(id, &secret) })
    }

    /// One token.
    pub fn show_token(&self, id: TokenId) -> Result<TokenInfo, ApiError> {
        let record = self.raft.state().tokens().get(&id.0).cloned().ok_or_else(|| not_found(id))?;
        Ok(token_info(id, record))
    }

    /// Revokes a token: every node refuses it once it has applied the revocation.
    pub async fn revoke_token(&self, id: TokenId, who: &Principal) -> Result<TokenInfo, ApiError> {
        let (id, record): (TokenId, TokenRecord) =
            self.raft.propose(super::tag_admin::admin(who.actor(), Op::RevokeToken { id })).await?;
        tracing::info!(token = %id, name = %record.name, "revoked a scoped token");
        Ok(token_info(id, record))
    }

    /// Gives a token a new secret; the old one keeps working for `grace_ms` (0: refused as soon
    /// as a node applied the rotation).
    pub async fn rotate_token(
        &self,
        id: TokenId,
        body: RotateTokenRequest,
        who: &Principal,
    ) -> Result<IssuedToken, ApiError> {
        let grace_ms = body.grace_ms.unwrap_or(0);
        if !(0..=MAX_GRACE_MS).contains(&grace_ms) {
            return Err(bad(TokenError::Grace(grace_ms)));
        }
        let (_, secret) = new_secret()?;
        let rotate = Op::RotateToken { id, secret_hash: hash_secret(&secret), grace_ms };
        let (id, record): (TokenId, TokenRecord) =
            self.raft.propose(super::tag_admin::admin(who.actor(), rotate)).await?;
        tracing::info!(token = %id, name = %record.name, grace_ms, "rotated a scoped token");
        Ok(IssuedToken { token: token_info(id, record), bearer: format_bearer(id, &secret) })
    }

    /// A page of the audit trail: admin changes (tags, tokens, membership) with who made them
    /// and the leader's time, oldest first, as this node has applied them.
    pub fn audit(&self, q: AuditQuery) -> Result<AuditPage, ApiError> {
        let kind = q.kind.as_deref().map(str::parse::<AuditKind>).transpose().map_err(ApiError::invalid)?;
        if let Some(t) = &q.tag {
            validate::tag(t)?;
        }
        let token = q.token.as_deref().map(str::parse::<TokenId>).transpose().map_err(bad)?;
        let limit = q.limit.unwrap_or(DEFAULT_AUDIT_PAGE);
        if !(1..=MAX_AUDIT_PAGE).contains(&limit) {
            return Err(ApiError::invalid(format!("limit must be from 1 to {MAX_AUDIT_PAGE}, got {limit}")));
        }
        let after_seq = u64::try_from(q.after_seq.unwrap_or(0)).map_err(|_| {
            ApiError::invalid(format!("after_seq must not be negative, got {}", q.after_seq.unwrap_or(0)))
        })?;
        let filter = AuditFilter { kind, tag: q.tag, token, since_ms: q.since_ms, until_ms: q.until_ms };
        Ok(self.raft.state().audit_page(&filter, after_seq, limit as usize))
    }
}

/// A token as the API shows it (never its secret or hash).
pub fn token_info(id: TokenId, r: TokenRecord) -> TokenInfo {
    TokenInfo {
        id,
        name: r.name,
        rights: r.rights.into_iter().collect(),
        tags: r.tags,
        quota: r.quota,
        id_quota: r.limits.id_quota,
        max_tags: r.limits.max_tags,
        tags_created: r.tags_created,
        created_ms: r.created_ms,
        created_by: r.created_by,
        rotated_ms: r.rotated_ms,
        previous_secret_until_ms: r.previous.map(|(_, until)| until),
    }
}

/// The leader's answer to a token change: about the token asked for, with the name and
/// secret asked for, its fields within their bounds.
impl Answer for (TokenId, TokenRecord) {
    const ASKED: &'static str = "a token change";

    fn check(op: &Op, applied: &Applied) -> Result<(), AnswerError> {
        match (op, applied) {
            (Op::CreateToken { token: t, .. }, Applied::Token { id, record }) => {
                check_token_answer(t.id, *id, record)?;
                if record.secret_hash != t.secret_hash || record.name != t.name {
                    return Err(invalid(format!("token {id} answered with another name or secret")));
                }
                Ok(())
            }
            (Op::RotateToken { id: asked, secret_hash, .. }, Applied::Token { id, record }) => {
                check_token_answer(*asked, *id, record)?;
                if record.secret_hash != *secret_hash {
                    return Err(invalid(format!("token {id} answered with another secret")));
                }
                Ok(())
            }
            (Op::RevokeToken { id: asked }, Applied::Token { id, record }) => check_token_answer(*asked, *id, record),
            (op, applied) => Err(mismatch(op, applied)),
        }
    }

    fn take(applied: Applied) -> Result<Self, AnswerError> {
        match applied {
            Applied::Token { id, record } => Ok((id, record)),
            other => Err(wrong_kind::<Self>(&other)),
        }
    }
}

/// A token answer is about the token asked for, and its fields are within their bounds.
fn check_token_answer(asked: TokenId, got: TokenId, record: &TokenRecord) -> Result<(), AnswerError> {
    if asked != got {
        return Err(invalid(format!("answer for token {got}, asked for {asked}")));
    }
    leaf_api::tokens::validate_name(&record.name).map_err(|e| invalid(e.to_string()))?;
    leaf_api::tokens::validate_scope(&record.rights, &record.tags).map_err(|e| invalid(e.to_string()))
}
