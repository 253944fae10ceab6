//! A large fleet split into shards simulated apart, on as many threads as there are (issue
//! #28).
//!
//! Under random routing (each request goes to a dyno drawn uniformly, independently of the
//! others) and Poisson arrivals of rate λ, the arrivals at a set of n of the fleet's N dynos
//! are a Poisson process of rate λ·n/N, independent of the other dynos' (splitting a Poisson
//! process by independent choices), and within the set each request still picks a dyno
//! uniformly. When nothing else couples the dynos (no shared resource, no router queue or
//! cap, no autoscaler, no retry on another dyno), the fleet's dynos are independent, and a
//! replication of the fleet is, in distribution, its shards run apart: each shard is a
//! scenario of its own share of the dynos and of the rate, with a seed of its own
//! ([`crate::rng::shard_seed`]). Their measures are merged before the figures are worked out
//! (see [`Measures::absorb`]): counts and sums add, histograms merge exactly, per-dyno
//! figures follow in dyno order.
//!
//! The figures are the same in distribution as the fleet run whole, not the same numbers: the
//! draws differ. So how many shards a fleet is split into is a function of the scenario only
//! (`run.shards`, "auto" by default: [`auto_shards`]), never of the machine, and `run.threads`
//! only says how many run at once: the same scenario and seed give the same figures on any
//! machine, with any number of threads.
//!
//! Why smaller shards run faster even on one core: a request's cost is mostly reaching its
//! dyno's state, and a shard of [`SHARD_DYNOS`] dynos keeps that state in the core's cache
//! where a fleet of a million does not (docs/benchmarks.md).

use crate::engine::Measured;
use crate::error::{Error, Result};
use crate::measure::Measures;
use crate::result::ReplicationResult;
use crate::rng::shard_seed;
use crate::scenario::{Scenario, ScenarioSpec, ShardCount};
use crate::workload::Workload;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

/// Dynos per shard (at most) when `run.shards = "auto"`: their state (about 60 bytes a dyno
/// on the direct engine) fits a core's cache.
pub const SHARD_DYNOS: u32 = 10_000;

/// Under `run.shards = "auto"`, fleets of fewer dynos run whole: every scenario below it gives
/// the figures it gave before shards existed.
pub const AUTO_SHARDS_FROM: u32 = 100_000;

/// How many shards `run.shards = "auto"` gives a fleet of `dynos` that can be split.
pub fn auto_shards(dynos: u32) -> u32 {
    if dynos < AUTO_SHARDS_FROM {
        1
    } else {
        dynos.div_ceil(SHARD_DYNOS)
    }
}

impl Scenario {
    /// Why the fleet's dynos are not independent under this scenario (so that it cannot be
    /// split into shards), or None when they are. Destructures the whole scenario without
    /// `..`, so that a field added to it fails to compile here until someone decides whether
    /// it couples dynos.
    pub fn unsplittable(&self) -> Option<&'static str> {
        let Scenario {
            name: _,
            workload,
            // Per request, whatever the dyno.
            service: _,
            request: _,
            dyno_type: _,
            app,
            resources,
            dynos: _,
            slots: _,
            policy_name: _,
            policy,
            // Each router draws its dynos uniformly: so do they all together.
            routers: _,
            keys,
            // Per request, on its own dyno.
            connect: _,
            colocated_cpu: _,
            boot_time: _,
            lifecycle,
            cpu: _,
            autoscale,
            // Per request: the router's, the queue's (random routing never holds) and the
            // client's.
            router_timeout: _,
            queue_timeout: _,
            client_timeout: _,
            max_in_flight,
            router_cost,
            shed_latency,
            retries: _,
            retry_delay: _,
            router_retry,
            // Random routing reads no load.
            view: _,
            aperture,
            duration: _,
            warmup: _,
            replications: _,
            seed: _,
            // Held per shard, in proportion (see [`build`]).
            max_waiting: _,
            allow_overload: _,
            max_memory: _,
            engine: _,
            client_retry,
            client_breaker,
            router_limit,
            app_limit,
            faults,
            stability: _,
            shard_count: _,
            threads: _,
            shards: _,
            calls,
            services,
            // The calls' time, with `services` (refused below).
            call_hold: _,
        } = self;
        if !calls.is_empty() || !services.is_empty() {
            return Some("the calls between services join their fleets");
        }
        match workload {
            Workload::Closed(_) => return Some("a closed loop's clients wait for any dyno"),
            Workload::Open(arrivals) if !arrivals.is_homogeneous_poisson() => {
                return Some(
                    "only Poisson arrivals of a constant rate split exactly (not a schedule, \
                     bursts, batches, on-off or a trace)",
                )
            }
            Workload::Open(_) => {}
        }
        if client_retry.is_some() {
            return Some("the clients' retries (and their budget) span the fleet");
        }
        if router_retry.beyond_refused() {
            return Some("the router's retries after a timeout or an error (router.retry_on)");
        }
        if router_limit.is_some() {
            return Some(
                "a router's concurrency limit (router.concurrency_limit) sees its whole \
                         share of the fleet",
            );
        }
        if app_limit.is_some() {
            return Some("the dynos' concurrency limits (app.concurrency_limit) are not split yet");
        }
        if client_breaker.is_some() {
            return Some("the clients' circuit breaker (arrivals.breaker) sees the whole fleet");
        }
        if !faults.is_empty() {
            return Some("faults strike the fleet as a whole");
        }
        if !policy.picks_uniformly() {
            return Some("only router.policy = \"random\" sends each request to any dyno alike");
        }
        if keys.is_some() {
            return Some("requests carry keys (arrivals.keys)");
        }
        if !resources.is_empty() {
            return Some("shared resources serve every dyno");
        }
        if autoscale.is_some() || !lifecycle.deploys.is_empty() || lifecycle.cycling.is_some() {
            return Some("the fleet changes during the run");
        }
        if max_in_flight.is_some() || router_cost.is_some() || shed_latency.is_some() {
            return Some("the routers' cap or work is shared by every dyno");
        }
        if app.backlog.is_some() {
            return Some("a request refused by a full backlog is retried on another dyno");
        }
        if aperture.is_some() {
            return Some("routers with an aperture send to subsets of their own");
        }
        None
    }

    /// How many shards the fleet runs in: `run.shards`, or for "auto" [`auto_shards`] when it
    /// can be split and 1 when not; an explicit count above 1 for a scenario that cannot be
    /// split is refused, saying why.
    pub fn shard_total(&self) -> Result<u32> {
        let why = self.unsplittable();
        match (self.shard_count, why) {
            (ShardCount::Auto, None) => Ok(auto_shards(self.dynos)),
            (ShardCount::Auto, Some(_)) | (ShardCount::Exactly(1), _) => Ok(1),
            (ShardCount::Exactly(n), None) => Ok(n),
            (ShardCount::Exactly(_), Some(why)) => Err(Error::config(
                "run.shards",
                format!(
                    "this scenario's dynos are not independent, so its fleet cannot be split \
                     into shards: {why}; use 1 or \"auto\""
                ),
            )),
        }
    }
}

