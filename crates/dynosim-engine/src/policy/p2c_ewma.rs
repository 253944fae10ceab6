use super::{Knowledge, Route, RouterView, RoutingPolicy};
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand::Rng;

/// Linkerd's default decay of the latency estimate (`EWMA_DECAY`).
const DEFAULT_DECAY: f64 = 10.0;
/// Linkerd's estimate for a dyno not heard from yet (`EWMA_DEFAULT_RTT`).
const DEFAULT_RTT: f64 = 0.030;

/// Power of two choices by peak-EWMA latency (Finagle's `p2cPeakEwma`, Linkerd's balancer,
/// tower's `PeakEwma`): two distinct dynos drawn at random, and the request goes to the one of
/// lower cost, ties to the second draw (Finagle's `P2CPick`). A dyno's cost is this router's
/// latency estimate for it times (its requests in flight from this router + 1).
///
/// The estimate is learned from this router's own responses, each a round trip from the
/// routing decision to the response ([`RoutingPolicy::responded`]), and is sensitive to
/// peaks: a round trip longer than the estimate replaces it; a shorter one is averaged in with
/// the weight 1 − exp(−Δt/`decay`) of the time since the estimate was last updated. Reading a
/// cost first decays the estimate towards 0 the same way (an observation of 0, as tower's
/// `load()` does), so that a dyno not heard from for a while is tried again. A dyno's
/// estimate starts at `default_rtt` when it comes up (for the initial fleet, at the start).
#[derive(Debug, Clone)]
pub struct P2cEwma {
    decay: f64,
    default_rtt: f64,
    /// Per dyno slot, grown as dynos are seen.
    estimates: Vec<PeakEwma>,
}

/// One dyno's peak-EWMA round-trip estimate, as tower's `RttEstimate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PeakEwma {
    /// Seconds.
    pub rtt: f64,
    /// When it was last updated.
    pub at: f64,
}

impl PeakEwma {
    pub fn new(rtt: f64, at: f64) -> Self {
        PeakEwma { rtt, at }
    }

    /// An observed round trip `rtt` at `now`: the peak, or the decayed average.
    pub fn observe(&mut self, rtt: f64, now: f64, decay: f64) -> f64 {
        if self.rtt < rtt {
            self.rtt = rtt;
        } else {
            let w = (-(now - self.at).max(0.0) / decay).exp();
            self.rtt = self.rtt * w + rtt * (1.0 - w);
        }
        self.at = now;
        self.rtt
    }

    /// The cost of a dyno with `pending` requests in flight, read at `now` (which decays the
    /// estimate, as tower's `load()`).
    pub fn cost(&mut self, pending: u32, now: f64, decay: f64) -> f64 {
        self.observe(0.0, now, decay) * f64::from(pending + 1)
    }
}

pub fn build(p: &Params) -> Result<Box<dyn RoutingPolicy>> {
    Ok(Box::new(P2cEwma {
        decay: p.positive_duration("decay")?.unwrap_or(DEFAULT_DECAY),
        default_rtt: p.positive_duration("default_rtt")?.unwrap_or(DEFAULT_RTT),
        estimates: Vec::new(),
    }))
}

impl P2cEwma {
    fn estimate(&mut self, dyno: usize) -> &mut PeakEwma {
        if dyno >= self.estimates.len() {
            // Dynos of the initial fleet, first seen now: discovered at the start.
            let fresh = PeakEwma::new(self.default_rtt, 0.0);
            self.estimates.resize(dyno + 1, fresh);
        }
        &mut self.estimates[dyno]
    }

    fn cost(&mut self, view: &RouterView, dyno: usize) -> f64 {
        let (pending, now, decay) = (view.in_flight(dyno), view.now(), self.decay);
        self.estimate(dyno).cost(pending, now, decay)
    }
}

