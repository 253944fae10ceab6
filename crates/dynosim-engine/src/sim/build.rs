//! The builder: a replication's state, every concern's made by its own constructor, and the
//! first events (the workload's first arrival or sends, the autoscaler's first evaluation,
//! the first deploy, the dynos' first daily restarts, the late board's first refresh, the
//! initial fleet's idle reports). What happens next is the run's loop (in `mod.rs`).

use super::clients::Clients;
use super::colocated::Colocated;
use super::cpu::Cpu;
use super::dyno::{Dyno, Processes};
use super::events::{Event, EventIds, Events, ARRIVAL, BOOT};
use super::fleet::Fleet;
use super::memory::{self, Memory};
use super::resource::ResourceState;
use super::router::Routers;
use super::scaling::Scaling;
use super::slab::Slab;
use super::streams::Streams;
use super::timers::Deadlines;
use super::trace::TraceRecorder;
use super::traffic::Traffic;
use super::{Simulation, LOOK_AHEAD_DYNOS};
use crate::alloc::filled;
use crate::error::Result;
use crate::measure::Measures;
use crate::request::PhaseKind;
use crate::scenario::{Scenario, Workload};

impl<'s> Simulation<'s> {
    /// Replication `replication` of `s`, ready to run (see the module's comment); `trace`:
    /// a recorder of snapshots, if one is wanted.
    pub(super) fn build(
        s: &'s Scenario,
        replication: u64,
        trace: Option<TraceRecorder>,
    ) -> Result<Simulation<'s>> {
        s.check_stable()?;
        let seed = s.seed;
        let streams = Streams::new(seed, replication);
        // Dyno slots: the fleet's, or room for an autoscaled fleet's dynos to come and go; those
        // past the initial fleet start with no dyno in them.
        let slots = s.dyno_slots();
        let n = slots as usize;
        let phases = s.request.is_some();
        let mut dynos = filled(n, Dyno::IDLE)?;
        for d in s.dynos as usize..n {
            dynos[d].up = false;
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
            cpu: Cpu::new(s, slots)?,
            memory: Memory::new(s, slots)?,
            procs: Processes::new(&s.app, slots, streams.accept, streams.overhead)?,
            fleet: Fleet::new(slots, s.dynos, streams.boot, streams.cycling)?,
            scaling: s
                .autoscale
                .as_ref()
                .map(|a| Box::new(Scaling::new(a.clone(), s.dynos))),
            traffic: Traffic::new(s, replication, streams.traffic),
            clients: Clients::new(s, streams.think),
            colocated: s
                .colocated_cpu
                .is_some()
                .then(|| Colocated::new(streams.colocated)),
            routers: Routers::new(s, slots, streams.routers)?,
            waiting_total: 0,
            resources: s
                .resources
                .iter()
                .map(|r| ResourceState::new(r, slots, s.app.processes))
                .collect(),
            deadlines: Deadlines::new(
                s,
                [
                    streams.router_timeout,
                    streams.queue_timeout,
                    streams.client_timeout,
                    streams.app_timeout,
                ],
            ),
            measures: Measures::new(s)?,
            queued: 0,
            trace,
            phases,
            look_ahead: slots >= LOOK_AHEAD_DYNOS,
            cpu_phases: s.request.as_ref().is_some_and(|r| {
                r.classes
                    .iter()
                    .any(|c| c.phases.iter().any(|p| p.kind == PhaseKind::Cpu))
            }),
            done: Vec::new(),
        };
        if sim.measures.detailed() {
            let over = f64::from(sim.memory.over_quota);
            sim.measures.fleet_levels(0.0, 0.0, sim.memory.fleet, over);
            if sim.memory.modelled {
                sim.measures.dyno_memory(0.0, memory::idle(&s.app));
            }
        }

        if let Some(t) = sim.traffic.next_arrival(0.0) {
            sim.events.schedule(t, ARRIVAL, Event::Arrival);
        }
        if let Workload::Closed(clients) = &s.workload {
            for client in 0..clients.count {
                sim.events.schedule(0.0, ARRIVAL, Event::Send { client });
            }
        }
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
        Ok(sim)
    }
}
