//! The steps of the clients' retries (`[arrivals.retry]`; their state is
//! [`super::retries`]'): a try answered with an error is sent again after its backoff, or its
//! client has the error for good; the retries due are sent through a router like any
//! arrival, each a new try of the same request (its class, drawn work and key). The try that
//! failed is left as it is: a dyno that holds it works on.
//!
//! A user request's figures run from its first try's send to the last try's answer; each try
//! counts at its dyno as a request of its own (its queue time, the router's counts and
//! timeouts, its log line for the autoscaler).
//!
//! The clients' circuit breaker (`[arrivals.breaker]`, its state [`crate::breaker::state`]) sees each
//! try: when a client sends it (`send`), a breaker that does not let it through fails it at
//! once (`breaker_open`, never sent: no router logs it); and each try's outcome, as its client
//! has it: a success (`finish_with`), or an error (`client_error`), its own timeout included.
//! A try it failed is a refusal to the retries (`arrivals.retry.on`): retried after its backoff
//! like any other, and that retry meets the breaker again.

use super::deadlines::Kind;
use super::events::Event;
use super::retries::{Pending, Try, Verdict};
use super::slab::NONE;
use super::Simulation;
use crate::breaker::Moved;
use crate::result::ErrorKind;

impl<const FEEDBACK: bool, const EXTRAS: bool, const PLAIN: bool>
    Simulation<'_, FEEDBACK, EXTRAS, PLAIN>
{
    /// Try `req` is answered with `error` (its entry still holds what it was): its client
    /// sends it again after a backoff, or has the error for good: its request's figures, and
    /// a closed-loop client's next send (no sooner than `at_least`).
    pub(super) fn client_error(&mut self, req: u32, error: ErrorKind, at_least: f64) {
        let e = &self.slab.entries[req as usize];
        let (arrival, client) = (e.arrival, e.client);
        if error != ErrorKind::BreakerOpen {
            // The try's answer, as its router logs it.
            self.answered(arrival);
            if FEEDBACK && self.breaker.is_some() {
                self.breaker_record(arrival, true);
            }
        }
        if let Some(origin) = self.try_failed(req, error) {
            self.measures.errored(error, origin, self.now);
            self.respond_after(client, at_least, false);
        }
    }

    /// A request arrived (its first try): its try is the first, sent now.
    #[inline]
    pub(super) fn first_try(&mut self, req: u32) {
        if !FEEDBACK {
            return;
        }
        if let Some(r) = self.retries.as_deref_mut() {
            r.first(req, self.now);
            self.measures.tried(self.now, self.now);
        } else if self.redispatch.is_some() {
            self.measures.tried(self.now, self.now);
        }
    }

    /// The request's first send (its try's own arrival without retries).
    #[inline]
    pub(super) fn origin(&self, req: u32) -> f64 {
        match self.retries.as_deref() {
            Some(r) if FEEDBACK => r.try_of(req).origin,
            _ => self.slab.entries[req as usize].arrival,
        }
    }

    /// A try sent at `arrival` was answered successfully: the budget and the breaker learn
    /// it.
    #[inline]
    pub(super) fn try_succeeded(&mut self, arrival: f64) {
        if !FEEDBACK {
            return;
        }
        if let Some(r) = self.retries.as_deref_mut() {
            r.succeeded();
        }
        if self.breaker.is_some() {
            self.breaker_record(arrival, false);
        }
    }

    /// The breaker learns the outcome of a try sent at `arrival`, answered now (out of line:
    /// its callers check that there is a breaker, so a run without one pays a test).
    #[inline(never)]
    fn breaker_record(&mut self, arrival: f64, failed: bool) {
        if let Some(b) = self.breaker.as_deref_mut() {
            if let Moved::Opened(until) = b.record(self.now, self.now - arrival, failed) {
                self.measures.breaker_opened(self.now, until);
            }
        }
    }

    /// The breaker failed try `req` of `client` at once, before it was sent: its client has
    /// the error (sending again no sooner than `at_least`), or retries.
    pub(super) fn rejected(&mut self, req: u32, client: u32, at_least: f64) {
        let e = &mut self.slab.entries[req as usize];
        e.arrival = self.now;
        e.client = client;
        let origin = self.origin(req);
        self.measures.breaker_rejected(origin);
        self.client_error(req, ErrorKind::BreakerOpen, at_least);
        self.slab.release(req);
    }

    /// Try `req` failed with `error` (its entry still holds what it was): sent again after a
    /// backoff (None), or failed for good (its request's first send).
    fn try_failed(&mut self, req: u32, error: ErrorKind) -> Option<f64> {
        let now = self.now;
        let Some(r) = self.retries.as_deref_mut().filter(|_| FEEDBACK) else {
            return Some(self.slab.entries[req as usize].arrival);
        };
        let tried = r.try_of(req);
        let delay = match r.decide(tried, error, now) {
            Verdict::Retry(delay) => delay,
            Verdict::Failed => return Some(tried.origin),
            Verdict::Denied => {
                self.measures.retry_denied(tried.origin);
                return Some(tried.origin);
            }
            Verdict::Exhausted => {
                self.measures.retries_exhausted(tried.origin);
                return Some(tried.origin);
            }
        };
        let e = &self.slab.entries[req as usize];
        let pending = Pending {
            tried: Try {
                origin: tried.origin,
                number: tried.number + 1,
                last_delay: delay,
            },
            client: e.client,
            class: e.class,
            service: e.service,
            key: self.slab.keys.get(req as usize).copied().unwrap_or(NONE),
            colocated_half: self.colocated.as_ref().map_or(0.0, |c| c.half(req)),
        };
        let stride = self.slab.stride;
        let times = &self.slab.times[req as usize * stride..][..stride];
        let at = now + delay;
        if r.wait(pending, times, at) {
            self.events.reschedule_retries(at);
        }
        self.measures.retried(tried.origin);
        None
    }

    /// The retries due now are sent, in the order they came due.
    pub(super) fn retries_due(&mut self) {
        loop {
            let r = self.retries.as_deref_mut().expect("retries");
            match r.take_due(self.now) {
                Ok((pending, slot)) => self.send_again(pending, slot),
                Err(Some(at)) => return self.events.reschedule_retries(at),
                Err(None) => return self.events.cancel(Event::Retries),
            }
        }
    }

    /// A retry's try: a new entry with what the failed one had, sent through a router.
    fn send_again(&mut self, p: Pending, slot: u32) {
        let req = self.slab.insert();
        let stride = self.slab.stride;
        let r = self.retries.as_deref_mut().expect("retries");
        self.slab.times[req as usize * stride..][..stride].copy_from_slice(r.times_of(slot));
        if self.slab.keyed {
            self.slab.keys[req as usize] = p.key;
        }
        if let Some(colocated) = self.colocated.as_mut() {
            colocated.keep(req, p.colocated_half);
        }
        r.sent(req, &p);
        // Its own patience, drawn from the retries' stream.
        let patience = if self.s.router_cost.is_none() {
            r.patience(self.s, Kind::Queue)
        } else {
            None
        };
        let client_patience = r.patience(self.s, Kind::Client);
        self.measures.tried(p.tried.origin, self.now);
        self.slab.entries[req as usize].class = p.class;
        self.send(req, p.client, p.service, patience, client_patience);
    }
}
