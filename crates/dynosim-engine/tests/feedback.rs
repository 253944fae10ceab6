//! Feedback loops against theory (docs/feedback.md): clients that retry on one M/M/1 server,
//! the fixed point of the load they offer, what a retry budget and `app.wait_timeout` do to
//! it, the backoff laws as the engine applies them, and faults as they strike.
//!
//! The model (`dynosim_engine::theory::mm1_retry_states`): Poisson user requests at λ to one
//! FIFO server of rate μ, clients with timeout τ and n tries in all, no backoff, no
//! cancellation. Overloaded, every try times out and the server is offered nλ, which holds
//! itself up if and only if nλ > μ; the normal state is the lowest root x < μ of
//! x = λ(1 + p + … + p^(n−1)), p = e^(−(μ−x)τ). Both are fluid (mean-field) statements: the
//! tests take each boundary with a margin on each side, and a patience long next to the
//! server's time (τμ = 50) so that the normal state, where it exists, lasts: a single server's
//! fluctuations end it within minutes when τ is only 10–20 service times, although the root
//! exists (docs/feedback.md, "How long the normal state lasts").

mod common;

use common::{assert_matches, build, run_ok, Measured};
use dynosim_engine::theory::mm1_retry_states;
use dynosim_engine::{never_interrupted, ReplicationResult, RunReport};
use serde_json::{json, Value};

const MU: f64 = 1000.0;
const TAU: f64 = 0.05;

/// One single-thread dyno of exponential service (mean 1/μ), Poisson users at `rate` whose
/// clients give up after τ and try `attempts` times with no backoff, a slowdown of the app by
/// 5 for `trigger` seconds at 2 min, judged over the 10 minutes after it; no router timeout.
fn retrying(rate: f64, attempts: u32, trigger: f64, extra: impl FnOnce(&mut Value)) -> Value {
    let mut s = json!({
        "name": "mm1-retries",
        "arrivals": {
            "process": "poisson", "rate": rate, "timeout": TAU,
            "retry": {"attempts": attempts, "backoff": "constant", "base": 0.0, "jitter": "none"},
        },
        "service": {"distribution": "exponential", "mean": 1.0 / MU},
        "fleet": {"dynos": 1},
        "router": {"timeout": "off"},
        "faults": [{"at": 120.0, "for": trigger, "kind": "slowdown", "factor": 5.0}],
        "run": {"duration": 730.0 + trigger, "warmup": 10.0, "replications": 10, "seed": 11},
    });
    extra(&mut s);
    s
}

fn run(s: &Value) -> RunReport {
    run_ok(&build(&s.to_string()))
}

fn recovered(report: &RunReport) -> Vec<bool> {
    report
        .per_replication
        .iter()
        .map(|r| r.stability.as_ref().expect("a verdict").recovered == 1.0)
        .collect()
}

fn figure(report: &RunReport, f: impl Fn(&ReplicationResult) -> f64) -> Measured {
    Measured::over_replications(report, f)
}

/// The overloaded state holds itself up if and only if nλ > μ: just below (nλ = 0.9μ) every
/// replication drains its backlog and recovers; just above (nλ = 1.05μ) none does, and every
/// one stays down for the whole 10-minute window. Both have a normal state (the model's
/// root), so both sides are bistable or not by nλ alone; and without retries (n = 1) the
/// trigger leaves nothing behind.
#[test]
fn the_overloaded_state_holds_itself_up_if_and_only_if_n_lambda_exceeds_mu() {
    for (rate, attempts, stays_down) in [(300.0, 3, false), (350.0, 3, true), (350.0, 1, false)] {
        let states = mm1_retry_states(rate, MU, TAU, attempts).unwrap();
        assert!(states.normal.is_some(), "a normal state at λ = {rate}");
        assert_eq!(
            states.overloaded, stays_down,
            "nλ > μ at λ = {rate}, n = {attempts}"
        );
        let report = run(&retrying(rate, attempts, 5.0, |_| {}));
        let verdicts = recovered(&report);
        let label = format!("λ = {rate}, n = {attempts}");
        if stays_down {
            assert!(
                verdicts.iter().all(|r| !r),
                "{label}: some recovered: {verdicts:?}"
            );
            // Down, every try times out: a request makes its n tries.
            for r in &report.per_replication {
                let retries = r.retries.as_ref().unwrap();
                assert!(retries.exhausted > 0, "{label}: tries left unused");
            }
        } else {
            assert!(
                verdicts.iter().all(|&r| r),
                "{label}: some did not recover: {verdicts:?}"
            );
        }
    }
}

