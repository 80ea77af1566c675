//! Scoped access tokens: what a token may do ([`Right`]), on which tags ([`TagPattern`]), how
//! fast ([`Quota`] in requests, [`IdQuota`] in IDs), how many tags it may create, how it is named ([`TokenId`]) and sent (the bearer string of
//! [`parse_bearer`] / [`format_bearer`]), and the bodies of the token endpoints.
//!
//! A bearer is `leaf_<id>_<secret>`: the token's public ID (16 lowercase hex digits) and 32
//! random bytes as 64 lowercase hex digits. The cluster stores only the secret's SHA-256, so
//! the bearer is shown once, when the token is created or rotated.
use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::audit::Actor;
use crate::tag::{validate_tag, MAX_TAG_LEN};

/// Longest token name, in bytes.
pub const MAX_TOKEN_NAME: usize = 64;
/// Most tag patterns one token may carry.
pub const MAX_TOKEN_PATTERNS: usize = 8;
/// Largest `rate_per_sec` and `burst` of a quota.
pub const MAX_QUOTA: u32 = 1_000_000;
/// Largest `ids_per_sec` and `burst_ids` of an [`IdQuota`]: above it a bucket's nanoseconds
/// per ID would round to 0.
pub const MAX_ID_QUOTA: u32 = 1_000_000_000;
/// Largest `max_tags` of a token. It stays at the bound of the release that introduced it
/// (then the most tags a cluster held): those nodes refuse a larger one when they apply it,
/// so raising it would let a cluster in the middle of an upgrade disagree on the token. A
/// token that must create more tags has no `max_tags`.
pub const MAX_TOKEN_TAGS: u32 = 40_000;
/// Longest grace period of a rotation, during which the old secret still works (a day).
pub const MAX_GRACE_MS: i64 = 86_400_000;
/// Bytes of a token's secret.
pub const SECRET_BYTES: usize = 32;
/// What every bearer starts with.
pub const BEARER_PREFIX: &str = "leaf_";

/// What a scoped token may do. The configured `admin_token` (and an admin client
/// certificate) may do everything, managing tokens included; a scoped token never manages
/// tokens, so it cannot mint itself more rights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Right {
    /// Get segment IDs of the matching tags (and snowflake IDs, which have no tag).
    Ids,
    /// Create, show, list, update and decode the matching tags.
    Tags,
    /// Membership changes, the allocation journal, the audit trail and the fault clock.
    Cluster,
    /// The monitor views: `/db`, `/cache`, `/metrics`, `/cluster/status`, `/health` (those not
    /// configured public, `auth.public_endpoints`) and the dashboard's data; tags shown only
    /// where the token's patterns match, obfuscated tags never.
    Monitor,
    /// On a global tier: join as a region and take blocks of the matching tags' IDs (what a
    /// region's leader does; cluster version 3).
    Regions,
}

impl Right {
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Ids => "ids",
            Right::Tags => "tags",
            Right::Cluster => "cluster",
            Right::Monitor => "monitor",
            Right::Regions => "regions",
        }
    }

    pub const ALL: [Right; 5] = [Right::Ids, Right::Tags, Right::Cluster, Right::Monitor, Right::Regions];
}

impl std::str::FromStr for Right {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Self, TokenError> {
        Right::ALL.into_iter().find(|r| r.as_str() == s).ok_or_else(|| TokenError::Right(clip(s)))
    }
}

/// Which tags a token covers: `*` (every tag), an exact tag name, or a tag-name prefix followed
/// by one `*` at the end (`orders-*` covers `orders-eu` and `orders-`, not `orders`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TagPattern(String);

impl TagPattern {
    pub fn parse(raw: &str) -> Result<Self, TokenError> {
        let bad = |why: String| TokenError::Pattern { pattern: clip(raw), why };
        if raw == "*" {
            return Ok(TagPattern(raw.to_string()));
        }
        let body = raw.strip_suffix('*').unwrap_or(raw);
        if body.is_empty() {
            return Err(bad("empty".into()));
        }
        if raw.len() > MAX_TAG_LEN {
            return Err(bad(format!("longer than {MAX_TAG_LEN} bytes")));
        }
        validate_tag(body).map_err(|e| bad(e.to_string().replace("tag ", "the part before '*' ")))?;
        Ok(TagPattern(raw.to_string()))
    }

