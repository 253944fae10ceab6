use super::{Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// Requests are sent only to a dyno with a free slot (as this router believes); when none is
/// free they wait in the router's FIFO queue and go out as slots free up. With one router and
/// single-slot dynos this is the seed study's intelligent router, an M/G/c queue; it is also
/// HAProxy's per-server `maxconn` with a backend queue. Among free dynos the least loaded wins,
/// ties at random.
#[derive(Debug, Clone)]
pub struct Intelligent;

pub fn build(_: &Params) -> Result<Box<dyn RoutingPolicy>> {
    Ok(Box::new(Intelligent))
}

impl RoutingPolicy for Intelligent {
    #[inline]
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        if view.load.min_load() < view.slots {
            Route::To(view.load.random_least_loaded(rng))
        } else {
            Route::Hold
        }
    }
    fn ranks_by_load(&self) -> bool {
        true
    }
}
