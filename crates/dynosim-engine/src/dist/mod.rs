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
mod weibull;

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
]);

pub(crate) fn normal() -> statrs::distribution::Normal {
    statrs::distribution::Normal::new(0.0, 1.0).expect("standard normal")
}
