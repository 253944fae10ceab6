//! Closed-form queueing results the simulator is checked against (docs/model.md, section 5).

/// Erlang C: probability that an arrival waits in an M/M/c queue with offered load `a` = λE[S]
/// (in Erlangs) and `c` servers. Computed with the Erlang B recursion, stable for large c.
/// None outside its domain, 0 <= a < c.
pub fn erlang_c(c: u32, a: f64) -> Option<f64> {
    if !(a >= 0.0 && a < c as f64) {
        return None;
    }
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (k as f64 + a * b);
    }
    let rho = a / c as f64;
    Some(b / (1.0 - rho * (1.0 - b)))
}

/// Mean wait in queue of M/M/c: P(wait)·E[S]/(c − a). None unless 0 <= a < c and E[S] is
/// finite and > 0.
pub fn mmc_mean_wait(c: u32, a: f64, mean_service: f64) -> Option<f64> {
    if !(mean_service > 0.0 && mean_service.is_finite()) {
        return None;
    }
    Some(erlang_c(c, a)? * mean_service / (c as f64 - a))
}

/// Pollaczek–Khinchine mean wait in queue of M/G/1 with arrival rate λ and service moments.
/// None unless λ >= 0, E[S] > 0, E[S²] > 0 (finite) and ρ = λE[S] < 1.
pub fn mg1_mean_wait(lambda: f64, mean_service: f64, second_moment: f64) -> Option<f64> {
    let rho = lambda * mean_service;
    let moments = mean_service > 0.0 && second_moment > 0.0 && second_moment.is_finite();
    if !(lambda >= 0.0 && moments && rho < 1.0) {
        return None;
    }
    Some(lambda * second_moment / (2.0 * (1.0 - rho)))
}

/// Mean time in system (in units of E[S]) of the power-of-d-choices supermarket model in the
/// mean-field limit (n → ∞), per-server load λ < 1, exponential service:
/// T = Σ_{i≥1} λ^((dⁱ − d)/(d − 1)). None unless d >= 2 and 0 <= λ < 1.
pub fn power_of_d_mean_time(lambda: f64, d: u32) -> Option<f64> {
    if !(d >= 2 && (0.0..1.0).contains(&lambda)) {
        return None;
    }
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
    Some(total)
}

/// The fewest servers c for which M/M/c meets a mean-wait target, or None past `max_c` (or
/// for a load `a` that is negative or not finite).
pub fn mmc_min_servers(a: f64, mean_service: f64, target_wait: f64, max_c: u32) -> Option<u32> {
    if !(a >= 0.0 && a < max_c as f64) {
        return None;
    }
    let first = a.floor() as u32 + 1;
    (first..=max_c).find(|&c| mmc_mean_wait(c, a, mean_service).is_some_and(|w| w <= target_wait))
}

