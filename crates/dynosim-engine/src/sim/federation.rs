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
//! A `fanout` phase (`{ fanout = "NAME", count = N, wait = ... }`, without `hedge`): when a
//! request reaches it, its thread sends its `count` calls at once (a geometric count drawn per
//! request, from the calling fleet's own stream, [`crate::rng::Stream::FanoutCounts`]), each
//! a request of the callee's, and waits, as for a `call`. The phase needs `wait` successful
//! answers: all the calls sent (`"all"`), one (`"first"`), or k (a request that drew fewer
//! than k calls needs them all). Each answer in time counts as `answered`; an error answer
//! (the callee's own) is a call failed for good (`failed`: a fan-out's calls are not tried
//! again), and the phase fails, its request answered 500 (`errors.call_failed`), as soon as
//! too few calls are left to reach `wait` (under `"all"`, at the first error). Once the phase
//! is over, its calls still out go on at the callee for nobody: their answers are `late`.
//!
//! A hedged fan-out (`hedge = T`, or `hedge = "pNN"`): each call still unanswered T after the
//! fan-out sent it gets one second copy (a hedge, `services.NAME.calls.hedged`), a request of
//! the callee's as the first, whose router avoids the first copy's dyno while another is up
//! (as its retry after a refusal does: re-drawn, then the least loaded other; a fleet of one
//! dyno gets both copies, and a copy its router holds or a `router.cost` queues goes where a
//! free thread is). One timer per fan-out, since its calls leave together. The first answer of
//! the two is the call's; the other's, whenever it comes, is `late` (without `cancel`, the
//! loser's work is done for nobody). An error answer of one copy while the other is
//! still out waits for the other; the call fails when both have failed, or when its only copy
//! fails before its hedge was sent (a hedge is a copy against slowness, not a retry). Once the
//! phase is over, or its request has gone (killed while it waited), no hedge is sent. With
//! `"pNN"`, T is the NN-th percentile of the callee's answers as this call site has had them,
//! each copy's own time from its sending to its successful answer, in time or late (so, with
//! nothing queueing, the callee's un-hedged response law whatever the hedges do), in an HDR
//! histogram ([`Estimate`]): no hedge until [`HEDGE_WARMUP`] answers, and T recomputed every
//! [`HEDGE_EVERY`] answers after. Without `hedge`, a fan-out makes no draw and keeps no state
//! more than before.
//!
//! `cancel` (`"queued"` or `true`; `false`, the default, cancels nothing and changes nothing):
//! a fan-out cancels the copies it no longer needs: a hedged call's other copy when one
//! answers, and every copy still out when the phase is over (done or failed). A copy the
//! callee has answered already (its answer on its way) is not cancelled: it comes, `late`.
//! One held in the callee's router's queue leaves it; one on its way to a dyno, or in a
//! dyno's backlog, is marked (its `client` NONE, its caller's index freed) and dropped where
//! it reaches the dyno or leaves the backlog, before a thread takes it (`threads.rs`): a lazy
//! mark, as a server drops a request whose client has closed its connection when it comes to
//! it. With `true`, a copy on its thread is stopped there as `app.service_timeout` stops a
//! request (its thread freed, a pool connection given back, a query already handed to a
//! resource run on there), its own calls left to run on. Either way the callee measures it
//! as no response and no error (its client has gone), and the caller counts it `cancelled`:
//! `answered + late + cancelled = sent`. A cancel reaches the callee when the answer that
//! ends the need reaches the caller: a thread freed by that answer has already taken the
//! next copy in its backlog, which `"queued"` leaves to run.
//!
//! A trace (`run --timeseries`, [`crate::trace_replication`]) records each fleet's frames: the
//! entry's at the top, each service's under `services`, at the same times. A fleet's frame
//! shows its state before anything of a later instant, a call or an answer the federation
//! carries to it included.
//!
//! Faults in any fleet are judged at every fleet, over the same span (`services.rs`,
//! `judge_faults_together`); each fleet runs to its end: a federation does not stop at its
//! verdict.

