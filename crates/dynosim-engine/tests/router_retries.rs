//! The router's retries after a timeout or an error (`router.retry_on`, docs/feedback.md)
//! against what they must do.
//!
//! Without queueing (dynos of 1,000 slots at a few percent of their capacity), a try's time at
//! its dyno is the request's drawn work S, whichever dyno has it: a retry is the same request,
//! so a request whose work outlasts `router.timeout` T times out on every try. With k retries
//! and no retry delay, P(S > T) of the requests are sent k + 1 times and answered H12 at
//! (k + 1)·T, and the others are answered by their first try: attempts per request
//! 1 + k·P(S > T), H12 fraction P(S > T). A client that gives up at τ, within the tries,
//! gives up at τ: the retry keeps its client's deadline. Each comparison is within k standard
//! errors of the replications (tests/common).

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::RunReport;
use serde_json::{json, Value};

/// Exponential work of mean 1 s, router timeout T = 2 s: P(S > T) = e^(-2).
const T: f64 = 2.0;

fn p_slow() -> f64 {
    (-T).exp()
}

/// Poisson 20 req/s at random to 4 dynos of 1,000 slots (about 0.5% busy): no queueing.
fn no_queueing(router: Value, extra: impl FnOnce(&mut Value)) -> Value {
    let mut s = json!({
        "name": "router-retries",
        "arrivals": {"process": "poisson", "rate": 20.0},
        "service": {"distribution": "exponential", "mean": 1.0},
        "fleet": {"dynos": 4, "slots": 1000},
        "router": router,
        "run": {"duration": 600.0, "warmup": 20.0, "replications": 10, "seed": 5},
    });
    extra(&mut s);
    s
}

fn run(s: &Value) -> RunReport {
    run_ok(&build(&s.to_string()))
}

#[test]
fn a_retry_after_a_timeout_is_the_same_work_sent_again() {
    let k = 2.0;
    let report = run(&no_queueing(
        json!({"timeout": T, "retry_on": ["refused", "timeout"], "retries": 2}),
        |_| {},
    ));
    let p = p_slow();
    let h12 = Measured::over_replications(&report, |r| r.errors.h12);
    assert_matches("H12 fraction", h12, p, 0.1);
    let per_request = Measured::over_replications(&report, |r| {
        r.retries
            .as_ref()
            .expect("retries reported")
            .attempts_per_request
    });
    assert_matches("attempts per request", per_request, 1.0 + k * p, 0.02);
    let router = Measured::over_replications(&report, |r| {
        let retries = r.retries.as_ref().unwrap();
        assert_eq!(retries.client, 0, "no client retries");
        assert_eq!(retries.count, retries.router);
        retries.router as f64 / r.requests as f64
    });
    assert_matches("router retries per request", router, k * p, 0.1);
    // Each timed-out try's dyno works on for nobody: E[S − T | S > T] = 1 s a try, k + 1 tries.
    let wasted =
        Measured::over_replications(&report, |r| r.wasted.thread_seconds / r.requests as f64);
    assert_matches(
        "wasted thread-seconds per request",
        wasted,
        (k + 1.0) * p * 1.0,
        0.1,
    );
    // The H12s come at the last try's timeout, (k + 1)·T after the request arrived: the
    // slowest response is that, and none is later.
    for r in &report.per_replication {
        let max = r.response.max;
        assert!(
            (max - (k + 1.0) * T).abs() < 1e-9,
            "the slowest answer at {max} s, not (k + 1)·T"
        );
    }
}

#[test]
fn without_the_key_a_timeout_is_an_h12_and_nothing_is_retried() {
    let report = run(&no_queueing(json!({"timeout": T}), |_| {}));
    assert!(report.per_replication.iter().all(|r| r.retries.is_none()));
    let h12 = Measured::over_replications(&report, |r| r.errors.h12);
    assert_matches("H12 fraction", h12, p_slow(), 0.1);
}

