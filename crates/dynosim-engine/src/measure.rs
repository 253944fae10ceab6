//! What a replication measures, shared by both engines so that they report the same figures
//! in the same way: each engine says when a request arrived, started and completed, and
//! [`Measures`] turns that into a [`ReplicationResult`].

use crate::alloc::filled;
use crate::error::Result;
use crate::result::{
    AutoscaleFigures, BreakerFigures, ClassFigures, ClosedLoop, DynoFigures, ErrorKind, ErrorTable,
    Failed, FleetFigures, LimitFigures, MemoryFigures, Optional, QueueDepth, ReplicationResult,
    ResourceFigures, RetryFigures, RoutingFigures, SizeFigures, Utilisation, Wasted,
};
use crate::scenario::Scenario;
use crate::stability::{Goodput, Rule};
use crate::stats::TimeStats;
use crate::workload::Workload;

#[derive(Debug)]
pub(crate) struct Measures {
    window_start: f64,
    window_end: f64,
    /// Queue times; its positive part is the queue time of the requests that waited.
    queue: TimeStats,
    /// With a connect time every request's queue time is positive: the queue times of those
    /// that waited in a queue (held by the router or waiting at the dyno), kept apart.
    queued: Option<TimeStats>,
    /// Response times of the requests answered by their app (successes).
    response: TimeStats,
    /// Response times the clients saw of the requests answered with an error.
    error_response: TimeStats,
    service_sum: f64,
    /// Answers (successes and errors) given inside the window.
    answers_in_window: u64,
    /// Successful answers given inside the window.
    completions_in_window: u64,
    /// Errors by kind ([`ErrorKind`]), of requests arriving in the window.
    errors: [u64; ErrorKind::COUNT],
    /// Errors by kind, warm-up included (for traces).
    errors_all: [u64; ErrorKind::COUNT],
    /// Thread-seconds and CPU-seconds spent on requests already answered with an error.
    wasted_thread: f64,
    wasted_cpu: f64,
    /// Per dyno, side by side (one line for the two, see [`PerDyno`]).
    per_dyno: Vec<PerDyno>,
    max_router_queue: usize,
    arrived: u64,
    arrived_in_window: u64,
    completed: u64,
    failures: u64,
    /// Tries sent so far, warm-up included, counted where retries are (for traces).
    tries: u64,
    /// What the dyno model adds; None for a scenario of plain slots.
    inside: Option<Box<Inside>>,
    /// A fleet that changes size (`[autoscale]`); None for a fixed fleet.
    fleet: Option<Box<FleetMeasures>>,
    /// A dyno's slots (threads), for utilisations.
    slots: f64,
    /// Under `jiq`: requests of the window sent from an idle list, and those of them that
    /// found their dyno busy.
    idle_hits: Option<(u64, u64)>,
    /// The error kinds this scenario can have beyond the usual ones.
    optional: Optional,
    /// With `[arrivals.retry]`: the tries of the window's requests.
    retries: Option<Box<RetryCounts>>,
    /// With `[[faults]]`: successful answers over time, and the rule that judges them.
    stability: Option<Box<(Goodput, Rule)>>,
    /// With `[arrivals.breaker]`: when it opened and until when, and the tries it failed at
    /// once of the window's requests.
    breaker: Option<Box<BreakerCounts>>,
    /// With a concurrency limit: the tries it rejected of the window's requests, and each
    /// limiter's limit over time.
    limit: Option<Box<LimitCounts>>,
}

#[derive(Debug, Default, Clone)]
struct LimitCounts {
    rejected: u64,
    /// Each router's limit, then each dyno slot's (empty without one).
    router: Vec<Level>,
    app: Vec<Level>,
}

#[derive(Debug, Default, Clone)]
struct BreakerCounts {
    open: Vec<(f64, f64)>,
    rejected: u64,
}

/// The tries of the requests of the window (counted by their first send).
#[derive(Debug, Default, Clone)]
struct RetryCounts {
    attempts: u64,
    /// Retries by the clients, and by the routers (after a timeout or an error).
    retries: u64,
    router: u64,
    /// The app's retries of its failed queries (`[resources.NAME] retries`).
    app: u64,
    /// Whether the tries are counted as they are sent (clients' or routers' retries); if
    /// not (only the app retries), each request is one try.
    counts_tries: bool,
    denied: u64,
    exhausted: u64,
}

/// What is measured of a fleet that changes size: its size and bill, the autoscaler's
/// actions, and each dyno's utilisation over its own time serving (a dyno, not a slot: a
/// slot's busy time is folded into its dyno's figure when that dyno exits).
#[derive(Debug)]
struct FleetMeasures {
    /// Dynos running (billed), and serving (up or stopping).
    running: Level,
    serving: Level,
    /// The least and most dynos running over the window.
    min: f64,
    max: f64,
    starts: u64,
    r10: u64,
    cycles: u64,
    deploys: u64,
    /// Whether an autoscaler runs (its figures are reported).
    autoscaled: bool,
    actions: u64,
    reversals: u64,
    /// When each slot's dyno began serving (NaN: none serves there).
    serving_since: Vec<f64>,
    /// Over the dynos that have exited: their busy slot-seconds, and the least and most
    /// utilisation among those that served in the window.
    busy_ended: f64,
    least: f64,
    most: f64,
}

/// The integral over the window of a quantity that changes by steps.
#[derive(Debug, Clone, Default)]
pub(crate) struct Level {
    value: f64,
    last: f64,
    area: f64,
}

impl Level {
    /// Adds another part of the fleet's level, both held to the same time.
    fn add(&mut self, other: &Level) {
        self.value += other.value;
        self.area += other.area;
        self.last = self.last.max(other.last);
    }