use super::limit::Ended;
use super::outbox::{Answer, Caller, Made, HEDGE_COPY};
use super::slab::{State, NONE};
use super::trace::TraceRecorder;
use super::{Simulation, Step, INTERRUPT_CHECK_EVERY};
use crate::calls::{Call, Cancel, Count, Hedge, Wait};
use crate::error::{Error, Result};
use crate::result::{CallFigures, ErrorKind, ReplicationResult, ServiceFigures, Trace};
use crate::rng::{SimRng, Stream};
use crate::scenario::Scenario;
use hdrhistogram::Histogram;
use rand_distr::{Distribution, Geometric};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};
use std::ops::Index;

/// One fleet of the federation: its simulation, and what its call sites call.
struct Tier<'s> {
    sim: Simulation<'s, true, true, false>,
    window_end: f64,
    /// Per call site of its scenario: the callee's tier, its `timeout` and `retries` (a
    /// `call`'s) or its count and wait (a fan-out's).
    sites: Vec<Site>,
    /// The fan-outs' drawn counts.
    counts: SimRng,
    /// Per call site: the callee's response time a `hedge = "pNN"` learns (None elsewhere).
    estimates: Vec<Option<Estimate>>,
}

/// A `"pNN"` hedge waits for this many answers before it sends any hedge...
pub(crate) const HEDGE_WARMUP: u64 = 100;
/// ...and recomputes its T every this many answers after.
pub(crate) const HEDGE_EVERY: u64 = 100;

/// A call site's percentile of the callee's answers (`hedge = "pNN"`): an HDR histogram of
/// each copy's own time, from its sending to its successful answer (microseconds, 3
/// significant digits, as the figures' percentiles), and the T it gives.
struct Estimate {
    quantile: f64,
    histogram: Histogram<u64>,
    after: Option<f64>,
}

impl Estimate {
    fn new(percentile: f64) -> Estimate {
        Estimate {
            quantile: percentile / 100.0,
            histogram: Histogram::new(3).expect("3 significant digits is valid"),
            after: None,
        }
    }

