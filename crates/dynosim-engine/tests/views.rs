//! Late load information (`router.view`, docs/model.md) against theory: power of two choices
//! on a periodically refreshed board, and on individually refreshed entries, against
//! Mitzenmacher's mean-field equations ("How useful is old information?", IEEE TPDS 11(1),
//! 2000), solved numerically here; the herd effect of least connections on a late board; the
//! limits of each update; and the view's invariants (a policy that reads nothing is left
//! alone, dynos coming and going leave and join the board, a run ends with its last request).
//!
//! Tolerances are k standard errors over replications (see `common/mod.rs`); a finite fleet's
//! known bias against an n → ∞ limit enters as a documented allowance. Time is in units of
//! the mean service time (E[S] = 1 s), so that an interval in seconds is Mitzenmacher's T.
//! Run with `--nocapture` to see each estimate beside its theory.

mod common;

use common::{assert_matches, build, k_for, run_ok, scenario_json, Measured};
use dynosim_engine::theory::power_of_d_mean_time;
use dynosim_engine::{never_interrupted, run_replication, RunReport, Scenario};
use serde_json::{json, Value};

/// Per-dyno load of every test here: Mitzenmacher's λ = 0.9.
const LAMBDA: f64 = 0.9;

/// Queue lengths the mean-field solvers track (0 to LEVELS − 1); they assert that the mass
/// reaching the top is negligible.
const LEVELS: usize = 120;

// ---------------------------------------------------------------------------------------------
// The mean-field equations.

/// The supermarket model's fixed point for d choices: the fraction of servers with exactly
/// i requests, from the tails sᵢ = λ^((dⁱ − 1)/(d − 1)).
fn supermarket(lambda: f64, d: u32) -> Vec<f64> {
    let tail = |i: usize| -> f64 {
        let d = f64::from(d);
        lambda.powf((d.powi(i as i32) - 1.0) / (d - 1.0))
    };
    (0..LEVELS).map(|i| tail(i) - tail(i + 1)).collect()
}

/// The arrival rate, per server, at a server whose board entry is class j, when arrivals
/// sample d servers with replacement and join the smallest board entry (ties at random):
/// class j receives λ·p_j with p_j = B_j^d − B_{j+1}^d (B_j: the share of servers whose
/// entry is at least j), spread over its b_j servers. p_j / b_j = Σ_k B_j^k B_{j+1}^(d−1−k),
/// which needs no division by a class that may be empty.
fn class_rates(b: &[f64], lambda: f64, d: u32) -> Vec<f64> {
    let mut tails = vec![0.0; b.len() + 1];
    for j in (0..b.len()).rev() {
        tails[j] = tails[j + 1] + b[j];
    }
    (0..b.len())
        .map(|j| {
            let (hi, lo) = (tails[j].min(1.0), tails[j + 1].min(1.0));
            lambda
                * (0..d)
                    .map(|k| hi.powi(k as i32) * lo.powi((d - 1 - k) as i32))
                    .sum::<f64>()
        })
        .collect()
}

/// d/dt of one board class's distribution over true lengths `v` under arrivals at rate `a`
/// per server and exponential service at rate 1 (a birth-death chain, with no arrivals at
/// the top level), and of its `Σ i·v`.
fn class_flow(v: &[f64], a: f64, dv: &mut [f64]) -> f64 {
    let top = v.len() - 1;
    let mut number = 0.0;
    for i in 0..v.len() {
        let arrive_in = if i > 0 { a * v[i - 1] } else { 0.0 };
        let arrive_out = if i < top { a * v[i] } else { 0.0 };
        let serve_in = if i < top { v[i + 1] } else { 0.0 };
        let serve_out = if i > 0 { v[i] } else { 0.0 };
        dv[i] = arrive_in - arrive_out + serve_in - serve_out;
        number += i as f64 * v[i];
    }
    number
}

