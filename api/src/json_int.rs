//! JSON integers as JSON Schema counts them: `1000`, and also `1000.0` or `1e3` (a number
//! whose value is integral is an `integer`), so the request bodies accept every value their
//! OpenAPI schema allows. A fractional value, or one out of range, is rejected.
use serde::de::{self, Deserializer, Visitor};

struct Integral<T>(std::marker::PhantomData<T>);

macro_rules! integral {
    ($ty:ty, $name:ident, $opt:ident) => {
        impl<'de> Visitor<'de> for Integral<$ty> {
            type Value = $ty;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "an integer from {} to {}", <$ty>::MIN, <$ty>::MAX)
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                <$ty>::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                <$ty>::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
            }

            fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                // The bounds as f64: MIN is exact (a power of two), MAX + 1 is exact too.
                let in_range = v >= <$ty>::MIN as f64 && v < (<$ty>::MAX as f64) + 1.0;
                if v.fract() == 0.0 && in_range {
                    Ok(v as $ty)
                } else {
                    Err(E::invalid_value(de::Unexpected::Float(v), &self))
                }
            }
        }

        /// `#[serde(deserialize_with)]` for a required field. Binary formats (bincode, which
        /// cannot `deserialize_any`) read the plain integer.
        pub fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
            if d.is_human_readable() {
                d.deserialize_any(Integral::<$ty>(std::marker::PhantomData))
            } else {
                <$ty as serde::Deserialize>::deserialize(d)
            }
        }

        /// `#[serde(deserialize_with)]` for an optional field (`null` is `None`).
        pub fn $opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$ty>, D::Error> {
            struct Opt;
            impl<'de> Visitor<'de> for Opt {
                type Value = Option<$ty>;

                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an integer or null")
                }

                fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                    Ok(None)
                }

                fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                    Ok(None)
                }

                fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                    $name(d).map(Some)
                }
            }
            d.deserialize_option(Opt)
        }
    };
}

integral!(i64, i64, opt_i64);
integral!(u32, u32, opt_u32);
integral!(u64, u64, opt_u64);
integral!(u8, u8, opt_u8);
integral!(u16, u16, opt_u16);

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize)]
    struct T {
        #[serde(deserialize_with = "super::i64")]
        a: i64,
        #[serde(default, deserialize_with = "super::opt_i64")]
        b: Option<i64>,
        #[serde(default, deserialize_with = "super::u64")]
        c: u64,
    }

    fn parse(s: &str) -> Result<(i64, Option<i64>, u64), String> {
        serde_json::from_str::<T>(s).map(|t| (t.a, t.b, t.c)).map_err(|e| e.to_string())
    }

    #[test]
    fn integral_numbers_in_any_notation() {
        assert_eq!(parse(r#"{"a": 5}"#), Ok((5, None, 0)));
        assert_eq!(parse(r#"{"a": 1000.0, "b": 1e3, "c": 7.0}"#), Ok((1000, Some(1000), 7)));
        assert_eq!(parse(r#"{"a": -3, "b": null}"#), Ok((-3, None, 0)));
        assert_eq!(parse(r#"{"a": 9223372036854775807}"#), Ok((i64::MAX, None, 0)));
    }

    #[test]
    fn fractions_and_out_of_range_are_refused() {
        for bad in [
            r#"{"a": 1.5}"#,
            r#"{"a": 9223372036854775808}"#,
            r#"{"a": 1e19}"#,
            r#"{"a": "5"}"#,
            r#"{"a": 1, "c": -1}"#,
            r#"{"a": 1, "b": 0.5}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// A quota is stored with bincode (in the replicated state) and read from JSON: both work.
    #[test]
    fn binary_formats_read_the_plain_integer() {
        let q: crate::tokens::Quota = serde_json::from_str(r#"{"rate_per_sec": 100.0, "burst": 2e2}"#).unwrap();
        assert_eq!((q.rate_per_sec, q.burst), (100, 200));
        let bytes = crate::codec::encode(&q).unwrap();
        assert_eq!(crate::codec::decode::<crate::tokens::Quota>(&bytes).unwrap(), q);
        assert!(serde_json::from_str::<crate::tokens::Quota>(r#"{"rate_per_sec": 1.5, "burst": 2}"#).is_err());
    }
}