    #[inline]
    fn set(&mut self, now: f64, value: f64, window: (f64, f64)) {
        let span = now.min(window.1) - self.last.max(window.0);
        if span > 0.0 {
            self.area += self.value * span;
        }
        self.last = now;
        self.value = value;
    }
}

/// What is measured of each dyno: its busy slot-seconds inside the window and the most
/// requests seen waiting at it there. Together, 16-byte aligned: one cache line for both (with
/// 100,000 dynos each was a cache miss of its own for every request).
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(16))]
struct PerDyno {
    busy_area: f64,
    max_queue: u64,
}

/// Figures of the dyno model: CPU, processes, memory, failures, resources, classes, clients.
#[derive(Debug)]
struct Inside {
    cpu_area: f64,
    busy_processes: Level,
    memory: Level,
    over_quota: Level,
    peak_memory: f64,
    r15: u64,
    resource_busy: Vec<Level>,
    pool_wait: Vec<TimeStats>,
    resource_queue: Vec<TimeStats>,
    class_response: Vec<TimeStats>,
    /// Closed loop: last response time, answered, failed, response times.
    closed: Option<(f64, u64, u64, TimeStats)>,
}

impl FleetMeasures {
    /// Folds the dyno of slot `dyno`, `busy` slot-seconds in the window, ending at `end`.
    fn fold(&mut self, dyno: usize, end: f64, busy: f64, w: (f64, f64), slots: f64) {
        let since = std::mem::replace(&mut self.serving_since[dyno], f64::NAN);
        self.busy_ended += busy;
        if since.is_nan() {
            return;
        }
        let served = end.min(w.1) - since.max(w.0);
        if served > 0.0 {
            let u = busy / (slots * served);
            self.least = self.least.min(u);
            self.most = self.most.max(u);
        }
    }
}

impl Measures {
    /// Bytes kept per dyno: the two lists below and the utilisation list of the result.
    pub const BYTES_PER_DYNO: f64 = 24.0;

    pub fn new(scenario: &Scenario) -> Result<Self> {
        let n = scenario.dyno_slots() as usize;
        Ok(Measures {
            window_start: scenario.warmup,
            window_end: match &scenario.workload {
                // ab -n: every request is measured, however long they take.
                Workload::Closed(c) if c.requests.is_some() => f64::INFINITY,
                _ => scenario.warmup + scenario.duration,
            },
            queue: TimeStats::default(),
            queued: (scenario.connect.is_some() || scenario.router_cost.is_some())
                .then(TimeStats::default),
            response: TimeStats::default(),
            error_response: TimeStats::default(),
            service_sum: 0.0,
            answers_in_window: 0,
            completions_in_window: 0,
            errors: [0; ErrorKind::COUNT],
            errors_all: [0; ErrorKind::COUNT],
            wasted_thread: 0.0,
            wasted_cpu: 0.0,
            per_dyno: filled(n, PerDyno::default())?,
            max_router_queue: 0,
            arrived: 0,
            arrived_in_window: 0,
            completed: 0,
            failures: 0,
            tries: 0,
            inside: Self::inside(scenario),
            slots: f64::from(scenario.slots),
            idle_hits: (scenario.policy.knowledge() == crate::policy::Knowledge::IdleReports)
                .then_some((0, 0)),
            optional: Optional {
                outage: scenario
                    .faults
                    .list
                    .iter()
                    .any(|f| matches!(f.kind, crate::fault::FaultKind::Outage { .. })),
                crashed: scenario
                    .faults
                    .list
                    .iter()
                    .any(|f| matches!(f.kind, crate::fault::FaultKind::DynosLost { .. })),
                wait_timeout: scenario.app.wait_timeout.is_some(),
                service_timeout: scenario.app.service_timeout.is_some(),
                breaker_open: scenario.client_breaker.is_some(),
                resource_timeout: scenario.resources.iter().any(|r| r.timeout.is_some()),
                limit_rejected: scenario.router_limit.is_some() || scenario.app_limit.is_some(),
                call_failed: !scenario.calls.is_empty(),
            },
            limit: (scenario.router_limit.is_some() || scenario.app_limit.is_some()).then(|| {
                let levels = |limit: Option<&crate::limit::ConcurrencyLimit>, n: usize| {
                    limit.map_or_else(Vec::new, |l| {
                        vec![
                            Level {
                                value: f64::from(l.initial()),
                                last: 0.0,
                                area: 0.0,
                            };
                            n
                        ]
                    })
                };
                Box::new(LimitCounts {
                    rejected: 0,
                    router: levels(scenario.router_limit.as_ref(), scenario.routers as usize),
                    app: levels(scenario.app_limit.as_ref(), n),
                })
            }),
            breaker: scenario
                .client_breaker
                .is_some()
                .then(Box::<BreakerCounts>::default),
            retries: {
                let counts_tries =
                    scenario.client_retry.is_some() || scenario.router_retry.beyond_refused();
                (counts_tries || scenario.resources.iter().any(|r| r.retries > 0)).then(|| {
                    Box::new(RetryCounts {
                        counts_tries,
                        ..RetryCounts::default()
                    })
                })
            },
            stability: scenario
                .stability
                .map(|rule| Box::new((Goodput::new(&rule), rule))),
            fleet: scenario.has_lifecycle().then(|| {
                let initial = f64::from(scenario.dynos);
                let level = Level {
                    value: initial,
                    last: 0.0,
                    area: 0.0,
                };
                let mut serving_since = vec![f64::NAN; n];
                for since in serving_since.iter_mut().take(scenario.dynos as usize) {
                    *since = 0.0;
                }
                Box::new(FleetMeasures {
                    running: level.clone(),
                    serving: level,
                    min: if scenario.warmup > 0.0 {
                        f64::INFINITY
                    } else {
                        initial
                    },
                    max: if scenario.warmup > 0.0 { 0.0 } else { initial },
                    starts: 0,
                    r10: 0,
                    cycles: 0,
                    deploys: 0,
                    autoscaled: scenario.autoscale.is_some(),
                    actions: 0,
                    reversals: 0,
                    serving_since,
                    busy_ended: 0.0,
                    least: f64::INFINITY,
                    most: 0.0,
                })
            }),
        })
    }

