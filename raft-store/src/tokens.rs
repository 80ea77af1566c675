//! Scoped tokens in the replicated state: their records (the secret only as its SHA-256) and
//! how creation, rotation and revocation change them. Pure, like [`crate::apply::apply`]: the
//! node hashes secrets and draws IDs; this module only checks and stores.
use std::collections::BTreeSet;

use leaf_api::audit::Actor;
use leaf_api::tokens::{
    validate_max_tags, validate_name, validate_scope, IdQuota, Quota, Right, TagPattern, TokenId, MAX_GRACE_MS,
};
use serde::{Deserialize, Serialize};

use crate::apply::{ApplyError, Changes};
use crate::state::State;

/// Most tokens the state holds. Bounds the snapshot: one token is at most about 1.2 KB
/// (see `the_largest_possible_state_still_encodes`).
pub const MAX_TOKENS: usize = 1_000;

/// SHA-256 of a token's secret.
pub type SecretHash = [u8; 32];

/// A token as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    pub name: String,
    pub rights: BTreeSet<Right>,
    pub tags: Vec<TagPattern>,
    pub quota: Option<Quota>,
    pub secret_hash: SecretHash,
    /// The secret before the last rotation and until when (leader time, Unix ms) it still
    /// works.
    pub previous: Option<(SecretHash, i64)>,
    pub created_ms: i64,
    pub created_by: Actor,
    pub rotated_ms: Option<i64>,
    pub limits: TokenLimits,
    /// Tags created with this token, ever (archived ones included).
    pub tags_created: u32,
}

/// A token's limits beyond its request quota (a release after the first one with tokens
/// added them; its tokens have none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenLimits {
    /// IDs a second on each node.
    pub id_quota: Option<IdQuota>,
    /// The most tags the token may create.
    pub max_tags: Option<u32>,
}

impl TokenLimits {
    pub(crate) fn check(&self) -> Result<(), ApplyError> {
        let invalid = |e: leaf_api::tokens::TokenError| ApplyError::Invalid(e.to_string());
        if let Some(q) = &self.id_quota {
            q.validate().map_err(invalid)?;
        }
        if let Some(m) = self.max_tags {
            validate_max_tags(m).map_err(invalid)?;
        }
        Ok(())
    }
}

impl TokenRecord {
    /// Whether the token may use `right` on `tag`.
    pub fn allows(&self, right: Right, tag: &str) -> bool {
        self.rights.contains(&right) && self.tags.iter().any(|p| p.matches(tag))
    }

    /// Whether the token has `right` at all.
    pub fn has(&self, right: Right) -> bool {
        self.rights.contains(&right)
    }
}

/// A new token's fields, as proposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewToken {
    pub id: TokenId,
    pub name: String,
    pub rights: BTreeSet<Right>,
    pub tags: Vec<TagPattern>,
    pub quota: Option<Quota>,
    pub secret_hash: SecretHash,
}

/// Checks a new token's fields on their own.
pub(crate) fn check_new(t: &NewToken) -> Result<(), ApplyError> {
    let invalid = |e: leaf_api::tokens::TokenError| ApplyError::Invalid(e.to_string());
    validate_name(&t.name).map_err(invalid)?;
    validate_scope(&t.rights, &t.tags).map_err(invalid)?;
    // Patterns decode through their checked constructor; check again for a peer's entry.
    for p in &t.tags {
        TagPattern::parse(p.as_str()).map_err(invalid)?;
    }
    if let Some(q) = &t.quota {
        q.validate().map_err(invalid)?;
    }
    Ok(())
}

pub(crate) fn check_grace(grace_ms: i64) -> Result<(), ApplyError> {
    if (0..=MAX_GRACE_MS).contains(&grace_ms) {
        Ok(())
    } else {
        Err(ApplyError::Invalid(leaf_api::tokens::TokenError::Grace(grace_ms).to_string()))
    }
}

