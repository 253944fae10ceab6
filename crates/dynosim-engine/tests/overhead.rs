//! The real stack's per-request costs against queueing theory: the router's connect time
//! (`router.connect`) and the worker's overhead after each response (`app.overhead`).
//! Tolerances are k standard errors over replications, with the resolution each comparison
//! must have; see `common/mod.rs`. Durations are in units of the mean service time.

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::theory::mg1_mean_wait;
use dynosim_engine::{never_interrupted, run_replication, ReplicationResult, RunReport};
use serde_json::{json, Value};

fn measure(report: &RunReport, f: fn(&ReplicationResult) -> f64) -> Measured {
    Measured::over_replications(report, f)
}

/// Poisson arrivals on `dynos` single-thread dynos, exponential service of mean 1.
fn scenario(
    rate: f64,
    dynos: u32,
    policy: &str,
    connect: Value,
    overhead: Value,
    seed: u64,
) -> String {
    scenario_for(20_000.0, rate, dynos, policy, connect, overhead, seed)
}

fn scenario_for(
    duration: f64,
    rate: f64,
    dynos: u32,
    policy: &str,
    connect: Value,
    overhead: Value,
    seed: u64,
) -> String {
    json!({
        "name": "overhead",
        "arrivals": {"process": "poisson", "rate": rate},
        "service": {"distribution": "exponential", "mean": 1.0},
        "fleet": {"dynos": dynos},
        "app": {"server": "generic", "processes": 1, "threads": 1, "overhead": overhead},
        "router": {"policy": policy, "connect": connect, "timeout": "off"},
        "run": {"duration": duration, "warmup": 200.0, "replications": 20, "seed": seed},
    })
    .to_string()
}

/// The three figures every case here checks against its theory, each (what, value): the
/// fraction that waited in a queue (resolution 2%), the mean queue time (5%) and the mean
/// response time (3%).
fn check_queueing(
    report: &RunReport,
    label: &str,
    p_wait: (&str, f64),
    queue: (&str, f64),
    response: (&str, f64),
) {
    type Figure = fn(&ReplicationResult) -> f64;
    let figures: [(_, Figure, _); 3] = [
        (p_wait, |r| r.queued_fraction, 0.02),
        (queue, |r| r.queue.mean, 0.05),
        (response, |r| r.response.mean, 0.03),
    ];
    for ((what, theory), figure, resolution) in figures {
        assert_matches(
            &format!("{label}: {what}"),
            measure(report, figure),
            theory,
            resolution,
        );
    }
}

/// Random routing, so each dyno is an M/G/1 queue whose server (the thread) is held for the
/// service time S and then the overhead O: the Pollaczek–Khinchine wait with S + O, while
/// the response ends after S. P(wait) = ρ = λ(E[S] + E[O]) by PASTA.
fn overhead_is_mg1_with_a_longer_hold(label: &str, overhead: Value, eo: f64, eo2: f64, seed: u64) {
    let dynos = 10;
    let rho = 0.6;
    let (es, es2) = (1.0, 2.0);
    let hold = es + eo;
    let hold2 = es2 + 2.0 * es * eo + eo2;
    let per_dyno = rho / hold;
    let s = build(&scenario(
        per_dyno * f64::from(dynos),
        dynos,
        "random",
        json!("0s"),
        overhead,
        seed,
    ));
    assert!(
        (s.offered_load() - rho).abs() < 1e-9,
        "{label}: offered load counts the overhead"
    );
    assert_eq!(
        dynosim_engine::Engine::chosen(&s),
        dynosim_engine::Engine::Events,
        "the direct engine has no overhead"
    );
    let report = run_ok(&s);
    let w = mg1_mean_wait(per_dyno, hold, hold2).expect("rho < 1");
    check_queueing(
        &report,
        label,
        ("P(wait) = rho", rho),
        ("mean wait (P-K with S + O)", w),
        ("mean response = W + E[S], without the overhead", w + es),
    );
    assert_matches(
        &format!("{label}: utilisation = rho, the overhead counted"),
        measure(&report, |r| r.utilisation.mean),
        rho,
        0.02,
    );
    assert_matches(
        &format!("{label}: throughput = lambda"),
        measure(&report, |r| r.throughput),
        per_dyno * f64::from(dynos),
        0.01,
    );
}

#[test]
fn a_constant_overhead_holds_the_thread_after_the_response() {
    overhead_is_mg1_with_a_longer_hold("constant 0.25", json!(0.25), 0.25, 0.0625, 31);
}

#[test]
fn an_exponential_overhead_holds_the_thread_after_the_response() {
    overhead_is_mg1_with_a_longer_hold(
        "exponential 0.25",
        json!({"distribution": "exponential", "mean": 0.25}),
        0.25,
        2.0 * 0.0625,
        32,
    );
}