    fn inside(s: &Scenario) -> Option<Box<Inside>> {
        let phases = s.request.is_some();
        let closed = s.workload.is_closed();
        if !phases && !closed && !s.app.memory.is_modelled() {
            return None;
        }
        let classes = s.request.as_ref().map_or(0, |r| r.classes.len());
        Some(Box::new(Inside {
            cpu_area: 0.0,
            busy_processes: Level::default(),
            memory: Level::default(),
            over_quota: Level::default(),
            peak_memory: 0.0,
            r15: 0,
            resource_busy: vec![Level::default(); s.resources.len()],
            pool_wait: vec![TimeStats::default(); s.resources.len()],
            resource_queue: vec![TimeStats::default(); s.resources.len()],
            class_response: vec![TimeStats::default(); if classes > 1 { classes } else { 0 }],
            closed: closed.then(|| (0.0, 0, 0, TimeStats::default())),
        }))
    }

    /// Whether the dyno model's figures are kept (see [`Self::inside`]).
    #[inline]
    pub fn detailed(&self) -> bool {
        self.inside.is_some()
    }

    fn window(&self) -> (f64, f64) {
        (self.window_start, self.window_end)
    }

    /// Core-seconds used over [from, to] (`cores_busy` cores throughout).
    #[inline]
    pub fn cpu(&mut self, from: f64, to: f64, cores_busy: f64) {
        let span = to.min(self.window_end) - from.max(self.window_start);
        if let (Some(inside), true) = (self.inside.as_mut(), span > 0.0) {
            inside.cpu_area += cores_busy * span;
        }
    }

    /// The fleet's total busy processes, memory (bytes) and dynos over quota changed at `now`.
    #[inline]
    pub fn fleet_levels(&mut self, now: f64, busy_processes: f64, memory: f64, over_quota: f64) {
        let w = self.window();
        if let Some(inside) = self.inside.as_mut() {
            inside.busy_processes.set(now, busy_processes, w);
            inside.memory.set(now, memory, w);
            inside.over_quota.set(now, over_quota, w);
        }
    }

    /// One dyno holds `bytes` at `now`.
    #[inline]
    pub fn dyno_memory(&mut self, now: f64, bytes: f64) {
        if now >= self.window_start && now <= self.window_end {
            if let Some(inside) = self.inside.as_mut() {
                inside.peak_memory = inside.peak_memory.max(bytes);
            }
        }
    }

    /// The fleet runs `running` dynos (billed), `serving` of them up or stopping, from `now`.
    pub fn fleet_size(&mut self, now: f64, running: u32, serving: u32) {
        let w = self.window();
        if let Some(f) = self.fleet.as_mut() {
            // The size that held until now counts if it held inside the window.
            if now > w.0 && f.running.last < w.1 {
                f.min = f.min.min(f.running.value);
                f.max = f.max.max(f.running.value);
            }
            f.running.set(now, f64::from(running), w);
            f.serving.set(now, f64::from(serving), w);
        }
    }

    /// A dyno was started (booting) at `now`.
    pub fn dyno_started(&mut self, now: f64) {
        let inside = self.in_window(now);
        if let (Some(f), true) = (self.fleet.as_mut(), inside) {
            f.starts += 1;
        }
    }

    /// A dyno's daily restart came at `now`.
    pub fn cycled(&mut self, now: f64) {
        let inside = self.in_window(now);
        if let (Some(f), true) = (self.fleet.as_mut(), inside) {
            f.cycles += 1;
        }
    }

    /// A deploy began at `now`.
    pub fn deployed(&mut self, now: f64) {
        let inside = self.in_window(now);
        if let (Some(f), true) = (self.fleet.as_mut(), inside) {
            f.deploys += 1;
        }
    }

    /// A boot crashed at its timeout (R10) at `now`.
    pub fn boot_crashed(&mut self, now: f64) {
        let inside = self.in_window(now);
        if let (Some(f), true) = (self.fleet.as_mut(), inside) {
            f.r10 += 1;
        }
    }

    /// The autoscaler changed the fleet's size at `now`; `reversal`: the other way than its
    /// last change, within that one's cooldown.
    pub fn scaled(&mut self, now: f64, reversal: bool) {
        let inside = self.in_window(now);
        if let (Some(f), true) = (self.fleet.as_mut(), inside) {
            f.actions += 1;
            f.reversals += u64::from(reversal);
        }
    }

    /// The dyno in slot `dyno` began serving at `now` (its boot ended).
    pub fn dyno_up(&mut self, dyno: usize, now: f64) {
        if let Some(f) = self.fleet.as_mut() {
            f.serving_since[dyno] = now;
        }
    }

    /// The dyno in slot `dyno` exited at `now`: its utilisation over its own time serving
    /// inside the window is folded into the fleet's, and the slot starts afresh.
    pub fn dyno_ended(&mut self, dyno: usize, now: f64) {
        let (w, slots) = (self.window(), self.slots);
        if let Some(f) = self.fleet.as_mut() {
            let busy = std::mem::take(&mut self.per_dyno[dyno].busy_area);
            f.fold(dyno, now, busy, w, slots);
        }
    }

