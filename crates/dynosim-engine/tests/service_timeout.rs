//! `app.service_timeout` (Rack::Timeout's service_timeout) against theory and cases worked out
//! by hand: a request that has run T on its thread is stopped and answered with an error, and
//! its thread is free at once. On one single-thread dyno of Poisson arrivals the thread then
//! serves X = min(S, T): the fraction stopped is P(S > T), the utilisation λE[X], and the mean
//! queue time Pollaczek-Khinchine's for M/G/1 with service X, λE[X²] / (2(1 − λE[X])).
//! Tolerances are k standard errors over replications (see `common/mod.rs`).

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::{never_interrupted, ReplicationResult, RunReport, Scenario};
use serde_json::{json, Value};
use std::path::Path;

fn measure(report: &RunReport, f: impl Fn(&ReplicationResult) -> f64) -> Measured {
    Measured::over_replications(report, f)
}

fn run(s: &Value) -> RunReport {
    run_ok(&build(&s.to_string()))
}

/// Poisson arrivals at `rate` on one single-thread dyno (`fleet.slots`), `[service]` as given,
/// `app.service_timeout` T, no router timeout; `allow_overload` lets a λE[S] ≥ 1 run (the
/// check reads the untimed service).
fn single_thread(
    rate: f64,
    service: Value,
    timeout: f64,
    (duration, reps, seed): (f64, u32, u64),
) -> Value {
    json!({
        "name": "service-timeout",
        "arrivals": {"process": "poisson", "rate": rate},
        "service": service,
        "fleet": {"dynos": 1, "slots": 1},
        "app": {"service_timeout": timeout},
        "router": {"timeout": "off"},
        "run": {"duration": duration, "warmup": 200.0, "replications": reps, "seed": seed,
                "allow_overload": true},
    })
}

/// M/G/1 with the service cut at T. Exponential (mean 1) at λ = 1, at capacity without the
/// timeout: P(S > T) = e^{−T}, E[X] = 1 − e^{−T}, E[X²] = 2(1 − e^{−T}(1 + T)). Uniform on
/// [0.5, 2.5] at λ = 0.6 with T = 1.5: P(S > T) = 1/2, E[X] = 1/2 + 3/4 = 5/4,
/// E[X²] = 13/24 + 9/8 = 5/3. A thread not freed at T (the router's H12, which leaves the
/// dyno working) would give the untimed M/G/1's figures: for the exponential at λ = 1, no
/// steady state at all.
#[test]
fn the_thread_serves_min_of_s_and_t_as_mg1_with_truncated_service() {
    let t = 1.5f64;
    let exp_tail = (-t).exp();
    let cases = [
        (
            "exponential, λ = 1",
            1.0,
            json!({"distribution": "exponential", "mean": 1.0}),
            exp_tail,
            1.0 - exp_tail,
            2.0 * (1.0 - exp_tail * (1.0 + t)),
            11,
        ),
        (
            "uniform [0.5, 2.5], λ = 0.6",
            0.6,
            json!({"distribution": "uniform", "min": 0.5, "max": 2.5}),
            0.5,
            1.25,
            5.0 / 3.0,
            12,
        ),
    ];
    for (label, lambda, service, tail, ex, ex2, seed) in cases {
        let report = run(&single_thread(lambda, service, t, (20_000.0, 20, seed)));
        let rho = lambda * ex;
        assert_matches(
            &format!("{label}: errors.service_timeout = P(S > T)"),
            measure(&report, |r| r.errors.service_timeout.unwrap()),
            tail,
            0.05,
        );
        assert_matches(
            &format!("{label}: utilisation = λE[min(S, T)]"),
            measure(&report, |r| r.utilisation.mean),
            rho,
            0.02,
        );
        assert_matches(
            &format!("{label}: queue.mean = P-K with min(S, T)"),
            measure(&report, |r| r.queue.mean),
            lambda * ex2 / (2.0 * (1.0 - rho)),
            0.1,
        );
        for r in &report.per_replication {
            // The app's error is the only one, and its answer comes at T after the thread
            // took it: no response waits longer on the thread than T.
            assert_eq!(
                r.error_counts.total,
                r.error_counts.service_timeout.unwrap()
            );
            assert!(
                r.wasted.thread_seconds == 0.0,
                "no client left before its answer"
            );
        }
    }
}

