use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use std::path::Path;

/// Every request takes the same time.
#[derive(Debug)]
pub struct Constant(pub f64);

pub fn build(p: &Params, _: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let value = p.positive_duration("value")?;
    Ok(Box::new(Constant(p.required(
        "value",
        "a duration",
        value,
    )?)))
}

impl ServiceDistribution for Constant {
    fn sample(&self, _: &mut SimRng) -> f64 {
        self.0
    }
    fn mean(&self) -> f64 {
        self.0
    }
    fn second_moment(&self) -> f64 {
        self.0 * self.0
    }
    fn quantile(&self, _: f64) -> f64 {
        self.0
    }
    fn cdf(&self, x: f64) -> f64 {
        if x >= self.0 {
            1.0
        } else {
            0.0
        }
    }
}
