//! Timeouts and caps: how long a router, a client or a router's queue waits for a response
//! before answering with an error, and how many requests a router takes at once. The engines
//! act on them (see `crate::sim`); this module builds them from the scenario.
//!
//! Every timeout is a duration or a distribution (clients' patience varies), or `"off"`.

use crate::dist::{self, ServiceDistribution};
use crate::error::{Error, Result};
use serde_json::Value;
use std::path::Path;

/// A timeout: a fixed time, or one drawn per request.
#[derive(Debug)]
pub struct Timeout {
    dist: Box<dyn ServiceDistribution>,
    /// The time when every request gets the same (a duration, or a distribution of no
    /// spread): the engine's deadlines then come in the order they were set, and nothing is
    /// drawn.
    constant: Option<f64>,
}

impl Timeout {
    /// A fixed timeout of `seconds`.
    pub fn fixed(seconds: f64) -> Timeout {
        Timeout {
            dist: Box::new(dist::Constant(seconds)),
            constant: Some(seconds),
        }
    }

    /// Builds `value` at key `path`: `"off"` (or `false`) is None; otherwise a positive
    /// duration or a distribution.
    pub fn build(value: &Value, path: &str, base_dir: &Path) -> Result<Option<Timeout>> {
        match value {
            Value::String(s) if s == "off" => return Ok(None),
            Value::Bool(false) => return Ok(None),
            _ => {}
        }
        if crate::params::is_zero_duration(value) {
            return Err(Error::config(
                path,
                "a timeout of zero would answer every request with an error; give a positive \
                 duration, a distribution, or \"off\"",
            ));
        }
        let dist = dist::from_value(value, path, base_dir)?;
        let (mean, second) = (dist.mean(), dist.second_moment());
        let constant = (second - mean * mean <= mean * mean * 1e-15).then_some(mean);
        Ok(Some(Timeout { dist, constant }))
    }

    /// Builds an optional key: left out, `default`.
    pub fn build_or(
        value: Option<&Value>,
        path: &str,
        base_dir: &Path,
        default: Option<f64>,
    ) -> Result<Option<Timeout>> {
        match value {
            None => Ok(default.map(Timeout::fixed)),
            Some(v) => Timeout::build(v, path, base_dir),
        }
    }

    /// The time when it is the same for every request.
    #[inline]
    pub fn constant(&self) -> Option<f64> {
        self.constant
    }

    /// One request's timeout (nothing is drawn when it is constant).
    #[inline]
    pub fn draw(&self, rng: &mut crate::rng::SimRng) -> f64 {
        match self.constant {
            Some(t) => t,
            None => self.dist.sample(rng),
        }
    }

    /// The timeout's distribution (for theory: a patience's mean, P(T ≤ x)).
    pub fn distribution(&self) -> &dyn ServiceDistribution {
        self.dist.as_ref()
    }
}

/// `router.max_in_flight`: requests a router holds at once (waiting at it, or sent to a dyno
/// and not yet answered), a number or `"N/dyno"`; None: no cap.
pub fn build_cap(value: Option<&Value>, dynos: u32) -> Result<Option<u64>> {
    const PATH: &str = "router.max_in_flight";
    let expected = "expected a whole number >= 1, \"N/dyno\" (e.g. \"200/dyno\") or \"off\"";
    let per = |n: f64, unit: u64| -> Result<Option<u64>> {
        if n.fract() != 0.0 || !(1.0..=1e12).contains(&n) {
            return Err(Error::config(PATH, format!("{expected}, got {n}")));
        }
        Ok(Some(n as u64 * unit))
    };
    match value {
        None => Ok(None),
        Some(Value::String(s)) if s == "off" => Ok(None),
        Some(Value::Number(n)) => per(n.as_f64().unwrap_or(f64::NAN), 1),
        Some(Value::String(s)) => {
            let Some(count) = s.trim().strip_suffix("/dyno") else {
                return Err(Error::config(PATH, format!("{expected}, got {s:?}")));
            };
            match count.trim().parse::<f64>() {
                Ok(n) => per(n, u64::from(dynos)),
                Err(_) => Err(Error::config(PATH, format!("{expected}, got {s:?}"))),
            }
        }
        Some(other) => Err(Error::config(PATH, format!("{expected}, got {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn off_durations_and_distributions() {
        let dir = Path::new(".");
        assert!(Timeout::build(&json!("off"), "t", dir).unwrap().is_none());
        let t = Timeout::build(&json!("30s"), "t", dir).unwrap().unwrap();
        assert_eq!(t.constant(), Some(30.0));
        let t = Timeout::build(
            &json!({"distribution": "exponential", "mean": "2s"}),
            "t",
            dir,
        )
        .unwrap()
        .unwrap();
        assert_eq!(t.constant(), None);
        assert!((t.distribution().mean() - 2.0).abs() < 1e-12);
        let e = Timeout::build(&json!("0s"), "router.timeout", dir).unwrap_err();
        assert!(e.to_string().contains("router.timeout"), "{e}");
        assert!(Timeout::build(&json!("soon"), "t", dir).is_err());
        assert_eq!(
            Timeout::build_or(None, "t", dir, Some(30.0))
                .unwrap()
                .unwrap()
                .constant(),
            Some(30.0)
        );
    }

    #[test]
    fn caps_per_router_or_per_dyno() {
        assert_eq!(build_cap(None, 10).unwrap(), None);
        assert_eq!(build_cap(Some(&json!(50)), 10).unwrap(), Some(50));
        assert_eq!(build_cap(Some(&json!("200/dyno")), 10).unwrap(), Some(2000));
        assert_eq!(build_cap(Some(&json!("off")), 10).unwrap(), None);
        for bad in [
            json!(0),
            json!(1.5),
            json!("200"),
            json!("x/dyno"),
            json!(true),
        ] {
            let e = build_cap(Some(&bad), 10).unwrap_err().to_string();
            assert!(e.contains("router.max_in_flight"), "{e}");
        }
    }
}
