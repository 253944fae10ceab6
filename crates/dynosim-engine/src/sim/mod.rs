//! The event-driven engine: every scenario, one replication at a time, on the event kernel
//! ([`crate::kernel`]).
//!
//! Components and the way a request flows through them:
//! workload (an arrival process, or closed-loop clients) → router(s) (a policy, each router's
//! view of its in-flight requests, a FIFO queue for policies that hold) → dyno (accept queue,
//! processes and threads, [`dyno`]) → the request's phases: `cpu` on the dyno's cores
//! ([`sharing`]), `io`, `use` of a resource (its pool and servers, [`resource`]) → the
//! response (a closed-loop client thinks and sends again). The observer ([`Measures`]) is told
//! what happened; the components keep no statistics of their own.
//!
//! Events at the same time run in this order (the kernel's priorities): completions (a timed
//! phase, a CPU or resource slice, a thread's overhead), then dyno boots, then routed requests
//! reaching their dynos (`router.connect`), then arrivals and clients' sends; among equals, in
//! the order they were scheduled. A thread freed at t is free for a request
//! arriving at t.
//!
//! A scenario of plain slots and `[service]` runs as requests holding a thread for their drawn
//! service time, with the same draws and the same order of events as the direct engine
//! ([`crate::direct`]), so that both report the same figures.
//!
//! One `Simulation` holds a replication's state; what it does is split by concern, one file
//! each, so that a change has one place to go:
//! - `routing.rs`: arrivals, the routers (their queues, `router.cost`, retries) and the
//!   dispatch of a request to a dyno;
//! - `board.rs`: the routers' counts, and the late-load board they read under `router.view`;
//! - `threads.rs`: a request at its dyno: the accept queue, a thread taking it, the response
//!   and the thread freed;
//! - `phases.rs`: a request's phases on its thread: `io`, `cpu`, `use` of a resource, and the
//!   events that end them;
//! - `memory.rs`: a dyno's memory (R14, R15) and malloc arenas;
//! - `timeouts.rs`: the requests' timeouts, their deadlines and what each does when it comes;
//! - `lifecycle.rs`: dynos and workers coming up and going down: boots (R10), scale-ups and
//!   scale-downs (drain, SIGTERM, SIGKILL), R15 restarts, `app.timeout`'s worker kills; the
//!   stages themselves are in `fleet.rs`;
//! - `scaling.rs`: the autoscaler: what it is fed, and its evaluations;
//! - `clients.rs`: closed-loop clients, who think and send again.
//!
//! This file keeps the state, its construction, and the run's loop of events; the
//! components' own state is in `dyno.rs`, `router.rs`, `resource.rs`, `sharing.rs`,
//! `timers.rs`, and the events in `events.rs`.

mod aperture;
mod board;
mod clients;
mod cpu;
mod dyno;
mod events;
mod fleet;
mod idle;
mod lifecycle;
mod memory;
mod phases;
mod resource;
mod router;
mod routing;
mod scaling;
mod sharing;
mod slices;
mod threads;
mod timeouts;
mod timers;

use crate::alloc::{filled, prefetch, prefetch_all, StateBytes};
use crate::error::{Error, Result};
use crate::measure::Measures;
use crate::policy::{Knowledge, Ties};
use crate::request::PhaseKind;
use crate::result::{Frame, ReplicationResult, Trace};
use crate::rng::{stream, SimRng, Stream};
use crate::scenario::{Scenario, Workload};
use dyno::{Dyno, DynoRest, Fifo, Processes};
use events::{Event, EventIds, Events, ARRIVAL, BOOT};
use fleet::Fleet;
use resource::ResourceState;
use router::Routers;
use scaling::Scaling;
use sharing::{Sharing, SharingStore};
use timers::Deadlines;

/// Fleets of at least this many dynos read ahead for the next event (see
/// `Simulation::touch`): about 1 MB of dyno and CPU state, beyond the faster caches.
const LOOK_AHEAD_DYNOS: u32 = 4096;

/// How often (in events) the run asks whether it should stop.
const INTERRUPT_CHECK_EVERY: u64 = 1 << 16;

const NONE: u32 = u32::MAX;

