//! A request at its dyno: it reaches it (from [`super::dispatch`]), waits for a thread (in the
//! accept queue the processes share, or with greedy accept in a process's own queue; a full
//! `app.backlog` refuses it, back to its router), a thread takes it (its app timeout starts,
//! the dyno's memory grows), then holds it for its `[service]` time or through its phases
//! ([`super::phases`]); its response goes to the router and the client, and the thread, free
//! again (after `app.overhead`), takes the next request waiting. A request the app stops
//! (`app.service_timeout`, [`super::timeouts`]) is answered here too, with its error. The dyno's own state (its
//! accept queue, processes, CPU) is in [`super::dyno`].

use super::deadlines::Kind;
use super::faults::Gate;
use super::slab::{State, NONE};
use super::Simulation;
use crate::app::Accept;
use crate::result::ErrorKind;

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// The request reaches its dyno: a thread takes it, or it waits for one; a dyno that got
    /// its SIGTERM since the router sent it there refuses it (it raced the dyno going down:
    /// H13).
    #[inline(always)]
    pub(super) fn reach(&mut self, dyno: usize, req: u32) {
        // A call its caller cancelled on its way (`cancel`, `federation.rs`): dropped here.
        if EXTRAS && self.outbox.serves && self.slab.entries[req as usize].client == NONE {
            return self.drop_cancelled(dyno, req, false);
        }
        if Self::LIFECYCLE && self.dynos[dyno].closed {
            return self.raced(dyno, req);
        }
        if FEEDBACK && self.limits.is_some() && !self.limit_admits_at_dyno(dyno, req) {
            return;
        }
        if let (false, Accept::Greedy { limit }) = (PLAIN, self.s.app.accept) {
            return self.accept_greedily(dyno, req, limit);
        }
        match self.procs.free(dyno, self.s.app.per_process) {
            Some(process) => self.start(dyno, process, req),
            None => self.wait_on_dyno(dyno, req, None),
        }
    }

    /// Greedy accept: a process with room, drawn at random, takes the connection, and runs it
    /// on a free thread or queues it for its own threads; with no process having room it
    /// waits in the dyno's backlog.
    fn accept_greedily(&mut self, dyno: usize, req: u32, limit: u32) {
        let Some(process) = self.procs.accepting(dyno, limit) else {
            return self.wait_on_dyno(dyno, req, None);
        };
        let p = self.procs.of_mut(dyno, process);
        p.held += 1;
        if p.busy < self.s.app.per_process {
            self.start(dyno, process, req);
        } else {
            self.wait_on_dyno(dyno, req, Some(process));
        }
    }

    /// The request waits on the dyno for a thread: in the accept queue, or in `process`'s own.
    fn wait_on_dyno(&mut self, dyno: usize, req: u32, process: Option<u32>) {
        if let (None, Some(backlog)) = (process, self.s.app.backlog) {
            if self.dynos[dyno].accept.len >= backlog {
                return self.refused(dyno, req);
            }
        }
        self.queued += 1;
        let entry = &mut self.slab.entries[req as usize];
        entry.state = State::Accept;
        entry.waited = true;
        match process {
            None => self.slab.push_back(&mut self.dynos[dyno].accept, req),
            Some(p) => self.procs.queue(dyno, p).push_back(req),
        }
        let d = &mut self.dynos[dyno];
        d.waiting += 1;
        self.measures.dyno_queue(dyno, self.now, d.waiting as usize);
        self.waiting_total += 1;
    }

    /// A thread of `process` on `dyno` takes the request.
    #[inline]
    pub(super) fn start(&mut self, dyno: usize, process: u32, req: u32) {
        let now = self.now;
        let arrival = self.slab.entries[req as usize].arrival;
        let gate = if FEEDBACK {
            self.faults.gate(self.s, arrival, now)
        } else {
            Gate::Open
        };
        if !PLAIN {
            if let Some(t) = self.draw_timeout(Kind::App) {
                self.set_deadline(Kind::App, now + t, req);
            }
        }
        if FEEDBACK {
            if let Some(t) = self.s.app.service_timeout {
                self.set_deadline(Kind::Service, now + t, req);
            }
        }
        // A `[service]` hold: its time on the thread is known now.
        let service = if !PLAIN && self.phases {
            0.0
        } else {
            let drawn = self.slab.entries[req as usize].service;
            match gate {
                Gate::Open => drawn * self.app_slowdown(now),
                Gate::Hang(until) => (until - now) + drawn * self.app_slowdown(until),
                Gate::Refuse(_) => 0.0,
            }
        };
        let d = &mut self.dynos[dyno];
        d.busy += 1;
        let proc = self.procs.of_mut(dyno, process);
        proc.busy += 1;
        let first = proc.busy == 1;
        let entry = &mut self.slab.entries[req as usize];
        entry.process = process;
        entry.start = now;
        if Self::LIFECYCLE {
            if let Some(scaling) = self.scaling.as_deref_mut() {
                scaling.queue_time(now, now - entry.arrival);
                scaling.threads(now, 1.0);
            }
        }
        if !PLAIN && entry.waited && (self.s.connect.is_some() || self.s.router_cost.is_some()) {
            self.measures.waited(entry.arrival, now);
        }
        if PLAIN || !self.phases {
            self.measures.started(dyno, entry.arrival, now, service);
            if let Gate::Refuse(_) = gate {
                // Answered below, once the thread is counted.
                entry.state = State::Thread;
            } else {
                entry.state = State::Timed;
                self.events.schedule_done(now + service, req, dyno as u32);
            }
        } else {
            entry.state = State::Thread;
            self.measures.took_thread(entry.arrival, now);
        }
        if first {
            d.busy_processes += 1;
            self.procs.busy += 1;
        }
        // A plain run has no memory, arenas, dyno-model levels or phases, and its gate is open
        // (no faults): the `[service]` hold's end is scheduled above, and that is all.
        if PLAIN {
            return;
        }
        let m = &self.s.app.memory;
        let mut grow = 0.0;
        if self.procs.arenas {
            // A thread that finds every arena in use makes a new one, up to the limit.
            let proc = self.procs.of_mut(dyno, process);
            if proc.busy > proc.arenas + 1 && proc.arenas + 1 < m.arena_max {
                proc.arenas += 1;
                grow += m.arena;
            }
        }
        if self.memory.modelled {
            grow += m.request;
            self.memory_changed(dyno, grow);
            if !self.dynos[dyno].up {
                return;
            }
        }
        if self.measures.detailed() && first {
            self.fleet_levels();
        }
        if self.phases {
            self.contention(dyno, process);
        }
        match gate {
            Gate::Refuse(error) => self.finish_with(req, Some(error)),
            Gate::Open if self.phases => self.begin_phase(req),
            Gate::Hang(until) if self.phases => {
                self.slab.entries[req as usize].state = State::Hung(NONE);
                self.events.schedule_done(until, req, dyno as u32);
            }
            Gate::Open | Gate::Hang(_) => {}
        }
    }

    /// The response: the router may send what it held, and a closed-loop client thinks. The
    /// thread is free for the next request in the accept queue now, or after the app's
    /// overhead.
    #[inline]
    pub(super) fn finish(&mut self, req: u32) {
        self.finish_with(req, None);
    }

    /// The app's answer: its response, or (`error`) an error it answers instead (an outage,
    /// `app.wait_timeout`, `app.service_timeout`); what follows is a response's.
    pub(super) fn finish_with(&mut self, req: u32, error: Option<ErrorKind>) {
        let now = self.now;
        let entry = &mut self.slab.entries[req as usize];
        let (dyno, router, arrival, client, class, answered, router_done, dispatched) = (
            entry.dyno as usize,
            entry.router as usize,
            entry.arrival,
            entry.client,
            entry.class,
            entry.answered,
            entry.router_done,
            entry.dispatched,
        );
        entry.answered = true;
        entry.router_done = true;
        if FEEDBACK && self.limits.is_some() {
            self.limits_answered(req, dyno, router, router_done, error);
        }
        match error {
            _ if answered => {}
            None => {
                // The user request's figures run from its first try.
                let origin = self.origin(req);
                self.measures.completed(origin, now);
                if FEEDBACK {
                    self.measures.goodput(now);
                }
                self.answered(arrival);
                if !PLAIN && self.measures.detailed() {
                    self.measures.class_completed(class as usize, origin, now);
                }
                self.try_succeeded(arrival);
            }
            // Its client: a retry, or the error (and its next send) now.
            // Its router may try another dyno (`router.retry_on`); else its client has it.
            Some(error) => {
                if !self.redispatch(req, error) {
                    self.client_error(req, error, 0.0)
                }
            }
        }
        if !router_done {
            self.count_done(router, dyno);
            self.routers.in_flight[router] -= 1;
            if self.routers.learns_responses {
                self.routers.responded(router, dyno, now - dispatched, now);
            }
            // A router on the dyno's machine relays the response (one that gave up on the
            // request, H12, has closed its connection to the dyno: nothing to relay).
            if let Some(colocated) = self.colocated.as_ref().filter(|_| !PLAIN) {
                let half = colocated.half(req);
                self.cpu_add_colocated(dyno, half);
            }
        }
        self.prune_deadlines();
        // A request the app stopped with an event of its own still to come (a timed wait's
        // end, a query its resource runs on: `app.service_timeout`) keeps its entry for that
        // event; its thread goes on with a copy.
        let req = match self.slab.entries[req as usize].state {
            State::Dead | State::Orphan(_) if FEEDBACK => self.thread_copy(req),
            _ => req,
        };
        match self.s.app.overhead.as_ref().filter(|_| !PLAIN) {
            None => self.free_thread(req),
            Some(overhead) => {
                let time = overhead.sample(&mut self.procs.overhead_rng);
                if !self.phases {
                    self.measures.overhead(dyno, now, time);
                }
                let at = now + time;
                self.slab.entries[req as usize].state = State::Overhead;
                self.events.schedule_done(at, req, dyno as u32);
            }
        }
        self.drain_router(router);
        if !answered && error.is_none() {
            self.respond(client);
        }
    }

    /// A new entry for the thread of `req`, whose own entry waits for an event (see
    /// [`Self::finish_with`]): what the thread's end reads of it (its dyno, process, start,
    /// and what its client's going left to waste).
    #[cold]
    fn thread_copy(&mut self, req: u32) -> u32 {
        let copy = self.slab.insert();
        let generation = self.slab.entries[copy as usize].generation;
        let mut e = self.slab.entries[req as usize].clone();
        e.generation = generation;
        e.state = State::Thread;
        e.pool = NONE;
        e.next = NONE;
        self.slab.entries[copy as usize] = e;
        copy
    }

    /// The thread is done with the request: it takes the next request waiting on the dyno.
    pub(super) fn free_thread(&mut self, req: u32) {
        let now = self.now;
        let entry = &self.slab.entries[req as usize];
        let (dyno, process, start) = (entry.dyno as usize, entry.process, entry.start);
        let d = &mut self.dynos[dyno];
        d.busy -= 1;
        let closed = Self::LIFECYCLE && d.closed;
        let proc = self.procs.of_mut(dyno, process);
        proc.busy -= 1;
        let emptied = proc.busy == 0;
        if Self::LIFECYCLE {
            if let Some(scaling) = self.scaling.as_deref_mut() {
                scaling.threads(now, -1.0);
            }
        }
        if emptied {
            d.busy_processes -= 1;
            self.procs.busy -= 1;
        }
        if !PLAIN && self.phases {
            self.measures.held(dyno, start, now);
        }
        let (abandoned_at, arrival, cpu_left) = (entry.abandoned_at, entry.arrival, entry.cpu_left);
        // A plain run's requests are abandoned only at their router's timeout (H12).
        if (!PLAIN || self.deadlines.prunes()) && abandoned_at.is_finite() {
            self.measures
                .wasted_thread(arrival, now - abandoned_at.max(start));
            self.measures.wasted_cpu(arrival, cpu_left);
        }
        self.slab.release(req);
        if !PLAIN && self.phases {
            self.contention(dyno, process);
        }
        if PLAIN {
            // No memory, and no dyno-model levels to tell the observer.
        } else if self.memory.modelled {
            let grow = -self.s.app.memory.request;
            self.memory_changed(dyno, grow);
        } else if emptied && self.measures.detailed() {
            self.fleet_levels();
        }
        if !Self::LIFECYCLE || self.dynos[dyno].up {
            self.take_next(dyno, process);
        }
        if closed {
            self.exit_if_idle(dyno);
        }
        self.idle_check(dyno);
    }

    /// The thread of `process` on `dyno` that a request has just left takes the next request
    /// waiting (a process's own accept loop). A call its caller cancelled meanwhile
    /// (`cancel`, `federation.rs`) is dropped as it comes out, as if it had left the thread at
    /// once, and the thread takes the next.
    fn take_next(&mut self, dyno: usize, process: u32) {
        loop {
            let next = if PLAIN || !self.procs.greedy() {
                self.slab.pop_front(&mut self.dynos[dyno].accept)
            } else {
                // Greedy: the process's own queue first (it holds one fewer); else a
                // backlogged request fills the room this one leaves (it holds as many).
                match self.procs.queue(dyno, process).pop_front() {
                    Some(own) => {
                        self.procs.of_mut(dyno, process).held -= 1;
                        Some(own)
                    }
                    None => {
                        let backlog = self.slab.pop_front(&mut self.dynos[dyno].accept);
                        if backlog.is_none() {
                            self.procs.of_mut(dyno, process).held -= 1;
                        }
                        backlog
                    }
                }
            };
            let Some(next) = next else {
                return;
            };
            self.dynos[dyno].waiting -= 1;
            self.waiting_total -= 1;
            if EXTRAS && self.outbox.serves && self.slab.entries[next as usize].client == NONE {
                self.drop_cancelled(dyno, next, true);
                continue;
            }
            // The thread just freed takes it.
            self.start(dyno, process, next);
            return;
        }
    }

    /// A request reached a dyno that had closed its listener (SIGTERM) since its router
    /// sent it there: the connection is refused and the client gets an H13.
    #[cold]
    fn raced(&mut self, dyno: usize, req: u32) {
        // Its own event is over: nothing pending keeps its entry, and no thread took it.
        self.slab.entries[req as usize].state = State::Accept;
        let mut released = Vec::new();
        self.kill(req, dyno, crate::result::ErrorKind::H13, &mut released);
    }

    /// A process's busy threads or arenas changed: its CPU work's contention for malloc
    /// arenas (see [`crate::app::Memory::contention`]).
    pub(super) fn contention(&mut self, dyno: usize, process: u32) {
        let m = &self.s.app.memory;
        if m.arena_contention == 0.0 {
            return;
        }
        let proc = self.procs.of(dyno, process);
        let factor = m.contention(proc.busy, 1 + proc.arenas);
        self.cpu_advance(dyno);
        if self.cpu.set_group_factor(dyno, process, factor, self.now) {
            self.reschedule_cpu(dyno);
        }
    }

    /// Tells the observer the fleet's busy processes, memory and dynos over quota.
    pub(super) fn fleet_levels(&mut self) {
        self.measures.fleet_levels(
            self.now,
            f64::from(self.procs.busy),
            self.memory.fleet,
            f64::from(self.memory.over_quota),
        );
    }

    /// A dyno's memory changed by `delta` bytes: R14 slows its CPU, R15 restarts it.
    pub(super) fn memory_changed(&mut self, dyno: usize, delta: f64) {
        let bytes = self.memory.change(dyno, delta);
        self.measures.dyno_memory(self.now, bytes);
        self.fleet_levels();
        let m = &self.s.app.memory;
        if bytes >= m.restart_at {
            self.restart(dyno);
            return;
        }
        if self.phases {
            let slowdown = m.slowdown(bytes);
            self.cpu_advance(dyno);
            if self.cpu.set_slowdown(dyno, slowdown, self.now) {
                self.reschedule_cpu(dyno);
            }
        }
    }
}
