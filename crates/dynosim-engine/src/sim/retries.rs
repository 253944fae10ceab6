//! The clients' retries (`[arrivals.retry]`, [`crate::retry`]): a try that failed with an
//! outcome the clients retry, while tries are left and the budget allows, is sent again after
//! its backoff as a new try of the same request (its class, drawn work and key), through the
//! router like any arrival; otherwise the client gets the error. The try that failed is left
//! as it is: a dyno that holds it works on.
//!
//! A user request's figures run from its first try's send to the last try's answer; each try
//! counts at its dyno as a request of its own (its queue time, the router's counts and
//! timeouts, its log line for the autoscaler). Retries wait for their backoff in a heap of
//! their own, all behind one event of the kernel (as the deadlines do, see `super::timers`).
//! Their draws (backoff jitter, and the retried tries' patience) come from streams of their
//! own, so that the first tries' draws are the same with or without retries.

use super::events::Event;
use super::timers::Kind;
use super::{Simulation, NONE};
use crate::result::ErrorKind;
use crate::retry::budget::BudgetState;
use crate::retry::{ClientRetry, Failure};
use crate::rng::{stream, SimRng, Stream};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A slab entry's try: its request's first send, which try it is (1 for the first), and the
/// backoff delay drawn before it (0 for the first).
#[derive(Debug, Clone, Copy)]
pub(super) struct Try {
    pub origin: f64,
    pub number: u32,
    pub last_delay: f64,
}

const FIRST: Try = Try {
    origin: 0.0,
    number: 1,
    last_delay: 0.0,
};

/// A retry waiting for its backoff: what the new try copies of the one that failed (its
/// drawn phase times are in [`Retries::times`], at its slot).
#[derive(Debug, Clone, Copy)]
struct Pending {
    tried: Try,
    client: u32,
    class: u32,
    service: f64,
    /// The key (NONE: requests carry none), and half the colocated CPU.
    key: u32,
    colocated_half: f64,
}

/// The retries' state in one replication.
#[derive(Debug)]
pub(super) struct Retries {
    pub policy: ClientRetry,
    budget: Option<BudgetState>,
    /// Backoff jitter.
    delays: SimRng,
    /// The retried tries' own timeouts (client, queue), drawn when each is sent.
    patience: SimRng,
    /// Each slab entry's try, by slab index.
    pub tries: Vec<Try>,
    /// Retries waiting: (due time's bits, sequence, slot), the first first.
    due: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slots: Vec<Pending>,
    /// Each slot's phase times, the slab's stride of them (no allocation per retry).
    times: Vec<f64>,
    free: Vec<u32>,
    seq: u64,
    /// When the retries' event is scheduled, if it is.
    scheduled: Option<f64>,
}

impl Retries {
    pub fn new(policy: &ClientRetry, seed: u64, replication: u64) -> Retries {
        Retries {
            policy: policy.clone(),
            budget: policy.budget.map(|b| b.state()),
            delays: stream(seed, replication, Stream::RetryDelays),
            patience: stream(seed, replication, Stream::RetryTimeouts),
            tries: Vec::new(),
            due: BinaryHeap::new(),
            slots: Vec::new(),
            times: Vec::new(),
            free: Vec::new(),
            seq: 0,
            scheduled: None,
        }
    }

    /// Slab entry `req`'s try (the first, when it was never set: a request that arrived).
    #[inline]
    pub fn of(&self, req: u32) -> Try {
        self.tries.get(req as usize).copied().unwrap_or(FIRST)
    }

    #[inline]
    fn set(&mut self, req: u32, t: Try) {
        let i = req as usize;
        if self.tries.len() <= i {
            self.tries.resize(i + 1, FIRST);
        }
        self.tries[i] = t;
    }

    /// Bytes it keeps per request in flight.
    pub const BYTES_PER_REQUEST: f64 = 24.0;
}

/// What became of a failed try.
pub(super) enum Verdict {
    /// Sent again after its backoff: the client waits.
    Retried,
    /// The client gets the error: its request's first send, and whether a budget refused a
    /// retry it would have made.
    Failed { origin: f64 },
}