#[test]
fn a_retry_keeps_its_clients_deadline() {
    // The client gives up at 5 s, during the third try (tries at 0, 2 and 4 s): every slow
    // request ends as the client's timeout, none as H12, after two router retries.
    let report = run(&no_queueing(
        json!({"timeout": T, "retry_on": ["timeout"], "retries": 5}),
        |s| s["arrivals"]["timeout"] = json!(5.0),
    ));
    let p = p_slow();
    for r in &report.per_replication {
        assert_eq!(r.error_counts.h12, 0, "no try outlives its client");
        assert!(
            r.response.max <= 5.0 + 1e-9,
            "an answer after the client left: {}",
            r.response.max
        );
    }
    let gave_up = Measured::over_replications(&report, |r| r.errors.client_timeout);
    // P(S > 5) of them would have timed out on the first try anyway; the others too.
    assert_matches("client timeouts", gave_up, p, 0.1);
    let router = Measured::over_replications(&report, |r| {
        r.retries.as_ref().unwrap().router as f64 / r.requests as f64
    });
    assert_matches("router retries per request", router, 2.0 * p, 0.1);
}

#[test]
fn a_budget_of_nothing_denies_every_retry() {
    let report = run(&no_queueing(
        json!({"timeout": T, "retry_on": ["timeout"], "retries": 2,
               "retry_budget": {"percent": 0, "min_concurrency": 0}}),
        |_| {},
    ));
    for r in &report.per_replication {
        let retries = r.retries.as_ref().unwrap();
        assert_eq!(retries.router, 0);
        assert_eq!(
            retries.denied, r.error_counts.h12,
            "each H12 a denied retry"
        );
        assert!(r.error_counts.h12 > 0);
    }
}

#[test]
fn an_ample_budget_changes_nothing() {
    // 20% of about 20 requests in flight is 4; min_concurrency 1000 allows every retry.
    let with = |budget: Option<Value>| {
        let mut router = json!({"timeout": T, "retry_on": ["timeout"], "retries": 2});
        if let Some(b) = budget {
            router["retry_budget"] = b;
        }
        run(&no_queueing(router, |_| {}))
    };
    let free = with(None);
    let ample = with(Some(json!({"min_concurrency": 1000})));
    for (a, b) in free.per_replication.iter().zip(&ample.per_replication) {
        assert_eq!(a.error_counts.h12, b.error_counts.h12);
        assert_eq!(
            a.retries.as_ref().unwrap().router,
            b.retries.as_ref().unwrap().router
        );
    }
    // Envoy's defaults (20%, 3) bind here: fewer retries, as many more H12s.
    let tight = with(Some(json!({})));
    let (free_router, tight_router): (u64, u64) = (
        free.per_replication
            .iter()
            .map(|r| r.retries.as_ref().unwrap().router)
            .sum(),
        tight
            .per_replication
            .iter()
            .map(|r| r.retries.as_ref().unwrap().router)
            .sum(),
    );
    let denied: u64 = tight
        .per_replication
        .iter()
        .map(|r| r.retries.as_ref().unwrap().denied)
        .sum();
    assert!(
        denied > 0 && tight_router < free_router,
        "{tight_router} vs {free_router}"
    );
}

/// Dynos lost in a crash: with "5xx" the router sends what they held to the others, so no
/// request fails, and it sends exactly the requests that failed without it (the same traffic
/// to the crash).
#[test]
fn a_crashed_dynos_requests_go_to_the_others_with_5xx() {
    let crash = |retry_on: Value| {
        let mut s = json!({
            "name": "crash",
            "arrivals": {"process": "poisson", "rate": 40.0},
            "service": {"distribution": "exponential", "mean": 0.2},
            "fleet": {"dynos": 10, "slots": 2},
            "router": {"retry_on": retry_on},
            "faults": [{"at": 100.0, "kind": "dynos_lost", "count": 3}],
            "run": {"duration": 300.0, "warmup": 10.0, "replications": 4, "seed": 9},
        });
        s["run"]["recovery_window"] = json!(60.0);
        run(&s)
    };
    let without = crash(json!(["refused"]));
    let with = crash(json!(["refused", "5xx"]));
    for (a, b) in without.per_replication.iter().zip(&with.per_replication) {
        let lost = a.error_counts.crashed.expect("crashes reported");
        assert!(lost > 0, "the crash took requests with it");
        assert_eq!(b.error_counts.crashed, Some(0));
        assert_eq!(b.retries.as_ref().unwrap().router, lost);
    }
}
