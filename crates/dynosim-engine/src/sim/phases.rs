//! A request's work on its thread, phase by phase: `io` (a timed wait), `cpu` (a job on its
//! dyno's cores, shared by processor sharing, [`super::sharing`]; slowed by memory and malloc
//! arenas, [`super::memory`]), and `use` of a resource (a connection from its pool, then one
//! of its servers, first come first served or shared; its state is in [`super::resource`]).
//! The events that end them come here: `Done` (a timed phase, or an FCFS resource's service;
//! a `Done` that ends no phase is passed on to its owner), `Cpu` and `Shared`. When the last
//! phase is done, the response is [`super::threads`]'.

use super::cpu::COLOCATED_JOB;
use super::deadlines::Kind;
use super::events::Event;
use super::sharing::schedule_next;
use super::slab::{State, NONE};
use super::Simulation;
use crate::request::PhaseKind;
use crate::resource_spec::{Discipline, PoolScope};
use crate::result::ErrorKind;

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// How many times longer the app's work beginning at `now` takes (a slowdown, `[[faults]]`;
    /// 1 in a run without the feedback features, whose steps never look: `features.rs`).
    #[inline]
    pub(super) fn app_slowdown(&self, now: f64) -> f64 {
        if FEEDBACK {
            self.faults.app_slowdown(self.s, now)
        } else {
            1.0
        }
    }

    /// How many times longer resource `r`'s service beginning at `now` takes (as above).
    #[inline]
    fn resource_slowdown(&self, r: u32, now: f64) -> f64 {
        if FEEDBACK {
            self.faults.resource_slowdown(self.s, r, now)
        } else {
            1.0
        }
    }

    /// Resource `r`'s outage at `now`, if one is on (see [`super::faults::Faults`]).
    #[inline]
    fn resource_outage(&self, r: u32, now: f64) -> Option<Option<f64>> {
        if FEEDBACK {
            self.faults.resource_outage(self.s, r, now)
        } else {
            None
        }
    }

    /// Starts the request's current phase.
    pub(super) fn begin_phase(&mut self, req: u32) {
        let entry = &self.slab.entries[req as usize];
        let model = self.s.request.as_ref().expect("phases");
        let phase = &model.classes[entry.class as usize].phases[entry.phase as usize];
        let time = self.slab.time(req, entry.phase);
        let (dyno, process) = (entry.dyno as usize, entry.process);
        match phase.kind {
            PhaseKind::Io => {
                self.slab.entries[req as usize].state = State::Timed;
                let time = time * self.app_slowdown(self.now);
                self.events.schedule_done(self.now + time, req, dyno as u32);
            }
            // The server's own CPU, merged into the app's first CPU phase (`arrive`).
            PhaseKind::Cpu if time == 0.0 && phase.server => self.phase_done(req),
            PhaseKind::Cpu => {
                self.slab.entries[req as usize].state = State::Cpu;
                let time = time * self.app_slowdown(self.now);
                self.cpu_add(dyno, req, process, time);
            }
            // A call to another fleet: the thread waits for its answer, which the federation
            // of fleets delivers (`federation.rs`: `call_answered`, `call_failed`).
            PhaseKind::Call(site) => {
                let entry = &mut self.slab.entries[req as usize];
                entry.state = State::Timed;
                let generation = entry.generation;
                self.outbox.made.push(super::outbox::Made {
                    req,
                    generation,
                    site,
                });
            }
            // A resource out that refuses: the query fails at once (and its retries, at once
            // too), and the app answers 500.
            PhaseKind::Use(r) if self.resource_outage(r, self.now) == Some(None) => {
                self.slab.entries[req as usize].query_retries = 0;
                self.query_failed(r, req, ErrorKind::Outage)
            }
            PhaseKind::Use(r) => {
                let res = &mut self.resources[r as usize];
                let entry = &mut self.slab.entries[req as usize];
                entry.waited_since = self.now;
                entry.pool_wait = 0.0;
                entry.query_retries = 0;
                match res.pool_of(dyno as u32, process, self.s.app.processes) {
                    None => self.serve(r, req),
                    Some(p) => {
                        let pool = &mut res.pools[p];
                        if pool.free > 0 {
                            pool.free -= 1;
                            entry.pool = p as u32;
                            self.serve(r, req);
                        } else {
                            entry.state = State::PoolWait(r);
                            pool.waiting.push_back(req);
                        }
                    }
                }
            }
        }
    }

    /// The request has its connection (if any): resource `r` takes its query (from now on
    /// its `timeout`, statement_timeout, runs: `waited_since` is when), a server takes it or
    /// it queues; or an outage of the resource that hangs holds it until its end, or until
    /// the timeout if that comes first.
    fn serve(&mut self, r: u32, req: u32) {
        let now = self.now;
        let entry = &mut self.slab.entries[req as usize];
        entry.pool_wait = now - entry.waited_since;
        entry.waited_since = now;
        if let Some(Some(until)) = self.resource_outage(r, self.now) {
            let entry = &mut self.slab.entries[req as usize];
            entry.state = State::Hung(r);
            let dyno = entry.dyno;
            let end = match self.resources[r as usize].timeout {
                Some(t) if now + t < until => now + t,
                _ => until,
            };
            self.events.schedule_done(end, req, dyno);
            return;
        }
        self.serve_after_hang(r, req);
    }

    /// A hang of resource `r` that held `req` is over: at the outage's end, its query goes on;
    /// at its `timeout`, the query fails.
    fn hang_over(&mut self, r: u32, req: u32) {
        let taken = self.slab.entries[req as usize].waited_since;
        match self.resources[r as usize].timeout {
            Some(t) if self.now >= taken + t => {
                self.query_failed(r, req, ErrorKind::ResourceTimeout)
            }
            _ => self.serve_after_hang(r, req),
        }
    }

    /// [`Self::serve`], its pool wait counted (and any hang over). With a `timeout`, a query
    /// that will outlast it gets a statement deadline ([`Self::statement_due`] stops it): a
    /// first-come-first-served query when it queues, or when its service (known as it
    /// begins) would end after it; a shared one (PS) when it begins.
    pub(super) fn serve_after_hang(&mut self, r: u32, req: u32) {
        let now = self.now;
        let slowdown = self.resource_slowdown(r, self.now);
        let entry = &mut self.slab.entries[req as usize];
        let time =
            self.slab.times[req as usize * self.slab.stride + entry.phase as usize] * slowdown;
        let res = &mut self.resources[r as usize];
        match res.discipline {
            Discipline::Fcfs => {
                if res.busy < res.servers {
                    res.busy += 1;
                    entry.state = State::ResourceService(r);
                    let (arrival, pool_wait, dyno) = (entry.arrival, entry.pool_wait, entry.dyno);
                    self.measures
                        .resource_use(r as usize, arrival, pool_wait, 0.0);
                    let busy = f64::from(res.busy);
                    self.measures.resource_busy(r as usize, now, busy);
                    match res.timeout {
                        Some(t) if now + time > entry.waited_since + t => {
                            let at = entry.waited_since + t;
                            self.set_deadline(Kind::Statement, at, req);
                        }
                        _ => self.events.schedule_done(now + time, req, dyno),
                    }
                } else {
                    entry.state = State::ResourceQueue(r);
                    res.queue.push_back(req);
                    if let Some(t) = res.timeout {
                        let at = entry.waited_since + t;
                        self.set_deadline(Kind::Statement, at, req);
                    }
                }
            }
            Discipline::Ps => {
                entry.state = State::ResourceService(r);
                let (arrival, pool_wait) = (entry.arrival, entry.pool_wait);
                self.measures
                    .resource_use(r as usize, arrival, pool_wait, 0.0);
                res.sharing.advance(&mut res.store, now);
                res.sharing.add(&mut res.store, req, 0, time);
                let busy = res.sharing.busy_servers(&res.store);
                self.measures.resource_busy(r as usize, now, busy);
                if let Some(t) = res.timeout {
                    let at = entry.waited_since + t;
                    self.set_deadline(Kind::Statement, at, req);
                }
                self.reschedule_shared(r as usize);
            }
        }
    }

    /// Resource `r`'s `timeout` has come for the query of `req` (its deadline, see
    /// [`Self::serve_after_hang`]): the resource stops it, in its queue or on its server
    /// (freed at once for the next), and the query fails.
    pub(super) fn statement_due(&mut self, req: u32) {
        let state = self.slab.entries[req as usize].state;
        let r = match state {
            State::ResourceQueue(r) | State::ResourceService(r) | State::Orphan(r) => r,
            other => unreachable!("a statement deadline for a request in state {other:?}"),
        };
        let now = self.now;
        let res = &mut self.resources[r as usize];
        match res.discipline {
            Discipline::Fcfs => {
                // Queued (an orphan too, one the app stopped while it queued), or on a server
                // whose service would have ended later.
                let queued = match state {
                    State::ResourceQueue(_) => true,
                    _ => res.queue.contains(&req),
                };
                if queued {
                    let at = res.queue.iter().position(|&x| x == req);
                    res.queue
                        .remove(at.expect("a queued query is in its queue"));
                } else {
                    self.free_server(r);
                }
            }
            Discipline::Ps => {
                res.sharing.advance(&mut res.store, now);
                res.sharing.remove(&mut res.store, req);
                let busy = res.sharing.busy_servers(&res.store);
                self.measures.resource_busy(r as usize, now, busy);
                self.reschedule_shared(r as usize);
            }
        }
        self.query_failed(r, req, ErrorKind::ResourceTimeout);
    }

    /// The query of `req` on resource `r` failed with `error` (its `timeout`, an outage's
    /// refusal). The app tries it again at once while it has `retries` left, on the
    /// connection it holds, each try with a time of its own drawn from the phase's law (a
    /// try refused by an outage fails at once, with its retries); then the connection goes
    /// back and the app answers the error (500). Nobody waits for an orphan's query: it ends.
    fn query_failed(&mut self, r: u32, req: u32, mut error: ErrorKind) {
        if matches!(self.slab.entries[req as usize].state, State::Orphan(_)) {
            self.resource_done(r, req);
            return;
        }
        let retries = self.resources[r as usize].retries;
        while u32::from(self.slab.entries[req as usize].query_retries) < retries {
            let origin = self.origin(req);
            self.measures.app_retried(origin, 1);
            let refused = self.resource_outage(r, self.now) == Some(None);
            let entry = &mut self.slab.entries[req as usize];
            entry.query_retries += 1;
            if refused {
                error = ErrorKind::Outage;
                continue;
            }
            let model = self.s.request.as_ref().expect("phases");
            let phase = &model.classes[entry.class as usize].phases[entry.phase as usize];
            let at = req as usize * self.slab.stride + entry.phase as usize;
            entry.waited_since = self.now;
            self.slab.times[at] = phase.time.sample(&mut self.queries);
            self.serve(r, req);
            return;
        }
        let entry = &mut self.slab.entries[req as usize];
        entry.state = State::Thread;
        let pool = std::mem::replace(&mut entry.pool, NONE);
        if pool != NONE {
            self.release_connection(r, pool);
        }
        self.finish_with(req, Some(error));
    }

    fn reschedule_shared(&mut self, r: usize) {
        let event = Event::Shared { resource: r as u32 };
        let res = &mut self.resources[r];
        schedule_next(
            &mut self.events,
            &mut res.sharing,
            &mut res.store,
            self.now,
            event,
        );
    }

    pub(super) fn shared_done(&mut self, r: usize) {
        self.resources[r].sharing.set_scheduled(None);
        let now = self.now;
        let res = &mut self.resources[r];
        res.sharing.advance(&mut res.store, now);
        let mut done = std::mem::take(&mut self.done);
        let res = &mut self.resources[r];
        res.sharing.take_done(&mut res.store, now, &mut done);
        let busy = self.resources[r]
            .sharing
            .busy_servers(&self.resources[r].store);
        self.measures.resource_busy(r, now, busy);
        self.reschedule_shared(r);
        for &req in &done {
            self.resource_done(r as u32, req);
        }
        done.clear();
        self.done = done;
    }

    /// A timed phase ended: a hold, an io wait, or an FCFS resource's service.
    pub(super) fn timed_done(&mut self, req: u32) {
        match self.slab.entries[req as usize].state {
            State::Timed => {
                if self.phases {
                    self.phase_done(req)
                } else {
                    self.finish(req)
                }
            }
            State::ResourceService(r) | State::Orphan(r) => {
                self.free_server(r);
                self.resource_done(r, req);
            }
            State::Connecting => {
                let dyno = self.slab.entries[req as usize].dyno as usize;
                self.reach(dyno, req);
            }
            State::AtRouter => self.routed(req),
            State::Retrying => self.retry(req),
            State::Overhead => self.free_thread(req),
            // An outage that held it has ended: its first phase, or its use of the resource.
            State::Hung(NONE) => self.begin_phase(req),
            State::Hung(r) => self.hang_over(r, req),
            State::Dead => self.slab.release(req),
            other => unreachable!("a timed event for a request in state {other:?}"),
        }
    }

    /// An FCFS server of resource `r` is free: it takes the first query waiting, if any.
    fn free_server(&mut self, r: u32) {
        let res = &mut self.resources[r as usize];
        res.busy -= 1;
        if let Some(next) = res.queue.pop_front() {
            let slowdown = self.resource_slowdown(r, self.now);
            let res = &mut self.resources[r as usize];
            res.busy += 1;
            let entry = &mut self.slab.entries[next as usize];
            // One the app stopped while it queued (`app.service_timeout`) stays an
            // orphan: the resource, not told, serves it for nobody.
            if entry.state == State::ResourceQueue(r) {
                entry.state = State::ResourceService(r);
            }
            let time =
                self.slab.times[next as usize * self.slab.stride + entry.phase as usize] * slowdown;
            let (arrival, pool_wait, queued, dyno) = (
                entry.arrival,
                entry.pool_wait,
                self.now - entry.waited_since,
                entry.dyno,
            );
            self.measures
                .resource_use(r as usize, arrival, pool_wait, queued);
            match res.timeout {
                // Its statement deadline, set when it queued, stops it.
                Some(t) if self.now + time > entry.waited_since + t => {}
                _ => self.events.schedule_done(self.now + time, next, dyno),
            }
        }
        let busy = f64::from(self.resources[r as usize].busy);
        self.measures.resource_busy(r as usize, self.now, busy);
    }

    /// The resource is done with the request: its connection goes back to the pool (to the
    /// next request waiting for one), and the request goes on.
    fn resource_done(&mut self, r: u32, req: u32) {
        let entry = &mut self.slab.entries[req as usize];
        let pool = std::mem::replace(&mut entry.pool, NONE);
        let dead = matches!(entry.state, State::Orphan(_));
        // A dead request's per-dyno or per-process pool went with its dyno's restart.
        let pool_survived = !dead || self.resources[r as usize].scope == Some(PoolScope::App);
        if pool != NONE && pool_survived {
            self.release_connection(r, pool);
        }
        if dead {
            self.slab.release(req);
        } else {
            self.phase_done(req);
        }
    }

    /// A connection goes back to its pool: to the first request waiting for one, if any.
    pub(super) fn release_connection(&mut self, r: u32, pool: u32) {
        let p = &mut self.resources[r as usize].pools[pool as usize];
        if let Some(next) = p.waiting.pop_front() {
            self.slab.entries[next as usize].pool = pool;
            self.serve(r, next);
        } else {
            p.free += 1;
        }
    }

    /// The request's current phase is over: the next, or its response.
    pub(super) fn phase_done(&mut self, req: u32) {
        let entry = &mut self.slab.entries[req as usize];
        entry.phase += 1;
        let model = self.s.request.as_ref().expect("phases");
        if (entry.phase as usize) < model.classes[entry.class as usize].phases.len() {
            self.begin_phase(req);
        } else {
            self.finish(req);
        }
    }
    /// A CPU phase of `work` starts for `req` on a thread of `process`.
    pub(super) fn cpu_add(&mut self, dyno: usize, req: u32, process: u32, work: f64) {
        self.cpu_advance(dyno);
        self.cpu.add(dyno, req, process, work, self.now);
        self.reschedule_cpu(dyno);
    }

    /// The router on the dyno's machine (`router.colocated_cpu`) works `work` seconds on the
    /// dyno's cores (see [`super::cpu::Cpu::add_colocated`]).
    pub(super) fn cpu_add_colocated(&mut self, dyno: usize, work: f64) {
        if work <= 0.0 {
            return;
        }
        self.cpu_advance(dyno);
        self.cpu.add_colocated(dyno, work, self.now);
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
        self.cpu.remove_colocated(dyno, self.now);
        self.reschedule_cpu(dyno);
    }

    /// Brings the dyno's CPU to now, counting its busy cores since the last change.
    pub(super) fn cpu_advance(&mut self, dyno: usize) {
        let now = self.now;
        let (busy, from) = self.cpu.advance(dyno, now);
        if busy > 0.0 {
            self.measures.cpu(from, now, busy);
            if Self::LIFECYCLE {
                if let Some(scaling) = self.scaling.as_deref_mut() {
                    scaling.cpu(from, now, busy);
                }
            }
        }
    }

    /// Keeps the dyno's one CPU event at its next change.
    pub(super) fn reschedule_cpu(&mut self, dyno: usize) {
        self.cpu.reschedule(dyno, self.now, &mut self.events);
    }

    /// The dyno's CPU event: the phases that ended go on.
    pub(super) fn cpu_done(&mut self, dyno: usize) {
        let mut done = std::mem::take(&mut self.done);
        self.cpu_advance(dyno);
        self.cpu.take_done(dyno, self.now, &mut done);
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
}
