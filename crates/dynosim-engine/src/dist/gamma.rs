use super::ServiceDistribution;
use crate::error::Result;
use crate::params::Params;
use crate::rng::SimRng;
use rand_distr::Distribution;
use statrs::function::gamma::checked_gamma_lr;
use std::path::Path;

/// Steps allowed to each stage of [`Gamma::quantile`]'s search: more than the factors of two
/// between f64's smallest and largest positive values (about 2,100).
const STEPS: usize = 2200;

/// The largest shape accepted: statrs's cdf takes time that grows with the shape (half a
/// second a call at 10¹⁵, without end at 10³⁰⁰), and the quantile search and the moments of a
/// rounded gamma call it thousands to millions of times.
const MAX_SHAPE: f64 = 1e4;

/// Gamma given by its shape k and either its scale θ or its mean kθ.
#[derive(Debug)]
pub struct Gamma {
    shape: f64,
    scale: f64,
    /// 1/scale, as statrs's Gamma keeps it (the cdf is P(shape, x·rate)).
    rate: f64,
    sampler: rand_distr::Gamma<f64>,
}

pub fn build(p: &Params, _: &Path) -> Result<Box<dyn ServiceDistribution>> {
    let shape = p.positive("shape")?;
    let shape = p.required("shape", "a positive number", shape)?;
    if shape > MAX_SHAPE {
        return Err(p.error(
            "shape",
            format!(
                "must be at most {MAX_SHAPE}, got {shape}: a gamma this narrow is constant to \
                 within 1% (use distribution = \"constant\")"
            ),
        ));
    }
    let scale = match p.one_of("scale", "mean")? {
        "first" => p.positive_duration("scale")?.unwrap(),
        _ => p.positive_duration("mean")?.unwrap() / shape,
    };
    let invalid = |e: &dyn std::fmt::Display| p.error("shape", e.to_string());
    Ok(Box::new(Gamma {
        shape,
        scale,
        rate: 1.0 / scale,
        sampler: rand_distr::Gamma::new(shape, scale).map_err(|e| invalid(&e))?,
    }))
}

impl Gamma {
    /// P(S <= x) for x > 0: statrs's `Gamma::cdf`, less its panic (`gamma_lr` unwraps an
    /// error when x·rate underflows to 0 or overflows), which took the process down in the
    /// quantile search for a tiny shape (10⁻¹⁸⁵) with a huge scale.
    fn lower(&self, x: f64) -> f64 {
        let y = x * self.rate;
        if y == 0.0 {
            0.0
        } else if y.is_infinite() {
            1.0
        } else {
            checked_gamma_lr(self.shape, y).unwrap_or(f64::NAN)
        }
    }
}

impl ServiceDistribution for Gamma {
    fn sample(&self, rng: &mut SimRng) -> f64 {
        self.sampler.sample(rng)
    }
    fn mean(&self) -> f64 {
        self.shape * self.scale
    }
    fn second_moment(&self) -> f64 {
        self.shape * (self.shape + 1.0) * self.scale * self.scale
    }
    fn quantile(&self, p: f64) -> f64 {
        // Not statrs's `inverse_cdf`: its few bisection steps and unguarded Newton steps return
        // NaN for shape <= 1 at small p and miss far tails. Bisection on the cdf, geometric
        // while the bracket spans more than a factor of two, runs to adjacent floats.
        if p.is_nan() {
            return f64::NAN;
        }
        if p <= 0.0 {
            return 0.0;
        }
        if p >= 1.0 {
            return f64::INFINITY;
        }
        // A bracket lo < x <= hi, by halving and doubling from the mean. Every step is bounded:
        // f64 spans about 2,100 factors of two, so a cdf that never crosses p (statrs's is 0
        // everywhere when 1/scale overflows) gives NaN, not an endless loop.
        let (mut lo, mut hi) = (self.mean(), self.mean().max(f64::MIN_POSITIVE));
        let mut steps = 0;
        while lo > 0.0 && self.lower(lo) >= p && steps < STEPS {
            lo /= 2.0;
            steps += 1;
        }
        while self.lower(hi) < p && hi.is_finite() && steps < 2 * STEPS {
            hi *= 2.0;
            steps += 1;
        }
        if !hi.is_finite() || steps >= 2 * STEPS {
            return f64::NAN;
        }
        for _ in 0..STEPS {
            let mid = if lo > 0.0 && hi > 2.0 * lo {
                lo.sqrt() * hi.sqrt()
            } else {
                0.5 * (lo + hi)
            };
            if mid <= lo || mid >= hi {
                return hi;
            }
            if self.lower(mid) < p {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        f64::NAN
    }
    fn cdf(&self, x: f64) -> f64 {
        if x <= 0.0 {
            0.0
        } else {
            self.lower(x)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_of_a_gamma_with_a_mean_of_zero_ends() {
        // shape x scale underflows to 0, so the bracket's doubling started from 0 and never
        // grew (and 1/scale overflows, so statrs's cdf is meaningless anyway). Scenarios cannot
        // give such a scale any more (durations are at least 1 ns): the regression here is the
        // search itself, which must come back, whatever it answers for such a distribution.
        let (shape, scale) = (0.5, 5e-324);
        let g = Gamma {
            shape,
            scale,
            rate: 1.0 / scale,
            sampler: rand_distr::Gamma::new(shape, scale).unwrap(),
        };
        assert_eq!(g.mean(), 0.0);
        for p in [1e-12, 0.5, 1.0 - 1e-12] {
            let q = g.quantile(p);
            assert!(q.is_nan() || q.is_finite(), "p = {p}: {q}");
        }
        assert!(g.quantile(f64::NAN).is_nan());
    }
}
