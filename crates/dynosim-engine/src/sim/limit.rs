//! The replication's concurrency limits (`router.concurrency_limit`, one limiter per router;
//! `app.concurrency_limit`, one per dyno slot): each limiter's algorithm state
//! ([`crate::limit::LimitState`]), the requests in flight at each dyno's limiter, and for
//! each request a limiter admitted, when and with how many in flight (a sample's latency and
//! in-flight count, as Netflix's `AbstractLimiter.createListener` keeps them).
//!
//! A router's requests in flight are the router's own count (`Routers::in_flight`, which
//! `router.max_in_flight` reads too); a dyno's are the requests its limiter admitted and the
//! app has not yet answered (waiting for a thread or on one). What ends a request for a
//! limiter, and how (a sample, a drop, or nothing), the steps decide (`dispatch.rs`,
//! `threads.rs`, `timeouts.rs`).

use super::slab::Slab;
use crate::limit::{ConcurrencyLimit, LimitState};
use crate::rng::SimRng;
use crate::scenario::Scenario;

/// What a request a limiter admitted holds of it (`start` NaN: nothing).
#[derive(Debug, Clone, Copy)]
struct Held {
    generation: u32,
    start: f64,
    inflight: u32,
}

const NOT_HELD: Held = Held {
    generation: 0,
    start: f64::NAN,
    inflight: 0,
};

/// One place's limiters: the routers', or the dynos'.
#[derive(Debug)]
pub(super) struct Side {
    spec: ConcurrencyLimit,
    states: Vec<LimitState>,
    /// Requests in flight at each dyno's limiter (the dynos' side only).
    in_flight: Vec<u32>,
    /// By slab entry.
    held: Vec<Held>,
}

/// How a request admitted by a limiter ended for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    /// Answered (`onSuccess`): a sample of its latency.
    Answered,
    /// Timed out, or its client or router gave up on it (`onDropped`).
    Dropped,
    /// Ended with no meaningful latency (`onIgnore`): refused on, killed with its dyno.
    Ignored,
}

impl Side {
    /// `n` limiters; `counts`: they keep their own in-flight counts (the dynos').
    fn new(spec: ConcurrencyLimit, n: usize, counts: bool, rng: &mut SimRng) -> Side {
        Side {
            spec,
            states: (0..n).map(|_| LimitState::new(&spec, rng)).collect(),
            in_flight: if counts { vec![0; n] } else { Vec::new() },
            held: Vec::new(),
        }
    }

    /// Limiter `index`'s limit now.
    #[inline]
    pub fn limit(&self, index: usize) -> u32 {
        self.states[index].limit()
    }

    /// Whether limiter `index`, with `in_flight` requests in flight, admits request `req`
    /// (of slab generation `generation`) now: fewer in flight than its limit.
    fn admit(&mut self, index: usize, in_flight: u32, req: u32, generation: u32, now: f64) -> bool {
        if in_flight >= self.limit(index) {
            return false;
        }
        let i = req as usize;
        if i >= self.held.len() {
            self.held.resize(i + 1, NOT_HELD);
        }
        self.held[i] = Held {
            generation,
            start: now,
            inflight: in_flight + 1,
        };
        true
    }

    /// Request `req` (of `generation`) ended for limiter `index` now, as `how`; returns the
    /// limit if it moved. Nothing for a request the limiter did not admit, or let go already.
    fn end(
        &mut self,
        index: usize,
        req: u32,
        generation: u32,
        now: f64,
        how: Ended,
        rng: &mut SimRng,
    ) -> Option<u32> {
        let held = self.held.get_mut(req as usize)?;
        if held.generation != generation || held.start.is_nan() {
            return None;
        }
        let Held {
            start, inflight, ..
        } = std::mem::replace(held, NOT_HELD);
        if let Some(n) = self.in_flight.get_mut(index) {
            *n -= 1;
        }
        let dropped = match how {
            Ended::Ignored => return None,
            Ended::Answered => false,
            Ended::Dropped => true,
        };
        let state = &mut self.states[index];
        let before = state.limit();
        state.sample(&self.spec, now - start, inflight, dropped, rng);
        let after = state.limit();
        (after != before).then_some(after)
    }
}

/// The routers' limiters and the dynos'.
#[derive(Debug)]
pub(super) struct Limits {
    pub router: Option<Side>,
    pub app: Option<Side>,
    rng: SimRng,
}

impl Limits {
    /// What a request a limiter admitted holds of it (see [`super::state_bytes`]).
    pub const BYTES_PER_REQUEST: f64 = size_of::<Held>() as f64;
    /// A limiter: its state, its in-flight count, and its level in the measures.
    pub const BYTES_PER_LIMITER: f64 = (size_of::<LimitState>() + size_of::<u32>() + 24) as f64;

