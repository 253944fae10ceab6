//! A dyno's CPU, whichever way its cores are shared: time slices and interpreter locks
//! ([`super::slices`], `fleet.cpu_sharing = "slices"`, the default) or processor sharing
//! ([`super::sharing`], `"ps"`). The rest of the simulation goes through these.

use super::events::Event;
use super::phases::schedule_next;
use super::slab::State;
use super::slices::{Rules, Slicer};
use super::Simulation;

/// The request id of the router's job on a dyno's CPU under processor sharing
/// (`router.colocated_cpu`): no request's, its group the one after the app's processes.
const COLOCATED_JOB: u32 = u32::MAX - 1;

/// Every dyno's [`Slicer`], and the rules they share.
#[derive(Debug)]
pub(super) struct Slices {
    pub rules: Rules,
    pub dynos: Vec<Slicer>,
}

impl Simulation<'_> {
    /// A CPU phase of `work` starts for `req` on a thread of `process`.
    pub(super) fn cpu_add(&mut self, dyno: usize, req: u32, process: u32, work: f64) {
        self.cpu_advance(dyno);
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].add(&sl.rules, req, process, work, self.now),
            None => self.rest.cpus[dyno].add(&mut self.cpu_store, req, process, work),
        }
        self.reschedule_cpu(dyno);
    }

    /// The router on the dyno's machine (`router.colocated_cpu`) works `work` seconds on the
    /// dyno's cores: one thread of no app process, under no lock, doing what it is given in
    /// turn. With time slices it shares the cores as any thread; with processor sharing it is
    /// one more process (a group of its own, after the app's) whose one job's work grows.
    pub(super) fn cpu_add_colocated(&mut self, dyno: usize, work: f64) {
        if work <= 0.0 {
            return;
        }
        self.cpu_advance(dyno);
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].add_colocated(&sl.rules, work, self.now),
            None => {
                let (cpu, store) = (&mut self.rest.cpus[dyno], &mut self.cpu_store);
                // The router's one job: what it has left, done or not (a job at 0 whose
                // event has not run yet is still there), gains the new work.
                let left = cpu.remaining(store, COLOCATED_JOB);
                if left.is_some() {
                    cpu.remove(store, COLOCATED_JOB);
                }
                let left = left.unwrap_or(0.0).max(0.0);
                cpu.add(store, COLOCATED_JOB, self.s.app.processes, left + work);
            }
        }
        self.reschedule_cpu(dyno);
    }

    /// The dyno goes down (a restart, its exit): the router's thread drops the work it has
    /// left for it (the requests it was for failed or were answered, their connections
    /// closed), so that no work outlives the dyno it was for.
    pub(super) fn cpu_drop_colocated(&mut self, dyno: usize) {
        if self.s.colocated_cpu.is_none() {
            return;
        }
        self.cpu_advance(dyno);
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].remove_colocated(&sl.rules, self.now),
            None => {
                self.rest.cpus[dyno].remove(&mut self.cpu_store, COLOCATED_JOB);
            }
        }
        self.reschedule_cpu(dyno);
    }

    /// Brings the dyno's CPU to now, counting its busy cores since the last change.
    pub(super) fn cpu_advance(&mut self, dyno: usize) {
        let now = self.now;
        let (busy, from) = match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].advance(now),
            None => self.rest.cpus[dyno].advance(&mut self.cpu_store, now),
        };
        if busy > 0.0 {
            self.measures.cpu(from, now, busy);
            if let Some(scaling) = self.scaling.as_deref_mut() {
                scaling.cpu(from, now, busy);
            }
        }
    }

    /// Keeps the dyno's one CPU event at its next change.
    pub(super) fn reschedule_cpu(&mut self, dyno: usize) {
        let event = Event::Cpu { dyno: dyno as u32 };
        match self.slices.as_deref_mut() {
            Some(sl) => {
                let s = &mut sl.dynos[dyno];
                match s.next_event(&sl.rules) {
                    Some(t) if !s.needs_event(t) => {}
                    Some(t) => {
                        s.set_scheduled(Some(t));
                        self.events.reschedule(t, event, s.soonest());
                    }
                    None => {
                        s.set_scheduled(None);
                        self.events.cancel(event);
                    }
                }
            }
            None => schedule_next(
                &mut self.events,
                &mut self.rest.cpus[dyno],
                &mut self.cpu_store,
                self.now,
                event,
            ),
        }
    }

    /// The dyno's CPU event: the phases that ended go on.
    pub(super) fn cpu_done(&mut self, dyno: usize) {
        let mut done = std::mem::take(&mut self.done);
        self.cpu_advance(dyno);
        match self.slices.as_deref_mut() {
            Some(sl) => {
                sl.dynos[dyno].set_scheduled(None);
                sl.dynos[dyno].take_done(&sl.rules, self.now, &mut done);
            }
            None => {
                self.rest.cpus[dyno].set_scheduled(None);
                self.rest.cpus[dyno].take_done(&mut self.cpu_store, self.now, &mut done);
            }
        }
        self.reschedule_cpu(dyno);
        for &req in &done {
            // The router's work ends no request. A request finished before it may have
            // restarted the dyno (R15), which failed the rest of these.
            if req != COLOCATED_JOB && self.slab.entries[req as usize].state == State::Cpu {
                self.phase_done(req);
            }
        }
        done.clear();
        self.done = done;
    }

    /// The CPU work `req` has left (after [`Self::cpu_advance`]).
    pub(super) fn cpu_remaining(&mut self, dyno: usize, req: u32) -> Option<f64> {
        match self.slices.as_deref() {
            Some(sl) => sl.dynos[dyno].remaining(req, self.now),
            None => self.rest.cpus[dyno].remaining(&mut self.cpu_store, req),
        }
    }

    /// Takes `req`'s CPU phase away (after [`Self::cpu_advance`]; reschedule after).
    pub(super) fn cpu_remove(&mut self, dyno: usize, req: u32) -> bool {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].remove(&sl.rules, req, self.now),
            None => self.rest.cpus[dyno].remove(&mut self.cpu_store, req),
        }
    }

    /// A process's own slowdown (after [`Self::cpu_advance`]); true when it changed.
    pub(super) fn cpu_set_group_factor(&mut self, dyno: usize, process: u32, factor: f64) -> bool {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].set_group_factor(process, factor, self.now),
            None => self.rest.cpus[dyno].set_group_factor(&mut self.cpu_store, process, factor),
        }
    }

    /// The dyno's slowdown (after [`Self::cpu_advance`]); true when it changed.
    pub(super) fn cpu_set_slowdown(&mut self, dyno: usize, slowdown: f64) -> bool {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].set_slowdown(slowdown, self.now),
            None => self.rest.cpus[dyno].set_slowdown(slowdown),
        }
    }
}
