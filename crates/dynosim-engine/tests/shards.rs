//! A fleet split into shards (`run.shards`, `run.threads`; issue #28): the same figures in
//! distribution as the fleet run whole, queueing theory still holds, the merge is exact, the
//! results do not depend on the threads, and mistakes are refused in one line naming the key.
//!
//! Tolerances are k standard errors (see `common/mod.rs`); a comparison of two estimates uses
//! the standard error of their difference, and asserts that it could catch a difference of a
//! stated fraction.

mod common;

use common::{assert_matches, build, k_for, run_ok, Measured};
use dynosim_engine::shard::{auto_shards, AUTO_SHARDS_FROM, SHARD_DYNOS};
use dynosim_engine::{never_interrupted, run_replication, Error, ReplicationResult, Scenario};
use serde_json::{json, Value};
use std::path::Path;

/// Poisson arrivals at `rate` routed at random to `dynos` dynos of `slots` slots each.
fn doc(rate: f64, service: Value, dynos: u32, slots: u32, run: Value) -> Value {
    json!({
        "name": "shards",
        "arrivals": {"process": "poisson", "rate": rate},
        "service": service,
        "fleet": {"dynos": dynos, "slots": slots},
        "router": {"policy": "random", "timeout": "off"},
        "run": run,
    })
}

fn exp(mean: f64) -> Value {
    json!({"distribution": "exponential", "mean": mean})
}

fn with_run(mut d: Value, key: &str, value: Value) -> Value {
    d["run"][key] = value;
    d
}

fn try_build(d: &Value) -> Result<Scenario, Error> {
    Scenario::from_json(&d.to_string(), Path::new("."), &never_interrupted)
}

fn config_error(d: &Value) -> (String, String) {
    match try_build(d) {
        Err(Error::Config { path, message }) => (path, message),
        Err(other) => panic!("expected a configuration error, got {other}"),
        Ok(_) => panic!("expected a configuration error, the scenario was accepted"),
    }
}

/// Asserts that two independent estimates agree: |a − b| ≤ k·SE(a − b), and that k·SE is
/// below `resolution` of their mean (the comparison would catch a difference that large).
fn assert_same(what: &str, a: Measured, b: Measured, resolution: f64) {
    let se = (a.std_error.powi(2) + b.std_error.powi(2)).sqrt();
    let k = k_for(a.df.min(b.df));
    let tolerance = k * se;
    let scale = 0.5 * (a.mean + b.mean).abs();
    println!(
        "{what}: {:.6} against {:.6}; diff {:+.6}, tolerance {tolerance:.6} (k = {k:.2})",
        a.mean,
        b.mean,
        a.mean - b.mean
    );
    assert!(
        tolerance <= resolution * scale,
        "{what}: tolerance {tolerance:.6} is wider than {}% of {scale:.6}",
        100.0 * resolution
    );
    assert!(
        (a.mean - b.mean).abs() <= tolerance,
        "{what}: {:.6} and {:.6} differ by more than {tolerance:.6}",
        a.mean,
        b.mean
    );
}

/// A figure of one replication.
type Figure = fn(&ReplicationResult) -> f64;

fn over(report: &dynosim_engine::RunReport, f: fn(&ReplicationResult) -> f64) -> Measured {
    Measured::over_replications(report, f)
}

#[test]
fn sharded_random_routing_keeps_each_dyno_an_mm1_queue() {
    // 60 single-slot dynos at load 0.7 in 4 shards (15 dynos each), on both engines: each dyno
    // is M/M/1 at rate lambda/N, mean response 1/(mu - lambda/N) = 1/(1 - 0.7).
    let (dynos, rho) = (60, 0.7);
    for engine in ["direct", "events"] {
        let run = json!({"duration": 2000.0, "warmup": 200.0, "replications": 20, "seed": 11,
                         "shards": 4, "engine": engine});
        let scenario = build(&doc(rho * dynos as f64, exp(1.0), dynos, 1, run).to_string());
        assert_eq!(scenario.shards.len(), 4);
        let report = run_ok(&scenario);
        assert_eq!(report.shards, 4);
        assert_eq!(report.engine, engine);
        let theory = 1.0 / (1.0 - rho);
        assert_matches(
            &format!("{engine}: mean response"),
            over(&report, |r| r.response.mean),
            theory,
            0.03,
        );
        assert_matches(
            &format!("{engine}: P(wait) = rho"),
            over(&report, |r| r.queued_fraction),
            rho,
            0.02,
        );
        assert_matches(
            &format!("{engine}: utilisation = rho"),
            over(&report, |r| r.utilisation.mean),
            rho,
            0.02,
        );
        // The 90th percentile of an M/M/1 response (exponential of rate mu - lambda_i).
        assert_matches(
            &format!("{engine}: p90 response"),
            over(&report, |r| r.response.p90),
            theory * 10f64.ln(),
            0.04,
        );
    }
}