/// Where a request is, for what an event or a restart must do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Held by its router's policy (or about to be routed).
    Routing,
    /// In its router's own queue, or being worked on by it (`router.cost`).
    AtRouter,
    /// Routed, on its way to the dyno (`router.connect`).
    Connecting,
    /// Refused by a dyno whose backlog was full: the router tries another after
    /// `router.retry_delay`. Counted by no dyno meanwhile.
    Retrying,
    Accept,
    /// A timed phase: `[service]` hold or `io`.
    Timed,
    Cpu,
    PoolWait(u32),
    ResourceQueue(u32),
    ResourceService(u32),
    /// On a thread between phases.
    Thread,
    /// Answered; its thread is still busy with it (`app.overhead`).
    Overhead,
    /// Killed while an event of its own was pending; freed when it comes.
    Dead,
    /// Killed while resource `r` served it: the resource works on to the end (it is not
    /// told), then frees its server and connection, and the entry is freed.
    Orphan(u32),
    /// Not a request: a free entry of the slab.
    Free,
}

#[derive(Debug, Clone)]
struct Request {
    arrival: f64,
    start: f64,
    /// `[service]`'s drawn time, or the sum of the phases' (uncontended).
    service: f64,
    router: u32,
    dyno: u32,
    process: u32,
    class: u32,
    phase: u32,
    client: u32,
    state: State,
    /// Whether it has waited in a queue (router or dyno) on its way to a thread.
    waited: bool,
    /// The pool connection held (pool index), or NONE.
    pool: u32,
    /// When the current wait began (pool or resource queue).
    waited_since: f64,
    pool_wait: f64,
    /// Bumped each time the slab entry is reused: a deadline set for an earlier request of
    /// the same entry is told apart by it.
    generation: u32,
    /// The client has its answer: an error (a timeout), given while the dyno may still be
    /// working on the request, which it is not told.
    answered: bool,
    /// The router no longer counts the request against its dyno (it answered it, or gave up
    /// on the dyno: H12).
    router_done: bool,
    /// When the client was answered with an error (infinite if it was not).
    abandoned_at: f64,
    /// The CPU work the request still had to do when its client was answered with an error.
    cpu_left: f64,
    /// Dynos that refused it (a full `app.backlog`).
    refusals: u32,
    /// The dyno that refused it last, which its retry avoids (NONE: none).
    refused_by: u32,
    /// The request after it in its dyno's accept queue ([`Fifo`]), or NONE.
    next: u32,
    /// When its router last sent it to a dyno: the start of the round trip the router sees
    /// (`p2c_ewma` learns from it).
    dispatched: f64,
}

/// Requests in flight, by index; freed entries are reused.
#[derive(Debug, Default)]
struct Slab {
    entries: Vec<Request>,
    free: Vec<u32>,
    /// Drawn phase times: request i's are `times[i * stride ..][.. its phases]`, `stride`
    /// being the most phases a class has (0 for `[service]`). One array for all requests,
    /// rather than a vector each, so that a request's times are where its index says (no
    /// pointer to load first: with many requests in flight that was a cache miss more).
    times: Vec<f64>,
    stride: usize,
    /// Each request's key (`arrivals.keys`) by its index, when requests carry keys (empty
    /// otherwise: a scenario without keys keeps its entries as they were).
    keys: Vec<u32>,
    keyed: bool,
}