/// The shards of a scenario built from `spec`: empty when it runs whole. Shard i of S holds
/// dynos N·i/S to N·(i+1)/S (whole numbers, the first N mod S shards one more), the arrival
/// rate λ·(its dynos)/N, the seed `shard_seed(seed, i)`, and `run.max_waiting` in the same
/// proportion (rounded up).
pub(crate) fn build(
    scenario: &Scenario,
    spec: &ScenarioSpec,
    base_dir: &Path,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Vec<Scenario>> {
    let total = scenario.shard_total()?;
    if total <= 1 {
        return Ok(Vec::new());
    }
    let (dynos, rate) = (scenario.dynos, scenario.arrival_rate());
    let (each, extra) = (dynos / total, dynos % total);
    (0..total)
        .map(|i| {
            let own = each + u32::from(i < extra);
            let share = f64::from(own) / f64::from(dynos);
            let mut part = spec.clone();
            part.fleet.dynos = i64::from(own);
            part.arrivals
                .params
                .insert("rate".into(), json!(rate * share));
            part.run.seed = shard_seed(scenario.seed, u64::from(i));
            part.run.shards = Some(json!(1));
            part.run.max_waiting = ((scenario.max_waiting as f64 * share).ceil() as i64).max(1);
            // The service distribution is the fleet's, shared: not built again for each shard
            // (a sample file read 100 times, held 100 times). The shard is validated with a
            // constant of the same mean in its place, which the fleet's checks have covered.
            let shared = part.service.is_some();
            if let Some(service) = part.service.as_mut() {
                *service = ScenarioSpec::constant_service(scenario.service.mean());
            }
            let mut shard = Scenario::validate(&part, base_dir, interrupted)?;
            if shared {
                shard.service = Arc::clone(&scenario.service);
            }
            Ok(shard)
        })
        .collect()
}

/// Replication `replication` of shard `shard`: what it measured.
pub(crate) fn measure(
    shard: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Measured> {
    crate::engine::measure_replication_on(shard.engine, shard, replication, interrupted)
}

/// One replication's shards' measures merged so far, in shard order.
pub(crate) struct Merging {
    measures: Measures,
    end: f64,
    engine: &'static str,
}

impl Merging {
    /// Starts with the replication's first shard, making room for every dyno's figures.
    pub fn new(scenario: &Scenario, first: Measured) -> Result<Merging> {
        let mut measures = first.measures;
        measures.reserve_dynos(scenario.dynos as usize)?;
        Ok(Merging {
            measures,
            end: first.end,
            engine: first.engine,
        })
    }

    /// Adds the next shard.
    pub fn add(&mut self, part: Measured) {
        self.end = self.end.max(part.end);
        if part.engine != self.engine {
            self.engine = "direct+events";
        }
        self.measures.absorb(part.measures);
    }

    /// The replication's figures, worked out once over every shard's measures.
    pub fn finish(self, scenario: &Scenario) -> ReplicationResult {
        let mut result = self.measures.finish(scenario, self.end);
        result.engine = self.engine;
        result
    }
}
