//! The scenario: its schema (serde, defined once, here) and the validated, built form the
//! simulator runs. Key paths in errors are the scenario file's: `service.percentiles[2]`.

use crate::app::{AppServer, AppSpec, DynoType};
use crate::autoscale::Autoscaler;
use crate::breaker::{BreakerSpec, ClientBreaker};
use crate::dist::{self, ServiceDistribution, Shaped};
use crate::error::{Error, Result};
use crate::fault::{FaultSpec, Faults};
use crate::limit::{ConcurrencyLimit, LimitSpec};
use crate::params::{check_duration, explain_serde_error, whole, Params};
use crate::policy::{self, Knowledge, RoutingPolicy};
use crate::request::{PhaseKind, RequestModel, RequestSpec};
use crate::resource_spec::{PoolScope, Resource, ResourceSpec};
use crate::retry::clients::Decider;
use crate::retry::router::{RouterBudgetSpec, RouterRetry};
use crate::retry::{ClientRetry, RetrySpec};
use crate::stability;
use crate::theory;
use crate::timeout_spec::Timeout;
use crate::units::{Bytes, Duration, MIN_DURATION};
use crate::users::{KeysSpec, UserKeys};
use crate::view::{View, ViewSpec};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

pub use crate::workload::{BurstSpec, Clients, Workload};

/// The scenario document as written (after the front end has turned TOML into JSON). Every
/// field here and in the structs it holds serializes, None as null (no
/// `skip_serializing_if`): the schema's tests (crate::schema) find the fields that way.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub arrivals: ArrivalsSpec,
    /// A request's service time, one number a request (`[service]`), or its phases
    /// (`[request]`): one of the two.
    #[serde(default)]
    pub service: Option<ServiceSpec>,
    #[serde(default)]
    pub request: Option<RequestSpec>,
    pub fleet: FleetSpec,
    #[serde(default)]
    pub app: Option<AppSpec>,
    #[serde(default)]
    pub resources: Option<BTreeMap<String, ResourceSpec>>,
    #[serde(default)]
    pub router: RouterSpec,
    /// The fleet's autoscaler (`rule` and its settings, see [`crate::autoscale`]); None: a
    /// fleet of a fixed size.
    #[serde(default)]
    pub autoscale: Option<Map<String, Value>>,
    #[serde(default)]
    pub run: RunSpec,
    /// Triggers (`[[faults]]`): slowdowns, outages, dynos lost (see [`crate::fault`]).
    #[serde(default)]
    pub faults: Option<Vec<FaultSpec>>,
    /// Sections the Python front end reads (prices, labelled variants); the engine ignores
    /// them, so that a scenario file is valid input for both.
    #[serde(default, skip_serializing)]
    pub cost: Option<Value>,
    #[serde(default, skip_serializing)]
    pub cases: Option<Value>,
    /// Other fleets the requests call (`[services.NAME]`, see [`crate::calls`]); the top level
    /// is the entry service. None: one fleet.
    #[serde(default)]
    pub services: Option<BTreeMap<String, ServiceTablesSpec>>,
}

/// `[services.NAME]`: a fleet that requests call, with the tables a top-level fleet has, read
/// by the same code. Arrivals are its callers' calls; `[run]` and `[resources]` are the
/// scenario's (a resource is shared by every fleet whose phases use it).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceTablesSpec {
    #[serde(default)]
    pub service: Option<ServiceSpec>,
    #[serde(default)]
    pub request: Option<RequestSpec>,
    pub fleet: FleetSpec,
    #[serde(default)]
    pub app: Option<AppSpec>,
    #[serde(default)]
    pub router: RouterSpec,
    #[serde(default)]
    pub autoscale: Option<Map<String, Value>>,
    #[serde(default)]
    pub faults: Option<Vec<FaultSpec>>,
    /// The service's dyno prices, read by the Python front end.
    #[serde(default)]
    pub cost: Option<Value>,
}

impl ScenarioSpec {
    /// `[service]` of a constant time, `seconds`.
    pub(crate) fn constant_service(seconds: f64) -> ServiceSpec {
        let mut params = Map::new();
        params.insert("value".into(), Value::from(seconds));
        ServiceSpec {
            distribution: "constant".into(),
            round_up: None,
            clip: None,
            params,
        }
    }

    /// Parses a scenario given as JSON, naming the key path of what does not fit.
    pub fn parse(text: &str) -> Result<ScenarioSpec> {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." { String::new() } else { path };
            explain_serde_error(path, &e.inner().to_string())
        })
    }
}

/// `process` names the arrival process; the other keys are its parameters.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ArrivalsSpec {
    pub process: String,
    /// Scheduled bursts on top of the process (`[[arrivals.burst]]`).
    #[serde(default)]
    pub burst: Option<Vec<BurstSpec>>,
    /// The client's timeout (hey's `-t`, ab's `-s`), from when it sends: a duration, a
    /// distribution (clients' patience varies) or "off" (see [`crate::timeout_spec`]).
    #[serde(default)]
    pub timeout: Option<Value>,
    /// The key each request carries (`[arrivals.keys]`: its user), for the policies that hash
    /// requests; None: requests carry none.
    #[serde(default)]
    pub keys: Option<KeysSpec>,
    /// The clients' retries (`[arrivals.retry]`, see [`crate::retry`]); None: a client never
    /// sends a request again.
    #[serde(default)]
    pub retry: Option<RetrySpec>,
    /// The clients' circuit breaker (`[arrivals.breaker]`, see [`crate::breaker`]); None:
    /// none.
    #[serde(default)]
    pub breaker: Option<BreakerSpec>,
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
    /// Concurrent requests per dyno (workers sharing the dyno's accept queue), for a scenario
    /// without `[app]`; 1 when left out.
    #[serde(default)]
    pub slots: Option<i64>,
    /// The dyno type: cores and memory quota from the table, and what `[cost]` prices.
    #[serde(default, rename = "type")]
    pub dyno_type: Option<String>,
    /// Cores per dyno, overriding the type's.
    #[serde(default)]
    pub cores: Option<i64>,
    /// Memory quota per dyno, overriding the type's.
    #[serde(default)]
    pub memory: Option<Bytes>,
    /// How long a dyno takes to boot: a duration or a distribution (see
    /// [`Scenario::boot_time`]); `app.boot_time` is its old name.
    #[serde(default)]
    pub boot_time: Option<Value>,
    /// A boot that takes longer than this crashes (Heroku's R10) and the dyno boots again.
    #[serde(default)]
    pub boot_timeout: Option<Duration>,
    /// From a dyno marked down (no new requests) to its SIGTERM.
    #[serde(default)]
    pub stop_delay: Option<Duration>,
    /// From SIGTERM to SIGKILL: the requests a dyno still holds then fail.
    #[serde(default)]
    pub shutdown_grace: Option<Duration>,
    /// Deploys (`[[fleet.deploy]]`): every dyno replaced, with or without preboot.
    #[serde(default)]
    pub deploy: Option<Vec<DeploySpec>>,
    /// Daily restarts: each dyno is replaced this long after it started, plus a random
    /// offset of up to 216 minutes (Heroku's "24h"); None: never.
    #[serde(default)]
    pub cycling: Option<Duration>,
    /// How a dyno's runnable threads share its cores: "slices" (time slices of
    /// `cpu_quantum`, as Linux hands them out) or "ps" (processor sharing, for theory).
    #[serde(default)]
    pub cpu_sharing: Option<String>,
    /// The OS scheduler's time slice.
    #[serde(default)]
    pub cpu_quantum: Option<Duration>,
    /// How much a CPU phase's time varies on a real machine around what was drawn: the
    /// coefficient of variation of a mean-1 lognormal factor (0: exactly as drawn).
    #[serde(default)]
    pub cpu_jitter: Option<f64>,
}

