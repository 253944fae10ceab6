//! Fleets that call one another (`[services.NAME]`, docs/services.md): a federation of
//! simulations, one per fleet, run in one global time order.
//!
//! The entry fleet (the top level) and each service are each a [`Simulation`] of their own,
//! built from their own scenario, with random streams of their own (a service's from
//! [`crate::rng::service_seed`]; the entry's are the run's, as without services). A service
//! has no arrivals of its own: its callers' calls are its requests. The federation steps the
//! fleet whose next event is the earliest (at equal times the entry first, then the services in
//! name order), through the same [`Simulation::step`] as a fleet run alone; the calls' own
//! timeouts come after the fleets' events of the same instant (an answer at the timeout is in
//! time).
//!
//! A `call` phase (`{ call = "NAME", timeout = T, retries = k }`): when a request reaches it
//! on its thread, the thread waits, holding its slot (and its pool connection, if any; not its
//! process's lock, which only CPU work takes). The call arrives at the callee's fleet at that
//! instant, before the callee's own events of the instant, as a request of the callee's
//! (routed, queued and served as any), carrying its caller. When the callee answers it, the
//! caller has the answer at that instant: a response ends the phase, and the request goes on
//! to its next; an error (the callee's own: its router's timeout, a full backlog...) is tried
//! again if the call has retries left, or fails the request: its app answers 500
//! (`errors.call_failed`). With `timeout`, the caller stops waiting after T: tried again, or
//! failed, as an error; the callee works on for nobody, and its late answer is counted
//! (`services.NAME.calls.late`). A request of the caller answered meanwhile with an error (its
//! router's timeout) goes on waiting on its thread, as a request whose client has gone does.
//!
//! Not simulated yet: fan-out (refused, [`crate::Scenario::check_simulated`]), the stability
//! verdict of a fleet with faults (each fleet runs to its end), and a trace of the services
//! (the entry fleet's is recorded).

use super::outbox::{Caller, Made};
use super::slab::State;
use super::trace::TraceRecorder;
use super::{Simulation, Step, INTERRUPT_CHECK_EVERY};
use crate::calls::Call;
use crate::error::{Error, Result};
use crate::result::{CallFigures, ErrorKind, ReplicationResult, ServiceFigures, Trace};
use crate::scenario::Scenario;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// One fleet of the federation: its simulation, and what its call sites call.
struct Tier<'s> {
    sim: Simulation<'s, true, true>,
    window_end: f64,
    /// Per call site of its scenario: the callee's tier, its `timeout` and `retries`.
    sites: Vec<Site>,
}

#[derive(Debug, Clone, Copy)]
struct Site {
    callee: usize,
    timeout: Option<f64>,
    retries: u32,
}

/// A call waiting for its answer: the caller's request's generation, its site, its try (from
/// 0) and the tries it has left.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    generation: u32,
    site: u32,
    try_no: u32,
    left: u32,
}

/// A call's timeout, due at `at`: the caller's tier and request, and which try it stops.
#[derive(Debug, Clone, Copy)]
struct Due {
    at: f64,
    /// The order they were set in, for ties.
    seq: u64,
    tier: u32,
    req: u32,
    generation: u32,
    try_no: u32,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    /// Reversed: the earliest first out of a max-heap.
    fn cmp(&self, other: &Self) -> Ordering {
        other.at.total_cmp(&self.at).then(other.seq.cmp(&self.seq))
    }
}

struct Federation<'s> {
    tiers: Vec<Tier<'s>>,
    /// The calls waiting for an answer, by their caller's (tier, request).
    waiting: HashMap<(u32, u32), Waiting>,
    timeouts: BinaryHeap<Due>,
    seq: u64,
    /// Per tier (the entry's unused): what its callers' calls to it did.
    calls: Vec<CallFigures>,
}

impl Simulation<'_, true, true> {
    /// Runs replication `replication` of `s`, a scenario with services: the entry fleet's
    /// figures at the top, each service's under `services`. (An associated function, so that
    /// the run's entry points name `Simulation`, not this file.)
    pub(super) fn federate(
        s: &Scenario,
        replication: u64,
        trace: Option<TraceRecorder>,
        interrupted: &(dyn Fn() -> bool + Sync),
    ) -> Result<(ReplicationResult, Option<Trace>)> {
        federate(s, replication, trace, interrupted)
    }
}