/// Mean time in system (in units of E[S]) of power of d choices with replacement on a board
/// refreshed every `t`, exponential service, Poisson arrivals at λ per server, n → ∞:
/// Mitzenmacher's periodic-update model, as BALANCERS.md §A.2 states it. x[j][i], the share of
/// servers whose board shows j and whose true length is i, starts each phase at sᵢ·1{i = j};
/// within the phase the classes b_j are constant, so each class evolves alone, a birth-death
/// chain at its arrival rate λ·p_j/b_j:
///
///     dx[j][i]/dt = λ p_j/b_j (x[j][i−1] − x[j][i]) + x[j][i+1] − x[j][i]·1{i ≥ 1}
///
/// Phases are iterated (RK4, steps of at most 0.01) from the supermarket fixed point to the
/// periodic orbit; the answer is the phase-averaged Σ i·x over λ (Little's law; arrivals are
/// Poisson, so they see the phase average).
fn periodic_mean_time(lambda: f64, d: u32, t: f64) -> f64 {
    let steps = (t / 0.01).ceil().max(1.0) as usize;
    let h = t / steps as f64;
    let mut s = supermarket(lambda, d);
    let mut last = f64::NAN;
    let (mut v, mut k1, mut k2, mut k3, mut k4, mut w) = (
        vec![0.0; LEVELS],
        vec![0.0; LEVELS],
        vec![0.0; LEVELS],
        vec![0.0; LEVELS],
        vec![0.0; LEVELS],
        vec![0.0; LEVELS],
    );
    for phase in 0..2_000_000 {
        let rates = class_rates(&s, lambda, d);
        let mut next = vec![0.0; LEVELS];
        let mut area = 0.0;
        for j in 0..LEVELS {
            if s[j] < 1e-18 {
                // A class this small changes nothing at the precision asked for: its servers
                // stay where they are.
                next[j] += s[j];
                continue;
            }
            v.fill(0.0);
            v[j] = s[j];
            for _ in 0..steps {
                let n1 = class_flow(&v, rates[j], &mut k1);
                for i in 0..LEVELS {
                    w[i] = v[i] + 0.5 * h * k1[i];
                }
                let n2 = class_flow(&w, rates[j], &mut k2);
                for i in 0..LEVELS {
                    w[i] = v[i] + 0.5 * h * k2[i];
                }
                let n3 = class_flow(&w, rates[j], &mut k3);
                for i in 0..LEVELS {
                    w[i] = v[i] + h * k3[i];
                }
                let n4 = class_flow(&w, rates[j], &mut k4);
                for i in 0..LEVELS {
                    v[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]);
                }
                area += h / 6.0 * (n1 + 2.0 * n2 + 2.0 * n3 + n4);
            }
            for i in 0..LEVELS {
                next[i] += v[i];
            }
        }
        let mean = area / t / lambda;
        let change = next
            .iter()
            .zip(&s)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        s = next;
        if phase > 2 && change < 1e-12 && (mean - last).abs() < 1e-10 * mean {
            assert!(
                s[LEVELS - 1] < 1e-12,
                "periodic T = {t}: mass at the top level"
            );
            let total: f64 = s.iter().sum();
            assert!((total - 1.0).abs() < 1e-9, "periodic T = {t}: mass {total}");
            return mean;
        }
        last = mean;
    }
    panic!("periodic T = {t}: no periodic orbit");
}

