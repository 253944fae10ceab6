//! The requests' timeouts: `router.timeout` (H12), `router.queue_timeout`, the client's
//! `arrivals.timeout`, `app.service_timeout` and `app.timeout`, each drawn from its own stream
//! (or fixed) and set as a deadline ([`super::deadlines`] keeps them; all share one event in
//! the kernel's queue); and what a deadline does when it comes and still concerns its
//! request. A request held at its router is dropped from its queue; one sent to a dyno is
//! answered with an error and let go by its router, while the dyno, which is not told, works
//! on (what it does from then on is counted as wasted). The app's own timeout
//! (`app.service_timeout`, Rack::Timeout's) stops the request inside the app, which answers
//! the error, and frees its thread ([`Simulation::stop_in_app`]). An app timeout kills the
//! worker instead ([`Simulation::kill_worker`], in [`super::lifecycle`]), and the worker's
//! replacement comes as a deadline of its own.

use super::deadlines::{live, Deadline, Kind, KINDS};
use super::events::Event;
use super::limit::Ended;
use super::slab::{State, NONE};
use super::Simulation;
use crate::request::PhaseKind;
use crate::result::ErrorKind;

/// Deadlines a kind may hold beyond eight times the requests in flight before it is swept of those
/// done with (see `Queue::compact`): small fleets never sweep.
const COMPACT_SLACK: usize = 1024;

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// A timeout of `kind` for one request, if the scenario sets one.
    #[inline]
    pub(super) fn draw_timeout(&mut self, kind: Kind) -> Option<f64> {
        self.deadlines.draw(self.s, kind)
    }

    /// Request `req` has a deadline of `kind` at `at`.
    #[inline]
    pub(super) fn set_deadline(&mut self, kind: Kind, at: f64, req: u32) {
        let generation = self.slab.entries[req as usize].generation;
        self.push_deadline(
            kind,
            Deadline {
                at,
                req,
                generation,
            },
        );
    }

    #[inline]
    pub(super) fn push_deadline(&mut self, kind: Kind, d: Deadline) {
        if let Some(at) = self.deadlines.push(kind, d) {
            self.events.reschedule_timers(at);
        }
    }

    /// Drops the deadlines of the requests answered in time from the fronts of the fixed
    /// timeouts' queues (most responses come in time), so that they hold little more than
    /// the requests in flight; the deadlines' event is left where it is (see
    /// [`Self::next_timer`]).
    #[inline]
    pub(super) fn prune_deadlines(&mut self) {
        if !self.deadlines.prunes() {
            return;
        }
        // Requests in flight (slab entries in use), and a sweep once a kind holds more than
        // eight times as many deadlines (see `Queue::compact`): a sweep reads each
        // deadline's request, a cache miss in a large fleet, so sweeping at twice made the
        // 100,000-dyno `phases` run 15% slower; at eight, 1 + 1/7 reads a request.
        let bound = 8 * (self.slab.entries.len() - self.slab.free.len()) + COMPACT_SLACK;
        self.deadlines.prune(&self.slab.entries, bound);
    }

    /// The deadlines due now: each kind's in turn (the router's first), then the event moves
    /// to the next deadline that is still live. Returns whether any deadline was still live:
    /// a timer set for a deadline whose request has ended since does nothing, and is no part
    /// of the run's work (see `Simulation::run`). Out of line: inlined, it cost the event loop
    /// of a run without timeouts 8 instructions a request (callgrind, issue #23).
    #[inline(never)]
    pub(super) fn timers_due(&mut self) -> bool {
        let now = self.now;
        let mut acted = false;
        for kind in KINDS {
            while let Some(d) = self.deadlines.first(kind).filter(|d| d.at <= now) {
                self.deadlines.pop(kind);
                if kind == Kind::WorkerBoot {
                    self.worker_boot(d.req, d.generation);
                    acted = true;
                } else if live(&self.slab.entries, &self.deadlines.statement, kind, d) {
                    self.timed_out(kind, d.req);
                    acted = true;
                }
            }
        }
        self.next_timer();
        acted
    }

    /// Schedules the deadlines' event at the earliest live deadline (dropping dead ones from
    /// the front), or takes it back.
    fn next_timer(&mut self) {
        match self.deadlines.next(&self.slab.entries) {
            Some(next) => self.events.reschedule_timers(next),
            None => self.events.cancel(Event::Timers),
        }
    }

    /// Request `req`'s deadline of `kind` has come, and it is not answered.
    fn timed_out(&mut self, kind: Kind, req: u32) {
        let e = &self.slab.entries[req as usize];
        let (router, held) = (e.router as usize, e.state == State::Routing);
        match kind {
            // The router answers 503 and stops counting the request against its dyno; the dyno
            // is not told and works on.
            // Back at the router after a refusal (held, or between tries): the router gives up
            // on it there.
            Kind::Router if held => self.drop_held(req, ErrorKind::H12),
            Kind::Router => self.let_go(req, router, ErrorKind::H12),
            // Held at the router (where its client's timeout finds it, too): dropped.
            Kind::Queue | Kind::Client if held => {
                let error = if kind == Kind::Queue {
                    ErrorKind::QueueTimeout
                } else {
                    ErrorKind::ClientTimeout
                };
                self.drop_held(req, error);
            }
            Kind::Queue => unreachable!("a queue deadline is live only while held"),
            Kind::Service => self.stop_in_app(req),
            Kind::Statement => self.statement_due(req),
            Kind::App => self.kill_worker(req),
            Kind::WorkerBoot => unreachable!("a replacement is no request's deadline"),
            // Waiting for a router with a cost: dropped when the router comes to it.
            Kind::Client if self.slab.entries[req as usize].state == State::AtRouter => {
                self.abandon(req, ErrorKind::ClientTimeout)
            }
            // On its way to a dyno or at it: the client goes, and so does the router's
            // connection to the dyno, as a proxy closes it when its client has gone (HAProxy
            // with `option abortonclose`, nginx by default); the dyno is not told and works on.
            Kind::Client => self.let_go(req, router, ErrorKind::ClientTimeout),
        }
    }

    /// The router stops counting a request it sent to a dyno (or is retrying) and answers its
    /// client with `error` (unless answered already); the dyno works on (what it does from
    /// now on is wasted), and the router may send what it holds.
    fn let_go(&mut self, req: u32, router: usize, error: ErrorKind) {
        let e = &mut self.slab.entries[req as usize];
        if !e.router_done {
            e.router_done = true;
            let dyno = e.dyno;
            if dyno != NONE {
                self.count_done(router, dyno as usize);
            }
            self.routers.in_flight[router] -= 1;
            self.limit_end_router(req, router, Ended::Dropped);
        }
        if !self.slab.entries[req as usize].answered {
            if error == ErrorKind::H12 && self.redispatch(req, error) {
                // Another dyno has it now; this one works on, for nobody.
                self.abandon_work(req);
            } else {
                self.abandon(req, error);
            }
        }
        self.drain_router(router);
    }

    /// A request held in its router's queue leaves it with `error`.
    fn drop_held(&mut self, req: u32, error: ErrorKind) {
        let router = self.slab.entries[req as usize].router as usize;
        let queue = &mut self.routers.queues[router];
        let at = queue
            .iter()
            .position(|&r| r == req)
            .expect("a request held at its router is in its queue");
        queue.remove(at);
        self.waiting_total -= 1;
        self.routers.in_flight[router] -= 1;
        self.limit_end_router(req, router, Ended::Dropped);
        let e = &mut self.slab.entries[req as usize];
        e.answered = true;
        e.router_done = true;
        self.client_error(req, error, 0.0);
        self.slab.release(req);
    }

    /// The client of a request that a dyno holds (or will) is answered with an error; the
    /// dyno works on. What it does from now on is wasted.
    fn abandon(&mut self, req: u32, error: ErrorKind) {
        self.abandon_work(req);
        self.client_error(req, error, 0.0);
    }

    /// Nobody waits for what a dyno does with request `req` from now on (its client was
    /// answered, or its router sent it elsewhere): that work is wasted.
    fn abandon_work(&mut self, req: u32) {
        let now = self.now;
        let e = &mut self.slab.entries[req as usize];
        e.answered = true;
        e.abandoned_at = now;
        if self.phases {
            self.slab.entries[req as usize].cpu_left = self.cpu_to_do(req);
        }
    }

    /// The CPU work request `req` has still to do (with phases): what is left of its CPU
    /// phase, if it is in one, and its CPU phases to come.
    fn cpu_to_do(&mut self, req: u32) -> f64 {
        let e = &self.slab.entries[req as usize];
        let (state, dyno) = (e.state, e.dyno as usize);
        let cpu_now = if state == State::Cpu {
            self.cpu_advance(dyno);
            self.cpu.remaining(dyno, req, self.now).unwrap_or(0.0)
        } else {
            0.0
        };
        let e = &self.slab.entries[req as usize];
        let model = self.s.request.as_ref().expect("phases");
        let phases = &model.classes[e.class as usize].phases;
        // The phases still to come (the current one too, if it has not begun: a request
        // not yet on a thread is at phase 0 in state Routing, Connecting or Accept).
        let begun = !matches!(
            state,
            State::Connecting | State::Accept | State::Routing | State::AtRouter | State::Retrying
        ) && state != State::Hung(NONE);
        let from = e.phase as usize + usize::from(begun);
        let later: f64 = (from..phases.len())
            .filter(|&i| phases[i].kind == PhaseKind::Cpu)
            .map(|i| self.slab.time(req, i as u32))
            .sum();
        cpu_now + later
    }

    /// `app.service_timeout`: Rack::Timeout raises inside request `req`, which has run that
    /// long on its thread. What it was doing stops: its CPU work, its wait for a pool's
    /// connection. A query already handed to a resource runs on there (the database is not
    /// told), its connection back in the pool at once; a timed wait's event comes for
    /// nothing. The app answers the error (500, `errors.service_timeout`), unless the client
    /// has its answer already (then the work cut short is wasted no more), and the thread is
    /// free for the next request: unlike the router's H12, which leaves the dyno working, and
    /// `app.timeout`, which kills the worker.
    pub(super) fn stop_in_app(&mut self, req: u32) {
        let now = self.now;
        let e = &self.slab.entries[req as usize];
        let (dyno, state, start, service) = (e.dyno as usize, e.state, e.start, e.service);
        if self.phases && e.abandoned_at.is_finite() {
            // Wasted: the CPU work done since the client went, not all it had left then.
            let still = self.cpu_to_do(req);
            let e = &mut self.slab.entries[req as usize];
            e.cpu_left = (e.cpu_left - still).max(0.0);
        }
        // What its entry becomes until an event of its own comes, and the resource whose
        // connection it gives back.
        let (kept, gives_back) = match state {
            State::Timed => {
                if !self.phases {
                    // A `[service]` hold counted its whole time when it started.
                    self.measures.unbusy(dyno, now, start + service);
                }
                (State::Dead, None)
            }
            State::Hung(r) => (State::Dead, (r != NONE).then_some(r)),
            State::ResourceService(r) | State::ResourceQueue(r) => (State::Orphan(r), Some(r)),
            State::Cpu => {
                self.cpu_advance(dyno);
                self.cpu.remove(dyno, req, now);
                self.reschedule_cpu(dyno);
                (State::Thread, None)
            }
            State::PoolWait(r) => {
                for p in &mut self.resources[r as usize].pools {
                    p.waiting.retain(|&x| x != req);
                }
                (State::Thread, None)
            }
            State::Thread => (State::Thread, None),
            other => unreachable!("a service deadline for a request in state {other:?}"),
        };
        let e = &mut self.slab.entries[req as usize];
        e.state = kept;
        if let Some(r) = gives_back {
            let pool = std::mem::replace(&mut e.pool, NONE);
            if pool != NONE {
                self.release_connection(r, pool);
            }
        }
        self.finish_with(req, Some(ErrorKind::ServiceTimeout));
    }
}