    /// A copy answered, `time` after it was sent.
    fn record(&mut self, time: f64) {
        let micros = crate::stats::micros(time);
        if self.histogram.record(micros).is_err() {
            self.histogram.saturating_record(micros);
        }
        let seen = self.histogram.len();
        if seen >= HEDGE_WARMUP && (seen - HEDGE_WARMUP) % HEDGE_EVERY == 0 {
            let at = self.histogram.value_at_quantile(self.quantile);
            self.after = Some(crate::stats::seconds(at));
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Site {
    callee: usize,
    timeout: Option<f64>,
    retries: u32,
    /// A fan-out's count and wait; None for a `call`.
    fan: Option<(Count, Wait)>,
    /// A fan-out's `hedge`.
    hedge: Option<Hedge>,
    /// A fan-out's `cancel`.
    cancel: Cancel,
}

/// A fan-out waiting for its answers: the caller's request's generation, its site, the calls
/// sent, the successful answers it needs, and those (and the errors) it has had; a fan-out
/// with a hedge timer, each of its calls (empty without).
/// When its calls and (hedged) their second copies were sent: a copy is cancelled as its
/// [`Caller`].
#[derive(Debug, Clone)]
struct Fanning {
    generation: u32,
    site: u32,
    sent: u32,
    need: u32,
    ok: u32,
    errors: u32,
    calls: Vec<Hedged>,
    at: f64,
    hedged_at: f64,
}

/// One call of a fan-out that may be hedged or cancelled: the callee's request that carries
/// its first copy (index and generation: its dyno is the one the hedge avoids, and the request
/// a cancel stops), that of its second copy (once hedged), whether it has its answer (or
/// failed), whether its hedge was sent, and whether one of its copies failed.
#[derive(Debug, Clone, Copy)]
struct Hedged {
    req: u32,
    generation: u32,
    copy_req: u32,
    copy_generation: u32,
    done: bool,
    hedged: bool,
    failed_once: bool,
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
    site: u32,
    try_no: u32,
    /// A fan-out's hedge timer, rather than a call's timeout.
    hedge: bool,
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

/// What waits for an answer, by its caller's (tier, request): a vector per tier indexed by the
/// request's slab index (dense, and reused as the slab reuses it), where a hash map hashed
/// each key on every call and answer.
#[derive(Debug)]
struct ByCaller<T> {
    tiers: Vec<Vec<Option<T>>>,
}

impl<T> Default for ByCaller<T> {
    fn default() -> Self {
        ByCaller { tiers: Vec::new() }
    }
}

impl<T> ByCaller<T> {
    fn get(&self, &(tier, req): &(u32, u32)) -> Option<&T> {
        self.tiers.get(tier as usize)?.get(req as usize)?.as_ref()
    }

    fn get_mut(&mut self, &(tier, req): &(u32, u32)) -> Option<&mut T> {
        self.tiers
            .get_mut(tier as usize)?
            .get_mut(req as usize)?
            .as_mut()
    }

    fn insert(&mut self, (tier, req): (u32, u32), value: T) {
        let (tier, req) = (tier as usize, req as usize);
        if self.tiers.len() <= tier {
            self.tiers.resize_with(tier + 1, Vec::new);
        }
        let slots = &mut self.tiers[tier];
        if slots.len() <= req {
            slots.resize_with(req + 1, || None);
        }
        slots[req] = Some(value);
    }

    fn remove(&mut self, key: &(u32, u32)) -> Option<T> {
        self.tiers
            .get_mut(key.0 as usize)?
            .get_mut(key.1 as usize)?
            .take()
    }
}

impl<T> Index<&(u32, u32)> for ByCaller<T> {
    type Output = T;
    fn index(&self, key: &(u32, u32)) -> &T {
        self.get(key).expect("a caller that waits")
    }
}

struct Federation<'s> {
    tiers: Vec<Tier<'s>>,
    /// The calls waiting for an answer, by their caller's (tier, request).
    waiting: ByCaller<Waiting>,
    /// The fan-outs waiting for their answers, by their caller's (tier, request).
    fans: ByCaller<Fanning>,
    /// The calls made and the answers given that `settle` carries, kept between its rounds
    /// (so that neither they nor the fleets' outboxes allocate anew for each step).
    made: Vec<Made>,
    answers: Vec<Answer>,
    timeouts: BinaryHeap<Due>,
    seq: u64,
    /// Per tier (the entry's unused): what its callers' calls to it did.
    calls: Vec<CallFigures>,
    /// Per tier: whether a call site that calls it cancels (its `calls.cancelled` is then
    /// written), and the copies cancelled.
    cancels: Vec<bool>,
    cancelled: Vec<u64>,
}

impl Simulation<'_, true, true, false> {
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
    // Each service's trace at the entry's times.
    let mut recorders = Vec::with_capacity(scenarios.len());
    for &scenario in &scenarios[1..] {
        recorders.push(trace.as_ref().map(|t| t.like(scenario)).transpose()?);
    }
    let mut recorders = std::iter::once(trace).chain(recorders);
    for &scenario in &scenarios {
        let i = tiers.len();
        let mut sim = Simulation::<true, true, false>::build(
            scenario,
            replication,
            recorders.next().flatten(),
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
                        fan: None,
                        hedge: None,
                        cancel: Cancel::Nothing,
                    },
                    Call::Fanout {
                        count,
                        wait,
                        hedge,
                        cancel,
                        ..
                    } => Site {
                        callee,
                        timeout: None,
                        retries: 0,
                        fan: Some((count, wait)),
                        hedge,
                        cancel,
                    },
                }
            })
            .collect::<Vec<Site>>();
        let estimates = sites
            .iter()
            .map(|site| match site.hedge {
                Some(Hedge::Percentile(p)) => Some(Estimate::new(p)),
                _ => None,
            })
            .collect();
        let window_end = sim.measures.window_end();
        let counts = crate::rng::stream(scenario.seed, replication, Stream::FanoutCounts);
        tiers.push(Tier {
            sim,
            window_end,
            sites,
            counts,
            estimates,
        });
    }
    let mut cancels = vec![false; tiers.len()];
    for tier in &tiers {
        for site in &tier.sites {
            cancels[site.callee] |= site.cancel != Cancel::Nothing;
        }
    }
    let mut federation = Federation {
        calls: vec![CallFigures::default(); tiers.len()],
        cancelled: vec![0; tiers.len()],
        cancels,
        tiers,
        waiting: ByCaller::default(),
        fans: ByCaller::default(),
        made: Vec::new(),
        answers: Vec::new(),
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
        // comment; each is judged from its own figures).
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
                (Some((t, _)), Some(at)) if at < t => self.timer_due()?,
                (None, Some(_)) => self.timer_due()?,
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
                // Swapped with the federation's empty buffers: what the carrying makes this
                // fleet put in its outbox waits for the next round.
                let mut made = std::mem::take(&mut self.made);
                std::mem::swap(&mut made, &mut self.tiers[i].sim.outbox.made);
                let now = self.tiers[i].sim.now;
                for call in made.drain(..) {
                    self.first_try(i, call, now)?;
                }
                self.made = made;
                let mut answers = std::mem::take(&mut self.answers);
                std::mem::swap(&mut answers, &mut self.tiers[i].sim.outbox.answers);
                for answer in answers.drain(..) {
                    self.answered(i, answer.caller, answer.ok, answer.at)?;
                }
                self.answers = answers;
            }
            if !moved {
                return Ok(());
            }
        }
    }

    /// A request of tier `tier` reached a call phase at `now`: its first try.
    fn first_try(&mut self, tier: usize, call: Made, now: f64) -> Result<()> {
        let site = self.tiers[tier].sites[call.site as usize];
        if let Some((count, wait)) = site.fan {
            return self.fan_out(tier, call, site.callee, (count, wait), now);
        }
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
            site: waiting.site,
            try_no: waiting.try_no,
            sent: now,
        };
        if let Some(t) = site.timeout {
            self.seq += 1;
            self.timeouts.push(Due {
                at: now + t,
                seq: self.seq,
                tier: tier as u32,
                req,
                generation: waiting.generation,
                site: waiting.site,
                try_no: waiting.try_no,
                hedge: false,
            });
        }
        self.tiers[site.callee]
            .sim
            .call_arrives(now, caller, NONE)?;
        Ok(())
    }

    /// A request of tier `tier` reached a fan-out at `now`: its calls all go out at once (and,
    /// hedged, its hedge timer is set).
    fn fan_out(
        &mut self,
        tier: usize,
        call: Made,
        callee: usize,
        (count, wait): (Count, Wait),
        now: f64,
    ) -> Result<()> {
        let site = self.tiers[tier].sites[call.site as usize];
        let hedge_after = match site.hedge {
            None => None,
            Some(Hedge::After(t)) => Some(t),
            Some(Hedge::Percentile(_)) => self.tiers[tier].estimates[call.site as usize]
                .as_ref()
                .and_then(|e| e.after),
        };
        let sent = match count {
            Count::Fixed(n) => n,
            Count::Geometric { mean } => {
                let g = Geometric::new(1.0 / mean).expect("checked: a mean count >= 1");
                let drawn = 1 + g.sample(&mut self.tiers[tier].counts);
                drawn.min(u64::from(crate::calls::MAX_FANOUT)) as u32
            }
        };
        let need = match wait {
            Wait::All => sent,
            Wait::First => 1,
            Wait::Some(k) => k.min(sent),
        };
        let mut calls = Vec::new();
        // Each call's request is kept to hedge it or to cancel it.
        let keep = hedge_after.is_some() || site.cancel != Cancel::Nothing;
        if keep {
            calls.reserve_exact(sent as usize);
        }
        if let Some(t) = hedge_after {
            self.seq += 1;
            self.timeouts.push(Due {
                at: now + t,
                seq: self.seq,
                tier: tier as u32,
                req: call.req,
                generation: call.generation,
                site: call.site,
                try_no: 0,
                hedge: true,
            });
        }
        self.calls[callee].sent += u64::from(sent);
        for i in 0..sent {
            let caller = Caller {
                tier: tier as u32,
                req: call.req,
                generation: call.generation,
                site: call.site,
                try_no: i,
                sent: now,
            };
            let req = self.tiers[callee].sim.call_arrives(now, caller, NONE)?;
            if keep {
                calls.push(Hedged {
                    req,
                    generation: self.tiers[callee].sim.slab.entries[req as usize].generation,
                    copy_req: NONE,
                    copy_generation: 0,
                    done: false,
                    hedged: false,
                    failed_once: false,
                });
            }
        }
        self.fans.insert(
            (tier as u32, call.req),
            Fanning {
                generation: call.generation,
                site: call.site,
                sent,
                need,
                ok: 0,
                errors: 0,
                calls,
                at: now,
                hedged_at: f64::NAN,
            },
        );
        Ok(())
    }

    /// A fan-out's hedge timer is due: each of its calls still unanswered gets its second
    /// copy, unless the phase is over or its request has gone.
    fn hedge_due(&mut self, due: Due) -> Result<()> {
        let key = (due.tier, due.req);
        let tier = due.tier as usize;
        let Some(fan) = self
            .fans
            .get_mut(&key)
            .filter(|f| f.generation == due.generation && f.site == due.site)
        else {
            return Ok(());
        };
        if self.tiers[tier].sim.slab.entries[due.req as usize].state != State::Timed {
            return Ok(());
        }
        let callee = self.tiers[tier].sites[due.site as usize].callee;
        fan.hedged_at = due.at;
        for (i, call) in fan.calls.iter_mut().enumerate() {
            if call.done || call.hedged {
                continue;
            }
            call.hedged = true;
            self.calls[callee].sent += 1;
            self.calls[callee].hedged += 1;
            let sim = &mut self.tiers[callee].sim;
            let first = &sim.slab.entries[call.req as usize];
            let avoid = if first.generation == call.generation {
                first.dyno
            } else {
                NONE
            };
            let caller = Caller {
                tier: due.tier,
                req: due.req,
                generation: due.generation,
                site: due.site,
                try_no: i as u32 | HEDGE_COPY,
                sent: due.at,
            };
            let copy = sim.call_arrives(due.at, caller, avoid)?;
            call.copy_req = copy;
            call.copy_generation = sim.slab.entries[copy as usize].generation;
        }
        Ok(())
    }

    /// Tier `callee` answered one of `caller`'s fan-out calls at `at`: the phase ends when it
    /// has the successful answers it needs (its request goes on), or fails when too few calls
    /// are left to reach them. With `cancel`, a hedged call's answer cancels its other copy,
    /// and the phase's end the copies still out.
    fn fan_answered(&mut self, callee: usize, caller: Caller, ok: bool, at: f64) {
        let tier = caller.tier as usize;
        if ok {
            if let Some(estimate) = &mut self.tiers[tier].estimates[caller.site as usize] {
                estimate.record(at - caller.sent);
            }
        }
        let key = (caller.tier, caller.req);
        let Some(fan) = self
            .fans
            .get_mut(&key)
            .filter(|f| f.generation == caller.generation && f.site == caller.site)
        else {
            self.calls[callee].late += 1;
            return;
        };
        let cancel = self.tiers[tier].sites[caller.site as usize].cancel;
        // A fan-out with a hedge timer: the call's first answer is its answer, but an error
        // while its other copy is still out waits for that copy.
        let mut waits_for_the_other = false;
        let place = caller.try_no & !HEDGE_COPY;
        let mut loser = None;
        if let Some(call) = fan.calls.get_mut(place as usize) {
            if call.done {
                // The other copy's answer came first: this one is for nobody.
                self.calls[callee].late += 1;
                return;
            }
            waits_for_the_other = !ok && call.hedged && !call.failed_once;
            call.failed_once |= !ok;
            call.done = !waits_for_the_other;
            if ok && call.hedged && cancel != Cancel::Nothing {
                // The other copy lost: cancelled.
                loser = Some(if caller.try_no & HEDGE_COPY != 0 {
                    (call.req, call.generation, place, fan.at)
                } else {
                    (
                        call.copy_req,
                        call.copy_generation,
                        place | HEDGE_COPY,
                        fan.hedged_at,
                    )
                });
            }
        }
        self.calls[callee].answered += 1;
        if let Some((req, generation, try_no, sent)) = loser {
            let other = Caller {
                try_no,
                sent,
                ..caller
            };
            self.cancel(callee, req, generation, &other, cancel, at);
        }
        let Some(fan) = self.fans.get_mut(&key) else {
            unreachable!("the fan-out is still waiting");
        };
        if waits_for_the_other {
            self.calls[callee].errors += 1;
            return;
        }
        if ok {
            fan.ok += 1;
            if fan.ok >= fan.need {
                let fan = self.fans.remove(&key).expect("waiting");
                self.cancel_the_rest(callee, &caller, &fan, cancel, at);
                self.tiers[tier].sim.call_answered(at, caller.req);
            }
            return;
        }
        self.calls[callee].errors += 1;
        self.calls[callee].failed += 1;
        fan.errors += 1;
        if fan.errors > fan.sent - fan.need {
            let fan = self.fans.remove(&key).expect("waiting");
            self.cancel_the_rest(callee, &caller, &fan, cancel, at);
            self.tiers[tier].sim.call_failed(at, caller.req);
        }
    }

    /// A fan-out's phase is over at `at`: with `cancel`, the copies of its calls still out
    /// are cancelled (a call without its answer: its first copy, and its second if hedged).
    fn cancel_the_rest(
        &mut self,
        callee: usize,
        caller: &Caller,
        fan: &Fanning,
        cancel: Cancel,
        at: f64,
    ) {
        if cancel == Cancel::Nothing {
            return;
        }
        for (i, call) in fan.calls.iter().enumerate() {
            if call.done {
                continue;
            }
            let first = Caller {
                try_no: i as u32,
                sent: fan.at,
                ..*caller
            };
            self.cancel(callee, call.req, call.generation, &first, cancel, at);
            if call.hedged {
                let second = Caller {
                    try_no: i as u32 | HEDGE_COPY,
                    sent: fan.hedged_at,
                    ..*caller
                };
                self.cancel(
                    callee,
                    call.copy_req,
                    call.copy_generation,
                    &second,
                    cancel,
                    at,
                );
            }
        }
    }

    /// Cancels the copy `caller` sent, request `req` of tier `callee` (of generation
    /// `generation`), at `at`, if it has not answered yet and (`"queued"`) no thread has it:
    /// counted as `cancelled`, it will not answer.
    fn cancel(
        &mut self,
        callee: usize,
        req: u32,
        generation: u32,
        caller: &Caller,
        cancel: Cancel,
        at: f64,
    ) {
        if req == NONE {
            return;
        }
        let running = cancel == Cancel::Running;
        if self.tiers[callee]
            .sim
            .cancel_call(at, req, generation, caller, running)
        {
            self.cancelled[callee] += 1;
        }
    }

    /// Tier `callee` answered `caller`'s call at `at`: the caller has it, unless it stopped
    /// waiting (a timeout) or its request is gone.
    fn answered(&mut self, callee: usize, caller: Caller, ok: bool, at: f64) -> Result<()> {
        if self.tiers[caller.tier as usize].sites[caller.site as usize]
            .fan
            .is_some()
        {
            self.fan_answered(callee, caller, ok, at);
            return Ok(());
        }
        let key = (caller.tier, caller.req);
        let current = self.waiting.get(&key).is_some_and(|w| {
            w.generation == caller.generation && w.site == caller.site && w.try_no == caller.try_no
        });
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

    /// The earliest timer is due: a fan-out's hedges, or a call's timeout.
    fn timer_due(&mut self) -> Result<()> {
        let due = self.timeouts.pop().expect("a timer is pending");
        if due.hedge {
            self.hedge_due(due)?;
            return self.settle();
        }
        self.timeout_due(due)
    }

    /// A call's timeout is due: the caller stops waiting for that try, if it still waits for
    /// it.
    fn timeout_due(&mut self, due: Due) -> Result<()> {
        let key = (due.tier, due.req);
        let current = self.waiting.get(&key).is_some_and(|w| {
            w.generation == due.generation && w.site == due.site && w.try_no == due.try_no
        });
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
        let mut traces = Vec::with_capacity(self.tiers.len());
        for tier in self.tiers {
            let scenario = tier.sim.s;
            let (measures, end, t) = tier.sim.close(tier.window_end);
            traces.push(t);
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
            .zip(self.cancels.iter().zip(&self.cancelled).skip(1))
            .map(|(((service, fleet), mut calls), (&cancels, &cancelled))| {
                calls.cancelled = cancels.then_some(cancelled);
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
        let mut traces = traces.into_iter();
        let trace = traces.next().expect("the entry fleet").map(|mut t| {
            t.services = Some(
                s.services
                    .iter()
                    .zip(traces)
                    .filter_map(|(service, t)| Some((service.name.clone(), t?)))
                    .collect(),
            );
            t
        });
        Ok((entry, trace))
    }
}

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// A call from `caller` arrives at this fleet (a service's) at `now`: a request of its
    /// own, whose answer goes back to its caller (see `outbox.rs`), routed to another dyno
    /// than `avoid` while one is up (`NONE`: any). Returns the request's index.
    fn call_arrives(&mut self, now: f64, caller: Caller, avoid: u32) -> Result<u32> {
        self.frames_before(now);
        self.now = now;
        let index = self.outbox.take(caller);
        self.outbox.avoid = avoid;
        let req = self.arrive(index);
        self.outbox.avoid = NONE;
        self.check_overload()?;
        Ok(req)
    }

    /// Its caller no longer needs request `req` of generation `generation`, a call this fleet
    /// took from `caller` (`cancel`: a hedge's loser, a call a fan-out did not wait for), at
    /// `now`: one held in its router's queue leaves it; one on its way to a dyno or in a
    /// dyno's backlog is marked (its `client` is NONE, its caller's index freed) and dropped
    /// when it reaches the dyno or comes out of the backlog ([`Self::drop_cancelled`]); with
    /// `running`, one on its thread is stopped as `app.service_timeout` stops a request (its
    /// thread freed, a pool connection given back, a query handed to a resource run on there).
    /// Nothing of it is measured as a response or an error: its client has gone. Returns
    /// whether it was cancelled (it will not answer): not when it has answered already (its
    /// answer on its way to the caller), nor, without `running`, when a thread has it.
    fn cancel_call(
        &mut self,
        now: f64,
        req: u32,
        generation: u32,
        caller: &Caller,
        running: bool,
    ) -> bool {
        let e = &self.slab.entries[req as usize];
        if e.generation != generation
            || e.state == State::Free
            || e.answered
            || e.client == NONE
            || !self.outbox.holds(e.client, caller)
        {
            return false;
        }
        let (state, client, router) = (e.state, e.client, e.router as usize);
        let on_thread = state.on_thread();
        let waiting = matches!(
            state,
            State::Routing | State::AtRouter | State::Connecting | State::Retrying | State::Accept
        );
        if !(waiting || (running && on_thread)) {
            return false;
        }
        self.frames_before(now);
        self.now = now;
        self.outbox.release(client);
        let e = &mut self.slab.entries[req as usize];
        e.client = NONE;
        e.answered = true;
        if on_thread {
            self.stop_in_app(req);
            return true;
        }
        if state == State::Routing {
            if let Some(at) = self.routers.queues[router].iter().position(|&r| r == req) {
                // Held in its router's queue: it leaves it (as a queue timeout drops it,
                // answering nobody).
                self.routers.queues[router].remove(at);
                self.waiting_total -= 1;
                self.routers.in_flight[router] -= 1;
                self.limit_end_router(req, router, Ended::Ignored);
                self.slab.entries[req as usize].router_done = true;
                self.slab.release(req);
            }
        }
        true
    }

    /// A call its caller cancelled (see [`Self::cancel_call`]) reached `dyno`, or (`admitted`)
    /// came out of its backlog for a thread: dropped unserved, as a server drops a request
    /// whose client has closed its connection. Its router stops counting it; no thread takes
    /// it, and nothing of it is measured.
    pub(super) fn drop_cancelled(&mut self, dyno: usize, req: u32, admitted: bool) {
        let e = &mut self.slab.entries[req as usize];
        let (router, router_done) = (e.router as usize, e.router_done);
        e.router_done = true;
        if admitted {
            self.limit_end_dyno(req, dyno, Ended::Ignored);
        }
        if !router_done {
            self.limit_end_router(req, router, Ended::Ignored);
            self.count_done(router, dyno);
            self.routers.in_flight[router] -= 1;
        }
        self.slab.release(req);
        if !router_done {
            self.drain_router(router);
        }
    }

    /// The frames due before `now`, when the federation is to change this fleet at `now` (as
    /// a step does before its event).
    #[inline]
    fn frames_before(&mut self, now: f64) {
        if self.trace.is_some() {
            self.snapshot_until(now);
        }
    }

    /// The call that request `req` waits for on its thread is answered at `now`: its phase is
    /// over (or, killed meanwhile, its entry is freed).
    fn call_answered(&mut self, now: f64, req: u32) {
        self.frames_before(now);
        self.now = now;
        self.timed_done(req);
    }

    /// The call that request `req` waits for failed for good at `now`: its app answers 500
    /// (`errors.call_failed`); a request killed meanwhile has its entry freed.
    fn call_failed(&mut self, now: f64, req: u32) {
        self.frames_before(now);
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
