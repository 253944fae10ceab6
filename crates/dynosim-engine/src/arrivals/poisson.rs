use super::ArrivalProcess;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand_distr::{Distribution, Exp1};

/// Poisson arrivals: exponential gaps with mean 1/rate. A rate that varies in time (a schedule
/// or a sine) is built by [`super::varying`] instead.
#[derive(Debug, Clone)]
pub struct Poisson {
    mean_gap: f64,
}

pub fn build(p: &Params, _base_dir: &std::path::Path) -> Result<Box<dyn ArrivalProcess>> {
    if let Some(varying) = super::varying::build(p, "rate")? {
        return Ok(varying);
    }
    let rate = p.positive_rate("rate")?;
    let rate = p.required("rate", "a rate such as \"9000/min\"", rate)?;
    Ok(Box::new(Poisson {
        mean_gap: 1.0 / rate,
    }))
}

impl ArrivalProcess for Poisson {
    #[inline]
    fn next_arrival(&mut self, now: f64, rng: &mut SimRng) -> Option<f64> {
        let gap: f64 = Exp1.sample(rng);
        Some(now + gap * self.mean_gap)
    }
    fn mean_rate(&self) -> f64 {
        1.0 / self.mean_gap
    }
    fn fresh(&self, _seed: u64, _replication: u64) -> Box<dyn ArrivalProcess> {
        Box::new(self.clone())
    }
    fn is_homogeneous_poisson(&self) -> bool {
        true
    }
}
