//! Closed-loop clients: a client that has its response, or an error, thinks
//! (`arrivals.think`) and sends its next request, an event the run's loop (in `mod.rs`) hands
//! to [`Simulation::arrive`]. Answered at once (no dyno up, a full router, a shed), it waits a
//! little at least, so that simulated time moves on. An open workload has no clients: the loop
//! draws its next arrival itself.

use super::events::{Event, ARRIVAL};
use super::retries::Verdict;
use super::{Simulation, NONE};
use crate::result::ErrorKind;
use crate::scenario::Workload;

impl Simulation<'_> {
    /// Try `req` is answered with `error` (its entry still holds what it was): its client
    /// sends it again after a backoff ([`super::retries`]), or has the error for good: its
    /// request's figures, and a closed-loop client's next send (no sooner than `at_least`).
    pub(super) fn client_error(&mut self, req: u32, error: ErrorKind, at_least: f64) {
        let e = &self.slab.entries[req as usize];
        let (arrival, client) = (e.arrival, e.client);
        // The try's answer, as its router logs it.
        self.answered(arrival);
        match self.try_failed(req, error) {
            Verdict::Retried => {}
            Verdict::Failed { origin } => {
                self.measures.errored(error, origin, self.now);
                self.respond_after(client, at_least);
            }
        }
    }

    /// A closed-loop client got its response (or error): it thinks, then sends again.
    pub(super) fn respond(&mut self, client: u32) {
        self.respond_after(client, 0.0);
    }

    /// [`Self::respond`], waiting at least `at_least` before sending again.
    pub(super) fn respond_after(&mut self, client: u32, at_least: f64) {
        if client == NONE {
            return;
        }
        let Workload::Closed(clients) = &self.s.workload else {
            return;
        };
        let think = clients
            .think
            .as_ref()
            .map_or(0.0, |t| t.sample(&mut self.think_rng))
            .max(at_least);
        self.events
            .schedule(self.now + think, ARRIVAL, Event::Send { client });
    }
}
