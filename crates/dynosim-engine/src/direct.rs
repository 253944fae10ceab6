//! The direct engine: a replication simulated request by request, in arrival order, with no
//! event queue.
//!
//! A dyno serves its requests first come, first served on `k` slots, so a request's start is
//! known the moment it arrives: it takes the slot that frees first, at the later of its arrival
//! and that slot's free time (the Kiefer–Wolfowitz recursion; for one slot, Lindley's). When
//! the routing decision needs no knowledge that only completions in time order would give
//! (see [`Knowledge`]), the whole replication follows from the arrivals alone: each request is
//! routed, started and completed in one step, and a dyno's load at time t is worked out on
//! demand from its slots' free times and the start times of the requests still waiting there.
//! The `intelligent` router with single-slot dynos is one FIFO queue in front of all of them
//! (M/G/c), the same recursion over every slot, kept in a tournament tree.
//!
//! It produces the same figures as the event-driven engine ([`crate::sim`]): the same random
//! draws in the same order, the same floating-point operations on each request's times. Only
//! sums of many times (means) may differ in their last bits, being added in another order. The
//! tests in `tests/engines.rs` run both engines on the same scenarios and compare.

use crate::alloc::{filled, StateBytes};
use crate::app::AppServer;
use crate::arrivals::ArrivalProcess;
use crate::error::{Error, Result};
use crate::fifo_dynos::{settle, DirectDynos, Placed, Queued, RECENT};
use crate::measure::Measures;
use crate::policy::{Knowledge, Route, RouterView};
use crate::result::ErrorKind;
use crate::result::ReplicationResult;
use crate::rng::{stream, SimRng, Stream};
use crate::scenario::Scenario;
use crate::scenario::{Engine, Workload};
use crate::timeout_spec::Timeout;
use crate::up_set::UpSet;
use rand::Rng;
use std::collections::VecDeque;

/// Arrivals (and their service times) drawn at a time.
const BLOCK: usize = 256;

/// Whether the direct engine can run this scenario (see [`Eligible::of`]).
pub fn can_run(scenario: &Scenario) -> bool {
    Eligible::of(scenario).is_ok()
}

/// The parts of a scenario the direct engine runs: built only by [`Eligible::of`], which
/// destructures the whole [`Scenario`] (and its app server) without `..`, so that a field
/// added to either fails to compile here until someone decides whether this engine can honour
/// it. Requests that hold a slot for one drawn time, first come first served on each dyno:
/// no phases, resources, closed loop, memory or restarts.
pub struct Eligible<'s> {
    pub arrivals: &'s dyn ArrivalProcess,
    pub timeouts: Timeouts<'s>,
}

/// The timeouts a direct run honours. Under a policy that routes knowing nothing of the
/// dynos (random, round robin), a request's timeout changes nothing for the others: the dyno
/// works on (it is not told), and the router's counts are not looked at. So each request's
/// answer is worked out alone: an error at its first deadline before its response. Under a
/// policy that looks at counts, or that holds requests at the router, a timeout that fires
/// changes what the router does next: a run in which one fires is not direct (see
/// [`try_run_replication`]); the runs in which none does are the same on both engines.
pub struct Timeouts<'s> {
    pub router: Option<&'s Timeout>,
    pub queue: Option<&'s Timeout>,
    pub client: Option<&'s Timeout>,
    /// Whether a timeout that fires is simulated here (a policy that knows nothing).
    pub exact: bool,
}

