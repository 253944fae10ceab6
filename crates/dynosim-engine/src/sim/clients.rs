//! Closed-loop clients: a client that has its response, or an error, thinks
//! (`arrivals.think`) and sends its next request, an event the run's loop (in `mod.rs`) hands
//! to [`Simulation::arrive`]. Answered at once (no dyno up, a full router, a shed), it waits a
//! little at least, so that simulated time moves on. An open workload has no clients: the loop
//! draws its next arrival itself.

use super::events::{Event, ARRIVAL};
use super::slab::NONE;
use super::Simulation;
use crate::scenario::Workload;

impl Simulation<'_> {
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
