//! Service-time distributions: a trait, one file per distribution, and a registry mapping the
//! scenario's `service.distribution` name to a builder. Adding a distribution is a new file and
//! one line in [`REGISTRY`].

use crate::error::Result;
use crate::params::Params;
use crate::registry::Registry;
use crate::rng::SimRng;
use std::fmt::Debug;
use std::path::Path;

mod constant;
mod empirical;
mod exponential;
mod gamma;
mod lognormal;
mod quantile_table;
mod shaped;
mod uniform;
mod weibull;

pub use constant::Constant;
pub use empirical::Empirical;
pub use shaped::Shaped;

/// A distribution of service times, in seconds, with its analytic moments so that tests and the
/// stability check need no sampling.
pub trait ServiceDistribution: Send + Sync + Debug {
    fn sample(&self, rng: &mut SimRng) -> f64;
    /// Fills `out` with successive samples: the same values, in the same order, as calling
    /// [`Self::sample`] once per element. Engines draw in blocks to save a dynamic call per
    /// request; a stream of its own per purpose keeps the blocks from changing any result.
    fn sample_into(&self, rng: &mut SimRng, out: &mut [f64]) {
        for x in out {
            *x = self.sample(rng);
        }
    }
    /// E[S].
    fn mean(&self) -> f64;
    /// E[S²] (may be infinite).
    fn second_moment(&self) -> f64;
    /// The p-quantile, 0 < p < 1.
    fn quantile(&self, p: f64) -> f64;
    /// P(S ≤ x).
    fn cdf(&self, x: f64) -> f64;
}

pub type Builder = fn(&Params, &Path) -> Result<Box<dyn ServiceDistribution>>;

/// Every distribution, by the name a scenario uses, with the parameter keys it takes.
pub const REGISTRY: Registry<Builder> = Registry(&[
    ("constant", &["value"], constant::build),
    ("exponential", &["mean"], exponential::build),
    ("lognormal", &["median", "sigma"], lognormal::build),
    ("weibull", &["shape", "scale", "median"], weibull::build),
    ("gamma", &["shape", "scale", "mean"], gamma::build),
    ("empirical", &["file", "unit"], empirical::build),
    ("quantiles", &["percentiles"], quantile_table::build),
    ("uniform", &["min", "max"], uniform::build),
]);

pub(crate) fn normal() -> statrs::distribution::Normal {
    statrs::distribution::Normal::new(0.0, 1.0).expect("standard normal")
}

/// [`from_value`], but a duration of zero as written (`0`, `"0s"`), which [`from_value`]
/// refuses, is `None`: no time at all, and nothing drawn. For optional delays whose default is
/// none (a client's think time, the router's connect time, the app's per-request overhead).
pub fn from_value_or_zero(
    value: &serde_json::Value,
    path: &str,
    base_dir: &Path,
) -> Result<Option<Box<dyn ServiceDistribution>>> {
    if crate::params::is_zero_duration(value) {
        Ok(None)
    } else {
        from_value(value, path, base_dir).map(Some)
    }
}

/// A distribution written inline, as a phase's time or a client's think time: a duration
/// (`"3ms"`, `0.003`: every sample that value) or a table naming one of [`REGISTRY`] with its
/// parameters (`{ distribution = "exponential", mean = "20ms" }`). `path` is the value's key
/// path, for errors.
pub fn from_value(
    value: &serde_json::Value,
    path: &str,
    base_dir: &Path,
) -> Result<Box<dyn ServiceDistribution>> {
    use crate::error::Error;
    use crate::params::check_duration;
    match value {
        serde_json::Value::Object(table) => {
            let kind = match table.get("distribution") {
                Some(serde_json::Value::String(kind)) => kind.as_str(),
                Some(_) => {
                    return Err(Error::config(
                        format!("{path}.distribution"),
                        "expected a distribution name",
                    ))
                }
                None => {
                    return Err(Error::config(
                        format!("{path}.distribution"),
                        format!("missing; expected one of: {}", REGISTRY.names().join(", ")),
                    ))
                }
            };
            let (keys, build) = REGISTRY.lookup(kind).ok_or_else(|| {
                Error::config(
                    format!("{path}.distribution"),
                    format!(
                        "unknown distribution {kind:?}; expected one of: {}",
                        REGISTRY.names().join(", ")
                    ),
                )
            })?;
            let params: serde_json::Map<String, serde_json::Value> = table
                .iter()
                .filter(|(k, _)| k.as_str() != "distribution")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let p = Params::new(path, kind, &params);
            p.allow(keys)?;
            build(&p, base_dir)
        }
        other => {
            let seconds: crate::units::Duration = serde_json::from_value(other.clone())
                .map_err(|e| {
                    Error::config(
                        path,
                        format!(
                            "{}; or a table such as {{ distribution = \"exponential\", mean = \"20ms\" }}",
                            crate::params::strip_serde_position(&e.to_string())
                        ),
                    )
                })?;
            Ok(Box::new(constant::Constant(check_duration(
                seconds.0, path,
            )?)))
        }
    }
}
