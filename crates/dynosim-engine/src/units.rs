//! Durations and rates as they appear in scenarios: a bare number (seconds, or requests per
//! second) or a string with a unit, such as `"306ms"`, `"1.5 min"`, `"9000/min"`, `"150/s"`.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

fn time_unit_seconds(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
        "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        _ => return None,
    })
}

fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let end = text
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-' | '_')))
        .map_or(text.len(), |(i, _)| i);
    // "1e" followed by a unit letter would be misread: only accept an exponent if digits follow.
    let (mut number, mut rest) = text.split_at(end);
    while number.ends_with(['e', 'E', '+', '-']) {
        let cut = number.len() - 1;
        rest = &text[cut..];
        number = &number[..cut];
    }
    let value: f64 = number.replace('_', "").parse().ok()?;
    Some((value, rest.trim()))
}

/// Parses `"306ms"`, `"5 min"`, `"1h"` or a plain number of seconds.
pub fn parse_duration(text: &str) -> Option<f64> {
    let (value, unit) = split_number(text)?;
    let scale = if unit.is_empty() {
        1.0
    } else {
        time_unit_seconds(unit)?
    };
    Some(value * scale).filter(|v| v.is_finite())
}

/// Parses `"9000/min"`, `"150/s"`, `"150 per second"`... or a plain number per second.
pub fn parse_rate(text: &str) -> Option<f64> {
    let (value, rest) = split_number(text)?;
    if rest.is_empty() {
        return Some(value).filter(|v| v.is_finite());
    }
    let unit = rest
        .strip_prefix('/')
        .or_else(|| rest.strip_prefix("per "))
        .or_else(|| rest.strip_prefix("req/"))
        .or_else(|| rest.strip_prefix("rps").map(|_| "s"))?
        .trim();
    let unit = if unit.is_empty() { "s" } else { unit };
    Some(value / time_unit_seconds(unit)?).filter(|v| v.is_finite())
}

macro_rules! unit_type {
    ($name:ident, $parse:ident, $expected:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
        #[serde(transparent)]
        pub struct $name(pub f64);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str($expected)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$name, E> {
                        Ok($name(v))
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$name, E> {
                        Ok($name(v as f64))
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$name, E> {
                        Ok($name(v as f64))
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        $parse(v).map($name).ok_or_else(|| {
                            E::custom(format!(concat!("expected ", $expected, ", got {:?}"), v))
                        })
                    }
                }
                deserializer.deserialize_any(V)
            }
        }
    };
}

unit_type!(
    Duration,
    parse_duration,
    "a duration such as \"306ms\", \"30s\", \"5min\" or a number of seconds",
    "A duration in seconds."
);
unit_type!(
    Rate,
    parse_rate,
    "a rate such as \"9000/min\", \"150/s\" or a number per second",
    "A rate in events per second."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units() {
        assert_eq!(parse_duration("306ms"), Some(0.306));
        assert_eq!(parse_duration("5min"), Some(300.0));
        assert_eq!(parse_duration("1h"), Some(3600.0));
        assert_eq!(parse_duration("1.5 s"), Some(1.5));
        assert_eq!(parse_duration("2"), Some(2.0));
        assert_eq!(parse_duration("1e3ms"), Some(1.0));
        assert_eq!(parse_duration("10 parsecs"), None);
        assert_eq!(parse_duration("ms"), None);
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn rates_with_units() {
        assert_eq!(parse_rate("9000/min"), Some(150.0));
        assert_eq!(parse_rate("150/s"), Some(150.0));
        assert_eq!(parse_rate("150 rps"), Some(150.0));
        assert_eq!(parse_rate("7200 per hour"), Some(2.0));
        assert_eq!(parse_rate("150"), Some(150.0));
        assert_eq!(parse_rate("9000/fortnight"), None);
        assert_eq!(parse_rate("fast"), None);
    }
}
