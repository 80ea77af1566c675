//! The rules that span fields, added to the request schemas the types derive, so that a request
//! the document allows is one the node takes (a client generated from the contract learns them
//! before it sends, and schemathesis' default checks hold the node to them):
//! - a tag's fields per profile (`POST /admin/tags`, each tag of a batch, `PUT
//!   /admin/templates/{name}`): one schema per profile, which says which options and bounds that
//!   profile takes ([`tag_profiles`]);
//! - a token's tag patterns: needed with the `ids` or `tags` right, each right and pattern listed
//!   once ([`token_patterns`]);
//! - a gapless series' display format and kept periods per reset ([`gapless_resets`]);
//! - a tag update: at least one field ([`update_needs_a_field`]).
//!
//! One rule is beyond a schema: `upper_bound` at or above `max_id` (a schema cannot compare two
//! fields). A tag created below it would have no ID to hand out, and is refused as exhausted
//! (409 `tag_exhausted`), which the document lists among that operation's answers.
use leaf_api::profile::Profile;
use leaf_api::tokens::Right;
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use utoipa::openapi::{OpenApi, RefOr};

/// Adds every rule to the document's component schemas.
pub(super) fn add(doc: &mut OpenApi) {
    let Some(components) = doc.components.as_mut() else { return };
    let schemas = &mut components.schemas;
    for (name, with_gapless, what) in [
        ("CreateTagRequest", true, "`POST /admin/tags` (and each tag of a batch)"),
        ("PutTemplateRequest", false, "`PUT /admin/templates/{name}`"),
    ] {
        if let Some(RefOr::T(base)) = schemas.remove(name) {
            schemas.insert(name.to_string(), RefOr::T(tag_profiles(base, with_gapless, what)));
        }
    }
    if let Some(RefOr::T(base)) = schemas.remove("GaplessOptions") {
        schemas.insert("GaplessOptions".to_string(), RefOr::T(gapless_resets(base)));
    }
    if let Some(RefOr::T(base)) = schemas.remove("CreateTokenRequest") {
        schemas.insert("CreateTokenRequest".to_string(), RefOr::T(token_patterns(base)));
    }
    if let Some(RefOr::T(base)) = schemas.remove("UpdateTagRequest") {
        schemas.insert("UpdateTagRequest".to_string(), RefOr::T(update_needs_a_field(base)));
    }
}

/// `{"type": "null"}`: the field is absent or null.
fn absent() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::Null)
}

/// One of these JSON values.
fn one_of_values(values: impl IntoIterator<Item = serde_json::Value>) -> ObjectBuilder {
    ObjectBuilder::new().schema_type(SchemaType::AnyValue).enum_values(Some(values))
}

fn profile_name(p: Profile) -> serde_json::Value {
    serde_json::Value::from(p.as_str())
}

/// The base schema, and one schema per profile that must hold with it: which options each
/// profile takes (`daily` only with the daily profile, `gapless` only with the gapless one),
/// and its bounds (a daily tag none, its digits bound it; a gapless series starts at 1; an
/// obfuscated tag's space has at least two IDs).
fn tag_profiles(base: Schema, with_gapless: bool, what: &str) -> Schema {
    let variant = |description: &str, profiles: &[Option<Profile>]| {
        let mut o = ObjectBuilder::new().description(Some(description)).property(
            "profile",
            one_of_values(profiles.iter().map(|p| p.map_or(serde_json::Value::Null, profile_name))),
        );
        if profiles.iter().all(Option::is_some) {
            o = o.required("profile");
        }
        o
    };
    let no_gapless = |o: ObjectBuilder| if with_gapless { o.property("gapless", absent()) } else { o };
    let segment = no_gapless(
        variant(
            "A segment tag (the default) or a monotonic one: any first ID and bound, no options.",
            &[None, Some(Profile::Segment), Some(Profile::Monotonic)],
        )
        .property("daily", absent()),
    );
    let obfuscated = no_gapless(
        variant(
            "An obfuscated tag: its ID space holds two IDs at least (`upper_bound` ≥ 1).",
            &[Some(Profile::Obfuscated)],
        )
        .property("daily", absent())
        .property(
            "upper_bound",
            ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::Integer, Type::Null])).minimum(Some(1)),
        ),
    );
    let daily = no_gapless(
        variant(
            "A daily tag: its options, and no `max_id` or `upper_bound` (its digits bound it).",
            &[Some(Profile::Daily)],
        )
        .property("max_id", absent())
        .property("upper_bound", absent()),
    );
    // A template makes a tag on its first ID request, and a gapless series serves no IDs: a
    // template has no gapless profile.
    let gapless = variant(
        "A gapless series: it starts at 1 (`max_id`, if given, is 1) and has no `upper_bound`.",
        &[Some(Profile::Gapless)],
    )
    .property("daily", absent())
    .property("max_id", one_of_values([serde_json::Value::Null, 1.into()]))
    .property("upper_bound", absent());
    let mut profiles = OneOfBuilder::new().item(segment).item(obfuscated).item(daily);
    if with_gapless {
        profiles = profiles.item(gapless);
    }
    AllOfBuilder::new()
        .item(base)
        .item(profiles)
        .description(Some(format!(
            "{what}: the fields every tag has, and those of its profile (one schema per profile)."
        )))
        .into()
}

