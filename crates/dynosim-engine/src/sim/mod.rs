//! The event-driven engine: every scenario, one replication at a time, on the event kernel
//! ([`crate::kernel`]).
//!
//! Components and the way a request flows through them:
//! workload (an arrival process, or closed-loop clients) → router(s) (a policy, each router's
//! view of its in-flight requests, a FIFO queue for policies that hold) → dyno (accept queue,
//! processes and threads, [`dyno`]) → the request's phases: `cpu` on the dyno's cores
//! ([`cpu`]), `io`, `use` of a resource (its pool and servers, [`resource`]) → the response (a
//! closed-loop client thinks and sends again). The observer ([`Measures`]) is told what
//! happened; the components keep no statistics of their own.
//!
//! Events at the same time run in this order (the kernel's priorities, in `events.rs`):
//! 1. completions: a timed phase's end (a `[service]` hold, `io`, an FCFS resource's service),
//!    a thread's overhead, a CPU's or a processor-sharing resource's completion;
//! 2. the requests' deadlines (a response at its deadline is in time);
//! 3. a dyno slot's lifecycle (a boot's end or R10, SIGTERM, SIGKILL, a daily restart), the
//!    autoscaler's evaluations, deploys, and the late-load board's refresh (`router.view`);
//! 4. the routers' own delays: a request reaching its dyno (`router.connect`), a refused one's
//!    retry (`router.retry_delay`), the router done with a request (`router.cost`), an idle
//!    dyno's report reaching its router (`jiq`);
//! 5. arrivals and closed-loop clients' sends.
//!
//! Among equals, in the order they were scheduled. A thread freed at t is free for a request
//! arriving at t.
//!
//! A scenario of plain slots and `[service]` runs as requests holding a thread for their drawn
//! service time, with the same draws and the same order of events as the direct engine
//! ([`crate::direct`]), so that both report the same figures.
//!
//! # The files
//!
//! One `Simulation` holds a replication's state: the run's own (scenario, clock, events,
//! requests in flight, observer), and one field per concern, each a struct of its own that
//! holds that concern's state. Three kinds of file:
//!
//! The run's own:
//! - `mod.rs` (this file): `Simulation`, the entry points, the run's loop, and what every step
//!   shares (a request answered, a client's answer, reading ahead, the trace's frames);
//! - `build.rs`: the builder, one line a concern, and the first events;
//! - `events.rs`: the events, their ids in the kernel's queue, their priorities;
//! - `slab.rs`: the requests in flight (their entries and states): the types every file shares;
//! - `streams.rs`: the random streams, one per purpose, all made there;
//! - `features.rs`: which loop a run takes, with or without the feedback features (`FEEDBACK`),
//!   with or without the lifecycle, keys and late views (`EXTRAS`): the constants `Simulation`
//!   is generic over, chosen once per run.
//!
//! Each concern's state, with its constructor and the methods on that state alone (these
//! files name no `Simulation`):
//! - `traffic.rs`: the open workload's arrivals and what each request is drawn to be;
//! - `clients.rs`: closed-loop clients (requests left to send, think times);
//! - `router.rs`: the routers (policies, their view of the loads, queues, in-flight counts,
//!   `router.cost`'s turns), with `aperture.rs` (each router's subset) and `idle.rs` (`jiq`'s
//!   reports);
//! - `colocated.rs`: a router on the dyno's machine (`router.colocated_cpu`): its draws;
//! - `dyno.rs`: what most events read of a dyno, and its app server's processes;
//! - `cpu.rs`: every dyno's CPU, shared by time slices (`slices.rs`) or processor sharing
//!   (`sharing.rs`, which the resources use too);
//! - `memory.rs`: every dyno's memory, the fleet's and the dynos over quota;
//! - `resource.rs`: a shared resource (pools, servers);
//! - `deadlines.rs`: the requests' deadlines and the timeouts' draws;
//! - `fleet.rs`: which slot holds a dyno, where each is in its life, the formation;
//! - `scaling.rs`: the autoscaler and what it is fed;
//! - `trace.rs`: a trace's frames;
//! - `outbox.rs`: the calls a fleet's requests make to other fleets, and its answers to the
//!   calls it takes (`[services.NAME]`);
//! - `retries.rs`, `redispatch.rs`, `faults.rs`, `limit.rs`: the clients' retries, the
//!   routers' retries after a timeout or an error, the faults, the concurrency limits; the
//!   clients' circuit breaker is the engine's (`crate::breaker::state`), shared with the
//!   testbed's load generator.
//!
//! The steps: `impl Simulation` blocks, what happens, which read and change several concerns
//! (no concern's file names them):
//! - `dispatch.rs`: a request from its arrival to a dyno: routers, their queues, `router.cost`,
//!   `router.connect`, retries;
//! - `knowledge.rs`: what the routers learn of the dynos: their counts, the late board
//!   (`router.view`), idle reports (`jiq`);
//! - `threads.rs`: a request at its dyno: the accept queue, a thread taking it, the response,
//!   the thread freed, and what that does to memory (R14, R15) and arenas;
//! - `phases.rs`: a request's phases on its thread (`io`, `cpu`, `use`) and the events that end
//!   them;
//! - `timeouts.rs`: what each deadline does when it comes;
//! - `limiting.rs`: the concurrency limits admitting a request, rejecting it, and learning
//!   how it ended;
//! - `lifecycle.rs`: dynos and workers coming up and going down: boots (R10), scale-ups and
//!   scale-downs (drain, SIGTERM, SIGKILL), R15 restarts, daily restarts, deploys, the
//!   autoscaler's evaluations, `app.timeout`'s worker kills;
//! - `federation.rs`: fleets that call one another (`[services.NAME]`), each a `Simulation`
//!   stepped through `Simulation::step` in one time order, the calls carried between them.
//!
//! # Adding a concern
//!
//! (client retries, faults, breakers...): a room of its own, not fields in `Simulation`.
//! 1. One new file, `NAME.rs`: its state struct, its constructor (from the scenario, and its
//!    random streams if it draws), and the methods that work on its own state. It names no
//!    `Simulation`: `Simulation` names it, and `tools/check_imports.py` refuses the cycle. The
//!    request types it needs are `slab.rs`'s.
//! 2. `mod NAME;` below, and one field in `Simulation`.
//! 3. One line in the builder (`build.rs`): `name: Name::new(s, ...)`. A new stream is a
//!    [`crate::rng::Stream`] purpose and a field of `Streams` (`streams.rs`), handed over in
//!    that line.
//! 4. Where it acts, a call from the steps (`dispatch.rs`, `threads.rs`...), such as
//!    `self.breakers.allows(dyno, self.now)`. A check every request meets is for the
//!    scenarios that use the concern only: it joins one of `features.rs`'s families and is
//!    guarded by that family's constant (`if FEEDBACK && ...`, `if Self::LIFECYCLE && ...`),
//!    so that the loop of the others compiles it out. An event of its own is a variant in
//!    `events.rs` (an id range, and a priority constant of its own: its place in the order
//!    above), an arm in the run's loop, and the step it runs: an `impl Simulation` method in
//!    the steps' file where it belongs, or in a new steps file (which nothing names back).

