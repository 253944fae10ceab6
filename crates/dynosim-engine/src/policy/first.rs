use super::{Knowledge, Route, RouterView, RoutingPolicy, Ties};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;

/// HAProxy's `balance first`: the lowest-numbered up dyno with a free slot by this router's
/// count (its in-flight requests below the dyno's slots, HAProxy's `maxconn` set to the app
/// server's concurrency) takes the request; when every up dyno is full it waits in the
/// router's FIFO queue until one of this router's requests completes. "The first server with
/// available connection slots receives the connection ... to always use the smallest number of
/// servers so that extra servers can be powered off" (HAProxy's configuration manual).
///
/// With one router and Poisson arrivals the first k dynos are an Erlang loss system of k·slots
/// servers that overflows to the next: dyno k carries a·[B((k−1)c, a) − B(kc, a)] Erlangs,
/// whatever the service distribution (B is Erlang's loss formula, c the slots per dyno,
/// a = λE[S]).
///
/// It finds the dyno by a scan from dyno 0, which passes over the busy dynos: with the load a
/// the scan is about a/c dynos long, the dynos this policy keeps busy.
#[derive(Debug, Clone)]
pub struct First;

pub fn build(_: &Params) -> Result<Box<dyn RoutingPolicy>> {
    Ok(Box::new(First))
}

impl RoutingPolicy for First {
    fn route(&mut self, view: &RouterView, _: &mut SimRng) -> Route {
        // Every up dyno full: no scan.
        if view.ranked().min_load() >= view.slots {
            return Route::Hold;
        }
        (0..view.dyno_slots())
            .find(|&dyno| view.is_up(dyno) && view.in_flight(dyno) < view.slots)
            .map_or(Route::Hold, Route::To)
    }
    /// It may hold requests, and the engine asks it again when one of this router's requests
    /// completes. The ranking gives the least load among the up dynos, so that a full fleet
    /// costs no scan; the ties are never read.
    fn knowledge(&self) -> Knowledge {
        Knowledge::Ranking(Ties::Oldest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::in_flight::LoadIndex;
    use crate::up_set::UpSet;
    use rand::{Rng, SeedableRng};

    /// Checked against the rule written out, over random loads and fleets with dynos down:
    /// the lowest-numbered up dyno below its slots, else a hold.
    #[test]
    fn the_lowest_numbered_up_dyno_with_a_free_slot() {
        let (n, slots) = (12, 3u32);
        let mut rng = SimRng::seed_from_u64(41);
        let mut up = UpSet::new(n, n).unwrap();
        let mut index = LoadIndex::new(n, Some(Ties::Oldest)).unwrap();
        let mut counts = vec![0u32; n];
        let mut policy = First;
        let (mut held, mut sent) = (0, 0);
        for step in 0..20_000 {
            let d = rng.random_range(0..n);
            match rng.random_range(0..10) {
                0 if up.contains(d) && up.len() > 1 => {
                    up.remove(d);
                    index.park(d);
                }
                0 if !up.contains(d) => {
                    up.insert(d);
                    index.unpark(d);
                }
                1..=4 if counts[d] > 0 => {
                    index.decrement(d);
                    counts[d] -= 1;
                }
                _ => {
                    let view = RouterView::indexed(slots, &up, &index);
                    let expected = (0..n).find(|&x| up.contains(x) && counts[x] < slots);
                    match (policy.route(&view, &mut rng), expected) {
                        (Route::To(got), Some(want)) => {
                            assert_eq!(got, want, "step {step}");
                            index.increment(got);
                            counts[got] += 1;
                            sent += 1;
                        }
                        (Route::Hold, None) => held += 1,
                        (got, want) => panic!("step {step}: {got:?}, expected {want:?}"),
                    }
                }
            }
        }
        // Both branches were exercised.
        assert!(held > 100 && sent > 1000, "held {held}, sent {sent}");
    }
}
