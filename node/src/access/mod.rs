//! Who may do what: scoped tokens checked against the replicated state, their quotas, and the
//! [`Principal`] every admin request acts as (what the audit trail records).
//!
//! - The configured `admin_token`, an admin client certificate (`tls.admin_clients`) and, on a
//!   node without an admin token, a loopback connection are [`Principal::Root`]: everything,
//!   tokens included.
//! - A scoped token (`Authorization: Bearer leaf_<id>_<secret>`) is [`Principal::Token`]: its
//!   rights on its tag patterns, within its quota on this node. Its secret is hashed (SHA-256)
//!   and compared in constant time with the hash in the state; the token map is read with one
//!   atomic load ([`leaf_raft_store::StateReader::tokens`]), so a node refuses a revoked token
//!   as soon as it has applied the revocation, with no lock on the request path.
//! - ID requests need no token unless `auth.require_token_for_ids`; one that carries a token is
//!   checked all the same ([`Access::check_ids`]), and one without is charged to its client
//!   address's quota of IDs ([`anonymous`]).
//!
//! Layout: [`credentials`] (the checks without wire formats: admin token, loopback, origin,
//! cluster secret, peer certificates), [`quota`] (the GCRA bucket), [`anonymous`] (the
//! per-address table), and here the token map, meters and principals.
//!
//! No error or log line holds a secret: a refused bearer is named by its token ID at most.
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use leaf_api::audit::Actor;
use leaf_api::tokens::{parse_bearer, Right, TagPattern, TokenId, SECRET_BYTES};
use leaf_api::ErrorCode;
use leaf_raft_store::{SecretHash, StateReader, TokenRecord};
use prometheus_client::metrics::counter::Counter;
use subtle::ConstantTimeEq;

use crate::clock::{Clock, SystemClock};
use crate::error::ApiError;
use crate::metrics::Metrics;

pub mod anonymous;
pub mod credentials;
pub mod quota;
pub mod series_rate;

/// Who an ID request's credentials proved it came from ([`Access::check_ids`]): what the
/// request may do besides taking IDs (make a tag from a template) is decided from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdRequester {
    /// No credential (allowed where tokens are not required for IDs).
    Anonymous,
    /// The admin token.
    Admin,
    /// A scoped token.
    Token(TokenId),
}

/// Who is calling, once the credentials were checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// May do everything, tokens included.
    Root(Actor),
    /// A scoped token.
    Token { id: TokenId, name: String, rights: BTreeSet<Right>, tags: Vec<TagPattern> },
}

impl Principal {
    /// What the audit trail records.
    pub fn actor(&self) -> Actor {
        match self {
            Principal::Root(a) => a.clone(),
            Principal::Token { id, name, .. } => Actor::Token { id: *id, name: name.clone() },
        }
    }

    /// Whether a monitor view shown to this principal may include `tag` (the root sees every
    /// tag; a token the tags its patterns match, whatever its rights). Obfuscated tags are left
    /// out of the monitor views by their callers, for everyone.
    pub fn sees_tag(&self, tag: &str) -> bool {
        match self {
            Principal::Root(_) => true,
            Principal::Token { tags, .. } => tags.iter().any(|p| p.matches(tag)),
        }
    }

    /// Whether the principal has `right` at all.
    pub fn may(&self, right: Right) -> bool {
        match self {
            Principal::Root(_) => true,
            Principal::Token { rights, .. } => rights.contains(&right),
        }
    }

    /// Whether the principal may use `right` on `tag`.
    pub fn may_on(&self, right: Right, tag: &str) -> bool {
        match self {
            Principal::Root(_) => true,
            Principal::Token { rights, tags, .. } => rights.contains(&right) && tags.iter().any(|p| p.matches(tag)),
        }
    }

    /// [`Principal::may_on`], or 403 `forbidden` saying what is missing.
    pub fn require_on(&self, right: Right, tag: &str) -> Result<(), ApiError> {
        if self.may_on(right, tag) {
            return Ok(());
        }
        Err(forbidden(self, right, Some(tag)))
    }

