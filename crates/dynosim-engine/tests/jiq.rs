//! Join-Idle-Queue (`router.policy = "jiq"`, issue #26) against the theory of Lu et al. (2011)
//! and Stolyar (2015, 2017); see /work/shared/docs/BALANCERS.md §A.1 and docs/model.md.
//!
//! Tolerances are k standard errors over replications (`common/mod.rs`), plus, for Lu's
//! formula, the documented error of his reduced-load approximation itself.

mod common;

use common::{
    assert_matches_with_allowance, build, grew_then_shrank, k_for, run_ok, scenario_json, Measured,
};
use dynosim_engine::RunReport;
use serde_json::json;

/// Lu et al.'s reduced-load approximation for JIQ-Random with r dynos per router: each
/// I-queue is an M/M/1 whose customers are idle dynos (mean length r(1 − ρ)), so the fraction
/// of requests sent to a listed dyno is ρ̂ = r(1 − ρ) / (1 + r(1 − ρ)).
fn lu_idle_hit_fraction(dynos_per_router: f64, rho: f64) -> f64 {
    let idle = dynos_per_router * (1.0 - rho);
    idle / (1.0 + idle)
}

/// JIQ over `dynos` single-slot dynos with exponential service (mean 1 s) at load `rho`,
/// `routers` routers; durations in units of E[S].
fn jiq(dynos: u32, routers: u32, rho: f64, router: serde_json::Value, seed: u64) -> RunReport {
    let mut r = router;
    r["policy"] = json!("jiq");
    r["routers"] = json!(routers);
    let lambda = rho * f64::from(dynos);
    run_ok(&build(&scenario_json(
        lambda,
        json!({"distribution": "exponential", "mean": 1.0}),
        dynos,
        1,
        r,
        (200.0, 50.0, 20, seed),
    )))
}

/// The documented error of Lu's approximation, as a fraction of ρ̂ (BALANCERS.md §A.1: "Check
/// ρ̂ within ~2–5%").
const LU_ERROR: f64 = 0.05;

fn idle_hits(report: &RunReport) -> Measured {
    Measured::over_replications(report, |r| {
        r.routing
            .as_ref()
            .expect("jiq reports its idle lists")
            .idle_hits
    })
}

fn waited(report: &RunReport) -> Measured {
    Measured::over_replications(report, |r| r.queued_fraction)
}

/// `a` is above `b` by more than k standard errors of the difference (independent runs).
fn assert_above(what: &str, a: Measured, b: Measured) {
    let k = k_for(a.df.min(b.df));
    let margin = k * (a.std_error.powi(2) + b.std_error.powi(2)).sqrt();
    println!(
        "{what}: {:.5} ± {:.5} > {:.5} ± {:.5} by {:.5} (margin {margin:.5})",
        a.mean,
        a.std_error,
        b.mean,
        b.std_error,
        a.mean - b.mean
    );
    assert!(
        a.mean - b.mean > margin,
        "{what}: {:.5} is not above {:.5} by more than {margin:.5}",
        a.mean,
        b.mean
    );
}

/// The fraction of requests sent from an I-queue against Lu's ρ̂, at n = 500 dynos with 10
/// and 50 routers (r = 50 and 10 dynos per router), ρ = 0.5 and 0.9. Lu's approximation
/// assumes that every idle dyno is listed and that a hit always finds its dyno idle (here a
/// listed dyno that got a request at random stays listed, busy, so the lists are a little
/// longer and the hits a little more frequent than it says). BALANCERS.md §A.1 gives its
/// error as 1-4% against simulation and 2-5% as the band for tests: the allowance is
/// [`LU_ERROR`] of ρ̂, on top of k standard errors; the resolution (8%) says a model off by
/// more than that fails.
#[test]
fn idle_hits_match_lus_reduced_load_approximation() {
    for (routers, rho, seed) in [(10, 0.5, 1), (10, 0.9, 2), (50, 0.5, 3), (50, 0.9, 4)] {
        let dynos = 500;
        let report = jiq(dynos, routers, rho, json!({}), seed);
        let r = f64::from(dynos) / f64::from(routers);
        let theory = lu_idle_hit_fraction(r, rho);
        assert_matches_with_allowance(
            &format!("jiq n={dynos} m={routers} rho={rho}: idle hits vs Lu's rho-hat"),
            idle_hits(&report),
            theory,
            LU_ERROR * theory,
            0.08,
        );
        let busy = Measured::over_replications(&report, |r| r.routing.as_ref().unwrap().busy_hits);
        println!("  of which found their dyno busy: {:.4}", busy.mean);
    }
}