#[test]
fn sharded_and_whole_fleets_agree() {
    // Per dyno M/G/1 (lognormal service, coefficient of variation 1.5) and M/M/4-like dynos
    // of 4 slots, in 7 shards of uneven size (50 dynos: 8 + 7 x 6) and whole.
    // Mean 0.1 s: median 0.1 / exp(sigma^2 / 2), sigma^2 = ln(1 + 1.5^2).
    let lognormal = json!({"distribution": "lognormal", "median": 0.05547, "sigma": 1.0857});
    for (label, service, slots, rate) in [
        ("M/G/1 per dyno", lognormal, 1, 0.65 * 50.0 / 0.1),
        ("M/M/4 per dyno", exp(0.2), 4, 0.8 * 50.0 * 4.0 / 0.2),
    ] {
        let run = |shards: u32, seed: u64| {
            let r = json!({"duration": 1500.0, "warmup": 50.0, "replications": 20,
                           "seed": seed, "shards": shards});
            run_ok(&build(
                &doc(rate, service.clone(), 50, slots, r).to_string(),
            ))
        };
        let (whole, sharded) = (run(1, 5), run(7, 6));
        assert_eq!((whole.shards, sharded.shards), (1, 7));
        let figures: [(&str, Figure, f64); 5] = [
            ("mean response", |r| r.response.mean, 0.04),
            ("mean queue time", |r| r.queue.mean, 0.12),
            ("P(wait)", |r| r.queued_fraction, 0.04),
            ("utilisation", |r| r.utilisation.mean, 0.01),
            ("p95 response", |r| r.response.p95, 0.05),
        ];
        for (what, f, resolution) in figures {
            assert_same(
                &format!("{label}: {what}, sharded against whole"),
                over(&sharded, f),
                over(&whole, f),
                resolution,
            );
        }
    }
}

#[test]
fn a_sharded_replication_is_its_shards_merged_exactly() {
    // 10 dynos in 3 shards (4, 3, 3): every count adds up, the maximum is the largest, and
    // the per-dyno utilisations are the shards' in dyno order.
    let run = json!({"duration": 300.0, "warmup": 10.0, "replications": 1, "seed": 3,
                     "shards": 3});
    let scenario = build(&doc(7.0, exp(1.0), 10, 1, run).to_string());
    let sizes: Vec<u32> = scenario.shards.iter().map(|s| s.dynos).collect();
    assert_eq!(sizes, [4, 3, 3]);
    // The service distribution is the fleet's, shared rather than built again per shard.
    assert!(scenario
        .shards
        .iter()
        .all(|s| std::sync::Arc::ptr_eq(&s.service, &scenario.service)));
    // Each shard draws from streams of its own: seeds all different, none the run's.
    let mut seeds: Vec<u64> = scenario.shards.iter().map(|s| s.seed).collect();
    seeds.push(scenario.seed);
    seeds.sort_unstable();
    seeds.dedup();
    assert_eq!(seeds.len(), 4);
    let rates: Vec<f64> = scenario.shards.iter().map(|s| s.arrival_rate()).collect();
    assert!((rates[0] - 2.8).abs() < 1e-12 && (rates[1] - 2.1).abs() < 1e-12);
    let report = run_ok(&scenario);
    let whole = &report.per_replication[0];
    let parts: Vec<ReplicationResult> = scenario
        .shards
        .iter()
        .map(|s| run_replication(s, 0, &never_interrupted).expect("a shard runs"))
        .collect();
    let sum = |f: fn(&ReplicationResult) -> u64| parts.iter().map(f).sum::<u64>();
    assert_eq!(whole.requests, sum(|r| r.requests));
    assert_eq!(whole.simulated_requests, sum(|r| r.simulated_requests));
    assert_eq!(whole.events, sum(|r| r.events));
    let max = parts.iter().map(|r| r.response.max).fold(0.0, f64::max);
    assert_eq!(whole.response.max, max);
    let per_dyno: Vec<f64> = parts
        .iter()
        .flat_map(|r| r.utilisation.per_dyno.iter().copied())
        .collect();
    let summary: Vec<f64> = report.summary["utilisation"]["per_dyno"]
        .as_array()
        .expect("a list for 10 dynos")
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(summary, per_dyno);
    // The mean response is the requests' mean over all shards.
    let total: f64 = parts
        .iter()
        .map(|r| r.response.mean * r.requests as f64)
        .sum();
    let mean = total / whole.requests as f64;
    assert!((whole.response.mean - mean).abs() <= 1e-9 * mean);
}

