//! Dynos and workers coming up and going down: the dyno's lifecycle (its stages are in
//! [`super::fleet`]). A dyno starts (an autoscaler's scale-up), boots for `fleet.boot_time`
//! (R10 past `fleet.boot_timeout`: it crashes and boots again) and is up: the routers send it
//! requests ([`super::router::Routers::bring_up`]). A scale-down marks the last started dynos
//! down at once, SIGTERMs them `fleet.stop_delay` later (the server closes its listener: its
//! backlog and later arrivals fail, H13) and SIGKILLs them `fleet.shutdown_grace` after that
//! (what they still hold fails, `errors.shutdown`); a dyno exits as soon as it holds nothing.
//! R15 restarts a dyno: every request on it fails, its per-dyno and per-process pools go with
//! it, and it boots again. `app.timeout` kills a sync worker: its request fails, and its
//! replacement takes requests after `app.worker_boot_time`. All end requests through
//! [`Simulation::kill`]: what a request gives back when what runs it dies. Whatever else
//! takes a dyno or a worker down, or brings one up, belongs here too.

use super::deadlines::{Deadline, Kind};
use super::dyno::Dyno;
use super::events::Event;
use super::events::{AUTOSCALE, DEPLOY, FAULT};
use super::fleet::Life;
use super::memory;
use super::slab::{Fifo, State, NONE};
use super::Simulation;
use crate::resource_spec::PoolScope;
use crate::result::ErrorKind;
use crate::scenario::CYCLING_JITTER;
use rand::Rng;

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// `app.timeout`: the sync worker holding `req` is killed (its request fails), and
    /// replaced after `app.worker_boot_time`; meanwhile it takes no request.
    pub(super) fn kill_worker(&mut self, req: u32) {
        let e = &self.slab.entries[req as usize];
        let (dyno, process, router) = (e.dyno as usize, e.process, e.router as usize);
        let mut released = Vec::new();
        self.kill(req, dyno, ErrorKind::AppTimeout, &mut released);
        for (r, pool) in released {
            self.release_connection(r, pool);
        }
        if self.phases {
            self.reschedule_cpu(dyno);
        }
        // The worker's own pools go with it.
        let processes = self.s.app.processes as usize;
        for (res, spec) in self.resources.iter_mut().zip(&self.s.resources) {
            if res.scope == Some(PoolScope::Process) {
                res.pools[dyno * processes + process as usize].free = spec.pool.map_or(0, |p| p.0);
            }
        }
        self.dynos[dyno].busy -= 1;
        self.dynos[dyno].busy_processes -= 1;
        self.procs.busy -= 1;
        let m = &self.s.app.memory;
        let proc = self.procs.of_mut(dyno, process);
        debug_assert!(
            proc.busy == 1 && !proc.down,
            "a sync worker busy with one request"
        );
        proc.down = true;
        proc.kills += 1;
        let kills = proc.kills;
        let freed = m.request + f64::from(std::mem::take(&mut proc.arenas)) * m.arena;
        if self.memory.modelled {
            self.memory_changed(dyno, -freed);
        } else if self.measures.detailed() {
            self.fleet_levels();
        }
        let at = self.now + self.s.app.worker_boot_time;
        let worker = (dyno * processes) as u32 + process;
        self.push_deadline(
            Kind::WorkerBoot,
            Deadline {
                at,
                req: worker,
                generation: kills,
            },
        );
        // The router counts one request fewer at the dyno: it may send what it holds (to
        // wait there for the worker's replacement, as a router that does not know would).
        self.drain_router(router);
        self.exit_if_idle(dyno);
        self.idle_check(dyno);
    }

    /// A killed worker's replacement is up (unless its dyno restarted since, which replaced
    /// every worker): it takes the next request waiting at its dyno.
    pub(super) fn worker_boot(&mut self, worker: u32, kills: u32) {
        let processes = self.s.app.processes;
        let (dyno, process) = ((worker / processes) as usize, worker % processes);
        let proc = self.procs.of_mut(dyno, process);
        if !(proc.down && proc.kills == kills) {
            return;
        }
        proc.down = false;
        proc.busy = 0;
        if self.dynos[dyno].up {
            if let Some(next) = self.slab.pop_front(&mut self.dynos[dyno].accept) {
                self.dynos[dyno].waiting -= 1;
                self.waiting_total -= 1;
                self.start(dyno, process, next);
            }
        }
    }

    /// A request on (or waiting at) `dyno` dies with its worker or its dyno: its client gets
    /// `error` unless it was answered before, the router stops counting it, and whatever it
    /// held is let go. Its entry is freed now, or when an event of its own comes. An app-wide
    /// pool's connection it held goes into `released`, for the caller to hand on. The thread
    /// itself (the dyno's and process's counts) is the caller's to free.
    pub(super) fn kill(
        &mut self,
        req: u32,
        dyno: usize,
        error: ErrorKind,
        released: &mut Vec<(u32, u32)>,
    ) {
        let now = self.now;
        let e = &self.slab.entries[req as usize];
        let on_thread = !matches!(e.state, State::Accept | State::Connecting);
        if on_thread {
            // The thread's time on it: counted up to now (a `[service]` hold counted its
            // whole time when it started), and wasted from the error on.
            let (arrival, start, service) = (e.arrival, e.start, e.service);
            if self.phases {
                self.measures.held(dyno, start, now);
            } else if e.state == State::Timed {
                self.measures.unbusy(dyno, now, start + service);
            }
            if e.abandoned_at.is_finite() {
                let seconds = now - e.abandoned_at.max(start);
                self.measures.wasted_thread(arrival, seconds);
            }
        }
        let e = &mut self.slab.entries[req as usize];
        let (router, state) = (e.router, e.state);
        let (answered, router_done) = (e.answered, e.router_done);
        e.answered = true;
        e.router_done = true;
        // What the entry becomes: freed now, or kept until an event of its own comes.
        let pending = match state {
            State::Timed | State::Connecting => Some(State::Dead),
            // Held by an outage: its event comes at the outage's end; an app-wide pool's
            // connection it had goes to the next.
            State::Hung(r) => {
                if r != NONE
                    && e.pool != NONE
                    && self.resources[r as usize].scope == Some(PoolScope::App)
                {
                    released.push((r, e.pool));
                }
                Some(State::Dead)
            }
            State::ResourceService(r) => Some(State::Orphan(r)),
            State::Cpu => {
                self.cpu_advance(dyno);
                self.cpu.remove(dyno, req, self.now);
                None
            }
            State::PoolWait(r) => {
                for p in &mut self.resources[r as usize].pools {
                    p.waiting.retain(|&x| x != req);
                }
                None
            }
            State::ResourceQueue(r) => {
                let res = &mut self.resources[r as usize];
                res.queue.retain(|&x| x != req);
                if e.pool != NONE && res.scope == Some(PoolScope::App) {
                    released.push((r, e.pool));
                }
                None
            }
            State::Accept
            | State::Routing
            | State::AtRouter
            | State::Retrying
            | State::Thread
            | State::Overhead
            | State::Dead
            | State::Orphan(_)
            | State::Free => None,
        };
        if !router_done {
            self.count_done(router as usize, dyno);
            self.routers.in_flight[router as usize] -= 1;
        }
        // Dead with its dyno (or its worker): no latency for a limiter to learn.
        self.limit_end_dyno(req, dyno, super::limit::Ended::Ignored);
        if on_thread {
            if let Some(scaling) = self.scaling.as_deref_mut() {
                scaling.threads(now, -1.0);
            }
        }
        // The client's answer, while the entry still holds what the try was.
        if !answered && !self.redispatch(req, error) {
            self.client_error(req, error, 0.0);
        }
        match pending {
            Some(kept) => self.slab.entries[req as usize].state = kept,
            None => self.slab.release(req),
        }
    }

    /// Schedules the first fault that acts at an instant (`[[faults]]`, see [`super::faults`]).
    pub(super) fn schedule_first_fault(&mut self) {
        if let Some(at) = self.faults.first() {
            self.events.schedule(at, FAULT, Event::Fault);
        }
    }

    /// The fault due now (`dynos_lost`): `count` dynos up crash, and boot again.
    pub(super) fn fault_due(&mut self) {
        let (count, next) = self.faults.take_due();
        if let Some(at) = next {
            self.events.schedule(at, FAULT, Event::Fault);
        }
        let up: Vec<usize> = (0..self.fleet.life.len())
            .filter(|&d| self.fleet.life[d] == Life::Up)
            .take(count as usize)
            .collect();
        for dyno in up {
            self.crash(dyno, ErrorKind::Crashed);
        }
    }

    /// R15: the dyno is restarted. Every request on it fails; it boots again after
    /// `fleet.boot_time` (the same dyno: the formation keeps it). A dyno that was stopping
    /// anyway exits instead. Work a resource already has in hand for it runs to its end (the
    /// database does not know), and then gives its connection back.
    pub(super) fn restart(&mut self, dyno: usize) {
        self.measures.restarted(self.now);
        self.crash(dyno, ErrorKind::R15);
    }

    /// The dyno crashes: every request on it fails with `error`, and it boots again after
    /// `fleet.boot_time` (an R15, a dyno lost to a fault); one that was stopping anyway exits.
    pub(super) fn crash(&mut self, dyno: usize, error: ErrorKind) {
        let stopping = matches!(self.fleet.life[dyno], Life::Draining | Life::Terminating);
        if self.fleet.life[dyno] == Life::Up {
            for other in self.routers.take_down(dyno) {
                self.idle_check(other);
            }
        }
        self.kill_all(dyno, error);
        if stopping {
            self.exit(dyno);
        } else {
            self.fleet.set(dyno, Life::Booting);
            self.dynos[dyno].up = false;
            self.boot_begin(dyno);
        }
        self.fleet_changed();
    }

    /// Every request on `dyno` (waiting at it, or on its threads) fails with `error`, and the
    /// dyno is back to a fresh boot's state: no requests, idle memory, its pools full.
    fn kill_all(&mut self, dyno: usize, error: ErrorKind) {
        self.cpu_advance(dyno);
        let d = &mut self.dynos[dyno];
        // The requests on it: those in its accept queue and those its threads hold.
        let mut accept = std::mem::replace(&mut d.accept, Fifo::EMPTY);
        d.waiting = 0;
        let mut victims: Vec<u32> =
            std::iter::from_fn(|| self.slab.pop_front(&mut accept)).collect();
        for queue in self.procs.queues_of(dyno) {
            victims.extend(queue.drain(..));
        }
        self.waiting_total -= victims.len();
        let on_threads: Vec<u32> = (0..self.slab.entries.len() as u32)
            .filter(|&i| {
                let e = &self.slab.entries[i as usize];
                e.dyno as usize == dyno
                    && !matches!(
                        e.state,
                        State::Routing
                            | State::AtRouter
                            | State::Retrying
                            | State::Accept
                            | State::Overhead
                            | State::Dead
                            | State::Orphan(_)
                            | State::Free
                    )
            })
            .collect();
        victims.extend(on_threads);
        // Answered requests whose threads were still busy with them: nothing fails, the entry
        // goes when its event comes.
        let mut overheads = 0u32;
        for e in &mut self.slab.entries {
            if e.dyno as usize == dyno && e.state == State::Overhead {
                e.state = State::Dead;
                overheads += 1;
            }
        }
        if let Some(scaling) = self.scaling.as_deref_mut() {
            scaling.threads(self.now, -f64::from(overheads));
        }
        let mut released = Vec::new();
        for req in victims {
            self.kill(req, dyno, error, &mut released);
        }
        self.reschedule_cpu(dyno);
        self.cpu_drop_colocated(dyno);
        // Connections of an app-wide pool held by its requests go to whoever waits for one.
        for (r, pool) in released {
            self.release_connection(r, pool);
        }
        // Its per-dyno and per-process pools go with it.
        let processes = self.s.app.processes;
        for (res, spec) in self.resources.iter_mut().zip(&self.s.resources) {
            let size = spec.pool.map_or(0, |p| p.0);
            match res.scope {
                Some(PoolScope::Dyno) => res.pools[dyno].free = size,
                Some(PoolScope::Process) => {
                    for p in 0..processes as usize {
                        res.pools[dyno * processes as usize + p].free = size;
                    }
                }
                _ => {}
            }
        }
        let busy_before = self.dynos[dyno].busy_processes;
        self.dynos[dyno] = Dyno {
            up: false,
            ..Dyno::IDLE
        };
        self.procs.reset(dyno);
        self.procs.busy -= busy_before;
        self.set_memory(dyno, memory::idle(&self.s.app));
    }

    /// `dyno` holds `bytes` from now on (the fleet's totals and its CPU's slowdown follow).
    fn set_memory(&mut self, dyno: usize, bytes: f64) {
        self.memory.set(dyno, bytes);
        self.fleet_levels();
        let slowdown = self.s.app.memory.slowdown(bytes);
        let _ = self.cpu.set_slowdown(dyno, slowdown, self.now);
    }

    /// `dyno` starts booting: its boot time is drawn; it is up at the boot's end, or crashes
    /// (R10) at `fleet.boot_timeout` if the boot would take longer.
    fn boot_begin(&mut self, dyno: usize) {
        let boot = self.s.boot_time.sample(&mut self.fleet.boot_rng);
        let timeout = self.s.lifecycle.boot_timeout;
        // A dyno restarted for memory in a fixed fleet boots as it always did: the boot
        // timeout is the lifecycle's (an autoscaled fleet's).
        let in_time = !self.s.has_lifecycle() || boot < timeout;
        self.fleet.boots_in_time[dyno] = in_time;
        let at = self.now + if in_time { boot } else { timeout };
        self.events.reschedule_life(at, dyno as u32);
    }

    /// The next step of `dyno`'s life is due: its boot's end (or R10), its SIGTERM, or its
    /// SIGKILL.
    pub(super) fn life_event(&mut self, dyno: usize) {
        // The event may still be at the queue's root (a movable event popped in place).
        self.events.cancel(Event::Life { dyno: dyno as u32 });
        match self.fleet.life[dyno] {
            Life::Booting if self.fleet.boots_in_time[dyno] => self.boot(dyno),
            Life::Booting => {
                // R10: the boot timed out; the platform boots it again (while the run lasts).
                self.measures.boot_crashed(self.now);
                if self.now < self.measures.window_end() {
                    self.boot_begin(dyno);
                }
            }
            Life::Draining => self.sigterm(dyno),
            Life::Terminating => self.sigkill(dyno),
            // An up dyno's pending event is its daily restart.
            Life::Up => self.cycle(dyno),
            Life::Stopped => {
                debug_assert!(false, "a lifecycle event for a stopped dyno {dyno}")
            }
        }
    }

    /// `dyno`'s boot is over: it is up, and the routers may send it what they hold (a
    /// preboot deploy's new dyno waits for the others of its set). Its daily restart, if the
    /// fleet cycles, is due a day (and a random offset) from now.
    pub(super) fn boot(&mut self, dyno: usize) {
        self.dynos[dyno].up = true;
        self.fleet.set(dyno, Life::Up);
        if self.fleet.incoming.contains(&(dyno as u32)) {
            self.fleet.incoming_up += 1;
            if self.fleet.incoming_up as usize == self.fleet.incoming.len() {
                self.switch_to_incoming();
            }
            self.fleet_changed();
            return;
        }
        self.route_to(dyno);
        self.fleet_changed();
        for router in 0..self.routers.queues.len() {
            self.drain_router(router);
        }
    }

    /// `dyno`, up, takes requests from now on.
    fn route_to(&mut self, dyno: usize) {
        let moved = self.routers.bring_up(dyno, self.now);
        self.idle_check(dyno);
        for other in moved {
            self.idle_check(other);
        }
        self.measures.dyno_up(dyno, self.now);
        if let Some(period) = self.s.lifecycle.cycling {
            let jitter = self.fleet.cycling_rng.random::<f64>() * CYCLING_JITTER;
            // Restarts come while the run's window lasts (not while its last requests end).
            let at = self.now + period + jitter;
            if at < self.measures.window_end() {
                self.events.reschedule_life(at, dyno as u32);
            }
        }
    }

    /// The first daily restart of each dyno of the initial fleet. Its age is unknown: the
    /// fleet is taken as having cycled for ever, so each dyno's restarts are a stationary
    /// renewal process whose cycle is a boot (its mean), the period and a uniform offset of up
    /// to [`CYCLING_JITTER`]. The first restart is then a uniform fraction of a length-biased
    /// cycle (the cycle a random instant falls in is the longer the more likely), so that the
    /// restarts in any window are `dynos × window / E[cycle]` on average from the start.
    pub(super) fn schedule_first_cycles(&mut self) {
        let Some(period) = self.s.lifecycle.cycling else {
            return;
        };
        // A cycle is a + J, J uniform on [0, j]: length-biased, J has density (a + u) / norm.
        let (a, j) = (self.s.boot_time.mean() + period, CYCLING_JITTER);
        for &dyno in &self.fleet.formation {
            let y: f64 = self.fleet.cycling_rng.random();
            let u = -a + (a * a + 2.0 * y * (a * j + j * j / 2.0)).sqrt();
            let at = self.fleet.cycling_rng.random::<f64>() * (a + u);
            if at < self.measures.window_end() {
                self.events.reschedule_life(at, dyno);
            }
        }
    }

    /// The daily restart of `dyno`, up: a new dyno takes its place in the formation and
    /// boots, and it stops (as Heroku's dyno manager starts the new dyno when it signals the
    /// old one).
    fn cycle(&mut self, dyno: usize) {
        self.measures.cycled(self.now);
        self.replace(dyno);
        self.fleet_changed();
    }

    /// `dyno` (in the formation, up or booting) is replaced: a new dyno starts at its place
    /// in the formation, and it stops.
    fn replace(&mut self, dyno: usize) {
        let Some(place) = self
            .fleet
            .formation
            .iter()
            .position(|&d| d as usize == dyno)
        else {
            return;
        };
        self.fleet.formation.remove(place);
        self.stop_dyno(dyno);
        if let Some(slot) = self.start_dyno() {
            // The new dyno went to the formation's end; it takes the old one's place.
            let last = self.fleet.formation.pop().expect("just started");
            debug_assert_eq!(last, slot);
            self.fleet.formation.insert(place, slot);
        }
    }

    /// The next deploy: every dyno of the formation is replaced. Without preboot they all
    /// stop at once and new ones boot (no dyno up meanwhile); with preboot a new set boots
    /// first and takes the traffic when all of it is up, and then the old set drains.
    pub(super) fn deploy(&mut self) {
        let deploys = &self.s.lifecycle.deploys;
        let Some(&(_, preboot)) = deploys.get(self.fleet.next_deploy) else {
            return;
        };
        self.fleet.next_deploy += 1;
        if let Some(&(at, _)) = deploys.get(self.fleet.next_deploy) {
            self.events.schedule(at, DEPLOY, Event::Deploy);
        }
        self.measures.deployed(self.now);
        // A preboot still booting is abandoned: this deploy's set replaces it.
        for dyno in std::mem::take(&mut self.fleet.incoming) {
            self.stop_dyno(dyno as usize);
        }
        self.fleet.incoming_up = 0;
        if preboot {
            for _ in 0..self.fleet.formation.len() {
                let Some(slot) = self.fleet.take_slot() else {
                    // No room: the switch starts the missing dynos.
                    break;
                };
                self.fleet.incoming.push(slot);
                self.begin_dyno(slot as usize);
            }
            if self.fleet.incoming.is_empty() {
                self.switch_to_incoming();
            }
        } else {
            for dyno in self.fleet.formation.clone() {
                self.replace(dyno as usize);
            }
        }
        self.fleet_changed();
    }

    /// A preboot deploy's new dynos are all up: they take the traffic, and the old formation
    /// drains; the fleet is then brought to the size it had.
    fn switch_to_incoming(&mut self) {
        let size = self.fleet.size();
        let old = std::mem::take(&mut self.fleet.formation);
        let incoming = std::mem::take(&mut self.fleet.incoming);
        self.fleet.incoming_up = 0;
        for &dyno in &incoming {
            self.route_to(dyno as usize);
        }
        self.fleet.formation = incoming;
        for dyno in old {
            self.stop_dyno(dyno as usize);
        }
        self.scale_to(size);
        for router in 0..self.routers.queues.len() {
            self.drain_router(router);
        }
    }

    /// The fleet should have `size` dynos: new ones start (in the lowest free slots), or the
    /// last started stop (Heroku's highest-numbered).
    pub(super) fn scale_to(&mut self, size: u32) {
        while self.fleet.size() < size {
            self.start_dyno();
        }
        while self.fleet.size() > size {
            if self.fleet.waiting_for_slot > 0 {
                self.fleet.waiting_for_slot -= 1;
                continue;
            }
            let dyno = self.fleet.formation.pop().expect("a dyno to stop") as usize;
            self.stop_dyno(dyno);
        }
        self.fleet_changed();
    }

    /// A new dyno starts booting at the formation's end, in the lowest free slot (or when a
    /// slot frees: None then).
    fn start_dyno(&mut self) -> Option<u32> {
        let Some(slot) = self.fleet.take_slot() else {
            self.fleet.waiting_for_slot += 1;
            return None;
        };
        self.fleet.formation.push(slot);
        self.begin_dyno(slot as usize);
        Some(slot)
    }

    /// A new dyno in slot `dyno` starts booting.
    fn begin_dyno(&mut self, dyno: usize) {
        self.fleet.set(dyno, Life::Booting);
        self.measures.dyno_started(self.now);
        // A fresh dyno: idle memory from its start (its slot held none).
        self.set_memory(dyno, memory::idle(&self.s.app));
        self.boot_begin(dyno);
    }

    /// `dyno` (out of the formation already) stops: a dyno still booting exits at once; an
    /// up one is marked down (the routers send it nothing more) and gets its SIGTERM after
    /// `fleet.stop_delay`.
    fn stop_dyno(&mut self, dyno: usize) {
        match self.fleet.life[dyno] {
            Life::Booting => self.exit(dyno),
            Life::Up => {
                if self.routers.is_up(dyno) {
                    for other in self.routers.take_down(dyno) {
                        self.idle_check(other);
                    }
                }
                self.fleet.set(dyno, Life::Draining);
                let at = self.now + self.s.lifecycle.stop_delay;
                self.events.reschedule_life(at, dyno as u32);
            }
            other => debug_assert!(false, "stopping a dyno {other:?}"),
        }
    }

    /// SIGTERM: the server closes its listener. Requests in its backlog that no process took
    /// fail (they raced the dyno going down: H13), as do those reaching it from now on; its
    /// processes finish what they hold within the grace.
    fn sigterm(&mut self, dyno: usize) {
        self.fleet.set(dyno, Life::Terminating);
        self.dynos[dyno].closed = true;
        let mut backlog = std::mem::replace(&mut self.dynos[dyno].accept, Fifo::EMPTY);
        let raced: Vec<u32> = std::iter::from_fn(|| self.slab.pop_front(&mut backlog)).collect();
        self.dynos[dyno].waiting -= raced.len() as u32;
        self.waiting_total -= raced.len();
        let mut released = Vec::new();
        for req in raced {
            self.kill(req, dyno, ErrorKind::H13, &mut released);
        }
        debug_assert!(
            released.is_empty(),
            "a request in a backlog holds no connection"
        );
        if !self.exit_if_idle(dyno) {
            let at = self.now + self.s.lifecycle.shutdown_grace;
            self.events.reschedule_life(at, dyno as u32);
        }
    }

    /// SIGKILL at the grace's end: what the dyno still holds fails (`errors.shutdown`).
    fn sigkill(&mut self, dyno: usize) {
        self.kill_all(dyno, ErrorKind::Shutdown);
        self.exit(dyno);
    }

    /// A terminating dyno that holds no request exits (its last request just ended).
    /// Returns whether it did.
    pub(super) fn exit_if_idle(&mut self, dyno: usize) -> bool {
        let d = &self.dynos[dyno];
        if d.closed && d.busy == 0 && d.waiting == 0 {
            self.exit(dyno);
            true
        } else {
            false
        }
    }

    /// The dyno is gone: its slot is free (for a dyno waiting for one), its memory no longer
    /// counts, and requests still on their way to it fail when they reach it (they raced it,
    /// H13): the slot's next dyno is another.
    fn exit(&mut self, dyno: usize) {
        // Its pending step (a SIGTERM or SIGKILL still to come, when an R15 ended it first)
        // is no one's: the slot's next dyno schedules its own.
        self.events.cancel(Event::Life { dyno: dyno as u32 });
        self.cpu_drop_colocated(dyno);
        let connecting: Vec<u32> = (0..self.slab.entries.len() as u32)
            .filter(|&i| {
                let e = &self.slab.entries[i as usize];
                e.dyno as usize == dyno && e.state == State::Connecting
            })
            .collect();
        let mut released = Vec::new();
        for req in connecting {
            self.kill(req, dyno, ErrorKind::H13, &mut released);
        }
        let serving = self.fleet.life[dyno] != Life::Booting;
        self.fleet.set(dyno, Life::Stopped);
        if serving {
            self.measures.dyno_ended(dyno, self.now);
        }
        self.dynos[dyno] = Dyno {
            up: false,
            ..Dyno::IDLE
        };
        self.set_memory(dyno, 0.0);
        self.fleet.free_slot(dyno as u32);
        if self.fleet.waiting_for_slot > 0 {
            self.fleet.waiting_for_slot -= 1;
            self.start_dyno();
        }
        self.fleet_changed();
    }

    /// Tells the observer the fleet's counts after a change.
    pub(super) fn fleet_changed(&mut self) {
        let f = &self.fleet;
        let (running, serving) = (f.running(), f.serving());
        self.measures.fleet_size(self.now, running, serving);
        if let Some(scaling) = self.scaling.as_deref_mut() {
            scaling.serving(self.now, serving);
        }
    }

    /// The autoscaler's evaluation at `now`: the dynos report, the rule is shown the fleet and
    /// asks for a size, the lifecycle gets there; the next evaluation is scheduled while the
    /// run's window lasts.
    pub(super) fn autoscale(&mut self) {
        let now = self.now;
        let cores = f64::from(self.s.dyno_type.cores);
        let threads = f64::from(self.s.slots);
        let fleet = crate::autoscale::Fleet {
            size: self.fleet.size(),
            up: self.fleet.up,
        };
        let Some(scaling) = self.scaling.as_deref_mut() else {
            return;
        };
        if let Some((desired, reversal)) = scaling.evaluate(now, cores, threads, fleet) {
            self.measures.scaled(now, reversal);
            self.scale_to(desired);
        }
        let next = now
            + self
                .scaling
                .as_ref()
                .map_or(f64::INFINITY, |s| s.interval());
        if self.goes_on(next) {
            self.events.schedule(next, AUTOSCALE, Event::Autoscale);
        }
    }

    /// Whether the run has work left at `next` for the autoscaler to act on: a timed run
    /// while its window lasts; a closed loop measured whole (its window has no end) while it
    /// has requests to send or on their way. Without that end the evaluations went on for
    /// ever once the last request was answered: the run never ended.
    fn goes_on(&self, next: f64) -> bool {
        let window_end = self.measures.window_end();
        if window_end.is_finite() {
            next < window_end
        } else {
            self.clients.to_send != Some(0) || self.slab.entries.len() > self.slab.free.len()
        }
    }
}
