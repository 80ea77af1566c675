//! Tag templates: a name, a pattern with one `*` ([`TemplatePattern`], `tenant-*-invoice`),
//! and the settings of the tags it makes. A tag that does not exist and matches a template is
//! created with the template's settings on its first ID request, when the request's token may
//! create that tag (the `tags` right on it, within its `max_tags`). The bodies of
//! `GET /admin/templates` and `PUT`/`DELETE /admin/templates/{name}`.
use serde::{Deserialize, Serialize};

use crate::profile::{DailyOptions, Profile};
use crate::tag::{validate_tag, MAX_TAG_LEN};

/// Most templates a cluster holds.
pub const MAX_TEMPLATES: usize = 256;
/// Longest template name, in bytes.
pub const MAX_TEMPLATE_NAME: usize = 64;

/// Why a template name or pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("template name {0}")]
    Name(String),
    #[error("template pattern {pattern:?}: {why}")]
    Pattern { pattern: String, why: String },
}

/// Checks a template name: 1–64 bytes of `[A-Za-z0-9_.:-]`.
pub fn validate_template_name(name: &str) -> Result<(), TemplateError> {
    if name.len() > MAX_TEMPLATE_NAME {
        return Err(TemplateError::Name(format!("is {} bytes long; the limit is {MAX_TEMPLATE_NAME}", name.len())));
    }
    validate_tag(name).map_err(|e| TemplateError::Name(e.to_string().replace("tag ", "")))
}

/// Which tags a template makes: a tag name with exactly one `*` anywhere, standing for at
/// least one character (`tenant-*-invoice` matches `tenant-42-invoice`, not
/// `tenant--invoice`; `*` alone matches every tag).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TemplatePattern(String);

impl TemplatePattern {
    pub fn parse(raw: &str) -> Result<Self, TemplateError> {
        let bad = |why: String| TemplateError::Pattern { pattern: raw.chars().take(32).collect(), why };
        if raw.len() > MAX_TAG_LEN {
            return Err(bad(format!("longer than {MAX_TAG_LEN} bytes")));
        }
        let Some((prefix, suffix)) = raw.split_once('*') else {
            return Err(bad("has no '*'".into()));
        };
        if suffix.contains('*') {
            return Err(bad("has more than one '*'".into()));
        }
        for part in [prefix, suffix].into_iter().filter(|p| !p.is_empty()) {
            validate_tag(part).map_err(|e| bad(e.to_string().replace("tag ", "the text around '*' ")))?;
        }
        Ok(TemplatePattern(raw.to_string()))
    }

    /// The text before and after the `*`.
    pub fn parts(&self) -> (&str, &str) {
        self.0.split_once('*').unwrap_or((&self.0, ""))
    }

    /// Whether `tag` is made by this pattern: it starts and ends with the text around `*`,
    /// with at least one character between.
    pub fn matches(&self, tag: &str) -> bool {
        let (prefix, suffix) = self.parts();
        tag.len() > prefix.len() + suffix.len() && tag.starts_with(prefix) && tag.ends_with(suffix)
    }

    /// Whether some tag may match both patterns: their prefixes agree as far as the shorter
    /// goes, and so do their suffixes (a conservative test: it may say yes when the lengths
    /// leave no such tag).
    pub fn overlaps(&self, other: &TemplatePattern) -> bool {
        let ((p1, s1), (p2, s2)) = (self.parts(), other.parts());
        (p1.starts_with(p2) || p2.starts_with(p1)) && (s1.ends_with(s2) || s2.ends_with(s1))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TemplatePattern {
    type Error = TemplateError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        TemplatePattern::parse(&s)
    }
}

impl From<TemplatePattern> for String {
    fn from(p: TemplatePattern) -> String {
        p.0
    }
}

impl std::fmt::Display for TemplatePattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `PUT /admin/templates/{name}`: creates the template, or replaces its pattern and settings
/// (tags it made before keep theirs). The settings are those of `POST /admin/tags` without
/// the name, checked as a creation of a tag matching the pattern would be.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PutTemplateRequest {
    /// The tags it makes: a tag name with one `*` anywhere (at least one character).
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = String, max_length = 128, pattern = r"^[A-Za-z0-9_.:\-]*\*[A-Za-z0-9_.:\-]*$", example = "tenant-*-invoice")
    )]
    pub pattern: String,
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1_000_000_000, example = 100))]
    #[serde(deserialize_with = "crate::json_int::i64")]
    pub step: i64,
    /// First ID of each tag it makes (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, example = 1))]
    #[serde(deserialize_with = "crate::json_int::opt_i64")]
    pub max_id: Option<i64>,
    /// Given to each tag it makes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 1024, example = "a tenant's invoice numbers"))]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::json_obj::opt")]
    pub daily: Option<DailyOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 9223372036854775806_i64))]
    #[serde(deserialize_with = "crate::json_int::opt_i64")]
    pub upper_bound: Option<i64>,
}

/// A template as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TemplateInfo {
    pub name: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "tenant-*-invoice"))]
    pub pattern: TemplatePattern,
    pub step: i64,
    /// First ID of each tag it makes (absent: 1, or a daily tag's first number of the day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_id: Option<i64>,
    pub description: String,
    pub profile: Profile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daily: Option<DailyOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<i64>,
    /// Unix ms, leader time.
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// `GET /admin/templates`: every template, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TemplateList {
    pub templates: Vec<TemplateInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_parse_match_and_overlap() {
        let p = |s: &str| TemplatePattern::parse(s).unwrap();
        let t = p("tenant-*-invoice");
        assert!(t.matches("tenant-42-invoice") && t.matches("tenant---invoice"));
        assert!(!t.matches("tenant--invoice"), "the star stands for at least one character");
        assert!(!t.matches("tenant-42-invoices") && !t.matches("xtenant-42-invoice"));
        assert!(p("*").matches("a") && !p("*").matches(""));
        assert!(p("orders-*").matches("orders-eu") && !p("orders-*").matches("orders-"));
        assert!(p("*-eu").matches("x-eu"));
        for bad in ["", "tenant", "a*b*c", "**", "a b*", "x/*", &format!("{}*", "a".repeat(128))] {
            assert!(TemplatePattern::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert!(t.overlaps(&p("tenant-*")) && t.overlaps(&p("*")) && t.overlaps(&p("ten*voice")));
        assert!(!t.overlaps(&p("tenant-*-order")) && !t.overlaps(&p("orders-*")));
        assert!(!p("a-*").overlaps(&p("b-*")));
        assert_eq!(serde_json::to_string(&t).unwrap(), "\"tenant-*-invoice\"");
        assert!(serde_json::from_str::<TemplatePattern>("\"a*b*\"").is_err());
        assert!(validate_template_name("invoices").is_ok());
        assert!(validate_template_name("").is_err() && validate_template_name(&"n".repeat(65)).is_err());
    }
}
