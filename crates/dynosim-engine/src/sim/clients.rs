//! Closed-loop clients (`arrivals.process = "closed"`, as ab, hey and wrk send): each sends a
//! request, waits for its answer (a response or an error), thinks (`arrivals.think`) and sends
//! again, until the run's window ends or `arrivals.requests` are sent. A client answered at
//! once (no dyno up, a full router, a shed) waits a little at least, so that simulated time
//! moves on. An open workload has no clients: its arrivals are [`super::traffic`]'s.

use crate::rng::SimRng;
use crate::scenario::{Scenario, Workload};

pub(super) struct Clients {
    /// Requests still to send (None: until the window ends).
    pub to_send: Option<u64>,
    think_rng: SimRng,
}

impl Clients {
    pub fn new(s: &Scenario, think_rng: SimRng) -> Clients {
        Clients {
            to_send: match &s.workload {
                Workload::Closed(clients) => clients.requests,
                Workload::Open(_) => None,
            },
            think_rng,
        }
    }

    /// How long a client that has its answer thinks before it sends again, `at_least` that
    /// (None: an open workload, which has no clients).
    #[inline]
    pub fn think(&mut self, s: &Scenario, at_least: f64) -> Option<f64> {
        let Workload::Closed(clients) = &s.workload else {
            return None;
        };
        let think = clients
            .think
            .as_ref()
            .map_or(0.0, |t| t.sample(&mut self.think_rng));
        Some(think.max(at_least))
    }
}