impl<'s> Eligible<'s> {
    /// The scenario's parts for this engine, or why it cannot run it.
    pub fn of(s: &'s Scenario) -> std::result::Result<Eligible<'s>, &'static str> {
        let Scenario {
            name: _,
            workload,
            service: _,
            request,
            dyno_type: _,
            app,
            resources,
            dynos: _,
            slots,
            policy_name: _,
            policy,
            routers,
            keys,
            connect,
            // Work on the dyno's cores, which only requests with phases have (refused here).
            colocated_cpu: _,
            // Boots follow restarts, which this engine has none of (no memory model).
            boot_time: _,
            // Dynos stop only when an autoscaler removes them.
            lifecycle,
            // The CPU model is for requests with phases, which this engine has none of.
            cpu: _,
            autoscale,
            router_timeout,
            queue_timeout,
            client_timeout,
            max_in_flight,
            router_cost,
            shed_latency: _,
            retries: _,
            retry_delay: _,
            router_retry,
            view,
            aperture,
            duration: _,
            warmup: _,
            replications: _,
            seed: _,
            max_waiting: _,
            allow_overload: _,
            max_memory: _,
            engine: _,
            // A retry is a request sent again, whose answer depends on the first's.
            client_retry,
            // A breaker fails tries at once after others failed.
            client_breaker,
            // A limit answers at once, depending on the requests in flight.
            router_limit,
            app_limit,
            faults,
            // Read off the measures a run of faults keeps (never direct).
            stability: _,
            // Each shard is a scenario of its own, run on this engine when it can be.
            shard_count: _,
            threads: _,
            shards: _,
            // Other fleets, run together by the event-driven engine (its federation).
            calls,
            services,
            call_hold: _,
        } = s;
        let AppServer {
            server: _,
            model: _,
            processes,
            per_process: _,
            os_threads: _,
            lock: _,
            switch_interval: _,
            timeslice: _,
            accept,
            timeout: worker_timeout,
            worker_boot_time: _,
            wait_timeout,
            service_timeout,
            backlog,
            overhead,
            memory,
        } = app;
        let Workload::Open(arrivals) = workload else {
            return Err("a closed loop answers each client before it sends again");
        };
        if !calls.is_empty() || !services.is_empty() {
            return Err("requests call other services (their fleets run together)");
        }
        if request.is_some() {
            return Err("requests with phases share CPU and resources");
        }
        if client_retry.is_some() {
            return Err("clients retry (arrivals.retry): a request may be sent again");
        }
        if router_retry.beyond_refused() {
            return Err("the router retries after a timeout or an error (router.retry_on)");
        }
        if router_limit.is_some() || app_limit.is_some() {
            return Err(
                "a concurrency limit rejects requests while others are in flight \
                        (router.concurrency_limit, app.concurrency_limit)",
            );
        }
        if client_breaker.is_some() {
            return Err("the clients' circuit breaker fails tries at once (arrivals.breaker)");
        }
        if !faults.is_empty() {
            return Err("faults change the fleet during the run");
        }
        if wait_timeout.is_some() {
            return Err(
                "the app drops requests too old when a thread takes them (app.wait_timeout)",
            );
        }
        if service_timeout.is_some() {
            return Err("the app stops requests that run too long on their threads \
                 (app.service_timeout)");
        }
        if keys.is_some() {
            return Err(
                "requests that carry keys (arrivals.keys), which this engine does not draw",
            );
        }
        if autoscale.is_some() {
            return Err("an autoscaler changes the fleet's size during the run");
        }
        if !lifecycle.deploys.is_empty() || lifecycle.cycling.is_some() {
            return Err("deploys and daily restarts replace dynos during the run");
        }
        if !resources.is_empty() {
            return Err("shared resources");
        }
        if connect.is_some() {
            return Err(
                "a connect time, during which the router counts the request against its dyno",
            );
        }
        if backlog.is_some() {
            return Err("a listen backlog, whose refusals the router retries elsewhere");
        }
        if worker_timeout.is_some() {
            return Err("a worker timeout, which kills and restarts workers");
        }
        if overhead.is_some() {
            return Err("a per-request overhead, which holds the thread after the response");
        }
        if memory.is_modelled() {
            return Err("memory, which may restart dynos");
        }
        if *accept != crate::app::Accept::Shared {
            return Err("processes that accept greedily, each with a queue of its own");
        }
        if *processes != 1 {
            // Several processes of one slot each are the same FIFO slots; the engine keeps
            // them as one process of `slots` threads (see AppServer::slots).
            return Err("a dyno of several processes");
        }
        let policy_ok = match policy.knowledge() {
            Knowledge::Nothing => true,
            Knowledge::Some => *routers == 1,
            Knowledge::FreeSlots => *routers == 1 && *slots == 1,
            Knowledge::Ranking(_) | Knowledge::Responses | Knowledge::IdleReports => false,
        };
        if !policy_ok {
            return Err("a policy that needs completions in time order, or several routers");
        }
        if !view.is_exact() && policy.knowledge() != Knowledge::Nothing {
            return Err("late load information, a board refreshed by events of its own");
        }
        if router_cost.is_some() {
            return Err("routers with a cost per request, a queue of their own in front");
        }
        if aperture.is_some() {
            return Err("routers with an aperture, each its own subset of the dynos");
        }
        if max_in_flight.is_some() {
            return Err("a cap on the requests in flight, which needs completions in time order");
        }
        Ok(Eligible {
            arrivals: arrivals.as_ref(),
            timeouts: Timeouts {
                router: router_timeout.as_ref(),
                queue: queue_timeout.as_ref(),
                client: client_timeout.as_ref(),
                exact: policy.knowledge() == Knowledge::Nothing,
            },
        })
    }
}