    fn in_window(&self, now: f64) -> bool {
        now >= self.window_start && now <= self.window_end
    }

    pub fn restarted(&mut self, now: f64) {
        if now >= self.window_start && now <= self.window_end {
            if let Some(inside) = self.inside.as_mut() {
                inside.r15 += 1;
            }
        }
    }

    /// A request that arrived at `arrival` was answered with an error of `kind` at `now`.
    pub fn errored(&mut self, kind: ErrorKind, arrival: f64, now: f64) {
        self.failures += 1;
        self.errors_all[kind as usize] += 1;
        let counted = arrival >= self.window_start;
        if counted {
            self.errors[kind as usize] += 1;
            self.error_response.record(now - arrival);
        }
        if now >= self.window_start && now <= self.window_end {
            self.answers_in_window += 1;
        }
        // A closed loop counts, as ab does, the requests it sent inside the window.
        if let Some(closed) = self
            .inside
            .as_mut()
            .and_then(|i| i.closed.as_mut())
            .filter(|_| counted)
        {
            closed.0 = closed.0.max(now);
            closed.1 += 1;
            closed.2 += 1;
        }
    }

    /// A thread spent `seconds` on a request that arrived at `arrival` after its client had
    /// been answered with an error.
    #[inline]
    pub fn wasted_thread(&mut self, arrival: f64, seconds: f64) {
        if arrival >= self.window_start {
            self.wasted_thread += seconds;
        }
    }

    /// A CPU spent `seconds` of work on a request answered with an error before.
    #[inline]
    pub fn wasted_cpu(&mut self, arrival: f64, seconds: f64) {
        if arrival >= self.window_start {
            self.wasted_cpu += seconds;
        }
    }

    /// `busy` servers of resource `r` are at work from `now`.
    #[inline]
    pub fn resource_busy(&mut self, r: usize, now: f64, busy: f64) {
        let w = self.window();
        if let Some(inside) = self.inside.as_mut() {
            inside.resource_busy[r].set(now, busy, w);
        }
    }

    /// A request that arrived at `arrival` waited `pool` for a connection and `queue` for a
    /// server of resource `r`.
    #[inline]
    pub fn resource_use(&mut self, r: usize, arrival: f64, pool: f64, queue: f64) {
        if arrival >= self.window_start {
            if let Some(inside) = self.inside.as_mut() {
                inside.pool_wait[r].record(pool);
                inside.resource_queue[r].record(queue);
            }
        }
    }

    /// Asks for dyno `dyno`'s lines (see the event-driven engine's read-ahead).
    #[inline]
    pub fn prefetch_dyno(&self, dyno: usize) {
        crate::alloc::prefetch(&self.per_dyno[dyno]);
    }

    /// A request's busy thread over [start, end] (its time was not known when it started).
    #[inline]
    pub fn held(&mut self, dyno: usize, start: f64, end: f64) {
        let area = end.min(self.window_end) - start.max(self.window_start);
        if area > 0.0 {
            self.per_dyno[dyno].busy_area += area;
        }
    }

    /// The slot counted busy over [from, to] by [`Self::started`] was not (its request was
    /// killed at `from`).
    #[inline]
    pub fn unbusy(&mut self, dyno: usize, from: f64, to: f64) {
        let area = to.min(self.window_end) - from.max(self.window_start);
        if area > 0.0 {
            self.per_dyno[dyno].busy_area -= area;
        }
    }

    /// A request took a thread: its queue time (for a request whose time on the thread is
    /// not known in advance; see [`Self::started`]).
    #[inline]
    pub fn took_thread(&mut self, arrival: f64, start: f64) {
        if arrival >= self.window_start {
            self.queue.record(start - arrival);
        }
    }

    /// With a connect time: the request that arrived at `arrival` and took a thread at `start`
    /// had waited in a queue (router or dyno) on its way, besides connecting.
    #[inline]
    pub fn waited(&mut self, arrival: f64, start: f64) {
        if arrival >= self.window_start {
            if let Some(queued) = self.queued.as_mut() {
                queued.record(start - arrival);
            }
        }
    }

    /// The app's overhead holds a slot over [start, start + time] after a `[service]` hold
    /// (a request with phases counts it in [`Self::held`]).
    #[inline]
    pub fn overhead(&mut self, dyno: usize, start: f64, time: f64) {
        self.busy(dyno, start, time);
    }

    /// A request of class `class` that arrived at `arrival` completed at `end`.
    #[inline]
    pub fn class_completed(&mut self, class: usize, arrival: f64, end: f64) {
        if let Some(inside) = self.inside.as_mut() {
            if arrival >= self.window_start {
                if let Some(stats) = inside.class_response.get_mut(class) {
                    stats.record(end - arrival);
                }
            }
            // Only requests sent inside the window: over `last − window start`, counting the
            // warm-up's completions too would overstate the rate by (warm-up + duration) /
            // duration.
            if let Some(closed) = inside
                .closed
                .as_mut()
                .filter(|_| arrival >= self.window_start)
            {
                closed.0 = closed.0.max(end);
                closed.1 += 1;
                closed.3.record(end - arrival);
            }
        }
    }

    /// When arrivals stop: the end of the measurement window.
    #[inline]
    pub fn window_end(&self) -> f64 {
        self.window_end
    }

    /// When a run that stops at its stability verdict first looks at it; infinite for a run
    /// that goes to its end (see [`crate::stability::Rule::first_check`]).
    pub fn verdict_check(&self) -> f64 {
        self.stability
            .as_deref()
            .map_or(f64::INFINITY, |(_, rule)| rule.first_check())
    }

