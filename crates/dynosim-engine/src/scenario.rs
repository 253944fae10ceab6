//! The scenario: its schema (serde, defined once, here) and the validated, built form the
//! simulator runs. Key paths in errors are the scenario file's: `service.percentiles[2]`.

use crate::arrivals::{self, ArrivalProcess};
use crate::dist::{self, ServiceDistribution, Shaped};
use crate::error::{Error, Result};
use crate::params::{strip_serde_position, Params};
use crate::policy::{self, RoutingPolicy};
use crate::units::Duration;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::Path;

/// The scenario document as written (after the front end has turned TOML into JSON).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub arrivals: ArrivalsSpec,
    pub service: ServiceSpec,
    pub fleet: FleetSpec,
    pub router: RouterSpec,
    #[serde(default)]
    pub run: RunSpec,
    /// Sections the Python front end reads (prices, labelled variants); the engine ignores
    /// them, so that a scenario file is valid input for both.
    #[serde(default, skip_serializing)]
    pub cost: Option<Value>,
    #[serde(default, skip_serializing)]
    pub cases: Option<Value>,
}

/// `process` names the arrival process; the other keys are its parameters.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ArrivalsSpec {
    pub process: String,
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ServiceSpec {
    pub distribution: String,
    /// Round every sample up to a multiple of this (e.g. "1ms").
    #[serde(default)]
    pub round_up: Option<Duration>,
    /// Clip every sample to [min, max] (after rounding).
    #[serde(default)]
    pub clip: Option<(Duration, Duration)>,
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    pub dynos: i64,
    /// Concurrent requests per dyno (workers sharing the dyno's accept queue).
    #[serde(default = "one")]
    pub slots: i64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RouterSpec {
    pub policy: String,
    /// Independent routers; each request lands on one at random.
    #[serde(default = "one")]
    pub routers: i64,
    #[serde(flatten)]
    pub params: Map<String, Value>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Measured time, after the warm-up.
    #[serde(default = "default_duration")]
    pub duration: Duration,
    /// Simulated before measuring starts; requests arriving in it are not counted.
    #[serde(default = "default_warmup")]
    pub warmup: Duration,
    #[serde(default = "default_replications")]
    pub replications: i64,
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// Requests waiting (router and dyno queues together) beyond which a run is stopped.
    #[serde(default = "default_max_waiting")]
    pub max_waiting: i64,
    /// The work budget: requests expected to be simulated over all replications (arrival
    /// rate × (warm-up + duration) × replications). A scenario above it is refused before it
    /// runs, so that no typo in a duration or a rate starts a run that would not end.
    #[serde(default = "default_max_requests")]
    pub max_requests: f64,
}

fn one() -> i64 {
    1
}
fn one_u64() -> u64 {
    1
}
fn default_duration() -> Duration {
    Duration(300.0)
}
fn default_warmup() -> Duration {
    Duration(30.0)
}
fn default_replications() -> i64 {
    5
}
fn default_max_waiting() -> i64 {
    5_000_000
}
fn default_max_requests() -> f64 {
    1e10
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            duration: default_duration(),
            warmup: default_warmup(),
            replications: default_replications(),
            seed: 1,
            max_waiting: default_max_waiting(),
            max_requests: default_max_requests(),
        }
    }
}

/// A validated scenario, ready to run.
#[derive(Debug)]
pub struct Scenario {
    pub name: String,
    pub arrivals: Box<dyn ArrivalProcess>,
    pub service: Box<dyn ServiceDistribution>,
    pub dynos: u32,
    pub slots: u32,
    pub policy_name: String,
    pub policy: Box<dyn RoutingPolicy>,
    pub routers: u32,
    pub duration: f64,
    pub warmup: f64,
    pub replications: u32,
    pub seed: u64,
    pub max_waiting: usize,
}

