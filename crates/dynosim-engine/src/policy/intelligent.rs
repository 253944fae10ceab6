use super::{Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// Requests are sent only to a dyno with a free slot (as this router believes); when none is
/// free they wait in the router's FIFO queue and go out as slots free up. With one router and
/// single-slot dynos this is the seed study's intelligent router, an M/G/c queue; it is also
/// HAProxy's per-server `maxconn` with a backend queue. Among free dynos the least loaded wins;
/// ties go to the dyno that has been at that load longest (with single-slot dynos, the one
/// idle longest), which spreads the work evenly and needs no random draw. The waits do not
/// depend on this choice, only how the busy time is shared among the dynos.
#[derive(Debug, Clone)]
pub struct Intelligent;

pub fn build(_: &Params) -> Result<Box<dyn RoutingPolicy>> {
    Ok(Box::new(Intelligent))
}

impl RoutingPolicy for Intelligent {
    #[inline]
    fn route(&mut self, view: &RouterView, _: &mut SimRng) -> Route {
        let loads = view.ranked();
        if loads.min_load() < view.slots {
            Route::To(loads.oldest_least_loaded())
        } else {
            Route::Hold
        }
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::FreeSlots
    }
}
