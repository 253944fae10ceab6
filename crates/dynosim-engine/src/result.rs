//! What a replication reports: the figures every engine produces, and the optional trace.

use crate::stats::TimeSummary;
use serde::Serialize;
use std::collections::BTreeMap;

/// What one replication measured, over requests arriving after the warm-up.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicationResult {
    /// Requests that arrived in the measurement window.
    pub requests: u64,
    /// Fraction of the requests that reached a thread that waited at all on the way (router
    /// or dyno queue).
    pub queued_fraction: f64,
    /// Queue time (router + dyno) of the requests that reached a thread: the dyno's view
    /// (a request answered with an error first may still reach one).
    pub queue: TimeSummary,
    /// Queue time over the requests that waited.
    pub queue_of_queued: TimeSummary,
    /// Response time as the clients saw it, of every request answered: by its app, or with
    /// an error (an H12 after the router's timeout, an H11 at once...).
    pub response: TimeSummary,
    /// Response time of the requests their app answered (no error): queue + service.
    pub response_ok: TimeSummary,
    pub service_mean: f64,
    /// Answers (successes and errors) per second inside the window: the response rate a load
    /// generator sees.
    pub throughput: f64,
    /// Successful answers per second inside the window.
    pub goodput: f64,
    /// Requests answered with an error, by kind, as fractions of `requests`.
    pub errors: ErrorTable<f64>,
    /// The same, as counts.
    pub error_counts: ErrorTable<u64>,
    /// Work spent on requests whose clients had already been answered with an error.
    pub wasted: Wasted,
    pub utilisation: Utilisation,
    pub max_queue_depth: QueueDepth,
    /// Every request simulated, warm-up included (for throughput benchmarks).
    pub simulated_requests: u64,
    /// Arrivals and completions simulated, warm-up included.
    pub events: u64,
    /// Inside the dynos (scenarios with `[app]` or `[request]`): CPU, processes, memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dyno: Option<DynoFigures>,
    /// Requests that failed, by cause (scenarios in which requests can fail).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<Failed>,
    /// Each shared resource, by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<BTreeMap<String, ResourceFigures>>,
    /// Each request class, by name (scenarios with `[[request.class]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<BTreeMap<String, ClassFigures>>,
    /// What a closed-loop load generator (ab, hey) would report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_loop: Option<ClosedLoop>,
    /// The fleet's size and bill (scenarios whose dynos come and go: `[autoscale]`, deploys,
    /// daily restarts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetFigures>,
    /// What the autoscaler did (scenarios with `[autoscale]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<AutoscaleFigures>,
    /// What the routers' idle lists did (the `jiq` policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<RoutingFigures>,
    /// What the retries did (scenarios with `[arrivals.retry]`, or `router.retry_on` "timeout" or "5xx").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<RetryFigures>,
    /// Whether goodput came back after the faults (scenarios with `[[faults]]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stability: Option<StabilityFigures>,
    /// What the clients' circuit breaker did (scenarios with `[arrivals.breaker]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerFigures>,
    /// What the concurrency limits did (scenarios with `router.concurrency_limit` or
    /// `app.concurrency_limit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<LimitFigures>,
    /// Each service the requests call (`[services.NAME]`), by name: its fleet's figures, as
    /// the top level's are, and what its callers' calls to it did. The top level's figures
    /// are the whole request's (its response includes its calls').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub services: Option<BTreeMap<String, ServiceFigures>>,
    /// The engine that ran it ("direct" or "events"; see [`crate::engine`]).
    #[serde(skip)]
    pub engine: &'static str,
}

/// A service's figures (`services.NAME.*`): its fleet's, as a top-level fleet's, and its
/// callers' calls to it.
#[derive(Debug, Clone, Serialize)]
pub struct ServiceFigures {
    #[serde(flatten)]
    pub fleet: Box<ReplicationResult>,
    pub calls: CallFigures,
}

