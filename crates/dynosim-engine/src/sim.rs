//! The discrete-event simulation of one replication.
//!
//! Events sit in a binary heap ordered by (time, sequence number), so that events at the same
//! instant run in the order they were scheduled. Arrivals are not in the heap: the next
//! arrival time is kept aside and compared with the heap's head, which keeps the heap as small
//! as the number of busy slots. At equal times, completions run before arrivals (a slot freed
//! at t is free for a request arriving at t).

use crate::arrivals::ArrivalProcess;
use crate::error::{Error, Result};
use crate::load_index::LoadIndex;
use crate::policy::{Route, RouterView, RoutingPolicy};
use crate::rng::{stream, SimRng, Stream};
use crate::scenario::Scenario;
use crate::stats::{TimeStats, TimeSummary};
use rand::Rng;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// How often (in events) the run asks whether it should stop.
const INTERRUPT_CHECK_EVERY: u64 = 1 << 16;

#[derive(Debug, Clone, Copy)]
struct Request {
    arrival: f64,
    service: f64,
    router: u32,
}

#[derive(Debug, Clone, Copy)]
enum EventKind {
    /// A request finishes service on a dyno (its service time is no longer needed).
    Completion {
        dyno: u32,
        router: u32,
        arrival: f64,
    },
}

#[derive(Debug)]
struct Event {
    time: f64,
    seq: u64,
    kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

#[derive(Debug, Default)]
struct Dyno {
    busy: u32,
    waiting: VecDeque<Request>,
    /// Busy slot-seconds inside the measurement window.
    busy_area: f64,
    max_waiting: usize,
}

/// What one replication measured, over requests arriving after the warm-up.
#[derive(Debug, Clone, Serialize)]
pub struct ReplicationResult {
    /// Requests that arrived in the measurement window.
    pub requests: u64,
    /// Fraction of them that waited at all (router or dyno queue).
    pub queued_fraction: f64,
    /// Queue time (router + dyno) over all requests.
    pub queue: TimeSummary,
    /// Queue time over the requests that waited.
    pub queue_of_queued: TimeSummary,
    /// Queue + service time.
    pub response: TimeSummary,
    pub service_mean: f64,
    /// Completions per second inside the window.
    pub throughput: f64,
    pub utilisation: Utilisation,
    pub max_queue_depth: QueueDepth,
    /// Every request simulated, warm-up included (for throughput benchmarks).
    pub simulated_requests: u64,
    pub events: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Utilisation {
    /// Busy slot-time / (slots × window), averaged over dynos.
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub per_dyno: Vec<f64>,
}

/// Snapshots of the system every `interval` seconds from t = 0 to `until` (for plots and
/// animations). Kept only when asked for; memory is frames × dynos.
#[derive(Debug, Clone, Serialize)]
pub struct Trace {
    pub interval: f64,
    pub frames: Vec<Frame>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Frame {
    pub time: f64,
    /// Requests at each dyno, in service or waiting.
    pub depth: Vec<u32>,
    /// Requests waiting at the routers.
    pub router_waiting: u64,
    /// Requests that have arrived so far.
    pub arrived: u64,
    /// Requests that have had to wait so far (joined a router or dyno queue).
    pub queued: u64,
}

#[derive(Debug)]
struct TraceRecorder {
    interval: f64,
    until: f64,
    next: f64,
    frames: Vec<Frame>,
}

#[derive(Debug, Clone, Serialize)]
pub struct QueueDepth {
    /// Most requests waiting at one dyno (not counting those in service).
    pub dyno: u64,
    /// Most requests waiting at one router.
    pub router: u64,
}

struct Simulation<'s> {
    scenario: &'s Scenario,
    now: f64,
    seq: u64,
    window_start: f64,
    window_end: f64,
    events: BinaryHeap<Event>,
    dynos: Vec<Dyno>,
    loads: Vec<LoadIndex>,
    policies: Vec<Box<dyn RoutingPolicy>>,
    router_queues: Vec<VecDeque<Request>>,
    waiting_total: usize,
    routing_rng: SimRng,
    /// Queue times; its positive part is the queue time of the requests that waited.
    queue: TimeStats,
    response: TimeStats,
    service_sum: f64,
    completions_in_window: u64,
    max_router_queue: usize,
    arrived: u64,
    queued: u64,
    trace: Option<TraceRecorder>,
}

/// Runs replication `replication` of the scenario. `interrupted` is polled now and then; when
/// it returns true the run stops with [`Error::Interrupted`].
pub fn run_replication(
    scenario: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<ReplicationResult> {
    simulate(scenario, replication, None, interrupted).map(|(result, _)| result)
}

/// Runs a replication and also snapshots it every `interval` seconds up to `until`.
pub fn trace_replication(
    scenario: &Scenario,
    replication: u64,
    interval: f64,
    until: f64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<(ReplicationResult, Trace)> {
    if !(interval > 0.0 && until >= 0.0 && interval.is_finite() && until.is_finite()) {
        return Err(Error::config(
            "trace",
            "interval must be positive and until >= 0",
        ));
    }
    let frames = (until / interval).floor() + 1.0;
    if frames * scenario.dynos as f64 > 5e7 {
        return Err(Error::config(
            "trace",
            format!(
                "{frames} frames x {} dynos is too large a trace; use a longer interval",
                scenario.dynos
            ),
        ));
    }
    let recorder = TraceRecorder {
        interval,
        until,
        next: 0.0,
        frames: Vec::with_capacity(frames as usize),
    };
    simulate(scenario, replication, Some(recorder), interrupted)
        .map(|(result, trace)| (result, trace.expect("a recorder was given")))
}

fn simulate(
    scenario: &Scenario,
    replication: u64,
    trace: Option<TraceRecorder>,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<(ReplicationResult, Option<Trace>)> {
    scenario.check_stable()?;
    let seed = scenario.seed;
    let mut arrival_rng = stream(seed, replication, Stream::Arrivals);
    let mut service_rng = stream(seed, replication, Stream::Service);
    let mut arrivals: Box<dyn ArrivalProcess> = scenario.arrivals.fresh();
    let n = scenario.dynos as usize;
    let routers = scenario.routers as usize;
    let mut sim = Simulation {
        scenario,
        now: 0.0,
        seq: 0,
        window_start: scenario.warmup,
        window_end: scenario.warmup + scenario.duration,
        events: BinaryHeap::with_capacity(scenario.total_slots().min(1 << 20) as usize + 1),
        dynos: (0..n).map(|_| Dyno::default()).collect(),
        loads: (0..routers)
            .map(|_| LoadIndex::new(n, scenario.policy.ranks_by_load()))
            .collect(),
        policies: (0..routers).map(|_| scenario.policy.box_clone()).collect(),
        router_queues: (0..routers).map(|_| VecDeque::new()).collect(),
        waiting_total: 0,
        routing_rng: stream(seed, replication, Stream::Routing),
        queue: TimeStats::default(),
        response: TimeStats::default(),
        service_sum: 0.0,
        completions_in_window: 0,
        max_router_queue: 0,
        arrived: 0,
        queued: 0,
        trace,
    };

    let mut next_arrival = arrivals.next_arrival(0.0, &mut arrival_rng);
    let mut steps = 0u64;
    loop {
        let completion_first = match (sim.events.peek(), next_arrival) {
            (Some(event), Some(arrival)) => event.time <= arrival,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if sim.trace.is_some() {
            let next_time = match (sim.events.peek(), next_arrival) {
                (Some(e), Some(a)) => e.time.min(a),
                (Some(e), None) => e.time,
                (None, Some(a)) => a,
                (None, None) => f64::INFINITY,
            };
            sim.snapshot_until(next_time);
        }
        if completion_first {
            let event = sim.events.pop().expect("peeked");
            sim.now = event.time;
            match event.kind {
                EventKind::Completion {
                    dyno,
                    router,
                    arrival,
                } => sim.complete(dyno as usize, router as usize, arrival),
            }
        } else if let Some(t) = next_arrival.filter(|&t| t < sim.window_end) {
            sim.now = t;
            let service = scenario.service.sample(&mut service_rng);
            if t >= sim.window_start {
                // Summed in arrival order, so every policy reports the very same figure.
                sim.service_sum += service;
            }
            let router = if routers > 1 {
                sim.routing_rng.random_range(0..routers)
            } else {
                0
            };
            sim.arrived += 1;
            sim.arrive(Request {
                arrival: t,
                service,
                router: router as u32,
            });
            next_arrival = arrivals.next_arrival(t, &mut arrival_rng);
            if sim.waiting_total > scenario.max_waiting {
                return Err(Error::Overloaded {
                    queued: sim.waiting_total,
                    at_time: t,
                });
            }
        } else if sim.events.is_empty() {
            break;
        } else {
            next_arrival = None;
        }
        steps += 1;
        if steps % INTERRUPT_CHECK_EVERY == 0 && interrupted() {
            return Err(Error::Interrupted);
        }
    }
    if sim.trace.is_some() {
        sim.snapshot_until(f64::INFINITY);
    }
    let trace = sim.trace.take().map(|t| Trace {
        interval: t.interval,
        frames: t.frames,
    });
    Ok((sim.finish(steps), trace))
}

impl Simulation<'_> {
    fn arrive(&mut self, request: Request) {
        let r = request.router as usize;
        if !self.router_queues[r].is_empty() {
            self.hold(request);
            return;
        }
        match self.route(r) {
            Route::To(dyno) => self.dispatch(dyno, request),
            Route::Hold => self.hold(request),
        }
    }

    #[inline]
    fn route(&mut self, router: usize) -> Route {
        let view = RouterView {
            slots: self.scenario.slots,
            load: &self.loads[router],
        };
        self.policies[router].route(&view, &mut self.routing_rng)
    }

    /// Records the frames due before the next event at `time` (the state is constant between
    /// events).
    #[cold]
    fn snapshot_until(&mut self, time: f64) {
        let Some(trace) = self.trace.as_mut() else {
            return;
        };
        while trace.next <= trace.until && trace.next < time {
            trace.frames.push(Frame {
                time: trace.next,
                depth: self
                    .dynos
                    .iter()
                    .map(|d| d.busy + d.waiting.len() as u32)
                    .collect(),
                router_waiting: self.router_queues.iter().map(|q| q.len() as u64).sum(),
                arrived: self.arrived,
                queued: self.queued,
            });
            trace.next = (trace.frames.len() as f64) * trace.interval;
        }
    }

    fn hold(&mut self, request: Request) {
        self.queued += 1;
        let queue = &mut self.router_queues[request.router as usize];
        queue.push_back(request);
        self.waiting_total += 1;
        if self.now >= self.window_start {
            self.max_router_queue = self.max_router_queue.max(queue.len());
        }
    }

    #[inline]
    fn dispatch(&mut self, dyno: usize, request: Request) {
        self.loads[request.router as usize].increment(dyno);
        if self.dynos[dyno].busy < self.scenario.slots {
            self.start(dyno, request);
        } else {
            let measuring = self.now >= self.window_start;
            self.queued += 1;
            let d = &mut self.dynos[dyno];
            d.waiting.push_back(request);
            if measuring {
                d.max_waiting = d.max_waiting.max(d.waiting.len());
            }
            self.waiting_total += 1;
        }
    }

    #[inline]
    fn start(&mut self, dyno: usize, request: Request) {
        // The slot is busy over [now, now + service]: its overlap with the window, counted
        // once here, is this request's share of the dyno's utilisation.
        let (lo, hi) = (
            self.now.max(self.window_start),
            (self.now + request.service).min(self.window_end),
        );
        let d = &mut self.dynos[dyno];
        d.busy += 1;
        if hi > lo {
            d.busy_area += hi - lo;
        }
        if request.arrival >= self.window_start {
            let wait = self.now - request.arrival;
            self.queue.record(wait);
        }
        self.seq += 1;
        self.events.push(Event {
            time: self.now + request.service,
            seq: self.seq,
            kind: EventKind::Completion {
                dyno: dyno as u32,
                router: request.router,
                arrival: request.arrival,
            },
        });
    }

    fn complete(&mut self, dyno: usize, router: usize, arrival: f64) {
        self.dynos[dyno].busy -= 1;
        if arrival >= self.window_start {
            self.response.record(self.now - arrival);
        }
        if self.now >= self.window_start && self.now <= self.window_end {
            self.completions_in_window += 1;
        }
        self.loads[router].decrement(dyno);
        if let Some(next) = self.dynos[dyno].waiting.pop_front() {
            self.waiting_total -= 1;
            self.start(dyno, next);
        }
        while let Some(&head) = self.router_queues[router].front() {
            match self.route(router) {
                Route::To(target) => {
                    self.router_queues[router].pop_front();
                    self.waiting_total -= 1;
                    self.dispatch(target, head);
                }
                Route::Hold => break,
            }
        }
    }

    fn finish(self, events: u64) -> ReplicationResult {
        let capacity = self.scenario.slots as f64 * self.scenario.duration;
        let per_dyno: Vec<f64> = self.dynos.iter().map(|d| d.busy_area / capacity).collect();
        let requests = self.queue.count();
        ReplicationResult {
            requests,
            queued_fraction: ratio(self.queue.positive_count() as f64, requests as f64),
            queue: self.queue.summary(),
            queue_of_queued: self.queue.positive_summary(),
            response: self.response.summary(),
            service_mean: ratio(self.service_sum, requests as f64),
            throughput: self.completions_in_window as f64 / self.scenario.duration,
            utilisation: Utilisation {
                mean: per_dyno.iter().sum::<f64>() / per_dyno.len() as f64,
                min: per_dyno.iter().copied().fold(f64::INFINITY, f64::min),
                max: per_dyno.iter().copied().fold(0.0, f64::max),
                per_dyno,
            },
            max_queue_depth: QueueDepth {
                dyno: self.dynos.iter().map(|d| d.max_waiting).max().unwrap_or(0) as u64,
                router: self.max_router_queue as u64,
            },
            simulated_requests: self.arrived,
            events,
        }
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}
