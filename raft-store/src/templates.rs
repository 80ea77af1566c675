//! Tag templates as the state holds them ([`TemplateRecord`], by name): put (create or
//! replace) and delete, and which template makes a given tag ([`matching`]). At most
//! [`MAX_TEMPLATES`]; no two patterns may match one tag, so the template of a tag is never in
//! doubt. A template makes nothing here: the node proposes the tag's creation (an ordinary
//! one, counted against the creator's budget), so the apply of tags is unchanged.
use std::collections::BTreeMap;

use leaf_api::profile::{DailyOptions, Profile};
use leaf_api::tag::{validate_description, validate_max_id, validate_step};
use leaf_api::template::{validate_template_name, TemplatePattern};
pub use leaf_api::template::{MAX_TEMPLATES, MAX_TEMPLATE_NAME};
use serde::{Deserialize, Serialize};

use crate::apply::{invalid, Applied, ApplyError, ApplyResult, Changes};
use crate::state::State;

/// A template to put: its name, pattern and the settings of the tags it makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewTemplate {
    pub name: String,
    pub pattern: TemplatePattern,
    pub settings: TemplateSettings,
}

/// The settings of the tags a template makes: those of a creation request (the node checks
/// the profile's options when it makes a tag).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateSettings {
    pub step: i64,
    /// First ID of each tag it makes (1 when absent; a daily tag has none).
    pub max_id: Option<i64>,
    pub description: String,
    pub profile: Profile,
    pub daily: Option<DailyOptions>,
    pub upper_bound: Option<i64>,
}

/// A template in the state (its name is the key).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateRecord {
    pub pattern: TemplatePattern,
    pub settings: TemplateSettings,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// Checks what a put may hold, without the state.
pub(crate) fn check_new(t: &NewTemplate) -> Result<(), ApplyError> {
    // The pattern needs no check here: a `TemplatePattern` only decodes from a valid one.
    validate_template_name(&t.name).map_err(|e| invalid(e.to_string()))?;
    let t = &t.settings;
    validate_step(t.step)?;
    validate_max_id(t.max_id.unwrap_or(1))?;
    validate_description(&t.description)?;
    if t.daily.is_some() && t.profile != Profile::Daily {
        return Err(invalid("daily options go with the daily profile only"));
    }
    if let Some(d) = &t.daily {
        if d.digits.is_some_and(|n| !(1..=10).contains(&n)) || d.utc_offset.as_ref().is_some_and(|o| o.len() > 6) {
            return Err(invalid("daily options: digits 1 to 10, a UTC offset of at most 6 bytes"));
        }
    }
    if t.upper_bound.is_some_and(|b| b < t.max_id.unwrap_or(1) || b == i64::MAX) {
        return Err(invalid("the upper bound must be at least the first ID and below 2^63 - 1"));
    }
    Ok(())
}

/// Creates template `t.name` at leader time `at_ms`, or replaces its pattern and settings
/// (the tags it made keep theirs). Refused when its pattern may match a tag another
/// template's matches, or when the state holds [`MAX_TEMPLATES`] others.
pub(crate) fn put(state: &mut State, at_ms: i64, t: &NewTemplate, changes: &mut Changes) -> ApplyResult {
    if let Some((other, _)) =
        state.templates.iter().find(|(name, r)| **name != t.name && r.pattern.overlaps(&t.pattern))
    {
        return Err(ApplyError::TemplateOverlap { name: t.name.clone(), other: other.clone() });
    }
    let created_ms = match state.templates.get(&t.name) {
        Some(old) => old.created_ms,
        None if state.templates.len() >= MAX_TEMPLATES => {
            return Err(invalid(format!("the cluster holds {MAX_TEMPLATES} templates at most")));
        }
        None => at_ms,
    };
    let record =
        TemplateRecord { pattern: t.pattern.clone(), settings: t.settings.clone(), created_ms, updated_ms: at_ms };
    state.templates.insert(t.name.clone(), record.clone());
    changes.templates.insert(t.name.clone());
    Ok(Applied::Template { name: t.name.clone(), record })
}

/// Deletes template `name`; the tags it made stay. Answers the record as it was.
pub(crate) fn delete(state: &mut State, name: &str, changes: &mut Changes) -> ApplyResult {
    let record = state.templates.remove(name).ok_or_else(|| ApplyError::TemplateNotFound(name.to_string()))?;
    changes.templates.insert(name.to_string());
    Ok(Applied::Template { name: name.to_string(), record })
}

