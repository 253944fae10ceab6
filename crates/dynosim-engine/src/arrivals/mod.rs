//! Arrival processes: a trait, one file per process, and a registry mapping the scenario's
//! `arrivals.process` name to a builder. Adding a process is a new file and one registry line.

use crate::error::Result;
use crate::params::Params;
use crate::registry::Registry;
use crate::rng::SimRng;
use std::fmt::Debug;

mod poisson;

pub trait ArrivalProcess: Send + Sync + Debug {
    /// The time of the next arrival after one at `now`, or `None` when the process has ended.
    fn next_arrival(&mut self, now: f64, rng: &mut SimRng) -> Option<f64>;
    /// Fills `out` with the arrivals following one at `now`, as successive calls of
    /// [`Self::next_arrival`] would give them; returns how many it wrote, fewer than
    /// `out.len()` only when the process has ended.
    fn next_arrivals(&mut self, mut now: f64, rng: &mut SimRng, out: &mut [f64]) -> usize {
        for (i, x) in out.iter_mut().enumerate() {
            match self.next_arrival(now, rng) {
                Some(t) => {
                    *x = t;
                    now = t;
                }
                None => return i,
            }
        }
        out.len()
    }
    /// Long-run mean arrival rate per second (for the stability check).
    fn mean_rate(&self) -> f64;
    /// A fresh copy, in its initial state, for another replication.
    fn fresh(&self) -> Box<dyn ArrivalProcess>;
}

pub type Builder = fn(&Params) -> Result<Box<dyn ArrivalProcess>>;

/// Every arrival process, by the name a scenario uses, with the parameter keys it takes.
pub const REGISTRY: Registry<Builder> = Registry(&[("poisson", &["rate"], poisson::build)]);
