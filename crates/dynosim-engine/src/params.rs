//! Kind-specific parameters of a scenario section (a distribution's `shape`, a policy's `d`),
//! read with the key path at hand so that every error names the key it is about.

use crate::error::{Error, Result};
use crate::units::{Duration, Rate, MAX_RATE, MIN_DURATION};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The parameters given to one kind (e.g. `weibull`) in one section (e.g. `service`).
pub struct Params<'a> {
    section: &'a str,
    kind: &'a str,
    map: &'a Map<String, Value>,
}

impl<'a> Params<'a> {
    pub fn new(section: &'a str, kind: &'a str, map: &'a Map<String, Value>) -> Self {
        Params { section, kind, map }
    }

    pub fn path(&self, key: &str) -> String {
        format!("{}.{}", self.section, key)
    }

    pub fn error(&self, key: &str, message: impl Into<String>) -> Error {
        Error::config(self.path(key), message)
    }

    /// Rejects every key that this kind does not take, naming the ones it does.
    pub fn allow(&self, keys: &[&str]) -> Result<()> {
        for key in self.map.keys() {
            if !keys.contains(&key.as_str()) {
                let expected = if keys.is_empty() {
                    "it takes no parameters".to_string()
                } else {
                    format!("expected one of: {}", keys.join(", "))
                };
                return Err(self.error(
                    key,
                    format!(
                        "unknown key for {} {:?}; {expected}",
                        self.section, self.kind
                    ),
                ));
            }
        }
        Ok(())
    }

    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        match self.map.get(key) {
            None => Ok(None),
            Some(value) => serde_path_to_error::deserialize(value.clone())
                .map(Some)
                .map_err(|e| {
                    let inner = e.path().to_string();
                    let path = match inner.as_str() {
                        "." => self.path(key),
                        i if i.starts_with('[') => format!("{}{i}", self.path(key)),
                        i => format!("{}.{i}", self.path(key)),
                    };
                    explain_serde_error(path, &e.inner().to_string())
                }),
        }
    }

    pub fn require<T: DeserializeOwned>(&self, key: &str, what: &str) -> Result<T> {
        self.get(key)?.ok_or_else(|| {
            self.error(
                key,
                format!("missing; {} {:?} needs {what}", self.section, self.kind),
            )
        })
    }

    /// A number that must be finite and > 0.
    pub fn positive(&self, key: &str) -> Result<Option<f64>> {
        self.get::<f64>(key)?
            .map(|v| check_positive(v, &self.path(key)))
            .transpose()
    }

    /// A duration of at least [`MIN_DURATION`].
    pub fn positive_duration(&self, key: &str) -> Result<Option<f64>> {
        self.get::<Duration>(key)?
            .map(|v| check_duration(v.0, &self.path(key)))
            .transpose()
    }

    /// A rate from just above 0 to [`MAX_RATE`].
    pub fn positive_rate(&self, key: &str) -> Result<Option<f64>> {
        self.get::<Rate>(key)?
            .map(|v| {
                let rate = check_positive(v.0, &self.path(key))?;
                if rate > MAX_RATE {
                    return Err(self.error(
                        key,
                        format!("must be at most 1e9 per second (1 ns between events), got {rate}"),
                    ));
                }
                Ok(rate)
            })
            .transpose()
    }

    pub fn required<T>(&self, key: &str, what: &str, value: Option<T>) -> Result<T> {
        value.ok_or_else(|| {
            self.error(
                key,
                format!("missing; {} {:?} needs {what}", self.section, self.kind),
            )
        })
    }

    /// A whole number from `min` to `max` (`default` when absent), converted to the type the
    /// engine keeps it in: no value is ever truncated on the way.
    pub fn whole<T: TryFrom<i64>>(&self, key: &str, default: i64, min: i64, max: i64) -> Result<T> {
        whole(self.get(key)?.unwrap_or(default), &self.path(key), min, max)
    }

    /// Exactly one of two alternative keys (e.g. Weibull `scale` or `median`).
    pub fn one_of(&self, a: &str, b: &str) -> Result<&'static str> {
        match (self.has(a), self.has(b)) {
            (true, false) => Ok("first"),
            (false, true) => Ok("second"),
            (true, true) => Err(self.error(b, format!("give either {a} or {b}, not both"))),
            (false, false) => Err(self.error(
                a,
                format!("missing; {} {:?} needs {a} or {b}", self.section, self.kind),
            )),
        }
    }
}

pub fn check_positive(value: f64, path: &str) -> Result<f64> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(Error::config(
            path,
            format!("must be a positive number, got {value}"),
        ))
    }
}

/// A duration that must be finite and at least [`MIN_DURATION`] (1 ns).
pub fn check_duration(seconds: f64, path: &str) -> Result<f64> {
    if seconds.is_finite() && seconds >= MIN_DURATION {
        Ok(seconds)
    } else if seconds > 0.0 {
        Err(Error::config(
            path,
            format!("must be a duration of at least 1 ns, got {seconds:e} s"),
        ))
    } else {
        Err(Error::config(
            path,
            format!("must be a positive duration, got {seconds} s"),
        ))
    }
}

/// `value` as a `T` if it is from `min` to `max`; the error names the range.
pub fn whole<T: TryFrom<i64>>(value: i64, path: &str, min: i64, max: i64) -> Result<T> {
    if value < min || value > max {
        let range = if max == i64::MAX {
            format!(">= {min}")
        } else {
            format!(">= {min} and <= {max}")
        };
        return Err(Error::config(
            path,
            format!("must be a whole number {range}, got {value}"),
        ));
    }
    T::try_from(value).map_err(|_| Error::config(path, format!("out of range: {value}")))
}

/// serde_json appends " at line 1 column 5" to messages about values it was handed already
/// parsed; those positions mean nothing to the user.
pub fn strip_serde_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Rewords serde's messages for people editing a scenario: a missing field is reported at its
/// own path, integer types are called whole numbers.
pub fn explain_serde_error(path: String, message: &str) -> Error {
    let message = strip_serde_position(message);
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        let path = if path.is_empty() {
            field.to_string()
        } else {
            format!("{path}.{field}")
        };
        return Error::config(path, "missing");
    }
    let message = message
        .replace("expected i64", "expected a whole number")
        .replace("expected u64", "expected a whole number from 0 to 2^64-1")
        .replace("expected f64", "expected a number");
    Error::config(path, message)
}

/// Whether a duration as written is zero (`0`, `"0s"`), which [`dist::from_value`] refuses.
pub fn is_zero_duration(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => crate::units::parse_duration(s) == Some(0.0),
        _ => false,
    }
}
