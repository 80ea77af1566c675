//! The configuration reference, `docs/src/configuration.md`, generated from [`Config`] so it
//! cannot go stale: every key's TOML path, environment variable, type and default, and its
//! description from the field's doc comment (through the `schemars` schema). A unit test
//! fails when the page differs from what the code says; `LEAF_BLESS=1 cargo test -p leaf-node
//! --lib config` rewrites it.
use std::fmt::Write;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::{schema, Config, FaultOverrides, Overrides, TlsOverrides, SECRET_KEYS};

/// Where the page lives, from the `node` crate's directory.
const PAGE: &str = "../docs/src/configuration.md";

/// The page's opening: what the configuration is and how its layers combine.
const INTRO: &str = "\
# Configuration reference

<!-- Generated from node/src/config/ by `LEAF_BLESS=1 cargo test -p leaf-node --lib config`.
     Edit the doc comments there, not this page. -->

A node has one configuration. `leaf serve` builds it from four layers, each one overriding the
one before:

1. the defaults shown below, built into the binary: `leaf serve` needs no file;
2. a TOML file, `leaf serve --config leaf.toml`;
3. environment variables: `LEAF_` and the key in capitals for a top-level key
   (`LEAF_NODE_ID=2`), `LEAF_`, the section, `__` and the key for a key of a section
   (`LEAF_SEGMENT__MAX_STEP=500000`). Values are read as TOML values (`true`, `500`,
   `[]`); other `LEAF_*` variables, such as the command-line client's `LEAF_URL`, are ignored;
4. flags of `leaf serve` (`leaf serve --help`), for the keys they set: FLAG_KEYS.

An unknown key is an error, not a silent no-op, and the whole configuration is checked before
the node starts: every problem is reported at once.

Secrets (SECRET_KEYS) are read from the environment as exact strings, never parsed as
numbers, and never printed: not in an error, not in a log line. Prefer the environment to the
file for them.
";

/// The page, as the code says it should be.
pub(super) fn markdown() -> String {
    let schema = schema();
    let defaults = serde_json::to_value(Config::default()).expect("the defaults serialize");
    let Shape::Map(top) = shape(&Config::default()) else { unreachable!("a struct serializes as a map") };
    let secrets: Vec<String> = SECRET_KEYS.iter().map(|k| k.to_string()).collect();
    let mut page = INTRO.replace("FLAG_KEYS", &code_list(&flag_keys())).replace("SECRET_KEYS", &code_list(&secrets));
    let unset: Vec<String> =
        leaf_paths(&top, &defaults).into_iter().filter(|(_, v)| v.is_null()).map(|(k, _)| k).collect();
    let _ = write!(
        page,
        "\n## Example\n\nThe defaults, as a file. Keys unset by default are left out: {}.\n\n```toml\n{}```\n",
        code_list(&unset),
        example()
    );
    page.push_str("\n## Top-level keys\n");
    for (key, _) in top.iter().filter(|(_, s)| !matches!(s, Shape::Map(_))) {
        Entry::new(&schema, &defaults, &[key]).write(&mut page);
    }
    for (key, key_shape) in &top {
        match key_shape {
            Shape::Map(fields) => {
                let _ = write!(page, "\n## `[{key}]`\n\n{}\n", description(property(&schema, &[key])));
                for (field, _) in fields {
                    Entry::new(&schema, &defaults, &[key, field]).write(&mut page);
                }
            }
            Shape::List(Some(item)) => write_table_list(&mut page, &schema, key, item),
            _ => {}
        }
    }
    page
}

/// The defaults as a TOML file.
fn example() -> String {
    toml::to_string(&Config::default()).expect("the defaults are TOML")
}

/// Every key of `top` that is not a section (`node_id`, `segment.max_step`), with its default.
fn leaf_paths<'a>(top: &[(String, Shape)], defaults: &'a Value) -> Vec<(String, &'a Value)> {
    let mut paths = Vec::new();
    for (key, key_shape) in top {
        match key_shape {
            Shape::Map(fields) => {
                paths.extend(fields.iter().map(|(f, _)| (format!("{key}.{f}"), &defaults[key][f])));
            }
            _ => paths.push((key.clone(), &defaults[key])),
        }
    }
    paths
}

