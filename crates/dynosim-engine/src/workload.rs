//! Where requests come from: an open arrival process (requests arrive whatever the latency,
//! as real traffic does), or a closed loop of clients (each sends a request, waits for its
//! response, thinks, and sends the next: what ab, hey and wrk do).

pub use crate::arrivals::burst::BurstSpec;
use crate::arrivals::{self, ArrivalProcess, Burst, Superposed};
use crate::dist::{self, ServiceDistribution};
use crate::error::{Error, Result};
use crate::params::Params;
use serde_json::{Map, Value};
use std::path::Path;

/// The keys `arrivals.process = "closed"` takes.
pub const CLOSED_KEYS: &[&str] = &["clients", "think", "requests"];

#[derive(Debug)]
pub enum Workload {
    Open(Box<dyn ArrivalProcess>),
    Closed(Clients),
}

/// A closed loop: `count` clients, each thinking for a drawn time between a response and its
/// next request; `requests` in all (ab's `-n`), or until the run ends when None.
#[derive(Debug)]
pub struct Clients {
    pub count: u32,
    /// None: no think time (nothing is drawn).
    pub think: Option<Box<dyn ServiceDistribution>>,
    pub requests: Option<u64>,
}

impl Workload {
    /// Builds `[arrivals]`: `process` names a registered open process, or is `"closed"`;
    /// `bursts` (`[[arrivals.burst]]`) go on top of an open process.
    pub fn build(
        process: &str,
        params: &Map<String, Value>,
        bursts: &[BurstSpec],
        base_dir: &Path,
    ) -> Result<Workload> {
        if process == "closed" && !bursts.is_empty() {
            return Err(Error::config(
                "arrivals.burst",
                "bursts add requests to an open arrival process; a closed loop's clients send \
                 only when answered (use process = \"poisson\" with a rate)",
            ));
        }
        if process == "closed" {
            let p = Params::new("arrivals", process, params);
            p.allow(CLOSED_KEYS)?;
            let count = p.whole::<u32>("clients", 1, 1, 10_000_000)?;
            // A think time of zero (the default) draws nothing.
            let think = match params.get("think") {
                None => None,
                Some(v) => dist::from_value_or_zero(v, "arrivals.think", base_dir)?,
            };
            let requests = match params.get("requests") {
                None => None,
                Some(_) => Some(p.whole::<u64>("requests", 1, 1, 10_000_000_000)?),
            };
            return Ok(Workload::Closed(Clients {
                count,
                think,
                requests,
            }));
        }
        let (keys, build) = arrivals::REGISTRY.lookup(process).ok_or_else(|| {
            let mut known = arrivals::REGISTRY.names();
            known.push("closed");
            Error::config(
                "arrivals.process",
                format!(
                    "unknown arrival process {process:?}; expected one of: {}",
                    known.join(", ")
                ),
            )
        })?;
        let p = Params::new("arrivals", process, params);
        p.allow(keys)?;
        let base = build(&p, base_dir)?;
        if base.carried_service().is_some() && !bursts.is_empty() {
            return Err(Error::config(
                "arrivals.burst",
                "a replayed trace with service times carries every request it has; bursts \
                 would add requests without one (replay arrival times alone, with [service], to \
                 add bursts)",
            ));
        }
        if bursts.is_empty() {
            return Ok(Workload::Open(base));
        }
        let bursts = bursts
            .iter()
            .enumerate()
            .map(|(i, b)| Burst::build(b, i, base_dir))
            .collect::<Result<Vec<_>>>()?;
        Ok(Workload::Open(Box::new(Superposed::new(base, bursts))))
    }

    /// The distribution of the service times an open process carries with its arrivals (a
    /// replayed trace's); None when they are drawn.
    pub fn carried_service(&self) -> Option<Box<dyn ServiceDistribution>> {
        match self {
            Workload::Open(arrivals) => arrivals.carried_service(),
            Workload::Closed(_) => None,
        }
    }

    /// [`Workload::carried_service`], refusing a scenario that also gives `[service]` or
    /// `[request]`: each request's time comes from one place.
    pub fn carried_service_alone(
        &self,
        has_service: bool,
        has_request: bool,
    ) -> Result<Option<Box<dyn ServiceDistribution>>> {
        let carried = self.carried_service();
        if carried.is_some() && (has_service || has_request) {
            let section = if has_service { "service" } else { "request" };
            return Err(Error::config(
                section,
                format!(
                    "arrivals.file gives each request's service time (its second column): leave \
                     out [{section}], or replay the arrival times alone (one column)"
                ),
            ));
        }
        Ok(carried)
    }

    pub fn is_closed(&self) -> bool {
        matches!(self, Workload::Closed(_))
    }

    /// The open process's long-run arrival rate; for a closed loop, the most its clients can
    /// send: clients / (mean think time + `min_response`), an upper bound.
    pub fn mean_rate(&self, min_response: f64) -> f64 {
        match self {
            Workload::Open(arrivals) => arrivals.mean_rate(),
            Workload::Closed(c) => {
                let think = c.think.as_ref().map_or(0.0, |t| t.mean());
                f64::from(c.count) / (think + min_response)
            }
        }
    }
}

impl Workload {
    /// Arrivals expected in [from, to): the open process's (a schedule's integral), or the
    /// closed loop's upper bound at [`Workload::mean_rate`].
    pub fn expected(&self, from: f64, to: f64, min_response: f64) -> f64 {
        match self {
            Workload::Open(arrivals) => arrivals.expected(from, to),
            Workload::Closed(_) => self.mean_rate(min_response) * (to - from),
        }
    }

    /// The highest arrival rate in [0, to).
    pub fn peak_rate(&self, to: f64, min_response: f64) -> f64 {
        match self {
            Workload::Open(arrivals) => arrivals.peak_rate(to),
            Workload::Closed(_) => self.mean_rate(min_response),
        }
    }
}
