//! `router.aperture` (Finagle's random aperture, issue #26): each router sends only to its own
//! random subset of k of the n dynos. With R routers each spreading λ/R evenly over its k
//! (random routing in the subset), a dyno in K subsets gets λK/(Rk), K ~ Binomial(R, k/n)
//! (BALANCERS.md §A.4.3; Finagle's RandomAperture.rst). Tolerances: k standard errors over
//! replications (`common/mod.rs`); each replication draws its own subsets.

mod common;

use common::{assert_matches, build, grew_then_shrank, run_ok, scenario_json, Measured};
use dynosim_engine::{never_interrupted, run_replication, ReplicationResult, Scenario};
use serde_json::json;

/// Each replication's own figures, with its per-dyno utilisations (a report keeps only their
/// mean over replications).
fn replications(scenario: &Scenario) -> Vec<ReplicationResult> {
    (0..u64::from(scenario.replications))
        .map(|r| run_replication(scenario, r, &never_interrupted).expect("runs"))
        .collect()
}

fn over(results: &[ReplicationResult], figure: impl Fn(&ReplicationResult) -> f64) -> Measured {
    Measured::of(&results.iter().map(figure).collect::<Vec<_>>())
}

fn binomial_pmf(n: u32, p: f64, k: u32) -> f64 {
    let mut c = 1.0;
    for i in 0..k {
        c *= f64::from(n - i) / f64::from(i + 1);
    }
    c * p.powi(k as i32) * (1.0 - p).powi((n - k) as i32)
}

/// n = 100 dynos, R = 10 routers, k = 10: P(K = 0) = 0.9^10 = 0.349 of the dynos get no
/// request at all, and the others' loads come in steps of λE[S]/(Rk). At λE[S] = 5 (0.05 per
/// dyno on average) a dyno in K subsets is busy 0.05·K of the time, so its utilisation over a
/// long run tells K (the steps are 0.05 apart, its noise well under a tenth of that): the
/// histogram of K over the dynos, per replication, against the binomial, for K = 0..3 (the
/// others under 7% of the dynos), and the mean utilisation of the dynos at each K against
/// 0.05·K.
#[test]
fn dynos_carry_binomially_many_routers_traffic() {
    let (dynos, routers, k) = (100u32, 10u32, 10u32);
    let per_step = 0.05;
    let lambda = per_step * f64::from(routers * k);
    let scenario = build(&scenario_json(
        lambda,
        json!({"distribution": "exponential", "mean": 1.0}),
        dynos,
        1,
        json!({"policy": "random", "routers": routers, "aperture": k}),
        (10_000.0, 100.0, 40, 3),
    ));
    let results = replications(&scenario);
    let p = f64::from(k) / f64::from(dynos);
    let level = |u: f64| (u / per_step).round() as u32;
    for count in 0..4u32 {
        let fraction = over(&results, |r| {
            let at = r
                .utilisation
                .per_dyno
                .iter()
                .filter(|&&u| level(u) == count);
            at.count() as f64 / f64::from(dynos)
        });
        let theory = binomial_pmf(routers, p, count);
        assert_matches(
            &format!("fraction of dynos in {count} routers' subsets"),
            fraction,
            theory,
            [0.15, 0.15, 0.2, 0.6][count as usize],
        );
    }
    // No request at all: utilisation exactly 0.
    let unused = over(&results, |r| {
        let idle = r.utilisation.per_dyno.iter().filter(|&&u| u == 0.0);
        idle.count() as f64 / f64::from(dynos)
    });
    assert_matches(
        "dynos with no request",
        unused,
        binomial_pmf(routers, p, 0),
        0.15,
    );
    for count in 1..4u32 {
        let mean = over(&results, |r| {
            let at: Vec<f64> = r
                .utilisation
                .per_dyno
                .iter()
                .copied()
                .filter(|&u| level(u) == count)
                .collect();
            at.iter().sum::<f64>() / at.len().max(1) as f64
        });
        assert_matches(
            &format!("utilisation of a dyno in {count} subsets"),
            mean,
            per_step * f64::from(count),
            0.05,
        );
    }
}

/// Every policy picks inside its router's subset, the ranking ones too: one router with an
/// aperture of 7 of 50 dynos sends every request to 7 dynos exactly, whatever its policy.
#[test]
fn every_policy_stays_inside_its_aperture() {
    for policy in [
        "random",
        "round_robin",
        "least_connections",
        "power_of_d",
        "retry_if_busy",
        "intelligent",
        "jiq",
        "p2c_ewma",
    ] {
        let scenario = build(&scenario_json(
            3.0,
            json!({"distribution": "exponential", "mean": 1.0}),
            50,
            1,
            json!({"policy": policy, "aperture": 7}),
            (500.0, 0.0, 3, 9),
        ));
        for r in &replications(&scenario) {
            let used = r.utilisation.per_dyno.iter().filter(|&&u| u > 0.0).count();
            assert_eq!(used, 7, "{policy}: {used} dynos used");
        }
    }
}

/// With dynos coming and going, each router keeps k dynos up in its subset (a dyno going down
/// is replaced by the next up in the router's order): an autoscaled fleet under an aperture
/// of 3 serves every request, under every policy (the engine asserts on every decision, in
/// debug builds, that the dyno is up and in the router's subset).
#[test]
fn apertures_follow_a_changing_fleet() {
    for policy in [
        "random",
        "least_connections",
        "intelligent",
        "jiq",
        "p2c_ewma",
    ] {
        let doc = json!({
            "arrivals": {"process": "poisson",
                         "rate": [["0s", "20/s"], ["300s", "20/s"], ["300s", "120/s"],
                                  ["900s", "120/s"], ["900s", "20/s"], ["1800s", "20/s"]]},
            "service": {"distribution": "exponential", "mean": "100ms"},
            "fleet": {"dynos": 4, "boot_time": "20s"},
            "router": {"policy": policy, "routers": 3, "aperture": 3, "timeout": "off"},
            "autoscale": {"rule": "hpa", "metric": "utilisation", "target": 0.5, "min": 2,
                          "max": 30},
            "run": {"duration": "1800s", "warmup": "0s", "replications": 3, "seed": 5},
        });
        let scenario = build(&doc.to_string());
        assert!(
            grew_then_shrank(&scenario, 10.0),
            "{policy}: the fleet should grow, then shrink"
        );
        for r in &run_ok(&scenario).per_replication {
            let f = r.fleet.as_ref().expect("a changing fleet");
            assert!(f.starts > 0 && f.size.max > 4.0, "{policy}: {:?}", f.size);
            assert_eq!(r.error_counts.no_dyno, 0, "{policy}");
            assert!(r.requests > 0 && r.throughput > 0.0, "{policy}");
        }
    }
}