/// Overloaded, every try times out: the server, busy all the time, works off tries whose
/// clients have gone (no cancellation), so goodput falls to nothing, and the tries a second
/// are nλ. Measured over the last 5 minutes of a run tipped over at its start.
#[test]
fn overloaded_every_try_times_out_and_the_load_is_n_lambda() {
    let (rate, attempts) = (400.0, 3);
    let mut s = retrying(rate, attempts, 5.0, |_| {});
    s["faults"][0]["at"] = json!(11.0);
    s["run"]["warmup"] = json!(10.0);
    s["run"]["duration"] = json!(300.0);
    let report = run(&s);
    // Tries per request over the window: nearly every request, after the first seconds, makes
    // its n tries.
    let tries = figure(&report, |r| {
        r.retries.as_ref().unwrap().attempts_per_request
    });
    assert!(
        tries.mean > f64::from(attempts) * 0.97,
        "tries per request {}",
        tries.mean
    );
    let goodput = figure(&report, |r| r.goodput);
    assert!(goodput.mean < 0.05 * rate, "goodput {}", goodput.mean);
}

/// The normal state exists if and only if the fixed point has a root below μ. Without one
/// (τ = 5 ms, below the threshold of 6.3 ms the model gives at λ = 600), the server collapses
/// from its first busy period, trigger or not; with one, far from the threshold (τ = 50 ms),
/// it stays normal: goodput is λ, within the replications' error.
#[test]
fn the_normal_state_exists_where_the_fixed_point_has_a_root() {
    let rate = 600.0;
    for (tau, exists) in [(0.005, false), (0.05, true)] {
        let states = mm1_retry_states(rate, MU, tau, 3).unwrap();
        assert_eq!(states.normal.is_some(), exists, "a root at τ = {tau}");
        // A trigger too small to matter (1 ms at factor 1): the verdict needs one.
        let report = run(&retrying(rate, 3, 0.001, |s| {
            s["arrivals"]["timeout"] = json!(tau);
            s["faults"][0]["factor"] = json!(1.0);
        }));
        let goodput = figure(&report, |r| r.goodput);
        if exists {
            // The expected rate of answered requests: every request, as retries are rare
            // (p = e^{-(μ-x)τ} ≈ 2e-9) and the window's edges are a few ms of 12 minutes.
            assert_matches("goodput, normal state", goodput, rate, 0.01);
        } else {
            assert!(goodput.mean < 0.01 * rate, "goodput {}", goodput.mean);
        }
    }
}

/// A gRPC budget of token ratio r lets at most about 1 + r tries a request through once
/// tries fail: where (1 + r)λ < μ < nλ, the overloaded state cannot hold, and a trigger that
/// leaves the unbudgeted clients down is recovered from. Tries per request over the run stay
/// under 1 + r.
#[test]
fn a_retry_budget_caps_the_amplification_and_removes_the_overloaded_state() {
    let (rate, attempts, r) = (350.0, 3, 0.1);
    assert!((1.0 + r) * rate < MU && f64::from(attempts) * rate > MU);
    let report = run(&retrying(rate, attempts, 5.0, |s| {
        s["arrivals"]["retry"]["budget"] =
            json!({"kind": "grpc", "max_tokens": 100, "token_ratio": r});
    }));
    let verdicts = recovered(&report);
    assert!(verdicts.iter().all(|&v| v), "{verdicts:?}");
    for rep in &report.per_replication {
        let retries = rep.retries.as_ref().unwrap();
        assert!(
            retries.attempts_per_request <= 1.0 + r,
            "tries per request {}",
            retries.attempts_per_request
        );
        assert!(retries.denied > 0, "the budget refused nothing");
    }
}

/// `app.wait_timeout` below the clients' timeout: a try older than that when the server takes
/// it is dropped unserved, so the server does no work for clients that have gone, and the
/// backlog that held the overloaded state up goes at no cost. Where the same clients stay
/// down without it (nλ > μ), they recover with it.
#[test]
fn wait_timeout_below_the_clients_timeout_removes_the_overloaded_state() {
    let rate = 350.0;
    let without = run(&retrying(rate, 3, 5.0, |_| {}));
    assert!(recovered(&without).iter().all(|r| !r));
    let with = run(&retrying(rate, 3, 5.0, |s| {
        s["app"] = json!({"wait_timeout": 0.8 * TAU});
        s["fleet"]["slots"] = json!(1);
    }));
    let verdicts = recovered(&with);
    assert!(verdicts.iter().all(|&r| r), "{verdicts:?}");
    for r in &with.per_replication {
        assert!(r.error_counts.wait_timeout.unwrap() > 0, "nothing dropped");
    }
}