/// What the calls to a service did, over the whole run (warm-up included), as its callers saw
/// them. Each try of a call (its first, and each retry) is a request of the callee's.
#[derive(Debug, Clone, Serialize, Default)]
pub struct CallFigures {
    /// Tries sent to the service (first tries, retries and hedges).
    pub sent: u64,
    /// Tries answered in time, successfully or with an error (the callee's own).
    pub answered: u64,
    /// Of those, answered with an error.
    pub errors: u64,
    /// Tries whose caller stopped waiting at the call's `timeout`.
    pub timed_out: u64,
    /// `timed_out` over `sent`.
    pub timed_out_fraction: f64,
    /// Tries sent again (`retries`) after an error or a timeout.
    pub retried: u64,
    /// Second copies of a hedged fan-out's calls (`hedge`), counted in `sent`.
    pub hedged: u64,
    /// Calls that failed on their last try (a hedged call: both copies, or its only one): their
    /// request was answered 500 (`errors.call_failed` of the caller).
    pub failed: u64,
    /// Answers that came after their caller stopped waiting: the callee's work done for
    /// nobody.
    pub late: u64,
    /// Copies a fan-out cancelled once it no longer needed them (`cancel = "queued"` or
    /// `true`): dropped before a thread took them, or (`true`) stopped on their thread; they
    /// never answer. `answered + late + cancelled = sent`. Written only when a call site of
    /// the service sets `cancel` (a scenario without it reports what it did before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<u64>,
}

/// A fleet that changes size, over the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct FleetFigures {
    /// Dynos running (booting, up or stopping: the dynos billed): their mean, least and most
    /// over the window.
    pub size: SizeFigures,
    /// The integral of `size` over the window: what the platform bills, prorated per second.
    pub dyno_seconds: f64,
    /// Dynos up or stopping (serving requests), on average over the window.
    pub serving_mean: f64,
    /// Dynos started in the window.
    pub starts: u64,
    /// Boots that outlasted `fleet.boot_timeout` and crashed (Heroku's R10), in the window.
    pub r10: u64,
    /// Daily restarts (`fleet.cycling`) and deploys (`[[fleet.deploy]]`) in the window.
    pub cycles: u64,
    pub deploys: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SizeFigures {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// What an autoscaler did over the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct AutoscaleFigures {
    /// Evaluations that changed the fleet's size (scale events).
    pub actions: u64,
    /// Scale events in the other direction than the last, within that one's cooldown
    /// (flapping).
    pub reversals: u64,
}

/// The retries, the clients' and the routers', over the requests arriving in the window (by their first tries).
#[derive(Debug, Clone, Serialize)]
pub struct RetryFigures {
    /// Tries sent, the first ones included.
    pub attempts: u64,
    /// Tries per request: the load's amplification (1 without a retry).
    pub attempts_per_request: f64,
    /// Retries sent, by who sent them: the clients and the routers (attempts − requests),
    /// and the app (its queries tried again, `[resources.NAME] retries`).
    pub count: u64,
    pub client: u64,
    pub router: u64,
    pub app: u64,
    /// Retries a budget refused: the request failed with tries left.
    pub denied: u64,
    /// Requests that failed on their last try (an outcome the clients retry, no try left).
    pub exhausted: u64,
}

/// The clients' circuit breaker over the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct BreakerFigures {
    /// Fraction of the window it was open (failing every try at once); half-open is not open.
    pub open_fraction: f64,
    /// Times it opened in the window.
    pub opened: u64,
    /// Tries it failed at once (open, or half-open with its probes out), of the window's
    /// requests (by their first try).
    pub rejected: u64,
}

/// The concurrency limits over the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct LimitFigures {
    /// Tries rejected at once by a limit (the routers' and the dynos'), of the window's
    /// requests (by their first try).
    pub rejected: u64,
    /// `rejected` over the window's length: rejections a second.
    pub rejected_per_s: f64,
    /// The routers' limit, averaged over the window's time and the routers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub router_mean: Option<f64>,
    /// The dynos' limit, averaged over the window's time and the dyno slots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_mean: Option<f64>,
}