pub(crate) fn create(
    state: &mut State,
    at_ms: i64,
    actor: &Actor,
    (t, limits): (&NewToken, TokenLimits),
    changes: &mut Changes,
) -> Result<TokenRecord, ApplyError> {
    limits.check()?;
    if state.tokens.contains_key(&t.id.0) {
        return Err(ApplyError::TokenExists(t.id));
    }
    if state.tokens.len() >= MAX_TOKENS {
        return Err(ApplyError::Invalid(format!("the cluster holds {MAX_TOKENS} tokens, the most it may")));
    }
    if state.tokens.values().any(|r| r.name == t.name) {
        return Err(ApplyError::TokenNameTaken(t.name.clone()));
    }
    let record = TokenRecord {
        name: t.name.clone(),
        rights: t.rights.clone(),
        tags: t.tags.clone(),
        quota: t.quota,
        secret_hash: t.secret_hash,
        previous: None,
        created_ms: at_ms,
        created_by: actor.clone(),
        rotated_ms: None,
        limits,
        tags_created: 0,
    };
    state.tokens.insert(t.id.0, record.clone());
    changes.tokens.insert(t.id.0);
    Ok(record)
}

pub(crate) fn rotate(
    state: &mut State,
    at_ms: i64,
    (id, secret_hash, grace_ms): (TokenId, SecretHash, i64),
    changes: &mut Changes,
) -> Result<TokenRecord, ApplyError> {
    let record = state.tokens.get_mut(&id.0).ok_or(ApplyError::TokenNotFound(id))?;
    record.previous = (grace_ms > 0).then(|| (record.secret_hash, at_ms.saturating_add(grace_ms)));
    record.secret_hash = secret_hash;
    record.rotated_ms = Some(at_ms);
    changes.tokens.insert(id.0);
    Ok(record.clone())
}

/// Refuses the creation of `n` tags by a token that would take it past its `max_tags`.
/// Changes nothing: [`count_tags`] counts the tags once they are created.
pub(crate) fn check_tag_budget(state: &State, actor: &Actor, n: usize) -> Result<(), ApplyError> {
    let Some(id) = actor.token() else { return Ok(()) };
    match state.tokens.get(&id.0) {
        Some(r) if r.limits.max_tags.is_some_and(|max| u64::from(r.tags_created) + n as u64 > u64::from(max)) => {
            Err(ApplyError::TokenTagBudget {
                token: id,
                max_tags: r.limits.max_tags.unwrap_or_default(),
                created: r.tags_created,
                asked: n as u64,
            })
        }
        _ => Ok(()),
    }
}

/// Counts `n` tags created by `actor`, if it is a token (one revoked since proposing counts
/// nothing).
pub(crate) fn count_tags(state: &mut State, actor: &Actor, n: usize, changes: &mut Changes) {
    let Some(id) = actor.token() else { return };
    if let Some(r) = state.tokens.get_mut(&id.0) {
        r.tags_created = r.tags_created.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
        changes.tokens.insert(id.0);
    }
}

