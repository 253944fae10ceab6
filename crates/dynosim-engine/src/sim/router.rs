//! The routers: each with its policy, its view of its own requests in flight per dyno, a
//! FIFO queue for the requests its policy holds, its count of the requests it holds
//! (`router.max_in_flight`) and, under `router.cost`, its turns as a FIFO server; the
//! late-load board they all read instead under `router.view` ([`Board`], kept by
//! [`super::knowledge`]); and the dynos up ([`UpSet`]), which every policy picks among. The
//! lifecycle ([`super::lifecycle`]) tells them which dynos come up and go down
//! ([`Routers::bring_up`], [`Routers::take_down`]). With `router.aperture` each router sends
//! only to its own subset of them ([`super::aperture`]); under `jiq` the idle dynos report to
//! the routers ([`super::idle`]).
use super::aperture::Aperture;
use super::features::{LIFECYCLE_CODE, VIEWS_CODE};
use super::idle::IdleReports;
use crate::error::Result;
use crate::in_flight::LoadIndex;
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

/// The streams the routers draw from (see [`super::streams`]).
pub(super) struct RouterStreams {
    /// Which router takes a request, and the policies' draws.
    pub routing: SimRng,
    /// A late board's refreshes (`router.view`).
    pub view: SimRng,
    /// Each router's subset (`router.aperture`).
    pub aperture: SimRng,
    /// The routers idle dynos report to (`jiq`).
    pub idle_reports: SimRng,
    /// Their work per request (`router.cost`).
    pub cost: SimRng,
    /// The time from a routing decision to the request reaching its dyno (`router.connect`).
    pub connect: SimRng,
}

pub(super) struct Routers {
    pub loads: Vec<LoadIndex>,
    policies: Vec<Box<dyn RoutingPolicy>>,
    pub queues: Vec<VecDeque<u32>>,
    /// The dynos up, for every router: the platform's own state, not a router's belief.
    up: UpSet,
    rng: SimRng,
    slots: u32,
    /// Each router's subset of the dynos (`router.aperture`).
    aperture: Option<Aperture>,
    /// The idle dynos' reports (`jiq`).
    idle: Option<Box<IdleReports>>,
    /// The board every router reads under a late view (None: each reads its own `loads`).
    pub board: Option<Box<Board>>,
    /// Whether the policies learn from their responses ([`Knowledge::Responses`]).
    pub learns_responses: bool,
    /// Requests each router holds: waiting at it, or sent and not yet answered by their dyno
    /// or given up on (`router.max_in_flight` caps it).
    pub in_flight: Vec<u64>,
    /// `router.cost`: when each router is done with the requests it has (a FIFO server: a
    /// request's turn is known when it comes), how many it has in hand (waiting for it or
    /// worked on), and its work's draws.
    pub free_at: Vec<f64>,
    pub in_hand: Vec<u64>,
    pub cost_rng: SimRng,
    /// `router.connect`'s draws.
    pub connect_rng: SimRng,
}

impl Routers {
    /// Routers for `capacity` dyno slots, the first `s.dynos` of them up, drawing from
    /// `streams`.
    pub fn new(s: &Scenario, capacity: u32, streams: RouterStreams) -> Result<Routers> {
        let n = capacity as usize;
        let routers = s.routers as usize;
        let rng = streams.routing;
        let ranking = match s.policy.knowledge() {
            Knowledge::Ranking(ties) => Some(ties),
            Knowledge::FreeSlots => Some(Ties::Oldest),
            Knowledge::Nothing
            | Knowledge::Some
            | Knowledge::Responses
            | Knowledge::IdleReports => None,
        };
        let board = if s.reads_board() {
            let board = Board::new(s.view, n, s.dynos as usize, ranking, streams.view)?;
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
            up: UpSet::new(n, s.dynos as usize)?,
            rng,
            slots: s.slots,
            aperture: None,
            idle: None,
            board,
            learns_responses: s.policy.knowledge() == Knowledge::Responses,
            in_flight: vec![0; routers],
            free_at: vec![0.0; routers],
            in_hand: vec![0; routers],
            cost_rng: streams.cost,
            connect_rng: streams.connect,
        };
        for d in s.dynos as usize..n {
            for loads in &mut routers.loads {
                loads.park(d);
            }
        }
        if let Some(k) = s.aperture {
            let mut rng = streams.aperture;
            let aperture = Aperture::new(k as usize, &routers.up, &mut routers.loads, &mut rng)?;
            routers.aperture = Some(aperture);
        }
        let mut template = s.policy.box_clone();
        if let Some(list) = template.idle_list() {
            let idle = IdleReports::new(list.reporting(), n, streams.idle_reports)?;
            routers.idle = Some(Box::new(idle));
        }
        Ok(routers)
    }

    /// The dynos `router` may send requests to: those up, or with an aperture those up in its
    /// subset.
    #[inline]
    fn dynos_of(&self, router: usize) -> &UpSet {
        match &self.aperture {
            None => &self.up,
            Some(aperture) => aperture.members(router),
        }
    }

    /// Whether routers send `dyno` requests.
    #[inline]
    pub fn is_up(&self, dyno: usize) -> bool {
        self.up.contains(dyno)
    }

