//! Closed-form queueing results the simulator is checked against (docs/model.md, section 5),
//! and the formulas users can call (section 8; Python: `dynosim.theory`).

mod mva;
mod retries;

pub use mva::{
    mva_closed, ClosedNetwork, Station, StationKind, MVA_MAX_CUSTOMERS, MVA_MAX_STATIONS,
    MVA_MAX_WORK,
};
pub use retries::{mm1_retry_states, RetryStates};

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

/// Mean response time of M/G/k processor sharing: Poisson arrivals at rate λ, any service
/// distribution with mean E[S], and `cores` = k servers shared so that each of n jobs present
/// is served at rate min(1, k/n) (k cores under an ideal scheduler).
///
/// For k = 1 this is the classical M/G/1-PS result E[T] = E[S]/(1 − ρ), ρ = λE[S]
/// (Kleinrock 1976, Queueing Systems Vol. 2, §4.4). For k >= 1 the queue is a symmetric queue
/// whose number in system is insensitive to the service distribution beyond its mean and
/// equals that of M/M/k (Cohen 1979; Kelly 1979, §3.3), so by Little's law E[T] = E[N]/λ,
/// with E[N] = a + C(k, a)·a/(k − a) for M/M/k (a = λE[S], C Erlang C):
///
/// E[T] = E[S] + C(k, a)·E[S]/(k − a).
///
/// None unless λ >= 0, E[S] > 0 (both finite), k >= 1 and a < k.
pub fn ps_mean_response(lambda: f64, mean_service: f64, cores: u32) -> Option<f64> {
    if !(lambda >= 0.0 && lambda.is_finite()) {
        return None;
    }
    Some(mean_service + mmc_mean_wait(cores, lambda * mean_service, mean_service)?)
}

/// Mean wait for a connection from a pool of `connections` = c connections, each held for an
/// exponential time with mean `mean_hold`, requested by a Poisson stream at rate λ, waiters
/// served first come first served: the M/M/c mean wait in queue (Erlang C, Kleinrock 1975),
/// W = C(c, a)·E[H]/(c − a) with a = λE[H]. A named convenience for [`mmc_mean_wait`].
/// None unless λ >= 0 (finite), E[H] > 0 (finite) and a < c.
pub fn pool_mean_wait(lambda: f64, mean_hold: f64, connections: u32) -> Option<f64> {
    if !(lambda >= 0.0 && lambda.is_finite()) {
        return None;
    }
    mmc_mean_wait(connections, lambda * mean_hold, mean_hold)
}

/// Upper bound on the throughput (requests/s) of CPU-bound work needing `cpu_per_request`
/// seconds of CPU each, run by `processes` processes of `threads_per_process` threads on
/// `cores` cores. A thread computes on at most one core at a time, and with an interpreter
/// lock (`lock`: CPython's GIL, Ruby's GVL) so does a whole process, whatever its threads:
///
/// X ≤ min(processes, cores) / cpu                      with a lock,
/// X ≤ min(processes × threads_per_process, cores) / cpu without one.
///
/// It is the utilisation law (X·D ≤ servers, Denning & Buzen 1978) with the parallel
/// servers counted as the lock allows. None unless cpu > 0 (finite) and every count >= 1.
pub fn cpu_bound_throughput(
    cpu_per_request: f64,
    processes: u32,
    threads_per_process: u32,
    cores: u32,
    lock: bool,
) -> Option<f64> {
    let counts = processes >= 1 && threads_per_process >= 1 && cores >= 1;
    if !(cpu_per_request > 0.0 && cpu_per_request.is_finite() && counts) {
        return None;
    }
    let runnable = if lock {
        u64::from(processes)
    } else {
        u64::from(processes) * u64::from(threads_per_process)
    };
    Some(runnable.min(u64::from(cores)) as f64 / cpu_per_request)
}