    /// [`Principal::may`], or 403 `forbidden`.
    pub fn require(&self, right: Right) -> Result<(), ApiError> {
        if self.may(right) {
            return Ok(());
        }
        Err(forbidden(self, right, None))
    }

    /// Only the admin token, an admin certificate or a token-less loopback: 403 otherwise.
    pub fn require_root(&self, what: &str) -> Result<(), ApiError> {
        match self {
            Principal::Root(_) => Ok(()),
            Principal::Token { id, .. } => Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("token {id} is scoped: {what} needs the admin token or an admin client certificate"),
            )),
        }
    }
}

fn forbidden(p: &Principal, right: Right, tag: Option<&str>) -> ApiError {
    let who = match p {
        Principal::Token { id, .. } => format!("token {id}"),
        Principal::Root(_) => "this caller".to_string(),
    };
    let msg = match tag {
        Some(tag) => format!("{who} has no '{}' right on tag {tag:?}", right.as_str()),
        None => format!("{who} has no '{}' right", right.as_str()),
    };
    ApiError::new(ErrorCode::Forbidden, msg)
}

fn unauthorized(msg: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::Unauthorized, msg)
}

/// A bearer that is no token of this cluster (nor the admin token).
fn refused() -> ApiError {
    unauthorized("the bearer is not a valid token (unknown, revoked, rotated or malformed)")
}

/// A token's current secret as last verified, with the stored hash it matched.
struct Seen {
    secret: [u8; SECRET_BYTES],
    hash: SecretHash,
}

/// A token's quota bucket and counters on this node, made at its first use.
struct Meter {
    /// The token's name, for removing its metric series once it is revoked.
    name: String,
    bucket: Option<quota::Gcra>,
    /// The token's quota in IDs, and the most one request may ask for.
    ids: Option<(quota::Gcra, u32)>,
    /// Its current secret, once verified (see [`Access::verify`]).
    verified: arc_swap::ArcSwapOption<Seen>,
    allowed: Counter,
    limited: Counter,
    denied: Counter,
}

/// Checks scoped tokens (see the module doc). One per node, shared by HTTP and gRPC.
pub struct Access {
    state: StateReader,
    clock: Arc<SystemClock>,
    admin_token: Option<String>,
    require_for_ids: bool,
    metrics: Arc<Metrics>,
    /// Per token, made once and then read with one atomic load.
    meters: ArcSwap<HashMap<u64, Arc<Meter>>>,
    /// The zero of the quota buckets' monotonic nanoseconds.
    epoch: Instant,
    /// The quota of requests without a token, per address (`None`: off).
    anonymous: Option<anonymous::AnonymousQuota>,
    /// Whether callers without a token may use gapless series (`auth.anonymous_gapless`).
    anonymous_gapless: bool,
    /// Each caller's rate of issues per gapless series.
    series_rates: series_rate::SeriesRates,
}

/// An ID request's ask: how many IDs, from which client address (for the quota of requests
/// without a token).
#[derive(Debug, Clone, Copy)]
pub struct IdAsk {
    pub addr: std::net::IpAddr,
    pub ids: u32,
}

impl Access {
    pub fn new(
        state: StateReader,
        clock: Arc<SystemClock>,
        config: &crate::config::Config,
        metrics: Arc<Metrics>,
    ) -> Self {
        Access {
            state,
            clock,
            admin_token: config.admin_token().map(str::to_string),
            require_for_ids: config.auth.require_token_for_ids,
            metrics,
            meters: ArcSwap::default(),
            epoch: Instant::now(),
            anonymous: match config.auth.anonymous_ids_per_sec {
                0 => None,
                rate => Some(anonymous::AnonymousQuota::new(rate, config.auth.anonymous_burst_ids)),
            },
            anonymous_gapless: config.auth.anonymous_gapless,
            series_rates: Default::default(),
        }
    }

