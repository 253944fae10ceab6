use super::ServiceDistribution;
use crate::error::{Error, Result};
use crate::rng::SimRng;
use rand::SeedableRng;

/// A distribution whose samples are rounded up to a multiple of `round_up` and then clipped to
/// `[clip.0, clip.1]`, as the seed study's Weibull recipe does (whole ms, 10 ms..30 s).
///
/// Moments: when rounding is on and the range to sum over is at most 10⁷ steps, exactly, from
/// E[Y] = ∫ P(Y > y) dy summed cell by cell on the rounding grid; otherwise estimated from 10⁶
/// samples drawn with a fixed internal seed (the estimate is then reproducible).
/// Cells or samples between two polls of the interrupt flag while summing the moments.
const POLL_EVERY: usize = 1 << 16;

#[derive(Debug)]
pub struct Shaped {
    inner: Box<dyn ServiceDistribution>,
    round_up: Option<f64>,
    clip: (f64, f64),
    mean: f64,
    second_moment: f64,
}

impl Shaped {
    /// Works out the moments at once; `interrupted` is polled while it does (see
    /// [`crate::Scenario::from_json`]).
    pub fn new(
        inner: Box<dyn ServiceDistribution>,
        round_up: Option<f64>,
        clip: Option<(f64, f64)>,
        interrupted: &(dyn Fn() -> bool + Sync),
    ) -> Result<Self> {
        let mut shaped = Shaped {
            inner,
            round_up,
            clip: clip.unwrap_or((0.0, f64::INFINITY)),
            mean: f64::NAN,
            second_moment: f64::NAN,
        };
        (shaped.mean, shaped.second_moment) = shaped.moments(interrupted)?;
        Ok(shaped)
    }

    #[inline]
    fn shape(&self, x: f64) -> f64 {
        let x = match self.round_up {
            Some(step) => (x / step).ceil() * step,
            None => x,
        };
        x.clamp(self.clip.0, self.clip.1)
    }

    fn moments(&self, interrupted: &(dyn Fn() -> bool + Sync)) -> Result<(f64, f64)> {
        if let Some(step) = self.round_up {
            let top = if self.clip.1.is_finite() {
                self.clip.1
            } else {
                self.inner.quantile(1.0 - 1e-12)
            };
            let cells = (top / step).ceil();
            if cells.is_finite() && cells <= 1e7 {
                return self.grid_moments(step, cells as usize, interrupted);
            }
        }
        let mut rng = SimRng::seed_from_u64(0x5EED);
        let n = 1_000_000;
        let (mut s1, mut s2) = (0.0, 0.0);
        for i in 0..n {
            if i % POLL_EVERY == 0 && interrupted() {
                return Err(Error::Interrupted);
            }
            let y = self.sample(&mut rng);
            s1 += y;
            s2 += y * y;
        }
        Ok((s1 / n as f64, s2 / n as f64))
    }

    /// Y = clip(step·⌈X/step⌉) takes the value clip(k·step) with probability
    /// F(k·step) − F((k−1)·step); values past `cells` carry the remaining mass at the top.
    /// Grid points are clipped, not rounded again: k·step/step may come out a hair above k,
    /// and rounding it up would move the value to the next grid point.
    fn grid_moments(
        &self,
        step: f64,
        cells: usize,
        interrupted: &(dyn Fn() -> bool + Sync),
    ) -> Result<(f64, f64)> {
        let on_grid = |k: usize| (k as f64 * step).clamp(self.clip.0, self.clip.1);
        let (mut s1, mut s2) = (0.0, 0.0);
        let mut prev = self.inner.cdf(0.0);
        let at_zero = on_grid(0);
        s1 += prev * at_zero;
        s2 += prev * at_zero * at_zero;
        for k in 1..=cells {
            if k % POLL_EVERY == 0 && interrupted() {
                return Err(Error::Interrupted);
            }
            let f = self.inner.cdf(k as f64 * step);
            let y = on_grid(k);
            s1 += (f - prev) * y;
            s2 += (f - prev) * y * y;
            prev = f;
        }
        let y = on_grid(cells + 1);
        s1 += (1.0 - prev) * y;
        s2 += (1.0 - prev) * y * y;
        Ok((s1, s2))
    }
}

impl ServiceDistribution for Shaped {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        self.shape(self.inner.sample(rng))
    }
    fn sample_into(&self, rng: &mut SimRng, out: &mut [f64]) {
        self.inner.sample_into(rng, out);
        for x in out {
            *x = self.shape(*x);
        }
    }
    fn mean(&self) -> f64 {
        self.mean
    }
    fn second_moment(&self) -> f64 {
        self.second_moment
    }
    fn quantile(&self, p: f64) -> f64 {
        self.shape(self.inner.quantile(p))
    }
    fn cdf(&self, x: f64) -> f64 {
        if x < self.clip.0 {
            return 0.0;
        }
        if x >= self.clip.1 {
            return 1.0;
        }
        match self.round_up {
            // The grid point at or below x; the nudge keeps x = k·step in cell k although
            // x / step may come out a hair below k (0.043 / 0.001 = 42.99...).
            Some(step) => self.inner.cdf((x / step + 1e-9).floor() * step),
            None => self.inner.cdf(x),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::ServiceDistribution;

    #[derive(Debug)]
    struct Uniform(f64);
    impl ServiceDistribution for Uniform {
        fn sample(&self, rng: &mut SimRng) -> f64 {
            use rand::Rng;
            rng.random::<f64>() * self.0
        }
        fn mean(&self) -> f64 {
            self.0 / 2.0
        }
        fn second_moment(&self) -> f64 {
            self.0 * self.0 / 3.0
        }
        fn quantile(&self, p: f64) -> f64 {
            p * self.0
        }
        fn cdf(&self, x: f64) -> f64 {
            (x / self.0).clamp(0.0, 1.0)
        }
    }

    #[test]
    fn rounding_up_a_uniform_has_the_exact_discrete_mean() {
        // U(0, 10 ms) rounded up to whole ms is uniform on {1, ..., 10} ms: mean 5.5 ms,
        // E[Y²] = 38.5 ms². Regression: grid points were rounded a second time, and
        // k·step/step landing a hair above k moved them one step up.
        let d = Shaped::new(Box::new(Uniform(0.010)), Some(0.001), None, &|| false).unwrap();
        assert!((d.mean() - 0.0055).abs() < 1e-12, "{}", d.mean());
        assert!(
            (d.second_moment() - 38.5e-6).abs() < 1e-12,
            "{}",
            d.second_moment()
        );
        // Clipped to [3 ms, 8 ms]: values 3 (p .3), 4..7 (p .1 each), 8 (p .3).
        let c = Shaped::new(
            Box::new(Uniform(0.010)),
            Some(0.001),
            Some((0.003, 0.008)),
            &|| false,
        )
        .unwrap();
        assert!((c.mean() - 0.0055).abs() < 1e-12, "{}", c.mean());
    }

    #[test]
    fn summing_the_moments_stops_when_interrupted() {
        // 10⁷ cells to sum; the flag is up from the start.
        let stopped = Shaped::new(Box::new(Uniform(10.0)), Some(1e-6), None, &|| true);
        assert!(matches!(stopped, Err(Error::Interrupted)), "{stopped:?}");
        // Too many cells: the moments are estimated from samples, which stop too.
        let sampled = Shaped::new(Box::new(Uniform(1e9)), Some(1e-6), None, &|| true);
        assert!(matches!(sampled, Err(Error::Interrupted)), "{sampled:?}");
    }
}
