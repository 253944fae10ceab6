//! The builder: a replication's state, each concern's made by its own constructor (one line
//! each), and then the first events: the workload's first arrival or sends, the autoscaler's
//! first evaluation, the first deploy, the dynos' first daily restarts, the first fault that acts at an instant, the late board's first
//! refresh, the initial fleet's idle reports. What happens next is the run's loop (`mod.rs`).

use super::clients::Clients;
use super::colocated::Colocated;
use super::cpu::Cpu;
use super::deadlines::Deadlines;
use super::dyno::{Dyno, Processes};
use super::events::{Event, Events, ARRIVAL, AUTOSCALE, DEPLOY};
use super::faults::Faults;
use super::fleet::Fleet;
use super::limit::Limits;
use super::memory::{self, Memory};
use super::outbox::Outbox;
use super::redispatch::Redispatch;
use super::resource::ResourceState;
use super::retries::Retries;
use super::router::Routers;
use super::scaling::Scaling;
use super::slab::Slab;
use super::streams::Streams;
use super::trace::TraceRecorder;
use super::traffic::Traffic;
use super::{Simulation, LOOK_AHEAD_DYNOS};
use crate::breaker::Breaker;
use crate::error::Result;
use crate::measure::Measures;
use crate::request::PhaseKind;
use crate::scenario::{Scenario, Workload};

impl<'s, const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'s, FEEDBACK, EXTRAS, PLAIN>
{
    /// Replication `replication` of `s`, ready to run; `trace`: a recorder of snapshots, if
    /// one is wanted.
    pub(super) fn build(
        s: &'s Scenario,
        replication: u64,
        trace: Option<TraceRecorder>,
    ) -> Result<Simulation<'s, FEEDBACK, EXTRAS, PLAIN>> {
        s.check_stable()?;
        super::features::check_measurement_build(s)?;
        // Dyno slots: the fleet's, or room for an autoscaled fleet's dynos to come and go; those
        // past the initial fleet start with no dyno in them.
        let slots = s.dyno_slots();
        let look_ahead = slots >= LOOK_AHEAD_DYNOS;
        let streams = Streams::new(s.seed, replication);
        let slab = Slab::new(s);
        let stride = slab.stride;
        // Fallible constructors (allocations) first, in the order the engine always made them.
        let mut sim = Simulation {
            s,
            now: 0.0,
            events: Events::for_run(s, slots, look_ahead),
            slab,
            cpu: Cpu::new(s, slots)?,
            dynos: Dyno::slots(slots, s.dynos)?,
            memory: Memory::new(s, slots)?,
            procs: Processes::new(&s.app, slots, streams.accept, streams.overhead)?,
            fleet: Fleet::new(slots, s.dynos, streams.boot, streams.cycling)?,
            routers: Routers::new(s, slots, streams.routers)?,
            measures: Measures::new(s)?,
            waiting_total: 0,
            queued: 0,
            phases: s.request.is_some(),
            look_ahead,
            cpu_phases: s.request.as_ref().is_some_and(|r| {
                r.classes
                    .iter()
                    .any(|c| c.phases.iter().any(|p| p.kind == PhaseKind::Cpu))
            }),
            done: Vec::new(),
            traffic: Traffic::new(s, replication, streams.traffic),
            clients: Clients::new(s, streams.think),
            colocated: Colocated::of(s, streams.colocated),
            resources: ResourceState::all(s, slots),
            deadlines: Deadlines::new(s, streams.timeouts),
            scaling: Scaling::of(s),
            trace,
            retries: Retries::of(s, stride, streams.retries),
            faults: Faults::new(s),
            redispatch: Redispatch::of(s),
            breaker: s
                .client_breaker
                .as_ref()
                .map(|c| Box::new(Breaker::new(c.clone()))),
            queries: streams.queries,
            limits: Limits::of(s, streams.limits),
            outbox: Outbox::new(false),
        };
        // A run without the feedback loop must have none of its features' state: its steps
        // never look at it (see `features.rs`).
        assert!(
            FEEDBACK || !sim.uses_feedback(),
            "a scenario using a feedback feature runs on the loop without them"
        );
        // Nor one without the lifecycle, keys and late views any of theirs.
        assert!(
            EXTRAS || !sim.uses_extras(),
            "a scenario using the lifecycle, keys or a late view runs on the loop without them"
        );
        // Nor a plain one anything its loop compiles out.
        assert!(
            !PLAIN
                || (!FEEDBACK && !EXTRAS && super::features::plain(s) && !sim.measures.detailed()),
            "a scenario that is not plain runs on the plain loop"
        );
        sim.begin();
        Ok(sim)
    }

    /// Whether any feedback feature has state in this run (see `features.rs`).
    fn uses_feedback(&self) -> bool {
        self.retries.is_some()
            || self.redispatch.is_some()
            || self.breaker.is_some()
            || self.limits.is_some()
            || self.faults.any()
            || self.s.app.service_timeout.is_some()
            || self.measures.counts_goodput()
    }

    /// Whether the lifecycle, keys or a late view has state in this run, or the scenario may
    /// change its fleet (see `features.rs`).
    fn uses_extras(&self) -> bool {
        self.scaling.is_some()
            || self.routers.board.is_some()
            || self.slab.keyed
            || super::features::lifecycle(self.s)
    }

    /// The observer's first levels, and the first events.
    fn begin(&mut self) {
        let s = self.s;
        if self.measures.detailed() {
            let over = f64::from(self.memory.over_quota);
            self.measures
                .fleet_levels(0.0, 0.0, self.memory.fleet, over);
            if self.memory.modelled {
                self.measures.dyno_memory(0.0, memory::idle(&s.app));
            }
        }
        if let Some(t) = self.traffic.next_arrival(0.0) {
            self.events.schedule(t, ARRIVAL, Event::Arrival);
        }
        if let Workload::Closed(clients) = &s.workload {
            for client in 0..clients.count {
                self.events.schedule(0.0, ARRIVAL, Event::Send { client });
            }
        }
        if let Some(scaling) = &self.scaling {
            let first = scaling.interval();
            if first < self.measures.window_end() {
                self.events.schedule(first, AUTOSCALE, Event::Autoscale);
            }
        }
        if let Some(&(at, _)) = s.lifecycle.deploys.first() {
            self.events.schedule(at, DEPLOY, Event::Deploy);
        }
        self.schedule_first_cycles();
        self.schedule_first_fault();
        self.schedule_first_view();
        // Under `jiq`, the initial fleet reports idle at the start, dyno by dyno.
        for dyno in 0..s.dynos as usize {
            self.idle_check(dyno);
        }
    }
}