mod aperture;
mod build;
mod clients;
mod colocated;
mod cpu;
mod deadlines;
mod dispatch;
mod dyno;
mod events;
mod faults;
mod features;
mod federation;
mod fleet;
mod idle;
mod knowledge;
mod lifecycle;
mod limit;
mod limiting;
mod memory;
mod outbox;
mod phases;
mod redispatch;
mod resend;
mod resource;
mod retries;
mod router;
mod scaling;
mod sharing;
mod slab;
mod slices;
mod streams;
mod threads;
mod timeouts;
mod trace;
mod traffic;

use crate::alloc::{prefetch, prefetch_all, StateBytes};
use crate::breaker::Breaker;
use crate::error::{Error, Result};
use crate::measure::Measures;
use crate::policy::{Knowledge, Ties};
use crate::result::{Frame, ReplicationResult, Trace};
use crate::scenario::Scenario;
use clients::Clients;
use colocated::Colocated;
use cpu::Cpu;
use deadlines::Deadlines;
use dyno::{Dyno, Processes};
use events::{Event, Events, ARRIVAL};
use faults::Faults;
use fleet::Fleet;
use limit::Limits;
use memory::Memory;
use outbox::Outbox;
use redispatch::Redispatch;
use resource::ResourceState;
use retries::Retries;
use router::Routers;
use scaling::Scaling;
use sharing::Sharing;
use slab::{Request, Slab, NONE};
use trace::TraceRecorder;
use traffic::Traffic;

