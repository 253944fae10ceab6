//! The router's retries after a timeout or an error (`router.retry_on` with "timeout" or
//! "5xx", [`crate::retry::router`]): their state. A try the router gives up on (H12), or that
//! its dyno answered with an error or died with, is sent to another dyno as a new try of the
//! same request (its arrival at the router, client, class, drawn work and key), after
//! `router.retry_delay`, within `router.retries` and the budget; its client waits on, with the
//! deadline it had. The step that does it is [`super::dispatch`]'s.

use super::slab::{Request, State};
use crate::retry::router::RouterRetry;
use crate::scenario::Scenario;

pub(super) struct Redispatch {
    pub spec: RouterRetry,
    /// Each entry's client deadline, by slab index (NaN: none), when clients have a timeout:
    /// a retry keeps its request's.
    client_at: Vec<f64>,
    /// Each router's retries that may be in flight: (slab index, generation), for the budget.
    active: Vec<Vec<(u32, u32)>>,
}

impl Redispatch {
    /// Bytes it keeps per request in flight (the client's deadline).
    pub const BYTES_PER_REQUEST: f64 = 8.0;

    /// The scenario's router retries beyond refused connections (None: it has none).
    pub fn of(s: &Scenario) -> Option<Box<Redispatch>> {
        s.router_retry.beyond_refused().then(|| {
            Box::new(Redispatch {
                spec: s.router_retry,
                client_at: Vec::new(),
                active: vec![Vec::new(); s.routers as usize],
            })
        })
    }

    /// Entry `req`'s client gives up at `at`.
    #[inline]
    pub fn set_client_at(&mut self, req: u32, at: f64) {
        let i = req as usize;
        if self.client_at.len() <= i {
            self.client_at.resize(i + 1, f64::NAN);
        }
        self.client_at[i] = at;
    }

    /// When entry `req`'s client gives up, if it does.
    #[inline]
    pub fn client_at(&self, req: u32) -> Option<f64> {
        self.client_at
            .get(req as usize)
            .copied()
            .filter(|at| !at.is_nan())
    }

    /// Whether `router`'s budget (if any) allows one more retry now, with `in_flight`
    /// requests in flight at it; `entries` tells which of its retries are still in flight.
    pub fn allows(&mut self, router: usize, in_flight: u64, entries: &[Request]) -> bool {
        let Some(budget) = self.spec.budget else {
            return true;
        };
        let active = &mut self.active[router];
        active.retain(|&(req, generation)| {
            let e = &entries[req as usize];
            e.generation == generation && e.state != State::Free && !e.router_done
        });
        budget.allows(active.len(), in_flight)
    }

    /// A retry of `router`'s is in flight as entry `req`, of this generation.
    #[inline]
    pub fn track(&mut self, router: usize, req: u32, generation: u32) {
        if self.spec.budget.is_some() {
            self.active[router].push((req, generation));
        }
    }
}