/// The engine waits the configured backoff before each retry. An app outage refuses every
/// try from just after the warm-up to the run's end, so a request's answer (its error) comes
/// after its three backoffs (4 tries, exponential from 0.5 s, doubling): 3.5 s exactly with
/// no jitter; with full jitter, U(0, 0.5) + U(0, 1) + U(0, 2), of mean 1.75 s. (A request sent
/// in the last 3.5 s has its later tries after the outage: 0.1% of them, an error in the mean
/// below 0.002 s.)
#[test]
fn retries_wait_their_backoff() {
    let outage = |jitter: &str| {
        json!({
            "name": "backoff",
            "arrivals": {
                "process": "poisson", "rate": 10.0,
                "retry": {"attempts": 4, "backoff": "exponential", "base": 0.5, "multiplier": 2,
                          "cap": 60.0, "jitter": jitter, "on": ["5xx"]},
            },
            "service": {"distribution": "exponential", "mean": 0.001},
            "fleet": {"dynos": 2},
            "faults": [{"at": 0.002, "for": 2999.998, "kind": "outage"}],
            "run": {"duration": 3000.0, "warmup": 0.001, "replications": 20, "seed": 5},
        })
    };
    let exact = run(&outage("none"));
    for r in &exact.per_replication {
        assert!(
            (r.response.p50 - 3.5).abs() < 0.01,
            "median answer {}",
            r.response.p50
        );
        // A try may have waited a few ms behind a request in service as the outage began.
        assert!(r.response.max < 3.51, "longest answer {}", r.response.max);
        assert_eq!(
            r.retries.as_ref().unwrap().attempts_per_request.round(),
            4.0
        );
    }
    let jittered = run(&outage("full"));
    assert_matches(
        "mean answer under full jitter",
        figure(&jittered, |r| r.response.mean),
        1.75,
        0.02,
    );
}

/// A resource's outage that refuses fails the requests that reach it then (errors.outage,
/// answered by the app at once) and no other; one that hangs holds them to its end, with
/// their connections, and fails none.
#[test]
fn a_resource_outage_refuses_or_holds_the_uses_that_begin_in_it() {
    let scenario = |mode: &str| {
        json!({
            "name": "db-outage",
            "arrivals": {"process": "poisson", "rate": 20.0},
            "request": {"phases": [{"io": 0.01}, {"use": "db", "time": 0.005}]},
            "resources": {"db": {"servers": 4, "pool": {"size": 10, "per": "app"}}},
            "app": {"processes": 4, "threads": 5},
            "fleet": {"dynos": 2},
            "faults": [{"at": 100.0, "for": 10.0, "kind": "outage", "target": "db", "mode": mode}],
            "run": {"duration": 700.0, "warmup": 10.0, "replications": 5, "seed": 3},
        })
    };
    let refused = run(&scenario("refuse"));
    for r in &refused.per_replication {
        // About λ × 10 s of them: those whose query began in the window.
        let n = r.error_counts.outage.unwrap() as f64;
        assert!((n - 200.0).abs() < 5.0 * 200f64.sqrt(), "refused {n}");
        assert_eq!(r.error_counts.total as f64, n);
        assert_eq!(r.stability.as_ref().unwrap().recovered, 1.0);
    }
    let held = run(&scenario("hang"));
    for r in &held.per_replication {
        assert_eq!(r.error_counts.outage, Some(0));
        assert_eq!(r.error_counts.total, 0);
        // Held up to 10 s: the longest answer is the outage's length at most, and about it.
        assert!(
            r.response.max > 9.0 && r.response.max < 10.1,
            "{}",
            r.response.max
        );
    }
}

/// `dynos_lost`: the dynos crash (what they hold fails, errors.crashed) and are up again
/// after their boot time; a fleet with room to spare comes back at once.
#[test]
fn lost_dynos_fail_what_they_hold_and_boot_again() {
    let s = json!({
        "name": "lost",
        "arrivals": {"process": "poisson", "rate": 50.0},
        "service": {"distribution": "exponential", "mean": 0.1},
        "fleet": {"dynos": 10, "boot_time": 20.0},
        "faults": [{"at": 100.0, "kind": "dynos_lost", "count": 4}],
        "run": {"duration": 700.0, "warmup": 10.0, "replications": 5, "seed": 8},
    });
    let report = run(&s);
    for r in &report.per_replication {
        let crashed = r.error_counts.crashed.unwrap();
        // At most what 4 of 10 dynos held (each busy half the time): a few requests.
        assert!(crashed <= 20, "crashed {crashed}");
        assert_eq!(r.stability.as_ref().unwrap().recovered, 1.0);
    }
    assert!(report
        .per_replication
        .iter()
        .any(|r| r.error_counts.crashed.unwrap() > 0));
}

