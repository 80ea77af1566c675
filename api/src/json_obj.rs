//! An object field that JSON must send as an object. serde's derived `Deserialize` of a struct
//! also takes a sequence of its fields in order, so `"daily": []` was a `daily` tag with every
//! option at its default, where the schema says object (schemathesis found it: 201 for a
//! schema-violating body). [`opt`] takes an object or `null` from JSON and refuses the rest;
//! binary formats (bincode, which cannot `deserialize_any`) read the plain value.
use std::marker::PhantomData;

use serde::de::{self, value::MapAccessDeserializer, Deserialize, Deserializer, MapAccess, Visitor};

/// `#[serde(default, deserialize_with = "crate::json_obj::opt")]` for an `Option` of a struct.
pub fn opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Obj<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Obj<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object or null")
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            T::deserialize(MapAccessDeserializer::new(map)).map(Some)
        }
    }
    if d.is_human_readable() {
        d.deserialize_any(Obj(PhantomData))
    } else {
        Option::<T>::deserialize(d)
    }
}

#[cfg(test)]
mod tests {
    use crate::profile::DailyOptions;
    use crate::types::CreateTagRequest;

    fn parse(body: &str) -> Result<CreateTagRequest, String> {
        serde_json::from_str(body).map_err(|e| e.to_string())
    }

    #[test]
    fn an_options_field_is_an_object_or_null_and_never_an_array() {
        let e = parse(r#"{"tag":"t","step":10,"profile":"daily","daily":[]}"#).unwrap_err();
        assert!(e.contains("an object or null"), "{e}");
        assert!(parse(r#"{"tag":"t","step":10,"profile":"gapless","gapless":[]}"#).is_err());
        assert!(parse(r#"{"tag":"t","step":10,"daily":"x"}"#).is_err());
        assert!(parse(r#"{"tag":"t","step":10,"daily":null}"#).unwrap().daily.is_none());
        assert!(parse(r#"{"tag":"t","step":10}"#).unwrap().daily.is_none());
        let daily = parse(r#"{"tag":"t","step":10,"profile":"daily","daily":{"digits":8}}"#).unwrap().daily;
        assert_eq!(daily.map(|d| d.digits), Some(Some(8)));
        // Unknown fields inside the object are still refused (the struct denies them).
        assert!(parse(r#"{"tag":"t","step":10,"profile":"daily","daily":{"digits":8,"x":1}}"#).is_err());
        assert_eq!(parse(r#"{"tag":"t","step":10,"daily":{}}"#).unwrap().daily, Some(DailyOptions::default()));
    }
}