    /// The scenario's limiters (None: it has none), drawing from `rng` (Vegas's probes).
    pub fn of(s: &Scenario, mut rng: SimRng) -> Option<Box<Limits>> {
        if s.router_limit.is_none() && s.app_limit.is_none() {
            return None;
        }
        let router = s
            .router_limit
            .map(|l| Side::new(l, s.routers as usize, false, &mut rng));
        let app = s
            .app_limit
            .map(|l| Side::new(l, s.dyno_slots() as usize, true, &mut rng));
        Some(Box::new(Limits { router, app, rng }))
    }

    /// Whether router `router`'s limiter (if any) admits request `req`, with `in_flight`
    /// requests in flight at that router.
    #[inline]
    pub fn admit_router(
        &mut self,
        router: usize,
        in_flight: u64,
        req: u32,
        slab: &Slab,
        now: f64,
    ) -> bool {
        match self.router.as_mut() {
            None => true,
            Some(side) => {
                let generation = slab.entries[req as usize].generation;
                let n = u32::try_from(in_flight).unwrap_or(u32::MAX);
                side.admit(router, n, req, generation, now)
            }
        }
    }

    /// Whether dyno `dyno`'s limiter (if any) admits request `req`, which has just reached it.
    #[inline]
    pub fn admit_dyno(&mut self, dyno: usize, req: u32, slab: &Slab, now: f64) -> bool {
        match self.app.as_mut() {
            None => true,
            Some(side) => {
                let generation = slab.entries[req as usize].generation;
                let n = side.in_flight[dyno];
                if side.admit(dyno, n, req, generation, now) {
                    side.in_flight[dyno] += 1;
                    true
                } else {
                    false
                }
            }
        }
    }

    /// Request `req` ended at router `router`'s limiter, as `how`: the new limit, if it moved.
    pub fn end_router(
        &mut self,
        router: usize,
        req: u32,
        slab: &Slab,
        now: f64,
        how: Ended,
    ) -> Option<u32> {
        let generation = slab.entries[req as usize].generation;
        let side = self.router.as_mut()?;
        side.end(router, req, generation, now, how, &mut self.rng)
    }

    /// Request `req` ended at dyno `dyno`'s limiter, as `how`: the new limit, if it moved.
    pub fn end_dyno(
        &mut self,
        dyno: usize,
        req: u32,
        slab: &Slab,
        now: f64,
        how: Ended,
    ) -> Option<u32> {
        let generation = slab.entries[req as usize].generation;
        let side = self.app.as_mut()?;
        side.end(dyno, req, generation, now, how, &mut self.rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Stream};
    use proptest::prelude::*;

    proptest! {
        /// Whatever the order of arrivals and ends, and the latencies and drops, an adaptive
        /// limiter admits a request only while fewer than its limit are in flight, and its
        /// in-flight count is what it admitted less what ended.
        #[test]
        fn admits_only_below_the_limit(
            algorithm in 0usize..4,
            steps in proptest::collection::vec((any::<bool>(), 0.001f64..2.0, 0u8..3), 1..400),
        ) {
            let spec = [
                ConcurrencyLimit::Fixed { limit: 5 },
                ConcurrencyLimit::Aimd { initial: 3, min: 1, max: 12, backoff_ratio: 0.5, timeout: 1.0 },
                ConcurrencyLimit::Gradient2 { initial: 4, min: 1, max: 12, smoothing: 0.5,
                    queue_size: 2, long_window: 10, rtt_tolerance: 1.0 },
                ConcurrencyLimit::Vegas { initial: 4, max: 12, smoothing: 1.0, alpha: None,
                    beta: None, probe_multiplier: 2 },
            ][algorithm];
            let mut rng = stream(7, 0, Stream::Limits);
            let mut side = Side::new(spec, 1, true, &mut rng);
            let mut open: Vec<u32> = Vec::new();
            let (mut next, mut now) = (0u32, 0.0);
            for (arrive, rtt, how) in steps {
                now += rtt;
                if arrive || open.is_empty() {
                    let n = side.in_flight[0];
                    let limit = side.limit(0);
                    let admitted = side.admit(0, n, next, 1, now);
                    prop_assert_eq!(admitted, n < limit);
                    if admitted {
                        side.in_flight[0] += 1;
                        open.push(next);
                    }
                    next += 1;
                } else {
                    let req = open.remove(0);
                    let how = [Ended::Answered, Ended::Dropped, Ended::Ignored][how as usize];
                    side.end(0, req, 1, now, how, &mut rng);
                    // Ended once: a second end does nothing.
                    prop_assert_eq!(side.end(0, req, 1, now, how, &mut rng), None);
                }
                prop_assert_eq!(side.in_flight[0] as usize, open.len());
                prop_assert!(side.limit(0) >= 1);
            }
        }
    }
}