/// Mean time in system of power of d choices with replacement when each server refreshes its
/// own board entry at rate 1/t (Mitzenmacher's individual updates), n → ∞. The state is
/// x[j][i] as above, now stationary: a server of class j and length i is refreshed to class i
/// at rate 1/t, so
///
///     0 = λ p_j/b_j (x[j][i−1] − x[j][i]) + x[j][i+1] − x[j][i]·1{i ≥ 1} − x[j][i]/t
///         + 1{i = j}·sᵢ/t,                      sᵢ = Σ_j x[j][i].
///
/// Given the class rates and s, class j's row solves a tridiagonal system (a birth-death
/// chain fed at level j and drained at rate 1/t); the rates and s then come from the rows
/// again, a damped fixed-point iteration from the supermarket fixed point.
fn individual_mean_time(lambda: f64, d: u32, t: f64) -> f64 {
    let mut x = vec![vec![0.0; LEVELS]; LEVELS];
    for (i, p) in supermarket(lambda, d).into_iter().enumerate() {
        x[i][i] = p;
    }
    let top = LEVELS - 1;
    for _ in 0..200_000 {
        let b: Vec<f64> = x.iter().map(|row| row.iter().sum()).collect();
        let s: Vec<f64> = (0..LEVELS)
            .map(|i| x.iter().map(|row| row[i]).sum())
            .collect();
        let rates = class_rates(&b, lambda, d);
        let mut change: f64 = 0.0;
        for j in 0..LEVELS {
            let a = rates[j];
            // Row i: a·y[i−1] − (a·1{i<top} + 1{i≥1} + 1/t)·y[i] + y[i+1] = −1{i=j}·s_j/t,
            // by the Thomas algorithm (diagonally dominant: the 1/t).
            let lower = |i: usize| if i > 0 { a } else { 0.0 };
            let diag = |i: usize| {
                -((if i < top { a } else { 0.0 }) + (if i > 0 { 1.0 } else { 0.0 }) + 1.0 / t)
            };
            let upper = |i: usize| if i < top { 1.0 } else { 0.0 };
            let rhs = |i: usize| if i == j { -s[j] / t } else { 0.0 };
            let mut c = vec![0.0; LEVELS];
            let mut r = vec![0.0; LEVELS];
            c[0] = upper(0) / diag(0);
            r[0] = rhs(0) / diag(0);
            for i in 1..LEVELS {
                let m = diag(i) - lower(i) * c[i - 1];
                c[i] = upper(i) / m;
                r[i] = (rhs(i) - lower(i) * r[i - 1]) / m;
            }
            let mut y = vec![0.0; LEVELS];
            y[top] = r[top];
            for i in (0..top).rev() {
                y[i] = r[i] - c[i] * y[i + 1];
            }
            for i in 0..LEVELS {
                let damped = 0.5 * x[j][i] + 0.5 * y[i];
                change = change.max((damped - x[j][i]).abs());
                x[j][i] = damped;
            }
        }
        if change < 1e-14 {
            let s: Vec<f64> = (0..LEVELS)
                .map(|i| x.iter().map(|row| row[i]).sum())
                .collect();
            assert!(s[top] < 1e-12, "individual T = {t}: mass at the top level");
            let total: f64 = s.iter().sum();
            assert!(
                (total - 1.0).abs() < 1e-9,
                "individual T = {t}: mass {total}"
            );
            return s.iter().enumerate().map(|(i, p)| i as f64 * p).sum::<f64>() / lambda;
        }
    }
    panic!("individual T = {t}: no fixed point");
}

/// The solvers reproduce the supermarket model as the information becomes fresh: each
/// model's error is of order T, so (2·T(0.01) − T(0.02)) removes it, to within 10⁻³ of the
/// limit. And old information costs: both grow
/// with T, and a periodic board is worse than individual refreshes of the same mean age
/// (BALANCERS.md §A.2 gives 2.6175 for the periodic ODE at small T).
#[test]
fn the_mean_field_solvers_find_the_supermarket_model_as_t_goes_to_zero() {
    let limit = power_of_d_mean_time(LAMBDA, 2).expect("λ < 1");
    let (fine, coarse) = (
        periodic_mean_time(LAMBDA, 2, 0.01),
        periodic_mean_time(LAMBDA, 2, 0.02),
    );
    let extrapolated = 2.0 * fine - coarse;
    println!("periodic T = 0.01: {fine:.6}, T = 0.02: {coarse:.6}, extrapolated {extrapolated:.6}, supermarket {limit:.6}");
    assert!(fine > limit && coarse > fine, "staler is worse");
    assert!(
        (extrapolated - limit).abs() < 1e-3 * limit,
        "periodic, T → 0: {extrapolated} against {limit}"
    );
    let (fine, coarse) = (
        individual_mean_time(LAMBDA, 2, 0.01),
        individual_mean_time(LAMBDA, 2, 0.02),
    );
    let extrapolated = 2.0 * fine - coarse;
    println!(
        "individual T = 0.01: {fine:.6}, T = 0.02: {coarse:.6}, extrapolated {extrapolated:.6}"
    );
    assert!(fine > limit && coarse > fine, "staler is worse");
    assert!(
        (extrapolated - limit).abs() < 1e-3 * limit,
        "individual, T → 0: {extrapolated} against {limit}"
    );
    let mut previous = (limit, limit);
    for t in [0.5, 2.0, 4.0] {
        let (p, i) = (
            periodic_mean_time(LAMBDA, 2, t),
            individual_mean_time(LAMBDA, 2, t),
        );
        println!("T = {t}: periodic {p:.6}, individual {i:.6}");
        assert!(p > previous.0 && i > previous.1, "T = {t}: staler is worse");
        // An individually refreshed entry is T old on average (the age at a random time of
        // a Poisson process of rate 1/T), a periodic board's entries T/2.
        assert!(i > p, "T = {t}: individual entries are older on average");
        previous = (p, i);
    }
}