    /// Whether the stability verdict is still open at `t`, the next event's time: when to
    /// look again, or None once it is settled (see [`Goodput::pending`]).
    pub fn verdict_pending(&self, t: f64) -> Option<f64> {
        self.stability
            .as_deref()
            .and_then(|(goodput, rule)| goodput.pending(rule, t))
    }

    /// A request arrived at `time` needing `service` seconds.
    #[inline]
    pub fn arrived(&mut self, time: f64, service: f64) {
        self.arrived += 1;
        if time >= self.window_start {
            self.arrived_in_window += 1;
            // Summed in arrival order, so every policy and engine reports the very same figure.
            self.service_sum += service;
        }
    }

    pub fn arrivals(&self) -> u64 {
        self.arrived
    }

    /// Responses so far, warm-up included (failures are not responses).
    pub fn completions(&self) -> u64 {
        self.completed
    }

    /// Tries sent so far, warm-up included: first tries and retries, the clients' and the
    /// routers' on another dyno; the arrivals where nobody retries (tries are not counted).
    pub fn tries(&self) -> u64 {
        if self.retries.is_some() {
            self.tries
        } else {
            self.arrived
        }
    }

    /// Requests failed so far, warm-up included.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// Errors so far by kind, warm-up included.
    pub fn errors_so_far(&self) -> ErrorTable<u64> {
        ErrorTable::counts(&self.errors_all, self.optional)
    }

    /// A try of a request first sent at `origin` was sent at `now` (the first, or a retry).
    #[inline]
    pub fn tried(&mut self, origin: f64, _now: f64) {
        self.tries += 1;
        if origin >= self.window_start {
            if let Some(r) = self.retries.as_mut() {
                r.attempts += 1;
            }
        }
    }

    /// A request first sent at `origin` will be tried again (a retry is due).
    #[inline]
    pub fn retried(&mut self, origin: f64) {
        if origin >= self.window_start {
            if let Some(r) = self.retries.as_mut() {
                r.retries += 1;
            }
        }
    }

    /// A router sends a request first sent at `origin` to another dyno (`router.retry_on`).
    #[inline]
    pub fn router_retried(&mut self, origin: f64) {
        if origin >= self.window_start {
            if let Some(r) = self.retries.as_mut() {
                r.router += 1;
            }
        }
    }

    /// The app tries a failed query of a request first sent at `origin` again `n` times
    /// (`[resources.NAME] retries`).
    #[cold]
    pub fn app_retried(&mut self, origin: f64, n: u64) {
        if origin >= self.window_start {
            if let Some(r) = self.retries.as_mut() {
                r.app += n;
            }
        }
    }

    /// A budget refused the retry of a request first sent at `origin`.
    pub fn retry_denied(&mut self, origin: f64) {
        if origin >= self.window_start {
            if let Some(r) = self.retries.as_mut() {
                r.denied += 1;
            }
        }
    }

    /// The clients' breaker opened at `now`, until `until`.
    #[cold]
    pub fn breaker_opened(&mut self, now: f64, until: f64) {
        if let Some(b) = self.breaker.as_mut() {
            b.open.push((now, until));
        }
    }

    /// The clients' breaker failed a try of a request first sent at `origin` at once.
    pub fn breaker_rejected(&mut self, origin: f64) {
        if origin >= self.window_start {
            if let Some(b) = self.breaker.as_mut() {
                b.rejected += 1;
            }
        }
    }

    /// A concurrency limit rejected a try of a request first sent at `origin`.
    #[cold]
    pub fn limit_rejected(&mut self, origin: f64) {
        if origin >= self.window_start {
            if let Some(l) = self.limit.as_mut() {
                l.rejected += 1;
            }
        }
    }

    /// Router `router`'s limit (`at_dyno` false) or dyno slot `router`'s is `limit` from
    /// `now`.
    pub fn limit_set(&mut self, at_dyno: bool, index: usize, now: f64, limit: u32) {
        let w = self.window();
        if let Some(l) = self.limit.as_mut() {
            let levels = if at_dyno { &mut l.app } else { &mut l.router };
            levels[index].set(now, f64::from(limit), w);
        }
    }

    /// A request first sent at `origin` failed on its last try with an outcome retried.
    pub fn retries_exhausted(&mut self, origin: f64) {
        if origin >= self.window_start {
            if let Some(r) = self.retries.as_mut() {
                r.exhausted += 1;
            }
        }
    }

    /// A request that arrived at `arrival` started `service` seconds of work on a slot of
    /// `dyno` at `start`.
    #[inline(always)]
    pub fn started(&mut self, dyno: usize, arrival: f64, start: f64, service: f64) {
        self.busy(dyno, start, service);
        if arrival >= self.window_start {
            self.queue.record(start - arrival);
        }
    }

    /// The slot is busy over [start, start + service]: its overlap with the window, counted
    /// once per request, is that request's share of the dyno's utilisation. Inside the window
    /// (nearly always) the overlap is `service` itself, taken as it is rather than as a
    /// difference of two times so that no rounding enters.
    #[inline]
    fn busy(&mut self, dyno: usize, start: f64, service: f64) {
        let end = start + service;
        let area = if start >= self.window_start && end <= self.window_end {
            service
        } else {
            end.min(self.window_end) - start.max(self.window_start)
        };
        if area > 0.0 {
            self.per_dyno[dyno].busy_area += area;
        }
    }

    /// Whether successful answers are counted for the stability verdict (a run of faults).
    pub fn counts_goodput(&self) -> bool {
        self.stability.is_some()
    }