/// The stability verdict of one replication (see [`crate::stability`]); the report's summary
/// gives `recovered` as the fraction of replications and `recovery_time` as the mean of those
/// that recovered.
#[derive(Debug, Clone, Serialize)]
pub struct StabilityFigures {
    /// 1 if goodput came back (to 95% of its level before the first fault, three intervals
    /// in a row, within the recovery window), 0 if not.
    pub recovered: f64,
    /// From the last fault's end to the first of those intervals, s; null if not recovered.
    pub recovery_time: Option<f64>,
    /// Goodput before the first fault, successful answers per second.
    pub baseline_goodput: f64,
    /// The window judged after the last fault (the run's end may cut it short), and the
    /// intervals' length, s.
    pub window: f64,
    pub interval: f64,
}

/// Join-Idle-Queue's idle lists, over the requests arriving in the window.
#[derive(Debug, Clone, Serialize)]
pub struct RoutingFigures {
    /// Fraction of the requests that their router sent to a dyno from its idle list (Lu et
    /// al.'s ρ̂); the others went to a dyno drawn at random.
    pub idle_hits: f64,
    /// The same, as a count.
    pub idle_hit_count: u64,
    /// Fraction of those hits that found their dyno busy: it had got a request at random
    /// while it was listed.
    pub busy_hits: f64,
}

/// Averages over the dynos and the measured window.
#[derive(Debug, Clone, Serialize)]
pub struct DynoFigures {
    /// Cores in use / cores.
    pub cpu_utilisation: f64,
    /// Busy threads (requests held) / threads: the same as `utilisation.mean`.
    pub thread_occupancy: f64,
    /// Processes holding at least one request / processes.
    pub process_occupancy: f64,
    /// Most requests waiting in one dyno's accept queue.
    pub accept_queue_max: u64,
    pub memory: MemoryFigures,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemoryFigures {
    /// Time-weighted mean of a dyno's memory, bytes.
    pub mean: f64,
    /// The most any dyno held, bytes.
    pub peak: f64,
    /// Fraction of dyno-time over the memory quota (R14).
    pub over_quota: f64,
    /// Dyno-seconds over the quota (R14).
    pub r14_seconds: f64,
    /// Dynos restarted for memory (R15).
    pub r15_restarts: u64,
}

/// The kinds of error a request may be answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// `router.max_in_flight`: the router holds as many as it may (Heroku's H11).
    H11,
    /// `app.backlog`: every dyno tried refused the connection (Heroku's H21, H13).
    H13,
    /// `router.timeout`: the dyno did not answer in time (Heroku's H12).
    H12,
    /// `arrivals.timeout`: the client gave up.
    ClientTimeout,
    /// `router.queue_timeout`: held at the router too long (HAProxy's `timeout queue`).
    QueueTimeout,
    /// `app.timeout`: its worker ran too long on it and was killed.
    AppTimeout,
    /// `router.shed_latency`: shed by a router too far behind (Heroku's load-shedding 500s).
    Shed,
    /// Killed with its dyno, restarted for memory (R15).
    R15,
    /// No dyno was up to take it.
    NoDyno,
    /// Still on its dyno when the dyno's shutdown grace ended: SIGKILL (a scale-down).
    Shutdown,
    /// Refused by an outage of the app or of a resource it used (`[[faults]]`): the app
    /// answered 500.
    Outage,
    /// On a dyno that crashed (`[[faults]]` `dynos_lost`).
    Crashed,
    /// Older than `app.wait_timeout` when a thread took it: dropped unserved (Rack::Timeout's
    /// RequestExpiryError, 503).
    WaitTimeout,
    /// Ran longer than `app.service_timeout` on its thread: stopped there, the thread freed
    /// (Rack::Timeout's RequestTimeoutException, answered 500).
    ServiceTimeout,
    /// Its query ran into its resource's `timeout` (statement_timeout) on its last try
    /// (`[resources.NAME] retries`): the app answered 500.
    ResourceTimeout,
    /// Failed at once by the clients' open circuit breaker (`[arrivals.breaker]`): never
    /// sent.
    BreakerOpen,
    /// Rejected at once by a concurrency limit (`router.concurrency_limit` or
    /// `app.concurrency_limit`): as many requests in flight as its limit, answered 503.
    LimitRejected,
    /// A call to another service (`{ call = "NAME" }`) failed: its callee answered with an
    /// error, or did not answer within the call's `timeout`, on its last try (`retries`): the
    /// app answered 500.
    CallFailed,
}

