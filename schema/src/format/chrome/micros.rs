//! A Chrome `ts` / `dur` value: microseconds given as a JSON number or as a string holding one.
//!
//! Chrome's own loader (catapult's trace viewer divides `ts` by 1000 with JavaScript's implicit
//! number conversion) and Perfetto's JSON importer (`CoerceToTs`, which parses the string) both
//! take `"ts": "200.5"` as 200.5 µs, so this importer does too. A string counts as a number when
//! Rust's `f64::from_str` reads it as a finite value: an optional sign, digits with an optional
//! `.` (`"42."` and `".5"` included) and an optional exponent (`"2e-1"`). Anything else
//! (`"soon"`, `""`, `" 5"`, `"NaN"`, `"inf"`) is still a wrong-type error for the element.

use core::fmt;

use serde::de::{self, Deserialize, Deserializer, Unexpected, Visitor};

/// Microseconds from a JSON number or a numeric string.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Micros(pub(crate) f64);

/// `s` as finite µs, `None` when it is not a number by the rule in the module docs.
pub(crate) fn parse_micros(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|x| x.is_finite())
}

impl<'de> Deserialize<'de> for Micros {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Micros;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of µs, or a string holding one")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Micros, E> {
                Ok(Micros(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Micros, E> {
                Ok(Micros(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Micros, E> {
                Ok(Micros(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Micros, E> {
                parse_micros(v)
                    .map(Micros)
                    .ok_or_else(|| E::invalid_type(Unexpected::Str(v), &self))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::{String, ToString};

    fn read(json: &str) -> Result<f64, String> {
        serde_json::from_str::<Micros>(json)
            .map(|m| m.0)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn numbers_and_numeric_strings_are_microseconds() {
        // The strings Perfetto's CoerceToTs test accepts, with the values it expects / 1000.
        assert_eq!(read("42"), Ok(42.0));
        assert_eq!(read("42.1"), Ok(42.1));
        assert_eq!(read(r#""42""#), Ok(42.0));
        assert_eq!(read(r#""42.1""#), Ok(42.1));
        assert_eq!(read(r#"".42""#), Ok(0.42));
        assert_eq!(read(r#""42.""#), Ok(42.0));
        assert_eq!(read(r#""0.2e-1""#), Ok(0.02));
        assert_eq!(read(r#""-3""#), Ok(-3.0));
    }

    #[test]
    fn strings_that_are_not_numbers_are_refused() {
        for bad in [
            r#""soon""#,
            r#""""#,
            r#"".""#,
            r#"" 5""#,
            r#""5us""#,
            r#""NaN""#,
            r#""inf""#,
            "true",
            "[1]",
        ] {
            let err = read(bad).expect_err(bad);
            assert!(err.starts_with("invalid type"), "{bad}: {err}");
        }
    }
}
