//! Routing policies: a trait, one file per policy, and a registry mapping the scenario's
//! `router.policy` name to a builder. Adding a policy is a new file and one line in
//! [`REGISTRY`].
//!
//! Each router gets its own policy instance and sees only its own [`LoadIndex`]: the requests
//! it sent itself. With one router that is the true state of the dynos; with several it is the
//! partial knowledge of Heroku's Bamboo routers.

use crate::error::Result;
use crate::fifo_dynos::DirectDynos;
use crate::in_flight::LoadIndex;
pub use crate::in_flight::Ties;
use crate::params::Params;
use crate::registry::Registry;
use crate::rng::SimRng;
use crate::up_set::UpSet;
use std::fmt::Debug;

mod bounded_hash;
mod first;
mod intelligent;
mod jiq;
mod least_connections;
mod least_request;
mod p2c_ewma;
mod power_of_d;
mod random;
mod retry_if_busy;
mod round_robin;

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Send it to this dyno now.
    To(usize),
    /// Keep it in this router's FIFO queue; the policy is asked again, for the request at the
    /// head of that queue, whenever one of this router's requests completes.
    Hold,
}

/// What a policy reads when it routes, which decides how the engine may simulate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knowledge {
    /// Nothing about the dynos (`random`, `round_robin`).
    Nothing,
    /// The in-flight count of a few dynos, through [`RouterView::in_flight`]; never holds a
    /// request (`power_of_d`, `retry_if_busy`).
    Some,
    /// Which dynos have a free slot, and which has had one longest: the request goes there,
    /// or waits in the router's FIFO queue while no slot is free (`intelligent`). With one
    /// router and single-slot dynos the direct engine runs it as one queue in front of all
    /// the slots; otherwise the event-driven engine ranks the dynos with [`Ties::Oldest`].
    FreeSlots,
    /// The ranking of every dyno by load ([`RouterView::ranked`]), with ties broken this
    /// way, and it may hold requests (`least_connections`, `intelligent`). The safe default:
    /// the event-driven engine runs every policy.
    Ranking(Ties),
    /// The in-flight count of a few dynos, and what this router's own responses told it
    /// ([`RoutingPolicy::responded`]: their round-trip times); never holds a request
    /// (`p2c_ewma`). The responses must come in time order: the event-driven engine runs it.
    Responses,
    /// Nothing about the dynos' loads: only the dynos that reported themselves idle to this
    /// router ([`RoutingPolicy::idle_list`]); never holds a request (`jiq`). The reports are
    /// messages from the dynos in time order: the event-driven engine runs it.
    IdleReports,
}

/// What a router knows when it routes a request: the dynos up ([`UpSet`]: a policy picks
/// among them alone), its own in-flight requests per dyno, and the request's key.
pub struct RouterView<'a> {
    /// Concurrent slots of every dyno.
    pub slots: u32,
    up: &'a UpSet,
    loads: Loads<'a>,
    /// The time of the routing decision (NaN where no policy that reads it runs: see
    /// [`Self::now`]).
    now: f64,
    /// The request's key (`arrivals.keys`), if requests carry one.
    key: Option<u64>,
}

