//! The requests in flight: each one's entry in a slab (where it is, what it holds, its drawn
//! phase times and key), reused once freed, and the FIFOs linked through the entries. These
//! are the types every part of the engine shares: they name no other part.

use crate::alloc::prefetch_all;
use crate::scenario::Scenario;

pub(super) const NONE: u32 = u32::MAX;

/// Where a request is, for what an event or a restart must do with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Held by its router's policy (or about to be routed).
    Routing,
    /// In its router's own queue, or being worked on by it (`router.cost`).
    AtRouter,
    /// Routed, on its way to the dyno (`router.connect`).
    Connecting,
    /// Refused by a dyno whose backlog was full: the router tries another after
    /// `router.retry_delay`. Counted by no dyno meanwhile.
    Retrying,
    Accept,
    /// A timed phase: `[service]` hold or `io`.
    Timed,
    Cpu,
    PoolWait(u32),
    ResourceQueue(u32),
    ResourceService(u32),
    /// On a thread between phases.
    Thread,
    /// Answered; its thread is still busy with it (`app.overhead`).
    Overhead,
    /// Killed while an event of its own was pending; freed when it comes.
    Dead,
    /// Killed while resource `r` served it: the resource works on to the end (it is not
    /// told), then frees its server and connection, and the entry is freed.
    Orphan(u32),
    /// Held on its thread by an outage until it ends: of the app before its first phase (NONE),
    /// or of resource `r` with its connection in hand (`[[faults]]`, see `super::faults`).
    Hung(u32),
    /// Not a request: a free entry of the slab.
    Free,
}

impl State {
    /// Whether a request in this state holds its worker's thread (its app is working on it,
    /// or waiting on its behalf): what `app.service_timeout` can stop, and a running call a
    /// fan-out's `cancel = true` stops.
    #[inline]
    pub fn on_thread(self) -> bool {
        matches!(
            self,
            State::Timed
                | State::Hung(_)
                | State::Cpu
                | State::Thread
                | State::PoolWait(_)
                | State::ResourceQueue(_)
                | State::ResourceService(_)
        )
    }
}

#[derive(Debug, Clone)]
pub(super) struct Request {
    pub arrival: f64,
    pub start: f64,
    /// `[service]`'s drawn time, or the sum of the phases' (uncontended).
    pub service: f64,
    pub router: u32,
    pub dyno: u32,
    pub process: u32,
    pub class: u32,
    pub phase: u32,
    pub client: u32,
    pub state: State,
    /// Whether it has waited in a queue (router or dyno) on its way to a thread.
    pub waited: bool,
    /// The pool connection held (pool index), or NONE.
    pub pool: u32,
    /// When the current wait began (pool or resource queue).
    pub waited_since: f64,
    pub pool_wait: f64,
    /// Bumped each time the slab entry is reused: a deadline set for an earlier request of
    /// the same entry is told apart by it.
    pub generation: u32,
    /// The client has its answer: an error (a timeout), given while the dyno may still be
    /// working on the request, which it is not told.
    pub answered: bool,
    /// The app's retries of its current query so far (`[resources.NAME] retries`).
    pub query_retries: u16,
    /// The router no longer counts the request against its dyno (it answered it, or gave up
    /// on the dyno: H12).
    pub router_done: bool,
    /// When the client was answered with an error (infinite if it was not).
    pub abandoned_at: f64,
    /// The CPU work the request still had to do when its client was answered with an error.
    pub cpu_left: f64,
    /// Dynos that refused it (a full `app.backlog`).
    pub refusals: u32,
    /// The dyno that refused it last, which its retry avoids (NONE: none).
    pub refused_by: u32,
    /// The request after it in its dyno's accept queue ([`Fifo`]), or NONE.
    pub next: u32,
    /// When its router last sent it to a dyno: the start of the round trip the router sees
    /// (`p2c_ewma` learns from it).
    pub dispatched: f64,
}

impl Request {
    /// A new try of a request, sent at `arrival` by `router` for `client` (NONE: the open
    /// workload) with `service`: routing, on no dyno, nothing done, waited or answered yet.
    #[inline(always)]
    pub fn begin_try(&mut self, arrival: f64, service: f64, router: u32, client: u32) {
        self.arrival = arrival;
        self.service = service;
        self.router = router;
        self.client = client;
        self.phase = 0;
        self.pool = NONE;
        self.state = State::Routing;
        self.waited = false;
        self.answered = false;
        self.router_done = false;
        self.abandoned_at = f64::INFINITY;
        self.dyno = NONE;
        self.refusals = 0;
        self.refused_by = NONE;
    }
}

