//! `bootstrap_tags`: the tags a new cluster creates once it has a leader, with their defaults
//! and checks.
use std::collections::HashSet;

use leaf_api::tag::{validate_max_id, validate_step, validate_tag};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A tag to create at first start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BootstrapTag {
    /// Tag name, 1–128 characters of `[A-Za-z0-9_.:-]`. Required.
    pub tag: String,
    /// The tag's stored step, from 1 to 1000000000. Required.
    pub step: i64,
    /// First ID handed out. Default `1` (Leaf's column default).
    #[serde(default = "one")]
    pub max_id: i64,
    /// Free text for people. Default empty.
    #[serde(default)]
    pub description: String,
}

fn one() -> i64 {
    1
}

/// The default `bootstrap_tags`: Leaf's sample tag, so a fresh node serves IDs at once.
pub(super) fn default_tags() -> Vec<BootstrapTag> {
    vec![BootstrapTag {
        tag: "leaf-segment-test".into(),
        step: 2000,
        max_id: 1,
        description: "Test leaf Segment Mode Get Id".into(),
    }]
}

/// Appends what is wrong with `tags` to `errs`: each tag's fields, and a tag listed twice.
pub(super) fn validate(tags: &[BootstrapTag], errs: &mut Vec<String>) {
    let mut seen = HashSet::new();
    for b in tags {
        for r in [validate_tag(&b.tag), validate_step(b.step), validate_max_id(b.max_id)] {
            if let Err(e) = r {
                errs.push(format!("bootstrap tag {:?}: {e}", b.tag));
            }
        }
        if !seen.insert(&b.tag) {
            errs.push(format!("bootstrap tag {:?} is listed twice", b.tag));
        }
    }
}
