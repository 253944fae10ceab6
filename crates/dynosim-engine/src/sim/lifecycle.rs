//! Dynos and workers going down and coming back up. R15 restarts a dyno: every request on it
//! fails, its per-dyno and per-process pools go with it, and it boots again after
//! `fleet.boot_time`, the routers skipping it meanwhile. `app.timeout` kills a sync worker: its
//! request fails, and its replacement takes requests after `app.worker_boot_time`. Both end
//! requests through [`Simulation::kill`]: what a request gives back when what runs it dies.
//! Whatever else takes a dyno or a worker down, or brings one up, belongs here too.

use super::dyno::{self, Dyno, Fifo};
use super::events::{Event, BOOT};
use super::timers::{Deadline, Kind};
use super::{Simulation, State, NONE};
use crate::resource::PoolScope;
use crate::result::ErrorKind;

impl Simulation<'_> {
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
        self.busy_processes -= 1;
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
        if self.memory {
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
    fn kill(&mut self, req: u32, dyno: usize, error: ErrorKind, released: &mut Vec<(u32, u32)>) {
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
        let (arrival, router, client, state) = (e.arrival, e.router, e.client, e.state);
        let (answered, router_done) = (e.answered, e.router_done);
        e.answered = true;
        e.router_done = true;
        // What the entry becomes: freed now, or kept until an event of its own comes.
        let pending = match state {
            State::Timed | State::Connecting => Some(State::Dead),
            State::ResourceService(r) => Some(State::Orphan(r)),
            State::Cpu => {
                self.cpu_advance(dyno);
                self.rest.cpus[dyno].remove(&mut self.cpu_store, req);
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
            self.routers.loads[router as usize].decrement(dyno);
            self.in_flight[router as usize] -= 1;
        }
        match pending {
            Some(kept) => self.slab.entries[req as usize].state = kept,
            None => self.slab.release(req),
        }
        if !answered {
            self.measures.errored(error, arrival, now);
            self.respond(client);
        }
    }

    /// R15: the dyno is restarted. Every request on it fails; it boots again after the app's
    /// boot time. Work a resource already has in hand for it runs to its end (the database
    /// does not know), and then gives its connection back.
    pub(super) fn restart(&mut self, dyno: usize) {
        let now = self.now;
        self.measures.restarted(now);
        self.cpu_advance(dyno);
        self.routers.take_down(dyno);
        let d = &mut self.dynos[dyno];
        d.up = false;
        // The requests on it: those in its accept queue and those its threads hold.
        let mut accept = std::mem::replace(&mut d.accept, Fifo::EMPTY);
        d.waiting = 0;
        let mut victims: Vec<u32> =
            std::iter::from_fn(|| self.slab.pop_front(&mut accept)).collect();
        for queue in self.rest.queues_of(dyno) {
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
        for e in &mut self.slab.entries {
            if e.dyno as usize == dyno && e.state == State::Overhead {
                e.state = State::Dead;
            }
        }
        let mut released = Vec::new();
        for req in victims {
            self.kill(req, dyno, ErrorKind::R15, &mut released);
        }
        self.reschedule_cpu(dyno);
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
        let before = self.rest.memory[dyno];
        let was_over = before > self.s.app.memory.quota;
        let busy_before = self.dynos[dyno].busy_processes;
        // Back to a fresh boot: no requests, idle memory.
        self.dynos[dyno] = Dyno {
            up: false,
            ..Dyno::IDLE
        };
        self.rest.memory[dyno] = dyno::idle_memory(&self.s.app);
        self.procs.reset(dyno);
        self.busy_processes -= busy_before;
        let after = self.rest.memory[dyno];
        self.fleet_memory += after - before;
        let quota = self.s.app.memory.quota;
        match (was_over, after > quota) {
            (true, false) => self.over_quota -= 1,
            (false, true) => self.over_quota += 1,
            _ => {}
        }
        self.fleet_levels();
        let slowdown = self.s.app.memory.slowdown(after);
        let _ = self.rest.cpus[dyno].set_slowdown(slowdown);
        let boot = self.s.boot_time.sample(&mut self.boot_rng);
        self.events
            .schedule(now + boot, BOOT, Event::Boot { dyno: dyno as u32 });
    }

    pub(super) fn boot(&mut self, dyno: usize) {
        self.dynos[dyno].up = true;
        self.routers.bring_up(dyno);
        for router in 0..self.routers.queues.len() {
            self.drain_router(router);
        }
    }
}
