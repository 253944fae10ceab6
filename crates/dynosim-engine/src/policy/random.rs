use super::{Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// Uniformly random dyno, whatever its load (Heroku's router since 2010; the seed's "naive").
#[derive(Debug, Clone)]
pub struct Random;

pub fn build(_: &Params) -> Result<Box<dyn RoutingPolicy>> {
    Ok(Box::new(Random))
}

impl RoutingPolicy for Random {
    #[inline]
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        Route::To(view.random_dyno(rng))
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::Nothing
    }
    fn picks_uniformly(&self) -> bool {
        true
    }
}