/// A deploy: at `at`, every dyno is replaced by a new one.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeploySpec {
    pub at: Duration,
    /// True: the new dynos boot first and take the traffic when all are up, then the old ones
    /// drain (Heroku's preboot). False (the default): every dyno restarts at once.
    #[serde(default)]
    pub preboot: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RouterSpec {
    /// Random routing when left out, as Heroku's router does.
    #[serde(default = "random")]
    pub policy: String,
    /// Independent routers; each request lands on one at random.
    #[serde(default = "one")]
    pub routers: i64,
    /// From the routing decision to the request's arrival at the dyno: a duration or a
    /// distribution (see [`Scenario::connect`]).
    #[serde(default)]
    pub connect: Option<Value>,
    /// The CPU a router on the dyno's own machine spends per request, on the dyno's cores: a
    /// duration or a distribution (see [`Scenario::colocated_cpu`]).
    #[serde(default)]
    pub colocated_cpu: Option<Value>,
    /// Heroku's H12: the router answers 503 this long after handing the request to a dyno
    /// (30 s when left out; "off" for none). The dyno is not told.
    #[serde(default)]
    pub timeout: Option<Value>,
    /// HAProxy's `timeout queue`: a request held at the router this long is answered 503.
    #[serde(default)]
    pub queue_timeout: Option<Value>,
    /// Requests a router holds at once (Heroku's H11 backlog cap): a number or "N/dyno".
    #[serde(default)]
    pub max_in_flight: Option<Value>,
    /// Each router's own work per request, before its routing decision: a duration or a
    /// distribution. The routers are then servers with a queue of their own.
    #[serde(default)]
    pub cost: Option<Value>,
    /// Load shedding: a request that would wait longer than this for its router is answered
    /// at once with an error.
    #[serde(default)]
    pub shed_latency: Option<Duration>,
    /// Dynos tried after the first refuses the connection (its listen backlog is full).
    #[serde(default = "default_retries")]
    pub retries: i64,
    /// The router's wait before each retry.
    #[serde(default)]
    pub retry_delay: Option<Duration>,
    /// What the router retries on another dyno: "refused", "timeout", "5xx" (see
    /// [`crate::retry::router`]).
    #[serde(default)]
    pub retry_on: Option<Value>,
    /// Envoy's retry budget for the router's retries after a timeout or an error.
    #[serde(default)]
    pub retry_budget: Option<RouterBudgetSpec>,
    /// A concurrency limit at each router, over its requests in flight (see
    /// [`crate::limit`]); None: none.
    #[serde(default)]
    pub concurrency_limit: Option<LimitSpec>,
    /// How late the loads the routers read are (see [`crate::view`]); None: exact.
    #[serde(default)]
    pub view: Option<ViewSpec>,
    /// Finagle's random aperture: each router sends only to a random subset of this many
    /// dynos.
    #[serde(default)]
    pub aperture: Option<i64>,
    /// The real router `dynosim testbed` runs in front of the dynos: "haproxy" (when left
    /// out) or "nginx". The simulation does not read it (see [`check_real_router`]).
    #[serde(default)]
    pub kind: Option<String>,
    /// nginx only: its worker processes share their counters in a shared memory `zone`, so
    /// that they are one router with one view.
    #[serde(default)]
    pub zone: Option<bool>,
    /// nginx only: its worker processes; router.routers when left out.
    #[serde(default)]
    pub workers: Option<i64>,
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
    /// Memory one replication's engine state may take (see [`crate::state_size`]).
    #[serde(default = "default_max_memory")]
    pub max_memory: Bytes,
    /// Which engine runs it: auto, direct or events.
    #[serde(default = "auto")]
    pub engine: String,
    /// Simulate an offered load at or above capacity for the run's time (a step of a rate
    /// ramp, a burst) instead of refusing it as unstable.
    #[serde(default)]
    pub allow_overload: bool,
    /// Into how many shards a fleet that can be split is split (see [`crate::shard`]):
    /// "auto" (the default: a function of the fleet's size, never of the machine) or a whole
    /// number, 1 for none.
    #[serde(default)]
    pub shards: Option<Value>,
    /// How many threads run the replications and shards at once: "auto" (the default: one per
    /// core) or a whole number. It never changes the figures.
    #[serde(default)]
    pub threads: Option<Value>,
    /// With `[[faults]]`: how long after the last fault ends a recovery may come (see
    /// [`crate::stability`]); 10 minutes when left out.
    #[serde(default)]
    pub recovery_window: Option<Duration>,
    /// With `[[faults]]`: the intervals goodput is judged over; "auto" (the default) or a
    /// duration of whole seconds.
    #[serde(default)]
    pub recovery_interval: Option<Value>,
}

/// `router.timeout` when the scenario does not set it: Heroku's 30 s (H12).
pub const DEFAULT_ROUTER_TIMEOUT: f64 = 30.0;

/// `run.max_memory` when the scenario does not set it: 8 GB.
pub const DEFAULT_MAX_MEMORY: f64 = 8e9;

impl Default for RouterSpec {
    fn default() -> Self {
        RouterSpec {
            policy: random(),
            routers: 1,
            connect: None,
            colocated_cpu: None,
            timeout: None,
            queue_timeout: None,
            max_in_flight: None,
            cost: None,
            shed_latency: None,
            retries: default_retries(),
            retry_delay: None,
            retry_on: None,
            retry_budget: None,
            concurrency_limit: None,
            view: None,
            aperture: None,
            kind: None,
            zone: None,
            workers: None,
            params: Map::new(),
        }
    }
}

fn default_retries() -> i64 {
    10
}

fn random() -> String {
    "random".into()
}

fn auto() -> String {
    "auto".into()
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
fn default_max_memory() -> Bytes {
    Bytes(DEFAULT_MAX_MEMORY)
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
            max_memory: default_max_memory(),
            engine: auto(),
            allow_overload: false,
            shards: None,
            threads: None,
            recovery_window: None,
            recovery_interval: None,
        }
    }
}

