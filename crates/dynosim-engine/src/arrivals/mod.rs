//! Arrival processes: a trait, one file per process, and a registry mapping the scenario's
//! `arrivals.process` name to a builder. Adding a process is a new file and one registry line.

use crate::dist::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::registry::Registry;
use crate::rng::SimRng;
use std::fmt::Debug;
use std::path::Path;

mod batch;
pub(crate) mod burst;
mod on_off;
mod poisson;
pub mod replay;
mod varying;

pub use burst::{Burst, Superposed};
pub use varying::{Schedule, Sine, Varying};

pub trait ArrivalProcess: Send + Sync + Debug {
    /// The time of the next arrival after one at `now`, or `None` when the process has ended.
    /// Engines call it with 0 first and then with the arrival it last returned, drawing from
    /// the arrival stream only; a process may keep its own clock (a batch's instant, the
    /// base process under bursts). Arrivals may coincide (a batch), never go back.
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
    /// Long-run mean arrival rate per second (for the stability check): what the process
    /// sustains. A schedule's is the rate after its last point (it stays constant after it);
    /// a transient peak or burst does not count, a sustained overload is caught by the run's
    /// queue limit instead.
    fn mean_rate(&self) -> f64;
    /// The expected number of arrivals in [from, to) (for the checks of a run's size).
    fn expected(&self, from: f64, to: f64) -> f64 {
        self.mean_rate() * (to - from)
    }
    /// The highest rate the process reaches in [0, to) (for the clock's resolution check).
    fn peak_rate(&self, _to: f64) -> f64 {
        self.mean_rate()
    }
    /// Refuses what cannot happen in a run ending at `end` (a burst set after it).
    fn check_within(&self, _end: f64) -> Result<()> {
        Ok(())
    }
    /// The distribution of the service times the process carries with its arrivals (a
    /// replayed trace's: [`replay`]), for the offered load and the reports; None when they
    /// are drawn from `[service]` or `[request]`, as for every other process.
    fn carried_service(&self) -> Option<Box<dyn ServiceDistribution>> {
        None
    }
    /// Writes the service times the process carries for the last `out.len()` arrivals it
    /// returned, in order, and returns true; false (writing nothing) when it carries none.
    /// Engines take a request's service time from here when there is one.
    fn carried_services(&self, _out: &mut [f64]) -> bool {
        false
    }
    /// A fresh copy, in its initial state, for replication `replication` of a run seeded
    /// `seed`: a process with draws of its own (bursts) seeds its streams from these; the
    /// others draw only from the arrival stream handed to [`Self::next_arrival`].
    fn fresh(&self, seed: u64, replication: u64) -> Box<dyn ArrivalProcess>;
    /// Whether the process is a Poisson process of constant rate: split by independent
    /// uniform choices it gives independent Poisson processes of proportional rates, which
    /// makes a fleet under random routing splittable into shards ([`crate::shard`]). Nothing
    /// else splits exactly (a schedule, bursts, batches, on-off, a trace).
    fn is_homogeneous_poisson(&self) -> bool {
        false
    }
}

/// Builds a process from its parameters; paths in them are relative to the directory given.
pub type Builder = fn(&Params, &Path) -> Result<Box<dyn ArrivalProcess>>;

/// Every arrival process, by the name a scenario uses, with the parameter keys it takes.
pub const REGISTRY: Registry<Builder> = Registry(&[
    ("poisson", &["rate"], poisson::build),
    ("batch", &["rate", "size"], batch::build),
    ("on_off", &["rate", "on", "off"], on_off::build),
    ("replay", &["file"], replay::build),
]);
