//! Retries on one M/M/1 server (../../docs/feedback.md, "The simplest model"): Poisson user
//! requests at λ to one FIFO server of rate μ, clients that give up after τ and try `n` times in
//! all, with no backoff and no cancellation (a request given up on is still served).
//!
//! Every try adds work, so the server sees x = λ(1 + p + … + p^(n−1)) tries a second, where
//! p = P(a try is not answered within τ). Taking the tries as Poisson, the server is M/M/1 at x
//! and its response time is exponential of rate μ − x: p(x) = e^(−(μ−x)τ). Two states can hold
//! the offered load up:
//! - the *normal* state, a root x < μ of x = λ Σ_{k<n} p(x)^k (the lowest is the stable one);
//! - the *overloaded* state: with x ≥ μ the queue grows, every try times out and x = nλ, which
//!   holds itself up if and only if nλ > μ.
//!
//! When both exist (λ < μ < nλ and a normal root) the server is bistable: a trigger that
//! tips it over leaves it down after the trigger is gone.

/// What the fixed-point model says of one M/M/1 server with retries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryStates {
    /// The normal state's offered load (tries a second), if there is one below μ.
    pub normal: Option<f64>,
    /// Whether the overloaded state holds itself up (nλ > μ).
    pub overloaded: bool,
}

impl RetryStates {
    /// Both states exist: which one the server is in depends on its history.
    pub fn bistable(&self) -> bool {
        self.normal.is_some() && self.overloaded
    }
}

/// The states of the model for user rate `lambda`, service rate `mu`, patience `tau` and
/// `attempts` tries in all; None outside its domain (positive finite rates and patience, at
/// least one try).
pub fn mm1_retry_states(lambda: f64, mu: f64, tau: f64, attempts: u32) -> Option<RetryStates> {
    let ok = |x: f64| x.is_finite() && x > 0.0;
    if !(ok(lambda) && ok(mu) && ok(tau) && attempts >= 1) {
        return None;
    }
    let n = attempts as i32;
    // g(x) = λ Σ_{k<n} p(x)^k − x: positive at x = λ (the sum is at least 1); its lowest zero
    // below μ is the normal state.
    let g = |x: f64| {
        let p = (-(mu - x) * tau).exp();
        let sum = if (p - 1.0).abs() < 1e-12 {
            f64::from(attempts)
        } else {
            (1.0 - p.powi(n)) / (1.0 - p)
        };
        lambda * sum - x
    };
    let overloaded = f64::from(attempts) * lambda > mu;
    if lambda >= mu {
        return Some(RetryStates {
            normal: None,
            overloaded: true,
        });
    }
    // Scan [λ, μ) for the first sign change, then bisect.
    const STEPS: usize = 100_000;
    let h = (mu - lambda) / STEPS as f64;
    let mut a = lambda;
    let mut normal = None;
    for i in 1..=STEPS {
        let b = if i == STEPS {
            mu
        } else {
            lambda + h * i as f64
        };
        if g(b) <= 0.0 {
            let (mut lo, mut hi) = (a, b);
            for _ in 0..200 {
                let mid = 0.5 * (lo + hi);
                if g(mid) > 0.0 {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let x = 0.5 * (lo + hi);
            if x < mu {
                normal = Some(x);
            }
            break;
        }
        a = b;
    }
    Some(RetryStates { normal, overloaded })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_try_is_plain_mm1() {
        let s = mm1_retry_states(5.0, 10.0, 1.0, 1).unwrap();
        assert!((s.normal.unwrap() - 5.0).abs() < 1e-9);
        assert!(!s.overloaded);
    }

    #[test]
    fn the_normal_root_solves_the_equation() {
        let (l, mu, tau, n) = (6.0, 10.0, 1.0, 3);
        let x = mm1_retry_states(l, mu, tau, n).unwrap().normal.unwrap();
        let p = (-(mu - x) * tau).exp();
        assert!((l * (1.0 + p + p * p) - x).abs() < 1e-9);
        assert!(x > l && x < mu);
    }

    #[test]
    fn bistable_between_the_boundaries() {
        // nλ > μ and a normal root: bistable.
        let s = mm1_retry_states(6.0, 10.0, 1.0, 3).unwrap();
        assert!(s.bistable());
        // nλ < μ: the overloaded state cannot hold.
        let s = mm1_retry_states(3.0, 10.0, 1.0, 3).unwrap();
        assert!(s.normal.is_some() && !s.overloaded);
        // Patience so short that even the normal state times out: no root below μ.
        let s = mm1_retry_states(6.0, 10.0, 0.05, 3).unwrap();
        assert!(s.normal.is_none() && s.overloaded);
    }
}
