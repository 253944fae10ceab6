//! Batch arrivals: batches at the epochs of a Poisson process, each of a drawn number of
//! requests arriving at the same instant (a page load fanning out, a retry storm).

use super::ArrivalProcess;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::rng::SimRng;
use rand_distr::{Distribution, Exp1, Geometric};
use serde::Deserialize;
use serde_json::Value;

/// The number of requests in a batch.
#[derive(Debug, Clone)]
enum Size {
    /// Every batch this many.
    Fixed(u64),
    /// 1 + a geometric number of failures: P(n) = (1-p)^(n-1) p, mean 1/p.
    Geometric(Geometric),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SizeSpec {
    distribution: String,
    mean: f64,
}

#[derive(Debug, Clone)]
pub struct Batch {
    mean_gap: f64,
    size: Size,
    mean_size: f64,
    /// Requests of the current batch still to arrive at `at`.
    left: u64,
    at: f64,
}

pub fn build(p: &Params, _base_dir: &std::path::Path) -> Result<Box<dyn ArrivalProcess>> {
    let rate = p.positive_rate("rate")?;
    let rate = p.required("rate", "a rate of batches such as \"10/s\"", rate)?;
    let path = p.path("size");
    let (size, mean_size) = match p.get::<Value>("size")? {
        None => return Err(p.error("size", "missing; arrivals \"batch\" needs size, a whole number or { distribution = \"geometric\", mean = 4 }")),
        Some(Value::Object(_)) => {
            let spec: SizeSpec = p.require("size", "a size")?;
            if spec.distribution != "geometric" {
                return Err(Error::config(
                    format!("{path}.distribution"),
                    format!("unknown batch size distribution {:?}; expected geometric", spec.distribution),
                ));
            }
            if !(spec.mean.is_finite() && (1.0..=1e6).contains(&spec.mean)) {
                return Err(Error::config(
                    format!("{path}.mean"),
                    format!("expected a mean batch size from 1 to 10^6, got {}", spec.mean),
                ));
            }
            let g = Geometric::new(1.0 / spec.mean)
                .map_err(|e| Error::config(format!("{path}.mean"), e.to_string()))?;
            (Size::Geometric(g), spec.mean)
        }
        Some(_) => {
            let n = p.whole::<u64>("size", 1, 1, 1_000_000)?;
            (Size::Fixed(n), n as f64)
        }
    };
    Ok(Box::new(Batch {
        mean_gap: 1.0 / rate,
        size,
        mean_size,
        left: 0,
        at: 0.0,
    }))
}

impl ArrivalProcess for Batch {
    fn next_arrival(&mut self, _now: f64, rng: &mut SimRng) -> Option<f64> {
        if self.left == 0 {
            let gap: f64 = Exp1.sample(rng);
            self.at += gap * self.mean_gap;
            self.left = match &self.size {
                Size::Fixed(n) => *n,
                Size::Geometric(g) => 1 + g.sample(rng),
            };
        }
        self.left -= 1;
        Some(self.at)
    }
    fn mean_rate(&self) -> f64 {
        self.mean_size / self.mean_gap
    }
    fn fresh(&self, _seed: u64, _replication: u64) -> Box<dyn ArrivalProcess> {
        Box::new(Batch {
            left: 0,
            at: 0.0,
            ..self.clone()
        })
    }
}