/// How long a queue near saturation takes to settle (relax to its steady state), in seconds:
/// the heavy-traffic estimate from the reflected Brownian motion that approximates a queue of
/// `servers` servers sharing one FIFO queue at load ρ,
///
/// t_relax ≈ 2·ρ·E[S]·(1 + c_s²) / (k·(1 − ρ)²), with c_s² = E[S²]/E[S]² − 1.
///
/// (The queue length's drift is −k(1 − ρ)/E[S] and its variance rate about kρ(1 + c_s²)/E[S],
/// and the reflected motion relaxes in variance/drift² time.) For M/M/1 it is 4ρE[S]/(1 − ρ)²,
/// Morse's relaxation time. A run whose warm-up is short of it starts measuring before the
/// queues have settled, and one whose duration is not many times it gives wide intervals.
/// None unless 0 <= ρ < 1, k >= 1, E[S] > 0 and E[S²] > 0 (finite).
pub fn relaxation_time(
    load: f64,
    mean_service: f64,
    second_moment: f64,
    servers: u64,
) -> Option<f64> {
    let moments = mean_service > 0.0 && second_moment > 0.0 && second_moment.is_finite();
    if !((0.0..1.0).contains(&load) && servers >= 1 && moments) {
        return None;
    }
    // 1 + c_s² >= 1 exactly; moments summed numerically may fall a hair short.
    let scv_plus_one = (second_moment / (mean_service * mean_service)).max(1.0);
    let t = 2.0 * load * mean_service * scv_plus_one / (servers as f64 * (1.0 - load).powi(2));
    Some(t).filter(|t| t.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_matches_the_textbook_formula() {
        // Direct evaluation of the Erlang C formula of docs/model.md for a small case.
        let (c, a) = (5u32, 3.5f64);
        let fact = |k: u32| (1..=k).map(|i| i as f64).product::<f64>();
        let tail = a.powi(c as i32) / fact(c) / (1.0 - a / c as f64);
        let head: f64 = (0..c).map(|k| a.powi(k as i32) / fact(k)).sum();
        assert!((erlang_c(c, a).unwrap() - tail / (head + tail)).abs() < 1e-12);
        // One server: P(wait) = ρ.
        assert!((erlang_c(1, 0.7).unwrap() - 0.7).abs() < 1e-12);
    }

    #[test]
    fn power_of_d_obeys_littles_law() {
        // Mean jobs per server = Σ_{i≥1} s_i with s_i = λ^((dⁱ − 1)/(d − 1)); T = that / λ.
        for (lambda, d) in [(0.5f64, 2u32), (0.9, 2), (0.95, 3)] {
            let jobs: f64 = (1..40)
                .map(|i| lambda.powf(((d as f64).powi(i) - 1.0) / (d as f64 - 1.0)))
                .sum();
            assert!((power_of_d_mean_time(lambda, d).unwrap() - jobs / lambda).abs() < 1e-9);
        }
        // More choices never hurt; and at light load T → 1 (no waiting).
        assert!(power_of_d_mean_time(0.9, 3) < power_of_d_mean_time(0.9, 2));
        assert!((power_of_d_mean_time(1e-6, 2).unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn helpers_answer_none_outside_their_domain() {
        // Each of these panicked (an assert, or u32 overflow in a + 1) before.
        assert_eq!(erlang_c(3, 3.0), None);
        assert_eq!(erlang_c(0, 0.0), None);
        assert_eq!(erlang_c(3, f64::NAN), None);
        assert_eq!(erlang_c(3, -1.0), None);
        assert_eq!(mmc_mean_wait(3, 4.0, 1.0), None);
        assert_eq!(mmc_mean_wait(3, 1.0, f64::NAN), None);
        assert_eq!(mg1_mean_wait(2.0, 0.5, 1.0), None);
        assert_eq!(mg1_mean_wait(1.0, 0.5, f64::INFINITY), None);
        assert_eq!(mg1_mean_wait(1.0, 0.5, -1.0), None);
        assert_eq!(power_of_d_mean_time(1.0, 2), None);
        assert_eq!(power_of_d_mean_time(0.5, 1), None);
        assert_eq!(power_of_d_mean_time(f64::NAN, 2), None);
        assert_eq!(mmc_min_servers(1e12, 1.0, 0.1, 100), None);
        assert_eq!(mmc_min_servers(f64::INFINITY, 1.0, 0.1, u32::MAX), None);
        assert_eq!(mmc_min_servers(f64::NAN, 1.0, 0.1, 100), None);
        assert_eq!(mmc_min_servers(3.5, 1.0, 10.0, 100), Some(4));
        // M/G/1 inside its domain: λE[S²]/(2(1 − ρ)).
        assert!((mg1_mean_wait(1.0, 0.5, 0.5).unwrap() - 0.5).abs() < 1e-15);
    }

    #[test]
    fn relaxation_time_of_mm1_is_morses() {
        // Exponential service: E[S²] = 2E[S]², c_s² = 1, so t = 4ρE[S]/(1 − ρ)².
        for (rho, mean) in [(0.5, 1.0), (0.9, 0.2), (0.99, 0.05)] {
            let t = relaxation_time(rho, mean, 2.0 * mean * mean, 1).unwrap();
            let morse = 4.0 * rho * mean / ((1.0 - rho) * (1.0 - rho));
            assert!(
                (t - morse).abs() <= 1e-12 * morse,
                "rho {rho}: {t} vs {morse}"
            );
        }
        // k servers sharing the queue settle k times faster; constant service (c_s² = 0)
        // twice as fast as exponential.
        let one = relaxation_time(0.9, 1.0, 2.0, 1).unwrap();
        assert!((relaxation_time(0.9, 1.0, 2.0, 4).unwrap() - one / 4.0).abs() < 1e-12);
        assert!((relaxation_time(0.9, 1.0, 1.0, 1).unwrap() - one / 2.0).abs() < 1e-12);
        assert_eq!(relaxation_time(1.0, 1.0, 2.0, 1), None);
        assert_eq!(relaxation_time(0.5, 1.0, f64::INFINITY, 1), None);
        assert_eq!(relaxation_time(0.5, 1.0, 2.0, 0), None);
    }
}