    /// Whether a caller without a token may use gapless series here, or 401 saying how.
    pub fn check_anonymous_gapless(&self) -> Result<(), ApiError> {
        if self.anonymous_gapless {
            return Ok(());
        }
        Err(unauthorized(
            "gapless series need 'Authorization: Bearer <token>' (a token with the 'ids' right on the tag) \
             on this cluster: auth.anonymous_gapless is off",
        ))
    }

    /// Takes one issue of gapless series `tag` for `who` (from `addr`) at the series' rate of
    /// `per_sec`, or 429 with the wait.
    pub fn charge_series(
        &self,
        tag: &str,
        who: IdRequester,
        addr: std::net::IpAddr,
        per_sec: u32,
    ) -> Result<(), ApiError> {
        use series_rate::RateCaller;
        let caller = match who {
            IdRequester::Anonymous => RateCaller::addr(addr),
            IdRequester::Admin => RateCaller::Admin,
            IdRequester::Token(id) => RateCaller::Token(id),
        };
        self.series_rates.take(tag, caller, per_sec, self.now_ns()).map_err(|wait| {
            let secs = quota::retry_after_secs(wait);
            ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "this caller is over gapless series {tag:?}'s rate of {per_sec} issues a second on this node \
                     (its issues_per_sec); retry in {secs} s"
                ),
            )
            .retry_after(secs)
        })
    }

    /// The credentials of an ID request (HTTP `Authorization` or gRPC `authorization`):
    /// none when `auth.require_token_for_ids` is off; else, or when one is given, the admin
    /// token or a scoped token with the `ids` right on `tag` (any pattern for snowflake IDs,
    /// which have no tag), within its quota. Without a token, `ask` is charged to its address's
    /// anonymous quota.
    pub fn check_ids(
        &self,
        authorization: Option<&[u8]>,
        tag: Option<&str>,
        ask: IdAsk,
    ) -> Result<IdRequester, ApiError> {
        let Some(raw) = authorization else {
            if self.require_for_ids {
                return Err(unauthorized("ID requests need 'Authorization: Bearer <token>' on this cluster"));
            }
            return self.take_anonymous(ask).map(|()| IdRequester::Anonymous);
        };
        let bearer = std::str::from_utf8(raw)
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| unauthorized("the Authorization header must be 'Bearer <token>'"))?;
        // A scoped token first: its check needs no hash once its secret was seen (see
        // `verify`), where comparing with the admin token would hash the bearer each time.
        let tokens = self.state.tokens();
        if let Some((id, secret)) = parse_bearer(bearer) {
            if let Some(record) = tokens.get(&id.0) {
                let meters = self.meters.load();
                let made;
                let meter: &Meter = match meters.get(&id.0) {
                    Some(m) => m,
                    None => {
                        made = self.meter(id, record);
                        &made
                    }
                };
                if self.verify(record, meter, &secret) {
                    return self.charge_ids(id, record, meter, tag, ask).map(|()| IdRequester::Token(id));
                }
            }
        }
        if self.admin_token.as_ref().is_some_and(|t| credentials::secret_eq(bearer.as_bytes(), t.as_bytes())) {
            return Ok(IdRequester::Admin);
        }
        Err(refused())
    }

    /// The principal an ID request's checked credentials stand for, as it is now (a token
    /// revoked since has none); `None` without a credential.
    pub fn principal_of(&self, caller: IdRequester) -> Option<Principal> {
        match caller {
            IdRequester::Anonymous => None,
            IdRequester::Admin => Some(Principal::Root(Actor::AdminToken)),
            IdRequester::Token(id) => self.state.tokens().get(&id.0).map(|record| Principal::Token {
                id,
                name: record.name.clone(),
                rights: record.rights.clone(),
                tags: record.tags.clone(),
            }),
        }
    }

    /// A verified token's ID request: its `ids` right on `tag`, then its quotas.
    fn charge_ids(
        &self,
        id: TokenId,
        record: &TokenRecord,
        meter: &Meter,
        tag: Option<&str>,
        ask: IdAsk,
    ) -> Result<(), ApiError> {
        let allowed = match tag {
            Some(tag) => record.allows(Right::Ids, tag),
            None => record.has(Right::Ids),
        };
        if !allowed {
            meter.denied.inc();
            let p = Principal::Token { id, name: String::new(), rights: BTreeSet::new(), tags: vec![] };
            return Err(forbidden(&p, Right::Ids, tag));
        }
        if let Some((_, burst)) = &meter.ids {
            if ask.ids > *burst {
                meter.denied.inc();
                return Err(ApiError::invalid(format!(
                    "token {id} may take at most {burst} IDs at once (its burst_ids); ask for fewer"
                )));
            }
        }
        self.take(id, meter)?;
        self.take_ids(id, meter, ask.ids)
    }

    /// Charges `n` IDs to the token's quota in IDs, if it has one.
    fn take_ids(&self, id: TokenId, meter: &Meter, n: u32) -> Result<(), ApiError> {
        let Some((bucket, _)) = &meter.ids else { return Ok(()) };
        bucket.take_n_by(|| self.now_ns(), u64::from(n)).map_err(|wait| {
            meter.limited.inc();
            let secs = quota::retry_after_secs(wait);
            ApiError::new(
                ErrorCode::RateLimited,
                format!("token {id} is over its quota of IDs on this node; retry in {secs} s"),
            )
            .retry_after(secs)
        })
    }

    fn take_anonymous(&self, ask: IdAsk) -> Result<(), ApiError> {
        let Some(q) = &self.anonymous else { return Ok(()) };
        q.take(ask.addr, u64::from(ask.ids), || self.now_ns()).map_err(|wait| {
            let secs = quota::retry_after_secs(wait);
            ApiError::new(
                ErrorCode::RateLimited,
                format!(
                    "requests without a token from {} are over this node's quota of IDs \
                     (auth.anonymous_ids_per_sec); retry in {secs} s, or use a token",
                    ask.addr
                ),
            )
            .retry_after(secs)
        })
    }

    /// The principal of a scoped token's bearer, within its quota; `Ok(None)` when `bearer`
    /// is not shaped like one (the admin token, say).
    pub fn scoped(&self, bearer: &str) -> Result<Option<Principal>, ApiError> {
        let Some((id, secret)) = parse_bearer(bearer) else { return Ok(None) };
        let tokens = self.state.tokens();
        let record = tokens.get(&id.0).ok_or_else(refused)?;
        let meter = self.meter(id, record);
        if !self.verify(record, &meter, &secret) {
            return Err(refused());
        }
        self.take(id, &meter)?;
        Ok(Some(Principal::Token {
            id,
            name: record.name.clone(),
            rights: record.rights.clone(),
            tags: record.tags.clone(),
        }))
    }

    /// Whether `secret` is the token's: its current secret, or the one before the last
    /// rotation during its grace period (by this node's clock). The current secret, once seen,
    /// is kept in the token's meter (memory only), so the next requests compare it in constant
    /// time without hashing; a rotation changes the stored hash and so retires it.
    fn verify(&self, record: &TokenRecord, meter: &Meter, secret: &[u8; SECRET_BYTES]) -> bool {
        if let Some(seen) = &*meter.verified.load() {
            if seen.hash == record.secret_hash && bool::from(seen.secret.ct_eq(secret)) {
                return true;
            }
        }
        let hash = hash_secret(secret);
        let current = hash.ct_eq(&record.secret_hash);
        let previous = match &record.previous {
            Some((old, until_ms)) => hash.ct_eq(old) & subtle::Choice::from(u8::from(self.clock.now_ms() < *until_ms)),
            None => subtle::Choice::from(0),
        };
        if bool::from(current) {
            meter.verified.store(Some(Arc::new(Seen { secret: *secret, hash: record.secret_hash })));
        }
        bool::from(current | previous)
    }

    /// The token's meter: made at its first use on this node. Making one also drops the
    /// meters (and metric series) of tokens revoked since, so they stay as many as the live
    /// tokens used here.
    fn meter(&self, id: TokenId, record: &TokenRecord) -> Arc<Meter> {
        if let Some(m) = self.meters.load().get(&id.0) {
            return m.clone();
        }
        let (allowed, limited, denied) = self.metrics.token_counters(&id.to_string(), &record.name);
        let bucket = record.quota.map(quota::Gcra::new);
        let ids = record.limits.id_quota.map(|q| (quota::Gcra::per_sec(q.ids_per_sec, q.burst_ids), q.burst_ids));
        let verified = arc_swap::ArcSwapOption::empty();
        let made = Arc::new(Meter { name: record.name.clone(), bucket, ids, verified, allowed, limited, denied });
        let live = self.state.tokens();
        let mut out = made.clone();
        let before = self.meters.rcu(|m| {
            let mut m = HashMap::clone(m);
            m.retain(|id, _| live.contains_key(id));
            out = m.entry(id.0).or_insert_with(|| made.clone()).clone();
            m
        });
        for (gone, meter) in before.iter().filter(|(id, _)| !live.contains_key(id)) {
            self.metrics.remove_token_counters(&TokenId(*gone).to_string(), &meter.name);
        }
        out
    }

    /// The quota buckets' monotonic time.
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn take(&self, id: TokenId, meter: &Meter) -> Result<(), ApiError> {
        if let Some(bucket) = &meter.bucket {
            if let Err(wait) = bucket.take_n_by(|| self.now_ns(), 1) {
                meter.limited.inc();
                let secs = quota::retry_after_secs(wait);
                return Err(ApiError::new(
                    ErrorCode::RateLimited,
                    format!("token {id} is over its quota on this node; retry in {secs} s"),
                )
                .retry_after(secs));
            }
        }
        meter.allowed.inc();
        Ok(())
    }
}