// ---------------------------------------------------------------------------------------------
// Simulations.

/// `n` single-slot dynos at λ = 0.9 each, exponential service of mean 1 s, the given router
/// table (one router unless it says otherwise).
fn fleet(n: u32, router: Value, run: (f64, f64, u32, u64)) -> Scenario {
    fleet_at(LAMBDA, n, router, run)
}

/// [`fleet`] at a per-dyno load `lambda`.
fn fleet_at(
    lambda: f64,
    n: u32,
    router: Value,
    (duration, warmup, replications, seed): (f64, f64, u32, u64),
) -> Scenario {
    let s = build(&scenario_json(
        lambda * f64::from(n),
        json!({"distribution": "exponential", "mean": 1.0}),
        n,
        1,
        router,
        (duration, warmup, replications, seed),
    ));
    assert!((s.offered_load() - lambda).abs() < 1e-12);
    s
}

fn mean_response(report: &RunReport) -> Measured {
    // E[S] = 1: the response time is already in units of E[S].
    Measured::over_replications(report, |r| r.response.mean)
}

fn power_of_two(view: Value) -> Value {
    json!({"policy": "power_of_d", "d": 2, "distinct": false, "view": view})
}

/// A simulated mean response time of power of two against its n → ∞ mean-field `theory`.
/// A finite fleet does worse than the limit by a term of order 1/n (Gast and Van Houdt, "A
/// refined mean field approximation", 2017), whose size under late information nothing here
/// predicts. So the comparison is the Richardson extrapolation from n = 100 and n = 1000,
/// (10·T(1000) − T(100))/9, which removes the 1/n term whatever its size; what is left is of
/// order 1/n². The fleet of 100 must also do no better than the limit. About 3.6 million
/// requests each.
fn check_against_the_mean_field(label: &str, view: Value, theory: f64, seed: u64) {
    let large = mean_response(&run_ok(&fleet(
        1000,
        power_of_two(view.clone()),
        (200.0, 50.0, 20, seed),
    )));
    let small = mean_response(&run_ok(&fleet(
        100,
        power_of_two(view),
        (2000.0, 50.0, 20, seed + 1),
    )));
    println!(
        "{label}: n = 1000 {:.5} ± {:.5}, n = 100 {:.5} ± {:.5}, mean field {theory:.5}",
        large.mean, large.std_error, small.mean, small.std_error
    );
    let extrapolated = Measured {
        mean: (10.0 * large.mean - small.mean) / 9.0,
        std_error: (100.0 * large.std_error.powi(2) + small.std_error.powi(2)).sqrt() / 9.0,
        df: large.df.min(small.df),
    };
    assert_matches(
        &format!("{label}, Richardson-extrapolated from n = 100 and 1000: T / E[S] vs mean field"),
        extrapolated,
        theory,
        0.02,
    );
    let k = k_for(small.df);
    assert!(
        small.mean - theory > -k * small.std_error,
        "{label}: n = 100 beats the n → ∞ limit: {small:?} against {theory}"
    );
}

/// Power of two (with replacement) on a board refreshed every T, against the mean-field
/// periodic orbit.
#[test]
fn power_of_two_on_a_periodic_board_follows_the_mean_field() {
    for (t, seed) in [(0.5, 401), (2.0, 403), (5.0, 405)] {
        check_against_the_mean_field(
            &format!("power of 2 on a periodic board, T = {t}"),
            json!({"update": "periodic", "interval": t}),
            periodic_mean_time(LAMBDA, 2, t),
            seed,
        );
    }
}

/// Power of two (with replacement) with entries refreshed individually at mean intervals T,
/// against the mean-field fixed point.
#[test]
fn power_of_two_with_individual_refreshes_follows_the_mean_field() {
    for (t, seed) in [(1.0, 411), (4.0, 413)] {
        check_against_the_mean_field(
            &format!("power of 2, individual refreshes, T = {t}"),
            json!({"update": "individual", "interval": t}),
            individual_mean_time(LAMBDA, 2, t),
            seed,
        );
    }
}

