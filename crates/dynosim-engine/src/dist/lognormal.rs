use super::{normal, ServiceDistribution};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand_distr::{Distribution, StandardNormal};
use statrs::distribution::ContinuousCDF;
use std::path::Path;

/// Lognormal given by its median and σ (the standard deviation of ln S):
/// mean = median·exp(σ²/2).
#[derive(Debug)]
pub struct LogNormal {
    mu: f64,
    sigma: f64,
}

pub fn build(p: &Params, _: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let median = p.positive_duration("median")?;
    let median = p.required("median", "a duration", median)?;
    let sigma = p.positive("sigma")?;
    let sigma = p.required("sigma", "a positive number (std. dev. of ln S)", sigma)?;
    Ok(Box::new(LogNormal {
        mu: median.ln(),
        sigma,
    }))
}

impl ServiceDistribution for LogNormal {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        let z: f64 = StandardNormal.sample(rng);
        (self.mu + self.sigma * z).exp()
    }
    fn mean(&self) -> f64 {
        (self.mu + 0.5 * self.sigma * self.sigma).exp()
    }
    fn second_moment(&self) -> f64 {
        (2.0 * self.mu + 2.0 * self.sigma * self.sigma).exp()
    }
    fn quantile(&self, p: f64) -> f64 {
        (self.mu + self.sigma * normal().inverse_cdf(p)).exp()
    }
    fn cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            0.0
        } else {
            normal().cdf((x.ln() - self.mu) / self.sigma)
        }
    }
}