    /// A try was answered successfully at `end`: the stability verdict's goodput counts it
    /// (the event engine calls it beside [`Self::completed`] where it runs with faults).
    #[inline]
    pub fn goodput(&mut self, end: f64) {
        if let Some(s) = self.stability.as_mut() {
            s.0.answered(end);
        }
    }

    /// A request that arrived at `arrival` completed at `end`.
    #[inline(always)]
    pub fn completed(&mut self, arrival: f64, end: f64) {
        self.completed += 1;
        if arrival >= self.window_start {
            self.response.record(end - arrival);
        }
        if end >= self.window_start && end <= self.window_end {
            self.completions_in_window += 1;
            self.answers_in_window += 1;
        }
    }

    /// [`Self::started`] and then [`Self::completed`], for an engine that knows both at once:
    /// the same figures, with one test of the window for a request that lies wholly inside it.
    /// Inlined in the direct engine's loop, with the rare request that straddles the window's
    /// edges kept out of line (a call per request cost the seed scenario about 2%).
    #[inline(always)]
    pub fn served(&mut self, dyno: usize, arrival: f64, start: f64, service: f64) {
        let end = start + service;
        if arrival >= self.window_start && end <= self.window_end {
            self.per_dyno[dyno].busy_area += service;
            self.queue.record(start - arrival);
            self.response.record(end - arrival);
            self.completed += 1;
            self.completions_in_window += 1;
            self.answers_in_window += 1;
        } else {
            self.served_at_an_edge(dyno, arrival, start, service);
        }
    }

    #[cold]
    #[inline(never)]
    fn served_at_an_edge(&mut self, dyno: usize, arrival: f64, start: f64, service: f64) {
        self.started(dyno, arrival, start, service);
        self.completed(arrival, start + service);
    }

    /// `waiting` requests wait at `dyno` at `time`, just after one joined them.
    #[inline]
    pub fn dyno_queue(&mut self, dyno: usize, time: f64, waiting: usize) {
        if time >= self.window_start {
            let max = &mut self.per_dyno[dyno].max_queue;
            *max = (*max).max(waiting as u64);
        }
    }

    /// A request that arrived at `arrival` was sent to a dyno from its router's idle list
    /// (`jiq`); `busy`: the dyno had a request already.
    #[inline]
    pub fn idle_hit(&mut self, arrival: f64, busy: bool) {
        if let Some((hits, busy_hits)) = self.idle_hits.as_mut() {
            if arrival >= self.window_start {
                *hits += 1;
                *busy_hits += u64::from(busy);
            }
        }
    }

    /// `waiting` requests wait at a router at `time`, just after one joined them.
    #[inline]
    pub fn router_queue(&mut self, time: f64, waiting: usize) {
        if time >= self.window_start {
            self.max_router_queue = self.max_router_queue.max(waiting);
        }
    }

    /// Adds the measures of the next shard of the same replication (see [`crate::shard`]),
    /// whose dynos come after these: counts and sums add, histograms merge exactly (their
    /// bucket counts add), maxima take the larger, the fleet's levels (integrals over the
    /// window, each shard's held to its window's close) add, per-dyno figures follow these.
    /// Shards are fixed fleets with no router queue shared between them: nothing of an
    /// autoscaled fleet's is merged.
    pub fn absorb(&mut self, other: Measures) {
        debug_assert!(self.fleet.is_none() && other.fleet.is_none());
        self.queue.add(&other.queue);
        if let (Some(a), Some(b)) = (self.queued.as_mut(), other.queued.as_ref()) {
            a.add(b);
        }
        self.response.add(&other.response);
        self.error_response.add(&other.error_response);
        self.service_sum += other.service_sum;
        self.answers_in_window += other.answers_in_window;
        self.completions_in_window += other.completions_in_window;
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        for (a, b) in self.errors_all.iter_mut().zip(other.errors_all) {
            *a += b;
        }
        self.wasted_thread += other.wasted_thread;
        self.wasted_cpu += other.wasted_cpu;
        self.per_dyno.extend_from_slice(&other.per_dyno);
        self.max_router_queue = self.max_router_queue.max(other.max_router_queue);
        self.arrived += other.arrived;
        self.arrived_in_window += other.arrived_in_window;
        self.completed += other.completed;
        self.failures += other.failures;
        self.tries += other.tries;
        if let (Some(a), Some(b)) = (self.inside.as_mut(), other.inside.as_ref()) {
            a.cpu_area += b.cpu_area;
            a.busy_processes.add(&b.busy_processes);
            a.memory.add(&b.memory);
            a.over_quota.add(&b.over_quota);
            a.peak_memory = a.peak_memory.max(b.peak_memory);
            a.r15 += b.r15;
            for (x, y) in a.resource_busy.iter_mut().zip(&b.resource_busy) {
                x.add(y);
            }
            for (x, y) in a.pool_wait.iter_mut().zip(&b.pool_wait) {
                x.add(y);
            }
            for (x, y) in a.resource_queue.iter_mut().zip(&b.resource_queue) {
                x.add(y);
            }
            for (x, y) in a.class_response.iter_mut().zip(&b.class_response) {
                x.add(y);
            }
            if let (Some(x), Some(y)) = (a.closed.as_mut(), b.closed.as_ref()) {
                x.0 = x.0.max(y.0);
                x.1 += y.1;
                x.2 += y.2;
                x.3.add(&y.3);
            }
        }
        if let (Some((h, b)), Some((oh, ob))) = (self.idle_hits.as_mut(), other.idle_hits) {
            *h += oh;
            *b += ob;
        }
    }

