//! The state of dynos that serve their requests first come, first served on `k` slots, worked
//! out from when each slot frees and when each waiting request will start, with no events:
//! the direct engine's dynos ([`crate::direct`]), read by routing policies through
//! [`crate::policy::RouterView`].

use crate::alloc::filled;
use crate::error::Result;
use std::collections::VecDeque;

/// Where a request went.
pub(crate) struct Placed {
    pub dyno: usize,
    pub start: f64,
    /// Where it waited, and how many waited there once it joined them.
    pub queued: Queued,
    /// All requests waiting in the system, counted exactly only when an upper bound passes the
    /// scenario's `max_waiting` (0 otherwise).
    pub waiting_total: usize,
}

impl Placed {
    /// A request that started the moment it arrived.
    #[inline]
    pub(crate) fn at_once(dyno: usize, start: f64) -> Self {
        Placed {
            dyno,
            start,
            queued: Queued::No,
            waiting_total: 0,
        }
    }
}

pub(crate) enum Queued {
    No,
    AtDyno(usize),
    AtRouter(usize),
}

/// Drops the start times up to `now` from the front of a FIFO queue's start times: those
/// requests no longer wait. Returns how many still do.
#[inline]
pub(crate) fn settle(starts: &mut VecDeque<f64>, now: f64) -> usize {
    // The times increase: when the last is past, all are (often so: one test, no loop).
    if starts.back().is_some_and(|&s| s <= now) {
        starts.clear();
        return 0;
    }
    while let Some(&s) = starts.front() {
        if s > now {
            break;
        }
        starts.pop_front();
    }
    starts.len()
}

/// The dynos' state when the policy routes each request to a dyno's own queue.
#[derive(Debug)]
pub struct DirectDynos {
    slots: usize,
    /// When each slot finishes the last request given to it; `slots` entries per dyno.
    free_at: Vec<f64>,
    /// Start times of the requests given to each dyno, in order, that may not have started
    /// yet; those that have are dropped whenever the dyno is given a request.
    waiting: Vec<VecDeque<f64>>,
    /// Entries in all `waiting` queues: an upper bound on the requests waiting.
    waiting_entries: usize,
    /// Single-slot dynos, when the policy reads loads: the completion times of the last [`RECENT`] requests given to each
    /// dyno, the one given `n`-th at `n % RECENT` (0 before any), so that a load look-up is a
    /// few compares, not a walk of the waiting queue (see [`Self::in_system`]).
    recent: Vec<[f64; RECENT]>,
    /// Requests given to each dyno so far, modulo [`RECENT`].
    next_recent: Vec<u8>,
}

/// Completion times kept per single-slot dyno for load look-ups.
pub(crate) const RECENT: usize = 4;

impl DirectDynos {
    /// `look_ups`: whether the policy reads loads, for which single-slot dynos keep their
    /// recent completion times.
    pub(crate) fn new(dynos: usize, slots: usize, look_ups: bool) -> Result<Self> {
        let recent = if slots == 1 && look_ups { dynos } else { 0 };
        Ok(DirectDynos {
            slots,
            free_at: filled(dynos * slots, 0.0)?,
            recent: filled(recent, [0.0; RECENT])?,
            next_recent: filled(recent, 0)?,
            waiting: filled(dynos, VecDeque::new())?,
            waiting_entries: 0,
        })
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Requests on the dyno at time `now`, in service or waiting. A completion at `now` has
    /// happened (as in the event-driven engine, where completions precede arrivals).
    #[inline(always)]
    pub fn in_system(&self, dyno: usize, now: f64) -> u32 {
        if let Some(recent) = self.recent.get(dyno) {
            // One slot serves in order, so the requests still in the system at `now` are the
            // most recently given ones, those completing after `now`. Unless all of the last
            // few still are, counting among those is the answer.
            let still = recent.iter().map(|&c| usize::from(c > now)).sum::<usize>();
            if still < RECENT {
                return still as u32;
            }
        }
        let slots = &self.free_at[dyno * self.slots..(dyno + 1) * self.slots];
        let busy = slots.iter().filter(|&&f| f > now).count();
        // Few entries, often none, have started since the dyno was last given a request:
        // count them from the front.
        let waiting = &self.waiting[dyno];
        let started = waiting.iter().take_while(|&&s| s <= now).count();
        (busy + waiting.len() - started) as u32
    }

    /// Gives a request arriving at `now` to `dyno`: it takes the slot that frees first.
    #[inline(always)]
    pub(crate) fn place(
        &mut self,
        max_waiting: usize,
        dyno: usize,
        now: f64,
        service: f64,
    ) -> Placed {
        let slot = if self.slots == 1 {
            &mut self.free_at[dyno]
        } else {
            let slots = &mut self.free_at[dyno * self.slots..(dyno + 1) * self.slots];
            let mut first = 0;
            for j in 1..slots.len() {
                if slots[j] < slots[first] {
                    first = j;
                }
            }
            &mut slots[first]
        };
        let start = if *slot > now { *slot } else { now };
        *slot = start + service;
        if let Some(next) = self.next_recent.get_mut(dyno) {
            self.recent[dyno][usize::from(*next)] = start + service;
            *next = (*next + 1) % RECENT as u8;
        }
        if start <= now {
            return Placed::at_once(dyno, start);
        }
        let queue = &mut self.waiting[dyno];
        let before = queue.len();
        let depth = settle(queue, now) + 1;
        queue.push_back(start);
        self.waiting_entries = self.waiting_entries + depth - before;
        let waiting_total = if self.waiting_entries > max_waiting {
            let now_waiting = self.waiting.iter_mut().map(|q| settle(q, now)).sum();
            self.waiting_entries = now_waiting;
            now_waiting
        } else {
            0
        };
        Placed {
            dyno,
            start,
            queued: Queued::AtDyno(depth),
            waiting_total,
        }
    }
}