/// A gapless series' display format has `{seq}` once, and only the date parts its reset
/// covers (a yearly series no `{mm}`); it keeps periods (`retain_periods`) only if it resets.
fn gapless_resets(base: Schema) -> Schema {
    // Printable ASCII but braces; `{seq}` or `{seq:0N}`, N from 1 to MAX_PAD (19).
    const TEXT: &str = "[ -z|~]*";
    const SEQ: &str = r"\{seq(?::00*(?:[1-9]|1[0-9]))?\}";
    let format = |dates: &str| {
        let pattern = if dates.is_empty() {
            format!("^{TEXT}{SEQ}{TEXT}$")
        } else {
            let date = format!(r"(?:\{{(?:{dates})\}}{TEXT})*");
            format!("^{TEXT}{date}{SEQ}{TEXT}{date}$")
        };
        ObjectBuilder::new()
            .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
            .min_length(Some(1))
            .max_length(Some(leaf_api::gapless::MAX_FORMAT_BYTES))
            .pattern(Some(pattern))
    };
    let reset = |resets: &[Option<&str>]| {
        one_of_values(resets.iter().map(|r| r.map_or(serde_json::Value::Null, serde_json::Value::from)))
    };
    let never = ObjectBuilder::new()
        .description(Some("A series that never resets: no date in its format, no periods to keep."))
        .property("reset", reset(&[None, Some("never")]))
        .property("format", format(""))
        .property("retain_periods", absent());
    let resets = [("year", "yyyy|yy"), ("month", "yyyy|yy|mm"), ("day", "yyyy|yy|mm|dd")].map(|(every, dates)| {
        ObjectBuilder::new()
            .description(Some(format!("A series that resets each {every}: the date parts down to the {every}.")))
            .property("reset", reset(&[Some(every)]))
            .required("reset")
            .property("format", format(dates))
    });
    let [year, month, day] = resets;
    AllOfBuilder::new()
        .item(base)
        .item(OneOfBuilder::new().item(never).item(year).item(month).item(day))
        .description(Some("Options of a gapless tag (`\"gapless\": {...}` when creating one)."))
        .into()
}

/// Tag patterns are needed with a right about tags (`ids`, `tags`), and each is listed once.
fn token_patterns(base: Schema) -> Schema {
    let base = match base {
        Schema::Object(mut o) => {
            for list in ["tags", "rights"] {
                if let Some(RefOr::T(Schema::Array(a))) = o.properties.get_mut(list) {
                    a.unique_items = true;
                }
            }
            Schema::Object(o)
        }
        other => other,
    };
    let untagged_rights = [Right::Cluster, Right::Monitor].map(|r| serde_json::to_value(r).unwrap_or_default());
    let no_tag_rights = ObjectBuilder::new()
        .description(Some("Rights about no tag (`cluster`, `monitor`): patterns are optional."))
        .property("rights", ArrayBuilder::new().items(one_of_values(untagged_rights)));
    let patterns = ObjectBuilder::new()
        .description(Some("Rights about tags (`ids`, `tags`) need one pattern at least."))
        .property("tags", ArrayBuilder::new().min_items(Some(1)))
        .required("tags");
    AllOfBuilder::new()
        .item(base)
        .item(AnyOfBuilder::new().item(no_tag_rights).item(patterns))
        .description(Some("`POST /admin/tokens`."))
        .into()
}

/// `PATCH /admin/tags/{tag}` needs a non-null `step` or `description`, or a gapless series'
/// `max_numbers` or `issues_per_sec` (several may be given; a null one is left unchanged like
/// an absent one).
fn update_needs_a_field(base: Schema) -> Schema {
    let present =
        |name: &str, ty: Type| ObjectBuilder::new().property(name, ObjectBuilder::new().schema_type(ty)).required(name);
    let any = AnyOfBuilder::new()
        .item(present("step", Type::Integer))
        .item(present("description", Type::String))
        .item(present("max_numbers", Type::Integer))
        .item(present("issues_per_sec", Type::Integer));
    AllOfBuilder::new()
        .item(base)
        .item(any)
        .description(Some(
            "`PATCH /admin/tags/{tag}`: absent or null fields are left unchanged; at least one must be given.",
        ))
        .into()
}