    /// Makes room for `dynos` dynos' figures in all, before shards are absorbed.
    pub fn reserve_dynos(&mut self, dynos: usize) -> Result<()> {
        let more = dynos.saturating_sub(self.per_dyno.len());
        self.per_dyno.try_reserve_exact(more).map_err(|_| {
            crate::error::Error::config(
                "run.max_memory",
                format!("no memory for the figures of {dynos} dynos"),
            )
        })
    }

    /// The figures; `end` is when the last event ran (a closed loop's window ends there).
    pub fn finish(mut self, scenario: &Scenario, end: f64) -> ReplicationResult {
        // The window the figures were measured over. A timed run's is its duration. A closed
        // loop of a set number of requests (ab -n) is measured whole: its rates (throughput,
        // goodput, closed_loop.requests_per_s) are per second from the start to its last
        // answer, as ab counts them; its time averages (utilisation, occupancy, memory) are
        // over the whole run, to `end`, its last work, which may follow the last answer (a
        // request the client gave up on is still worked on).
        let span = if self.window_end.is_finite() {
            scenario.duration
        } else {
            (end - self.window_start).max(f64::MIN_POSITIVE)
        };
        let rate_span = match self.inside.as_ref().and_then(|i| i.closed.as_ref()) {
            // Every answer at the start (all refused at once) spans no time: no rate, 0 as
            // closed_loop.requests_per_s gives, rather than an infinite one.
            Some(&(last, answered, ..)) if !self.window_end.is_finite() && answered > 0 => {
                (last - self.window_start).max(0.0)
            }
            _ => span,
        };
        let window_close = self.window_end.min(end.max(self.window_start));
        let capacity = scenario.slots as f64 * span;
        let w = (self.window_start, window_close);
        // A changing fleet: each dyno still there is folded at the window's close; dyno-time
        // is the integral of the fleet's size rather than dynos x span.
        let fleet = self.fleet.take().map(|mut f| {
            for dyno in 0..self.per_dyno.len() {
                let busy = std::mem::take(&mut self.per_dyno[dyno].busy_area);
                f.fold(dyno, window_close, busy, w, self.slots);
            }
            let (running, serving) = (f.running.value, f.serving.value);
            f.running.set(window_close, running, w);
            f.serving.set(window_close, serving, w);
            if f.running.last > w.0 || w.1 > w.0 {
                f.min = f.min.min(running);
                f.max = f.max.max(running);
            }
            f
        });
        let dyno_time = fleet.as_ref().map(|f| (f.serving.area, f.running.area));
        let extra = self
            .inside
            .take()
            .map(|inside| finish_inside(*inside, scenario, w, span, dyno_time));
        let per_dyno: Vec<f64> = if fleet.is_some() {
            Vec::new()
        } else {
            self.per_dyno
                .iter()
                .map(|d| d.busy_area / capacity)
                .collect()
        };
        let utilisation = match &fleet {
            None => Utilisation {
                mean: per_dyno.iter().sum::<f64>() / per_dyno.len() as f64,
                min: per_dyno.iter().copied().fold(f64::INFINITY, f64::min),
                max: per_dyno.iter().copied().fold(0.0, f64::max),
                per_dyno,
            },
            Some(f) => Utilisation {
                mean: ratio(f.busy_ended, self.slots * f.serving.area),
                min: if f.least.is_finite() { f.least } else { 0.0 },
                max: f.most,
                per_dyno,
            },
        };
        let fleet_figures = fleet.as_ref().map(|f| FleetFigures {
            size: SizeFigures {
                mean: f.running.area / span,
                min: if f.min.is_finite() { f.min } else { 0.0 },
                max: f.max,
            },
            dyno_seconds: f.running.area,
            serving_mean: f.serving.area / span,
            starts: f.starts,
            r10: f.r10,
            cycles: f.cycles,
            deploys: f.deploys,
        });
        let autoscale = fleet
            .as_ref()
            .filter(|f| f.autoscaled)
            .map(|f| AutoscaleFigures {
                actions: f.actions,
                reversals: f.reversals,
            });
        let requests = self.arrived_in_window;
        let reached = self.queue.count();
        let (queued, queue_of_queued) = match &self.queued {
            None => (self.queue.positive_count(), self.queue.positive_summary()),
            Some(q) => (q.count(), q.summary()),
        };
        let counts = ErrorTable::counts(&self.errors, self.optional);
        let response = if counts.total == 0 {
            self.response.summary()
        } else {
            self.response.merged(&self.error_response).summary()
        };
        ReplicationResult {
            requests,
            queued_fraction: ratio(queued as f64, reached as f64),
            queue: self.queue.summary(),
            queue_of_queued,
            response,
            response_ok: self.response.summary(),
            service_mean: ratio(self.service_sum, requests as f64),
            throughput: ratio(self.answers_in_window as f64, rate_span),
            goodput: ratio(self.completions_in_window as f64, rate_span),
            errors: counts.fractions(requests),
            error_counts: counts,
            wasted: Wasted {
                thread_seconds: self.wasted_thread,
                cpu_seconds: self.wasted_cpu,
            },
            utilisation,
            max_queue_depth: QueueDepth {
                dyno: self.per_dyno.iter().map(|d| d.max_queue).max().unwrap_or(0),
                router: self.max_router_queue as u64,
            },
            simulated_requests: self.arrived,
            events: self.arrived + self.completed,
            dyno: None,
            failed: None,
            resources: None,
            classes: None,
            closed_loop: None,
            fleet: fleet_figures,
            autoscale,
            routing: self.idle_hits.map(|(hits, busy)| RoutingFigures {
                idle_hits: ratio(hits as f64, requests as f64),
                idle_hit_count: hits,
                busy_hits: ratio(busy as f64, hits as f64),
            }),
            retries: self.retries.as_deref().map(|r| {
                let attempts = if r.counts_tries { r.attempts } else { requests };
                RetryFigures {
                    attempts,
                    attempts_per_request: ratio(attempts as f64, requests as f64),
                    count: r.retries + r.router + r.app,
                    client: r.retries,
                    router: r.router,
                    app: r.app,
                    denied: r.denied,
                    exhausted: r.exhausted,
                }
            }),
            breaker: self.breaker.as_deref().map(|b| {
                // Each opening's time clipped to the window (they never overlap: it is
                // half-open between two).
                let open: f64 = b
                    .open
                    .iter()
                    .map(|&(from, to)| (to.min(w.1) - from.max(w.0)).max(0.0))
                    .sum();
                BreakerFigures {
                    open_fraction: open / span,
                    opened: b.open.iter().filter(|o| o.0 >= w.0 && o.0 <= w.1).count() as u64,
                    rejected: b.rejected,
                }
            }),
            limit: self.limit.as_deref().map(|l| {
                // Each limiter's level held to the window's close, averaged over the limiters.
                let mean = |levels: &[Level]| {
                    (!levels.is_empty()).then(|| {
                        let area: f64 = levels
                            .iter()
                            .map(|level| {
                                let mut level = level.clone();
                                level.set(w.1, level.value, w);
                                level.area
                            })
                            .sum();
                        ratio(area, (w.1 - w.0) * levels.len() as f64)
                    })
                };
                LimitFigures {
                    rejected: l.rejected,
                    rejected_per_s: ratio(l.rejected as f64, rate_span),
                    router_mean: mean(&l.router),
                    app_mean: mean(&l.app),
                }
            }),
            stability: self
                .stability
                .as_deref()
                .map(|(goodput, rule)| goodput.figures(rule, end)),
            // The federation of fleets adds them (`sim/federation.rs`).
            services: None,
            engine: "",
        }
        .with(
            extra,
            self.per_dyno.iter().map(|d| d.max_queue).max().unwrap_or(0),
        )
    }
}