/// Constant service of 1 s: a timeout below it stops every request at T (the thread holds
/// each T: utilisation λT); at 1 s exactly the response comes at the deadline, which is in
/// time (completions come before deadlines of the same moment); above it, none is stopped.
#[test]
fn a_constant_service_is_stopped_exactly_when_it_outlasts_the_timeout() {
    let lambda = 0.5;
    for (timeout, stopped) in [(0.5, true), (1.0, false), (2.0, false)] {
        let report = run(&single_thread(
            lambda,
            json!({"distribution": "constant", "value": 1.0}),
            timeout,
            (5_000.0, 10, 3),
        ));
        let label = format!("constant 1 s, service_timeout {timeout}");
        for r in &report.per_replication {
            let counted = r.error_counts.service_timeout.unwrap();
            let expected = if stopped { r.requests } else { 0 };
            assert_eq!(counted, expected, "{label}");
        }
        let held = if stopped { timeout } else { 1.0 };
        assert_matches(
            &format!("{label}: utilisation = λ × time held"),
            measure(&report, |r| r.utilisation.mean),
            lambda * held,
            0.06,
        );
    }
}

/// The thread's own time after the answer (`app.overhead`) follows the error too, while the
/// stopped request's own event (its `[service]` hold's or its `io`'s end) is still to come:
/// the thread holds each request T + overhead, with `[service]` and with phases alike.
#[test]
fn the_overhead_follows_the_error_while_the_stopped_work_is_still_due() {
    let lambda = 0.5;
    let (timeout, overhead) = (0.5, 0.1);
    let service = json!({
        "name": "service-timeout-overhead",
        "arrivals": {"process": "poisson", "rate": lambda},
        "service": {"distribution": "constant", "value": 1.0},
        "fleet": {"dynos": 1, "slots": 1},
        "app": {"service_timeout": timeout, "overhead": overhead},
        "router": {"timeout": "off"},
        "run": {"duration": 5_000.0, "warmup": 100.0, "replications": 10, "seed": 4},
    });
    let mut phases = service.clone();
    phases.as_object_mut().unwrap().remove("service");
    phases["request"] = json!({"phases": [{"io": 1.0}]});
    phases["fleet"] = json!({"dynos": 1});
    phases["app"] = json!({"processes": 1, "threads": 1, "service_timeout": timeout,
                           "overhead": overhead});
    for (label, s) in [("[service]", service), ("io phase", phases)] {
        let report = run(&s);
        for r in &report.per_replication {
            assert_eq!(
                r.error_counts.service_timeout.unwrap(),
                r.requests,
                "{label}"
            );
        }
        let figure = |r: &ReplicationResult| match &r.dyno {
            Some(d) => d.thread_occupancy,
            None => r.utilisation.mean,
        };
        assert_matches(
            &format!("{label}: the thread's busy fraction = λ(T + overhead)"),
            measure(&report, figure),
            lambda * (timeout + overhead),
            0.06,
        );
    }
}

/// A query already handed to the database runs on when the app stops its request (the
/// database is not told), but the pool's connection goes back at once. One single-thread
/// dyno, a query of 2 s on a database of one server through a pool of one connection, a
/// service timeout of 1 s: every request is stopped at 1 s (the thread holds each 1 s:
/// occupancy λ), each query still runs its 2 s, queued behind those stopped before it if
/// need be (the database's utilisation 2λ, first come first served or shared), and no
/// request ever waits for the pool (its one thread never has two requests; a connection kept
/// until its query ended would make the next request wait for it whenever it came within
/// 1 s of the last one's timeout).
#[test]
fn a_query_runs_on_but_its_connection_goes_back_at_once() {
    let lambda = 0.2;
    for discipline in ["fcfs", "ps"] {
        let s = json!({
            "name": "service-timeout-db",
            "arrivals": {"process": "poisson", "rate": lambda},
            "request": {"phases": [{"use": "db", "time": 2.0}]},
            "resources": {"db": {"servers": 1, "discipline": discipline,
                                 "pool": {"size": 1, "per": "app"}}},
            "app": {"processes": 1, "threads": 1, "service_timeout": 1.0},
            "fleet": {"dynos": 1},
            "router": {"timeout": "off"},
            "run": {"duration": 10_000.0, "warmup": 100.0, "replications": 10, "seed": 6},
        });
        let report = run(&s);
        for r in &report.per_replication {
            assert_eq!(r.error_counts.service_timeout.unwrap(), r.requests);
            let db = &r.resources.as_ref().unwrap()["db"];
            assert_eq!(
                db.pool_wait.max, 0.0,
                "{discipline}: a request waited for the pool"
            );
        }
        assert_matches(
            &format!("{discipline}: thread occupancy = λT"),
            measure(&report, |r| r.dyno.as_ref().unwrap().thread_occupancy),
            lambda * 1.0,
            0.06,
        );
        assert_matches(
            &format!("{discipline}: the database's utilisation = λ × 2 s"),
            measure(&report, |r| r.resources.as_ref().unwrap()["db"].utilisation),
            lambda * 2.0,
            0.06,
        );
    }
}