/// Stolyar: with a fixed number of routers (m = 2) and ρ = 0.9, the probability that a
/// request waits falls towards 0 as the fleet grows. Checked at n = 50, 200 and 1000: each
/// strictly below the last by more than k standard errors of the difference, and the largest
/// fleet's below a twentieth of what random routing gives (ρ = 0.9, PASTA).
#[test]
fn waiting_vanishes_as_the_fleet_grows_with_fixed_routers() {
    let rho = 0.9;
    let runs: Vec<(u32, Measured)> = [(50, 11), (200, 12), (1000, 13)]
        .into_iter()
        .map(|(n, seed)| (n, waited(&jiq(n, 2, rho, json!({}), seed))))
        .collect();
    for pair in runs.windows(2) {
        let ((n0, p0), (n1, p1)) = (pair[0], pair[1]);
        assert_above(&format!("P(wait) at n={n0} > at n={n1}"), p0, p1);
    }
    let (n, largest) = runs[2];
    let k = k_for(largest.df);
    let bound = rho / 20.0;
    println!(
        "P(wait) at n={n}: {:.5} ± {:.5}, bound {bound}",
        largest.mean, largest.std_error
    );
    assert!(
        largest.mean + k * largest.std_error < bound,
        "P(wait) at n={n} is {:.5}, not below {bound}",
        largest.mean
    );
}

/// A report that reaches its router later leaves idle dynos unlisted meanwhile, so more
/// requests go at random and wait: with delays of 0, 0.2, 1 and 5 mean service times (n =
/// 100, m = 5, ρ = 0.7), the fraction of requests that wait grows, and the fraction sent from
/// an I-queue falls, each step by more than k standard errors of the difference.
#[test]
fn report_delay_makes_it_worse() {
    let runs: Vec<(f64, Measured, Measured)> = [(0.0, 21), (0.2, 22), (1.0, 23), (5.0, 24)]
        .into_iter()
        .map(|(delay, seed)| {
            let report = jiq(100, 5, 0.7, json!({"jiq_report_delay": delay}), seed);
            (delay, waited(&report), idle_hits(&report))
        })
        .collect();
    for pair in runs.windows(2) {
        let ((d0, w0, h0), (d1, w1, h1)) = (pair[0], pair[1]);
        assert_above(&format!("P(wait) with delay {d1} > with {d0}"), w1, w0);
        assert_above(&format!("idle hits with delay {d0} > with {d1}"), h0, h1);
    }
}

/// JIQ-SQ(2): reporting to the shorter of two routers' lists spreads the idle dynos more
/// evenly than JIQ-Random, so more requests find a listed dyno (Lu et al.: ρ̂ solves
/// r(1 − ρ) = Σ_{i≥1} ρ̂^((dⁱ − 1)/(d − 1)), above JIQ-Random's). Checked at n = 500, m = 50,
/// ρ = 0.9 (r = 10), against that fixed point with the same documented allowance.
#[test]
fn reporting_to_the_shortest_list_of_two_hits_more() {
    let (dynos, routers, rho) = (500, 50, 0.9);
    let random = idle_hits(&jiq(dynos, routers, rho, json!({}), 31));
    let sq2 = idle_hits(&jiq(dynos, routers, rho, json!({"jiq_report_d": 2}), 32));
    assert_above("idle hits, JIQ-SQ(2) > JIQ-Random", sq2, random);
    let r = f64::from(dynos) / f64::from(routers);
    let target = r * (1.0 - rho);
    // Σ_{i≥1} x^(2^i − 1) is increasing in x on [0, 1): bisection (the terms past 2^40 are
    // below 1e-300 for any x the bisection reaches).
    let sum = |x: f64| (1..40).map(|i| x.powf(2f64.powi(i) - 1.0)).sum::<f64>();
    let (mut lo, mut hi) = (0.0, 1.0 - 1e-12);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if sum(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let theory = 0.5 * (lo + hi);
    assert_matches_with_allowance(
        "jiq-sq(2) idle hits vs Lu's fixed point",
        sq2,
        theory,
        LU_ERROR * theory,
        0.08,
    );
}

/// With dynos coming and going (an autoscaler up, then down), a dyno going down leaves the
/// idle lists: no request is sent to a dyno that is not up (the engine asserts it on every
/// decision in debug builds), none fails for want of a dyno, and the lists keep working.
#[test]
fn idle_lists_follow_a_changing_fleet() {
    let doc = json!({
        "arrivals": {"process": "poisson",
                     "rate": [["0s", "20/s"], ["300s", "20/s"], ["300s", "120/s"], ["900s", "120/s"],
                              ["900s", "20/s"], ["1800s", "20/s"]]},
        "service": {"distribution": "exponential", "mean": "100ms"},
        "fleet": {"dynos": 4, "boot_time": "20s"},
        "router": {"policy": "jiq", "routers": 3, "jiq_report_delay": "10ms", "timeout": "off"},
        "autoscale": {"rule": "hpa", "metric": "utilisation", "target": 0.5, "min": 2, "max": 30},
        "run": {"duration": "1800s", "warmup": "0s", "replications": 4, "seed": 5},
    });
    let scenario = build(&doc.to_string());
    assert!(
        grew_then_shrank(&scenario, 10.0),
        "the fleet should grow, then shrink"
    );
    let report = run_ok(&scenario);
    for r in &report.per_replication {
        let f = r.fleet.as_ref().expect("a changing fleet");
        assert!(f.starts > 0 && f.size.max > 4.0, "{:?}", f.size);
        assert_eq!(r.error_counts.no_dyno, 0);
        let routing = r.routing.as_ref().expect("jiq");
        assert!(routing.idle_hits > 0.5, "{routing:?}");
    }
}
