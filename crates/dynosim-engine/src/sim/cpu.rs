//! Every dyno's CPU, whichever way its cores are shared: time slices and interpreter locks
//! ([`super::slices`], `fleet.cpu_sharing = "slices"`, the default) or processor sharing
//! ([`super::sharing`], `"ps"`). The rest of the simulation goes through [`Cpu`], which hides
//! which; what a CPU phase starts and ends is [`super::phases`]'.

use super::events::{Event, Events};
use super::memory;
use super::sharing::{schedule_next, Sharing, SharingStore};
use super::slices::{Rules, Slicer};
use crate::alloc::{filled, prefetch_all};
use crate::error::Result;
use crate::scenario::{CpuSharing, Scenario};

/// The request id of the router's job on a dyno's CPU under processor sharing
/// (`router.colocated_cpu`): no request's, its group the one after the app's processes.
pub(super) const COLOCATED_JOB: u32 = u32::MAX - 1;

/// Every dyno's [`Slicer`], and the rules they share.
#[derive(Debug)]
struct Slices {
    rules: Rules,
    dynos: Vec<Slicer>,
}

#[derive(Debug)]
pub(super) struct Cpu {
    /// Processor sharing: each dyno's CPU (a [`Sharing`] of its cores; a dyno's header only,
    /// with no phases), and the groups and jobs of all.
    sharings: Vec<Sharing>,
    store: SharingStore,
    /// Time slices (None: processor sharing).
    slices: Option<Box<Slices>>,
    /// The app's processes: the router's group on a dyno under processor sharing is the one
    /// after them.
    processes: u32,
}

impl Cpu {
    /// The CPUs of `slots` dyno slots, each slowed as an idle dyno's memory slows it.
    pub fn new(s: &Scenario, slots: u32) -> Result<Cpu> {
        let n = slots as usize;
        let cpu = s.request.is_some();
        let sliced = cpu && s.cpu.sharing == CpuSharing::Slices;
        let store = store(s, slots, cpu && !sliced, s.colocated_cpu.is_some())?;
        let slowdown = s.app.memory.slowdown(memory::idle(&s.app));
        let mut sharings = filled(n, store.sharing(0))?;
        for (d, c) in sharings.iter_mut().enumerate() {
            *c = store.sharing(d as u32);
            c.set_slowdown(slowdown);
        }
        let slices = if sliced {
            let rules = Rules::new(
                s.dyno_type.cores,
                s.cpu.quantum,
                s.app.lock,
                s.app.model == crate::app::Model::Async,
                s.app.switch_interval,
                s.app.timeslice,
            );
            let dynos = filled(n, Slicer::new(s.app.processes, s.dyno_type.cores))?;
            Some(Box::new(Slices { rules, dynos }))
        } else {
            None
        };
        Ok(Cpu {
            sharings,
            store,
            slices,
            processes: s.app.processes,
        })
    }

