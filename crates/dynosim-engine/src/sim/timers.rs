//! The requests' deadlines (`router.timeout`, `router.queue_timeout`, `arrivals.timeout`):
//! for each kind, the deadlines set and not yet due, first first; all kinds share one event
//! in the kernel's queue, at the earliest.
//!
//! A deadline is not taken back when its request is answered in time: it stays until it
//! comes, and is then passed over (its request has moved on, or its slab entry was reused,
//! which its generation tells). Most requests are answered in time, and taking each one's
//! deadline out of a heap would cost what its completion costs. A timeout that is the same for
//! every request keeps its deadlines in the order they were set, a FIFO, so that those
//! answered early are dropped from the front as they are answered ([`Deadlines::prune`]); a
//! drawn timeout keeps them in a heap. Either way the deadlines held are at most those set
//! during the last timeout's length.

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
/// router's answer (H12) comes before the client's own timeout, and both before the worker's
/// (which kills it). The last is not a request's: a killed worker's replacement is up
/// (`req` names the worker: dyno × processes + process; `generation`, its kills).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Router = 0,
    Queue = 1,
    Client = 2,
    App = 3,
    WorkerBoot = 4,
}

pub(super) const KINDS: [Kind; 5] = [
    Kind::Router,
    Kind::Queue,
    Kind::Client,
    Kind::App,
    Kind::WorkerBoot,
];

/// One kind's deadlines.
#[derive(Debug)]
pub(super) enum Deadlines {
    /// Set in the order they come (a fixed timeout).
    Fifo(VecDeque<Deadline>),
    /// In any order (a drawn timeout): by time, then the order set.
    Heap {
        heap: BinaryHeap<Reverse<(u64, u64, u32, u32)>>,
        seq: u64,
    },
}

impl Deadlines {
    pub fn new(fixed: bool) -> Deadlines {
        if fixed {
            Deadlines::Fifo(VecDeque::new())
        } else {
            Deadlines::Heap {
                heap: BinaryHeap::new(),
                seq: 0,
            }
        }
    }

    #[inline]
    pub fn push(&mut self, d: Deadline) {
        match self {
            Deadlines::Fifo(q) => {
                debug_assert!(
                    q.back().map_or(true, |b| b.at <= d.at),
                    "a fixed timeout's deadlines come in order"
                );
                q.push_back(d);
            }
            Deadlines::Heap { heap, seq } => {
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
            Deadlines::Fifo(q) => q.front().copied(),
            Deadlines::Heap { heap, .. } => {
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
            Deadlines::Fifo(q) => {
                q.pop_front();
            }
            Deadlines::Heap { heap, .. } => {
                heap.pop();
            }
        }
        first
    }

    /// Drops the deadlines at the front whose requests `live` says are done with them (a
    /// FIFO's only: a heap's wait until they come).
    #[inline]
    pub fn prune(&mut self, live: impl Fn(Deadline) -> bool) {
        if let Deadlines::Fifo(q) = self {
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
            Deadlines::Fifo(q) if q.len() > bound => q.retain(|&d| live(d)),
            Deadlines::Heap { heap, .. } if heap.len() > bound => {
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
            Deadlines::Fifo(q) => q.len(),
            Deadlines::Heap { heap, .. } => heap.len(),
        }
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
        let mut h = Deadlines::new(false);
        for (at, req) in [(3.0, 0), (1.0, 1), (2.0, 2), (1.0, 3)] {
            h.push(d(at, req));
        }
        let order: Vec<u32> = std::iter::from_fn(|| h.pop()).map(|x| x.req).collect();
        assert_eq!(order, [1, 3, 2, 0]);
    }

    #[test]
    fn compacting_keeps_the_live_deadlines_in_order_once_over_the_bound() {
        for fixed in [true, false] {
            let mut f = Deadlines::new(fixed);
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
        let mut f = Deadlines::new(true);
        for req in 0..5 {
            f.push(d(f64::from(req), req));
        }
        // Requests 0, 1 and 3 were answered: 0 and 1 go, 3 waits behind 2.
        f.prune(|x| ![0, 1, 3].contains(&x.req));
        assert_eq!(f.len(), 3);
        assert_eq!(f.first().map(|x| x.req), Some(2));
    }
}
