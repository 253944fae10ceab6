use super::{Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// A random dyno; if this router believes it busy, another random draw, up to `tries` draws in
/// all, and the last draw is used whatever its state (the seed study's "choice of two" with the
/// default tries = 2).
#[derive(Debug, Clone)]
pub struct RetryIfBusy {
    tries: u32,
}

pub fn build(p: &Params) -> Result<Box<dyn RoutingPolicy>> {
    // Heroku's router tries up to 10 dynos; a hundred draws per request is already far past
    // any router's patience.
    Ok(Box::new(RetryIfBusy {
        tries: p.whole("tries", 2, 1, 100)?,
    }))
}

impl RoutingPolicy for RetryIfBusy {
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        let mut dyno = view.random_dyno(rng);
        for _ in 1..self.tries {
            if !view.is_busy(dyno) {
                break;
            }
            dyno = view.random_dyno(rng);
        }
        Route::To(dyno)
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::Some
    }
}