    /// Whether `tag` is covered.
    pub fn matches(&self, tag: &str) -> bool {
        match self.0.strip_suffix('*') {
            Some(prefix) => tag.starts_with(prefix),
            None => self.0 == tag,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TagPattern {
    type Error = TokenError;

    fn try_from(s: String) -> Result<Self, TokenError> {
        TagPattern::parse(&s)
    }
}

impl From<TagPattern> for String {
    fn from(p: TagPattern) -> String {
        p.0
    }
}

impl std::fmt::Display for TagPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A token's request rate limit on each node it calls: a token bucket refilled at
/// `rate_per_sec` requests a second, holding at most `burst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Quota {
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000, example = 100))]
    #[serde(deserialize_with = "crate::json_int::u32")]
    pub rate_per_sec: u32,
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000, example = 200))]
    #[serde(deserialize_with = "crate::json_int::u32")]
    pub burst: u32,
}

impl Quota {
    pub fn validate(&self) -> Result<(), TokenError> {
        for (what, v) in [("rate_per_sec", self.rate_per_sec), ("burst", self.burst)] {
            if !(1..=MAX_QUOTA).contains(&v) {
                return Err(TokenError::Quota(format!("{what} must be from 1 to {MAX_QUOTA}, got {v}")));
            }
        }
        Ok(())
    }
}

/// A token's limit in IDs on each node it calls, whatever the requests they come in: a token
/// bucket refilled at `ids_per_sec` IDs a second, holding at most `burst_ids`. One request for
/// more than `burst_ids` IDs is refused (400), since it could never fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IdQuota {
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000_000, example = 100000))]
    #[serde(deserialize_with = "crate::json_int::u32")]
    pub ids_per_sec: u32,
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000_000, example = 1000000))]
    #[serde(deserialize_with = "crate::json_int::u32")]
    pub burst_ids: u32,
}

impl IdQuota {
    pub fn validate(&self) -> Result<(), TokenError> {
        for (what, v) in [("ids_per_sec", self.ids_per_sec), ("burst_ids", self.burst_ids)] {
            if !(1..=MAX_ID_QUOTA).contains(&v) {
                return Err(TokenError::Quota(format!("{what} must be from 1 to {MAX_ID_QUOTA}, got {v}")));
            }
        }
        Ok(())
    }
}

/// Checks a token's `max_tags`: 1 to [`MAX_TOKEN_TAGS`].
pub fn validate_max_tags(max_tags: u32) -> Result<(), TokenError> {
    if (1..=MAX_TOKEN_TAGS).contains(&max_tags) {
        Ok(())
    } else {
        Err(TokenError::MaxTags(max_tags))
    }
}

/// A token's public ID. 16 lowercase hex digits in JSON and in the bearer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TokenId(pub u64);

impl std::fmt::Display for TokenId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl std::str::FromStr for TokenId {
    type Err = TokenError;

    fn from_str(s: &str) -> Result<Self, TokenError> {
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(TokenError::Id(clip(s)));
        }
        u64::from_str_radix(s, 16).map(TokenId).map_err(|_| TokenError::Id(clip(s)))
    }
}

// Hex text for people (JSON), a plain integer for machines (bincode in the Raft log).
impl Serialize for TokenId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.collect_str(self)
        } else {
            s.serialize_u64(self.0)
        }
    }
}