impl ErrorKind {
    pub const COUNT: usize = 18;
}

/// Which of the error kinds a scenario reports only when it can have them (see
/// [`ErrorTable`]) it can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Optional {
    pub outage: bool,
    pub crashed: bool,
    pub wait_timeout: bool,
    pub service_timeout: bool,
    pub breaker_open: bool,
    pub resource_timeout: bool,
    pub limit_rejected: bool,
    pub call_failed: bool,
}

/// A figure per error kind, and their total.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct ErrorTable<T> {
    pub total: T,
    pub h11: T,
    pub h12: T,
    pub h13: T,
    pub client_timeout: T,
    pub queue_timeout: T,
    pub app_timeout: T,
    pub shed: T,
    pub r15: T,
    pub no_dyno: T,
    pub shutdown: T,
    /// The kinds of the feedback features: written only by a scenario that can have them
    /// (faults with an outage, faults losing dynos, `app.wait_timeout`,
    /// `app.service_timeout`, `[arrivals.breaker]`, a resource's `timeout`), so that the others' tables are as they
    /// always were.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crashed: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_timeout: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_timeout: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaker_open: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_timeout: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_rejected: Option<T>,
    /// Written only by a scenario whose requests call other services.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_failed: Option<T>,
}

impl ErrorTable<u64> {
    /// The counts, from an array indexed by [`ErrorKind`]; the optional kinds that `shown`.
    pub fn counts(by_kind: &[u64; ErrorKind::COUNT], shown: Optional) -> ErrorTable<u64> {
        let k = |kind: ErrorKind| by_kind[kind as usize];
        ErrorTable {
            total: by_kind.iter().sum(),
            h11: k(ErrorKind::H11),
            h12: k(ErrorKind::H12),
            h13: k(ErrorKind::H13),
            client_timeout: k(ErrorKind::ClientTimeout),
            queue_timeout: k(ErrorKind::QueueTimeout),
            app_timeout: k(ErrorKind::AppTimeout),
            shed: k(ErrorKind::Shed),
            r15: k(ErrorKind::R15),
            no_dyno: k(ErrorKind::NoDyno),
            shutdown: k(ErrorKind::Shutdown),
            outage: shown.outage.then(|| k(ErrorKind::Outage)),
            crashed: shown.crashed.then(|| k(ErrorKind::Crashed)),
            wait_timeout: shown.wait_timeout.then(|| k(ErrorKind::WaitTimeout)),
            service_timeout: shown.service_timeout.then(|| k(ErrorKind::ServiceTimeout)),
            breaker_open: shown.breaker_open.then(|| k(ErrorKind::BreakerOpen)),
            resource_timeout: shown
                .resource_timeout
                .then(|| k(ErrorKind::ResourceTimeout)),
            limit_rejected: shown.limit_rejected.then(|| k(ErrorKind::LimitRejected)),
            call_failed: shown.call_failed.then(|| k(ErrorKind::CallFailed)),
        }
    }