/// The herd effect: least connections on a periodic board sends every request of a phase to
/// the dynos the board shows least loaded. With a long interval (T = 10) that is worse than
/// random routing, whose mean response time is M/M/1's E[S]/(1 − ρ) = 10 E[S]
/// (Mitzenmacher's mean field puts it near twice that); with a short one (T = 0.5) it is
/// still better. Each by more than k standard errors (a difference of at least 10% is asked
/// for on top, so that the test says something even with a tiny standard error).
#[test]
fn least_connections_on_a_late_board_herds_worse_than_random() {
    let random = 1.0 / (1.0 - LAMBDA);
    let run = |t: f64, seed: u64| {
        let view = json!({"update": "periodic", "interval": t});
        let s = fleet(
            200,
            json!({"policy": "least_connections", "view": view}),
            (1000.0, 200.0, 10, seed),
        );
        mean_response(&run_ok(&s))
    };
    let long = run(10.0, 421);
    let k = k_for(long.df);
    println!(
        "least connections, periodic T = 10, n = 200: {:.4} ± {:.4} vs random {random:.4}",
        long.mean, long.std_error
    );
    assert!(
        long.mean - k * long.std_error > 1.1 * random,
        "no herd effect at T = 10: {long:?} against random's {random}"
    );
    let short = run(0.5, 422);
    println!(
        "least connections, periodic T = 0.5, n = 200: {:.4} ± {:.4} vs random {random:.4}",
        short.mean, short.std_error
    );
    assert!(
        short.mean + k * short.std_error < random / 1.1,
        "T = 0.5 no better than random: {short:?} against random's {random}"
    );
}

/// A board that is never refreshed within the run (periodic or delayed with an interval
/// longer than it) shows every dyno idle: least connections and power of two then pick
/// among all dynos uniformly, which is random routing, M/M/1 per dyno: mean response
/// E[S]/(1 − ρ). At ρ = 0.5, where an M/M/1's time average settles fast enough for a 1%
/// comparison.
#[test]
fn a_board_that_never_changes_is_random_routing() {
    let rho = 0.5;
    let theory = 1.0 / (1.0 - rho);
    for (i, (policy, update)) in [("least_connections", "periodic"), ("power_of_d", "delayed")]
        .into_iter()
        .enumerate()
    {
        let view = json!({"update": update, "interval": "1d"});
        let s = fleet_at(
            rho,
            100,
            json!({"policy": policy, "view": view}),
            (2000.0, 200.0, 20, 431 + i as u64),
        );
        assert_matches(
            &format!("{policy} on a {update} board never refreshed: T / E[S] vs M/M/1"),
            mean_response(&run_ok(&s)),
            theory,
            0.02,
        );
    }
}

/// As the delay goes to 0 a delayed board is the exact loads: with one router (whose own
/// counts are then every dyno's load), power of two on a board 1 µs late and on exact loads,
/// same seeds, differ by less than k standard errors of their paired difference. The bias of
/// 1 µs: a sampled dyno's load changed in the last µs with probability about (λ + 1)·10⁻⁶, so
/// under 10⁻⁵ of the decisions can differ, far below the standard error.
#[test]
fn a_delayed_board_tends_to_the_exact_loads() {
    let exact = run_ok(&fleet(
        100,
        power_of_two(json!({"update": "exact"})),
        (1000.0, 100.0, 20, 441),
    ));
    let late = run_ok(&fleet(
        100,
        power_of_two(json!({"update": "delayed", "interval": "1us"})),
        (1000.0, 100.0, 20, 441),
    ));
    let differences: Vec<f64> = late
        .per_replication
        .iter()
        .zip(&exact.per_replication)
        .map(|(l, e)| l.response.mean - e.response.mean)
        .collect();
    let d = Measured::of(&differences);
    let k = k_for(d.df);
    let level = mean_response(&exact).mean;
    println!(
        "delayed 1 µs − exact, power of 2, n = 100: {:+.6} ± {:.6} (k·SE {:.3}% of {level:.4})",
        d.mean,
        d.std_error,
        100.0 * k * d.std_error / level
    );
    assert!(d.mean.abs() <= k * d.std_error, "{d:?}");
    assert!(
        k * d.std_error < 0.01 * level,
        "the comparison could not catch a 1% difference: {d:?}"
    );
}

/// A policy that reads no load is left alone by the view: random and round robin give the
/// same figures, to the bit, with a late board as without (the direct engine runs them).
#[test]
fn a_policy_that_reads_nothing_ignores_the_view() {
    for policy in ["random", "round_robin"] {
        let reports: Vec<String> = [
            json!({"update": "exact"}),
            json!({"update": "periodic", "interval": "2s"}),
        ]
        .into_iter()
        .map(|view| {
            let s = fleet(
                20,
                json!({"policy": policy, "view": view, "routers": 3}),
                (100.0, 10.0, 3, 451),
            );
            assert!(!s.reads_board());
            serde_json::to_string(&run_ok(&s).per_replication).expect("JSON")
        })
        .collect();
        assert_eq!(reports[0], reports[1], "{policy}");
    }
}

