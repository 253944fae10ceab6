//! Routing policies: a trait, one file per policy, and a registry mapping the scenario's
//! `router.policy` name to a builder. Adding a policy is a new file and one line in
//! [`REGISTRY`].
//!
//! Each router gets its own policy instance and sees only its own [`LoadIndex`]: the requests
//! it sent itself. With one router that is the true state of the dynos; with several it is the
//! partial knowledge of Heroku's Bamboo routers.

use crate::error::Result;
use crate::load_index::LoadIndex;
use crate::params::Params;
use crate::registry::Registry;
use crate::rng::SimRng;
use std::fmt::Debug;

mod intelligent;
mod least_connections;
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

/// What a router knows when it routes a request.
pub struct RouterView<'a> {
    /// Concurrent slots of every dyno.
    pub slots: u32,
    /// This router's in-flight requests per dyno.
    pub load: &'a LoadIndex,
}

impl RouterView<'_> {
    #[inline]
    pub fn dynos(&self) -> usize {
        self.load.dynos()
    }

    /// True when this router believes the dyno has no free slot.
    #[inline]
    pub fn is_busy(&self, dyno: usize) -> bool {
        self.load.in_flight(dyno) >= self.slots
    }
}

pub trait RoutingPolicy: Send + Sync + Debug + BoxClone {
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route;
    /// Whether the policy calls `min_load` or `random_least_loaded` on the router's
    /// [`LoadIndex`] (which then keeps its buckets up to date, at a cost per request).
    fn ranks_by_load(&self) -> bool {
        false
    }
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
    ("power_of_d", &["d"], power_of_d::build),
    ("retry_if_busy", &["tries"], retry_if_busy::build),
    ("intelligent", &[], intelligent::build),
]);