/// The template that makes `tag`, if any (at most one: patterns do not overlap).
pub fn matching<'a>(
    templates: &'a BTreeMap<String, TemplateRecord>,
    tag: &str,
) -> Option<(&'a String, &'a TemplateRecord)> {
    templates.iter().find(|(_, r)| r.pattern.matches(tag))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Op;
    use crate::testing::{ap, at};

    fn new(name: &str, pattern: &str) -> NewTemplate {
        let settings = TemplateSettings {
            step: 100,
            max_id: None,
            description: "invoices".into(),
            profile: Profile::Segment,
            daily: None,
            upper_bound: None,
        };
        NewTemplate { name: name.into(), pattern: TemplatePattern::parse(pattern).unwrap(), settings }
    }

    #[test]
    fn templates_are_put_replaced_matched_and_deleted_without_overlaps() {
        let mut s = State::default();
        let mut c = Changes::default();
        let r = put(&mut s, 10, &new("invoices", "tenant-*-invoice"), &mut c).unwrap();
        assert!(matches!(r, Applied::Template { ref name, .. } if name == "invoices"));
        assert_eq!(c.templates, ["invoices".to_string()].into());
        assert_eq!(matching(&s.templates, "tenant-7-invoice").map(|(n, _)| n.as_str()), Some("invoices"));
        assert!(matching(&s.templates, "tenant-7-order").is_none());
        // Another template that may make the same tags is refused; a disjoint one is not.
        let e = put(&mut s, 11, &new("all", "tenant-*"), &mut Changes::default()).unwrap_err();
        assert_eq!(e, ApplyError::TemplateOverlap { name: "all".into(), other: "invoices".into() });
        put(&mut s, 11, &new("orders", "tenant-*-order"), &mut Changes::default()).unwrap();
        // A replacement keeps its creation time, and may overlap its own old pattern.
        let mut wider = new("invoices", "tenant-*-invoice");
        wider.settings.step = 5;
        put(&mut s, 20, &wider, &mut Changes::default()).unwrap();
        assert_eq!((s.templates["invoices"].created_ms, s.templates["invoices"].updated_ms), (10, 20));
        assert_eq!(s.templates["invoices"].settings.step, 5);
        let mut c = Changes::default();
        delete(&mut s, "invoices", &mut c).unwrap();
        assert_eq!(c.templates, ["invoices".to_string()].into());
        assert_eq!(delete(&mut s, "invoices", &mut c).unwrap_err(), ApplyError::TemplateNotFound("invoices".into()));
        assert!(matching(&s.templates, "tenant-7-invoice").is_none());
    }

    #[test]
    fn the_number_of_templates_and_their_fields_are_bounded() {
        let mut s = State::default();
        for i in 0..MAX_TEMPLATES {
            put(&mut s, 1, &new(&format!("t{i}"), &format!("p{i}-*")), &mut Changes::default()).unwrap();
        }
        let e = put(&mut s, 1, &new("one-more", "q-*"), &mut Changes::default()).unwrap_err();
        assert!(e.to_string().contains("templates at most"), "{e}");
        put(&mut s, 2, &new("t0", "p0-*"), &mut Changes::default()).expect("a replacement is no new template");
        // Checked through apply, as a peer's command would be.
        let with = |f: &dyn Fn(&mut NewTemplate)| {
            let mut t = new("x", "x-*");
            f(&mut t);
            t
        };
        let bad = [
            with(&|t| t.name = "bad name".into()),
            with(&|t| t.settings.step = 0),
            with(&|t| t.settings.max_id = Some(-1)),
            with(&|t| t.settings.description = "d".repeat(2000)),
            with(&|t| t.settings.daily = Some(DailyOptions::default())),
            with(&|t| (t.settings.upper_bound, t.settings.max_id) = (Some(0), Some(5))),
        ];
        let mut s = State::default();
        for t in bad {
            let r = ap(&mut s, &at(1, Op::PutTemplate(t.clone())));
            assert!(matches!(r, Err(ApplyError::Invalid(_))), "{t:?}: {r:?}");
        }
        assert!(s.templates.is_empty() && s.audit.records.is_empty());
    }
}
