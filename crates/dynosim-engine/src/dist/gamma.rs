use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand_distr::Distribution;
use statrs::distribution::ContinuousCDF;
use std::path::Path;

/// Gamma given by its shape k and either its scale θ or its mean kθ.
#[derive(Debug)]
pub struct Gamma {
    shape: f64,
    scale: f64,
    sampler: rand_distr::Gamma<f64>,
    analytic: statrs::distribution::Gamma,
}

pub fn build(p: &Params, _: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let shape = p.positive("shape")?;
    let shape = p.required("shape", "a positive number", shape)?;
    let scale = match p.one_of("scale", "mean")? {
        "first" => p.positive_duration("scale")?.unwrap(),
        _ => p.positive_duration("mean")?.unwrap() / shape,
    };
    let invalid = |e: &dyn std::fmt::Display| p.error("shape", e.to_string());
    Ok(Box::new(Gamma {
        shape,
        scale,
        sampler: rand_distr::Gamma::new(shape, scale).map_err(|e| invalid(&e))?,
        analytic: statrs::distribution::Gamma::new(shape, 1.0 / scale).map_err(|e| invalid(&e))?,
    }))
}

impl ServiceDistribution for Gamma {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        self.sampler.sample(rng)
    }
    fn mean(&self) -> f64 {
        self.shape * self.scale
    }
    fn second_moment(&self) -> f64 {
        self.shape * (self.shape + 1.0) * self.scale * self.scale
    }
    fn quantile(&self, p: f64) -> f64 {
        // Not statrs's `inverse_cdf`: its few bisection steps and unguarded Newton steps return
        // NaN for shape <= 1 at small p and miss far tails. Bisection on the cdf, geometric
        // while the bracket spans more than a factor of two, runs to adjacent floats.
        if p <= 0.0 {
            return 0.0;
        }
        if p >= 1.0 {
            return f64::INFINITY;
        }
        let (mut lo, mut hi) = (self.mean(), self.mean());
        while lo > 0.0 && self.analytic.cdf(lo) >= p {
            lo /= 2.0;
        }
        while self.analytic.cdf(hi) < p {
            hi *= 2.0;
        }
        loop {
            let mid = if lo > 0.0 && hi > 2.0 * lo {
                lo.sqrt() * hi.sqrt()
            } else {
                0.5 * (lo + hi)
            };
            if mid <= lo || mid >= hi {
                return hi;
            }
            if self.analytic.cdf(mid) < p {
                lo = mid;
            } else {
                hi = mid;
            }
        }
    }
    fn cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            0.0
        } else {
            self.analytic.cdf(x)
        }
    }
}