/// Random routing with a constant connect time c: each dyno's arrivals are the Poisson stream
/// shifted by c, still Poisson, so the queue time is c + the M/M/1 wait and the response c + W
/// + E[S]; nothing else changes.
#[test]
fn a_connect_time_delays_every_request_by_itself() {
    let dynos = 10;
    let rho = 0.6;
    let c = 0.2;
    let s = build(&scenario(
        rho * f64::from(dynos),
        dynos,
        "random",
        json!(c),
        json!("0s"),
        33,
    ));
    let report = run_ok(&s);
    let w = mg1_mean_wait(rho, 1.0, 2.0).expect("rho < 1");
    let label = "random, connect 0.2";
    check_queueing(
        &report,
        label,
        ("P(wait at the dyno) = rho", rho),
        ("queue = c + W", c + w),
        ("response = c + W + E[S]", c + w + 1.0),
    );
}

/// One dyno of one thread behind an intelligent router, with connect time c and overhead O,
/// c ≥ O: the router counts a request against the dyno from its decision to the response, so
/// it is one server of service c + S (an M/G/1 queue at the router); the thread's overhead is
/// over before the next request reaches it, so nothing waits at the dyno. Were the overhead
/// counted in the response instead (or the router's count released only when the thread is
/// free), the hold would be c + S + O and the wait visibly longer.
#[test]
fn intelligent_routing_sends_the_next_request_at_the_response_not_when_the_thread_is_free() {
    let (c, o) = (0.3, 0.2);
    let rho = 0.7;
    let hold = c + 1.0;
    let hold2 = c * c + 2.0 * c + 2.0;
    let lambda = rho / hold;
    // One queue at load 0.7: ten times the others' run for a comparable standard error.
    let s = build(&scenario_for(
        200_000.0,
        lambda,
        1,
        "intelligent",
        json!(c),
        json!(o),
        34,
    ));
    let report = run_ok(&s);
    let w = mg1_mean_wait(lambda, hold, hold2).expect("rho < 1");
    let label = "intelligent, connect 0.3, overhead 0.2";
    check_queueing(
        &report,
        label,
        ("P(held at the router) = lambda (c + E[S])", rho),
        ("queue = W(c + S) + c", w + c),
        ("response = W + c + E[S]", w + c + 1.0),
    );
}

/// The connect times and overheads have streams of their own: the arrivals and services drawn
/// are the same with them as without, so a comparison of stacks is paired.
#[test]
fn connect_and_overhead_leave_the_traffic_alone() {
    let plain = build(&scenario(5.0, 10, "random", json!("0s"), json!("0s"), 35));
    let costly = build(&scenario(
        5.0,
        10,
        "random",
        json!({"distribution": "exponential", "mean": 0.1}),
        json!({"distribution": "exponential", "mean": 0.1}),
        35,
    ));
    let a = run_replication(&plain, 0, &never_interrupted).unwrap();
    let b = run_replication(&costly, 0, &never_interrupted).unwrap();
    assert_eq!(
        a.simulated_requests, b.simulated_requests,
        "the same arrivals"
    );
    assert_eq!(a.requests, b.requests, "the same arrivals in the window");
    assert_eq!(
        a.service_mean.to_bits(),
        b.service_mean.to_bits(),
        "the same services"
    );
    assert!(b.queue.mean > a.queue.mean, "the costs lengthen the queue");
}

/// Restarts (R15) while requests are connecting to the dyno or its threads are in their
/// overhead: a connecting request fails once, an answered one in its overhead is not failed
/// again, and a closed loop of N requests gets exactly N answers (answered + failed) on a
/// single dyno that keeps restarting, with shared and greedy accept.
#[test]
fn restarts_answer_every_request_once_with_connect_and_overhead() {
    for accept in ["shared", "greedy"] {
        let doc = json!({
            "arrivals": {"process": "closed", "clients": 10, "requests": 5000, "think": "20ms"},
            "request": {"phases": [{"io": {"distribution": "exponential", "mean": "5ms"}}]},
            "fleet": {"dynos": 2, "type": "standard-1x"},
            "app": {"server": "generic", "processes": 2, "threads": 3, "accept": accept,
                    "boot_time": "20ms", "overhead": {"distribution": "exponential", "mean": "2ms"},
                    "memory": {"process": "150MB", "request": "125MB"}},
            "router": {"policy": "random",
                       "connect": {"distribution": "exponential", "mean": "1ms"}},
            "run": {"replications": 3, "seed": 5},
        });
        let report = run_ok(&build(&doc.to_string()));
        for r in &report.per_replication {
            let closed = r.closed_loop.as_ref().unwrap();
            assert_eq!(closed.completed, 5000, "{accept}: {closed:?}");
            let failed = r.failed.as_ref().unwrap();
            assert!(
                r.dyno.as_ref().unwrap().memory.r15_restarts > 0,
                "{accept}: no restart"
            );
            assert!(failed.r15 > 0, "{accept}: {failed:?}");
            assert_eq!(closed.failed, failed.total, "{accept}");
        }
    }
}
