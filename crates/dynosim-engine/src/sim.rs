//! The discrete-event simulation of one replication.
//!
//! Events sit in a binary heap ordered by (time, sequence number), so that events at the same
//! instant run in the order they were scheduled. Arrivals are not in the heap: the next
//! arrival time is kept aside and compared with the heap's head, which keeps the heap as small
//! as the number of busy slots. At equal times, completions run before arrivals (a slot freed
//! at t is free for a request arriving at t).

use crate::alloc::{filled, StateBytes};
use crate::arrivals::ArrivalProcess;
use crate::error::{Error, Result};
use crate::load_index::LoadIndex;
use crate::measure::Measures;
use crate::policy::{DynoDraw, Knowledge, Route, RouterView, RoutingPolicy, Ties};
use crate::result::{Frame, ReplicationResult, Trace};
use crate::rng::{stream, SimRng, Stream};
use crate::scenario::Scenario;
use rand::Rng;
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

#[derive(Debug, Default, Clone)]
struct Dyno {
    busy: u32,
    waiting: VecDeque<Request>,
}

#[derive(Debug)]
struct TraceRecorder {
    interval: f64,
    until: f64,
    next: f64,
    frames: Vec<Frame>,
}

struct Simulation<'s> {
    scenario: &'s Scenario,
    now: f64,
    seq: u64,
    events: BinaryHeap<Event>,
    dynos: Vec<Dyno>,
    loads: Vec<LoadIndex>,
    policies: Vec<Box<dyn RoutingPolicy>>,
    router_queues: Vec<VecDeque<Request>>,
    waiting_total: usize,
    routing_rng: SimRng,
    dyno_draw: DynoDraw,
    measures: Measures,
    queued: u64,
    trace: Option<TraceRecorder>,
}

/// What a replication's state costs on this engine (see [`crate::memory`]).
pub(crate) fn state_bytes(scenario: &Scenario) -> StateBytes {
    let u32_bytes = size_of::<u32>() as f64;
    // Per router and dyno: the in-flight count, and for a ranking its bucket links
    // (random ties: a position and a place in a set that may hold spare room).
    let ranking = match scenario.policy.knowledge() {
        Knowledge::Ranking(Ties::Random) => 3.0 * u32_bytes,
        Knowledge::Ranking(Ties::Oldest) | Knowledge::FreeSlots => 2.0 * u32_bytes,
        Knowledge::Nothing | Knowledge::Some => 0.0,
    };
    StateBytes {
        per_dyno: Measures::BYTES_PER_DYNO + size_of::<Dyno>() as f64,
        // The event heap holds a completion per busy slot; its buffer doubles.
        per_slot: 2.0 * size_of::<Event>() as f64,
        per_router_dyno: u32_bytes + ranking,
        per_waiting: 2.0 * size_of::<Request>() as f64,
    }
}

/// Runs replication `replication` of the scenario on this engine.
pub(crate) fn run_replication(
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
        events: BinaryHeap::with_capacity(scenario.total_slots().min(1 << 20) as usize + 1),
        dynos: filled(n, Dyno::default())?,
        loads: (0..routers)
            .map(|_| {
                let ranking = match scenario.policy.knowledge() {
                    Knowledge::Ranking(ties) => Some(ties),
                    Knowledge::FreeSlots => Some(Ties::Oldest),
                    Knowledge::Nothing | Knowledge::Some => None,
                };
                LoadIndex::new(n, ranking)
            })
            .collect::<Result<_>>()?,
        policies: (0..routers).map(|_| scenario.policy.box_clone()).collect(),
        router_queues: (0..routers).map(|_| VecDeque::new()).collect(),
        waiting_total: 0,
        routing_rng: stream(seed, replication, Stream::Routing),
        dyno_draw: DynoDraw::new(n),
        measures: Measures::new(scenario)?,
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
        } else if let Some(t) = next_arrival.filter(|&t| t < sim.measures.window_end()) {
            sim.now = t;
            let service = scenario.service.sample(&mut service_rng);
            sim.measures.arrived(t, service);
            let router = if routers > 1 {
                sim.routing_rng.random_range(0..routers)
            } else {
                0
            };
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
    Ok((sim.measures.finish(scenario), trace))
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
        let view = RouterView::indexed(self.scenario.slots, &self.dyno_draw, &self.loads[router]);
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
                arrived: self.measures.arrivals(),
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
        self.measures.router_queue(self.now, queue.len());
    }

    #[inline]
    fn dispatch(&mut self, dyno: usize, request: Request) {
        self.loads[request.router as usize].increment(dyno);
        if self.dynos[dyno].busy < self.scenario.slots {
            self.start(dyno, request);
        } else {
            self.queued += 1;
            let waiting = &mut self.dynos[dyno].waiting;
            waiting.push_back(request);
            self.measures.dyno_queue(dyno, self.now, waiting.len());
            self.waiting_total += 1;
        }
    }

    #[inline]
    fn start(&mut self, dyno: usize, request: Request) {
        self.dynos[dyno].busy += 1;
        self.measures
            .started(dyno, request.arrival, self.now, request.service);
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
        self.measures.completed(arrival, self.now);
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
}