/// A validated scenario, ready to run.
#[derive(Debug)]
pub struct Scenario {
    pub name: String,
    pub workload: Workload,
    /// A request's time on its thread when nothing contends: `[service]`'s distribution, or
    /// for `[request]` the sum of its phases (see [`crate::request::RequestTime`]).
    pub service: std::sync::Arc<dyn ServiceDistribution>,
    /// The phases of a request, for a scenario with `[request]`; None for `[service]`, whose
    /// request holds its thread for its service time and uses no CPU or resource.
    pub request: Option<RequestModel>,
    pub dyno_type: DynoType,
    pub app: AppServer,
    pub resources: Vec<Resource>,
    pub dynos: u32,
    /// Requests a dyno holds at once: processes × requests per process.
    pub slots: u32,
    pub policy_name: String,
    pub policy: Box<dyn RoutingPolicy>,
    pub routers: u32,
    /// `arrivals.keys`: the user each request comes from, drawn at its arrival; None: requests
    /// carry no key.
    pub keys: Option<UserKeys>,
    /// `router.connect`: the time from the routing decision to the request's arrival at its
    /// dyno (the router's own work, the connection, the server's accept and parse). The router
    /// counts the request against the dyno from the decision on. None: no time.
    pub connect: Option<Box<dyn ServiceDistribution>>,
    /// `router.colocated_cpu`: the CPU a router (or anything else working on each request:
    /// a load generator) running on the dyno's machine spends per request on the dyno's cores,
    /// outside the app's processes and their lock: half when the router sends the request
    /// there, half when the response leaves (docs/dyno.md, "A router on the dyno's machine").
    /// None: the router runs elsewhere.
    pub colocated_cpu: Option<Box<dyn ServiceDistribution>>,
    /// `fleet.boot_time` (or its old name `app.boot_time`): from a dyno's start to its
    /// serving requests, drawn for each boot from the stream of its own (`Stream::Boot`).
    /// Today a dyno boots after an R15 restart; the fleet's lifecycle (issue #24) starts,
    /// deploys and cycles dynos through the same time.
    pub boot_time: Box<dyn ServiceDistribution>,
    /// How dynos boot and stop: `fleet.boot_timeout`, `fleet.stop_delay`,
    /// `fleet.shutdown_grace`.
    pub lifecycle: Lifecycle,
    /// How a dyno's threads share its cores.
    pub cpu: Cpu,
    /// `[autoscale]`: the rule that resizes the fleet; None: `dynos` dynos throughout.
    pub autoscale: Option<Autoscaler>,
    /// `router.timeout` (H12), counted from when the router hands the request to a dyno.
    pub router_timeout: Option<Timeout>,
    /// `router.queue_timeout`, counted from when the router began holding the request.
    pub queue_timeout: Option<Timeout>,
    /// `arrivals.timeout`: the client's, counted from when it sent the request.
    pub client_timeout: Option<Timeout>,
    /// `router.max_in_flight`: requests each router holds at once (H11 beyond).
    pub max_in_flight: Option<u64>,
    /// `router.cost`: each router's work per request before it routes it; None: none (a
    /// router of unbounded capacity).
    pub router_cost: Option<Box<dyn ServiceDistribution>>,
    /// `router.shed_latency`: the wait for a router beyond which a request is shed.
    pub shed_latency: Option<f64>,
    /// `router.retries`: dynos tried after a refusal (a full `app.backlog`), and the wait
    /// before each (`router.retry_delay`).
    pub retries: u32,
    pub retry_delay: f64,
    /// `router.retry_on`, `router.retry_budget`: what the router retries on another dyno.
    pub router_retry: RouterRetry,
    /// `router.view`: how late the loads the routers read are ([`crate::view`]).
    pub view: View,
    /// `router.aperture`: each router sends only to its own random subset of this many dynos
    /// (see `crate::sim` and its aperture); None: to every dyno.
    pub aperture: Option<u32>,
    pub duration: f64,
    pub warmup: f64,
    pub replications: u32,
    pub seed: u64,
    pub max_waiting: usize,
    /// `run.allow_overload`: [`Scenario::check_stable`] lets a load at or above capacity run.
    pub allow_overload: bool,
    /// Bytes one replication's engine state may take.
    pub max_memory: f64,
    /// The engine asked for (`run.engine`).
    pub engine: Engine,
    /// `run.shards` as written (see [`crate::shard`]).
    pub shard_count: ShardCount,
    /// `run.threads`: threads that run replications and shards at once; None: one per core.
    pub threads: Option<usize>,
    /// `[arrivals.retry]`: the clients' retries; None: none.
    pub client_retry: Option<ClientRetry>,
    /// `[arrivals.breaker]`: the clients' circuit breaker; None: none.
    pub client_breaker: Option<ClientBreaker>,
    /// `router.concurrency_limit`: each router's limit on its requests in flight; None: none.
    pub router_limit: Option<ConcurrencyLimit>,
    /// `app.concurrency_limit`: each dyno's limit on its requests in flight; None: none.
    pub app_limit: Option<ConcurrencyLimit>,
    /// `[[faults]]`, in time order.
    pub faults: Faults,
    /// With faults: how the run judges whether the fleet recovered.
    pub stability: Option<stability::Rule>,
    /// The fleet's shards, each a scenario of its own share of the dynos and arrivals and a
    /// seed of its own (built by [`Scenario::from_json`]); empty: the fleet runs whole.
    pub shards: Vec<Scenario>,
    /// The phases of `[request]` that call other services, in class and phase order.
    pub calls: Vec<crate::calls::CallSite>,
    /// `[services.NAME]`, in name order, each validated as a fleet of its own (see
    /// [`crate::services`]).
    pub services: Vec<Service>,
    /// The mean time a request's thread waits on its calls, at least (uncontended; see
    /// [`crate::services::set_call_holds`]): part of the time it holds its thread, so of
    /// [`Self::busy_slots_needed`]. 0 without calls.
    pub call_hold: f64,
}

/// A service of the scenario: its fleet, validated as a scenario of its own, and the rate of
/// first calls its callers send it on average (retries and hedges left out).
#[derive(Debug)]
pub struct Service {
    pub name: String,
    pub scenario: Scenario,
    pub rate: f64,
}

/// `run.shards`: into how many parts a fleet that can be split is split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardCount {
    /// A function of the fleet's size ([`crate::shard::auto_shards`]).
    Auto,
    Exactly(u32),
}

/// How a dyno's runnable threads share its cores (docs/dyno.md, "The scheduler").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuSharing {
    /// Round robin in time slices of [`Cpu::quantum`] when more threads are runnable than
    /// there are cores; interpreter locks handed over as CPython and CRuby do.
    Slices,
    /// Processor sharing: each runnable thread (with a lock: process) gets min(1, cores /
    /// runnable) of a core; a lock handed round far faster than a phase lasts.
    Ps,
}

/// `fleet.cpu_sharing`, `fleet.cpu_quantum`, `fleet.cpu_jitter`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cpu {
    pub sharing: CpuSharing,
    pub quantum: f64,
    pub jitter: f64,
}

/// `fleet.cpu_quantum` by default: what Linux's EEVDF scheduler gives a task on a 2 to 8
/// core machine, rounded to its tick (../shared/docs/SCHEDULERS.md §3.3).
pub const DEFAULT_CPU_QUANTUM: f64 = 0.003;
/// `fleet.cpu_jitter` by default: measured on the testbed (docs/dyno.md, "Jitter").
pub const DEFAULT_CPU_JITTER: f64 = 0.05;

impl Cpu {
    fn of(fleet: &FleetSpec) -> Result<Cpu> {
        let sharing = match fleet.cpu_sharing.as_deref() {
            None | Some("slices") => CpuSharing::Slices,
            Some("ps") => CpuSharing::Ps,
            Some(other) => {
                return Err(Error::config(
                    "fleet.cpu_sharing",
                    format!("unknown cpu_sharing {other:?}; expected \"slices\" or \"ps\""),
                ))
            }
        };
        let quantum = match fleet.cpu_quantum {
            None => DEFAULT_CPU_QUANTUM,
            Some(Duration(q)) if q.is_finite() && q >= 1e-6 => q,
            Some(Duration(q)) => {
                return Err(Error::config(
                    "fleet.cpu_quantum",
                    format!("must be a duration of at least 1 µs, got {q} s"),
                ))
            }
        };
        // Processor sharing is for theory: its phases are as drawn unless asked otherwise.
        let jitter = fleet.cpu_jitter.unwrap_or(match sharing {
            CpuSharing::Slices => DEFAULT_CPU_JITTER,
            CpuSharing::Ps => 0.0,
        });
        if !(jitter.is_finite() && (0.0..=10.0).contains(&jitter)) {
            return Err(Error::config(
                "fleet.cpu_jitter",
                format!("must be a number from 0 to 10 (a coefficient of variation), got {jitter}"),
            ));
        }
        Ok(Cpu {
            sharing,
            quantum,
            jitter,
        })
    }
}

/// How a dyno boots and stops (see `sim/lifecycle.rs`): after `fleet.boot_time` it is up,
/// unless that is longer than `boot_timeout` (R10: it crashes at the timeout and boots again).
/// A dyno stopped is marked down at once (the routers send it nothing more), gets its SIGTERM
/// `stop_delay` later (its server stops accepting: a request reaching it after that raced it
/// going down, an H13) and has `shutdown_grace` to finish what it holds; SIGKILL fails the rest
/// (`errors.shutdown`).
#[derive(Debug, Clone, PartialEq)]
pub struct Lifecycle {
    pub boot_timeout: f64,
    pub stop_delay: f64,
    pub shutdown_grace: f64,
    /// `[[fleet.deploy]]`: (time, preboot), in time order.
    pub deploys: Vec<(f64, bool)>,
    /// `fleet.cycling`: each dyno's life before its daily restart, before the random offset
    /// ([`CYCLING_JITTER`]); None: no daily restarts.
    pub cycling: Option<f64>,
}

/// The most a daily restart comes after its period: "up to 216 random minutes" (Heroku).
pub const CYCLING_JITTER: f64 = 216.0 * 60.0;