/// A scenario without the feedback keys writes none of their figures (the JSON of every
/// built-in is unchanged: docs/feedback.md); with them, the error table gains only the kinds
/// the scenario can have.
#[test]
fn figures_appear_only_with_their_features() {
    let plain = run(&json!({
        "name": "plain",
        "arrivals": {"process": "poisson", "rate": 5.0},
        "service": {"distribution": "exponential", "mean": 0.1},
        "fleet": {"dynos": 1},
        "run": {"duration": 100.0, "warmup": 1.0, "replications": 2},
    }));
    let text = serde_json::to_string(&plain.per_replication[0]).unwrap();
    for key in [
        "retries",
        "stability",
        "outage",
        "crashed",
        "wait_timeout",
        "service_timeout",
    ] {
        assert!(!text.contains(&format!("\"{key}\"")), "{key} in {text}");
    }
    let with = run(&retrying(300.0, 3, 1.0, |_| {}));
    let text = serde_json::to_string(&with.per_replication[0]).unwrap();
    assert!(text.contains("\"retries\"") && text.contains("\"stability\""));
    assert!(!text.contains("\"outage\"") && !text.contains("\"crashed\""));
}

/// A trace's `tries` counts every try sent, first tries and retries (the time series'
/// `offered`): with no warm-up every request is in the window, so once every retry has been
/// sent (frames past the run's last event) the last frame's tries are the run's
/// `retries.attempts` and its retries `retries.count`, exactly; along the way tries never fall
/// behind the arrivals, and during the trigger they outrun them. Without retries they are the
/// arrivals in every frame.
#[test]
fn a_trace_counts_every_try_sent() {
    let mut s = retrying(400.0, 3, 5.0, |_| {});
    s["faults"][0]["at"] = json!(20.0);
    s["run"]["warmup"] = json!(0.0);
    s["run"]["duration"] = json!(60.0);
    let scenario = build(&s.to_string());
    let (result, trace) =
        dynosim_engine::trace_replication(&scenario, 0, 1.0, 600.0, false, &never_interrupted)
            .unwrap();
    let retries = result.retries.as_ref().expect("retry figures");
    let last = trace.frames.last().unwrap();
    assert_eq!(last.tries, retries.attempts);
    assert_eq!(last.tries - last.arrived, retries.count);
    assert!(retries.count > 0, "no retry was sent");
    for pair in trace.frames.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(b.tries - a.tries >= b.arrived - a.arrived, "at {}", b.time);
    }
    // In the trigger's second half (20–25 s, the app 5× slower), the tries sent outrun the
    // arrivals: timeouts come back as retries.
    let at = |t: f64| trace.frames.iter().find(|f| f.time >= t).unwrap();
    let (from, to) = (at(22.0), at(25.0));
    assert!(
        to.tries - from.tries > to.arrived - from.arrived,
        "tries {} arrivals {}",
        to.tries - from.tries,
        to.arrived - from.arrived
    );

    s["arrivals"]
        .as_object_mut()
        .unwrap()
        .remove("retry")
        .unwrap();
    let plain = build(&s.to_string());
    let (_, trace) =
        dynosim_engine::trace_replication(&plain, 0, 1.0, 600.0, false, &never_interrupted)
            .unwrap();
    assert!(trace.frames.iter().all(|f| f.tries == f.arrived));
    assert!(trace.frames.last().unwrap().arrived > 0);

    // The routers' retries on another dyno after a timeout are tries too: work of mean 1 s on
    // slots enough for all, the router's timeout at 2 s, 2 retries.
    let routed = build(
        &json!({
            "name": "router-retries",
            "arrivals": {"process": "poisson", "rate": 20.0},
            "service": {"distribution": "exponential", "mean": 1.0},
            "fleet": {"dynos": 4, "slots": 1000},
            "router": {"timeout": 2.0, "retry_on": ["refused", "timeout"], "retries": 2},
            "run": {"duration": 60.0, "warmup": 0.0, "replications": 1, "seed": 5},
        })
        .to_string(),
    );
    let (result, trace) =
        dynosim_engine::trace_replication(&routed, 0, 1.0, 600.0, false, &never_interrupted)
            .unwrap();
    let retries = result.retries.as_ref().expect("retry figures");
    let last = trace.frames.last().unwrap();
    assert!(retries.router > 0 && retries.client == 0);
    assert_eq!(last.tries, retries.attempts);
    assert_eq!(last.tries - last.arrived, retries.router);
}
