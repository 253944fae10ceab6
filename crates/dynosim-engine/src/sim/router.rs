//! The routers: each with its policy, its view of its own requests in flight per dyno, and a
//! FIFO queue for the requests its policy holds; and the dynos up ([`UpSet`]), which every
//! policy picks among. The lifecycle ([`super::lifecycle`]) tells them which dynos come up and
//! go down ([`Routers::bring_up`], [`Routers::take_down`]).

use crate::error::Result;
use crate::load_index::LoadIndex;
use crate::policy::{Knowledge, Route, RouterView, RoutingPolicy, Ties};
use crate::rng::SimRng;
use crate::scenario::Scenario;
use crate::up_set::UpSet;
use rand::Rng;
use std::collections::VecDeque;

/// Picks of the dyno to avoid after which a router stops asking its policy (see
/// [`Routers::route_avoiding`]).
const AVOID_RETRIES: usize = 64;

pub(super) struct Routers {
    pub loads: Vec<LoadIndex>,
    policies: Vec<Box<dyn RoutingPolicy>>,
    pub queues: Vec<VecDeque<u32>>,
    /// The dynos up, for every router: the platform's own state, not a router's belief.
    up: UpSet,
    rng: SimRng,
    slots: u32,
}

impl Routers {
    /// Routers for `capacity` dyno slots, the first `s.dynos` of them up.
    pub fn new(s: &Scenario, capacity: u32, rng: SimRng) -> Result<Routers> {
        let n = capacity as usize;
        let routers = s.routers as usize;
        let mut routers = Routers {
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
            up: UpSet::new(n, s.dynos as usize)?,
            rng,
            slots: s.slots,
        };
        for d in s.dynos as usize..n {
            for loads in &mut routers.loads {
                loads.park(d);
            }
        }
        Ok(routers)
    }

    /// Whether routers send `dyno` requests.
    #[inline]
    pub fn is_up(&self, dyno: usize) -> bool {
        self.up.contains(dyno)
    }

    /// `dyno` is up: every router may send it requests from now on.
    pub fn bring_up(&mut self, dyno: usize) {
        self.up.insert(dyno);
        for loads in &mut self.loads {
            loads.unpark(dyno);
        }
    }

    /// `dyno` is down (draining, stopped or restarting): no router sends it requests from
    /// now on; their counts of the requests they sent it go on.
    pub fn take_down(&mut self, dyno: usize) {
        self.up.remove(dyno);
        for loads in &mut self.loads {
            loads.park(dyno);
        }
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

    /// The policy's choice among the up dynos; None when no dyno is up.
    #[inline]
    pub fn route(&mut self, router: usize) -> Option<Route> {
        if self.up.is_empty() {
            return None;
        }
        let view = RouterView::indexed(self.slots, &self.up, &self.loads[router]);
        let route = self.policies[router].route(&view, &mut self.rng);
        debug_assert!(
            !matches!(route, Route::To(d) if !self.up.contains(d)),
            "a policy picked a dyno that is not up"
        );
        Some(route)
    }

    /// [`Self::route`], but a retry after a refusal: the dyno `avoid` is skipped by asking
    /// again, while another dyno is up (HAProxy's draws for a redispatch avoid the server
    /// that failed; Heroku's router tries other dynos); after [`AVOID_RETRIES`] such picks
    /// the up dyno with the fewest of this router's requests is taken.
    pub fn route_avoiding(&mut self, router: usize, avoid: usize) -> Option<Route> {
        if self.up.len() == 1 && self.up.contains(avoid) || self.up.is_empty() {
            return self.route(router);
        }
        for _ in 0..AVOID_RETRIES {
            match self.route(router) {
                Some(Route::To(d)) if d == avoid => continue,
                other => return other,
            }
        }
        let loads = &self.loads[router];
        self.up
            .iter()
            .filter(|&d| d != avoid)
            .min_by_key(|&d| loads.in_flight(d))
            .map(Route::To)
    }

    /// The dyno a random draw would pick next, from a copy of the routing stream (for
    /// reading ahead: the stream does not move).
    #[inline]
    pub fn next_random(&self) -> usize {
        self.up.draw(&mut self.rng.clone())
    }

    /// Requests the routers hold.
    pub fn held(&self) -> u64 {
        self.queues.iter().map(|q| q.len() as u64).sum()
    }
}
