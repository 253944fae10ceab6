//! A Markov-modulated on/off source (an interrupted Poisson process): Poisson arrivals at
//! `rate` while on, none while off; on and off periods are exponential with means `on` and
//! `off`. Burstier than Poisson at the same mean rate (counts over long intervals vary more
//! than their mean), less than scheduled bursts. The source starts on with probability
//! on / (on + off), its long-run share of time on.

use super::ArrivalProcess;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand::Rng;
use rand_distr::{Distribution, Exp1};

#[derive(Debug, Clone)]
pub struct OnOff {
    rate: f64,
    on: f64,
    off: f64,
    /// The state and when it ends; None before the first draw.
    state: Option<(bool, f64)>,
}

pub fn build(p: &Params, _base_dir: &std::path::Path) -> Result<Box<dyn ArrivalProcess>> {
    let rate = p.positive_rate("rate")?;
    let rate = p.required("rate", "the rate while on, such as \"500/s\"", rate)?;
    let on = p.positive_duration("on")?;
    let on = p.required("on", "the mean time on, such as \"10s\"", on)?;
    let off = p.positive_duration("off")?;
    let off = p.required("off", "the mean time off, such as \"50s\"", off)?;
    Ok(Box::new(OnOff {
        rate,
        on,
        off,
        state: None,
    }))
}

impl OnOff {
    fn sojourn(&self, on: bool, rng: &mut SimRng) -> f64 {
        let e: f64 = Exp1.sample(rng);
        e * if on { self.on } else { self.off }
    }
}

impl ArrivalProcess for OnOff {
    fn next_arrival(&mut self, now: f64, rng: &mut SimRng) -> Option<f64> {
        let (mut on, mut until) = match self.state {
            Some(s) => s,
            None => {
                let on = rng.random::<f64>() * (self.on + self.off) < self.on;
                (on, self.sojourn(on, rng))
            }
        };
        let mut t = now;
        loop {
            if on {
                let gap: f64 = Exp1.sample(rng);
                let next = t + gap / self.rate;
                if next < until {
                    self.state = Some((on, until));
                    return Some(next);
                }
            }
            // The state ends before the next arrival: the exponential gap starts afresh.
            t = until;
            on = !on;
            until = t + self.sojourn(on, rng);
        }
    }
    fn mean_rate(&self) -> f64 {
        self.rate * self.on / (self.on + self.off)
    }
    fn peak_rate(&self, _to: f64) -> f64 {
        self.rate
    }
    fn fresh(&self, _seed: u64, _replication: u64) -> Box<dyn ArrivalProcess> {
        Box::new(OnOff {
            state: None,
            ..self.clone()
        })
    }
}