/// Heroku's boot timeout (R10 past it), its SIGTERM about a second after a dyno is marked down
/// (AUTOSCALING.md §1.2: 1.3 s observed), and its 30 s from SIGTERM to SIGKILL.
/// The most evaluations of an autoscaler per replication (a day at 0.1 s, a year at a minute).
pub const MAX_EVALUATIONS: f64 = 1e6;
/// The most R10 crashes a boot may expect: a boot that ends in time less often than this, with
/// a timeout short against the run, is refused (each crash is an event).
pub const MAX_R10_PER_BOOT: f64 = 1e5;

pub const DEFAULT_LIFECYCLE: Lifecycle = Lifecycle {
    boot_timeout: 60.0,
    stop_delay: 1.0,
    shutdown_grace: 30.0,
    deploys: Vec::new(),
    cycling: None,
};

/// Which engine simulates a replication (`run.engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The direct engine when it can run the scenario, else the event-driven one.
    Auto,
    /// The event-driven engine, which runs every scenario.
    Events,
    /// The direct engine ([`crate::direct`]); an error for a scenario it cannot run.
    Direct,
}

impl Scenario {
    /// The retry decisions of replication `replication`'s clients (their policy, budget and
    /// backoff stream), for clients outside a simulation (the testbed's load generator); None
    /// when they never retry.
    pub fn retry_decider(&self, replication: u64) -> Option<Decider> {
        let policy = self.client_retry.clone()?;
        Some(Decider::new(
            policy,
            crate::rng::stream(self.seed, replication, crate::rng::Stream::RetryDelays),
        ))
    }

    /// Whether the scenario has services or calls (run by the event-driven engine's federation
    /// of fleets).
    pub fn has_calls(&self) -> bool {
        !self.services.is_empty() || !self.calls.is_empty()
    }