/// Relative gap between the two sides of Little's law L = X·R (Little 1961): the mean number
/// in system against throughput × mean response time,
///
/// |L − X·R| / max(|L|, |X·R|),
///
/// 0 when both sides are 0, and NaN when an input is NaN or infinite. A run's figures should
/// give a gap within its sampling error; tests use it as a consistency check.
pub fn littles_law_gap(mean_in_system: f64, throughput: f64, mean_response: f64) -> f64 {
    let l = mean_in_system;
    let xr = throughput * mean_response;
    let scale = l.abs().max(xr.abs());
    if !(l.is_finite() && xr.is_finite()) {
        return f64::NAN;
    }
    if scale == 0.0 {
        return 0.0;
    }
    (l - xr).abs() / scale
}

/// Fraction of responses later than a deadline `deadline` in M/M/1 (FCFS, arrival rate λ,
/// service rate μ): the response time is exponential with rate μ − λ (Kleinrock 1975, §3.2),
///
/// P(R > T) = e^{−(μ − λ)T}.
///
/// With a router timeout whose work goes on (Heroku's H12: the dyno is not told), the queue is
/// the same as without the timeout, so this is also the fraction of requests that get the
/// timeout's error. None unless 0 <= λ < μ (finite) and T >= 0.
pub fn mm1_late_fraction(lambda: f64, mu: f64, deadline: f64) -> Option<f64> {
    let ok = lambda >= 0.0 && mu.is_finite() && lambda < mu && deadline >= 0.0;
    if !ok || deadline.is_nan() {
        return None;
    }
    Some((-(mu - lambda) * deadline).exp())
}

/// What Erlang-A (M/M/c+M: Poisson arrivals, c exponential servers, a FIFO queue whose waiting
/// customers abandon after an exponential patience) gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErlangA {
    /// P(an arrival waits): all c servers busy (PASTA).
    pub p_wait: f64,
    /// P(an arrival abandons before service) = θ·E[queue]/λ.
    pub p_abandon: f64,
    /// Mean time in queue over all arrivals (served or abandoning) = E[queue]/λ (Little).
    pub mean_wait: f64,
    /// Mean number waiting.
    pub mean_queue: f64,
}

/// Erlang-A (Palm 1943; Garnett, Mandelbaum & Reiman 2002): the birth–death chain on the
/// number in system n, born at rate λ and dying at rate min(n, c)·μ + max(n − c, 0)·θ, with
/// μ = 1/`mean_service` and θ = 1/`mean_patience`. Stable at any load when θ > 0. The
/// stationary distribution is summed until its terms fall below 1e-16 of the total. None
/// unless c >= 1, λ > 0, the means > 0 (finite).
pub fn erlang_a(
    servers: u32,
    lambda: f64,
    mean_service: f64,
    mean_patience: f64,
) -> Option<ErlangA> {
    let finite = |x: f64| x > 0.0 && x.is_finite();
    if !(servers >= 1 && finite(lambda) && finite(mean_service) && finite(mean_patience)) {
        return None;
    }
    let (mu, theta, c) = (1.0 / mean_service, 1.0 / mean_patience, servers as usize);
    // Unnormalised π_n, with π_0 = 1, scaled down whenever it grows large.
    let mut term = 1.0f64;
    let (mut total, mut waiting, mut queue) = (1.0f64, 0.0f64, 0.0f64);
    let mut n = 0usize;
    loop {
        n += 1;
        let death = n.min(c) as f64 * mu + n.saturating_sub(c) as f64 * theta;
        term *= lambda / death;
        total += term;
        if n >= c {
            waiting += term;
            queue += (n - c) as f64 * term;
        }
        if term > 1e250 {
            total /= 1e250;
            waiting /= 1e250;
            queue /= 1e250;
            term /= 1e250;
        }
        // Past the mode (births below deaths from here on) and negligible: done.
        if n > c && lambda < death && term < 1e-16 * total {
            break;
        }
        if n > 100_000_000 {
            return None;
        }
    }
    let mean_queue = queue / total;
    Some(ErlangA {
        p_wait: waiting / total,
        p_abandon: theta * mean_queue / lambda,
        mean_wait: mean_queue / lambda,
        mean_queue,
    })
}

