use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand_distr::{Distribution, Exp1};
use std::path::Path;

/// Exponential with the given mean (memoryless; the M in M/M/c).
#[derive(Debug)]
pub struct Exponential {
    mean: f64,
}

pub fn build(p: &Params, _: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let mean = p.positive_duration("mean")?;
    Ok(Box::new(Exponential {
        mean: p.required("mean", "a duration", mean)?,
    }))
}

impl ServiceDistribution for Exponential {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        let e: f64 = Exp1.sample(rng);
        e * self.mean
    }
    fn mean(&self) -> f64 {
        self.mean
    }
    fn second_moment(&self) -> f64 {
        2.0 * self.mean * self.mean
    }
    fn quantile(&self, p: f64) -> f64 {
        -self.mean * (-p).ln_1p()
    }
    fn cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            0.0
        } else {
            -(-x / self.mean).exp_m1()
        }
    }
}