    /// A CPU phase of `work` starts for `req` on a thread of `process` (after
    /// [`Self::advance`]).
    #[inline]
    pub fn add(&mut self, dyno: usize, req: u32, process: u32, work: f64, now: f64) {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].add(&sl.rules, req, process, work, now),
            None => self.sharings[dyno].add(&mut self.store, req, process, work),
        }
    }

    /// The router on the dyno's machine is given `work` more (after [`Self::advance`]): one
    /// thread of no app process, under no lock, doing what it is given in turn. With time
    /// slices it shares the cores as any thread; with processor sharing it is one more process
    /// (a group of its own, after the app's) whose one job's work grows.
    pub fn add_colocated(&mut self, dyno: usize, work: f64, now: f64) {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].add_colocated(&sl.rules, work, now),
            None => {
                let (cpu, store) = (&mut self.sharings[dyno], &mut self.store);
                // The router's one job: what it has left, done or not (a job at 0 whose
                // event has not run yet is still there), gains the new work.
                let left = cpu.remaining(store, COLOCATED_JOB);
                if left.is_some() {
                    cpu.remove(store, COLOCATED_JOB);
                }
                let left = left.unwrap_or(0.0).max(0.0);
                cpu.add(store, COLOCATED_JOB, self.processes, left + work);
            }
        }
    }

    /// The router's work left on the dyno is dropped (after [`Self::advance`]).
    pub fn remove_colocated(&mut self, dyno: usize, now: f64) {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].remove_colocated(&sl.rules, now),
            None => {
                self.sharings[dyno].remove(&mut self.store, COLOCATED_JOB);
            }
        }
    }

    /// Brings the dyno's CPU to `now`; returns the cores busy since the last change, and
    /// since when.
    #[inline]
    pub fn advance(&mut self, dyno: usize, now: f64) -> (f64, f64) {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].advance(now),
            None => self.sharings[dyno].advance(&mut self.store, now),
        }
    }

    /// Keeps the dyno's one CPU event in `events` at its next change.
    #[inline]
    pub fn reschedule(&mut self, dyno: usize, now: f64, events: &mut Events) {
        let event = Event::Cpu { dyno: dyno as u32 };
        match self.slices.as_deref_mut() {
            Some(sl) => {
                let s = &mut sl.dynos[dyno];
                match s.next_event(&sl.rules) {
                    Some(t) if !s.needs_event(t) => {}
                    Some(t) => {
                        s.set_scheduled(Some(t));
                        events.reschedule(t, event, s.soonest());
                    }
                    None => {
                        s.set_scheduled(None);
                        events.cancel(event);
                    }
                }
            }
            None => schedule_next(
                events,
                &mut self.sharings[dyno],
                &mut self.store,
                now,
                event,
            ),
        }
    }

    /// The dyno's CPU event came (after [`Self::advance`]): the jobs done by `now` into
    /// `done` (the router's, [`COLOCATED_JOB`], among them).
    #[inline]
    pub fn take_done(&mut self, dyno: usize, now: f64, done: &mut Vec<u32>) {
        match self.slices.as_deref_mut() {
            Some(sl) => {
                sl.dynos[dyno].set_scheduled(None);
                sl.dynos[dyno].take_done(&sl.rules, now, done);
            }
            None => {
                self.sharings[dyno].set_scheduled(None);
                self.sharings[dyno].take_done(&mut self.store, now, done);
            }
        }
    }

    /// The CPU work `req` has left (after [`Self::advance`]).
    pub fn remaining(&mut self, dyno: usize, req: u32, now: f64) -> Option<f64> {
        match self.slices.as_deref() {
            Some(sl) => sl.dynos[dyno].remaining(req, now),
            None => self.sharings[dyno].remaining(&mut self.store, req),
        }
    }

    /// Takes `req`'s CPU phase away (after [`Self::advance`]; reschedule after).
    pub fn remove(&mut self, dyno: usize, req: u32, now: f64) -> bool {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].remove(&sl.rules, req, now),
            None => self.sharings[dyno].remove(&mut self.store, req),
        }
    }

    /// A process's own slowdown (after [`Self::advance`]); true when it changed.
    pub fn set_group_factor(&mut self, dyno: usize, process: u32, factor: f64, now: f64) -> bool {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].set_group_factor(process, factor, now),
            None => self.sharings[dyno].set_group_factor(&mut self.store, process, factor),
        }
    }

    /// The dyno's slowdown (after [`Self::advance`]); true when it changed.
    pub fn set_slowdown(&mut self, dyno: usize, slowdown: f64, now: f64) -> bool {
        match self.slices.as_deref_mut() {
            Some(sl) => sl.dynos[dyno].set_slowdown(slowdown, now),
            None => self.sharings[dyno].set_slowdown(slowdown),
        }
    }

    /// Asks for the dyno's CPU state (see [`crate::alloc::prefetch`]).
    #[inline]
    pub fn prefetch(&self, dyno: usize) {
        prefetch_all(&self.sharings[dyno]);
        self.store.prefetch(dyno as u32);
    }
}

/// The store of every dyno's CPU jobs: a group per process (with `cpu`), each holding at most
/// the process's requests; and with `colocated` one group more, the router's on the dyno's
/// machine (`router.colocated_cpu`: one job).
fn store(s: &Scenario, dynos: u32, cpu: bool, colocated: bool) -> Result<SharingStore> {
    let app = &s.app;
    if cpu {
        SharingStore::new(
            dynos,
            app.processes + u32::from(colocated),
            Some(app.per_process),
            s.dyno_type.cores,
            app.lock.is_some(),
        )
    } else {
        SharingStore::new(dynos, 1, Some(0), s.dyno_type.cores, false)
    }
}
