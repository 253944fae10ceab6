//! Concurrency limits (`router.concurrency_limit`, `app.concurrency_limit`) against theory.
//!
//! A fixed limit K on one single-thread dyno of Poisson arrivals at λ and exponential service
//! at μ = 1 is M/M/1/K: at most K requests in the system (one on the thread, K − 1 waiting),
//! and one that arrives to find K is rejected. Its blocking probability (a Poisson arrival sees
//! the time average, PASTA) is P_K = (1 − ρ) ρ^K / (1 − ρ^(K+1)), ρ = λ/μ, and the goodput
//! λ(1 − P_K). The same holds at the router (one router, one dyno: the router's requests in
//! flight are the dyno's). An AIMD limit whose every answer is slower than its timeout falls to
//! its `min_limit` at the first answer and stays there: M/M/1/min_limit. Tolerances are k
//! standard errors over replications (see `common/mod.rs`). The algorithms' update rules are
//! checked step by step in `src/limit.rs`, and that a limiter admits only below its limit in
//! `src/sim/limit.rs` (proptest).

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::{never_interrupted, RunReport};
use serde_json::{json, Value};

fn run(s: &Value) -> RunReport {
    run_ok(&build(&s.to_string()))
}

/// Poisson arrivals at `rate` on one single-thread dyno with exponential service of mean 1;
/// `router` and `app` tables as given; no router timeout.
fn mm1(rate: f64, router: Value, app: Value, (duration, reps, seed): (f64, u32, u64)) -> Value {
    let mut router = router;
    router
        .as_object_mut()
        .expect("a table")
        .insert("timeout".into(), json!("off"));
    json!({
        "name": "limit",
        "arrivals": {"process": "poisson", "rate": rate},
        "service": {"distribution": "exponential", "mean": 1.0},
        "fleet": {"dynos": 1, "slots": 1},
        "router": router,
        "app": app,
        "run": {"duration": duration, "warmup": 200.0, "replications": reps, "seed": seed,
                "allow_overload": true},
    })
}

/// M/M/1/K's blocking probability.
fn blocking(rho: f64, k: i32) -> f64 {
    (1.0 - rho) * rho.powi(k) / (1.0 - rho.powi(k + 1))
}

fn check_mm1k(label: &str, report: &RunReport, rho: f64, k: i32) {
    let p = blocking(rho, k);
    assert_matches(
        &format!("{label}: errors.limit_rejected = P_K"),
        Measured::over_replications(report, |r| r.errors.limit_rejected.unwrap()),
        p,
        0.05,
    );
    assert_matches(
        &format!("{label}: goodput = λ(1 − P_K)"),
        Measured::over_replications(report, |r| r.goodput),
        rho * (1.0 - p),
        0.02,
    );
    for r in &report.per_replication {
        let limit = r.limit.as_ref().expect("limit figures");
        // Every rejection was a request's only try, and every error a rejection.
        assert_eq!(limit.rejected, r.error_counts.limit_rejected.unwrap());
        assert_eq!(r.error_counts.total, limit.rejected);
        // Never more than K in the system: K − 1 waiting at most, and K − 1 reached.
        assert_eq!(r.max_queue_depth.dyno, (k - 1) as u64, "{label}");
    }
}

#[test]
fn a_fixed_limit_at_the_dyno_is_mm1k() {
    for (rho, k, seed) in [(0.9, 4, 21), (1.2, 3, 22)] {
        let label = format!("app, ρ = {rho}, K = {k}");
        let app = json!({"concurrency_limit": {"algorithm": "fixed", "limit": k}});
        let report = run(&mm1(rho, json!({}), app, (20_000.0, 20, seed)));
        check_mm1k(&label, &report, rho, k);
        for r in &report.per_replication {
            let limit = r.limit.as_ref().unwrap();
            assert_eq!(limit.app_mean, Some(f64::from(k)));
            assert_eq!(limit.router_mean, None);
        }
    }
}

#[test]
fn a_fixed_limit_at_the_router_is_mm1k() {
    let (rho, k) = (0.9, 4);
    let router = json!({"concurrency_limit": {"algorithm": "fixed", "limit": k}});
    let report = run(&mm1(rho, router, json!({}), (20_000.0, 20, 23)));
    check_mm1k("router, ρ = 0.9, K = 4", &report, rho, k);
    for r in &report.per_replication {
        assert_eq!(r.limit.as_ref().unwrap().router_mean, Some(f64::from(k)));
    }
}

/// AIMD whose every answer is slower than its timeout (1 µs): × 0.9 at each, floored at
/// min_limit = 2 from the first answer (int(3 × 0.9) = 2): M/M/1/2 after the warm-up, and its
/// time-averaged limit is 2.
#[test]
fn aimd_that_times_out_every_answer_sits_at_its_minimum() {
    let rho = 0.8;
    let app = json!({"concurrency_limit": {"algorithm": "aimd", "initial_limit": 3,
                     "min_limit": 2, "max_limit": 10, "timeout": "1us"}});
    let report = run(&mm1(rho, json!({}), app, (20_000.0, 20, 24)));
    check_mm1k("aimd at its minimum, ρ = 0.8", &report, rho, 2);
    for r in &report.per_replication {
        assert_eq!(r.limit.as_ref().unwrap().app_mean, Some(2.0));
    }
}