/// A `[[key]]` list of tables (`bootstrap_tags`): its item's keys, set in the file only.
fn write_table_list(page: &mut String, schema: &Value, key: &str, item: &Shape) {
    let Shape::Map(fields) = item else { return };
    let items = &property(schema, &[key])["items"];
    let _ = write!(
        page,
        "\n## `[[{key}]]`\n\nEach entry of `{key}`. From the environment, set the whole list at once: `LEAF_{}`.\n",
        key.to_uppercase()
    );
    let required: Vec<&str> =
        items["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    for (field, _) in fields {
        let s = &items["properties"][field];
        let default = match s.get("default") {
            Some(v) => toml_value(v),
            None if required.contains(&field.as_str()) => "none: required".to_string(),
            None => "none".to_string(),
        };
        let entry = Entry {
            name: format!("{key}[].{field}"),
            toml: format!("`{field}` in each `[[{key}]]` table"),
            env: None,
            ty: type_name(s, field),
            default,
            description: description(s),
        };
        entry.write(page);
    }
}

/// One key of the reference.
struct Entry {
    /// Its dotted name, the heading: `segment.max_step`.
    name: String,
    /// Where it goes in the file: "`max_step` in `[segment]`".
    toml: String,
    /// Its environment variable; `None` when it cannot be set alone from the environment.
    env: Option<String>,
    ty: String,
    default: String,
    description: String,
}

impl Entry {
    /// The key at `path` (a top-level key, or a section and a key) of [`Config`].
    fn new(schema: &Value, defaults: &Value, path: &[&str]) -> Entry {
        let s = property(schema, path);
        let default = path.iter().fold(defaults, |v, k| &v[*k]);
        let (key, toml) = match path {
            [key] => (key, format!("`{key}`, at the top of the file")),
            [section, key] => (key, format!("`{key}` in `[{section}]`")),
            _ => unreachable!("keys are at most one section deep"),
        };
        Entry {
            name: path.join("."),
            toml,
            env: Some(format!("LEAF_{}", path.join("__").to_uppercase())),
            ty: type_name(s, key),
            default: toml_value(default),
            description: description(s),
        }
    }

    /// Appends the key's heading, facts and description to `page`.
    fn write(&self, page: &mut String) {
        let _ = write!(page, "\n### `{}`\n\n- TOML: {}\n", self.name, self.toml);
        let _ =
            writeln!(page, "- Environment: {}", self.env.as_deref().map_or("none".to_string(), |e| format!("`{e}`")));
        let _ = writeln!(page, "- Type: {}\n- Default: {}\n\n{}", self.ty, self.default, self.description);
    }
}

/// The schema of the property at `path`.
fn property<'a>(schema: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(schema, |s, k| &s["properties"][*k])
}

/// A property's description: its doc comment.
fn description(s: &Value) -> String {
    s["description"].as_str().unwrap_or_default().to_string()
}

/// A value as TOML writes it; `null` (an unset option) as "none".
fn toml_value(v: &Value) -> String {
    if v.is_null() {
        return "none".to_string();
    }
    let text = toml::Value::try_from(v).map_or_else(|e| format!("({e})"), |t| t.to_string());
    format!("`{text}`")
}

/// The unit of a key, from its name's suffix (`wait_timeout_ms`: milliseconds).
fn unit(key: &str) -> Option<&'static str> {
    let units = [("_ms", "milliseconds"), ("_secs", "seconds"), ("_days", "days"), ("_bytes", "bytes")];
    units.into_iter().find(|(suffix, _)| key.ends_with(suffix)).map(|(_, unit)| unit)
}