struct Extra {
    dyno: DynoFigures,
    resources: Option<std::collections::BTreeMap<String, ResourceFigures>>,
    classes: Option<std::collections::BTreeMap<String, ClassFigures>>,
    closed_loop: Option<ClosedLoop>,
}

/// `dyno_time`: for a fleet that changes size, the dyno-seconds serving and running in the
/// window (the CPU's and the processes' figures are over the first, memory over the second);
/// None: dynos x span for both.
fn finish_inside(
    mut inside: Inside,
    s: &Scenario,
    window: (f64, f64),
    span: f64,
    dyno_time: Option<(f64, f64)>,
) -> Extra {
    let close = |level: &mut Level| {
        let v = level.value;
        level.set(window.1, v, window);
        level.area
    };
    let (dyno_time, memory_time) = dyno_time.unwrap_or_else(|| {
        let t = f64::from(s.dynos) * span;
        (t, t)
    });
    let memory_area = close(&mut inside.memory);
    let over_area = close(&mut inside.over_quota);
    let busy_processes = close(&mut inside.busy_processes);
    let resources = (!s.resources.is_empty()).then(|| {
        s.resources
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let busy = close(&mut inside.resource_busy[i]);
                (
                    r.name.clone(),
                    ResourceFigures {
                        utilisation: busy / (f64::from(r.servers) * span),
                        pool_wait: inside.pool_wait[i].summary(),
                        queue: inside.resource_queue[i].summary(),
                        uses: inside.pool_wait[i].count(),
                    },
                )
            })
            .collect()
    });
    let classes = s.request.as_ref().filter(|r| r.classes.len() > 1).map(|r| {
        r.classes
            .iter()
            .zip(&inside.class_response)
            .map(|(c, stats)| {
                (
                    c.name.clone(),
                    ClassFigures {
                        requests: stats.count(),
                        response: stats.summary(),
                    },
                )
            })
            .collect()
    });
    let closed_loop = match (&s.workload, inside.closed.take()) {
        (Workload::Closed(c), Some((last, completed, failed, latency))) => {
            let elapsed = last - window.0;
            Some(ClosedLoop {
                clients: c.count,
                completed,
                failed,
                elapsed,
                requests_per_s: if elapsed > 0.0 {
                    completed as f64 / elapsed
                } else {
                    0.0
                },
                latency: latency.summary(),
            })
        }
        _ => None,
    };
    Extra {
        dyno: DynoFigures {
            cpu_utilisation: ratio(inside.cpu_area, dyno_time * f64::from(s.dyno_type.cores)),
            thread_occupancy: 0.0,
            process_occupancy: ratio(busy_processes, dyno_time * f64::from(s.app.processes)),
            accept_queue_max: 0,
            memory: MemoryFigures {
                mean: ratio(memory_area, memory_time),
                peak: inside.peak_memory,
                over_quota: ratio(over_area, memory_time),
                r14_seconds: over_area,
                r15_restarts: inside.r15,
            },
        },
        resources,
        classes,
        closed_loop,
    }
}

impl ReplicationResult {
    fn with(mut self, extra: Option<Extra>, accept_max: u64) -> Self {
        if let Some(mut e) = extra {
            e.dyno.thread_occupancy = self.utilisation.mean;
            e.dyno.accept_queue_max = accept_max;
            let (r15, no_dyno) = (self.error_counts.r15, self.error_counts.no_dyno);
            let total = r15 + no_dyno;
            self.failed = Some(Failed {
                fraction: ratio(total as f64, self.requests as f64),
                total,
                r15,
                no_dyno,
            });
            self.dyno = Some(e.dyno);
            self.resources = e.resources;
            self.classes = e.classes;
            self.closed_loop = e.closed_loop;
        }
        self
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}
