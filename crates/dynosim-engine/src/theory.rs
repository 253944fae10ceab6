//! Closed-form queueing results the simulator is checked against (DOMAIN.md §8).

/// Erlang C: probability that an arrival waits in an M/M/c queue with offered load `a` = λE[S]
/// (in Erlangs) and `c` servers. Computed with the Erlang B recursion, stable for large c.
pub fn erlang_c(c: u32, a: f64) -> f64 {
    assert!(a < c as f64, "Erlang C needs a < c");
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (k as f64 + a * b);
    }
    let rho = a / c as f64;
    b / (1.0 - rho * (1.0 - b))
}

/// Mean wait in queue of M/M/c: P(wait)·E[S]/(c − a).
pub fn mmc_mean_wait(c: u32, a: f64, mean_service: f64) -> f64 {
    erlang_c(c, a) * mean_service / (c as f64 - a)
}

/// Pollaczek–Khinchine mean wait in queue of M/G/1 with arrival rate λ and service moments.
pub fn mg1_mean_wait(lambda: f64, mean_service: f64, second_moment: f64) -> f64 {
    let rho = lambda * mean_service;
    assert!(rho < 1.0, "M/G/1 needs rho < 1");
    lambda * second_moment / (2.0 * (1.0 - rho))
}

/// Mean time in system (in units of E[S]) of the power-of-d-choices supermarket model in the
/// mean-field limit (n → ∞), per-server load λ < 1, exponential service:
/// T = Σ_{i≥1} λ^((dⁱ − d)/(d − 1)).
pub fn power_of_d_mean_time(lambda: f64, d: u32) -> f64 {
    assert!(d >= 2 && lambda < 1.0);
    let d = d as f64;
    let mut total = 0.0;
    let mut di = d; // d^i
    for _ in 0..200 {
        let term = lambda.powf((di - d) / (d - 1.0));
        total += term;
        if term < 1e-16 {
            break;
        }
        di *= d;
    }
    total
}

/// The fewest servers c for which M/M/c meets a mean-wait target, or None past `max_c`.
pub fn mmc_min_servers(a: f64, mean_service: f64, target_wait: f64, max_c: u32) -> Option<u32> {
    let first = a.floor() as u32 + 1;
    (first..=max_c).find(|&c| mmc_mean_wait(c, a, mean_service) <= target_wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_matches_the_textbook_formula() {
        // Direct evaluation of DOMAIN.md §8's formula for a small case.
        let (c, a) = (5u32, 3.5f64);
        let fact = |k: u32| (1..=k).map(|i| i as f64).product::<f64>();
        let tail = a.powi(c as i32) / fact(c) / (1.0 - a / c as f64);
        let head: f64 = (0..c).map(|k| a.powi(k as i32) / fact(k)).sum();
        assert!((erlang_c(c, a) - tail / (head + tail)).abs() < 1e-12);
        // One server: P(wait) = ρ.
        assert!((erlang_c(1, 0.7) - 0.7).abs() < 1e-12);
    }

    #[test]
    fn power_of_d_obeys_littles_law() {
        // Mean jobs per server = Σ_{i≥1} s_i with s_i = λ^((dⁱ − 1)/(d − 1)); T = that / λ.
        for (lambda, d) in [(0.5f64, 2u32), (0.9, 2), (0.95, 3)] {
            let jobs: f64 = (1..40)
                .map(|i| lambda.powf(((d as f64).powi(i) - 1.0) / (d as f64 - 1.0)))
                .sum();
            assert!((power_of_d_mean_time(lambda, d) - jobs / lambda).abs() < 1e-9);
        }
        // More choices never hurt; and at light load T → 1 (no waiting).
        assert!(power_of_d_mean_time(0.9, 3) < power_of_d_mean_time(0.9, 2));
        assert!((power_of_d_mean_time(1e-6, 2) - 1.0).abs() < 1e-9);
    }
}
