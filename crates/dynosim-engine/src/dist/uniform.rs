use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand::Rng;
use std::path::Path;

/// Every time between `min` and `max` equally likely: a fixed timeout checked on a period
/// (gunicorn's master looks at its workers about once a second, so `--timeout 30` kills
/// between 30 and 31 s), or a spread of clients' patience with known bounds.
#[derive(Debug)]
pub struct Uniform {
    min: f64,
    max: f64,
}

pub fn build(p: &Params, _: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let min = p.positive_duration("min")?;
    let min = p.required("min", "a duration", min)?;
    let max = p.positive_duration("max")?;
    let max = p.required("max", "a duration", max)?;
    if max < min {
        return Err(p.error(
            "max",
            format!("must be at least min ({min} s), got {max} s"),
        ));
    }
    Ok(Box::new(Uniform { min, max }))
}

impl ServiceDistribution for Uniform {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        // One draw in [0, 1): min + (max − min)·U, exactly min when the two are equal.
        let u: f64 = rng.random();
        self.min + (self.max - self.min) * u
    }
    fn mean(&self) -> f64 {
        0.5 * (self.min + self.max)
    }
    fn second_moment(&self) -> f64 {
        // E[S²] = (a² + ab + b²) / 3.
        (self.min * self.min + self.min * self.max + self.max * self.max) / 3.0
    }
    fn quantile(&self, p: f64) -> f64 {
        self.min + (self.max - self.min) * p
    }
    fn cdf(&self, x: f64) -> f64 {
        if x <= self.min {
            0.0
        } else if x >= self.max {
            1.0
        } else {
            (x - self.min) / (self.max - self.min)
        }
    }
}