/// AIMD with answers always in time (a timeout of 1,000 s) grows by 1 whenever half its limit
/// is in flight: on one thread at ρ = 0.95 the queue soon reaches a small limit, so the limit
/// climbs to max_limit within the warm-up and stays there (nothing brings it down). With
/// AIMD's own 5 s timeout it would not: answers slower than that are drops.
#[test]
fn aimd_in_time_grows_to_its_maximum() {
    let app = json!({"concurrency_limit": {"algorithm": "aimd", "initial_limit": 2,
                     "min_limit": 2, "max_limit": 6, "timeout": "1000s"}});
    let report = run(&mm1(0.95, json!({}), app, (20_000.0, 4, 25)));
    for r in &report.per_replication {
        assert_eq!(r.limit.as_ref().unwrap().app_mean, Some(6.0));
        assert_eq!(r.max_queue_depth.dyno, 5);
    }
    let mut app = json!({"concurrency_limit": {"algorithm": "aimd", "initial_limit": 2,
                         "min_limit": 2, "max_limit": 6}});
    let report = run(&mm1(0.95, json!({}), app.take(), (20_000.0, 4, 25)));
    for r in &report.per_replication {
        let mean = r.limit.as_ref().unwrap().app_mean.unwrap();
        assert!(mean < 6.0, "answers over 5 s are drops: {mean}");
    }
}

/// Every adaptive algorithm runs within its bounds, and a limit's rejections are retried by
/// clients under "5xx": a rejected first try is retried, a rejected second is the error.
#[test]
fn adaptive_limits_stay_in_bounds_and_rejections_are_retried() {
    for (algorithm, min, max) in [
        ("gradient2", 2.0, 8.0),
        ("vegas", 1.0, 8.0),
        ("aimd", 2.0, 8.0),
    ] {
        let mut limit = json!({"algorithm": algorithm, "initial_limit": 3, "max_limit": 8});
        if algorithm != "vegas" {
            limit["min_limit"] = json!(2);
        }
        let mut s = mm1(
            1.1,
            json!({}),
            json!({"concurrency_limit": limit}),
            (2_000.0, 3, 26),
        );
        s["arrivals"]["retry"] = json!({"attempts": 2, "on": ["5xx"], "base": "10ms",
                                         "jitter": "none"});
        let report = run(&s);
        for r in &report.per_replication {
            let l = r.limit.as_ref().unwrap();
            let mean = l.app_mean.unwrap();
            assert!((min..=max).contains(&mean), "{algorithm}: {mean}");
            assert!(l.rejected > 0, "{algorithm}");
            let retries = r.retries.as_ref().unwrap();
            assert_eq!(
                l.rejected,
                retries.client + r.error_counts.limit_rejected.unwrap(),
                "{algorithm}"
            );
            assert!(r.max_queue_depth.dyno < 8, "{algorithm}");
        }
    }
}

/// A dyno's 503 is a 5xx to the router: with `retry_on = ["5xx"]` the router sends the request
/// to the other dyno, so two dynos each limited to 1 reject only when both are busy: M/M/2/2
/// (Erlang's loss formula), where without the router's retry each dyno alone is M/M/1/1.
#[test]
fn the_router_retries_a_dyno_rejection_elsewhere() {
    let a: f64 = 1.0; // offered load λ/μ on two dynos
    let erlang_b = (a * a / 2.0) / (1.0 + a + a * a / 2.0);
    let mut s = mm1(
        a,
        json!({"retry_on": ["5xx"], "policy": "random"}),
        json!({"concurrency_limit": {"algorithm": "fixed", "limit": 1}}),
        (20_000.0, 20, 27),
    );
    s["fleet"]["dynos"] = json!(2);
    let report = run(&s);
    assert_matches(
        "two dynos of limit 1, router retrying 5xx: errors = Erlang B(2, 1)",
        Measured::over_replications(&report, |r| r.errors.limit_rejected.unwrap()),
        erlang_b,
        0.05,
    );
}

/// The direct engine and the shards refuse a limit, saying why; without one, a run writes no
/// limit figures.
#[test]
fn the_shortcuts_refuse_it_and_a_run_without_it_writes_nothing() {
    for (section, limit) in [
        ("app", "app.concurrency_limit"),
        ("router", "router.concurrency_limit"),
    ] {
        for (key, value) in [("engine", json!("direct")), ("shards", json!(2))] {
            let mut s = mm1(0.5, json!({}), json!({}), (100.0, 2, 1));
            s[section]["concurrency_limit"] = json!({"algorithm": "fixed", "limit": 2});
            s["fleet"]["dynos"] = json!(4);
            s["run"][key] = value;
            let error = dynosim_engine::Scenario::from_json(
                &s.to_string(),
                std::path::Path::new("."),
                &never_interrupted,
            )
            .and_then(|scenario| dynosim_engine::run(&scenario, &never_interrupted).map(|_| ()))
            .expect_err(key)
            .to_string();
            assert!(error.contains(limit), "{key}: {error}");
        }
    }
    let report = run(&mm1(0.5, json!({}), json!({}), (100.0, 2, 1)));
    let text = serde_json::to_string(&report.per_replication[0]).unwrap();
    assert!(!text.contains("limit"), "{text}");
}
