//! A request's way from its arrival to a dyno, through the routers: it arrives (its class,
//! phase times and patience are drawn), a router takes it, and sends it to a dyno (now, or
//! after `router.connect`), holds it in its queue while its policy finds no dyno for it, or
//! answers it at once: a full router (`router.max_in_flight`, H11), a shed
//! (`router.shed_latency`), no dyno up. With `router.cost` the router works on each request
//! first, a FIFO server. A dyno whose backlog is full refuses the request, and the router
//! retries another (H13 when it runs out of tries).
//!
//! The routers' own state (policies, their view of each dyno's load, their queues, the
//! requests each holds, the `router.cost` server's turns and the draws of cost and connect) is
//! in [`super::router`]; what the dyno does with a request that reaches it, in [`super::threads`];
//! the routers' timeouts (H12, the queue's), in [`super::timeouts`]. Which dynos are up, and so
//! can be routed to, [`super::lifecycle`] decides.

use super::deadlines::Kind;
use super::events::{Event, CONNECTED};
use super::limit::Ended;
use super::slab::{State, NONE};
use super::Simulation;
use crate::policy::Route;
use crate::result::ErrorKind;

/// A closed-loop client whose request found no dyno up, or a full router, waits this long (or
/// its think time, if longer) before sending again, so that time moves on while every dyno
/// boots or the router is full.
const NO_DYNO_BACKOFF: f64 = 1e-3;

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// A request arrives (from `client`, or NONE for the open workload): its class and phase
    /// times are drawn, then a router takes it.
    pub(super) fn arrive(&mut self, client: u32) -> u32 {
        let t = self.now;
        let req = self.slab.insert();
        let service = self.traffic.draw::<EXTRAS>(self.s, &mut self.slab, req);
        if let Some(colocated) = self.colocated.as_mut().filter(|_| !PLAIN) {
            colocated.draw(self.s, req);
        }
        self.measures.arrived(t, service);
        // The patience of the router's queue and of the client, drawn for every request (the
        // same draws whatever the policy does with it).
        // (With routers of a cost, the queue's patience is drawn when the router is done.)
        let patience = if PLAIN {
            None
        } else if self.s.router_cost.is_none() {
            self.draw_timeout(Kind::Queue)
        } else {
            None
        };
        let client_patience = if PLAIN {
            None
        } else {
            self.draw_timeout(Kind::Client)
        };
        self.first_try(req);
        self.send(req, client, service, patience, client_patience);
        req
    }

    /// A try of a request (its first, or a retry: [`super::resend`]) is sent now: a router
    /// takes it, with the patience drawn for it.
    #[inline(always)]
    pub(super) fn send(
        &mut self,
        req: u32,
        client: u32,
        service: f64,
        patience: Option<f64>,
        client_patience: Option<f64>,
    ) {
        let t = self.now;
        if FEEDBACK {
            if let Some(breaker) = self.breaker.as_deref_mut() {
                if !breaker.allows(t) {
                    return self.rejected(req, client, NO_DYNO_BACKOFF);
                }
            }
        }
        let router = self.routers.pick();
        self.slab.entries[req as usize].begin_try(t, service, router as u32, client);
        if let Some(cap) = self.s.max_in_flight.filter(|_| !PLAIN) {
            if self.routers.in_flight[router] >= cap {
                return self.refuse(req);
            }
        }
        if FEEDBACK && self.limits.is_some() && !self.limit_admits_at_router(router, req) {
            return;
        }
        self.routers.in_flight[router] += 1;
        if let Some(p) = client_patience {
            self.set_deadline(Kind::Client, t + p, req);
            if FEEDBACK {
                if let Some(rd) = self.redispatch.as_deref_mut() {
                    rd.set_client_at(req, t + p);
                }
            }
        }
        if !PLAIN && self.s.router_cost.is_some() {
            return self.queue_at_router(req, router);
        }
        self.route_request(req, router, patience);
    }

    /// The router decides: it sends the request to a dyno, or holds it (behind those it holds
    /// already, or as its policy says), or finds no dyno up.
    fn route_request(&mut self, req: u32, router: usize, patience: Option<f64>) {
        if !self.routers.queues[router].is_empty() {
            self.hold(req, patience);
            return;
        }
        // A hedge of a fan-out's call avoids the dyno of the call's first copy, as a retry
        // after a refusal does (another dyno while one is up; see `federation.rs`).
        let route = if EXTRAS && self.outbox.avoid != NONE {
            let avoid = std::mem::replace(&mut self.outbox.avoid, NONE) as usize;
            let key = self.key_of(req);
            self.routers.route_avoiding(router, avoid, self.now, key)
        } else {
            self.route(router, req)
        };
        match route {
            Some(Route::To(dyno)) => self.dispatch(dyno, req),
            Some(Route::Hold) => self.hold(req, patience),
            None => self.fail_unrouted(req),
        }
    }

    /// The dyno's listen backlog is full: it refuses the connection. The router no longer
    /// counts the request against it and tries another dyno, up to `router.retries` more,
    /// after `router.retry_delay` each; then the client gets an error (H13).
    pub(super) fn refused(&mut self, dyno: usize, req: u32) {
        self.limit_end_dyno(req, dyno, Ended::Ignored);
        let e = &mut self.slab.entries[req as usize];
        let router = e.router as usize;
        e.refusals += 1;
        let (counted, refusals) = (!e.router_done, e.refusals);
        if counted {
            self.count_done(router, dyno);
        }
        if refusals > self.s.retries {
            self.answer_at_once(req, ErrorKind::H13);
            self.drain_router(router);
            return;
        }
        let e = &mut self.slab.entries[req as usize];
        e.state = State::Retrying;
        e.dyno = NONE;
        e.refused_by = dyno as u32;
        if self.s.retry_delay > 0.0 {
            let at = self.now + self.s.retry_delay;
            self.events.schedule(at, CONNECTED, Event::Done { req });
        } else {
            self.retry(req);
        }
    }

    /// Try `req`, which the router sent to a dyno, ended with `error` there (H12, or an error
    /// the dyno answered or died with): under `router.retry_on`, and while `router.retries`
    /// and the budget allow, the router sends the request to another dyno as a new try, after
    /// `router.retry_delay`, and its client waits on (returns true); otherwise false, and the
    /// client is to have the error. The try that failed is the caller's to let go.
    pub(super) fn redispatch(&mut self, req: u32, error: ErrorKind) -> bool {
        let Some(rd) = self.redispatch.as_deref_mut().filter(|_| FEEDBACK) else {
            return false;
        };
        let old = &self.slab.entries[req as usize];
        if !rd.spec.retries(error) || old.refusals >= self.s.retries {
            return false;
        }
        let router = old.router as usize;
        let origin = match self.retries.as_deref() {
            None => old.arrival,
            Some(r) => r.try_of(req).origin,
        };
        if !rd.allows(router, self.routers.in_flight[router], &self.slab.entries) {
            self.measures.retry_denied(origin);
            return false;
        }
        let client_at = rd.client_at(req);
        let old = self.slab.entries[req as usize].clone();
        let new = self.slab.insert();
        let stride = self.slab.stride;
        self.slab.times.copy_within(
            req as usize * stride..(req as usize + 1) * stride,
            new as usize * stride,
        );
        if self.slab.keyed {
            self.slab.keys[new as usize] = self.slab.keys[req as usize];
        }
        if let Some(colocated) = self.colocated.as_mut() {
            let half = colocated.half(req);
            colocated.keep(new, half);
        }
        if let Some(r) = self.retries.as_deref_mut() {
            r.carry(req, new);
        }
        let e = &mut self.slab.entries[new as usize];
        // Its arrival stays the request's at the router (as X-Request-Start does).
        e.begin_try(old.arrival, old.service, old.router, old.client);
        e.class = old.class;
        e.state = State::Retrying;
        e.cpu_left = 0.0;
        e.refusals = old.refusals + 1;
        e.refused_by = old.dyno;
        let generation = e.generation;
        self.routers.in_flight[router] += 1;
        let rd = self.redispatch.as_deref_mut().expect("router retries");
        rd.track(router, new, generation);
        if let Some(at) = client_at {
            rd.set_client_at(new, at);
            self.set_deadline(Kind::Client, at, new);
        }
        // The router's timeout runs from each try it sends (HAProxy's `timeout server`).
        if let Some(t) = self.draw_timeout(Kind::Router) {
            self.set_deadline(Kind::Router, self.now + t, new);
        }
        self.measures.tried(origin, self.now);
        self.measures.router_retried(origin);
        let at = self.now + self.s.retry_delay;
        self.events
            .schedule(at, CONNECTED, Event::Done { req: new });
        true
    }

    /// The router tries again to place a request refused by a dyno (unless its client, or
    /// the router's own timeout, gave up on it meanwhile).
    pub(super) fn retry(&mut self, req: u32) {
        let e = &mut self.slab.entries[req as usize];
        let router = e.router as usize;
        if e.answered || e.router_done {
            if !e.router_done {
                e.router_done = true;
                self.routers.in_flight[router] -= 1;
            }
            self.slab.release(req);
            return;
        }
        e.state = State::Routing;
        // Another dyno than the one that refused, as Heroku's router and HAProxy's
        // redispatch do (when another is up).
        let avoid = e.refused_by as usize;
        let key = self.key_of(req);
        match self.routers.route_avoiding(router, avoid, self.now, key) {
            Some(Route::To(dyno)) => self.dispatch(dyno, req),
            Some(Route::Hold) => self.hold(req, None),
            None => self.fail_unrouted(req),
        }
    }

    /// `router.cost`: the request waits for its router, a FIFO server, which then works on it
    /// for its cost before routing it; with `router.shed_latency`, one that would wait longer
    /// than that is answered at once instead (shed).
    fn queue_at_router(&mut self, req: u32, router: usize) {
        let now = self.now;
        let free = self.routers.free_at[router].max(now);
        if self
            .s
            .shed_latency
            .is_some_and(|ceiling| free - now > ceiling)
        {
            return self.answer_at_once(req, ErrorKind::Shed);
        }
        let cost = self.s.router_cost.as_ref().expect("routers of a cost");
        let done = free + cost.sample(&mut self.routers.cost_rng);
        self.routers.free_at[router] = done;
        let e = &mut self.slab.entries[req as usize];
        e.state = State::AtRouter;
        e.waited = free > now;
        self.routers.in_hand[router] += 1;
        self.waiting_total += 1;
        self.measures
            .router_queue(now, self.routers.in_hand[router] as usize - 1);
        self.events.schedule(done, CONNECTED, Event::Done { req });
    }

    /// The router is done with the request: it routes it (unless its client has gone).
    pub(super) fn routed(&mut self, req: u32) {
        let e = &mut self.slab.entries[req as usize];
        let router = e.router as usize;
        self.routers.in_hand[router] -= 1;
        self.waiting_total -= 1;
        if e.answered {
            // Its client gave up while it waited: the router drops it.
            e.router_done = true;
            self.routers.in_flight[router] -= 1;
            self.slab.release(req);
            return;
        }
        e.state = State::Routing;
        let patience = self.draw_timeout(Kind::Queue);
        self.route_request(req, router, patience);
    }

    /// `router.max_in_flight`: the router holds all it may; the request is answered at once.
    fn refuse(&mut self, req: u32) {
        // Never counted by its router.
        self.slab.entries[req as usize].router_done = true;
        self.answer_at_once(req, ErrorKind::H11);
    }

    /// The router answers a request that never reached a thread with `error` (unless its
    /// client was answered before) and stops counting it. A closed-loop client answered at
    /// once sends again no sooner than [`NO_DYNO_BACKOFF`], so that time moves on while the
    /// router is full, sheds, or finds no dyno.
    pub(super) fn answer_at_once(&mut self, req: u32, error: ErrorKind) {
        let e = &self.slab.entries[req as usize];
        let router = e.router as usize;
        let (answered, counted) = (e.answered, !e.router_done);
        if counted {
            self.routers.in_flight[router] -= 1;
        }
        if !answered {
            self.client_error(req, error, NO_DYNO_BACKOFF);
        }
        self.slab.release(req);
    }

    /// The router's policy decides where `req` goes.
    #[inline]
    fn route(&mut self, router: usize, req: u32) -> Option<Route> {
        let key = self.key_of(req);
        self.routers.route::<EXTRAS>(router, self.now, key)
    }

    /// The request's key, if requests carry one.
    #[inline]
    fn key_of(&self, req: u32) -> Option<u64> {
        if !Self::KEYS {
            return None;
        }
        self.slab.keys.get(req as usize).map(|&key| u64::from(key))
    }

    fn fail_unrouted(&mut self, req: u32) {
        self.answer_at_once(req, ErrorKind::NoDyno);
    }

    fn hold(&mut self, req: u32, patience: Option<f64>) {
        if let Some(p) = patience {
            self.set_deadline(Kind::Queue, self.now + p, req);
        }
        self.queued += 1;
        self.slab.entries[req as usize].waited = true;
        let router = self.slab.entries[req as usize].router as usize;
        let queue = &mut self.routers.queues[router];
        queue.push_back(req);
        self.waiting_total += 1;
        self.measures.router_queue(self.now, queue.len());
    }

    /// The router sends the request to `dyno`: it counts against the dyno from now on, and
    /// reaches it now, or after the connect time.
    #[inline]
    fn dispatch(&mut self, dyno: usize, req: u32) {
        // The router's timeout runs from its first try; its work on the request, on the
        // dyno's cores when it runs on the dyno's machine, goes with its first try too. (A
        // plain run has no deadline but the router's, and no router on the dyno's machine.)
        if (!PLAIN || self.deadlines.prunes()) && self.slab.entries[req as usize].refusals == 0 {
            if let Some(t) = self.draw_timeout(Kind::Router) {
                self.set_deadline(Kind::Router, self.now + t, req);
            }
            if let Some(colocated) = self.colocated.as_ref().filter(|_| !PLAIN) {
                let half = colocated.half(req);
                self.cpu_add_colocated(dyno, half);
            }
        }
        if let Some(listed) = self.routers.idle_hit() {
            debug_assert_eq!(listed, dyno, "jiq sends a hit to the dyno it listed");
            let d = &self.dynos[dyno];
            let busy = d.busy > 0 || d.waiting > 0;
            let arrival = self.slab.entries[req as usize].arrival;
            self.measures.idle_hit(arrival, busy);
        }
        let entry = &mut self.slab.entries[req as usize];
        entry.dyno = dyno as u32;
        entry.dispatched = self.now;
        let router = entry.router as usize;
        self.count_sent(router, dyno);
        if let Some(connect) = self.s.connect.as_ref().filter(|_| !PLAIN) {
            self.slab.entries[req as usize].state = State::Connecting;
            let at = self.now + connect.sample(&mut self.routers.connect_rng);
            self.events.schedule(at, CONNECTED, Event::Done { req });
            return;
        }
        self.reach(dyno, req);
    }

    /// The router sends what it holds while its policy finds dynos for it.
    pub(super) fn drain_router(&mut self, router: usize) {
        while let Some(&head) = self.routers.queues[router].front() {
            match self.route(router, head) {
                Some(Route::To(target)) => {
                    self.routers.queues[router].pop_front();
                    self.waiting_total -= 1;
                    self.dispatch(target, head);
                }
                Some(Route::Hold) | None => break,
            }
        }
    }
}
