//! The clients' retries (`[arrivals.retry]`, [`crate::retry`]): their state. A try that failed
//! with an outcome the clients retry, while tries are left and the budget allows, is sent
//! again after its backoff as a new try of the same request (its class, drawn work and key);
//! what a failed try becomes, and the retries' sends, are steps of [`super::resend`].
//!
//! Retries wait for their backoff in a heap of their own, all behind one event of the kernel
//! (as the deadlines do, see `super::deadlines`). Their draws (backoff jitter, and the retried
//! tries' patience) come from streams of their own, so that the first tries' draws are the
//! same with or without retries.

use super::deadlines::Kind;
use crate::result::ErrorKind;
use crate::retry::clients::Decider;
pub(super) use crate::retry::clients::Verdict;
use crate::retry::Failure;
use crate::rng::SimRng;
use crate::scenario::Scenario;
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
pub(super) struct Pending {
    pub tried: Try,
    pub client: u32,
    pub class: u32,
    pub service: f64,
    /// The key (NONE: requests carry none), and half the colocated CPU.
    pub key: u32,
    pub colocated_half: f64,
}

/// The retries' random streams.
pub(super) struct RetryStreams {
    /// Backoff jitter.
    pub delays: SimRng,
    /// The retried tries' own timeouts (client, queue), drawn when each is sent.
    pub patience: SimRng,
}

/// The retries' state in one replication.
pub(super) struct Retries {
    /// The policy, its budget and the delays' stream.
    decider: Decider,
    /// The retried tries' own timeouts.
    patience: SimRng,
    /// Each slab entry's try, by slab index.
    tries: Vec<Try>,
    /// Retries waiting: (due time's bits, sequence, slot), the first first.
    due: BinaryHeap<Reverse<(u64, u64, u32)>>,
    slots: Vec<Pending>,
    /// Each slot's phase times, the slab's stride of them (no allocation per retry).
    times: Vec<f64>,
    stride: usize,
    free: Vec<u32>,
    seq: u64,
    /// When the retries' event is scheduled, if it is.
    scheduled: Option<f64>,
}

impl Retries {
    /// Bytes it keeps per request in flight.
    pub const BYTES_PER_REQUEST: f64 = 24.0;

    /// The scenario's retries (None: its clients never retry); `stride` phase times a request.
    pub fn of(s: &Scenario, stride: usize, streams: RetryStreams) -> Option<Box<Retries>> {
        let policy = s.client_retry.as_ref()?;
        Some(Box::new(Retries {
            decider: Decider::new(policy.clone(), streams.delays),
            patience: streams.patience,
            tries: Vec::new(),
            due: BinaryHeap::new(),
            slots: Vec::new(),
            times: Vec::new(),
            stride,
            free: Vec::new(),
            seq: 0,
            scheduled: None,
        }))
    }

    /// Slab entry `req`'s try (the first, when it was never set: a request that arrived).
    #[inline]
    pub fn try_of(&self, req: u32) -> Try {
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

    /// A request's first try, sent at `now` by slab entry `req`: the budget counts it.
    #[inline]
    pub fn first(&mut self, req: u32, now: f64) {
        self.set(
            req,
            Try {
                origin: now,
                number: 1,
                last_delay: 0.0,
            },
        );
        self.decider.first(now);
    }

    /// A try was answered successfully: the budget learns it.
    #[inline]
    pub fn succeeded(&mut self) {
        self.decider.succeeded();
    }

    /// Try `tried` failed with `error` at `now`: whether it is retried (and its backoff, drawn
    /// now), or why not.
    pub fn decide(&mut self, tried: Try, error: ErrorKind, now: f64) -> Verdict {
        self.decider
            .decide(tried.number, tried.last_delay, Failure::of(error), now)
    }

    /// A retry waits until `at`, with its phase times `times`: whether the retries' event must
    /// move to `at` (it is the first due).
    pub fn wait(&mut self, pending: Pending, times: &[f64], at: f64) -> bool {
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = pending;
                s
            }
            None => {
                self.slots.push(pending);
                self.times.resize(self.slots.len() * self.stride, 0.0);
                (self.slots.len() - 1) as u32
            }
        };
        let first = slot as usize * self.stride;
        self.times[first..first + self.stride].copy_from_slice(times);
        self.seq += 1;
        self.due.push(Reverse((at.to_bits(), self.seq, slot)));
        let earlier = self.scheduled.map_or(true, |t| at < t);
        if earlier {
            self.scheduled = Some(at);
        }
        earlier
    }

    /// The first retry due at `now`, taken from the waiting ones, with its slot (whose phase
    /// times are [`Self::times_of`] until the next call); or Err with when the next one is due
    /// (None: none waits), which is when the retries' event now is.
    pub fn take_due(&mut self, now: f64) -> Result<(Pending, u32), Option<f64>> {
        let Some(&Reverse((bits, _, slot))) = self.due.peek() else {
            self.scheduled = None;
            return Err(None);
        };
        let at = f64::from_bits(bits);
        if at > now {
            self.scheduled = Some(at);
            return Err(Some(at));
        }
        self.due.pop();
        self.free.push(slot);
        Ok((self.slots[slot as usize], slot))
    }

    /// The phase times kept with slot `slot`.
    pub fn times_of(&self, slot: u32) -> &[f64] {
        &self.times[slot as usize * self.stride..][..self.stride]
    }

    /// Slab entry `to` is another try of `from`'s, by its router (the same client try).
    #[inline]
    pub fn carry(&mut self, from: u32, to: u32) {
        let t = self.try_of(from);
        self.set(to, t);
    }

    /// Slab entry `req` is retry `p`, sent now.
    pub fn sent(&mut self, req: u32, p: &Pending) {
        self.set(req, p.tried);
    }

    /// A retried try's patience of `kind` (the queue's or the client's), from the retries' own
    /// stream.
    pub fn patience(&mut self, s: &Scenario, kind: Kind) -> Option<f64> {
        let t = match kind {
            Kind::Queue => s.queue_timeout.as_ref(),
            _ => s.client_timeout.as_ref(),
        };
        t.map(|t| t.draw(&mut self.patience))
    }
}
