use super::{Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// Each router cycles through the dynos, starting from a random one.
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
        let dyno = self.next.unwrap_or_else(|| view.random_dyno(rng));
        self.next = Some((dyno + 1) % n);
        Route::To(dyno)
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::Nothing
    }
}
