//! Kind-specific parameters of a scenario section (a distribution's `shape`, a policy's `d`),
//! read with the key path at hand so that every error names the key it is about.

use crate::error::{Error, Result};
use crate::units::{Duration, Rate};
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
                    crate::scenario::explain_serde_error(path, &e.inner().to_string())
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

    pub fn positive_duration(&self, key: &str) -> Result<Option<f64>> {
        self.get::<Duration>(key)?
            .map(|v| check_positive(v.0, &self.path(key)))
            .transpose()
    }

    pub fn positive_rate(&self, key: &str) -> Result<Option<f64>> {
        self.get::<Rate>(key)?
            .map(|v| check_positive(v.0, &self.path(key)))
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

/// serde_json appends " at line 1 column 5" to messages about values it was handed already
/// parsed; those positions mean nothing to the user.
pub fn strip_serde_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}
