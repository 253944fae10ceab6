use super::{Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// The most candidates a request may have: the distinct draws are tracked in an array this long.
const MAX_D: usize = 16;

/// Power of d choices (Mitzenmacher 1996; Envoy's and HAProxy's `random(2)`): d distinct dynos
/// drawn at random, the one with the fewest in-flight requests from this router wins; ties go
/// to the earlier draw, which is itself random.
///
/// With `distinct = false` the d draws are independent, so a dyno may be drawn twice and then
/// compared with itself: HAProxy's `random(d)` (`get_server_rnd` in its backend.c draws d
/// times and compares a draw only with a different previous best), which with few dynos is
/// noticeably closer to random routing than d distinct candidates.
#[derive(Debug, Clone)]
pub struct PowerOfD {
    d: usize,
    distinct: bool,
}

pub fn build(p: &Params) -> Result<Box<dyn RoutingPolicy>> {
    Ok(Box::new(PowerOfD {
        d: p.whole("d", 2, 1, MAX_D as i64)?,
        distinct: p.get::<bool>("distinct")?.unwrap_or(true),
    }))
}

impl RoutingPolicy for PowerOfD {
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        if !self.distinct {
            let mut best = view.random_dyno(rng);
            for _ in 1..self.d {
                let candidate = view.random_dyno(rng);
                if view.in_flight(candidate) < view.in_flight(best) {
                    best = candidate;
                }
            }
            return Route::To(best);
        }
        let d = self.d.min(view.dynos());
        let first = view.random_dyno(rng);
        if d == 2 {
            // The usual case, without the list of candidates: the same draws and outcome.
            let mut second = view.random_dyno(rng);
            while second == first {
                second = view.random_dyno(rng);
            }
            let better = view.in_flight(second) < view.in_flight(first);
            return Route::To(if better { second } else { first });
        }
        let mut chosen = [0usize; MAX_D];
        let mut best = first;
        let mut best_load = view.in_flight(best);
        chosen[0] = best;
        for i in 1..d {
            // Distinct candidates: redraw on a repeat (d is small next to n in practice).
            let candidate = loop {
                let c = view.random_dyno(rng);
                if !chosen[..i].contains(&c) {
                    break c;
                }
            };
            chosen[i] = candidate;
            let load = view.in_flight(candidate);
            if load < best_load {
                best = candidate;
                best_load = load;
            }
        }
        Route::To(best)
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::Some
    }
}
