//! The requests' deadlines (`router.timeout`, `router.queue_timeout`, `arrivals.timeout`,
//! `app.service_timeout`, `app.timeout`) and the killed workers' replacements: for each kind, the deadlines set and
//! not yet due, first first ([`Queue`]); all kinds share one event in the kernel's queue, at
//! the earliest ([`Deadlines`], with each timeout's draws). What a deadline does when it comes
//! is [`super::timeouts`]'.
//!
//! A deadline is not taken back when its request is answered in time: it stays until it
//! comes, and is then passed over (its request has moved on, or its slab entry was reused,
//! which its generation tells). Most requests are answered in time, and taking each one's
//! deadline out of a heap would cost what its completion costs. A timeout that is the same for
//! every request keeps its deadlines in the order they were set, a FIFO, so that those
//! answered early are dropped from the front as they are answered ([`Queue::prune`]); a
//! drawn timeout keeps them in a heap. Either way the deadlines held are at most those set
//! during the last timeout's length.

use super::slab::{Request, State};
use crate::rng::SimRng;
use crate::scenario::Scenario;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// A request's deadline: when, which request, and its slab entry's generation then.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Deadline {
    pub at: f64,
    pub req: u32,
    pub generation: u32,
}

/// The kinds of deadline, in the order they are handled when due at the same time: the
/// router's answer (H12) comes before the client's own timeout, both before the app's own
/// (Rack::Timeout's `service_timeout`, which frees the thread), and all before the worker's
/// (which kills it: a request the app stopped at that moment has left it). The last is not a
/// request's: a killed worker's replacement is up (`req` names the worker: dyno × processes +
/// process; `generation`, its kills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Router = 0,
    Queue = 1,
    Client = 2,
    Service = 3,
    App = 4,
    WorkerBoot = 5,
    /// A resource's `timeout` (statement_timeout) for a query waiting in its FCFS queue or
    /// shared by its servers (PS); handled after the client's and before the app's own, as the
    /// database stops its statement before the app would give up on its request.
    Statement = 6,
}

pub(super) const KINDS: [Kind; 7] = [
    Kind::Router,
    Kind::Queue,
    Kind::Client,
    Kind::Statement,
    Kind::Service,
    Kind::App,
    Kind::WorkerBoot,
];

/// The kinds whose deadlines are dropped once their requests are done with them (see
/// [`Deadlines::prune`]): all but a statement's, whose heap holds only the queries its
/// resources took within their timeout.
const PRUNED: [Kind; 6] = [
    Kind::Router,
    Kind::Queue,
    Kind::Client,
    Kind::Service,
    Kind::App,
    Kind::WorkerBoot,
];

/// One kind's deadlines, first first.
#[derive(Debug)]
pub(super) enum Queue {
    /// Set in the order they come (a fixed timeout).
    Fifo(VecDeque<Deadline>),
    /// In any order (a drawn timeout): by time, then the order set.
    Heap {
        heap: BinaryHeap<Reverse<(u64, u64, u32, u32)>>,
        seq: u64,
    },
}

impl Queue {
    pub fn new(fixed: bool) -> Queue {
        if fixed {
            Queue::Fifo(VecDeque::new())
        } else {
            Queue::Heap {
                heap: BinaryHeap::new(),
                seq: 0,
            }
        }
    }

    #[inline]
    pub fn push(&mut self, d: Deadline) {
        match self {
            Queue::Fifo(q) => {
                debug_assert!(
                    q.back().map_or(true, |b| b.at <= d.at),
                    "a fixed timeout's deadlines come in order"
                );
                q.push_back(d);
            }
            Queue::Heap { heap, seq } => {
                debug_assert!(d.at >= 0.0);
                heap.push(Reverse((d.at.to_bits(), *seq, d.req, d.generation)));
                *seq += 1;
            }
        }
    }

    /// The earliest deadline.
    #[inline]
    pub fn first(&self) -> Option<Deadline> {
        match self {
            Queue::Fifo(q) => q.front().copied(),
            Queue::Heap { heap, .. } => {
                heap.peek()
                    .map(|Reverse((at, _, req, generation))| Deadline {
                        at: f64::from_bits(*at),
                        req: *req,
                        generation: *generation,
                    })
            }
        }
    }

    /// Takes the earliest deadline.
    #[inline]
    pub fn pop(&mut self) -> Option<Deadline> {
        let first = self.first();
        match self {
            Queue::Fifo(q) => {
                q.pop_front();
            }
            Queue::Heap { heap, .. } => {
                heap.pop();
            }
        }
        first
    }

    /// Drops the deadlines at the front whose requests `live` says are done with them (a
    /// FIFO's only: a heap's wait until they come).
    #[inline]
    pub fn prune(&mut self, live: impl Fn(Deadline) -> bool) {
        if let Queue::Fifo(q) = self {
            while let Some(&d) = q.front() {
                if live(d) {
                    break;
                }
                q.pop_front();
            }
        }
    }