/// Requests in flight, by index; freed entries are reused.
#[derive(Debug, Default)]
pub(super) struct Slab {
    pub entries: Vec<Request>,
    pub free: Vec<u32>,
    /// Drawn phase times: request i's are `times[i * stride ..][.. its phases]`, `stride`
    /// being the most phases a class has (0 for `[service]`). One array for all requests,
    /// rather than a vector each, so that a request's times are where its index says (no
    /// pointer to load first: with many requests in flight that was a cache miss more).
    pub times: Vec<f64>,
    pub stride: usize,
    /// Each request's key (`arrivals.keys`) by its index, when requests carry keys (empty
    /// otherwise: a scenario without keys keeps its entries as they were).
    pub keys: Vec<u32>,
    pub keyed: bool,
}

impl Slab {
    /// No request yet, with room for `s`'s phase times and keys.
    pub fn new(s: &Scenario) -> Slab {
        Slab {
            stride: s.request.as_ref().map_or(0, |r| {
                r.classes.iter().map(|c| c.phases.len()).max().unwrap_or(0)
            }),
            keyed: s.keys.is_some(),
            ..Slab::default()
        }
    }

    #[inline(always)]
    pub fn insert(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            let e = &mut self.entries[i as usize];
            e.generation = e.generation.wrapping_add(1);
            i
        } else {
            self.entries.push(Request {
                arrival: 0.0,
                start: 0.0,
                service: 0.0,
                router: 0,
                dyno: NONE,
                process: 0,
                class: 0,
                phase: 0,
                client: NONE,
                state: State::Routing,
                waited: false,
                pool: NONE,
                waited_since: 0.0,
                pool_wait: 0.0,
                generation: 0,
                answered: false,
                query_retries: 0,
                router_done: false,
                abandoned_at: f64::INFINITY,
                cpu_left: 0.0,
                refusals: 0,
                refused_by: NONE,
                next: NONE,
                dispatched: 0.0,
            });
            self.times.resize(self.entries.len() * self.stride, 0.0);
            if self.keyed {
                self.keys.resize(self.entries.len(), NONE);
            }
            (self.entries.len() - 1) as u32
        }
    }
    /// Request `i`'s time for phase `phase`.
    #[inline]
    pub fn time(&self, i: u32, phase: u32) -> f64 {
        self.times[i as usize * self.stride + phase as usize]
    }

    /// Puts request `i` at the back of `fifo`.
    #[inline]
    pub fn push_back(&mut self, fifo: &mut Fifo, i: u32) {
        self.entries[i as usize].next = NONE;
        if fifo.len == 0 {
            fifo.head = i;
        } else {
            self.entries[fifo.tail as usize].next = i;
        }
        fifo.tail = i;
        fifo.len += 1;
    }

    /// Takes the request at the front of `fifo`.
    #[inline]
    pub fn pop_front(&mut self, fifo: &mut Fifo) -> Option<u32> {
        if fifo.len == 0 {
            return None;
        }
        let i = fifo.head;
        fifo.head = self.entries[i as usize].next;
        fifo.len -= 1;
        Some(i)
    }

    /// Asks for request `i`'s entry and phase times (see [`crate::alloc::prefetch`]).
    #[inline]
    pub fn prefetch(&self, i: u32) {
        if let Some(entry) = self.entries.get(i as usize) {
            prefetch_all(entry);
            if let Some(times) = self
                .times
                .get(i as usize * self.stride..)
                .and_then(|t| t.get(..self.stride))
            {
                prefetch_all(times);
            }
        }
    }

    #[inline]
    pub fn release(&mut self, i: u32) {
        self.entries[i as usize].state = State::Free;
        self.free.push(i);
    }
}

/// A FIFO of requests linked through their slab entries: no buffer of its own to reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fifo {
    pub head: u32,
    pub tail: u32,
    pub len: u32,
}

impl Fifo {
    pub const EMPTY: Fifo = Fifo {
        head: u32::MAX,
        tail: u32::MAX,
        len: 0,
    };
}