    /// `dyno` is up at `now`: every router may send it requests from now on (with an
    /// aperture, the routers whose subset it joins). Returns the other dynos whose subsets
    /// changed under `jiq`, which may report idle again ([`Self::resubset`]).
    pub fn bring_up(&mut self, dyno: usize, now: f64) -> Vec<usize> {
        self.up.insert(dyno);
        let mut moved = Vec::new();
        match &mut self.aperture {
            None => {
                for loads in &mut self.loads {
                    loads.unpark(dyno);
                }
            }
            Some(aperture) => {
                let moved = self.idle.is_some().then_some(&mut moved);
                aperture.bring_up(dyno, &mut self.loads, moved);
            }
        }
        if let Some(board) = self.board.as_deref_mut() {
            board.bring_up(dyno);
        }
        for policy in &mut self.policies {
            policy.dyno_up(dyno, now);
        }
        self.resubset(moved)
    }

    /// `dyno` is down (draining, stopped or restarting): no router sends it requests from
    /// now on; their counts of the requests they sent it go on.
    /// Returns the dynos whose subsets changed under `jiq`, as [`Self::bring_up`].
    pub fn take_down(&mut self, dyno: usize) -> Vec<usize> {
        self.up.remove(dyno);
        let mut moved = Vec::new();
        match &mut self.aperture {
            None => {
                for loads in &mut self.loads {
                    loads.park(dyno);
                }
            }
            Some(aperture) => {
                let moved = self.idle.is_some().then_some(&mut moved);
                aperture.take_down(dyno, &self.up, &mut self.loads, moved);
            }
        }
        if let Some(board) = self.board.as_deref_mut() {
            board.take_down(dyno);
        }
        for policy in &mut self.policies {
            policy.dyno_down(dyno);
        }
        if let Some(idle) = &mut self.idle {
            idle.down(dyno);
        }
        self.resubset(moved)
    }

    /// Under `jiq` with an aperture: each (router, dyno) whose membership changed. A dyno
    /// that left the subset of the router listing it leaves that list. Returns the dynos, for
    /// the engine to have them report if idle (one that joined a subset may have been in none,
    /// and so never listed).
    fn resubset(&mut self, moved: Vec<(usize, usize)>) -> Vec<usize> {
        let (Some(idle), Some(aperture)) = (&mut self.idle, &self.aperture) else {
            return moved.into_iter().map(|(_, d)| d).collect();
        };
        moved
            .into_iter()
            .map(|(router, dyno)| {
                if !aperture.members(router).contains(dyno) {
                    idle.unlist(dyno, router, &mut self.policies);
                }
                dyno
            })
            .collect()
    }

    /// Whether idle dynos report to the routers (`jiq`).
    #[inline]
    pub fn takes_idle_reports(&self) -> bool {
        self.idle.is_some()
    }

    /// `dyno`, up, is idle at `now`: it reports to a router (see [`super::idle`]). Returns when
    /// a report event must be scheduled.
    pub fn report_idle(&mut self, dyno: usize, now: f64) -> Option<f64> {
        let idle = self.idle.as_mut()?;
        idle.report(dyno, now, &mut self.policies, self.aperture.as_ref())
    }

    /// Delivers the idle reports due by `now`; returns when the next one is due.
    pub fn deliver_reports(&mut self, now: f64) -> Option<f64> {
        let idle = self.idle.as_mut()?;
        idle.deliver(now, &mut self.policies, self.aperture.as_ref())
    }

    /// The dyno the last routing decision took from its router's idle list, if it took one.
    #[inline]
    pub fn idle_hit(&mut self) -> Option<usize> {
        self.idle.as_mut()?.take_hit()
    }

    /// One of `router`'s requests was answered by `dyno` at `now`, `rtt` after the router
    /// sent it there: its policy learns from it (see [`RoutingPolicy::responded`]).
    #[inline]
    pub fn responded(&mut self, router: usize, dyno: usize, rtt: f64, now: f64) {
        self.policies[router].responded(dyno, rtt, now);
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

    /// The policy's choice among the up dynos, at `now`, for a request of this key (if
    /// requests carry one); None when no dyno is up.
    #[inline]
    pub fn route<const EXTRAS: bool>(
        &mut self,
        router: usize,
        now: f64,
        key: Option<u64>,
    ) -> Option<Route> {
        if EXTRAS && LIFECYCLE_CODE && self.up.is_empty() {
            return None;
        }
        let up = match &self.aperture {
            None => &self.up,
            Some(aperture) => aperture.members(router),
        };
        let loads = if EXTRAS && VIEWS_CODE {
            read_by(&self.board, &self.loads, router)
        } else {
            &self.loads[router]
        };
        let view = RouterView::indexed(self.slots, up, loads)
            .at(now)
            .with_key(key);
        let route = self.policies[router].route(&view, &mut self.rng);
        debug_assert!(
            !matches!(route, Route::To(d) if !up.contains(d)),
            "a policy picked a dyno that is not up (or not in its router's aperture)"
        );
        if let Some(idle) = &mut self.idle {
            idle.routed(&mut self.policies[router]);
        }
        Some(route)
    }

    /// [`Self::route`], but a retry after a refusal: the dyno `avoid` is skipped by asking
    /// again, while another dyno is up (HAProxy's draws for a redispatch avoid the server
    /// that failed; Heroku's router tries other dynos); after [`AVOID_RETRIES`] such picks
    /// the up dyno with the fewest of this router's requests is taken.
    pub fn route_avoiding(
        &mut self,
        router: usize,
        avoid: usize,
        now: f64,
        key: Option<u64>,
    ) -> Option<Route> {
        let up = self.dynos_of(router);
        if up.len() == 1 && up.contains(avoid) || up.is_empty() {
            return self.route::<true>(router, now, key);
        }
        for _ in 0..AVOID_RETRIES {
            match self.route::<true>(router, now, key) {
                Some(Route::To(d)) if d == avoid => continue,
                other => return other,
            }
        }
        let loads = read_by(&self.board, &self.loads, router);
        self.dynos_of(router)
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