impl Slab {
    #[inline]
    fn insert(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            let e = &mut self.entries[i as usize];
            e.generation = e.generation.wrapping_add(1);
            i
        } else {
            self.entries.push(Request {
                arrival: 0.0,
                start: 0.0,
                service: 0.0,
                router: 0,
                dyno: NONE,
                process: 0,
                class: 0,
                phase: 0,
                client: NONE,
                state: State::Routing,
                waited: false,
                pool: NONE,
                waited_since: 0.0,
                pool_wait: 0.0,
                generation: 0,
                answered: false,
                router_done: false,
                abandoned_at: f64::INFINITY,
                cpu_left: 0.0,
                refusals: 0,
                refused_by: NONE,
                next: NONE,
                dispatched: 0.0,
            });
            self.times.resize(self.entries.len() * self.stride, 0.0);
            if self.keyed {
                self.keys.resize(self.entries.len(), NONE);
            }
            (self.entries.len() - 1) as u32
        }
    }
    /// Request `i`'s time for phase `phase`.
    #[inline]
    fn time(&self, i: u32, phase: u32) -> f64 {
        self.times[i as usize * self.stride + phase as usize]
    }

    /// Puts request `i` at the back of `fifo`.
    #[inline]
    fn push_back(&mut self, fifo: &mut Fifo, i: u32) {
        self.entries[i as usize].next = NONE;
        if fifo.len == 0 {
            fifo.head = i;
        } else {
            self.entries[fifo.tail as usize].next = i;
        }
        fifo.tail = i;
        fifo.len += 1;
    }

    /// Takes the request at the front of `fifo`.
    #[inline]
    fn pop_front(&mut self, fifo: &mut Fifo) -> Option<u32> {
        if fifo.len == 0 {
            return None;
        }
        let i = fifo.head;
        fifo.head = self.entries[i as usize].next;
        fifo.len -= 1;
        Some(i)
    }

    /// Asks for request `i`'s entry and phase times (see [`prefetch`]).
    #[inline]
    fn prefetch(&self, i: u32) {
        if let Some(entry) = self.entries.get(i as usize) {
            prefetch_all(entry);
            if let Some(times) = self
                .times
                .get(i as usize * self.stride..)
                .and_then(|t| t.get(..self.stride))
            {
                prefetch_all(times);
            }
        }
    }

    #[inline]
    fn release(&mut self, i: u32) {
        self.entries[i as usize].state = State::Free;
        self.free.push(i);
    }
}

#[derive(Debug)]
struct TraceRecorder {
    interval: f64,
    until: f64,
    /// Whether each frame lists every dyno's depth, or only the fleet's totals.
    per_dyno: bool,
    next: f64,
    frames: Vec<Frame>,
    /// The response times of the answers since the last frame.
    responses: crate::stats::TimeStats,
}

struct Simulation<'s> {
    s: &'s Scenario,
    now: f64,
    events: Events,
    slab: Slab,
    dynos: Vec<Dyno>,
    /// The dynos' CPUs, memory and greedy queues.
    rest: DynoRest,
    /// The groups and jobs of every dyno's CPU (processor sharing).
    cpu_store: SharingStore,
    /// Every dyno's CPU in time slices (`fleet.cpu_sharing = "slices"`; None: processor
    /// sharing, in `rest.cpus` and `cpu_store`).
    slices: Option<Box<cpu::Slices>>,
    /// `app.request_cpu`'s draws.
    request_cpu_rng: SimRng,
    /// `fleet.cpu_jitter`: each CPU phase's factor (None: none), and its draws.
    jitter: Option<rand_distr::LogNormal<f64>>,
    jitter_rng: SimRng,
    /// `router.colocated_cpu`'s draws, one a request at its arrival; and half of each request's
    /// draw, by its slab index, for its response (the other half went with its dispatch).
    colocated_rng: SimRng,
    colocated_half: Vec<f64>,
    /// Every dyno's processes' requests and arenas.
    procs: Processes,
    /// Which slot holds a dyno, and where each dyno is in its life.
    fleet: Fleet,
    /// The autoscaler, when the scenario has one.
    scaling: Option<Box<Scaling>>,
    routers: Routers,
    /// Whether the routers' policies learn from their responses ([`Knowledge::Responses`]).
    learns_responses: bool,
    waiting_total: usize,
    resources: Vec<ResourceState>,
    service_rng: SimRng,
    think_rng: SimRng,
    /// Greedy accept: which process wins a connection; and the candidates, reused.
    accept_rng: SimRng,
    open_processes: Vec<u32>,
    connect_rng: SimRng,
    overhead_rng: SimRng,
    /// Boot times (`fleet.boot_time`).
    boot_rng: SimRng,
    /// The requests' keys (`arrivals.keys`).
    keys_rng: SimRng,
    /// When each dyno's daily restart comes (`fleet.cycling`).
    cycling_rng: SimRng,
    /// The requests' deadlines by kind ([`timers::Kind`]), for the timeouts the scenario sets; and
    /// the killed workers' replacements.
    deadlines: [Option<Deadlines>; 5],
    /// When the deadlines' event is scheduled, if it is.
    timers_at: Option<f64>,
    /// Each timeout's draws (by [`timers::Kind`]).
    timeout_rngs: [SimRng; 4],
    /// Requests each router holds: waiting at it, or sent and not yet answered by their dyno
    /// or given up on (`router.max_in_flight` caps it).
    in_flight: Vec<u64>,
    /// `router.cost`: when each router is done with the requests it has (a FIFO server: a
    /// request's turn is known when it comes), how many it has, and its work's draws.
    router_free_at: Vec<f64>,
    at_router: Vec<u64>,
    router_cost_rng: SimRng,
    measures: Measures,
    queued: u64,
    trace: Option<TraceRecorder>,
    /// Whether requests have phases (`[request]`) rather than one `[service]` hold.
    phases: bool,
    /// Whether dynos keep memory and may restart.
    memory: bool,
    /// Fleet totals for the observer.
    busy_processes: u32,
    fleet_memory: f64,
    over_quota: u32,
    /// Whether to read ahead for the next event ([`Simulation::touch`]): for fleets whose
    /// state outgrows the caches; a small one's is in them already (the reads cost 1–2%).
    look_ahead: bool,
    /// Whether requests have CPU phases (for [`Simulation::touch_dyno`]).
    cpu_phases: bool,
    /// Closed loop: requests still to send (None: until the window ends).
    to_send: Option<u64>,
    done: Vec<u32>,
    /// The arriving request's service time when the workload carries it (a replayed trace).
    carried: Option<f64>,
}