/// A readable type of `key`: "integer, milliseconds", "string", "one of `\"a\"`, `\"b\"`",
/// "array of strings", with ", optional" for a key that may be unset.
fn type_name(s: &Value, key: &str) -> String {
    let mut optional = false;
    let s = match s.get("anyOf").and_then(Value::as_array) {
        Some(alts) => {
            optional = alts.iter().any(|a| a["type"] == "null");
            alts.iter().find(|a| a["type"] != "null").unwrap_or(s)
        }
        None => s,
    };
    let consts: Vec<String> = match (s.get("enum"), s.get("oneOf")) {
        (Some(Value::Array(vs)), _) => vs.iter().map(|v| format!("`{v}`")).collect(),
        (_, Some(Value::Array(alts))) => alts.iter().filter_map(|a| a.get("const")).map(|v| format!("`{v}`")).collect(),
        _ => Vec::new(),
    };
    let name = if !consts.is_empty() {
        format!("one of {}", consts.join(", "))
    } else {
        let ty = match &s["type"] {
            Value::Array(ts) => {
                optional |= ts.iter().any(|t| t == "null");
                ts.iter().find(|t| *t != "null").and_then(Value::as_str).unwrap_or("any")
            }
            t => t.as_str().unwrap_or("any"),
        };
        match (ty, s["format"].as_str()) {
            ("array", _) => format!("array of {}s", type_name(&s["items"], "")),
            ("object", _) => "table".to_string(),
            ("string", Some("ip")) => "IP address (string)".to_string(),
            ("string", _) if s["writeOnly"] == true => "string, secret".to_string(),
            (t, _) => t.to_string(),
        }
    };
    let name = match unit(key) {
        Some(unit) => format!("{name}, {unit}"),
        None => name,
    };
    if optional {
        format!("{name}, optional")
    } else {
        name
    }
}

/// The keys that `leaf serve`'s flags set, from an [`Overrides`] with every flag given.
fn flag_keys() -> Vec<String> {
    let every = Overrides {
        node_id: Some(1),
        data_dir: Some("x".into()),
        http_addr: Some(([127, 0, 0, 1], 1).into()),
        peers: Some(Default::default()),
        fault: Some(FaultOverrides { enabled: true }),
        tls: Some(TlsOverrides { cert: Some("x".into()), key: Some("x".into()), ca: Some("x".into()) }),
        insecure_plaintext_peers: Some(true),
    };
    let Shape::Map(top) = shape(&every) else { unreachable!("a struct serializes as a map") };
    let given = serde_json::to_value(&every).expect("the overrides serialize");
    leaf_paths(&top, &given).into_iter().map(|(k, _)| k).collect()
}

/// `a`, `b` and `c`.
fn code_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => quoted.join(""),
    }
}

/// A serialized value's shape, its maps' keys in the order they were written: serde writes a
/// struct's fields in declaration order, which `serde_json::Value` (a sorted map) would lose.
enum Shape {
    Leaf,
    Map(Vec<(String, Shape)>),
    /// A list, with the shape of its first item.
    List(Option<Box<Shape>>),
}

/// The shape of `value` serialized.
fn shape(value: &impl serde::Serialize) -> Shape {
    let json = serde_json::to_string(value).expect("the value serializes");
    serde_json::from_str(&json).expect("JSON reads back")
}

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ShapeVisitor)
    }
}

/// Reads a [`Shape`] from any JSON value.
struct ShapeVisitor;

impl<'de> Visitor<'de> for ShapeVisitor {
    type Value = Shape;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_unit<E>(self) -> Result<Shape, E> {
        Ok(Shape::Leaf)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
        let first = seq.next_element::<Shape>()?.map(Box::new);
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Shape::List(first))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Shape, A::Error> {
        let mut fields = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            fields.push((key, map.next_value()?));
        }
        Ok(Shape::Map(fields))
    }
}

#[cfg(test)]
mod tests {
    use figment::providers::{Format, Toml};

    use super::*;

    /// The committed page is the generated one; `LEAF_BLESS=1` rewrites it.
    #[test]
    fn the_configuration_reference_is_up_to_date() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(PAGE);
        let page = markdown();
        if std::env::var_os("LEAF_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &page).unwrap();
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == page,
            "{} is not what node/src/config/ says: run `LEAF_BLESS=1 cargo test -p leaf-node --lib config` \
             to rewrite it, and commit it",
            path.display()
        );
    }

    /// Every key has a description (a field's doc comment): the page documents it.
    #[test]
    fn every_key_is_described() {
        let page = markdown();
        for block in page.split("\n### ").skip(1) {
            let text = block.split("\n\n").nth(2).unwrap_or_default();
            assert!(text.len() > 10 && !text.starts_with('#'), "no description: {block}");
        }
        assert!(page.contains("### `raft.on_storage_failure`") && page.contains("`LEAF_RAFT__ON_STORAGE_FAILURE`"));
    }

    /// The page's example is the defaults: it loads as [`Config::default`].
    #[test]
    fn the_example_is_the_defaults() {
        let c: Config = figment::Figment::new().merge(Toml::string(&example())).extract().unwrap();
        assert_eq!(c, Config::default());
    }
}