    /// Keeps only the deadlines `live` says still count, in their order, once more than
    /// `bound` are held. A FIFO's front waits for its oldest request still in flight, and a
    /// heap keeps every deadline until it comes: at a million requests a second under a 30 s
    /// timeout either would hold millions that are done with. With `bound` k times the
    /// requests in flight (plus a constant), a sweep of k·n comes after at least (k − 1)·n
    /// pushes, so it costs k/(k − 1) reads a request, and what is held stays within k times
    /// the requests in flight.
    #[inline]
    pub fn compact(&mut self, bound: usize, live: impl Fn(Deadline) -> bool) {
        match self {
            Queue::Fifo(q) if q.len() > bound => q.retain(|&d| live(d)),
            Queue::Heap { heap, .. } if heap.len() > bound => {
                heap.retain(|Reverse((at, _, req, generation))| {
                    live(Deadline {
                        at: f64::from_bits(*at),
                        req: *req,
                        generation: *generation,
                    })
                })
            }
            _ => {}
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        match self {
            Queue::Fifo(q) => q.len(),
            Queue::Heap { heap, .. } => heap.len(),
        }
    }
}

/// The requests' deadlines of every kind the scenario sets, and the killed workers'
/// replacements; when their one event is scheduled; and each timeout's draws.
#[derive(Debug)]
pub(super) struct Deadlines {
    /// By [`Kind`] (None: a timeout the scenario does not set).
    queues: [Option<Queue>; 7],
    /// Each resource's `timeout` (NaN: none), for [`live`]'s reading of a statement's.
    pub statement: Vec<f64>,
    /// When the deadlines' event is scheduled, if it is.
    at: Option<f64>,
    /// The kinds of [`PRUNED`] the scenario sets, in that order: what [`Deadlines::prune`]
    /// looks at after every response (none, in a run without timeouts).
    pruned: Vec<Kind>,
    /// The drawn timeouts' draws: the router's, the queue's, the client's, the app's (see
    /// [`Deadlines::draw`]; `app.service_timeout` is fixed and draws nothing).
    rngs: [SimRng; 4],
}

/// The streams the timeouts are drawn from (see [`super::streams`]).
pub(super) struct TimeoutStreams {
    pub router: SimRng,
    pub queue: SimRng,
    pub client: SimRng,
    pub app: SimRng,
}

impl Deadlines {
    pub fn new(s: &Scenario, streams: TimeoutStreams) -> Deadlines {
        let [router, queue, client, app] = [
            s.router_timeout.as_ref(),
            s.queue_timeout.as_ref(),
            s.client_timeout.as_ref(),
            s.app.timeout.as_deref(),
        ]
        .map(|t| t.map(|t| Queue::new(t.constant().is_some())));
        // A router's retry keeps its client's deadline, set again out of order.
        let client = match client {
            Some(Queue::Fifo(_)) if s.router_retry.beyond_refused() => Some(Queue::new(false)),
            other => other,
        };
        // A fixed time after the thread took the request: in the order set.
        let service = s.app.service_timeout.is_some().then(|| Queue::new(true));
        // Replacements come a fixed time after their kills: in order.
        let boots = s.app.timeout.is_some().then(|| Queue::new(true));
        // A statement's from when its resource took it (a hang, a queue before): out of order.
        let statement = s
            .resources
            .iter()
            .any(|r| r.timeout.is_some())
            .then(|| Queue::new(false));
        let queues = [router, queue, client, service, app, boots, statement];
        let pruned = PRUNED
            .into_iter()
            .filter(|&kind| queues[kind as usize].is_some())
            .collect();
        Deadlines {
            queues,
            pruned,
            statement: s
                .resources
                .iter()
                .map(|r| r.timeout.unwrap_or(f64::NAN))
                .collect(),
            at: None,
            rngs: [streams.router, streams.queue, streams.client, streams.app],
        }
    }

    /// A timeout of `kind` for one request, if the scenario sets one.
    #[inline]
    pub fn draw(&mut self, s: &Scenario, kind: Kind) -> Option<f64> {
        let (timeout, rng) = match kind {
            Kind::Router => (s.router_timeout.as_ref(), 0),
            Kind::Queue => (s.queue_timeout.as_ref(), 1),
            Kind::Client => (s.client_timeout.as_ref(), 2),
            Kind::App => (s.app.timeout.as_deref(), 3),
            Kind::Service => return s.app.service_timeout,
            Kind::WorkerBoot | Kind::Statement => return None,
        };
        Some(timeout?.draw(&mut self.rngs[rng]))
    }

    /// Adds deadline `d` of `kind`; returns when the deadlines' event must now come, if
    /// sooner than it was to.
    #[inline]
    pub fn push(&mut self, kind: Kind, d: Deadline) -> Option<f64> {
        let at = d.at;
        let queue = self.queues[kind as usize]
            .as_mut()
            .expect("a deadline of a timeout the scenario sets");
        queue.push(d);
        if self.at.map_or(true, |t| at < t) {
            self.at = Some(at);
            return Some(at);
        }
        None
    }

