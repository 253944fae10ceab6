use super::{Knowledge, Route, RouterView, RoutingPolicy, Ties};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// The dyno with the fewest in-flight requests from this router, ties broken at random
/// (HAProxy `leastconn`, nginx `least_conn`, join-the-shortest-queue).
#[derive(Debug, Clone)]
pub struct LeastConnections;

pub fn build(_: &Params) -> Result<Box<dyn RoutingPolicy>> {
    Ok(Box::new(LeastConnections))
}

impl RoutingPolicy for LeastConnections {
    #[inline]
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        Route::To(view.ranked().random_least_loaded(rng))
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::Ranking(Ties::Random)
    }
}