#[test]
fn the_same_seed_gives_the_same_figures_whatever_the_threads() {
    let base = doc(
        0.6 * 40.0,
        exp(1.0),
        40,
        1,
        json!({"duration": 200.0, "warmup": 10.0, "replications": 3, "seed": 9, "shards": 5}),
    );
    let figures = |threads: Value| {
        let report = run_ok(&build(
            &with_run(base.clone(), "threads", threads).to_string(),
        ));
        serde_json::to_string(&(&report.summary, &report.per_replication)).unwrap()
    };
    let first = figures(json!(1));
    assert_eq!(first, figures(json!(1)), "two runs of the same scenario");
    assert_eq!(first, figures(json!(3)), "1 thread and 3");
    assert_eq!(first, figures(json!("auto")), "1 thread and one per core");
}

#[test]
fn auto_shards_large_fleets_that_can_be_split_and_nothing_else() {
    assert_eq!(auto_shards(AUTO_SHARDS_FROM - 1), 1);
    assert_eq!(
        auto_shards(AUTO_SHARDS_FROM),
        AUTO_SHARDS_FROM / SHARD_DYNOS
    );
    assert_eq!(auto_shards(1_000_001), 101);
    let run = json!({"duration": 1.0, "warmup": 0.0, "replications": 1});
    let large = doc(500_000.0, exp(0.1), 100_000, 1, run.clone());
    assert_eq!(build(&large.to_string()).shards.len(), 10);
    let smaller = doc(500_000.0, exp(0.1), 99_999, 1, run);
    assert!(build(&smaller.to_string()).shards.is_empty());
    // A fleet that cannot be split runs whole under "auto", however large.
    let mut round_robin = large.clone();
    round_robin["router"]["policy"] = json!("round_robin");
    assert!(build(&round_robin.to_string()).shards.is_empty());
    assert!(build(&with_run(large, "shards", json!(1)).to_string())
        .shards
        .is_empty());
}

#[test]
fn a_scenario_whose_dynos_are_coupled_is_not_split() {
    let base = doc(
        6.0,
        exp(1.0),
        10,
        1,
        json!({"duration": 100.0, "warmup": 0.0, "replications": 1, "shards": 2}),
    );
    let mut cases: Vec<(&str, Value)> = Vec::new();
    let mut d = base.clone();
    d["router"]["policy"] = json!("round_robin");
    cases.push(("random", d));
    let mut d = base.clone();
    d["router"]["policy"] = json!("least_connections");
    cases.push(("random", d));
    let mut d = base.clone();
    d["arrivals"] = json!({"process": "poisson", "rate": 6.0,
                           "burst": [{"at": 2.0, "clients": 5}]});
    cases.push(("Poisson", d));
    let mut d = base.clone();
    d["router"]["max_in_flight"] = json!(20);
    cases.push(("cap", d));
    let mut d = base.clone();
    d["autoscale"] = json!({"rule": "heroku", "min": 5, "max": 20});
    cases.push(("changes", d));
    for (why, d) in cases {
        let (path, message) = config_error(&d);
        assert_eq!(path, "run.shards", "{message}");
        assert!(message.contains(why), "{why:?} not in: {message}");
        assert!(!message.contains('\n'), "one line: {message}");
    }
}

#[test]
fn bad_values_of_shards_and_threads_are_refused_in_one_line() {
    let base = doc(
        6.0,
        exp(1.0),
        10,
        1,
        json!({"duration": 10.0, "warmup": 0.0, "replications": 1}),
    );
    for (key, value) in [
        ("shards", json!(0)),
        ("shards", json!(-2)),
        ("shards", json!(11)),
        ("shards", json!(2.5)),
        ("shards", json!("many")),
        ("threads", json!(0)),
        ("threads", json!(5000)),
        ("threads", json!("all")),
        ("threads", json!(true)),
    ] {
        let (path, message) = config_error(&with_run(base.clone(), key, value.clone()));
        assert_eq!(path, format!("run.{key}"), "{value}: {message}");
        assert!(message.contains("auto"), "{value}: {message}");
        assert!(!message.contains('\n'), "one line: {message}");
    }
    assert!(try_build(&with_run(base.clone(), "shards", json!(10))).is_ok());
    assert!(try_build(&with_run(base, "threads", json!("auto"))).is_ok());
}