/// Fleets of at least this many dynos read ahead for the next event (see
/// `Simulation::touch`): about 1 MB of dyno and CPU state, beyond the faster caches.
const LOOK_AHEAD_DYNOS: u32 = 4096;

/// How often (in events) the run asks whether it should stop.
const INTERRUPT_CHECK_EVERY: u64 = 1 << 16;

/// What one event did to the run (see `Simulation::step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The event ran.
    Done,
    /// An arrival or a send past the window (or the closed loop's last request): not sent,
    /// not counted as a step.
    Skipped,
    /// The stability verdict is settled: nothing after this changes it; the run stops.
    Settled,
}

/// A replication's state: the run's own, and one field per concern, each the struct that holds
/// that concern's state (see the module's comment). `FEEDBACK`: whether the run's steps look
/// at the feedback features at all (see `features.rs`): false for a scenario that uses none.
/// `EXTRAS`: the same for the lifecycle, keys and a late view.
struct Simulation<'s, const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool> {
    // The run's own: the scenario, the clock, the events, the requests in flight, the
    // observer, and what the run's loop keeps for itself.
    s: &'s Scenario,
    now: f64,
    events: Events,
    slab: Slab,
    measures: Measures,
    /// Requests waiting anywhere (routers' queues and turns, dynos' queues), against
    /// `run.max_waiting`; and those that ever waited, for the trace.
    waiting_total: usize,
    queued: u64,
    /// Whether requests have phases (`[request]`) rather than one `[service]` hold.
    phases: bool,
    /// Whether to read ahead for the next event ([`Simulation::touch`]): for fleets whose
    /// state outgrows the caches; a small one's is in them already (the reads cost 1–2%).
    look_ahead: bool,
    /// Whether requests have CPU phases (for [`Simulation::touch_dyno`]).
    cpu_phases: bool,
    /// The requests a CPU's or a resource's event finished (reused).
    done: Vec<u32>,

    // The concerns, each its own state (see the module's comment).
    /// The open workload's arrivals, and what each request is drawn to be.
    traffic: Traffic,
    /// The closed loop's clients.
    clients: Clients,
    /// The routers: policies, queues, counts, `router.cost`'s turns.
    routers: Routers,
    /// A router on the dyno's machine (`router.colocated_cpu`): its draws.
    colocated: Option<Colocated>,
    /// What most events read of each dyno slot (its accept queue, its counts).
    dynos: Vec<Dyno>,
    /// Every dyno's app server processes.
    procs: Processes,
    /// Every dyno's CPU.
    cpu: Cpu,
    /// Every dyno's memory.
    memory: Memory,
    /// The shared resources (`[resources]`).
    resources: Vec<ResourceState>,
    /// The requests' deadlines (timeouts) and the killed workers' replacements.
    deadlines: Deadlines,
    /// Which slot holds a dyno, and where each dyno is in its life.
    fleet: Fleet,
    /// The autoscaler, when the scenario has one.
    scaling: Option<Box<Scaling>>,
    /// The trace's frames, when one is recorded.
    trace: Option<TraceRecorder>,
    /// The clients' retries (`[arrivals.retry]`); None: clients never retry.
    retries: Option<Box<Retries>>,
    /// The faults (`[[faults]]`) and the app's gate (`app.wait_timeout`).
    faults: Faults,
    /// The router's retries after a timeout or an error (`router.retry_on`); None: none.
    redispatch: Option<Box<Redispatch>>,
    /// The clients' circuit breaker (`[arrivals.breaker]`); None: none.
    breaker: Option<Box<Breaker>>,
    /// The times of the queries the app tries again (`[resources.NAME] retries`, see
    /// `phases.rs`): a stream, drawn only by a scenario that sets them.
    queries: crate::rng::SimRng,
    /// The concurrency limits (`router.concurrency_limit`, `app.concurrency_limit`); None:
    /// none.
    limits: Option<Box<Limits>>,
    /// The calls its requests make to other fleets, and its answers to the calls it takes
    /// (the federation of fleets, `federation.rs`); empty without services.
    outbox: Outbox,
}

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// Whether the run's steps look at the lifecycle (an autoscaler fed, dynos closed or
    /// down), the requests' keys, the late board (see `features.rs`); each false in the loop
    /// without them, and in a measurement build that compiled that feature out.
    const LIFECYCLE: bool = EXTRAS && features::LIFECYCLE_CODE;
    const KEYS: bool = EXTRAS && features::KEYS_CODE;
    const VIEWS: bool = EXTRAS && features::VIEWS_CODE;
}