fn federate(
    s: &Scenario,
    replication: u64,
    trace: Option<TraceRecorder>,
    interrupted: &(dyn Fn() -> bool + Sync),
) -> Result<(ReplicationResult, Option<Trace>)> {
    let scenarios: Vec<&Scenario> = std::iter::once(s)
        .chain(s.services.iter().map(|service| &service.scenario))
        .collect();
    let mut tiers = Vec::with_capacity(scenarios.len());
    let mut trace = trace;
    for (i, &scenario) in scenarios.iter().enumerate() {
        let mut sim = Simulation::<true, true>::build(
            scenario,
            replication,
            if i == 0 { trace.take() } else { None },
        )?;
        if i > 0 {
            sim.events.no_arrivals();
            sim.outbox.serves = true;
        }
        let sites = scenario
            .calls
            .iter()
            .map(|site| {
                let callee = s
                    .services
                    .iter()
                    .position(|service| service.name == site.call.service())
                    .expect("checked: every callee is a service")
                    + 1;
                match site.call {
                    Call::Sync {
                        timeout, retries, ..
                    } => Site {
                        callee,
                        timeout,
                        retries,
                    },
                    // Refused before the run (Scenario::check_simulated).
                    Call::Fanout { .. } => unreachable!("a fan-out is not simulated"),
                }
            })
            .collect();
        let window_end = sim.measures.window_end();
        tiers.push(Tier {
            sim,
            window_end,
            sites,
        });
    }
    let mut federation = Federation {
        calls: vec![CallFigures::default(); tiers.len()],
        tiers,
        waiting: HashMap::new(),
        timeouts: BinaryHeap::new(),
        seq: 0,
    };
    federation.run(interrupted)?;
    federation.finish(s)
}

impl Federation<'_> {
    /// Steps the fleets, and the calls' timeouts, in time order until nothing is left.
    fn run(&mut self, interrupted: &(dyn Fn() -> bool + Sync)) -> Result<()> {
        let mut steps = 0u64;
        // The fleets run to their ends: no stability verdict stops them (see the module's
        // comment).
        let mut verdict_check = f64::INFINITY;
        loop {
            let mut next: Option<(f64, usize)> = None;
            for (i, tier) in self.tiers.iter().enumerate() {
                if let Some(t) = tier.sim.events.next_time() {
                    if next.map_or(true, |(best, _)| t < best) {
                        next = Some((t, i));
                    }
                }
            }
            let due = self.timeouts.peek().map(|d| d.at);
            match (next, due) {
                (None, None) => break,
                // A timeout strictly first (an answer at its instant is in time).
                (Some((t, _)), Some(at)) if at < t => self.timeout_due()?,
                (None, Some(_)) => self.timeout_due()?,
                (Some((_, i)), _) => {
                    let tier = &mut self.tiers[i];
                    let (time, event) = tier.sim.events.pop().expect("an event is pending");
                    match tier
                        .sim
                        .step(time, event, tier.window_end, &mut verdict_check)?
                    {
                        Step::Done | Step::Settled => {}
                        Step::Skipped => continue,
                    }
                    // The step touched tier i alone.
                    if !self.tiers[i].sim.outbox.is_empty() {
                        self.settle()?;
                    }
                }
            }
            steps += 1;
            if steps % INTERRUPT_CHECK_EVERY == 0 && interrupted() {
                return Err(Error::Interrupted);
            }
        }
        Ok(())
    }

    /// Carries the calls made and the answers given, and those they lead to, until no fleet
    /// has any left.
    fn settle(&mut self) -> Result<()> {
        loop {
            let mut moved = false;
            for i in 0..self.tiers.len() {
                if self.tiers[i].sim.outbox.is_empty() {
                    continue;
                }
                moved = true;
                let made = std::mem::take(&mut self.tiers[i].sim.outbox.made);
                let now = self.tiers[i].sim.now;
                for call in made {
                    self.first_try(i, call, now)?;
                }
                let answers = std::mem::take(&mut self.tiers[i].sim.outbox.answers);
                for answer in answers {
                    self.answered(i, answer.caller, answer.ok, answer.at)?;
                }
            }
            if !moved {
                return Ok(());
            }
        }
    }

    /// A request of tier `tier` reached a call phase at `now`: its first try.
    fn first_try(&mut self, tier: usize, call: Made, now: f64) -> Result<()> {
        let site = self.tiers[tier].sites[call.site as usize];
        let waiting = Waiting {
            generation: call.generation,
            site: call.site,
            try_no: 0,
            left: site.retries,
        };
        self.waiting.insert((tier as u32, call.req), waiting);
        self.send(tier, call.req, waiting, now)
    }

    /// Sends try `waiting.try_no` of the call of request `req` of tier `tier` at `now`.
    fn send(&mut self, tier: usize, req: u32, waiting: Waiting, now: f64) -> Result<()> {
        let site = self.tiers[tier].sites[waiting.site as usize];
        self.calls[site.callee].sent += 1;
        let caller = Caller {
            tier: tier as u32,
            req,
            generation: waiting.generation,
            try_no: waiting.try_no,
        };
        if let Some(t) = site.timeout {
            self.seq += 1;
            self.timeouts.push(Due {
                at: now + t,
                seq: self.seq,
                tier: tier as u32,
                req,
                generation: waiting.generation,
                try_no: waiting.try_no,
            });
        }
        self.tiers[site.callee].sim.call_arrives(now, caller)
    }

    /// Tier `callee` answered `caller`'s call at `at`: the caller has it, unless it stopped
    /// waiting (a timeout) or its request is gone.
    fn answered(&mut self, callee: usize, caller: Caller, ok: bool, at: f64) -> Result<()> {
        let key = (caller.tier, caller.req);
        let current = self
            .waiting
            .get(&key)
            .is_some_and(|w| w.generation == caller.generation && w.try_no == caller.try_no);
        if !current {
            self.calls[callee].late += 1;
            return Ok(());
        }
        self.calls[callee].answered += 1;
        if ok {
            self.waiting.remove(&key);
            let tier = caller.tier as usize;
            self.tiers[tier].sim.call_answered(at, caller.req);
            return Ok(());
        }
        self.calls[callee].errors += 1;
        self.try_again_or_fail(key, at)
    }

    /// The earliest call timeout is due: the caller stops waiting for that try, if it still
    /// waits for it.
    fn timeout_due(&mut self) -> Result<()> {
        let due = self.timeouts.pop().expect("a timeout is pending");
        let key = (due.tier, due.req);
        let current = self
            .waiting
            .get(&key)
            .is_some_and(|w| w.generation == due.generation && w.try_no == due.try_no);
        if !current {
            return Ok(());
        }
        let w = self.waiting[&key];
        let callee = self.tiers[due.tier as usize].sites[w.site as usize].callee;
        self.calls[callee].timed_out += 1;
        self.try_again_or_fail(key, due.at)?;
        self.settle()
    }

    /// The call of `key` failed a try at `at` (an error, or its timeout): it is sent again if
    /// it has tries left and its request is still on its thread; else its request fails.
    fn try_again_or_fail(&mut self, key: (u32, u32), at: f64) -> Result<()> {
        let (tier, req) = (key.0 as usize, key.1);
        let w = self.waiting[&key];
        let on_thread = self.tiers[tier].sim.slab.entries[req as usize].state == State::Timed;
        if w.left > 0 && on_thread {
            let callee = self.tiers[tier].sites[w.site as usize].callee;
            self.calls[callee].retried += 1;
            let again = Waiting {
                try_no: w.try_no + 1,
                left: w.left - 1,
                ..w
            };
            self.waiting.insert(key, again);
            return self.send(tier, req, again, at);
        }
        self.waiting.remove(&key);
        let callee = self.tiers[tier].sites[w.site as usize].callee;
        self.calls[callee].failed += 1;
        self.tiers[tier].sim.call_failed(at, req);
        Ok(())
    }

    /// Each fleet's figures: the entry's at the top, the services' under `services`.
    fn finish(self, s: &Scenario) -> Result<(ReplicationResult, Option<Trace>)> {
        let mut results = Vec::with_capacity(self.tiers.len());
        let mut trace = None;
        for (i, tier) in self.tiers.into_iter().enumerate() {
            let scenario = tier.sim.s;
            let (measures, end, t) = tier.sim.close(tier.window_end);
            if i == 0 {
                trace = t;
            }
            let mut result = measures.finish(scenario, end);
            result.engine = crate::scenario::Engine::Events.name();
            results.push(result);
        }
        let mut results = results.into_iter();
        let mut entry = results.next().expect("the entry fleet");
        let services = s
            .services
            .iter()
            .zip(results)
            .zip(self.calls.into_iter().skip(1))
            .map(|((service, fleet), mut calls)| {
                calls.timed_out_fraction = if calls.sent > 0 {
                    calls.timed_out as f64 / calls.sent as f64
                } else {
                    0.0
                };
                (
                    service.name.clone(),
                    ServiceFigures {
                        fleet: Box::new(fleet),
                        calls,
                    },
                )
            })
            .collect::<BTreeMap<_, _>>();
        entry.services = Some(services);
        Ok((entry, trace))
    }
}