enum Loads<'a> {
    /// Kept up to date event by event (the event-driven engine).
    Index(&'a LoadIndex),
    /// Worked out on demand at time `now` (the direct engine, see `crate::direct`).
    Direct(&'a DirectDynos, f64),
    /// None: only which dynos are up, for policies that read nothing else
    /// ([`Knowledge::Nothing`]).
    Blind,
}

impl<'a> RouterView<'a> {
    /// `index` ranks the up dynos of `up` alone (see [`LoadIndex::park`]).
    pub(crate) fn indexed(slots: u32, up: &'a UpSet, index: &'a LoadIndex) -> Self {
        RouterView {
            slots,
            up,
            loads: Loads::Index(index),
            now: f64::NAN,
            key: None,
        }
    }

    /// The same view at time `now`, for policies that read the time ([`Self::now`]).
    pub(crate) fn at(self, now: f64) -> Self {
        RouterView { now, ..self }
    }

    pub(crate) fn direct(slots: u32, up: &'a UpSet, dynos: &'a DirectDynos, now: f64) -> Self {
        RouterView {
            slots,
            up,
            loads: Loads::Direct(dynos, now),
            now,
            key: None,
        }
    }

    pub(crate) fn blind(slots: u32, up: &'a UpSet) -> Self {
        RouterView {
            slots,
            up,
            loads: Loads::Blind,
            now: f64::NAN,
            key: None,
        }
    }

    /// The same view, for a request that carries `key`.
    #[inline]
    pub(crate) fn with_key(self, key: Option<u64>) -> Self {
        RouterView { key, ..self }
    }

    /// The key of the request being routed (its user, `arrivals.keys`); None when the scenario
    /// gives requests no keys, which a policy that [`RoutingPolicy::needs_keys`] never sees.
    #[inline]
    pub fn key(&self) -> Option<u64> {
        self.key
    }

    /// The dyno's place among the up dynos (the `i` of [`Self::dyno_at`]); None when it is not
    /// up.
    #[inline]
    pub fn place_of(&self, dyno: usize) -> Option<usize> {
        self.up.place_of(dyno)
    }

    /// Whether routers may send the dyno requests.
    #[inline]
    pub fn is_up(&self, dyno: usize) -> bool {
        self.up.contains(dyno)
    }

    /// Changes whenever a dyno comes up or goes down (see [`UpSet::version`]).
    #[inline]
    pub fn up_version(&self) -> u64 {
        self.up.version()
    }

    /// An up dyno drawn uniformly at random from the routing stream.
    #[inline(always)]
    pub fn random_dyno(&self, rng: &mut SimRng) -> usize {
        self.up.draw(rng)
    }

    /// A place among the up dynos (`0..dynos()`) drawn uniformly: [`Self::dyno_at`] of it is
    /// what [`Self::random_dyno`] would have drawn.
    #[inline]
    pub fn random_place(&self, rng: &mut SimRng) -> usize {
        self.up.draw_place(rng)
    }

    /// The up dyno at place `i` (`i < dynos()`), for a policy that goes through them in turn.
    #[inline]
    pub fn dyno_at(&self, i: usize) -> usize {
        self.up.dyno_at(i)
    }

    /// How many dynos are up: the policy's choice.
    #[inline]
    pub fn dynos(&self) -> usize {
        self.up.len()
    }

    /// Dyno slots, up or not: every dyno number is below it (for a policy that keeps
    /// something per dyno).
    #[inline]
    pub fn dyno_slots(&self) -> usize {
        self.up.slots()
    }

    /// The time of this routing decision, in seconds from the run's start. Set by the
    /// event-driven engine, for the policies that read it ([`Knowledge::Responses`]).
    #[inline]
    pub fn now(&self) -> f64 {
        self.now
    }

    /// This router's requests on the dyno, in service or waiting there.
    #[inline(always)]
    pub fn in_flight(&self, dyno: usize) -> u32 {
        match self.loads {
            Loads::Index(index) => index.in_flight(dyno),
            Loads::Direct(dynos, now) => dynos.in_system(dyno, now),
            Loads::Blind => unreachable!("{NOTHING_READ_A_LOAD}"),
        }
    }

    /// This router's requests in flight on all the dynos together, up or not.
    pub fn total_in_flight(&self) -> u64 {
        match self.loads {
            Loads::Index(index) => index.total(),
            Loads::Direct(dynos, now) => (0..self.dyno_slots())
                .map(|d| u64::from(dynos.in_system(d, now)))
                .sum(),
            Loads::Blind => unreachable!("{NOTHING_READ_A_LOAD}"),
        }
    }

    /// True when this router believes the dyno has no free slot.
    #[inline]
    pub fn is_busy(&self, dyno: usize) -> bool {
        self.in_flight(dyno) >= self.slots
    }

    /// The dynos ranked by load. Only policies whose [`RoutingPolicy::knowledge`] is
    /// [`Knowledge::Ranking`] may call it; the engine keeps the ranking for those alone.
    #[inline]
    pub fn ranked(&self) -> &LoadIndex {
        match self.loads {
            Loads::Index(index) => index,
            Loads::Direct(..) => unreachable!("the direct engine keeps no ranking"),
            Loads::Blind => unreachable!("{NOTHING_READ_A_LOAD}"),
        }
    }
}

const NOTHING_READ_A_LOAD: &str =
    "a policy that declares Knowledge::Nothing read a dyno's load; it must declare more";

pub trait RoutingPolicy: Send + Sync + Debug + BoxClone {
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route;
    /// Routes `out.len()` successive requests of one router at once, for a policy whose
    /// knowledge is [`Knowledge::Nothing`] (`view` tells the dynos' number, not their loads):
    /// the same dynos, from the same draws in the same order, as that many calls of
    /// [`Self::route`]. The direct engine routes in blocks this way, one dynamic call per
    /// block; the default, compiled for each policy, suits all. Returns false when the policy
    /// held a request instead, which a policy that reads nothing cannot mean to do.
    fn route_blind(&mut self, view: &RouterView, rng: &mut SimRng, out: &mut [usize]) -> bool {
        for dyno in out {
            match self.route(view, rng) {
                Route::To(d) => *dyno = d,
                Route::Hold => return false,
            }
        }
        true
    }
    /// What the policy reads; see [`Knowledge`]. Declaring less than it reads is a bug that
    /// the engines' equivalence tests catch.
    fn knowledge(&self) -> Knowledge {
        Knowledge::Ranking(Ties::Random)
    }
    /// One of this router's requests was answered by `dyno` at `now`, `rtt` seconds after
    /// the router sent it there: the round trip the router saw (its connect time, the wait
    /// and the service at the dyno). Only the event-driven engine calls it, for the policies
    /// of [`Knowledge::Responses`]; the others ignore it.
    fn responded(&mut self, _dyno: usize, _rtt: f64, _now: f64) {}
    /// `dyno` is up from `now` on (it booted, at the start for the initial fleet): a policy
    /// that keeps something per dyno starts it afresh, as a balancer does for an endpoint it
    /// has just discovered.
    fn dyno_up(&mut self, _dyno: usize, _now: f64) {}
    /// `dyno` is down (draining, stopped or restarting): a policy that lists dynos forgets it.
    fn dyno_down(&mut self, _dyno: usize) {}
    /// This router's list of idle dynos, for a policy of [`Knowledge::IdleReports`].
    fn idle_list(&mut self) -> Option<&mut dyn IdleList> {
        None
    }
    /// Whether the policy reads each request's key ([`RouterView::key`]): a scenario with such
    /// a policy must give `arrivals.keys`.
    fn needs_keys(&self) -> bool {
        false
    }
    /// Whether each request goes to a dyno drawn uniformly at random, independently of every
    /// other request and of the dynos' state: then the dynos of a fleet under Poisson arrivals
    /// are independent, and a fleet can be split into shards simulated apart
    /// ([`crate::shard`]). Round robin is not (its dynos see every n-th arrival).
    fn picks_uniformly(&self) -> bool {
        false
    }
}

/// How a dyno reports itself idle (Join-Idle-Queue's reports): to which router, and how late
/// the report arrives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdleReporting {
    /// Routers sampled by a dyno that becomes idle; it reports to the one with the shortest
    /// idle list (1: a router drawn at random).
    pub d: usize,
    /// Seconds from the dyno becoming idle to its report reaching the router.
    pub delay: f64,
}

