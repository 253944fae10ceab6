//! The routers: each with its policy, its view of its own requests in flight per dyno, and a
//! FIFO queue for the requests its policy holds; the late-load board they all read instead
//! under `router.view` ([`Board`], kept by [`super::board`]); and the dynos up ([`UpSet`]),
//! which every policy picks among. The lifecycle ([`super::lifecycle`]) tells them which dynos come up and
//! go down ([`Routers::bring_up`], [`Routers::take_down`]).

use crate::error::Result;
use crate::load_index::LoadIndex;
use crate::policy::{Knowledge, Route, RouterView, RoutingPolicy, Ties};
use crate::rng::SimRng;
use crate::scenario::Scenario;
use crate::up_set::UpSet;
use crate::view::Board;
use rand::Rng;
use std::collections::VecDeque;

/// Picks of the dyno to avoid after which a router stops asking its policy (see
/// [`Routers::route_avoiding`]).
const AVOID_RETRIES: usize = 64;

pub(super) struct Routers {
    pub loads: Vec<LoadIndex>,
    policies: Vec<Box<dyn RoutingPolicy>>,
    pub queues: Vec<VecDeque<u32>>,
    /// The board every router reads under a late view (None: each reads its own `loads`).
    pub board: Option<Box<Board>>,
    /// The dynos up, for every router: the platform's own state, not a router's belief.
    up: UpSet,
    rng: SimRng,
    slots: u32,
}

impl Routers {
    /// Routers for `capacity` dyno slots, the first `s.dynos` of them up; `view_rng`: the
    /// late-load board's draws.
    pub fn new(s: &Scenario, capacity: u32, rng: SimRng, view_rng: SimRng) -> Result<Routers> {
        let n = capacity as usize;
        let routers = s.routers as usize;
        let ranking = match s.policy.knowledge() {
            Knowledge::Ranking(ties) => Some(ties),
            Knowledge::FreeSlots => Some(Ties::Oldest),
            Knowledge::Nothing | Knowledge::Some => None,
        };
        let board = if s.reads_board() {
            let board = Board::new(s.view, n, s.dynos as usize, ranking, view_rng)?;
            Some(Box::new(board))
        } else {
            None
        };
        // The policy ranks the board's loads, not the routers' own counts.
        let own_ranking = if board.is_some() { None } else { ranking };
        let mut routers = Routers {
            loads: (0..routers)
                .map(|_| LoadIndex::new(n, own_ranking))
                .collect::<Result<_>>()?,
            policies: (0..routers).map(|_| s.policy.box_clone()).collect(),
            queues: (0..routers).map(|_| VecDeque::new()).collect(),
            board,
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
        if let Some(board) = self.board.as_deref_mut() {
            board.bring_up(dyno);
        }
    }

    /// `dyno` is down (draining, stopped or restarting): no router sends it requests from
    /// now on; their counts of the requests they sent it go on.
    pub fn take_down(&mut self, dyno: usize) {
        self.up.remove(dyno);
        for loads in &mut self.loads {
            loads.park(dyno);
        }
        if let Some(board) = self.board.as_deref_mut() {
            board.take_down(dyno);
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
        let loads = read_by(&self.board, &self.loads, router);
        let view = RouterView::indexed(self.slots, &self.up, loads);
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
        let loads = read_by(&self.board, &self.loads, router);
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

/// The loads `router` reads: the board's under a late view, else its own counts (a function
/// of the fields, so that the policy and the routing stream stay free to borrow).
#[inline(always)]
fn read_by<'a>(
    board: &'a Option<Box<Board>>,
    loads: &'a [LoadIndex],
    router: usize,
) -> &'a LoadIndex {
    match board.as_deref() {
        None => &loads[router],
        Some(board) => board.shown(),
    }
}