impl<'de> Deserialize<'de> for TokenId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            s.parse().map_err(serde::de::Error::custom)
        } else {
            u64::deserialize(d).map(TokenId)
        }
    }
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for TokenId {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .pattern(Some("^[0-9a-f]{16}$"))
            .examples(["3f9c2a7d10b4e655"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for TokenId {}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for TagPattern {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .min_length(Some(1))
            .max_length(Some(MAX_TAG_LEN))
            .pattern(Some(r"^(\*|[A-Za-z0-9_.:\-]+\*?)$"))
            .examples(["orders-*"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for TagPattern {}

/// Splits a bearer `leaf_<id>_<secret>` into the token's ID and its secret; `None` for
/// anything else (the configured admin token, garbage).
pub fn parse_bearer(bearer: &str) -> Option<(TokenId, [u8; SECRET_BYTES])> {
    let rest = bearer.strip_prefix(BEARER_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let id = id.parse().ok()?;
    if secret.len() != SECRET_BYTES * 2 {
        return None;
    }
    let mut out = [0u8; SECRET_BYTES];
    for (i, pair) in secret.as_bytes().chunks(2).enumerate() {
        out[i] = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
    }
    Some((id, out))
}

fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    }
}

/// The bearer of token `id` with `secret`.
pub fn format_bearer(id: TokenId, secret: &[u8; SECRET_BYTES]) -> String {
    let mut s = format!("{BEARER_PREFIX}{id}_");
    for b in secret {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Checks a token's name: 1 to [`MAX_TOKEN_NAME`] bytes of `[A-Za-z0-9_.:@-]`.
pub fn validate_name(name: &str) -> Result<(), TokenError> {
    if name.is_empty() || name.len() > MAX_TOKEN_NAME {
        return Err(TokenError::Name(format!("must be 1 to {MAX_TOKEN_NAME} bytes long, got {}", name.len())));
    }
    match name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '@' | '-'))) {
        Some(c) => Err(TokenError::Name(format!("contains {c:?}; allowed are A-Z a-z 0-9 _ . : @ -"))),
        None => Ok(()),
    }
}

/// The rights of a request as a set; each may be listed once (the schema's `maxItems` holds
/// then).
pub fn rights_set(rights: &[Right]) -> Result<BTreeSet<Right>, TokenError> {
    let set: BTreeSet<Right> = rights.iter().copied().collect();
    if set.len() != rights.len() {
        return Err(TokenError::Scope("a right is listed twice".into()));
    }
    Ok(set)
}

/// Checks a token's scope: at least one right, and 1 to [`MAX_TOKEN_PATTERNS`] distinct
/// patterns when it has a right that is about tags.
pub fn validate_scope(rights: &BTreeSet<Right>, tags: &[TagPattern]) -> Result<(), TokenError> {
    if rights.is_empty() {
        return Err(TokenError::Scope(
            "a token needs at least one right: ids, tags, cluster, monitor or regions".into(),
        ));
    }
    if tags.len() > MAX_TOKEN_PATTERNS {
        return Err(TokenError::Scope(format!("at most {MAX_TOKEN_PATTERNS} tag patterns, got {}", tags.len())));
    }
    let about_tags = rights.contains(&Right::Ids) || rights.contains(&Right::Tags) || rights.contains(&Right::Regions);
    if about_tags && tags.is_empty() {
        return Err(TokenError::Scope(
            "rights ids, tags and regions need tag patterns (\"*\" for every tag, \"orders-*\" for a prefix)".into(),
        ));
    }
    let distinct: BTreeSet<&TagPattern> = tags.iter().collect();
    if distinct.len() != tags.len() {
        return Err(TokenError::Scope("a tag pattern is listed twice".into()));
    }
    Ok(())
}

/// Why a token field was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("token name {0}")]
    Name(String),
    #[error("unknown right {0:?}: one of ids, tags, cluster")]
    Right(String),
    #[error("tag pattern {pattern:?}: {why}")]
    Pattern { pattern: String, why: String },
    #[error("quota: {0}")]
    Quota(String),
    #[error("token scope: {0}")]
    Scope(String),
    #[error("{0:?} is not a token ID (16 lowercase hex digits)")]
    Id(String),
    #[error("grace_ms must be from 0 to {MAX_GRACE_MS}, got {0}")]
    Grace(i64),
    #[error("max_tags must be from 1 to {MAX_TOKEN_TAGS}, got {0}")]
    MaxTags(u32),
}

fn clip(s: &str) -> String {
    s.chars().take(32).collect()
}

/// `POST /admin/tokens`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTokenRequest {
    /// A name for people (the team or service that holds it).
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.:@\-]+$", example = "orders-service")
    )]
    pub name: String,
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 5))]
    pub rights: Vec<Right>,
    /// Tag patterns (needed with `ids` or `tags`).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_items = 8))]
    pub tags: Vec<TagPattern>,
    /// A request rate limit on each node; none: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    /// A limit in IDs on each node (one request for 1,000 IDs takes 1,000); none: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_quota: Option<IdQuota>,
    /// The most tags the token may ever create (with the `tags` right); none: unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::json_int::opt_u32")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 40_000, example = 100))]
    pub max_tags: Option<u32>,
}

/// `POST /admin/tokens/{id}/rotate`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RotateTokenRequest {
    /// How long the old secret keeps working (0 when absent: refused as soon as the rotation
    /// commits).
    #[serde(default, deserialize_with = "crate::json_int::opt_i64")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 86_400_000, example = 60000))]
    pub grace_ms: Option<i64>,
}

/// A token as the cluster holds it (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenInfo {
    pub id: TokenId,
    pub name: String,
    pub rights: Vec<Right>,
    pub tags: Vec<TagPattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<Quota>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_quota: Option<IdQuota>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tags: Option<u32>,
    /// How many tags the token has created.
    #[serde(default)]
    pub tags_created: u32,
    /// Leader time (Unix ms) of the creation.
    pub created_ms: i64,
    pub created_by: Actor,
    /// Leader time of the last rotation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotated_ms: Option<i64>,
    /// Until when (leader time, Unix ms) the secret before the last rotation still works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_secret_until_ms: Option<i64>,
}