/// What a replication's state costs on this engine (see [`crate::state_size`]).
pub(crate) fn state_bytes(scenario: &Scenario) -> StateBytes {
    let u32_bytes = size_of::<u32>() as f64;
    // Per router and dyno: the in-flight count, and for a ranking its bucket links (random
    // ties: a position and a place in a set that may hold spare room).
    let ranking = match scenario.policy.knowledge() {
        Knowledge::Ranking(Ties::Random) => 3.0 * u32_bytes,
        Knowledge::Ranking(Ties::Oldest) | Knowledge::FreeSlots => 2.0 * u32_bytes,
        // A latency estimate and its time.
        Knowledge::Responses => 16.0,
        Knowledge::Nothing | Knowledge::Some | Knowledge::IdleReports => 0.0,
    };
    // An aperture: each router's order of the dynos, their places in it, and its subset.
    let aperture = if scenario.aperture.is_some() {
        3.0 * u32_bytes
    } else {
        0.0
    };
    // Idle reports, per dyno: which list holds it and its count of downs, its place on a
    // list (room for two in a deque), a report on its way.
    let idle = if scenario.policy.knowledge() == Knowledge::IdleReports {
        4.0 * u32_bytes + size_of::<f64>() as f64 + 3.0 * u32_bytes
    } else {
        0.0
    };
    let processes = f64::from(scenario.app.processes);
    let request = size_of::<Request>() as f64
        + 8.0
            * scenario.request.as_ref().map_or(0.0, |r| {
                r.classes.iter().map(|c| c.phases.len()).max().unwrap_or(0) as f64
            })
        + if scenario.keys.is_some() {
            u32_bytes
        } else {
            0.0
        }
        // `router.colocated_cpu`: half of its draw kept for the response.
        + if scenario.colocated_cpu.is_some() { 8.0 } else { 0.0 };
    // A late view's board: counts for the fleet, ranked as a router's would be.
    let board = if scenario.reads_board() {
        crate::view::Board::BYTES_PER_DYNO + ranking
    } else {
        0.0
    };
    StateBytes {
        per_dyno: Measures::BYTES_PER_DYNO
            + board
            + idle
            + (size_of::<Dyno>() + size_of::<Sharing>() + size_of::<f64>()) as f64
            + processes * 2.0 * u32_bytes
            // Time slices: a dyno's scheduler and its processes' locks.
            + match scenario.cpu.sharing {
                crate::scenario::CpuSharing::Slices if scenario.request.is_some() => {
                    slices::Slicer::bytes(scenario.app.processes, scenario.dyno_type.cores)
                }
                _ => 0.0,
            },
        // Per busy thread: a request, a pending event (the heap's buffer doubles), a CPU job.
        per_slot: request + 2.0 * crate::kernel::EventQueue::ENTRY_BYTES as f64 + 32.0,
        per_router_dyno: u32_bytes + ranking + aperture,
        // A waiting request: its entry and its place in a queue.
        per_waiting: request + 2.0 * u32_bytes,
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

/// What replication `replication` measured, before its figures are worked out, and when its
/// window closed: for a shard, whose measures are merged with the others' (see
/// [`crate::shard`]).
pub(crate) fn measure_replication(
    scenario: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<(Measures, f64)> {
    simulate_measures(scenario, replication, None, interrupted).map(|(m, end, _)| (m, end))
}

/// Runs a replication and also snapshots it every `interval` seconds up to `until`.
pub fn trace_replication(
    scenario: &Scenario,
    replication: u64,
    interval: f64,
    until: f64,
    per_dyno: bool,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<(ReplicationResult, Trace)> {
    if !(interval > 0.0 && until >= 0.0 && interval.is_finite() && until.is_finite()) {
        return Err(Error::config(
            "trace",
            "interval must be positive and until >= 0",
        ));
    }
    let frames = (until / interval).floor() + 1.0;
    let per_frame = if per_dyno {
        f64::from(scenario.dyno_slots())
    } else {
        1.0
    };
    if frames * per_frame > 5e7 {
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
        per_dyno,
        next: 0.0,
        frames: Vec::with_capacity(frames as usize),
        responses: crate::stats::TimeStats::default(),
    };
    simulate(scenario, replication, Some(recorder), interrupted)
        .map(|(result, trace)| (result, trace.expect("a recorder was given")))
}

fn simulate(
    s: &Scenario,
    replication: u64,
    trace: Option<TraceRecorder>,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<(ReplicationResult, Option<Trace>)> {
    let (measures, end, trace) = simulate_measures(s, replication, trace, interrupted)?;
    let mut result = measures.finish(s, end);
    result.engine = crate::scenario::Engine::Events.name();
    Ok((result, trace))
}

/// [`simulate`] up to the figures: the measures, when the window closed, the trace.
fn simulate_measures(
    s: &Scenario,
    replication: u64,
    trace: Option<TraceRecorder>,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<(Measures, f64, Option<Trace>)> {
    s.check_stable()?;
    let seed = s.seed;
    let mut arrival_rng = stream(seed, replication, Stream::Arrivals);
    // Dyno slots: the fleet's, or room for an autoscaled fleet's dynos to come and go; those
    // past the initial fleet start with no dyno in them.
    let slots = s.dyno_slots();
    let n = slots as usize;
    let phases = s.request.is_some();
    let cpu = phases;
    let memory = s.app.memory.is_modelled();
    let sliced = cpu && s.cpu.sharing == crate::scenario::CpuSharing::Slices;
    let colocated = s.colocated_cpu.is_some();
    let cpu_store = dyno::cpu_store(&s.app, slots, s.dyno_type.cores, cpu && !sliced, colocated)?;
    let mut dynos = filled(n, Dyno::IDLE)?;
    let mut rest = DynoRest::new(&s.app, slots, &cpu_store)?;
    for d in s.dynos as usize..n {
        dynos[d].up = false;
        rest.memory[d] = 0.0;
    }
    let clients = match &s.workload {
        Workload::Open(_) => 0,
        Workload::Closed(clients) => clients.count,
    };
    let mut sim = Simulation {
        s,
        now: 0.0,
        events: Events::new(
            s.total_slots().min(1 << 20) as usize + 2,
            EventIds::new(slots, s.resources.len() as u32, clients),
            slots < LOOK_AHEAD_DYNOS,
            // Large fleets: an event for each phase's end and the arrival, about.
            (slots >= LOOK_AHEAD_DYNOS).then(|| {
                let phases = s.request.as_ref().map_or(1, |r| {
                    r.classes.iter().map(|c| c.phases.len()).max().unwrap_or(1)
                });
                s.arrival_rate() * (1 + phases) as f64
            }),
        ),
        slab: Slab {
            stride: s.request.as_ref().map_or(0, |r| {
                r.classes.iter().map(|c| c.phases.len()).max().unwrap_or(0)
            }),
            keyed: s.keys.is_some(),
            ..Slab::default()
        },
        dynos,
        rest,
        cpu_store,
        slices: if sliced {
            let rules = slices::Rules::new(
                s.dyno_type.cores,
                s.cpu.quantum,
                s.app.lock,
                s.app.model == crate::app::Model::Async,
                s.app.switch_interval,
                s.app.timeslice,
            );
            let dynos = filled(n, slices::Slicer::new(s.app.processes, s.dyno_type.cores))?;
            Some(Box::new(cpu::Slices { rules, dynos }))
        } else {
            None
        },
        request_cpu_rng: stream(seed, replication, Stream::RequestCpu),
        jitter: (cpu && s.cpu.jitter > 0.0).then(|| {
            // A mean-1 lognormal of coefficient of variation c: sigma² = ln(1 + c²).
            let var = (1.0 + s.cpu.jitter * s.cpu.jitter).ln();
            rand_distr::LogNormal::new(-var / 2.0, var.sqrt()).expect("a finite sigma")
        }),
        jitter_rng: stream(seed, replication, Stream::Jitter),
        colocated_rng: stream(seed, replication, Stream::Colocated),
        colocated_half: Vec::new(),
        procs: Processes::new(&s.app, slots)?,
        fleet: Fleet::new(slots, s.dynos)?,
        scaling: s
            .autoscale
            .as_ref()
            .map(|a| Box::new(Scaling::new(a.clone(), s.dynos))),
        routers: Routers::new(s, slots, replication)?,
        learns_responses: s.policy.knowledge() == Knowledge::Responses,
        waiting_total: 0,
        resources: s
            .resources
            .iter()
            .map(|r| ResourceState::new(r, slots, s.app.processes))
            .collect(),
        service_rng: stream(seed, replication, Stream::Service),
        think_rng: stream(seed, replication, Stream::Think),
        accept_rng: stream(seed, replication, Stream::Accept),
        open_processes: Vec::new(),
        connect_rng: stream(seed, replication, Stream::Connect),
        overhead_rng: stream(seed, replication, Stream::Overhead),
        boot_rng: stream(seed, replication, Stream::Boot),
        keys_rng: stream(seed, replication, Stream::Keys),
        cycling_rng: stream(seed, replication, Stream::Cycling),
        deadlines: {
            let [router, queue, client, app] = [
                s.router_timeout.as_ref(),
                s.queue_timeout.as_ref(),
                s.client_timeout.as_ref(),
                s.app.timeout.as_deref(),
            ]
            .map(|t| t.map(|t| Deadlines::new(t.constant().is_some())));
            // Replacements come a fixed time after their kills: in order.
            let boots = s.app.timeout.is_some().then(|| Deadlines::new(true));
            [router, queue, client, app, boots]
        },
        timers_at: None,
        timeout_rngs: [
            Stream::RouterTimeout,
            Stream::QueueTimeout,
            Stream::ClientTimeout,
            Stream::AppTimeout,
        ]
        .map(|purpose| stream(seed, replication, purpose)),
        in_flight: vec![0; s.routers as usize],
        router_free_at: vec![0.0; s.routers as usize],
        at_router: vec![0; s.routers as usize],
        router_cost_rng: stream(seed, replication, Stream::RouterCost),
        measures: Measures::new(s)?,
        queued: 0,
        trace,
        phases,
        memory,
        busy_processes: 0,
        fleet_memory: f64::from(s.dynos) * dyno::idle_memory(&s.app),
        over_quota: if dyno::idle_memory(&s.app) > s.app.memory.quota {
            s.dynos
        } else {
            0
        },
        to_send: None,
        look_ahead: slots >= LOOK_AHEAD_DYNOS,
        cpu_phases: s.request.as_ref().is_some_and(|r| {
            r.classes
                .iter()
                .any(|c| c.phases.iter().any(|p| p.kind == PhaseKind::Cpu))
        }),
        done: Vec::new(),
        carried: None,
    };
    if sim.measures.detailed() {
        let over = f64::from(sim.over_quota);
        sim.measures.fleet_levels(0.0, 0.0, sim.fleet_memory, over);
        if memory {
            sim.measures.dyno_memory(0.0, dyno::idle_memory(&s.app));
        }
    }

    let mut arrivals = match &s.workload {
        Workload::Open(process) => {
            let mut process = process.fresh(seed, replication);
            if let Some(t) = process.next_arrival(0.0, &mut arrival_rng) {
                sim.events.schedule(t, ARRIVAL, Event::Arrival);
            }
            Some(process)
        }
        Workload::Closed(clients) => {
            sim.to_send = clients.requests;
            for client in 0..clients.count {
                sim.events.schedule(0.0, ARRIVAL, Event::Send { client });
            }
            None
        }
    };
    if let Some(scaling) = &sim.scaling {
        let first = scaling.interval();
        if first < sim.measures.window_end() {
            sim.events.schedule(first, BOOT, Event::Autoscale);
        }
    }
    if let Some(&(at, _)) = s.lifecycle.deploys.first() {
        sim.events.schedule(at, BOOT, Event::Deploy);
    }
    sim.schedule_first_cycles();
    sim.schedule_first_view();
    // Under `jiq`, the initial fleet reports idle at the start, dyno by dyno.
    for dyno in 0..s.dynos as usize {
        sim.idle_check(dyno);
    }
    let window_end = sim.measures.window_end();
    let mut steps = 0u64;
    while let Some((time, event)) = sim.events.pop() {
        if sim.look_ahead {
            if let Some((next, req)) = sim.events.peek() {
                sim.touch(next, req);
            }
        }
        if sim.trace.is_some() {
            sim.snapshot_until(time);
        }
        match event {
            Event::Arrival => {
                if time >= window_end {
                    continue;
                }
                sim.now = time;
                let process = arrivals.as_mut().expect("an open workload");
                let mut carried = [0.0];
                sim.carried = process.carried_services(&mut carried).then_some(carried[0]);
                sim.arrive(NONE);
                if let Some(t) = process.next_arrival(time, &mut arrival_rng) {
                    sim.events.schedule(t, ARRIVAL, Event::Arrival);
                }
                if sim.look_ahead {
                    sim.touch_next_arrival();
                }
                sim.check_overload()?;
            }
            Event::Send { client } => {
                if time >= window_end || sim.to_send == Some(0) {
                    continue;
                }
                sim.now = time;
                if let Some(left) = sim.to_send.as_mut() {
                    *left -= 1;
                }
                sim.arrive(client);
            }
            Event::Done { req } => {
                sim.now = time;
                sim.timed_done(req);
            }
            Event::Cpu { dyno } => {
                sim.now = time;
                sim.cpu_done(dyno as usize);
            }
            Event::Shared { resource } => {
                sim.now = time;
                sim.shared_done(resource as usize);
            }
            Event::Life { dyno } => {
                sim.now = time;
                sim.life_event(dyno as usize);
            }
            Event::Autoscale => {
                sim.now = time;
                sim.autoscale();
            }
            Event::Deploy => {
                sim.now = time;
                sim.deploy();
            }
            Event::View => sim.view_due(time),
            Event::Report => {
                sim.now = time;
                sim.reports_due();
            }
            Event::Timers => {
                let before = sim.now;
                sim.now = time;
                if !sim.timers_due() {
                    // A deadline that found its request already answered (its timer still
                    // set) is no part of the run's work: the run's end stays at the last
                    // event that did something. It made a 1 s `ab -n` run of
                    // `unicorn-2011` last 30 s, the router's timeout (issue #23).
                    sim.now = before;
                }
            }
        }
        steps += 1;
        if steps % INTERRUPT_CHECK_EVERY == 0 && interrupted() {
            return Err(Error::Interrupted);
        }
    }
    if sim.trace.is_some() {
        sim.snapshot_until(f64::INFINITY);
    }
    // A timed run's window closes at its end, whenever its last event ran (the levels hold
    // their values to it); a closed loop measured whole ends with its last work.
    let end = if window_end.is_finite() {
        sim.now.max(window_end)
    } else {
        sim.now
    };
    if sim.measures.detailed() {
        let (now, busy, memory, over) = (
            end,
            f64::from(sim.busy_processes),
            sim.fleet_memory,
            f64::from(sim.over_quota),
        );
        sim.measures.fleet_levels(now, busy, memory, over);
        for (r, state) in sim.resources.iter().enumerate() {
            sim.measures.resource_busy(r, now, state.busy_servers());
        }
    }
    let trace = sim.trace.take().map(|t| Trace {
        interval: t.interval,
        frames: t.frames,
    });
    Ok((sim.measures, end, trace))
}

impl Simulation<'_> {
    /// A request that arrived at `arrival` was answered now (by its app or with an error), as
    /// the router logs it: for the autoscaler's response-time rules and the trace's p95.
    #[inline]
    fn answered(&mut self, arrival: f64) {
        let seconds = self.now - arrival;
        if let Some(scaling) = self.scaling.as_deref_mut() {
            scaling.response_time(self.now, seconds);
        }
        if let Some(trace) = self.trace.as_mut() {
            trace.responses.record(seconds);
        }
    }

    /// Asks for what the next event will first need (its dyno's CPU, or its request), so
    /// that the cache misses of a large fleet overlap with the work on the current event
    /// rather than following it. Only the first level: a load that depends on another (the
    /// request's dyno) would stall, and did (measured slower).
    #[inline]
    fn touch(&self, event: Event, soonest: u32) {
        match event {
            Event::Cpu { dyno } => {
                prefetch_all(&self.rest.cpus[dyno as usize]);
                self.cpu_store.prefetch(dyno);
                // The request it expects to finish (known when it was scheduled).
                self.slab.prefetch(soonest);
            }
            Event::Done { req } => {
                self.slab.prefetch(req);
                // Its dyno, which the request's next phase or its response reaches.
                self.touch_dyno(soonest as usize);
            }
            _ => {}
        }
    }

    /// Asks for what a request's start, CPU phase or response reads of its dyno (each
    /// array's line: see [`Self::touch`]).
    #[inline]
    fn touch_dyno(&self, dyno: usize) {
        let Some(d) = self.dynos.get(dyno) else {
            return;
        };
        prefetch_all(d);
        prefetch(self.procs.of(dyno, 0));
        self.routers.loads[0].prefetch(dyno);
        self.measures.prefetch_dyno(dyno);
        if self.cpu_phases {
            prefetch_all(&self.rest.cpus[dyno]);
            self.cpu_store.prefetch(dyno as u32);
        }
    }

    /// Asks for what the next arrival needs: the slab entry it will take, and the dyno a
    /// random draw would send it to, drawn from a copy of the routing stream (the stream
    /// itself is not moved: a policy that draws otherwise only reads ahead in vain).
    #[inline]
    fn touch_next_arrival(&self) {
        if let Some(&i) = self.slab.free.last() {
            self.slab.prefetch(i);
        }
        self.touch_dyno(self.routers.next_random());
    }

    fn check_overload(&self) -> Result<()> {
        if self.waiting_total > self.s.max_waiting {
            return Err(Error::Overloaded {
                queued: self.waiting_total,
                at_time: self.now,
            });
        }
        Ok(())
    }

    /// Records the frames due before the next event at `time` (the state is constant between
    /// events).
    #[cold]
    fn snapshot_until(&mut self, time: f64) {
        let Some(trace) = self.trace.as_mut() else {
            return;
        };
        while trace.next <= trace.until && trace.next < time {
            let (mut busy, mut dyno_waiting) = (0u64, 0u64);
            for d in &self.dynos {
                busy += u64::from(d.busy);
                dyno_waiting += u64::from(d.waiting);
            }
            let responses = std::mem::take(&mut trace.responses);
            let response_p95 = (responses.count() > 0).then(|| responses.summary().p95);
            trace.frames.push(Frame {
                time: trace.next,
                depth: if trace.per_dyno {
                    self.dynos.iter().map(|d| d.busy + d.waiting).collect()
                } else {
                    Vec::new()
                },
                router_waiting: self.routers.held() + self.at_router.iter().sum::<u64>(),
                dyno_waiting,
                busy,
                arrived: self.measures.arrivals(),
                queued: self.queued,
                completed: self.measures.completions(),
                failed: self.measures.failures(),
                errors: self.measures.errors_so_far(),
                dynos_up: self.fleet.up,
                dynos_booting: self.fleet.booting,
                dynos_draining: self.fleet.stopping,
                autoscale_metric: self.scaling.as_ref().and_then(|s| s.last_seen()),
                response_p95,
            });
            trace.next = (trace.frames.len() as f64) * trace.interval;
        }
    }
}