/// Same scenario and seed, same figures, under every update (the board's draws are its own).
#[test]
fn late_views_are_deterministic() {
    for update in ["periodic", "delayed", "individual"] {
        let s = fleet(
            30,
            json!({"policy": "least_connections", "routers": 2,
                   "view": {"update": update, "interval": "300ms"}}),
            (100.0, 10.0, 2, 461),
        );
        let a = serde_json::to_string(&run_ok(&s).per_replication).expect("JSON");
        let b = serde_json::to_string(&run_ok(&s).per_replication).expect("JSON");
        assert_eq!(a, b, "{update}");
    }
}

/// Dynos coming and going leave and join the board: under each update and each policy that
/// reads loads, an autoscaled fleet (a schedule from 3 to 8 dynos and back to 2) is routed
/// only to dynos up (the engine asserts it in debug builds), answers every request, and a
/// policy that holds (intelligent, first) finds the dynos the board shows free.
#[test]
fn an_autoscaled_fleet_joins_and_leaves_the_board() {
    for update in ["periodic", "delayed", "individual"] {
        for policy in [
            "least_connections",
            "power_of_d",
            "retry_if_busy",
            "intelligent",
            "first",
            "least_request",
            "bounded_hash",
        ] {
            // Keys for bounded_hash: a stream of their own, which the others do not read.
            let doc = json!({
                "arrivals": {"process": "poisson", "rate": 10.0, "keys": {"users": 100}},
                "service": {"distribution": "exponential", "mean": "100ms"},
                "fleet": {"dynos": 3, "boot_time": "5s"},
                "router": {"policy": policy, "routers": 2, "timeout": "off",
                           "view": {"update": update, "interval": "1s"}},
                "autoscale": {"rule": "schedule", "max": 8, "interval": "10s",
                              "schedule": [["0s", 3], ["100s", 8], ["200s", 2]]},
                "run": {"duration": "300s", "warmup": "0s", "replications": 2},
            });
            let s = build(&doc.to_string());
            for rep in 0..2 {
                let r = run_replication(&s, rep, &never_interrupted)
                    .unwrap_or_else(|e| panic!("{update} {policy}: {e}"));
                assert_eq!(r.error_counts.total, 0, "{update} {policy}");
                // 10 requests a second for 300 s: 3000 ± 55.
                assert!(r.requests > 2500, "{update} {policy}: {}", r.requests);
                let f = r.fleet.as_ref().expect("fleet figures");
                assert_eq!((f.size.min, f.size.max), (2.0, 8.0), "{update} {policy}");
            }
        }
    }
}

/// A closed loop measured whole ends with its last request under a late view: the board's
/// refreshes stop once nothing else is pending, and do not stretch the run.
#[test]
fn a_closed_loop_measured_whole_ends_with_its_last_request() {
    for update in ["periodic", "delayed", "individual"] {
        let doc = json!({
            "arrivals": {"process": "closed", "clients": 3, "requests": 200},
            "service": {"distribution": "exponential", "mean": "50ms"},
            "fleet": {"dynos": 4},
            "router": {"policy": "intelligent", "view": {"update": update, "interval": "10s"}},
            "run": {"duration": "60s", "warmup": "0s", "replications": 1},
        });
        let s = build(&doc.to_string());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(run_replication(&s, 0, &never_interrupted));
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("the run did not end: {doc}"))
            .expect("runs");
        let c = r.closed_loop.as_ref().expect("a closed loop");
        assert_eq!(c.completed, 200, "{update}");
        // 200 requests of 50 ms, 3 at a time, on 4 dynos: a few seconds of work, whatever
        // the board does.
        assert!(c.elapsed < 60.0, "{update}: elapsed {}", c.elapsed);
        // The run ends at its last answer (a time drawn from exponential services), not at a
        // periodic refresh (a multiple of 10 s) after it.
        if update == "periodic" {
            let phase = c.elapsed / 10.0;
            assert!(
                (phase - phase.round()).abs() > 1e-9,
                "the run ended on a refresh at {}",
                c.elapsed
            );
        }
    }
}