/// A token with its bearer: the answer of a creation or rotation, the only time the secret is
/// shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct IssuedToken {
    pub token: TokenInfo,
    /// `Authorization: Bearer <this>`. Store it now: the cluster keeps only its hash.
    #[cfg_attr(feature = "openapi", schema(example = "leaf_3f9c2a7d10b4e655_<64 hex digits>"))]
    pub bearer: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_exactly_or_by_prefix() {
        let p = TagPattern::parse("orders-*").unwrap();
        assert!(p.matches("orders-eu") && p.matches("orders-"));
        assert!(!p.matches("orders") && !p.matches("users") && !p.matches("xorders-eu"));
        let exact = TagPattern::parse("users").unwrap();
        assert!(exact.matches("users") && !exact.matches("users2"));
        assert!(TagPattern::parse("*").unwrap().matches("anything"));
        for bad in ["", "**", "a*b", "*a", "a b*", "a/b", &"x".repeat(129)] {
            assert!(TagPattern::parse(bad).is_err(), "{bad:?}");
        }
        assert!(TagPattern::parse(&format!("{}*", "x".repeat(127))).is_ok());
        let json: Result<TagPattern, _> = serde_json::from_str("\"a*b\"");
        assert!(json.is_err());
    }

    #[test]
    fn bearers_round_trip_and_refuse_anything_else() {
        let id = TokenId(0x3f9c_2a7d_10b4_e655);
        let secret = [0xa5u8; SECRET_BYTES];
        let b = format_bearer(id, &secret);
        assert_eq!(b.len(), 5 + 16 + 1 + 64);
        assert_eq!(parse_bearer(&b), Some((id, secret)));
        for bad in [
            "",
            "leaf_",
            "test-admin-token",
            &b[..b.len() - 1],
            &format!("{b}0"),
            &b.replace("leaf_", "leaF_"),
            &b.to_uppercase(),
            &format!("leaf_{id}{}", &b[22..]),
        ] {
            assert_eq!(parse_bearer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ids_are_hex_in_json_and_integers_in_bincode() {
        let id = TokenId(0xff);
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"00000000000000ff\"");
        assert_eq!(serde_json::from_str::<TokenId>("\"00000000000000ff\"").unwrap(), id);
        assert!(serde_json::from_str::<TokenId>("\"ff\"").is_err());
        assert!(serde_json::from_str::<TokenId>("255").is_err());
        let bytes = crate::codec::encode(&id).unwrap();
        assert_eq!(crate::codec::decode::<TokenId>(&bytes).unwrap(), id);
    }

    #[test]
    fn scopes_and_names_are_checked() {
        let rights = |r: &[Right]| r.iter().copied().collect::<BTreeSet<_>>();
        let pats = |p: &[&str]| p.iter().map(|p| TagPattern::parse(p).unwrap()).collect::<Vec<_>>();
        assert!(validate_scope(&rights(&[Right::Ids]), &pats(&["orders-*"])).is_ok());
        assert!(validate_scope(&rights(&[Right::Cluster]), &[]).is_ok());
        assert!(validate_scope(&rights(&[]), &pats(&["*"])).is_err());
        assert!(validate_scope(&rights(&[Right::Tags]), &[]).is_err());
        assert!(validate_scope(&rights(&[Right::Ids]), &pats(&["a", "a"])).is_err());
        assert_eq!(rights_set(&[Right::Tags, Right::Ids]).unwrap().len(), 2);
        assert!(rights_set(&[Right::Ids, Right::Cluster, Right::Ids]).is_err());
        let nine: Vec<String> = (0..9).map(|i| format!("t{i}")).collect();
        let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
        assert!(validate_scope(&rights(&[Right::Ids]), &pats(&nine)).is_err());
        assert!(validate_name("orders-service@eu").is_ok());
        for bad in ["", "a b", &"x".repeat(65), "ü"] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
        assert!(Quota { rate_per_sec: 0, burst: 1 }.validate().is_err());
        assert!(Quota { rate_per_sec: 1, burst: MAX_QUOTA + 1 }.validate().is_err());
        assert!(Quota { rate_per_sec: MAX_QUOTA, burst: 1 }.validate().is_ok());
        assert!(IdQuota { ids_per_sec: 0, burst_ids: 1 }.validate().is_err());
        assert!(IdQuota { ids_per_sec: 1, burst_ids: MAX_ID_QUOTA + 1 }.validate().is_err());
        assert!(IdQuota { ids_per_sec: MAX_ID_QUOTA, burst_ids: 1 }.validate().is_ok());
        assert!(validate_max_tags(0).is_err() && validate_max_tags(MAX_TOKEN_TAGS + 1).is_err());
        assert!(validate_max_tags(1).is_ok() && validate_max_tags(MAX_TOKEN_TAGS).is_ok());
    }
}