    /// Each count over `requests` (0 with no requests).
    pub fn fractions(&self, requests: u64) -> ErrorTable<f64> {
        let f = |n: u64| {
            if requests > 0 {
                n as f64 / requests as f64
            } else {
                0.0
            }
        };
        ErrorTable {
            total: f(self.total),
            h11: f(self.h11),
            h12: f(self.h12),
            h13: f(self.h13),
            client_timeout: f(self.client_timeout),
            queue_timeout: f(self.queue_timeout),
            app_timeout: f(self.app_timeout),
            shed: f(self.shed),
            r15: f(self.r15),
            no_dyno: f(self.no_dyno),
            shutdown: f(self.shutdown),
            outage: self.outage.map(f),
            crashed: self.crashed.map(f),
            wait_timeout: self.wait_timeout.map(f),
            service_timeout: self.service_timeout.map(f),
            breaker_open: self.breaker_open.map(f),
            resource_timeout: self.resource_timeout.map(f),
            limit_rejected: self.limit_rejected.map(f),
            call_failed: self.call_failed.map(f),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Wasted {
    /// Thread-seconds: from the error (or the request's start, if later) to the thread's
    /// release.
    pub thread_seconds: f64,
    /// CPU work (core-seconds at full speed) done after the error.
    pub cpu_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Failed {
    /// Failed requests among those arriving in the window, as a fraction of them.
    pub fraction: f64,
    pub total: u64,
    /// In flight or queued on a dyno restarted for memory.
    pub r15: u64,
    /// No dyno was up to take it.
    pub no_dyno: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ResourceFigures {
    /// Busy servers / servers.
    pub utilisation: f64,
    /// Waiting for a connection from the pool, over every use of the resource.
    pub pool_wait: TimeSummary,
    /// Waiting for a server of the resource, once connected.
    pub queue: TimeSummary,
    /// Uses of the resource in the window.
    pub uses: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClassFigures {
    pub requests: u64,
    pub response: TimeSummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClosedLoop {
    pub clients: u32,
    /// Requests answered, successfully or not.
    pub completed: u64,
    pub failed: u64,
    /// From the first request sent to the last response, s.
    pub elapsed: f64,
    /// completed / elapsed: ab's "Requests per second".
    pub requests_per_s: f64,
    /// Response time of the answered requests: ab's percentiles.
    pub latency: TimeSummary,
}

#[derive(Debug, Clone, Serialize)]
pub struct Utilisation {
    /// Busy slot-time / (slots × window), averaged over dynos.
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Each dyno's utilisation. A report keeps it only in its summary (see
    /// [`crate::report::PER_DYNO_LIMIT`]): each replication's list is emptied there, and an
    /// empty list is not written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_dyno: Vec<f64>,
}

/// Snapshots of the system every `interval` seconds from t = 0 to `until` (for plots and
/// animations). Kept only when asked for; memory is frames × dynos.
#[derive(Debug, Clone, Serialize)]
pub struct Trace {
    pub interval: f64,
    pub frames: Vec<Frame>,
    /// A scenario with services: each service's trace, at the same times (None without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub services: Option<std::collections::BTreeMap<String, Trace>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    pub time: f64,
    /// Requests at each dyno, in service or waiting (empty when the trace was asked for
    /// fleet totals only).
    pub depth: Vec<u32>,
    /// Requests waiting at the routers.
    pub router_waiting: u64,
    /// Requests waiting at the dynos (in their accept queues), all dynos together.
    pub dyno_waiting: u64,
    /// Threads busy with a request, all dynos together (an answered request's overhead too).
    pub busy: u64,
    /// Requests that have arrived so far (their first tries).
    pub arrived: u64,
    /// Tries sent so far: the first tries (`arrived`), the clients' retries
    /// (`[arrivals.retry]`) and the routers' on another dyno (`router.retry_on` beyond
    /// refusals); `arrived` itself without them.
    pub tries: u64,
    /// Requests that have had to wait so far (joined a router or dyno queue).
    pub queued: u64,
    /// Requests answered so far (not counting failures).
    pub completed: u64,
    /// Requests answered with an error so far (the total of `errors`).
    pub failed: u64,
    /// Requests answered with an error so far, by kind.
    pub errors: ErrorTable<u64>,
    /// The fleet now: dynos up (routed to), booting, and draining or terminating.
    pub dynos_up: u32,
    pub dynos_booting: u32,
    pub dynos_draining: u32,
    /// The autoscaler's metric as its rule last saw it (seconds, or a fraction); None without
    /// an autoscaler, before its first evaluation, or when its window was empty.
    pub autoscale_metric: Option<f64>,
    /// The 95th percentile of the response times of the answers given since the last frame
    /// (errors included); None when none was given.
    pub response_p95: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueDepth {
    /// Most requests waiting at one dyno (not counting those in service).
    pub dyno: u64,
    /// Most requests waiting at one router.
    pub router: u64,
}