impl Scenario {
    /// Parses and validates a scenario given as JSON; relative file paths in it (an empirical
    /// sample file) are taken from `base_dir`.
    pub fn from_json(text: &str, base_dir: &Path) -> Result<Scenario> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let spec: ScenarioSpec = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            explain_serde_error(path, &e.inner().to_string())
        })?;
        Scenario::build(&spec, base_dir)
    }

    pub fn build(spec: &ScenarioSpec, base_dir: &Path) -> Result<Scenario> {
        let arrivals = {
            let kind = &spec.arrivals.process;
            let (keys, build) = arrivals::REGISTRY.lookup(kind).ok_or_else(|| {
                unknown(
                    "arrivals.process",
                    "arrival process",
                    kind,
                    &arrivals::REGISTRY.names(),
                )
            })?;
            let params = Params::new("arrivals", kind, &spec.arrivals.params);
            params.allow(keys)?;
            build(&params)?
        };

        let s = &spec.service;
        let (keys, build) = dist::REGISTRY.lookup(&s.distribution).ok_or_else(|| {
            unknown(
                "service.distribution",
                "distribution",
                &s.distribution,
                &dist::REGISTRY.names(),
            )
        })?;
        let params = Params::new("service", &s.distribution, &s.params);
        params.allow(keys)?;
        let mut service = build(&params, base_dir)?;
        if let Some(step) = s.round_up {
            if !(step.0 > 0.0 && step.0.is_finite()) {
                return Err(Error::config(
                    "service.round_up",
                    "must be a positive duration",
                ));
            }
        }
        if let Some((lo, hi)) = s.clip {
            if !(lo.0 >= 0.0 && hi.0 > lo.0 && hi.0.is_finite()) {
                return Err(Error::config(
                    "service.clip",
                    format!(
                        "expected [min, max] with 0 <= min < max, got [{} s, {} s]",
                        lo.0, hi.0
                    ),
                ));
            }
        }
        if s.round_up.is_some() || s.clip.is_some() {
            service = Box::new(Shaped::new(
                service,
                s.round_up.map(|d| d.0),
                s.clip.map(|(a, b)| (a.0, b.0)),
            ));
        }

        let dynos = whole(spec.fleet.dynos, "fleet.dynos", 1, 10_000_000)?;
        let slots = whole(spec.fleet.slots, "fleet.slots", 1, 100_000)?;
        let routers = whole(spec.router.routers, "router.routers", 1, 100_000)?;
        let r = &spec.router;
        let (keys, build) = policy::REGISTRY.lookup(&r.policy).ok_or_else(|| {
            unknown(
                "router.policy",
                "routing policy",
                &r.policy,
                &policy::REGISTRY.names(),
            )
        })?;
        // Keys that only other policies take are for them (a scenario may list several).
        let all_keys = policy::REGISTRY.all_keys();
        let own: Map<String, Value> = r
            .params
            .iter()
            .filter(|(k, _)| keys.contains(&k.as_str()) || !all_keys.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let params = Params::new("router", &r.policy, &own);
        params.allow(keys)?;
        let policy = build(&params)?;

        let run = &spec.run;
        if !(run.duration.0 > 0.0 && run.duration.0.is_finite()) {
            return Err(Error::config("run.duration", "must be a positive duration"));
        }
        if !(run.warmup.0 >= 0.0 && run.warmup.0.is_finite()) {
            return Err(Error::config("run.warmup", "must be a duration >= 0"));
        }
        let replications = whole(run.replications, "run.replications", 1, 100_000)?;
        check_work(
            arrivals.mean_rate(),
            run.warmup.0 + run.duration.0,
            replications,
            run.max_requests,
        )?;
        Ok(Scenario {
            name: spec.name.clone().unwrap_or_else(|| "scenario".into()),
            arrivals,
            service,
            dynos,
            slots,
            policy_name: r.policy.clone(),
            policy,
            routers,
            duration: run.duration.0,
            warmup: run.warmup.0,
            replications,
            seed: run.seed,
            max_waiting: whole::<usize>(run.max_waiting, "run.max_waiting", 1, i64::MAX)?,
        })
    }

    /// Arrival rate × mean service time / slots: the utilisation every policy must reach.
    pub fn offered_load(&self) -> f64 {
        self.busy_slots_needed() / self.total_slots() as f64
    }

    pub fn busy_slots_needed(&self) -> f64 {
        self.arrivals.mean_rate() * self.service.mean()
    }

    pub fn total_slots(&self) -> u64 {
        self.dynos as u64 * self.slots as u64
    }

    /// Refuses a scenario whose offered load is at or above capacity.
    pub fn check_stable(&self) -> Result<()> {
        if self.offered_load() >= 1.0 {
            return Err(Error::Unstable {
                offered_load: self.offered_load(),
                busy_slots_needed: self.busy_slots_needed(),
                slots: self.total_slots(),
            });
        }
        Ok(())
    }
}

/// Refuses a run expected to simulate more requests than the budget `run.max_requests`.
fn check_work(rate: f64, simulated: f64, replications: u32, budget: f64) -> Result<()> {
    if !(budget.is_finite() && budget >= 1.0) {
        return Err(Error::config(
            "run.max_requests",
            format!("expected a number of requests >= 1, got {budget}"),
        ));
    }
    let expected = rate * simulated * replications as f64;
    if !(expected <= budget) {
        return Err(Error::config(
            "run.max_requests",
            format!(
                "the run would simulate about {expected:.3e} requests (arrivals.rate {rate}/s \
                 × (run.warmup + run.duration) {simulated} s × run.replications \
                 {replications}), over the budget of {budget:.3e}: shorten the run, or raise \
                 run.max_requests"
            ),
        ));
    }
    Ok(())
}

fn unknown(path: &str, what: &str, name: &str, known: &[&str]) -> Error {
    Error::config(
        path,
        format!(
            "unknown {what} {name:?}; expected one of: {}",
            known.join(", ")
        ),
    )
}

fn whole<T: TryFrom<i64>>(value: i64, path: &str, min: i64, max: i64) -> Result<T> {
    if value < min || value > max {
        let range = if max == i64::MAX {
            format!(">= {min}")
        } else {
            format!("from {min} to {max}")
        };
        return Err(Error::config(
            path,
            format!("must be a whole number {range}, got {value}"),
        ));
    }
    T::try_from(value).map_err(|_| Error::config(path, format!("out of range: {value}")))
}

/// Rewords serde's messages for people editing a scenario: a missing field is reported at its
/// own path, integer types are called whole numbers.
pub(crate) fn explain_serde_error(path: String, message: &str) -> Error {
    let message = strip_serde_position(message);
    if let Some(field) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        let path = if path.is_empty() {
            field.to_string()
        } else {
            format!("{path}.{field}")
        };
        return Error::config(path, "missing");
    }
    let message = message
        .replace("expected i64", "expected a whole number")
        .replace("expected u64", "expected a whole number from 0 to 2^64-1")
        .replace("expected f64", "expected a number");
    Error::config(path, message)
}
