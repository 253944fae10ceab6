use super::{Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// Each router cycles through the up dynos, starting from a random one. It keeps its place
/// among them: when dynos come or go, it goes on from the same place in the new set.
#[derive(Debug, Clone)]
pub struct RoundRobin {
    next: Option<usize>,
}

pub fn build(_: &Params) -> Result<Box<dyn RoutingPolicy>> {
    Ok(Box::new(RoundRobin { next: None }))
}

impl RoutingPolicy for RoundRobin {
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        let n = view.dynos();
        let place = match self.next {
            Some(place) => place % n,
            None => view.random_place(rng),
        };
        self.next = Some((place + 1) % n);
        Route::To(view.dyno_at(place))
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::Nothing
    }
}