/// Whether a run of `scenario` on this engine takes the plain loop, whose request path
/// compiles out what such a scenario never uses (see `features.rs`): for tests and
/// measurements.
pub fn plain_loop(scenario: &Scenario) -> bool {
    features::plain(scenario)
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
        + if scenario.colocated_cpu.is_some() { 8.0 } else { 0.0 }
        // `[arrivals.retry]`: each entry's try.
        + if scenario.client_retry.is_some() { Retries::BYTES_PER_REQUEST } else { 0.0 }
        // `router.retry_on` beyond refusals: each entry's client deadline.
        + if scenario.router_retry.beyond_refused() { Redispatch::BYTES_PER_REQUEST } else { 0.0 }
        // A concurrency limit: what each request a limiter admitted holds of it.
        + Limits::BYTES_PER_REQUEST
            * (u8::from(scenario.router_limit.is_some()) + u8::from(scenario.app_limit.is_some()))
                as f64;
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
            // `app.concurrency_limit`: each dyno's limiter and its level over time.
            + if scenario.app_limit.is_some() { Limits::BYTES_PER_LIMITER } else { 0.0 }
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
    // A shard is one fleet's share: fleets that call one another are never split.
    if scenario.has_calls() {
        return Err(Error::config(
            "run.shards",
            "fleets that call one another run whole, not in shards",
        ));
    }
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
    let recorder = TraceRecorder::new(scenario, interval, until, per_dyno)?;
    simulate(scenario, replication, Some(recorder), interrupted)
        .map(|(result, trace)| (result, trace.expect("a recorder was given")))
}

