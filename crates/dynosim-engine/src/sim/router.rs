//! The routers: each with its policy, its view of its own requests in flight per dyno, and a
//! FIFO queue for the requests its policy holds. Dynos that are down (restarting) are skipped.

use super::dyno::Dyno;
use crate::error::Result;
use crate::load_index::LoadIndex;
use crate::policy::{DynoDraw, Knowledge, Route, RouterView, RoutingPolicy, Ties};
use crate::rng::SimRng;
use crate::scenario::Scenario;
use rand::Rng;
use std::collections::VecDeque;

/// Picks of a down dyno after which a router stops asking its policy (see [`Routers::route`]).
const DOWN_RETRIES: usize = 64;

pub(super) struct Routers {
    pub loads: Vec<LoadIndex>,
    policies: Vec<Box<dyn RoutingPolicy>>,
    pub queues: Vec<VecDeque<u32>>,
    draw: DynoDraw,
    rng: SimRng,
    slots: u32,
}

impl Routers {
    pub fn new(s: &Scenario, rng: SimRng) -> Result<Routers> {
        let n = s.dynos as usize;
        let routers = s.routers as usize;
        Ok(Routers {
            loads: (0..routers)
                .map(|_| {
                    let ranking = match s.policy.knowledge() {
                        Knowledge::Ranking(ties) => Some(ties),
                        Knowledge::FreeSlots => Some(Ties::Oldest),
                        Knowledge::Nothing | Knowledge::Some => None,
                    };
                    LoadIndex::new(n, ranking)
                })
                .collect::<Result<_>>()?,
            policies: (0..routers).map(|_| s.policy.box_clone()).collect(),
            queues: (0..routers).map(|_| VecDeque::new()).collect(),
            draw: DynoDraw::new(n),
            rng,
            slots: s.slots,
        })
    }

    /// The router a new request lands on: one at random, from the routing stream.
    #[inline]
    pub fn pick(&mut self) -> usize {
        let routers = self.policies.len();
        if routers > 1 {
            self.rng.random_range(0..routers)
        } else {
            0
        }
    }

    /// The policy's choice; a dyno that is down is skipped by asking again, and after
    /// [`DOWN_RETRIES`] such picks the up dyno with the fewest of this router's requests is
    /// taken. None when every dyno is down.
    #[inline]
    pub fn route(&mut self, router: usize, dynos: &[Dyno], dynos_up: u32) -> Option<Route> {
        self.route_avoiding(router, dynos, dynos_up, None)
    }

    /// [`Self::route`], but a retry after a refusal: the dyno `avoid` is skipped as a down
    /// one is, while another dyno is up (HAProxy's draws for a redispatch avoid the server
    /// that failed; Heroku's router tries other dynos).
    #[inline]
    pub fn route_avoiding(
        &mut self,
        router: usize,
        dynos: &[Dyno],
        dynos_up: u32,
        avoid: Option<usize>,
    ) -> Option<Route> {
        if dynos_up == 0 {
            return None;
        }
        let avoid = avoid.filter(|&a| dynos_up > 1 || !dynos[a].up);
        let usable = |d: usize| dynos[d].up && Some(d) != avoid;
        for _ in 0..DOWN_RETRIES {
            let view = RouterView::indexed(self.slots, &self.draw, &self.loads[router]);
            match self.policies[router].route(&view, &mut self.rng) {
                Route::To(d) if !usable(d) => continue,
                other => return Some(other),
            }
        }
        let loads = &self.loads[router];
        (0..dynos.len())
            .filter(|&d| usable(d))
            .min_by_key(|&d| loads.in_flight(d))
            .map(Route::To)
    }

    /// The dyno a random draw would pick next, from a copy of the routing stream (for
    /// reading ahead: the stream does not move).
    #[inline]
    pub fn next_random(&self) -> usize {
        self.draw.sample(&mut self.rng.clone())
    }

    /// Requests the routers hold.
    pub fn held(&self) -> u64 {
        self.queues.iter().map(|q| q.len() as u64).sum()
    }
}