pub(crate) fn revoke(state: &mut State, id: TokenId, changes: &mut Changes) -> Result<TokenRecord, ApplyError> {
    let record = state.tokens.remove(&id.0).ok_or(ApplyError::TokenNotFound(id))?;
    changes.tokens.insert(id.0);
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apply::{apply, Applied};
    use crate::command::{Command, Op};

    pub(crate) fn new_token(id: u64, name: &str, pattern: &str) -> NewToken {
        NewToken {
            id: TokenId(id),
            name: name.into(),
            rights: [Right::Ids].into(),
            tags: vec![TagPattern::parse(pattern).unwrap()],
            quota: Some(Quota { rate_per_sec: 10, burst: 20 }),
            secret_hash: [id as u8; 32],
        }
    }

    fn run(s: &mut State, at_ms: i64, op: Op) -> (Result<Applied, ApplyError>, Changes) {
        let mut c = Changes::default();
        let r = apply(s, &Command { at_ms, op }, &mut c);
        (r, c)
    }

    #[test]
    fn create_rotate_revoke() {
        let mut s = State::default();
        let (r, c) = run(&mut s, 10, Op::CreateToken { token: new_token(1, "svc", "orders-*"), limits: None });
        assert!(matches!(r, Ok(Applied::Token { ref record, .. }) if record.created_ms == 10), "{r:?}");
        assert_eq!(c.tokens, [1].into());
        assert!(s.tokens[&1].allows(Right::Ids, "orders-eu"));
        assert!(!s.tokens[&1].allows(Right::Ids, "users"));
        assert!(!s.tokens[&1].allows(Right::Tags, "orders-eu"));
        // Same ID, same name: refused, nothing written.
        let (r, c) = run(&mut s, 11, Op::CreateToken { token: new_token(1, "other", "*"), limits: None });
        assert_eq!(r, Err(ApplyError::TokenExists(TokenId(1))));
        assert!(c.is_empty());
        assert!(matches!(
            run(&mut s, 11, Op::CreateToken { token: new_token(2, "svc", "*"), limits: None }).0,
            Err(ApplyError::TokenNameTaken(_))
        ));
        // Rotation with a grace period keeps the old hash until then.
        let (r, _) = run(&mut s, 20, Op::RotateToken { id: TokenId(1), secret_hash: [9; 32], grace_ms: 5 });
        assert!(r.is_ok());
        assert_eq!(s.tokens[&1].secret_hash, [9; 32]);
        assert_eq!(s.tokens[&1].previous, Some(([1; 32], 25)));
        let (_, _) = run(&mut s, 30, Op::RotateToken { id: TokenId(1), secret_hash: [8; 32], grace_ms: 0 });
        assert_eq!(s.tokens[&1].previous, None);
        let (r, c) = run(&mut s, 40, Op::RevokeToken { id: TokenId(1) });
        assert!(r.is_ok());
        assert_eq!(c.tokens, [1].into());
        assert!(s.tokens.is_empty());
        assert_eq!(run(&mut s, 41, Op::RevokeToken { id: TokenId(1) }).0, Err(ApplyError::TokenNotFound(TokenId(1))));
        let rot = Op::RotateToken { id: TokenId(1), secret_hash: [0; 32], grace_ms: 0 };
        assert_eq!(run(&mut s, 41, rot).0, Err(ApplyError::TokenNotFound(TokenId(1))));
    }

    #[test]
    fn invalid_tokens_change_nothing() {
        let mut s = State::default();
        let mut bad = vec![];
        let mut t = new_token(1, "svc", "*");
        t.name = "a b".into();
        bad.push(t);
        let mut t = new_token(1, "svc", "*");
        t.rights.clear();
        bad.push(t);
        let mut t = new_token(1, "svc", "*");
        t.tags.clear();
        bad.push(t);
        let mut t = new_token(1, "svc", "*");
        t.quota = Some(Quota { rate_per_sec: 0, burst: 1 });
        bad.push(t);
        for t in bad {
            let (r, c) = run(&mut s, 1, Op::CreateToken { token: t.clone(), limits: None });
            assert!(matches!(r, Err(ApplyError::Invalid(_))), "{t:?}: {r:?}");
            assert!(c.is_empty());
        }
        let rot = Op::RotateToken { id: TokenId(1), secret_hash: [0; 32], grace_ms: MAX_GRACE_MS + 1 };
        assert!(matches!(run(&mut s, 1, rot).0, Err(ApplyError::Invalid(_))));
        assert_eq!(s, State::default());
    }

    #[test]
    fn a_token_creates_at_most_its_max_tags() {
        let mut s = State::default();
        let limits = TokenLimits { id_quota: None, max_tags: Some(2) };
        run(&mut s, 1, Op::CreateToken { token: new_token(1, "svc", "t-*"), limits: Some(limits) }).0.unwrap();
        let by = |actor: &Actor, tag: &str| Op::Admin {
            actor: actor.clone(),
            retention: crate::audit::DEFAULT_RETENTION,
            trim: crate::Trim::Apart,
            op: Box::new(Op::create_segment_tag(tag.into(), 10, 1, String::new())),
        };
        let token = Actor::Token { id: TokenId(1), name: "svc".into() };
        for tag in ["t-1", "t-2"] {
            let (r, c) = run(&mut s, 2, by(&token, tag));
            assert!(r.is_ok(), "{r:?}");
            assert!(c.tokens.contains(&1), "the count is written");
        }
        assert_eq!(s.tokens[&1].tags_created, 2);
        let before = s.clone();
        let (r, c) = run(&mut s, 3, by(&token, "t-3"));
        assert_eq!(r, Err(ApplyError::TokenTagBudget { token: TokenId(1), max_tags: 2, created: 2, asked: 1 }));
        assert!(c.is_empty());
        assert_eq!(s, before, "nothing changed: no tag, no count, no audit record");
        // A failed creation counts nothing; others are not bound by the token's budget.
        assert!(run(&mut s, 4, by(&Actor::AdminToken, "t-3")).0.is_ok());
        assert!(matches!(run(&mut s, 4, by(&Actor::AdminToken, "t-3")).0, Err(ApplyError::TagExists(_))));
        assert_eq!(s.tokens[&1].tags_created, 2);
        // A batch counts every tag it creates (not those that exist) and must fit whole.
        let limits = TokenLimits { id_quota: None, max_tags: Some(3) };
        run(&mut s, 4, Op::CreateToken { token: new_token(4, "bulk", "b-*"), limits: Some(limits) }).0.unwrap();
        let bulk = Actor::Token { id: TokenId(4), name: "bulk".into() };
        let batch = |actor: &Actor, tags: &[&str]| Op::Admin {
            actor: actor.clone(),
            retention: crate::audit::DEFAULT_RETENTION,
            trim: crate::Trim::Apart,
            op: Box::new(Op::CreateTags {
                tags: tags.iter().map(|t| crate::tags::NewTag::segment(t.to_string(), 10, 1, String::new())).collect(),
            }),
        };
        let before = s.clone();
        let (r, c) = run(&mut s, 4, batch(&bulk, &["b-1", "b-2", "b-3", "b-4"]));
        assert_eq!(r, Err(ApplyError::TokenTagBudget { token: TokenId(4), max_tags: 3, created: 0, asked: 4 }));
        assert!(c.is_empty());
        assert_eq!(s, before, "a batch over the budget creates none of its tags");
        run(&mut s, 4, batch(&Actor::AdminToken, &["b-1"])).0.unwrap();
        let (r, _) = run(&mut s, 4, batch(&bulk, &["b-1", "b-2", "b-3", "b-4"]));
        assert!(matches!(r, Ok(Applied::Tags { ref created, .. }) if created.len() == 3), "{r:?}");
        assert_eq!(s.tokens[&4].tags_created, 3);
        assert!(matches!(run(&mut s, 4, batch(&bulk, &["b-5"])).0, Err(ApplyError::TokenTagBudget { .. })));
        // A token without a limit is counted all the same.
        run(&mut s, 5, Op::CreateToken { token: new_token(2, "free", "*"), limits: None }).0.unwrap();
        let free = Actor::Token { id: TokenId(2), name: "free".into() };
        assert!(run(&mut s, 6, by(&free, "u-1")).0.is_ok());
        assert_eq!(s.tokens[&2].tags_created, 1);
        // Limits out of range are refused like the rest of a token.
        let bad = TokenLimits { id_quota: None, max_tags: Some(0) };
        let (r, c) = run(&mut s, 7, Op::CreateToken { token: new_token(3, "bad", "*"), limits: Some(bad) });
        assert!(matches!(r, Err(ApplyError::Invalid(_))), "{r:?}");
        assert!(c.is_empty());
        let bad = TokenLimits { id_quota: Some(IdQuota { ids_per_sec: 0, burst_ids: 1 }), max_tags: None };
        assert!(run(&mut s, 7, Op::CreateToken { token: new_token(3, "bad", "*"), limits: Some(bad) }).0.is_err());
    }

    #[test]
    fn the_token_count_is_bounded() {
        let mut s = State::default();
        for i in 0..MAX_TOKENS as u64 {
            run(&mut s, 1, Op::CreateToken { token: new_token(i, &format!("t{i}"), "*"), limits: None }).0.unwrap();
        }
        let (r, c) = run(&mut s, 1, Op::CreateToken { token: new_token(u64::MAX, "one-more", "*"), limits: None });
        assert!(matches!(r, Err(ApplyError::Invalid(ref m)) if m.contains("tokens")), "{r:?}");
        assert!(c.is_empty());
    }
}