/// A router's list of the dynos that reported themselves idle to it. The engine decides when a
/// dyno reports and to which router (see `IdleReporting`), and keeps each dyno on one list at
/// most; the policy routes from its list.
pub trait IdleList {
    /// How the dynos report to this policy's routers.
    fn reporting(&self) -> IdleReporting;
    /// Dynos on the list.
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `dyno`'s report arrived: it joins the list's tail.
    fn push(&mut self, dyno: usize);
    /// `dyno` leaves the list, wherever it is on it.
    fn remove(&mut self, dyno: usize);
    /// The dyno the last routing decision took off the list, if it took one (and forgets it).
    fn take_hit(&mut self) -> Option<usize>;
}

/// Lets a configured policy be copied for each router and replication.
pub trait BoxClone {
    fn box_clone(&self) -> Box<dyn RoutingPolicy>;
}

impl<T: RoutingPolicy + Clone + 'static> BoxClone for T {
    fn box_clone(&self) -> Box<dyn RoutingPolicy> {
        Box::new(self.clone())
    }
}

pub type Builder = fn(&Params) -> Result<Box<dyn RoutingPolicy>>;

/// Every policy, by the name a scenario uses, with the parameter keys it takes.
pub const REGISTRY: Registry<Builder> = Registry(&[
    ("random", &[], random::build),
    ("round_robin", &[], round_robin::build),
    ("least_connections", &[], least_connections::build),
    ("power_of_d", &["d", "distinct"], power_of_d::build),
    ("retry_if_busy", &["tries"], retry_if_busy::build),
    ("intelligent", &[], intelligent::build),
    ("jiq", &["jiq_report_d", "jiq_report_delay"], jiq::build),
    ("p2c_ewma", &["decay", "default_rtt"], p2c_ewma::build),
    ("first", &[], first::build),
    (
        "least_request",
        &["choice_count", "active_request_bias"],
        least_request::build,
    ),
    ("bounded_hash", &["factor", "ring"], bounded_hash::build),
]);