fn simulate(
    s: &Scenario,
    replication: u64,
    trace: Option<TraceRecorder>,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<(ReplicationResult, Option<Trace>)> {
    if s.has_calls() {
        // Fleets that call one another run together (see `federation.rs`).
        return Simulation::federate(s, replication, trace, interrupted);
    }
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
    // One loop per family, chosen here once for the run (see `features.rs`).
    match (features::feedback(s), features::extras(s)) {
        (true, true) => {
            Simulation::<true, true, false>::build(s, replication, trace)?.run(interrupted)
        }
        (true, false) => {
            Simulation::<true, false, false>::build(s, replication, trace)?.run(interrupted)
        }
        (false, true) => {
            Simulation::<false, true, false>::build(s, replication, trace)?.run(interrupted)
        }
        (false, false) if features::plain(s) => {
            Simulation::<false, false, true>::build(s, replication, trace)?.run(interrupted)
        }
        (false, false) => {
            Simulation::<false, false, false>::build(s, replication, trace)?.run(interrupted)
        }
    }
}

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// Runs the events until none is left, or until `interrupted` says to stop; returns what
    /// was measured, when the window closed, and the trace.
    fn run(
        mut self,
        interrupted: &(dyn Fn() -> bool + Sync),
    ) -> Result<(Measures, f64, Option<Trace>)> {
        let window_end = self.measures.window_end();
        let mut steps = 0u64;
        // A run that stops at its stability verdict (the metastability map's) looks at it
        // once an interval of simulated time; infinite otherwise.
        let mut verdict_check = self.measures.verdict_check();
        while let Some((time, event)) = self.events.pop() {
            match self.step(time, event, window_end, &mut verdict_check)? {
                Step::Done => {}
                // Past the window: not sent, and not a step.
                Step::Skipped => continue,
                Step::Settled => break,
            }
            steps += 1;
            if steps % INTERRUPT_CHECK_EVERY == 0 && interrupted() {
                return Err(Error::Interrupted);
            }
        }
        Ok(self.close(window_end))
    }

    /// One event of the run: `event`, popped at `time` (see [`Self::run`]); `verdict_check`:
    /// when the run next asks for its stability verdict. Inlined into the run's loop, which
    /// compiles as it did before the step was a function of its own; the federation of
    /// fleets (`federation.rs`) steps each of its fleets through it too.
    #[inline(always)]
    fn step(
        &mut self,
        time: f64,
        event: Event,
        window_end: f64,
        verdict_check: &mut f64,
    ) -> Result<Step> {
        if FEEDBACK && time >= *verdict_check {
            match self.measures.verdict_pending(time) {
                Some(next) => *verdict_check = next,
                // Settled: nothing after this changes it.
                None => return Ok(Step::Settled),
            }
        }
        if self.look_ahead {
            if let Some((next, req)) = self.events.peek() {
                self.touch(next, req);
            }
        }
        if self.trace.is_some() {
            self.snapshot_until(time);
        }
        match event {
            Event::Arrival if time < window_end => {
                self.now = time;
                self.open_arrival(time);
                self.check_overload()?;
            }
            Event::Send { client } if time < window_end && self.clients.to_send != Some(0) => {
                self.now = time;
                if let Some(left) = self.clients.to_send.as_mut() {
                    *left -= 1;
                }
                self.arrive(client);
            }
            // Past the window (or the closed loop's last request): not sent.
            Event::Arrival | Event::Send { .. } => return Ok(Step::Skipped),
            Event::Done { req } => {
                self.now = time;
                self.timed_done(req);
            }
            Event::Cpu { dyno } => {
                self.now = time;
                self.cpu_done(dyno as usize);
            }
            Event::Shared { resource } => {
                self.now = time;
                self.shared_done(resource as usize);
            }
            Event::Life { dyno } => {
                self.now = time;
                self.life_event(dyno as usize);
            }
            Event::Autoscale => {
                self.now = time;
                self.autoscale();
            }
            Event::Deploy => {
                self.now = time;
                self.deploy();
            }
            Event::View => self.view_due(time),
            Event::Report => {
                self.now = time;
                self.reports_due();
            }
            Event::Retries => {
                self.now = time;
                self.retries_due();
            }
            Event::Fault => {
                self.now = time;
                self.fault_due();
            }
            Event::Timers => {
                let before = self.now;
                self.now = time;
                if !self.timers_due() {
                    // A deadline that found its request already answered (its timer still
                    // set) is no part of the run's work: the run's end stays at the last
                    // event that did something. It made a 1 s `ab -n` run of
                    // `unicorn-2011` last 30 s, the router's timeout (issue #23).
                    self.now = before;
                }
            }
        }
        Ok(Step::Done)
    }

    /// The open workload's next arrival, at `time`.
    #[inline]
    fn open_arrival(&mut self, time: f64) {
        self.traffic.carry();
        self.arrive(NONE);
        if let Some(t) = self.traffic.next_arrival(time) {
            self.events.schedule(t, ARRIVAL, Event::Arrival);
        }
        if self.look_ahead {
            self.touch_next_arrival();
        }
    }

    /// The run is over: the trace's last frames, and the levels held to the window's end.
    fn close(mut self, window_end: f64) -> (Measures, f64, Option<Trace>) {
        if self.trace.is_some() {
            self.snapshot_until(f64::INFINITY);
        }
        // A timed run's window closes at its end, whenever its last event ran (the levels hold
        // their values to it); a closed loop measured whole ends with its last work.
        let end = if window_end.is_finite() {
            self.now.max(window_end)
        } else {
            self.now
        };
        if self.measures.detailed() {
            let (now, busy, memory, over) = (
                end,
                f64::from(self.procs.busy),
                self.memory.fleet,
                f64::from(self.memory.over_quota),
            );
            self.measures.fleet_levels(now, busy, memory, over);
            for (r, state) in self.resources.iter().enumerate() {
                self.measures.resource_busy(r, now, state.busy_servers());
            }
        }
        let trace = self.trace.take().map(TraceRecorder::into_trace);
        (self.measures, end, trace)
    }
}

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// A request that arrived at `arrival` was answered now (by its app or with an error), as
    /// the router logs it: for the autoscaler's response-time rules and the trace's p95.
    #[inline]
    fn answered(&mut self, arrival: f64) {
        let seconds = self.now - arrival;
        if Self::LIFECYCLE {
            if let Some(scaling) = self.scaling.as_deref_mut() {
                scaling.response_time(self.now, seconds);
            }
        }
        if let Some(trace) = self.trace.as_mut() {
            trace.responded(seconds);
        }
    }

    /// A closed-loop client got its response: it thinks, then sends again.
    pub(super) fn respond(&mut self, client: u32) {
        self.respond_after(client, 0.0, true);
    }

    /// [`Self::respond`], or its error for good (`ok` false), waiting at least `at_least`
    /// before sending again. A service's caller (see `outbox.rs`) has its answer.
    pub(super) fn respond_after(&mut self, client: u32, at_least: f64, ok: bool) {
        if client == NONE {
            return;
        }
        if self.outbox.serves {
            return self.answer_caller(client, ok);
        }
        if let Some(think) = self.clients.think(self.s, at_least) {
            self.events
                .schedule(self.now + think, ARRIVAL, Event::Send { client });
        }
    }

    /// A service's request that carries `index` (its caller's, see `outbox.rs`) is answered
    /// now: out of line, so that a fleet that takes no calls keeps its response's code as
    /// it was.
    #[cold]
    #[inline(never)]
    fn answer_caller(&mut self, index: u32, ok: bool) {
        self.outbox.answer(index, ok, self.now);
    }

    /// Asks for what the next event will first need (its dyno's CPU, or its request), so
    /// that the cache misses of a large fleet overlap with the work on the current event
    /// rather than following it. Only the first level: a load that depends on another (the
    /// request's dyno) would stall, and did (measured slower).
    #[inline]
    fn touch(&self, event: Event, soonest: u32) {
        match event {
            Event::Cpu { dyno } => {
                self.cpu.prefetch(dyno as usize);
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
            self.cpu.prefetch(dyno);
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
        while let Some(at) = trace.due(time) {
            let (mut busy, mut dyno_waiting) = (0u64, 0u64);
            for d in &self.dynos {
                busy += u64::from(d.busy);
                dyno_waiting += u64::from(d.waiting);
            }
            let response_p95 = trace.take_p95();
            trace.push(Frame {
                time: at,
                depth: if trace.per_dyno {
                    self.dynos.iter().map(|d| d.busy + d.waiting).collect()
                } else {
                    Vec::new()
                },
                router_waiting: self.routers.held() + self.routers.in_hand.iter().sum::<u64>(),
                dyno_waiting,
                busy,
                arrived: self.measures.arrivals(),
                tries: self.measures.tries(),
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
        }
    }
}