impl Simulation<'_> {
    /// A request arrived (its first try): its try is the first, sent now.
    #[inline]
    pub(super) fn first_try(&mut self, req: u32) {
        let now = self.now;
        if let Some(r) = self.retries.as_deref_mut() {
            r.set(
                req,
                Try {
                    origin: now,
                    number: 1,
                    last_delay: 0.0,
                },
            );
            if let Some(b) = r.budget.as_mut() {
                b.request(now);
            }
            self.measures.tried(now, now);
        }
    }

    /// The request's first send (its try's own arrival without retries).
    #[inline]
    pub(super) fn origin(&self, req: u32) -> f64 {
        match self.retries.as_deref() {
            None => self.slab.entries[req as usize].arrival,
            Some(r) => r.of(req).origin,
        }
    }

    /// A try was answered successfully: the budget learns it.
    #[inline]
    pub(super) fn try_succeeded(&mut self) {
        if let Some(b) = self.retries.as_deref_mut().and_then(|r| r.budget.as_mut()) {
            b.succeeded();
        }
    }

    /// Try `req` failed with `error` (its entry still holds what it was): sent again after a
    /// backoff, or failed for good.
    pub(super) fn try_failed(&mut self, req: u32, error: ErrorKind) -> Verdict {
        let now = self.now;
        let stride = self.slab.stride;
        let Some(r) = self.retries.as_deref_mut() else {
            return Verdict::Failed {
                origin: self.slab.entries[req as usize].arrival,
            };
        };
        let tried = r.of(req);
        let retried = r.policy.on.retries(Failure::of(error));
        if !retried {
            return Verdict::Failed {
                origin: tried.origin,
            };
        }
        let wanted = tried.number < r.policy.attempts;
        let allowed = match r.budget.as_mut() {
            None => wanted,
            Some(b) => b.failed(now, wanted),
        };
        if !allowed {
            if wanted {
                self.measures.retry_denied(tried.origin);
            } else {
                self.measures.retries_exhausted(tried.origin);
            }
            return Verdict::Failed {
                origin: tried.origin,
            };
        }
        let delay = r
            .policy
            .backoff
            .delay(tried.number, tried.last_delay, &mut r.delays);
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
            colocated_half: self
                .colocated_half
                .get(req as usize)
                .copied()
                .unwrap_or(0.0),
        };
        let slot = match r.free.pop() {
            Some(s) => {
                r.slots[s as usize] = pending;
                s
            }
            None => {
                r.slots.push(pending);
                r.times.resize(r.slots.len() * stride, 0.0);
                (r.slots.len() - 1) as u32
            }
        };
        let at = slot as usize * stride;
        r.times[at..at + stride]
            .copy_from_slice(&self.slab.times[req as usize * stride..][..stride]);
        let at = now + delay;
        r.seq += 1;
        r.due.push(Reverse((at.to_bits(), r.seq, slot)));
        if r.scheduled.map_or(true, |t| at < t) {
            r.scheduled = Some(at);
            self.events.reschedule_retries(at);
        }
        self.measures.retried(tried.origin);
        Verdict::Retried
    }

    /// The retries due now are sent, in the order they came due.
    pub(super) fn retries_due(&mut self) {
        let now = self.now;
        loop {
            let r = self.retries.as_deref_mut().expect("retries");
            let Some(&Reverse((bits, _, slot))) = r.due.peek() else {
                r.scheduled = None;
                self.events.cancel(Event::Retries);
                return;
            };
            let at = f64::from_bits(bits);
            if at > now {
                r.scheduled = Some(at);
                self.events.reschedule_retries(at);
                return;
            }
            r.due.pop();
            r.free.push(slot);
            let pending = r.slots[slot as usize];
            self.send_again(pending, slot);
        }
    }

    /// A retry's try: a new entry with what the failed one had, sent through a router.
    fn send_again(&mut self, p: Pending, slot: u32) {
        let now = self.now;
        let req = self.slab.insert();
        let stride = self.slab.stride;
        let r = self.retries.as_deref().expect("retries");
        self.slab.times[req as usize * stride..][..stride]
            .copy_from_slice(&r.times[slot as usize * stride..][..stride]);
        if self.slab.keyed {
            self.slab.keys[req as usize] = p.key;
        }
        if self.s.colocated_cpu.is_some() {
            let i = req as usize;
            if self.colocated_half.len() <= i {
                self.colocated_half.resize(i + 1, 0.0);
            }
            self.colocated_half[i] = p.colocated_half;
        }
        let r = self.retries.as_deref_mut().expect("retries");
        r.set(req, p.tried);
        // Its own patience, drawn from the retries' stream.
        let draw = |kind: Kind, rng: &mut SimRng, s: &crate::Scenario| {
            let t = match kind {
                Kind::Queue => s.queue_timeout.as_ref(),
                _ => s.client_timeout.as_ref(),
            };
            t.map(|t| t.draw(rng))
        };
        let patience = if self.s.router_cost.is_none() {
            draw(Kind::Queue, &mut r.patience, self.s)
        } else {
            None
        };
        let client_patience = draw(Kind::Client, &mut r.patience, self.s);
        self.measures.tried(p.tried.origin, now);
        let e = &mut self.slab.entries[req as usize];
        e.class = p.class;
        self.send(req, p.client, p.service, patience, client_patience);
    }
}