/// SHA-256 of a token's secret: what the state stores.
pub fn hash_secret(secret: &[u8; SECRET_BYTES]) -> SecretHash {
    let d = ring::digest::digest(&ring::digest::SHA256, secret);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// A new random secret and token ID, from the OS's random source.
pub fn new_secret() -> Result<(TokenId, [u8; SECRET_BYTES]), ApiError> {
    use rand::RngCore;
    let mut secret = [0u8; SECRET_BYTES];
    let mut id = [0u8; 8];
    let fill = |buf: &mut [u8]| {
        rand::rngs::OsRng.try_fill_bytes(buf).map_err(|e| {
            tracing::error!(error = %e, "the OS random source failed");
            ApiError::new(ErrorCode::Unavailable, "the node's random source failed; try again")
        })
    };
    fill(&mut secret)?;
    fill(&mut id)?;
    Ok((TokenId(u64::from_le_bytes(id)), secret))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(rights: &[Right], tags: &[&str]) -> Principal {
        Principal::Token {
            id: TokenId(1),
            name: "svc".into(),
            rights: rights.iter().copied().collect(),
            tags: tags.iter().map(|t| TagPattern::parse(t).unwrap()).collect(),
        }
    }

    #[test]
    fn scopes_decide() {
        let t = token(&[Right::Ids, Right::Tags], &["orders-*"]);
        assert!(t.may_on(Right::Ids, "orders-eu"));
        assert!(!t.may_on(Right::Ids, "users"));
        assert!(!t.may(Right::Cluster));
        let e = t.require_on(Right::Tags, "users").unwrap_err();
        assert_eq!(e.code, ErrorCode::Forbidden);
        assert!(e.message.contains("0000000000000001") && e.message.contains("users"), "{}", e.message);
        assert!(t.require_root("managing tokens").is_err());
        let root = Principal::Root(Actor::AdminToken);
        assert!(root.may_on(Right::Cluster, "x") && root.require_root("x").is_ok());
        assert_eq!(t.actor(), Actor::Token { id: TokenId(1), name: "svc".into() });
    }

    #[test]
    fn secrets_hash_to_sha256() {
        // SHA-256 of 32 zero bytes.
        let h = hash_secret(&[0; SECRET_BYTES]);
        assert_eq!(h[..4], [0x66, 0x68, 0x7a, 0xad]);
        let (a, sa) = new_secret().unwrap();
        let (b, sb) = new_secret().unwrap();
        assert!(a != b && sa != sb);
    }
}