/// The router's H12 answers the client at 0.5 s and leaves the dyno working; the app's own
/// timeout 1.5 s after its thread took it then frees the thread: a request of 2 s of CPU holds
/// its thread 1.5 s, and what it did after its client's answer is wasted (the CPU work it did
/// then, not all it had left when its client went). Its client was answered already: the app's error is counted
/// once, as the H12.
#[test]
fn after_the_routers_timeout_the_apps_own_frees_the_thread() {
    let lambda = 0.2;
    let s = json!({
        "name": "service-timeout-h12",
        "arrivals": {"process": "poisson", "rate": lambda},
        "request": {"phases": [{"cpu": 2.0}]},
        "app": {"processes": 1, "threads": 1, "service_timeout": 1.5},
        "fleet": {"dynos": 1, "cores": 1},
        "router": {"timeout": 0.5},
        "run": {"duration": 10_000.0, "warmup": 100.0, "replications": 10, "seed": 7},
    });
    let report = run(&s);
    for r in &report.per_replication {
        assert_eq!(r.error_counts.h12, r.requests);
        assert_eq!(r.error_counts.service_timeout, Some(0));
        assert_eq!(r.error_counts.total, r.requests);
    }
    assert_matches(
        "thread occupancy = λ × 1.5 s",
        measure(&report, |r| r.dyno.as_ref().unwrap().thread_occupancy),
        lambda * 1.5,
        0.06,
    );
    // Wasted per request: from the H12 (0.5 s after its arrival) or its start, if later, to
    // its stop 1.5 s after its start: 1 s + min(queue time, 0.5 s). Its CPU work ran the
    // whole time it held its thread, so the CPU wasted is the same.
    for r in &report.per_replication {
        let per_request = r.wasted.thread_seconds / r.requests as f64;
        let cpu_per_request = r.wasted.cpu_seconds / r.requests as f64;
        assert!(
            (1.0..=1.5).contains(&per_request),
            "wasted thread-seconds per request {per_request}"
        );
        assert!(
            (cpu_per_request - per_request).abs() < 1e-6 * per_request,
            "wasted CPU per request {cpu_per_request} against the thread's {per_request}"
        );
    }
}

/// Clients that retry on 5xx send a stopped request again: a constant service above the
/// timeout fails every try, so each request makes all its tries; retrying only on the
/// client's own timeout, none is sent again.
#[test]
fn a_service_timeout_is_retried_as_a_5xx() {
    for (on, tries) in [("5xx", 3.0), ("timeout", 1.0)] {
        let mut s = single_thread(
            0.2,
            json!({"distribution": "constant", "value": 1.0}),
            0.5,
            (2_000.0, 3, 9),
        );
        s["arrivals"]["retry"] = json!({"attempts": 3, "on": [on], "backoff": "constant",
                                        "base": 0.1, "jitter": "none"});
        s["arrivals"]["timeout"] = json!(30.0);
        let report = run(&s);
        for r in &report.per_replication {
            let retries = r.retries.as_ref().unwrap();
            assert_eq!(retries.attempts_per_request, tries, "on {on}");
            assert_eq!(r.errors.service_timeout, Some(1.0), "on {on}");
        }
    }
}

/// The direct engine does not run it; a bad value is refused naming the key.
#[test]
fn the_direct_engine_refuses_it_and_bad_values_name_the_key() {
    let mut s = single_thread(
        0.5,
        json!({"distribution": "exponential", "mean": 1.0}),
        1.0,
        (100.0, 2, 1),
    );
    s["run"]["engine"] = json!("direct");
    let e = Scenario::from_json(&s.to_string(), Path::new("."), &never_interrupted)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("run.engine") && e.contains("app.service_timeout"),
        "{e}"
    );
    s["run"]["engine"] = json!("auto");
    let auto = run(&s);
    assert_eq!(auto.per_replication[0].engine, "events");
    for bad in [json!(0.0), json!(-1.0), json!("soon"), json!("0s")] {
        s["app"]["service_timeout"] = bad.clone();
        let e = Scenario::from_json(&s.to_string(), Path::new("."), &never_interrupted)
            .unwrap_err()
            .to_string();
        assert!(e.contains("app.service_timeout"), "{bad}: {e}");
        assert_eq!(e.lines().count(), 1, "{bad}: {e}");
    }
}
