//! Durations and rates as they appear in scenarios: a bare number (seconds, or requests per
//! second) or a string with a unit, such as `"306ms"`, `"1.5 min"`, `"9000/min"`, `"150/s"`.

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// The shortest duration a scenario may give (1 ns): shorter ones are slips of a unit or an
/// exponent (`1e-16`, `1e-320s`), far below any time a request takes, and the simulated
/// clock could not tell them apart over a run.
pub const MIN_DURATION: f64 = 1e-9;

/// The highest rate a scenario may give: one event per [`MIN_DURATION`] on average.
pub const MAX_RATE: f64 = 1.0 / MIN_DURATION;

/// Seconds in one of the time units a scenario may name (`ms`, `s`, `min`...), or None.
pub fn time_unit_seconds(unit: &str) -> Option<f64> {
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

/// Splits `text` (trimmed) into a decimal number and what follows it, trimmed. The number is
/// what TOML would read as one: an optional sign, digits (`_` only between two digits), an
/// optional fraction and an optional exponent with digits; no `nan` or `inf`. Whatever
/// follows is left for the caller to match whole, so that `"150 rpsXYZ"` is an error rather
/// than 150 per second.
fn split_number(text: &str) -> Option<(f64, &str)> {
    let text = text.trim();
    let bytes = text.as_bytes();
    let mut i = 0;
    // Digits, with `_` allowed between two of them; returns how many digits were read.
    let digits = |i: &mut usize| {
        let mut count = 0;
        while *i < bytes.len() {
            match bytes[*i] {
                b'0'..=b'9' => count += 1,
                b'_' if count > 0 && bytes.get(*i + 1).is_some_and(u8::is_ascii_digit) => {}
                _ => break,
            }
            *i += 1;
        }
        count
    };
    if matches!(bytes.first(), Some(b'+' | b'-')) {
        i += 1;
    }
    let mut mantissa = digits(&mut i);
    if bytes.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return None;
    }
    // An exponent only when digits follow: in "1e" or "5 exabytes" the `e` starts the unit.
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(bytes.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digits(&mut j) > 0 {
            i = j;
        }
    }
    let (number, rest) = text.split_at(i);
    let value: f64 = number.replace('_', "").parse().ok()?;
    // -0 is 0: it would otherwise print as "-0" in messages about a value that must be > 0.
    Some((value + 0.0, rest.trim()))
}

/// Parses `"306ms"`, `"5 min"`, `"1h"` or a plain number of seconds: a number and a time
/// unit, nothing else.
pub fn parse_duration(text: &str) -> Option<f64> {
    let (value, unit) = split_number(text)?;
    let scale = if unit.is_empty() {
        1.0
    } else {
        time_unit_seconds(unit)?
    };
    Some(value * scale).filter(|v| v.is_finite())
}

/// Parses `"9000/min"`, `"150/s"`, `"150 per second"`, `"150 req/s"`, `"150 rps"` or a plain
/// number per second: a number and one of those forms, nothing else.
pub fn parse_rate(text: &str) -> Option<f64> {
    let (value, rest) = split_number(text)?;
    let per = if rest.is_empty() || rest == "rps" {
        1.0
    } else {
        let unit = rest
            .strip_prefix('/')
            .or_else(|| rest.strip_prefix("per "))
            .or_else(|| rest.strip_prefix("req/"))?
            .trim_start();
        time_unit_seconds(unit)?
    };
    Some(value / per).filter(|v| v.is_finite())
}

/// Parses `"8GB"`, `"512 MiB"`, `"1.5e9"` (bytes): a number and a unit of memory, decimal
/// (kB, MB, GB, TB) or binary (KiB, MiB, GiB, TiB), or a plain number of bytes.
pub fn parse_bytes(text: &str) -> Option<f64> {
    let (value, unit) = split_number(text)?;
    let scale = match unit {
        "" | "B" => 1.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some(value * scale).filter(|v| v.is_finite())
}

/// An amount of memory as people read it: "80 GB", "512 MB", "3.2 kB" (decimal units).
pub fn format_bytes(bytes: f64) -> String {
    let (value, unit) = [(1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")]
        .into_iter()
        .find(|&(scale, _)| bytes >= scale)
        .map_or((bytes, "B"), |(scale, unit)| (bytes / scale, unit));
    let digits = if value >= 10.0 || unit == "B" { 0 } else { 1 };
    let shown = format!("{value:.digits$}");
    format!("{} {unit}", shown.strip_suffix(".0").unwrap_or(&shown))
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
unit_type!(
    Bytes,
    parse_bytes,
    "an amount of memory such as \"8GB\", \"512MiB\" or a number of bytes",
    "An amount of memory in bytes."
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
    fn durations_are_a_number_and_a_unit_and_nothing_else() {
        assert_eq!(parse_duration("1e5ms"), Some(100.0));
        assert_eq!(parse_duration("5 min "), Some(300.0));
        assert_eq!(parse_duration(" .5s"), Some(0.5));
        assert_eq!(parse_duration("1_000ms"), Some(1.0));
        assert_eq!(parse_duration("+2s"), Some(2.0));
        // -0 parses (range checks reject it with their own message) and prints as 0.
        assert_eq!(parse_duration("-0").map(f64::to_bits), Some(0f64.to_bits()));
        assert_eq!(parse_duration("-3s"), Some(-3.0));
        for bad in [
            "1e",
            "1e+",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "infinity",
            "1..2s",
            "1.2.3s",
            ".s",
            "5 minutes ago",
            "5 mins2",
            "1__0s",
            "_1s",
            "1_s",
            "1_",
            "s5",
            "1e400",
            "5 s s",
            "1.5.",
            "--1",
            "0x10",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn memory_amounts() {
        assert_eq!(parse_bytes("8GB"), Some(8e9));
        assert_eq!(parse_bytes("512 MiB"), Some(512.0 * 1024.0 * 1024.0));
        assert_eq!(parse_bytes("1e6"), Some(1e6));
        assert_eq!(parse_bytes("8 gigs"), None);
        assert_eq!(parse_bytes("8GBs"), None);
        assert_eq!(format_bytes(8e10), "80 GB");
        assert_eq!(format_bytes(3.2e9), "3.2 GB");
        assert_eq!(format_bytes(512.0), "512 B");
        assert_eq!(format_bytes(8e9), "8 GB");
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

    #[test]
    fn rates_are_a_number_and_a_known_form_and_nothing_else() {
        assert_eq!(parse_rate("150rps"), Some(150.0));
        assert_eq!(parse_rate("1_000/min"), Some(1000.0 / 60.0));
        assert_eq!(parse_rate("150 req/s"), Some(150.0));
        assert_eq!(parse_rate("150 / min"), Some(2.5));
        assert_eq!(parse_rate("1e2/s "), Some(100.0));
        for bad in [
            "150 rpsXYZ",
            "150 rps/min",
            "150/",
            "150 per",
            "150 req/",
            "150/sXYZ",
            "nan/s",
            "inf",
            "1..2/s",
            "1e/s",
            "150 /fortnight",
            "per second",
            "150 per  second x",
        ] {
            assert_eq!(parse_rate(bad), None, "{bad:?}");
        }
    }
}
