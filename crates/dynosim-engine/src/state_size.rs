//! The memory a run needs, worked out from the scenario before anything is allocated, and held
//! to the scenario's `run.max_memory`: a fleet of 10⁷ dynos × 1,000 slots is refused with the
//! keys that make it large, rather than aborting the process when an allocation fails.
//!
//! A replication's state is, per engine (see [`crate::direct`] and [`crate::sim`]): a few
//! numbers per dyno, per slot and (event-driven engine) per router × dyno, and the waiting
//! requests, at most `run.max_waiting` of them. Replications run in parallel, but never more
//! at once than the limit has room for ([`Scenario::replications_at_once`]); a scenario is
//! refused only when one replication alone is over the limit.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::scenario::Scenario;
use crate::units::format_bytes;

/// One part of a replication's state: the key path that sizes it, what it is, its bytes.
struct Part {
    path: &'static str,
    what: String,
    bytes: f64,
}

impl Scenario {
    fn memory_parts(&self) -> [Part; 3] {
        self.memory_parts_on(Engine::chosen(self))
    }

    fn memory_parts_on(&self, engine: Engine) -> [Part; 3] {
        let cost = engine.state_bytes(self);
        let (dynos, slots, routers) = (
            f64::from(self.dynos),
            f64::from(self.slots),
            f64::from(self.routers),
        );
        [
            Part {
                path: "fleet",
                what: format!("{} dynos x {} slots", self.dynos, self.slots),
                bytes: dynos * (cost.per_dyno + slots * cost.per_slot),
            },
            Part {
                path: "router.routers",
                what: format!("{} routers x {} dynos", self.routers, self.dynos),
                bytes: routers * dynos * cost.per_router_dyno,
            },
            Part {
                path: "run.max_waiting",
                what: format!("{} waiting requests", self.max_waiting),
                bytes: self.max_waiting as f64 * cost.per_waiting,
            },
        ]
    }

    /// Bytes of engine state one replication may need at most.
    pub fn replication_bytes(&self) -> f64 {
        self.memory_parts().iter().map(|p| p.bytes).sum()
    }

    /// Bytes of engine state a trace of one replication (`trace_replication`: the series over
    /// time of a report) may need at most, its frames apart: the whole fleet on the
    /// event-driven engine, which traces run on whatever engine runs the scenario.
    pub fn trace_bytes(&self) -> f64 {
        self.memory_parts_on(Engine::Events)
            .iter()
            .map(|p| p.bytes)
            .sum()
    }

    /// Refuses a scenario one replication of which needs more than `run.max_memory`, naming
    /// the keys behind the largest part of it.
    pub(crate) fn check_memory(&self) -> Result<()> {
        let parts = self.memory_parts();
        let total: f64 = parts.iter().map(|p| p.bytes).sum();
        if total <= self.max_memory {
            return Ok(());
        }
        let largest = parts
            .iter()
            .max_by(|a, b| a.bytes.total_cmp(&b.bytes))
            .expect("three parts");
        let whole = if largest.bytes < 0.9 * total {
            format!(" (one replication about {} in all)", format_bytes(total))
        } else {
            String::new()
        };
        Err(Error::config(
            largest.path,
            format!(
                "{} needs about {} of engine state{whole}; the limit is {} (run.max_memory)",
                largest.what,
                format_bytes(largest.bytes),
                format_bytes(self.max_memory)
            ),
        ))
    }

    /// How many replications may run at once: as many as the machine has threads, but no more
    /// than `run.max_memory` has room for (at least one: [`Scenario::from_json`] refused a
    /// scenario one replication of which does not fit).
    pub fn replications_at_once(&self) -> usize {
        self.replications_at_once_on(rayon::current_num_threads())
    }

    /// [`Scenario::replications_at_once`] on `threads` threads.
    fn replications_at_once_on(&self, threads: usize) -> usize {
        let fit = (self.max_memory / self.replication_bytes().max(1.0)).floor();
        let fit = if fit >= 1.0 { fit.min(1e6) as usize } else { 1 };
        fit.min(threads).min(self.replications as usize).max(1)
    }

    /// Bytes of engine state a whole run may hold at once, worked out before it starts: one
    /// replication's ([`Scenario::replication_bytes`]) times as many replications as run at
    /// once on `run.threads` (a thread per core when it is not set). At most `run.max_memory`
    /// unless one replication alone is over it (and then the run is refused).
    pub fn run_bytes(&self) -> f64 {
        let threads = self.threads.unwrap_or_else(rayon::current_num_threads);
        self.replication_bytes() * self.replications_at_once_on(threads) as f64
    }
}