/// Blocking probability of M/M/c/K (c servers, room for K requests in all, K >= c): an
/// arrival finding K in the system is turned away (a backlog cap; Heroku's H11 and a full
/// listen backlog are caps of this kind). Birth–death: π_n ∝ a^n/n! for n <= c and
/// π_c·(a/c)^{n−c} above, a = λE[S]; P(block) = π_K (PASTA). K = c is Erlang B. Any load.
/// None unless c >= 1, K >= c, λ >= 0 and E[S] > 0 (finite).
pub fn mmck_blocking(servers: u32, capacity: u32, lambda: f64, mean_service: f64) -> Option<f64> {
    let ok = servers >= 1 && capacity >= servers && lambda >= 0.0 && lambda.is_finite();
    if !(ok && mean_service > 0.0 && mean_service.is_finite()) {
        return None;
    }
    let a = lambda * mean_service;
    if a == 0.0 {
        return Some(0.0);
    }
    let c = f64::from(servers);
    // π_n / π_K computed backwards from the top, so that no term overflows: each step down
    // divides by the birth–death ratio of that step.
    let mut term = 1.0f64;
    let mut total = 1.0f64;
    for n in (1..=capacity).rev() {
        // π_{n−1} = π_n · (death rate at n) / λ, in units of E[S]: min(n, c) / a.
        term *= f64::from(n).min(c) / a;
        total += term;
        if !total.is_finite() {
            return Some(0.0);
        }
    }
    Some(1.0 / total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_a_tends_to_erlang_c_with_patient_customers() {
        // θ → 0: nobody abandons, the M/M/c queue.
        let (c, lambda, es) = (4u32, 3.0, 1.0);
        let a = erlang_a(c, lambda, es, 1e9).unwrap();
        assert!((a.p_wait - erlang_c(c, lambda * es).unwrap()).abs() < 1e-6);
        assert!((a.mean_wait - mmc_mean_wait(c, lambda * es, es).unwrap()).abs() < 1e-5);
        assert!(a.p_abandon < 1e-8);
    }

    #[test]
    fn erlang_a_with_patience_equal_to_service_is_an_infinite_server() {
        // θ = μ: everyone leaves at rate μ, waiting or served, so N ~ Poisson(a) (M/M/∞).
        let (c, lambda, es) = (3u32, 5.0, 1.0);
        let got = erlang_a(c, lambda, es, es).unwrap();
        let a: f64 = lambda * es;
        let mut p = (-a).exp();
        let (mut at_least_c, mut queue) = (0.0, 0.0);
        for n in 0..200u32 {
            if n >= c {
                at_least_c += p;
                queue += f64::from(n - c) * p;
            }
            p *= a / f64::from(n + 1);
        }
        assert!((got.p_wait - at_least_c).abs() < 1e-12, "{got:?}");
        assert!((got.mean_queue - queue).abs() < 1e-10, "{got:?}");
        assert!((got.p_abandon - queue / a).abs() < 1e-10);
        // Stable beyond c servers' capacity too.
        assert!(erlang_a(2, 10.0, 1.0, 0.5).unwrap().p_abandon > 0.7);
    }

    #[test]
    fn mmck_blocking_is_erlang_b_at_k_equal_c_and_vanishes_with_room() {
        let (c, a) = (5u32, 4.0f64);
        let mut b = 1.0;
        for k in 1..=c {
            b = a * b / (f64::from(k) + a * b);
        }
        assert!((mmck_blocking(c, c, a, 1.0).unwrap() - b).abs() < 1e-12);
        // M/M/1/K: (1 − ρ)ρ^K / (1 − ρ^{K+1}).
        let (rho, k) = (0.8f64, 10u32);
        let exact = (1.0 - rho) * rho.powi(k as i32) / (1.0 - rho.powi(k as i32 + 1));
        assert!((mmck_blocking(1, k, rho, 1.0).unwrap() - exact).abs() < 1e-12);
        assert!(mmck_blocking(4, 200, 3.0, 1.0).unwrap() < 1e-20);
        // Overloaded: at a = 2c, about 1 − c/a of arrivals are turned away as K grows.
        assert!((mmck_blocking(2, 2000, 4.0, 1.0).unwrap() - 0.5).abs() < 1e-9);
        assert!(mmck_blocking(2, 1, 1.0, 1.0).is_none());
    }

    #[test]
    fn mm1_late_fraction_is_the_exponential_tail() {
        assert!((mm1_late_fraction(0.5, 1.0, 2.0).unwrap() - (-1.0f64).exp()).abs() < 1e-15);
        assert_eq!(mm1_late_fraction(0.5, 1.0, 0.0), Some(1.0));
        assert!(mm1_late_fraction(1.0, 1.0, 1.0).is_none());
    }

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

    /// Mean number in system of M/M/k from its birth–death chain, summed directly (no Erlang C):
    /// π_n ∝ aⁿ/n! for n <= k and a^k/k!·(a/k)^(n−k) beyond, truncated where the terms vanish.
    fn mmk_mean_number(k: u32, a: f64) -> f64 {
        let (mut weight, mut total, mut mean) = (1.0f64, 0.0, 0.0);
        for n in 0..200_000u32 {
            if n > 0 {
                weight *= a / f64::from(n.min(k));
            }
            total += weight;
            mean += f64::from(n) * weight;
            if n > k && weight < 1e-18 * total {
                break;
            }
        }
        mean / total
    }

    #[test]
    fn processor_sharing_is_mm1_for_one_core_and_mmk_for_several() {
        // One core: E[S]/(1 − ρ), whatever the distribution (only the mean enters).
        for (lambda, s) in [(0.5, 1.0), (9.0, 0.1), (0.0, 2.0)] {
            let t = ps_mean_response(lambda, s, 1).unwrap();
            assert!(
                (t - s / (1.0 - lambda * s)).abs() < 1e-12,
                "{lambda} {s}: {t}"
            );
        }
        // Several cores: E[N] of M/M/k from the chain, then Little's law.
        for (lambda, s, k) in [
            (3.0, 1.0, 4u32),
            (15.0, 0.05, 1),
            (70.0, 1.0, 80),
            (1.9, 1.0, 2),
        ] {
            let expected = mmk_mean_number(k, lambda * s) / lambda;
            let t = ps_mean_response(lambda, s, k).unwrap();
            assert!(
                (t - expected).abs() < 1e-9 * expected,
                "k {k}: {t} vs {expected}"
            );
        }
        // M/M/2 in closed form: E[T] = E[S]/(1 − ρ²).
        let t = ps_mean_response(1.5, 1.0, 2).unwrap();
        assert!((t - 1.0 / (1.0 - 0.75f64.powi(2))).abs() < 1e-12);
        // Light load: no sharing, E[T] = E[S]. More cores never hurt at the same load.
        assert!((ps_mean_response(1e-9, 0.3, 4).unwrap() - 0.3).abs() < 1e-9);
        assert!(ps_mean_response(3.0, 1.0, 8) < ps_mean_response(3.0, 1.0, 4));
        assert_eq!(ps_mean_response(1.0, 1.0, 1), None);
        assert_eq!(ps_mean_response(1.0, 1.0, 0), None);
        assert_eq!(ps_mean_response(-1.0, 1.0, 2), None);
        assert_eq!(ps_mean_response(f64::INFINITY, 1.0, 2), None);
        assert_eq!(ps_mean_response(1.0, 0.0, 2), None);
        assert_eq!(ps_mean_response(1.0, f64::NAN, 2), None);
    }

    #[test]
    fn pool_wait_is_mmc_wait() {
        // c = 1: M/M/1, ρE[H]/(1 − ρ). c = 2: ρ²E[H]/(1 − ρ²), ρ = a/2.
        let w1 = pool_mean_wait(8.0, 0.1, 1).unwrap();
        assert!((w1 - 0.8 * 0.1 / 0.2).abs() < 1e-12, "{w1}");
        let w2 = pool_mean_wait(15.0, 0.1, 2).unwrap();
        assert!(
            (w2 - 0.75f64.powi(2) * 0.1 / (1.0 - 0.75f64.powi(2))).abs() < 1e-12,
            "{w2}"
        );
        // The Erlang C sum of the textbook for a larger pool.
        let (c, a, h) = (10u32, 8.5f64, 0.02);
        let mut term = 1.0f64;
        let mut head = 0.0;
        for k in 0..c {
            head += term;
            term *= a / f64::from(k + 1);
        }
        let tail = term / (1.0 - a / f64::from(c));
        let expected = tail / (head + tail) * h / (f64::from(c) - a);
        let w = pool_mean_wait(a / h, h, c).unwrap();
        assert!((w - expected).abs() < 1e-12 * expected, "{w} vs {expected}");
        assert_eq!(pool_mean_wait(0.0, 1.0, 3), Some(0.0));
        assert_eq!(pool_mean_wait(30.0, 0.1, 3), None);
        assert_eq!(pool_mean_wait(1.0, 0.1, 0), None);
        assert_eq!(pool_mean_wait(-1.0, 0.1, 3), None);
        assert_eq!(pool_mean_wait(1.0, -0.1, 3), None);
    }

    #[test]
    fn cpu_bound_throughput_counts_what_can_run_at_once() {
        // 4 processes × 8 threads on 16 cores, 50 ms of CPU per request.
        let locked = cpu_bound_throughput(0.05, 4, 8, 16, true).unwrap();
        let free = cpu_bound_throughput(0.05, 4, 8, 16, false).unwrap();
        assert!((locked - 80.0).abs() < 1e-9, "{locked}");
        assert!((free - 320.0).abs() < 1e-9, "{free}");
        // Enough processes: the cores bind, lock or not.
        assert_eq!(cpu_bound_throughput(0.1, 32, 1, 8, true), Some(80.0));
        assert_eq!(cpu_bound_throughput(0.1, 32, 4, 8, false), Some(80.0));
        // One process: its threads help only without the lock.
        assert_eq!(cpu_bound_throughput(0.5, 1, 16, 8, true), Some(2.0));
        assert_eq!(cpu_bound_throughput(0.5, 1, 16, 8, false), Some(16.0));
        // No overflow in processes × threads.
        let big = cpu_bound_throughput(1.0, u32::MAX, u32::MAX, u32::MAX, false).unwrap();
        assert_eq!(big, f64::from(u32::MAX));
        assert_eq!(cpu_bound_throughput(0.0, 1, 1, 1, true), None);
        assert_eq!(cpu_bound_throughput(f64::NAN, 1, 1, 1, true), None);
        assert_eq!(cpu_bound_throughput(f64::INFINITY, 1, 1, 1, true), None);
        assert_eq!(cpu_bound_throughput(1.0, 0, 1, 1, true), None);
        assert_eq!(cpu_bound_throughput(1.0, 1, 0, 1, false), None);
        assert_eq!(cpu_bound_throughput(1.0, 1, 1, 0, false), None);
    }

    #[test]
    fn littles_law_gap_is_relative_and_symmetric() {
        assert_eq!(littles_law_gap(10.0, 5.0, 2.0), 0.0);
        assert!((littles_law_gap(10.0, 5.0, 2.2) - 1.0 / 11.0).abs() < 1e-15);
        assert!((littles_law_gap(11.0, 5.0, 2.0) - 1.0 / 11.0).abs() < 1e-15);
        assert_eq!(littles_law_gap(0.0, 0.0, 3.0), 0.0);
        assert_eq!(littles_law_gap(0.0, 0.0, 0.0), 0.0);
        assert_eq!(littles_law_gap(1.0, 0.0, 0.0), 1.0);
        assert_eq!(littles_law_gap(0.0, 2.0, 1.0), 1.0);
        assert!(littles_law_gap(f64::NAN, 1.0, 1.0).is_nan());
        assert!(littles_law_gap(1.0, f64::INFINITY, 1.0).is_nan());
    }
}