    /// Validates a parsed scenario's fleet, all but its memory and its services (see
    /// [`Scenario::build`]): the top level's, or a service's.
    pub(crate) fn validate(
        spec: &ScenarioSpec,
        base_dir: &Path,
        interrupted: &(dyn Fn() -> bool + Sync),
    ) -> Result<Scenario> {
        let a = &spec.arrivals;
        let bursts = a.burst.as_deref().unwrap_or_default();
        let workload = Workload::build(&a.process, &a.params, bursts, base_dir)?;
        let resource_names: Vec<String> = spec
            .resources
            .iter()
            .flatten()
            .map(|(name, _)| name.clone())
            .collect();
        let resources = spec
            .resources
            .iter()
            .flatten()
            .map(|(name, r)| Resource::build(name, r))
            .collect::<Result<Vec<_>>>()?;
        let calls = match &spec.request {
            Some(r) => r.call_sites("")?,
            None => Vec::new(),
        };
        let carried =
            workload.carried_service_alone(spec.service.is_some(), spec.request.is_some())?;
        let (service, request) = match (&spec.service, &spec.request) {
            _ if carried.is_some() => (carried.expect("a replayed trace's"), None),
            (Some(s), None) => (build_service(s, base_dir, interrupted)?, None),
            (None, Some(r)) => {
                let mut model = RequestModel::build(r, &resource_names, base_dir)?;
                let request_cpu = spec.app.as_ref().and_then(|a| a.request_cpu.as_ref());
                if let Some(v) = request_cpu {
                    if !crate::params::is_zero_duration(v) {
                        model.prepend_server_cpu(|| {
                            crate::dist::from_value(v, "app.request_cpu", base_dir)
                        })?;
                    }
                }
                let time = crate::request::RequestTime::new(&model)?;
                check_service(&time, "request")?;
                (Box::new(time) as Box<dyn ServiceDistribution>, Some(model))
            }
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "request",
                    "a scenario has [service] (one service time a request) or [request] \
                     (phases), not both",
                ))
            }
            (None, None) => {
                return Err(Error::config(
                    "service",
                    "missing; a scenario needs [service] (a service time distribution) or \
                     [request] (phases)",
                ))
            }
        };
        if request.is_none() && !resources.is_empty() {
            return Err(Error::config(
                "resources",
                "resources are used by [request] phases (use = \"name\"); a [service] \
                 scenario has none",
            ));
        }
        let request_cpu = spec.app.as_ref().and_then(|a| a.request_cpu.as_ref());
        if request.is_none() && request_cpu.is_some_and(|v| !crate::params::is_zero_duration(v)) {
            return Err(Error::config(
                "app.request_cpu",
                "the server's own CPU per request needs the CPU model of [request] phases; a \
                 [service] scenario holds each request for its drawn time (put the server's \
                 time in app.overhead or the service time)",
            ));
        }
        let f = &spec.fleet;
        let dyno_type = DynoType::build(f.dyno_type.as_deref(), f.cores, f.memory.map(|m| m.0))?;
        let app = match (&spec.app, f.slots) {
            (Some(app), Some(slots)) if app.only_overhead() => AppServer {
                overhead: AppServer::overhead_of(app, base_dir)?,
                wait_timeout: AppServer::wait_timeout_of(app)?,
                service_timeout: AppServer::service_timeout_of(app)?,
                ..AppServer::slots(whole(slots, "fleet.slots", 1, 100_000)?, &dyno_type)
            },
            (Some(_), Some(_)) => {
                return Err(Error::config(
                    "fleet.slots",
                    "give fleet.slots (a plain dyno of slots) or [app] (processes and \
                     threads), not both (with fleet.slots, [app] may set only overhead, \
                     wait_timeout, service_timeout and concurrency_limit)",
                ))
            }
            (Some(app), None) => AppServer::build(app, &dyno_type, base_dir)?,
            (None, slots) => AppServer::slots(
                whole(slots.unwrap_or(1), "fleet.slots", 1, 100_000)?,
                &dyno_type,
            ),
        };
        let slots: u32 = u32::try_from(app.capacity())
            .ok()
            .filter(|&c| c <= 100_000_000)
            .ok_or_else(|| {
                Error::config(
                    "app.processes",
                    format!(
                        "{} processes x {} requests each is over 10^8 requests per dyno",
                        app.processes, app.per_process
                    ),
                )
            })?;
        let engine = match spec.run.engine.as_str() {
            "auto" => Engine::Auto,
            "direct" => Engine::Direct,
            "events" => Engine::Events,
            other => {
                return Err(Error::config(
                    "run.engine",
                    format!("unknown engine {other:?}; expected auto, direct or events"),
                ))
            }
        };

        let dynos = whole(spec.fleet.dynos, "fleet.dynos", 1, 10_000_000)?;
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
        let user_keys = a.keys.as_ref().map(UserKeys::build).transpose()?;
        if policy.needs_keys() && user_keys.is_none() {
            return Err(Error::config(
                "arrivals.keys",
                format!(
                    "missing; router.policy {:?} hashes each request's key (its user): give \
                     arrivals.keys = {{ users = N }}",
                    r.policy
                ),
            ));
        }
        let connect = match &r.connect {
            None => None,
            Some(v) => crate::dist::from_value_or_zero(v, "router.connect", base_dir)?,
        };
        let boot_time = Self::boot_time_of(spec, base_dir)?;
        let lifecycle = Self::lifecycle_of(&spec.fleet)?;
        let cpu = Cpu::of(&spec.fleet)?;
        let colocated_cpu = match &r.colocated_cpu {
            None => None,
            Some(v) => crate::dist::from_value_or_zero(v, "router.colocated_cpu", base_dir)?,
        };
        if colocated_cpu.is_some() && request.is_none() {
            return Err(Error::config(
                "router.colocated_cpu",
                "the router's CPU on the dyno's cores needs the CPU model of [request] phases; a \
                 [service] scenario holds each request for its drawn time and has no cores",
            ));
        }
        let autoscale = match &spec.autoscale {
            None => None,
            Some(table) => {
                let a = Autoscaler::from_table("autoscale", table)?;
                let b = a.bounds();
                if !(b.min..=b.max).contains(&dynos) {
                    return Err(Error::config(
                        "fleet.dynos",
                        format!(
                            "the fleet starts with {dynos} dynos, outside the autoscaler's \
                             range [autoscale.min, autoscale.max] = [{}, {}]",
                            b.min, b.max
                        ),
                    ));
                }
                Some(a)
            }
        };
        let router_timeout = Timeout::build_or(
            r.timeout.as_ref(),
            "router.timeout",
            base_dir,
            Some(DEFAULT_ROUTER_TIMEOUT),
        )?;
        let queue_timeout = Timeout::build_or(
            r.queue_timeout.as_ref(),
            "router.queue_timeout",
            base_dir,
            None,
        )?;
        let client_timeout =
            Timeout::build_or(a.timeout.as_ref(), "arrivals.timeout", base_dir, None)?;
        let max_in_flight = crate::timeout_spec::build_cap(r.max_in_flight.as_ref(), dynos)?;
        let router_cost = match &r.cost {
            None => None,
            Some(v) => crate::dist::from_value_or_zero(v, "router.cost", base_dir)?,
        };
        let shed_latency = match r.shed_latency {
            None => None,
            Some(d) => Some(check_duration(d.0, "router.shed_latency")?),
        };
        let retries = whole(r.retries, "router.retries", 0, 1000)?;
        let retry_delay = match r.retry_delay {
            None => 0.0,
            Some(d) if d.0 >= 0.0 && d.0.is_finite() => d.0,
            Some(d) => {
                return Err(Error::config(
                    "router.retry_delay",
                    format!("must be a duration >= 0, got {} s", d.0),
                ))
            }
        };
        let router_retry = RouterRetry::parse(r.retry_on.as_ref(), r.retry_budget.as_ref())?;
        let router_limit = r
            .concurrency_limit
            .as_ref()
            .map(|l| ConcurrencyLimit::build(l, "router.concurrency_limit"))
            .transpose()?;
        let app_limit = spec
            .app
            .as_ref()
            .and_then(|a| a.concurrency_limit.as_ref())
            .map(|l| ConcurrencyLimit::build(l, "app.concurrency_limit"))
            .transpose()?;
        let view = View::build(r.view.as_ref())?;
        let aperture = match r.aperture {
            None => None,
            Some(k) => Some(whole(k, "router.aperture", 1, i64::from(dynos))?),
        };
        if aperture.is_some()
            && !view.is_exact()
            && matches!(
                policy.knowledge(),
                Knowledge::Ranking(_) | Knowledge::FreeSlots
            )
        {
            // The board is one ranking of every dyno for all routers; a router of an aperture
            // may send only to its own subset. Policies that draw dynos read the board's
            // entries of their draws, which are in the subset, and go ahead.
            return Err(Error::config(
                "router.aperture",
                format!(
                    "{} ranks every dyno on the late board (router.view), which is one for all \
                     routers, and a router with an aperture sends only to its own subset: use \
                     one or the other, or a policy that draws dynos (power_of_d, least_request)",
                    r.policy
                ),
            ));
        }
        check_real_router(r, routers)?;
        if shed_latency.is_some() && router_cost.is_none() {
            return Err(Error::config(
                "router.shed_latency",
                "sheds requests that would wait too long for a router: give router.cost, the \
                 router's work per request, for them to wait at all",
            ));
        }

        let run = &spec.run;
        check_duration(run.duration.0, "run.duration")?;
        if !(run.warmup.0 >= 0.0 && run.warmup.0.is_finite()) {
            return Err(Error::config("run.warmup", "must be a duration >= 0"));
        }
        if !(run.max_memory.0 >= 1e6 && run.max_memory.0.is_finite()) {
            return Err(Error::config(
                "run.max_memory",
                format!("must be at least 1 MB, got {} bytes", run.max_memory.0),
            ));
        }
        let replications = whole(run.replications, "run.replications", 1, 100_000)?;
        let whole_run = matches!(&workload, Workload::Closed(c) if c.requests.is_some());
        let horizon = run.warmup.0 + run.duration.0;
        if let Workload::Open(arrivals) = &workload {
            arrivals.check_within(horizon)?;
        }
        let (rate, simulated) = match &workload {
            Workload::Closed(Clients {
                requests: Some(n), ..
            }) => (*n as f64, 1.0),
            // The rate averaged over the run (a schedule's integral over it).
            _ => (
                workload.expected(0.0, horizon, service.mean()) / horizon,
                horizon,
            ),
        };
        check_work(rate, simulated, replications, run.max_requests)?;
        let client_retry = a
            .retry
            .as_ref()
            .map(ClientRetry::build)
            .transpose()?
            .flatten();
        let client_breaker = a.breaker.as_ref().map(ClientBreaker::build).transpose()?;
        let names: Vec<&str> = resource_names.iter().map(String::as_str).collect();
        // A closed loop of a set number of requests is measured whole: from 0 to its last
        // answer, whenever that comes.
        let window = if whole_run {
            (0.0, f64::INFINITY)
        } else {
            (run.warmup.0, horizon)
        };
        let faults = match spec.faults.as_deref() {
            None | Some([]) => Faults::default(),
            Some(specs) => Faults::build(specs, &names, window)?,
        };
        // A service's faults are judged at every fleet, the entry's too (`services.rs`).
        let faults_in_services = spec.services.as_ref().is_some_and(|tiers| {
            tiers
                .values()
                .any(|t| t.faults.as_ref().is_some_and(|f| !f.is_empty()))
        });
        let stability = Self::stability_of(run, &faults, rate, window, faults_in_services)?;
        let scenario = Scenario {
            name: spec.name.clone().unwrap_or_else(|| "scenario".into()),
            workload,
            service: service.into(),
            request,
            dyno_type,
            app,
            resources,
            dynos,
            slots,
            policy_name: r.policy.clone(),
            policy,
            routers,
            keys: user_keys,
            connect,
            colocated_cpu,
            boot_time,
            lifecycle,
            cpu,
            autoscale,
            router_timeout,
            queue_timeout,
            client_timeout,
            max_in_flight,
            router_cost,
            shed_latency,
            retries,
            retry_delay,
            router_retry,
            view,
            aperture,
            duration: run.duration.0,
            // A closed loop of a set number of requests is measured whole, as ab measures it:
            // no warm-up, and the run lasts until the last response.
            warmup: if whole_run { 0.0 } else { run.warmup.0 },
            replications,
            seed: run.seed,
            // A dyno's count of requests is a u32: a billion waiting stay well inside it.
            max_waiting: whole::<usize>(run.max_waiting, "run.max_waiting", 1, 1_000_000_000)?,
            allow_overload: run.allow_overload,
            max_memory: run.max_memory.0,
            engine,
            shard_count: match run.shards.as_ref() {
                None => ShardCount::Auto,
                Some(v) => auto_or_whole(v, "run.shards", dynos)?
                    .map_or(ShardCount::Auto, ShardCount::Exactly),
            },
            threads: match &run.threads {
                None => None,
                Some(v) => auto_or_whole(v, "run.threads", 1024)?.map(|t| t as usize),
            },
            client_retry,
            client_breaker,
            router_limit,
            app_limit,
            faults,
            stability,
            shards: Vec::new(),
            calls,
            services: Vec::new(),
            call_hold: 0.0,
        };
        scenario.check_time_scales()?;
        scenario.check_lifecycle()?;
        scenario.check_slices()?;
        Ok(scenario)
    }

    /// Makes every replication stop as soon as its stability verdict is settled (a scenario
    /// without faults is left as it is; see [`stability::Goodput::pending`]). Its
    /// `stability.*` figures stay those of the whole run, to the bit; its other figures are of
    /// the shortened run, and mean nothing: for a caller that reads the verdict alone (the
    /// metastability map). A replication stopped early is not run on to see whether its queues
    /// would have outgrown `run.max_waiting` later.
    pub fn stop_at_verdict(&mut self) {
        if let Some(rule) = self.stability.as_mut() {
            rule.stop_at_verdict = true;
        }
    }

    /// The stability verdict's rule for a run with faults (None without): `run.recovery_window`
    /// and `run.recovery_interval` checked against the run and the faults; `rate` is the
    /// arrival rate that sizes an automatic interval. `faults_in_services`: a service has
    /// faults, which give this fleet its rule once the services are built (`services.rs`).
    fn stability_of(
        run: &RunSpec,
        faults: &Faults,
        rate: f64,
        (start, end): (f64, f64),
        faults_in_services: bool,
    ) -> Result<Option<stability::Rule>> {
        let Some((first, last)) = faults.span() else {
            if faults_in_services {
                return Ok(None);
            }
            for (given, key) in [
                (run.recovery_window.is_some(), "run.recovery_window"),
                (run.recovery_interval.is_some(), "run.recovery_interval"),
            ] {
                if given {
                    return Err(Error::config(
                        key,
                        "judges the recovery after [[faults]]; the scenario has none",
                    ));
                }
            }
            return Ok(None);
        };
        let window = match run.recovery_window {
            None => stability::DEFAULT_WINDOW,
            Some(d) => check_duration(d.0, "run.recovery_window")?,
        };
        let interval = match &run.recovery_interval {
            None => stability::auto_interval(rate, window),
            Some(Value::String(s)) if s == "auto" => stability::auto_interval(rate, window),
            Some(v) => {
                let d: Duration = serde_json::from_value(v.clone()).map_err(|_| {
                    Error::config(
                        "run.recovery_interval",
                        format!("expected \"auto\" or a duration of whole seconds, got {v}"),
                    )
                })?;
                if !(d.0 >= 1.0 && d.0.is_finite() && d.0.fract() == 0.0) {
                    return Err(Error::config(
                        "run.recovery_interval",
                        format!(
                            "must be a whole number of seconds, at least 1 s; got {} s",
                            d.0
                        ),
                    ));
                }
                d.0
            }
        };
        Ok(Some(stability::Rule {
            first,
            last,
            window_start: start,
            run_end: end,
            interval,
            window,
            stop_at_verdict: false,
        }))
    }

    /// `fleet.boot_timeout`, `fleet.stop_delay` and `fleet.shutdown_grace`, or their defaults.
    fn lifecycle_of(fleet: &FleetSpec) -> Result<Lifecycle> {
        let d = DEFAULT_LIFECYCLE;
        let at_least_0 = |v: Option<Duration>, key: &str, default: f64| match v {
            None => Ok(default),
            Some(Duration(s)) if s >= 0.0 && s.is_finite() => Ok(s + 0.0),
            Some(Duration(s)) => Err(Error::config(
                format!("fleet.{key}"),
                format!("must be a duration >= 0, got {s} s"),
            )),
        };
        let mut deploys = Vec::new();
        for (i, d) in fleet.deploy.iter().flatten().enumerate() {
            let at = d.at.0;
            if !(at >= 0.0 && at.is_finite()) {
                return Err(Error::config(
                    format!("fleet.deploy[{i}].at"),
                    format!("must be a time >= 0, got {at} s"),
                ));
            }
            if let Some(&(before, _)) = deploys.last() {
                if at <= before {
                    return Err(Error::config(
                        format!("fleet.deploy[{i}].at"),
                        format!("deploys must be in time order: {at} s comes after {before} s"),
                    ));
                }
            }
            deploys.push((at + 0.0, d.preboot.unwrap_or(false)));
        }
        let cycling = match fleet.cycling {
            None => None,
            Some(d) => Some(check_duration(d.0, "fleet.cycling")?),
        };
        Ok(Lifecycle {
            deploys,
            cycling,
            boot_timeout: match fleet.boot_timeout {
                None => d.boot_timeout,
                Some(t) => check_duration(t.0, "fleet.boot_timeout")?,
            },
            stop_delay: at_least_0(fleet.stop_delay, "stop_delay", d.stop_delay)?,
            shutdown_grace: at_least_0(fleet.shutdown_grace, "shutdown_grace", d.shutdown_grace)?,
        })
    }

    /// With an autoscaler, deploys or daily restarts, dynos boot during the run: a boot that
    /// always outlasts the boot timeout, or the run, would never bring one up; a deploy after
    /// the run would never come.
    fn check_lifecycle(&self) -> Result<()> {
        if !self.has_lifecycle() {
            return Ok(());
        }
        let horizon = self.warmup + self.duration;
        for (i, &(at, _)) in self.lifecycle.deploys.iter().enumerate() {
            if at >= horizon {
                return Err(Error::config(
                    format!("fleet.deploy[{i}].at"),
                    format!("{at} s is at or after the run's end ({horizon} s)"),
                ));
            }
        }
        // The shortest boot the distribution draws.
        let boot = self.boot_time.quantile(0.0);
        if boot.is_finite() && boot >= self.lifecycle.boot_timeout {
            return Err(Error::config(
                "fleet.boot_time",
                format!(
                    "every boot takes at least {boot} s, fleet.boot_timeout ({} s): each would \
                     crash (R10) and no dyno would come up; shorten it or raise \
                     fleet.boot_timeout",
                    self.lifecycle.boot_timeout
                ),
            ));
        }
        // While a boot fails, the dyno crashes every boot_timeout and boots again: a boot that
        // almost never ends in time, against a tiny timeout, would be billions of R10s.
        let timeout = self.lifecycle.boot_timeout;
        let in_time = self.boot_time.cdf(timeout);
        let per_boot = ((1.0 - in_time) / in_time).min(horizon / timeout);
        if per_boot.is_nan() || per_boot > MAX_R10_PER_BOOT {
            let odds = if in_time > 0.0 {
                format!("once in {:.0e} tries", 1.0 / in_time)
            } else {
                "almost never".into()
            };
            return Err(Error::config(
                "fleet.boot_timeout",
                format!(
                    "a boot ends within {timeout} s {odds}: a dyno would crash (R10) about \
                     {per_boot:.0e} times per boot, more than {MAX_R10_PER_BOOT:.0e}; raise \
                     fleet.boot_timeout or shorten fleet.boot_time"
                ),
            ));
        }
        // Each evaluation is an event, and reads the rule's window.
        if let Some(a) = &self.autoscale {
            let evaluations = horizon / a.interval();
            if evaluations.is_nan() || evaluations > MAX_EVALUATIONS {
                return Err(Error::config(
                    "autoscale.interval",
                    format!(
                        "an interval of {} s over the run ({horizon} s) is {evaluations:.0e} \
                         evaluations, more than the engine takes (at most {MAX_EVALUATIONS:.0e} \
                         per replication): lengthen the interval or shorten the run",
                        a.interval()
                    ),
                ));
            }
        }
        let mean = self.boot_time.mean();
        if mean >= horizon {
            return Err(Error::config(
                "fleet.boot_time",
                format!(
                    "a boot takes {mean} s on average, longer than the run ({horizon} s): no \
                     dyno the autoscaler starts would come up in it"
                ),
            ));
        }
        Ok(())
    }

    /// The most dynos routed to at once: `autoscale.max` with an autoscaler, else `dynos`.
    /// Capacity (the offered load, the stability check) is counted on these.
    pub fn serving_dynos(&self) -> u32 {
        self.autoscale
            .as_ref()
            .map_or(self.dynos, |a| a.bounds().max)
    }

    /// Dyno slots a replication keeps: `dynos` for a fixed fleet; with an autoscaler, room
    /// for twice its largest fleet, so that dynos booting can take new slots while the dynos
    /// they replace drain. A dyno asked for while every slot is taken starts when one frees.
    pub fn dyno_slots(&self) -> u32 {
        if self.has_lifecycle() {
            self.serving_dynos().max(self.dynos).saturating_mul(2)
        } else {
            self.dynos
        }
    }

    /// Whether dynos come and go during a run (an autoscaler, deploys, daily restarts): the
    /// run then reports its fleet's size and bill, and runs on the event engine.
    pub fn has_lifecycle(&self) -> bool {
        self.autoscale.is_some()
            || !self.lifecycle.deploys.is_empty()
            || self.lifecycle.cycling.is_some()
    }

    /// `fleet.boot_time`, or its old name `app.boot_time` (a duration), or
    /// [`crate::app::DEFAULT_BOOT_TIME`]; both at once is a mistake.
    fn boot_time_of(spec: &ScenarioSpec, base_dir: &Path) -> Result<Box<dyn ServiceDistribution>> {
        let old = spec.app.as_ref().and_then(|a| a.boot_time);
        match (&spec.fleet.boot_time, old) {
            (Some(_), Some(_)) => Err(Error::config(
                "app.boot_time",
                "the old name of fleet.boot_time: give one of them, not both",
            )),
            (Some(v), None) => dist::from_value(v, "fleet.boot_time", base_dir),
            (None, Some(d)) => Ok(Box::new(dist::Constant(check_duration(
                d.0,
                "app.boot_time",
            )?))),
            (None, None) => Ok(Box::new(dist::Constant(crate::app::DEFAULT_BOOT_TIME))),
        }
    }

    /// Requests per second: the open process's rate, or the most a closed loop's clients can
    /// send (see [`Workload::mean_rate`]).
    pub fn arrival_rate(&self) -> f64 {
        self.workload.mean_rate(self.service.mean())
    }

    /// Whether the routers read a late board (`router.view` other than exact) rather than
    /// their own counts: only a policy that reads loads does.
    pub fn reads_board(&self) -> bool {
        !self.view.is_exact() && reads_loads(self.policy.knowledge())
    }

    /// [`Scenario::offered_load`] of the whole app: with services, the busiest of its fleets'
    /// (each service's at its rate from the traffic equations); without, the fleet's.
    pub fn app_offered_load(&self) -> f64 {
        self.services
            .iter()
            .map(|service| service.scenario.offered_load())
            .fold(self.offered_load(), f64::max)
    }

    /// The utilisation of the busiest part of the system at the arrival rate: every policy
    /// must reach it, and 1 or more is unstable. See [`Scenario::bottleneck`].
    pub fn offered_load(&self) -> f64 {
        self.bottleneck().1
    }

    /// The part of the system with the highest load, and that load: λ × the demand a request
    /// makes on it / its servers. Threads (slots: λ E[S] / (dynos × slots)) for every scenario;
    /// for phases also the cores (λ (E[cpu] + E[router.colocated_cpu]) / (dynos × cores)),
    /// with an interpreter lock the
    /// processes (λ E[cpu] / (dynos × min(processes, cores))), each resource's servers, and
    /// each pool's connections. Demands are uncontended; memory slowdowns are not counted.
    pub fn bottleneck(&self) -> (&'static str, f64) {
        let rate = self.arrival_rate();
        let dynos = f64::from(self.serving_dynos());
        let mut best = (
            "threads",
            self.busy_slots_needed() / self.total_slots() as f64,
        );
        let mut consider = |name: &'static str, load: f64| {
            if load > best.1 || load.is_nan() {
                best = (name, load);
            }
        };
        if let Some(cost) = &self.router_cost {
            consider("routers", rate * cost.mean() / f64::from(self.routers));
        }
        if let Some(model) = &self.request {
            let cpu = rate * model.mean_demand(PhaseKind::Cpu);
            // A router on the dyno's machine takes its share of the cores, not of the lock.
            let colocated = rate * self.colocated_cpu.as_ref().map_or(0.0, |c| c.mean());
            consider(
                "cores",
                (cpu + colocated) / (dynos * f64::from(self.dyno_type.cores)),
            );
            if self.app.lock.is_some() {
                let running = self.app.processes.min(self.dyno_type.cores);
                consider("interpreter lock", cpu / (dynos * f64::from(running)));
            }
            for (i, r) in self.resources.iter().enumerate() {
                let busy = rate * model.mean_demand(PhaseKind::Use(i as u32));
                consider("resource", busy / f64::from(r.servers));
                if let Some((size, scope)) = r.pool {
                    let pools = match scope {
                        PoolScope::App => 1.0,
                        PoolScope::Dyno => dynos,
                        PoolScope::Process => dynos * f64::from(self.app.processes),
                    };
                    consider("pool", busy / (pools * f64::from(size)));
                }
            }
        }
        best
    }

    /// How long the queues take to settle at this load, in seconds: the heavy-traffic estimate
    /// of [`theory::relaxation_time`], None at or above capacity. The servers sharing one queue
    /// are a dyno's slots, except for one `intelligent` router, whose single queue feeds every
    /// slot of the fleet. (Several `intelligent` routers may each send a dyno more than it has
    /// free, so their requests queue at the dynos too: the dyno's slots, the longer estimate.)
    pub fn relaxation_time(&self) -> Option<f64> {
        let one_queue = self.policy.knowledge() == Knowledge::FreeSlots && self.routers == 1;
        let servers = if one_queue {
            self.total_slots()
        } else {
            u64::from(self.slots)
        };
        theory::relaxation_time(
            self.offered_load(),
            self.service.mean(),
            self.service.second_moment(),
            servers,
        )
    }

    /// Arrival rate × mean (uncontended) time a request holds its thread: its service time,
    /// the app's overhead after it, and the time it waits on its calls (at least).
    pub fn busy_slots_needed(&self) -> f64 {
        let overhead = self.app.overhead.as_ref().map_or(0.0, |o| o.mean());
        self.arrival_rate() * (self.service.mean() + overhead + self.call_hold)
    }

    /// Slots of the largest fleet (see [`Self::serving_dynos`]).
    pub fn total_slots(&self) -> u64 {
        self.serving_dynos() as u64 * self.slots as u64
    }

    /// Refuses a scenario whose busy slots needed overflow, whose measured window expects
    /// fewer than one arrival (its figures would all be zeros, which read as a fleet that
    /// never queues), or whose run is so long that the simulated clock (f64 seconds) cannot
    /// time a mean service time or a mean gap between arrivals to 1 part in 1000 near its end.
    /// Time slices cost an event per slice and per lock switch while threads contend: at most
    /// the run's CPU work over the quantum, and over the lock's interval. A quantum or an
    /// interval so short that this passes 10¹⁰ events (hours of computing) is refused.
    fn check_slices(&self) -> Result<()> {
        let Some(model) = &self.request else {
            return Ok(());
        };
        if self.cpu.sharing != CpuSharing::Slices {
            return Ok(());
        }
        let horizon = self.warmup + self.duration;
        let expected = self
            .workload
            .expected(self.warmup, horizon, self.service.mean());
        let cores = f64::from(self.dyno_slots()) * f64::from(self.dyno_type.cores) * horizon;
        let colocated = self.colocated_cpu.as_ref().map_or(0.0, |c| c.mean());
        let work = (expected * (model.mean_demand(PhaseKind::Cpu) + colocated)).min(cores);
        let (lock_key, interval) = match self.app.lock {
            crate::app::Lock::Gil => ("app.switch_interval", self.app.switch_interval),
            crate::app::Lock::Gvl => ("app.timeslice", crate::app::GVL_TICK),
            crate::app::Lock::None => ("", f64::INFINITY),
        };
        const MOST: f64 = 1e10;
        for (key, every) in [
            ("fleet.cpu_quantum", self.cpu.quantum),
            (lock_key, interval),
        ] {
            let events = work / every;
            if events > MOST {
                return Err(Error::config(
                    key,
                    format!(
                        "{every} s is too short for this run: {work:.3e} s of CPU work in \
                         slices of it could cost {events:.1e} events (at most {MOST:e}); \
                         lengthen it, shorten the run, or set fleet.cpu_sharing = \"ps\""
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_time_scales(&self) -> Result<()> {
        let horizon = self.warmup + self.duration;
        let min_response = self.service.mean();
        let expected = self.workload.expected(self.warmup, horizon, min_response);
        if expected.is_nan() || expected < 1.0 {
            return Err(Error::config(
                "run.duration",
                format!(
                    "{} s at {} arrivals/s expects {expected:e} arrivals; a run needs at least \
                     one (arrivals.rate x run.duration >= 1)",
                    self.duration,
                    expected / self.duration
                ),
            ));
        }
        if !self.busy_slots_needed().is_finite() {
            return Err(Error::config(
                "arrivals.rate",
                format!(
                    "arrival rate {} /s x mean service time {} s overflows",
                    self.arrival_rate(),
                    self.service.mean()
                ),
            ));
        }
        let peak = self.workload.peak_rate(horizon, min_response);
        let (gap, service) = (1.0 / peak, self.service.mean());
        let shortest = gap.min(service);
        if horizon * f64::EPSILON * 1e3 > shortest {
            return Err(Error::config(
                "run.duration",
                format!(
                    "warmup + duration = {horizon} s is too long for the simulated clock to time \
                     {} of {shortest} s to 1 part in 1000; shorten the run",
                    if gap < service {
                        "the mean gap between arrivals"
                    } else {
                        "the mean service time"
                    }
                ),
            ));
        }
        // A service time so variable (a gamma of shape 1e-308: a squared coefficient of
        // variation near 1e308) that the queues' relaxation time overflows: no run could
        // reach a steady state, and the steady-state check cannot even say how long it would
        // take (found by the validation fuzzer).
        let (mean, second) = (self.service.mean(), self.service.second_moment());
        if self.offered_load() < 1.0 && self.relaxation_time().is_none() {
            return Err(Error::config(
                "service",
                format!(
                    "a service time this variable (mean {mean:e} s, second moment {second:e}                      s², a squared coefficient of variation of {:e}) would keep the queues                      from settling for longer than any run",
                    second / (mean * mean) - 1.0
                ),
            ));
        }
        Ok(())
    }

    /// Whether the scenario's losses keep its queues bounded at any load, so that a load at
    /// or above capacity is no instability: a cap on the requests in flight
    /// (`router.max_in_flight`), or one router that holds every request until a thread is
    /// free (`intelligent`) and drops those that wait too long (`router.queue_timeout`, or the
    /// client's `arrivals.timeout`): M/M/c+M is stable at every load; or a listen backlog
    /// (`app.backlog`) under a policy that does not hold requests: M/M/c/K.
    pub fn sheds_load(&self) -> bool {
        let one_queue = self.policy.knowledge() == Knowledge::FreeSlots && self.routers == 1;
        self.max_in_flight.is_some()
            || self.shed_latency.is_some()
            || (one_queue && (self.queue_timeout.is_some() || self.client_timeout.is_some()))
            // A full backlog refuses, and after router.retries the client gets an H13: a
            // dyno holds at most its threads and its backlog, unless the router holds
            // requests of its own (intelligent), which it never sends to a busy dyno.
            || (self.app.backlog.is_some() && self.policy.knowledge() != Knowledge::FreeSlots)
    }

    /// Refuses a scenario whose offered load is at or above capacity (unless
    /// `run.allow_overload`), or not a number. A closed loop is always stable: its clients wait
    /// for their responses. Every run passes here first.
    pub fn check_stable(&self) -> Result<()> {
        self.check_load()
    }

    /// [`Scenario::check_stable`] on the load alone.
    pub fn check_load(&self) -> Result<()> {
        if self.workload.is_closed() {
            return Ok(());
        }
        let load = self.offered_load();
        if load.is_nan() {
            return Err(Error::config(
                "",
                format!(
                    "offered load is not a number (arrival rate {} /s x mean service time {} s \
                     / {} slots)",
                    self.arrival_rate(),
                    self.service.mean(),
                    self.total_slots()
                ),
            ));
        }
        if load >= 1.0 && !self.allow_overload && !self.sheds_load() {
            let (bottleneck, offered_load) = self.bottleneck();
            return Err(Error::Unstable {
                offered_load,
                busy_slots_needed: self.busy_slots_needed(),
                slots: self.total_slots(),
                bottleneck,
            });
        }
        Ok(())
    }
}

/// Builds `[service]`: a registered distribution, rounded and clipped if asked.
fn build_service(
    s: &ServiceSpec,
    base_dir: &Path,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Box<dyn ServiceDistribution>> {
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
    check_service(&*service, &format!("service.{}", keys[0]))?;
    if let Some(step) = s.round_up {
        check_duration(step.0, "service.round_up")?;
    }
    if let Some((lo, hi)) = s.clip {
        if !(lo.0 >= 0.0 && hi.0 > lo.0 && hi.0 >= MIN_DURATION && hi.0.is_finite()) {
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
            interrupted,
        )?);
        let key = if s.round_up.is_some() {
            "service.round_up"
        } else {
            "service.clip"
        };
        check_service(&*service, key)?;
    }

    Ok(service)
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
    if expected.is_nan() || expected > budget {
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

/// Checks what every use of a service distribution relies on (the stability check, theory, the
/// relaxation time): a mean of at least 1 ns, and finite mean, second moment and median. Every
/// distribution offered has finite moments of all orders, so an infinite or NaN one is an
/// overflow (a lognormal with σ = 30, a quantile table whose percentiles are too close for
/// their z to differ): parameters too extreme to simulate, reported at `path`.
fn check_service(service: &dyn ServiceDistribution, path: &str) -> Result<()> {
    let (mean, second, median) = (
        service.mean(),
        service.second_moment(),
        service.quantile(0.5),
    );
    if !(mean.is_finite() && second.is_finite() && median.is_finite()) {
        return Err(Error::config(
            path,
            format!(
                "the service time distribution's moments are not finite numbers (mean {mean} s, \
                 second moment {second} s², median {median} s): its parameters are too extreme \
                 to simulate"
            ),
        ));
    }
    if mean < MIN_DURATION {
        return Err(Error::config(
            path,
            format!("the mean service time, {mean} s, is below 1 ns"),
        ));
    }
    Ok(())
}

/// The real routers `dynosim testbed` can run (`router.kind`).
pub const REAL_ROUTERS: &[&str] = &["haproxy", "nginx"];

/// `router.kind`, `router.zone` and `router.workers` say which real router `dynosim testbed`
/// runs and how. The simulation does not read them, but every command refuses a mistake in
/// them, as it does in any key, and holds them to what the simulation means by routers: nginx's
/// workers without a shared zone each count only their own requests, so each is one of
/// router.routers; with a zone they share one view, which is one router.
fn check_real_router(r: &RouterSpec, routers: u32) -> Result<()> {
    let kind = r.kind.as_deref().unwrap_or("haproxy");
    if !REAL_ROUTERS.contains(&kind) {
        return Err(unknown("router.kind", "router", kind, REAL_ROUTERS));
    }
    if kind != "nginx" {
        // `zone = false` says what every other router is anyway.
        for (key, set) in [
            ("zone", r.zone == Some(true)),
            ("workers", r.workers.is_some()),
        ] {
            if set {
                return Err(Error::config(
                    format!("router.{key}"),
                    "only nginx takes it: set router.kind = \"nginx\", or leave it out",
                ));
            }
        }
        return Ok(());
    }
    let zone = r.zone.unwrap_or(false);
    if zone && routers != 1 {
        return Err(Error::config(
            "router.zone",
            format!(
                "nginx's workers share one view in a zone, which is one router: set \
                 router.routers = 1, not {routers} (router.workers sets nginx's worker processes)"
            ),
        ));
    }
    if let Some(workers) = r.workers {
        let workers: u32 = whole(workers, "router.workers", 1, 64)?;
        if !zone && workers != routers {
            return Err(Error::config(
                "router.workers",
                format!(
                    "without a shared zone each nginx worker is a router with its own view: \
                     give router.routers = {workers}, or leave router.workers out, or set \
                     router.zone = true"
                ),
            ));
        }
    }
    Ok(())
}

/// "auto" (None) or a whole number from 1 to `max`.
fn auto_or_whole(value: &Value, path: &str, max: u32) -> Result<Option<u32>> {
    match value {
        Value::String(s) if s == "auto" => Ok(None),
        Value::Number(n)
            if n.as_u64()
                .is_some_and(|n| (1..=u64::from(max)).contains(&n)) =>
        {
            Ok(n.as_u64().map(|n| n as u32))
        }
        other => Err(Error::config(
            path,
            format!("expected \"auto\" or a whole number from 1 to {max}, got {other}"),
        )),
    }
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

/// Whether a policy of this knowledge reads the dynos' loads (and so a late board): `jiq`'s
/// idle lists and the blind policies do not.
fn reads_loads(knowledge: Knowledge) -> bool {
    !matches!(knowledge, Knowledge::Nothing | Knowledge::IdleReports)
}
