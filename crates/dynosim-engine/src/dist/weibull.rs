use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand_distr::{Distribution, Exp1};
use statrs::function::gamma::gamma;
use std::path::Path;

/// Weibull given by its shape k and either its scale s or its median s·(ln 2)^(1/k).
/// Shape < 1 gives the heavy right tail of web request times (the seed study uses 0.46 and 0.8).
#[derive(Debug)]
pub struct Weibull {
    shape: f64,
    scale: f64,
}

pub fn build(p: &Params, _: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let shape = p.positive("shape")?;
    let shape = p.required("shape", "a positive number", shape)?;
    let scale = match p.one_of("scale", "median")? {
        "first" => p.positive_duration("scale")?.unwrap(),
        _ => p.positive_duration("median")?.unwrap() / std::f64::consts::LN_2.powf(1.0 / shape),
    };
    Ok(Box::new(Weibull { shape, scale }))
}

impl ServiceDistribution for Weibull {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        // Inverse transform on an exponential variate: s·E^(1/k).
        let e: f64 = Exp1.sample(rng);
        self.scale * e.powf(1.0 / self.shape)
    }
    fn mean(&self) -> f64 {
        self.scale * gamma(1.0 + 1.0 / self.shape)
    }
    fn second_moment(&self) -> f64 {
        self.scale * self.scale * gamma(1.0 + 2.0 / self.shape)
    }
    fn quantile(&self, p: f64) -> f64 {
        self.scale * (-(-p).ln_1p()).powf(1.0 / self.shape)
    }
    fn cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            0.0
        } else {
            -(-(x / self.scale).powf(self.shape)).exp_m1()
        }
    }
}