impl RoutingPolicy for P2cEwma {
    fn route(&mut self, view: &RouterView, rng: &mut SimRng) -> Route {
        let n = view.dynos();
        if n == 1 {
            return Route::To(view.dyno_at(0));
        }
        // Finagle's distinct pair: a = nextInt(n); b = nextInt(n − 1), shifted past a.
        let a = view.random_place(rng);
        let mut b = rng.random_range(0..n - 1);
        if b >= a {
            b += 1;
        }
        let (a, b) = (view.dyno_at(a), view.dyno_at(b));
        let (cost_a, cost_b) = (self.cost(view, a), self.cost(view, b));
        Route::To(if cost_a < cost_b { a } else { b })
    }
    fn knowledge(&self) -> Knowledge {
        Knowledge::Responses
    }
    fn responded(&mut self, dyno: usize, rtt: f64, now: f64) {
        let decay = self.decay;
        self.estimate(dyno).observe(rtt, now, decay);
    }
    fn dyno_up(&mut self, dyno: usize, now: f64) {
        let fresh = PeakEwma::new(self.default_rtt, now);
        *self.estimate(dyno) = fresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e-3;

    /// tower's `default_decay`: a default of 10 ms decaying over 1 s reads 10 ms at first,
    /// then between 9 and 10 ms 100 ms later, and between 8 and 9 ms 100 ms after that:
    /// 10·e^(−0.1) and 10·e^(−0.2) ms exactly.
    #[test]
    fn default_decay() {
        let decay = 1.0;
        let mut e = PeakEwma::new(10.0 * MS, 0.0);
        assert_eq!(e.cost(0, 0.0, decay), 10.0 * MS);
        let at_100 = e.cost(0, 0.1, decay);
        assert!(9.0 * MS < at_100 && at_100 < 10.0 * MS);
        assert!((at_100 - 10.0 * MS * (-0.1f64).exp()).abs() < 1e-15);
        let at_200 = e.cost(0, 0.2, decay);
        assert!(8.0 * MS < at_200 && at_200 < 9.0 * MS);
        assert!((at_200 - 10.0 * MS * (-0.2f64).exp()).abs() < 1e-15);
    }

    /// tower's `compound_decay`: 20 ms default, 1 s decay; requests sent at 100 and 200 ms
    /// answer at 300 and 400 ms (round trips of 200 ms each). The first is a peak: the cost
    /// with the other still pending is 2 × 200 = 400 ms; the second equals the estimate: 200
    /// ms. Then the estimate decays: 200·e^(−1) ms after 1 s, 200·e^(−11) ms after 11 s.
    #[test]
    fn compound_decay() {
        let decay = 1.0;
        let mut e = PeakEwma::new(20.0 * MS, 0.0);
        assert_eq!(e.cost(0, 0.0, decay), 20.0 * MS);
        // One request pending at 100 ms, two at 200 ms.
        let c1 = e.cost(1, 0.1, decay);
        assert!(c1 > 20.0 * MS);
        assert!((c1 - 2.0 * 20.0 * MS * (-0.1f64).exp()).abs() < 1e-15);
        let c2 = e.cost(2, 0.2, decay);
        assert!(c2 > 40.0 * MS);
        assert!((c2 - 3.0 * 20.0 * MS * (-0.2f64).exp()).abs() < 1e-15);
        e.observe(0.3 - 0.1, 0.3, decay);
        assert!((e.cost(1, 0.3, decay) - 400.0 * MS).abs() < 1e-15);
        e.observe(0.4 - 0.2, 0.4, decay);
        let c = e.cost(0, 0.4, decay);
        assert!((c - 200.0 * MS).abs() < 1e-12, "{c}");
        let later = e.cost(0, 1.4, decay);
        assert!(later < 100.0 * MS);
        assert!((later - 200.0 * MS * (-1.0f64).exp()).abs() < 1e-12);
        let much_later = e.cost(0, 11.4, decay);
        assert!(much_later < 100_000e-9);
        assert!((much_later - 200.0 * MS * (-11.0f64).exp()).abs() < 1e-15);
    }

    /// A round trip below the estimate is averaged in with the weight of the time since the
    /// last update; one above it replaces it.
    #[test]
    fn peaks_replace_and_the_rest_average() {
        let mut e = PeakEwma::new(0.1, 0.0);
        assert_eq!(e.observe(0.5, 1.0, 10.0), 0.5);
        let w = (-2.0f64 / 10.0).exp();
        assert!((e.observe(0.1, 3.0, 10.0) - (0.5 * w + 0.1 * (1.0 - w))).abs() < 1e-15);
        assert_eq!(e.at, 3.0);
    }
}