    /// The earliest deadline of `kind`.
    #[inline]
    pub fn first(&self, kind: Kind) -> Option<Deadline> {
        self.queues[kind as usize].as_ref().and_then(Queue::first)
    }

    /// Takes the earliest deadline of `kind`.
    #[inline]
    pub fn pop(&mut self, kind: Kind) {
        self.queues[kind as usize].as_mut().map(Queue::pop);
    }

    /// Drops the deadlines of the requests answered in time from the fronts of the fixed
    /// timeouts' queues, and sweeps a kind that holds more than `bound` (see
    /// [`Queue::compact`]); `entries`: the requests, which tell whether a deadline is live.
    #[inline(always)]
    pub fn prune(&mut self, entries: &[Request], bound: usize) {
        let Deadlines {
            queues,
            statement,
            pruned,
            ..
        } = self;
        // A statement's heap is not swept: it holds the queries taken in the last timeout.
        for &kind in pruned.iter() {
            if let Some(d) = queues[kind as usize].as_mut() {
                d.prune(|d| live(entries, statement, kind, d));
                d.compact(bound, |d| live(entries, statement, kind, d));
            }
        }
    }

    /// Whether any kind's deadlines are pruned (see [`Self::prune`]).
    #[inline]
    pub fn prunes(&self) -> bool {
        !self.pruned.is_empty()
    }

    /// The earliest live deadline, dropping dead ones from the fronts; the deadlines' event is
    /// to come then (None: none is left, and the event is to be taken back).
    pub fn next(&mut self, entries: &[Request]) -> Option<f64> {
        let mut next = f64::INFINITY;
        for kind in KINDS {
            while let Some(d) = self.first(kind) {
                if live(entries, &self.statement, kind, d) {
                    next = next.min(d.at);
                    break;
                }
                self.pop(kind);
            }
        }
        self.at = next.is_finite().then_some(next);
        self.at
    }
}

/// Whether deadline `d` of `kind` still concerns its request: the same request (its
/// generation), not yet answered, and where that kind of deadline applies to it.
/// `statement`: each resource's `timeout` (NaN: none).
#[inline]
pub(super) fn live(entries: &[Request], statement: &[f64], kind: Kind, d: Deadline) -> bool {
    if kind == Kind::WorkerBoot {
        return true;
    }
    let e = &entries[d.req as usize];
    if e.generation != d.generation || e.state == State::Free {
        return false;
    }
    match kind {
        Kind::Router => !e.router_done,
        Kind::Queue => e.state == State::Routing && !e.answered,
        Kind::Client => !e.answered,
        // On its worker still (answered with an error or not: the worker is busy with it).
        // The app's own timeout likewise: it raises inside a request the app is still working
        // on, whether or not its client has gone (not once its response has gone, `Overhead`).
        Kind::Service | Kind::App => e.state.on_thread(),
        // Replacements are checked when they come (see `Simulation::worker_boot`).
        Kind::WorkerBoot => true,
        // With its resource still, the same query: the one its resource took at the
        // deadline's time less the timeout (a query of a later phase, or a retry, was taken
        // later). An FCFS query in service has its own event (see `Simulation::serve_after_hang`).
        Kind::Statement => match e.state {
            State::ResourceQueue(r) | State::ResourceService(r) | State::Orphan(r) => {
                e.waited_since + statement[r as usize] == d.at
            }
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(at: f64, req: u32) -> Deadline {
        Deadline {
            at,
            req,
            generation: 0,
        }
    }

    #[test]
    fn a_heap_gives_the_earliest_first_and_equal_times_in_the_order_set() {
        let mut h = Queue::new(false);
        for (at, req) in [(3.0, 0), (1.0, 1), (2.0, 2), (1.0, 3)] {
            h.push(d(at, req));
        }
        let order: Vec<u32> = std::iter::from_fn(|| h.pop()).map(|x| x.req).collect();
        assert_eq!(order, [1, 3, 2, 0]);
    }

    #[test]
    fn compacting_keeps_the_live_deadlines_in_order_once_over_the_bound() {
        for fixed in [true, false] {
            let mut f = Queue::new(fixed);
            for req in 0..10 {
                f.push(d(f64::from(req), req));
            }
            let live = |x: Deadline| x.req % 3 == 0;
            f.compact(10, live);
            assert_eq!(f.len(), 10, "at the bound: nothing swept");
            f.compact(9, live);
            let order: Vec<u32> = std::iter::from_fn(|| f.pop()).map(|x| x.req).collect();
            assert_eq!(order, [0, 3, 6, 9]);
        }
    }

    #[test]
    fn a_fifo_prunes_only_from_the_front() {
        let mut f = Queue::new(true);
        for req in 0..5 {
            f.push(d(f64::from(req), req));
        }
        // Requests 0, 1 and 3 were answered: 0 and 1 go, 3 waits behind 2.
        f.prune(|x| ![0, 1, 3].contains(&x.req));
        assert_eq!(f.len(), 3);
        assert_eq!(f.first().map(|x| x.req), Some(2));
    }
}