/// Runs replication `replication` of a scenario that [`can_run`] accepts.
pub fn run_replication(
    scenario: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<ReplicationResult> {
    try_run_replication(scenario, replication, interrupted)?
        .ok_or_else(|| timeout_fired(scenario, replication))
}

/// Why `run.engine = "direct"` could not run a replication that [`try_run_replication`] gave
/// up on.
pub(crate) fn timeout_fired(scenario: &Scenario, replication: u64) -> Error {
    Error::config(
        "run.engine",
        format!(
            "the direct engine cannot run replication {replication}: a timeout fired, and \
             policy {:?} routes on what it changes; use \"events\" or \"auto\"",
            scenario.policy_name
        ),
    )
}

/// [`run_replication`], or None when a timeout fires under a policy for which that changes
/// the routing (see [`Timeouts`]): the event-driven engine must run it.
pub fn try_run_replication(
    scenario: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Option<ReplicationResult>> {
    Ok(
        try_measure_replication(scenario, replication, interrupted)?.map(|(measures, end)| {
            let mut result = measures.finish(scenario, end);
            result.engine = Engine::Direct.name();
            result
        }),
    )
}

/// [`try_run_replication`] up to the figures: what it measured and when its window closed
/// (for a shard, see [`crate::shard`]).
pub(crate) fn try_measure_replication(
    scenario: &Scenario,
    replication: u64,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<Option<(Measures, f64)>> {
    let eligible = Eligible::of(scenario).map_err(|why| {
        Error::config(
            "run.engine",
            format!(
                "the direct engine cannot run this scenario: {why}; use \"events\" or \"auto\""
            ),
        )
    })?;
    scenario.check_stable()?;
    let timeouts = eligible.timeouts;
    let streams = |purpose| stream(scenario.seed, replication, purpose);
    let arrivals = eligible.arrivals.fresh(scenario.seed, replication);
    let mut answers = Answers::new(&timeouts, &streams, false);
    let mut measures = Measures::new(scenario)?;
    if scenario.policy.knowledge() == Knowledge::FreeSlots {
        // The router holds requests until a dyno is free, and hands each over as it starts.
        answers.dispatch_at_start = true;
        let mut queue = CentralQueue::new(scenario.dynos as usize)?;
        drive(
            scenario,
            &mut measures,
            &mut answers,
            interrupted,
            arrivals,
            streams,
            |now, service, _| Ok(queue.place(scenario, now, service)),
        )?;
    } else {
        let routers = scenario.routers as usize;
        let mut policies: Vec<_> = (0..routers).map(|_| scenario.policy.box_clone()).collect();
        let look_ups = scenario.policy.knowledge() != Knowledge::Nothing;
        let mut dynos =
            DirectDynos::new(scenario.dynos as usize, scenario.slots as usize, look_ups)?;
        // Every dyno up, for good: the direct engine runs fixed fleets only.
        let up = UpSet::all(dynos.len())?;
        if routers == 1 && scenario.policy.knowledge() == Knowledge::Nothing {
            // The routes do not depend on the dynos: draw them a block at a time. The routing
            // stream serves nothing else, so the routes are the same as one by one.
            let policy = &mut policies[0];
            let view = RouterView::blind(scenario.slots, &up);
            let mut routes = [0; BLOCK];
            let mut next = BLOCK;
            drive(
                scenario,
                &mut measures,
                &mut answers,
                interrupted,
                arrivals,
                streams,
                |now, service, rng| {
                    if next == BLOCK {
                        if !policy.route_blind(&view, rng, &mut routes) {
                            return Err(held(scenario));
                        }
                        next = 0;
                    }
                    next += 1;
                    Ok(dynos.place(scenario.max_waiting, routes[next - 1], now, service))
                },
            )?;
        } else {
            drive(
                scenario,
                &mut measures,
                &mut answers,
                interrupted,
                arrivals,
                streams,
                |now, service, rng| {
                    let router = if routers > 1 {
                        rng.random_range(0..routers)
                    } else {
                        0
                    };
                    let view = RouterView::direct(scenario.slots, &up, &dynos, now);
                    match policies[router].route(&view, rng) {
                        Route::To(dyno) => {
                            Ok(dynos.place(scenario.max_waiting, dyno, now, service))
                        }
                        Route::Hold => Err(held(scenario)),
                    }
                },
            )?;
        }
    }
    if answers.needs_events {
        return Ok(None);
    }
    Ok(Some((measures, scenario.warmup + scenario.duration)))
}

/// Each request's answer under the scenario's timeouts (see [`Timeouts`]): its deadlines,
/// drawn from the streams and in the order the event-driven engine draws them.
struct Answers<'s> {
    timeouts: &'s Timeouts<'s>,
    router_rng: SimRng,
    queue_rng: SimRng,
    client_rng: SimRng,
    /// Whether the router hands a request to its dyno when it starts (it held it until
    /// then), rather than when it arrives.
    dispatch_at_start: bool,
    /// A timeout fired that this engine does not simulate.
    needs_events: bool,
}

/// How a request was answered.
enum Answer {
    /// By its app.
    Ok,
    /// With an error, at this time.
    Error(ErrorKind, f64),
}

impl<'s> Answers<'s> {
    fn new(
        timeouts: &'s Timeouts<'s>,
        streams: &impl Fn(Stream) -> SimRng,
        dispatch_at_start: bool,
    ) -> Self {
        Answers {
            timeouts,
            router_rng: streams(Stream::RouterTimeout),
            queue_rng: streams(Stream::QueueTimeout),
            client_rng: streams(Stream::ClientTimeout),
            dispatch_at_start,
            needs_events: false,
        }
    }

    /// Whether any timeout is set.
    #[inline]
    fn any(&self) -> bool {
        let t = self.timeouts;
        t.router.is_some() || t.queue.is_some() || t.client.is_some()
    }

    /// The answer to a request that arrived at `arrival`, was held at the router or not,
    /// took its thread at `start` and ends at `end`. At equal times a response comes before
    /// a deadline, and the router's deadline before the client's.
    #[inline]
    fn answer(&mut self, arrival: f64, held: bool, start: f64, end: f64) -> Answer {
        let t = self.timeouts;
        let queue = t.queue.map(|q| arrival + q.draw(&mut self.queue_rng));
        let client = t.client.map(|c| arrival + c.draw(&mut self.client_rng));
        let dispatch = if self.dispatch_at_start {
            start
        } else {
            arrival
        };
        let router = t.router.map(|r| dispatch + r.draw(&mut self.router_rng));
        if held {
            // Dropped from the router's queue: the others move up. (Only a policy that
            // holds, which is not exact, holds.)
            let dropped = |d: Option<f64>| d.is_some_and(|d| d < start);
            if dropped(queue) || dropped(client) {
                self.needs_events = true;
                return Answer::Ok;
            }
        }
        let fired = |d: Option<f64>| d.filter(|&d| d < end);
        let error = match (fired(router), fired(client)) {
            (None, None) => return Answer::Ok,
            (Some(r), Some(c)) if c < r => Answer::Error(ErrorKind::ClientTimeout, c),
            (Some(r), _) => Answer::Error(ErrorKind::H12, r),
            (None, Some(c)) => Answer::Error(ErrorKind::ClientTimeout, c),
        };
        if !t.exact {
            self.needs_events = true;
        }
        error
    }
}

/// What a replication's state costs on this engine (see [`crate::state_size`]), from the sizes of
/// the structures below.
pub(crate) fn state_bytes(scenario: &Scenario) -> StateBytes {
    let f64_bytes = size_of::<f64>() as f64;
    // A queue's buffer doubles as it grows: up to twice the entries it holds.
    let per_waiting = 2.0 * f64_bytes;
    if scenario.policy.knowledge() == Knowledge::FreeSlots {
        // The tournament: up to 2 × (next power of two >= dynos) < 4 × dynos keys.
        return StateBytes {
            per_dyno: Measures::BYTES_PER_DYNO + 4.0 * size_of::<u128>() as f64,
            per_slot: 0.0,
            per_router_dyno: 0.0,
            per_waiting,
        };
    }
    let recent = if scenario.slots == 1 && scenario.policy.knowledge() != Knowledge::Nothing {
        (size_of::<[f64; RECENT]>() + size_of::<u8>()) as f64
    } else {
        0.0
    };
    StateBytes {
        per_dyno: Measures::BYTES_PER_DYNO + size_of::<VecDeque<f64>>() as f64 + recent,
        per_slot: f64_bytes,
        per_router_dyno: 0.0,
        per_waiting,
    }
}

/// A policy that the direct engine runs held a request, which its [`Knowledge`] rules out.
#[cold]
fn held(scenario: &Scenario) -> Error {
    Error::config(
        "router.policy",
        format!(
            "policy {:?} held a request without declaring Knowledge::FreeSlots or \
             Knowledge::Ranking",
            scenario.policy_name
        ),
    )
}

/// Feeds the arrivals, with their service times, to `place` in time order until the window
/// ends, and measures each placed request. Arrival and service times are drawn in blocks (see
/// `sample_into`); the routing stream goes to `place`.
///
/// Inlined into each caller, as it was before the timeouts: as a function of its own it
/// kept the closure's captured state (the block of routes and its cursor) in memory, loaded
/// and stored for every request, where inlined they live in registers (callgrind on the seed
/// scenario: 10 instructions a request, 5% of its wall time; issue #23).
#[inline(always)]
fn drive(
    scenario: &Scenario,
    measures: &mut Measures,
    answers: &mut Answers,
    interrupted: &(dyn Fn() -> bool + Sync),
    mut arrivals: Box<dyn ArrivalProcess>,
    streams: impl Fn(Stream) -> SimRng,
    mut place: impl FnMut(f64, f64, &mut SimRng) -> Result<Placed>,
) -> Result<()> {
    let mut arrival_rng = streams(Stream::Arrivals);
    let mut service_rng = streams(Stream::Service);
    let mut routing_rng = streams(Stream::Routing);
    let end = measures.window_end();
    // Decided once, not per request: most runs have no timeout (the seed study's has none),
    // and a test per request of three options behind a reference cost the seed scenario
    // about 2% (issue #23).
    let timed = answers.any();
    let mut times = [0.0; BLOCK];
    let mut services = [0.0; BLOCK];
    let mut last = 0.0;
    loop {
        let drawn = arrivals.next_arrivals(last, &mut arrival_rng, &mut times);
        if !arrivals.carried_services(&mut services[..drawn]) {
            scenario
                .service
                .sample_into(&mut service_rng, &mut services[..drawn]);
        }
        for (&now, &service) in times[..drawn].iter().zip(&services[..drawn]) {
            if now >= end {
                return Ok(());
            }
            measures.arrived(now, service);
            let placed = place(now, service, &mut routing_rng)?;
            if !timed {
                measures.served(placed.dyno, now, placed.start, service);
            } else {
                let held = matches!(placed.queued, Queued::AtRouter(_));
                let end = placed.start + service;
                match answers.answer(now, held, placed.start, end) {
                    _ if answers.needs_events => return Ok(()),
                    Answer::Ok => measures.served(placed.dyno, now, placed.start, service),
                    Answer::Error(kind, at) => {
                        // The dyno serves it all the same; the client has its error at `at`.
                        measures.started(placed.dyno, now, placed.start, service);
                        measures.errored(kind, now, at);
                        measures.wasted_thread(now, end - at.max(placed.start));
                    }
                }
            }
            match placed.queued {
                Queued::No => continue,
                Queued::AtDyno(depth) => measures.dyno_queue(placed.dyno, now, depth),
                Queued::AtRouter(depth) => measures.router_queue(now, depth),
            }
            if placed.waiting_total > scenario.max_waiting {
                return Err(Error::Overloaded {
                    queued: placed.waiting_total,
                    at_time: now,
                });
            }
        }
        if drawn < BLOCK {
            return Ok(());
        }
        last = times[BLOCK - 1];
        if interrupted() {
            return Err(Error::Interrupted);
        }
    }
}

/// One router's FIFO queue in front of single-slot dynos: a request goes to the dyno that has
/// been idle longest or, when none is idle, waits for the first to finish.
struct CentralQueue {
    /// When each dyno finishes its last request, earliest first.
    free_at: Tournament,
    /// Start times of the requests that had to wait, in order, that may not have started yet.
    waiting: VecDeque<f64>,
}

impl CentralQueue {
    fn new(dynos: usize) -> Result<Self> {
        Ok(CentralQueue {
            free_at: Tournament::new(dynos)?,
            waiting: VecDeque::new(),
        })
    }

    #[inline]
    fn place(&mut self, scenario: &Scenario, now: f64, service: f64) -> Placed {
        let (dyno, free) = self.free_at.first();
        let start = if free > now { free } else { now };
        self.free_at.set(dyno, start + service);
        if start <= now {
            return Placed::at_once(dyno, start);
        }
        let depth = settle(&mut self.waiting, now) + 1;
        self.waiting.push_back(start);
        Placed {
            dyno,
            start,
            queued: Queued::AtRouter(depth),
            waiting_total: if depth > scenario.max_waiting {
                depth
            } else {
                0
            },
        }
    }
}

/// The dyno that frees first, kept as a tournament: a complete binary tree over the dynos'
/// free times in which each node holds the earlier of its two children. Changing one dyno's
/// time replays the matches on its path to the root, a fixed number of steps whose outcomes
/// are selected, not branched on, where a binary heap's sift-down branches on data (in a
/// profile, about one mispredicted branch per request).
#[derive(Debug)]
struct Tournament {
    /// `tree[1]` is the root; leaf `d` is `tree[leaves + d]`; leaves past the last dyno hold
    /// `u128::MAX` and never win.
    tree: Vec<u128>,
    leaves: usize,
}

impl Tournament {
    fn new(dynos: usize) -> Result<Self> {
        let leaves = dynos.max(1).next_power_of_two();
        let mut tree = filled(2 * leaves, u128::MAX)?;
        for d in 0..dynos {
            tree[leaves + d] = Self::key(0.0, d);
        }
        for node in (1..leaves).rev() {
            tree[node] = tree[2 * node].min(tree[2 * node + 1]);
        }
        Ok(Tournament { tree, leaves })
    }

    /// A time >= 0 (whose bit pattern orders as the time does) above a dyno number: at equal
    /// times the lower-numbered dyno comes first, as in the event-driven engine, where dynos
    /// start idle in that order.
    #[inline]
    fn key(time: f64, dyno: usize) -> u128 {
        (u128::from(time.to_bits()) << 64) | dyno as u128
    }

    /// The dyno that frees first, and when.
    #[inline]
    fn first(&self) -> (usize, f64) {
        let key = self.tree[1];
        (key as u64 as usize, f64::from_bits((key >> 64) as u64))
    }

    /// Dyno `dyno` now frees at `time`.
    #[inline]
    fn set(&mut self, dyno: usize, time: f64) {
        let mut node = self.leaves + dyno;
        self.tree[node] = Self::key(time, dyno);
        while node > 1 {
            let pair = node & !1;
            node /= 2;
            self.tree[node] = self.tree[pair].min(self.tree[pair + 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tournament;

    #[test]
    fn the_tournament_names_the_dyno_that_frees_first() {
        // Against a plain scan, through many updates, with ties and a dyno count that is
        // not a power of two.
        let n = 5;
        let mut t = Tournament::new(n).unwrap();
        let mut times = vec![0.0; n];
        assert_eq!(t.first(), (0, 0.0));
        let mut x = 0.37_f64;
        for step in 0..500 {
            let (dyno, time) = t.first();
            let expect = (0..n)
                .min_by(|&a, &b| times[a].partial_cmp(&times[b]).unwrap().then(a.cmp(&b)))
                .unwrap();
            assert_eq!((dyno, time), (expect, times[expect]), "step {step}");
            x = (x * 3.7 + 0.11).fract();
            // Every fourth update lands on an existing time: a tie.
            let next = if step % 4 == 0 {
                times[(dyno + 1) % n]
            } else {
                time + x
            };
            times[dyno] = next;
            t.set(dyno, next);
        }
    }
}