impl<const FEEDBACK: bool, const EXTRAS: bool> Simulation<'_, FEEDBACK, EXTRAS> {
    /// A call from `caller` arrives at this fleet (a service's) at `now`: a request of its
    /// own, whose answer goes back to its caller (see `outbox.rs`).
    fn call_arrives(&mut self, now: f64, caller: Caller) -> Result<()> {
        self.now = now;
        let index = self.outbox.take(caller);
        self.arrive(index);
        self.check_overload()
    }

    /// The call that request `req` waits for on its thread is answered at `now`: its phase is
    /// over (or, killed meanwhile, its entry is freed).
    fn call_answered(&mut self, now: f64, req: u32) {
        self.now = now;
        self.timed_done(req);
    }

    /// The call that request `req` waits for failed for good at `now`: its app answers 500
    /// (`errors.call_failed`); a request killed meanwhile has its entry freed.
    fn call_failed(&mut self, now: f64, req: u32) {
        self.now = now;
        match self.slab.entries[req as usize].state {
            State::Timed => {
                self.slab.entries[req as usize].state = State::Thread;
                self.finish_with(req, Some(ErrorKind::CallFailed));
            }
            State::Dead => self.slab.release(req),
            other => unreachable!("a call failed for a request in state {other:?}"),
        }
    }
}
